//! Host packages for the Manifest's `apt` and `yum` directives: dependency closures resolved
//! natively from a distro's repository indices, on any build host, with no container per
//! distro, and shipped as a local repository per target distro (`<distro>/archives/` holding
//! the `.deb` files and their `Packages` index, or the `.rpm` files and their `repodata/`), so
//! the node installs them through apt, dnf or yum itself.
//!
//! [`distros`] names the targets; [`fetch`] brings indices and packages into the cache, each
//! checked; [`control`] reads deb822 and [`apt`] computes apt closures; [`repodata`] reads and
//! writes rpm metadata and [`rpm`] computes rpm closures.

pub mod apt;
pub mod control;
pub mod distros;
pub mod fetch;
pub mod repodata;
pub mod rpm;

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::manifest::HostPackageDirective;

use distros::{Distro, Format};
use fetch::{FetchError, Fetcher};

/// A version constraint's operator, as both package formats use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Less,
    LessOrEqual,
    Equal,
    GreaterOrEqual,
    Greater,
}

impl Op {
    /// Whether a version ordered `ordering` against the wanted one satisfies the constraint.
    pub fn admits(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering;
        match self {
            Op::Less => ordering == Ordering::Less,
            Op::LessOrEqual => ordering != Ordering::Greater,
            Op::Equal => ordering == Ordering::Equal,
            Op::GreaterOrEqual => ordering != Ordering::Less,
            Op::Greater => ordering == Ordering::Greater,
        }
    }
}

/// Names among `candidates` close to `name`, for a typo: the three closest.
fn similar_names<'a>(name: &str, candidates: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut scored: Vec<(f64, &String)> = candidates
        .map(|candidate| (strsim::jaro_winkler(name, candidate), candidate))
        .filter(|(score, _)| *score > 0.85)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, name)| name.clone())
        .collect()
}

/// `; did you mean a, b?`, or nothing when there is no near name.
fn did_you_mean(near: &[String]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", near.join(", "))
    }
}

/// Why a closure cannot be resolved, for either package format.
#[derive(Debug, thiserror::Error)]
pub enum ClosureError {
    #[error("{distro} has no package `{name}`{}", did_you_mean(near))]
    Unknown {
        distro: String,
        name: String,
        near: Vec<String>,
    },
    #[error("{distro}: cannot satisfy {}: {why}", chain.join(" → "))]
    Unsatisfiable {
        distro: String,
        chain: Vec<String>,
        why: String,
    },
}

/// One package file (`.deb` or `.rpm`) of a target's local repository.
#[derive(Debug, Clone)]
pub struct ArchiveFile {
    pub file_name: String,
    /// Where it is in the cache.
    pub path: PathBuf,
    pub digest: Sha256Digest,
    pub size: u64,
}

