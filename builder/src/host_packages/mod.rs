//! Host packages for the Manifest's `apt` directives: dependency closures resolved natively
//! from a distro's repository indices, on any build host, with no container per distro, and
//! shipped as a local apt repository per target distro (`<distro>/archives/` holding the
//! `.deb` files and their `Packages` index), so the node installs them through apt itself.
//!
//! [`distros`] names the targets; [`fetch`] brings indices and packages into the cache, each
//! checked; [`control`] reads deb822; [`apt`] computes the closure.

pub mod apt;
pub mod control;
pub mod distros;
pub mod fetch;

use std::path::PathBuf;

use berth_formats::Sha256Digest;
use berth_formats::manifest::{Directive, Manifest};

use distros::{Distro, Format};
use fetch::{FetchError, Fetcher};

/// One target distro's part of a package.
#[derive(Debug, Clone)]
pub struct DistroArchives {
    pub distro: String,
    /// `(file name, path in the cache, sha256, size)` of each .deb.
    pub debs: Vec<(String, PathBuf, Sha256Digest, u64)>,
    /// The `Packages` index of `archives/`, naming each .deb as `./<file name>`.
    pub index: String,
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
    #[error(
        "{distro}: `{directive}` packages need rpm resolution, which Berth does not do yet\nhint: limit the build with --distro to the deb targets"
    )]
    RpmNotSupported { distro: String, directive: String },
}

/// The archives each target distro needs for the Manifest's host package directives.
pub async fn gather(
    fetcher: &Fetcher<'_>,
    manifest: &Manifest,
    distros: &[Distro],
) -> Result<Vec<DistroArchives>, HostPackageError> {
    let mut gathered = Vec::new();
    for distro in distros {
        let mut wanted = Vec::new();
        let mut deps = Vec::new();
        for entry in &manifest.entries {
            let Directive::HostPackage(directive) = &entry.directive else {
                continue;
            };
            if !distro.takes(directive.kind.as_str()) {
                continue;
            }
            if !directive.kind.ships_package() {
                deps.push(directive.package.clone());
            } else if distro.format == Format::Rpm {
                return Err(HostPackageError::RpmNotSupported {
                    distro: distro.name.clone(),
                    directive: directive.kind.to_string(),
                });
            } else {
                wanted.push(directive.package.clone());
            }
        }
        if wanted.is_empty() && deps.is_empty() {
            continue;
        }
        let mut archives = DistroArchives {
            distro: distro.name.clone(),
            debs: Vec::new(),
            index: String::new(),
            deps,
        };
        if wanted.is_empty() {
            gathered.push(archives);
            continue;
        }
        let source = distro.apt_source().expect("deb targets have an apt source");
        let index = fetcher.index(&distro.name, &source).await?;
        let closure = index.resolve(&distro.name, &wanted, &index.base())?;
        for package in closure {
            let path = fetcher.deb(&distro.name, &source, package).await?;
            let file_name = package
                .filename
                .rsplit('/')
                .next()
                .unwrap_or(&package.filename)
                .to_string();
            let digest = Sha256Digest::from_hex(&package.sha256).expect("fetch checked the digest");
            archives
                .index
                .push_str(&local_paragraph(&package.paragraph, &file_name));
            archives.index.push('\n');
            archives.debs.push((file_name, path, digest, package.size));
        }
        gathered.push(archives);
    }
    Ok(gathered)
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