/// One target distro's part of a package: a local repository in `<distro>/archives/`.
#[derive(Debug, Clone)]
pub struct DistroArchives {
    pub distro: String,
    /// The package files.
    pub files: Vec<ArchiveFile>,
    /// The repository's metadata beside them, by path relative to `archives/`: apt's
    /// `Packages` (naming each .deb as `./<file name>`), or rpm's `repodata/`.
    pub metadata: Vec<(String, Vec<u8>)>,
    /// Packages the node's own repositories provide (`apt24`, `apt26`): names only, for
    /// `<distro>/Deps`.
    pub deps: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostPackageError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Apt(#[from] apt::AptError),
    #[error(transparent)]
    Rpm(#[from] rpm::RpmError),
    #[error(transparent)]
    Closure(#[from] ClosureError),
    #[error("{manifest}:{line}: `{directive}`")]
    Directive {
        manifest: PathBuf,
        line: usize,
        directive: String,
        #[source]
        source: ClosureError,
    },
}

/// A package a Manifest line asks for on a target.
struct Wanted {
    line: usize,
    directive: String,
    package: String,
}

/// A closure error, pinned on the Manifest line that asked for the package it starts from.
fn at_directive(manifest: &Path, wanted: &[Wanted], error: ClosureError) -> HostPackageError {
    let root = match &error {
        ClosureError::Unknown { name, .. } => Some(name),
        ClosureError::Unsatisfiable { chain, .. } => chain.first(),
    };
    match root.and_then(|root| wanted.iter().find(|wanted| &wanted.package == root)) {
        Some(wanted) => HostPackageError::Directive {
            manifest: manifest.to_path_buf(),
            line: wanted.line,
            directive: wanted.directive.clone(),
            source: error,
        },
        None => HostPackageError::Closure(error),
    }
}

/// The archives each target distro needs for the Manifest's host package directives.
/// `timestamp` is recorded in generated rpm metadata, so equal inputs give equal bytes.
pub async fn gather(
    fetcher: &Fetcher<'_>,
    manifest: &Path,
    directives: &[(usize, &HostPackageDirective)],
    distros: &[Distro],
    timestamp: u64,
) -> Result<Vec<DistroArchives>, HostPackageError> {
    let mut gathered = Vec::new();
    for distro in distros {
        let mut wanted = Vec::new();
        let mut deps = Vec::new();
        for &(line, directive) in directives {
            if !distro.takes(directive.kind.as_str()) {
                continue;
            }
            if directive.kind.ships_package() {
                wanted.push(Wanted {
                    line,
                    directive: format!("{} {}", directive.kind.as_str(), directive.package),
                    package: directive.package.clone(),
                });
            } else {
                deps.push(directive.package.clone());
            }
        }
        if wanted.is_empty() && deps.is_empty() {
            continue;
        }
        let mut archives = DistroArchives {
            distro: distro.name.clone(),
            files: Vec::new(),
            metadata: Vec::new(),
            deps,
        };
        if !wanted.is_empty() {
            let names: Vec<String> = wanted.iter().map(|w| w.package.clone()).collect();
            let result = match distro.format {
                Format::Deb => gather_debs(fetcher, distro, &names, &mut archives).await,
                Format::Rpm => gather_rpms(fetcher, distro, &names, timestamp, &mut archives).await,
            };
            result.map_err(|error| match error {
                HostPackageError::Closure(error) => at_directive(manifest, &wanted, error),
                other => other,
            })?;
        }
        gathered.push(archives);
    }
    Ok(gathered)
}

async fn gather_debs(
    fetcher: &Fetcher<'_>,
    distro: &Distro,
    wanted: &[String],
    archives: &mut DistroArchives,
) -> Result<(), HostPackageError> {
    let source = distro.apt_source().expect("deb targets have an apt source");
    let index = fetcher.index(&distro.name, &source).await?;
    let closure = index.resolve(&distro.name, wanted, &index.base(&distro.base))?;
    let mut packages_index = String::new();
    for package in closure {
        let path = fetcher.deb(&distro.name, &source, package).await?;
        let file_name = package
            .filename
            .rsplit('/')
            .next()
            .unwrap_or(&package.filename)
            .to_string();
        let digest = Sha256Digest::from_hex(&package.sha256).expect("fetch checked the digest");
        packages_index.push_str(&local_paragraph(&package.paragraph, &file_name));
        packages_index.push('\n');
        archives.files.push(ArchiveFile {
            file_name,
            path,
            digest,
            size: package.size,
        });
    }
    archives
        .metadata
        .push(("Packages".to_string(), packages_index.into_bytes()));
    Ok(())
}

async fn gather_rpms(
    fetcher: &Fetcher<'_>,
    distro: &Distro,
    wanted: &[String],
    timestamp: u64,
    archives: &mut DistroArchives,
) -> Result<(), HostPackageError> {
    let source = distro.rpm_source().expect("rpm targets have an rpm source");
    let index = fetcher.rpm_index(&distro.name, &source).await?;
    let closure = index.resolve(&distro.name, wanted, &index.base(&distro.base))?;
    for package in &closure {
        let path = fetcher.rpm(&distro.name, package).await?;
        archives.files.push(ArchiveFile {
            file_name: package.file_name().to_string(),
            path,
            digest: Sha256Digest::from_hex(&package.sha256).expect("fetch checked the digest"),
            size: package.size,
        });
    }
    archives.metadata = repodata::write(&closure, timestamp);
    Ok(())
}

/// The index paragraph with `Filename` pointing into the folder itself.
fn local_paragraph(paragraph: &str, file_name: &str) -> String {
    let mut text = String::new();
    for line in paragraph.lines() {
        if line.starts_with("Filename:") {
            text.push_str(&format!("Filename: ./{file_name}\n"));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}
