//! The add-on `Manifest`: one directive per line, as kURL writes it.
//!
//! ```text
//! # comment
//! image  <name> <reference | path/to/image.tar> [no_remote_load]
//! asset  <file> <https://url | relative/path> [sha256:<hex>]
//! apt    <package>        # also apt24, apt26, yum, yum8, yum9, yum2023, yumol
//! dockerout <destination> <path/to/Dockerfile> [<version>]
//! ```
//!
//! Parsing never stops at the first problem: every bad line is reported with the file, the line
//! number, what is wrong and how to fix it, so a vendor's CI shows them all at once.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use oci_spec::distribution::Reference;
use url::Url;

use crate::digest::Sha256Digest;

mod error;
mod parse;

pub use error::{ManifestError, ManifestErrors, Problem, ReadError};
pub use parse::resolve_inside;
use parse::{parse_directive, words};

/// A parsed `Manifest` file.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Where it was read from; errors and relative paths are reported against it.
    pub path: PathBuf,
    /// The directives in file order.
    pub entries: Vec<Entry>,
}

/// One directive and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// 1-based line number.
    pub line: usize,
    pub directive: Directive,
}

/// A Manifest directive as a typed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Directive {
    Image(ImageDirective),
    Asset(AssetDirective),
    HostPackage(HostPackageDirective),
    DockerOut(DockerOutDirective),
}

/// `image <name> <source> [no_remote_load]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageDirective {
    /// The add-on's own name for the image.
    pub name: String,
    pub source: ImageSource,
    /// kURL's flag for images that are loaded only on the node that runs the install.
    pub no_remote_load: bool,
}

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSource {
    /// A registry reference, normalised as docker does (`busybox` is `docker.io/library/busybox:latest`).
    Registry(Reference),
    /// An image archive (docker-archive or oci-archive), relative to the add-ons repository root.
    Archive(String),
}

/// `asset <file> <source> [sha256:<hex>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AssetDirective {
    /// File name under `assets/` in the package.
    pub file: String,
    pub source: AssetSource,
    /// Optional pin, checked after download.
    pub sha256: Option<Sha256Digest>,
}

/// Where an asset comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum AssetSource {
    Url(Url),
    /// A path relative to the Manifest's directory.
    Path(String),
}

/// `apt`, `apt24`, `apt26`, `yum`, `yum8`, `yum9`, `yum2023`, `yumol` with one package name.
#[derive(Debug, Clone, PartialEq)]
pub struct HostPackageDirective {
    pub kind: DirectiveKind,
    pub package: String,
}

/// `dockerout <destination> <Dockerfile> [<version>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerOutDirective {
    /// Folder in the package that receives the container's `/out`.
    pub destination: String,
    /// The Dockerfile, relative to the add-ons repository root.
    pub dockerfile: String,
    /// Passed as `--build-arg VERSION=<version>`.
    pub version: Option<String>,
}

/// The directive keywords, in the order kURL documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, strum::VariantArray)]
pub enum DirectiveKind {
    Image,
    Asset,
    Apt,
    Apt24,
    Apt26,
    Yum,
    Yum8,
    Yum9,
    Yum2023,
    YumOl,
    DockerOut,
}

impl DirectiveKind {
    /// Every keyword, in declaration order: the derive lists them, so a new one is in it.
    pub const ALL: &'static [DirectiveKind] = <Self as strum::VariantArray>::VARIANTS;

    /// The keyword as written in a Manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Asset => "asset",
            Self::Apt => "apt",
            Self::Apt24 => "apt24",
            Self::Apt26 => "apt26",
            Self::Yum => "yum",
            Self::Yum8 => "yum8",
            Self::Yum9 => "yum9",
            Self::Yum2023 => "yum2023",
            Self::YumOl => "yumol",
            Self::DockerOut => "dockerout",
        }
    }

    /// What the keyword is for and the arguments it takes: the one table a new keyword must
    /// fill in (the match has no catch-all, so the compiler asks for its row).
    pub fn syntax(self) -> Syntax {
        let host_package = |ships| Syntax {
            class: Class::HostPackage { ships },
            arguments: &["package name"],
            required: 1,
            usage: "<package>",
        };
        match self {
            Self::Image => Syntax {
                class: Class::Image,
                arguments: &["image name", "image reference", "flag"],
                required: 2,
                usage: "<name> <reference or path/to/image.tar> [no_remote_load]",
            },
            Self::Asset => Syntax {
                class: Class::Asset,
                arguments: &["file name", "URL or path", "sha256 pin"],
                required: 2,
                usage: "<file> <https://url or relative/path> [sha256:<hex>]",
            },
            Self::DockerOut => Syntax {
                class: Class::DockerOut,
                arguments: &["destination folder", "Dockerfile path", "version"],
                required: 2,
                usage: "<destination> <path/to/Dockerfile> [<version>]",
            },
            Self::Apt | Self::Yum | Self::Yum8 | Self::Yum9 | Self::Yum2023 | Self::YumOl => {
                host_package(true)
            }
            // `apt24` and `apt26` only list dependencies checked on the host; they ship nothing.
            Self::Apt24 | Self::Apt26 => host_package(false),
        }
    }

    /// How to write the directive, for messages: `apt <package>`.
    pub fn usage(self) -> String {
        format!("{} {}", self.as_str(), self.syntax().usage)
    }

    /// Whether the host package it names ships in the package (not only checked on the host).
    pub fn ships_package(self) -> bool {
        matches!(self.syntax().class, Class::HostPackage { ships: true })
    }
}

/// A keyword's row in [`DirectiveKind::syntax`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Syntax {
    /// Which [`Directive`] the keyword parses into.
    pub class: Class,
    /// Its arguments' names, in order, for messages.
    pub arguments: &'static [&'static str],
    /// How many of them must be given.
    pub required: usize,
    /// Its arguments as a message shows how to write them.
    pub usage: &'static str,
}

/// The [`Directive`] a keyword parses into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Image,
    Asset,
    /// `ships`: the package is fetched into the add-on package, not only checked on the host.
    HostPackage {
        ships: bool,
    },
    DockerOut,
}

/// A Manifest's directives sorted by what a build does with each, with their line numbers,
/// in file order. [`Manifest::directives`] fills it with one match that has no catch-all, and
/// the builder takes it apart whole: a new directive fails to compile until both decide.
#[derive(Debug, Default)]
pub struct Directives<'a> {
    pub images: Vec<(usize, &'a ImageDirective)>,
    pub assets: Vec<(usize, &'a AssetDirective)>,
    pub host_packages: Vec<(usize, &'a HostPackageDirective)>,
    pub builds: Vec<(usize, &'a DockerOutDirective)>,
}

impl fmt::Display for DirectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DirectiveKind {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        Self::ALL
            .iter()
            .copied()
            .find(|kind| kind.as_str() == text)
            .ok_or(())
    }
}

impl Directive {
    pub fn kind(&self) -> DirectiveKind {
        match self {
            Directive::Image(_) => DirectiveKind::Image,
            Directive::Asset(_) => DirectiveKind::Asset,
            Directive::HostPackage(package) => package.kind,
            Directive::DockerOut(_) => DirectiveKind::DockerOut,
        }
    }
}

impl Manifest {
    /// Reads and parses the Manifest at `path`.
    pub fn read(path: &Path) -> Result<Manifest, ReadError> {
        let text = fs_err::read_to_string(path)?;
        Ok(Manifest::parse(path, &text)?)
    }

    /// Parses Manifest text; `path` is used for error messages and relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, ManifestErrors> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut entries = Vec::new();
        let mut errors = Vec::new();
        for (index, raw) in text.split('\n').enumerate() {
            let line = index + 1;
            let words = words(raw);
            let Some((keyword, arguments)) = words.split_first() else {
                continue;
            };
            match parse_directive(keyword, arguments) {
                Ok(directive) => entries.push(Entry { line, directive }),
                Err(problem) => errors.push(ManifestError {
                    path: path.to_path_buf(),
                    line,
                    problem,
                }),
            }
        }
        if errors.is_empty() {
            Ok(Manifest {
                path: path.to_path_buf(),
                entries,
            })
        } else {
            Err(ManifestErrors(errors))
        }
    }

    /// The directives sorted by what a build does with each.
    pub fn directives(&self) -> Directives<'_> {
        let mut sorted = Directives::default();
        for entry in &self.entries {
            let line = entry.line;
            match &entry.directive {
                Directive::Image(image) => sorted.images.push((line, image)),
                Directive::Asset(asset) => sorted.assets.push((line, asset)),
                Directive::HostPackage(package) => sorted.host_packages.push((line, package)),
                Directive::DockerOut(build) => sorted.builds.push((line, build)),
            }
        }
        sorted
    }

    /// The folder holding the Manifest, against which asset paths resolve.
    pub fn directory(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Resolves every local path (asset files, image archives, Dockerfiles) against
    /// `repository_root` as kURL does, and reports those that leave it or do not exist.
    pub fn check_paths(&self, repository_root: &Path) -> Result<(), ManifestErrors> {
        let errors: Vec<_> = self
            .entries
            .iter()
            .filter_map(|entry| {
                self.local_path(entry, repository_root)
                    .and_then(|result| result.err())
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ManifestErrors(errors))
        }
    }

    /// The local file an entry reads, resolved and checked; `None` for entries that read none.
    pub fn local_path(
        &self,
        entry: &Entry,
        repository_root: &Path,
    ) -> Option<Result<PathBuf, ManifestError>> {
        let (base, relative) = match &entry.directive {
            Directive::Asset(AssetDirective {
                source: AssetSource::Path(path),
                ..
            }) => (self.directory().to_path_buf(), path),
            Directive::Image(ImageDirective {
                source: ImageSource::Archive(path),
                ..
            }) => (repository_root.to_path_buf(), path),
            Directive::DockerOut(build) => (repository_root.to_path_buf(), &build.dockerfile),
            // Fetched by name or URL: nothing local to resolve.
            Directive::Image(ImageDirective {
                source: ImageSource::Registry(_),
                ..
            })
            | Directive::Asset(AssetDirective {
                source: AssetSource::Url(_),
                ..
            })
            | Directive::HostPackage(_) => return None,
        };
        let error = |problem| ManifestError {
            path: self.path.clone(),
            line: entry.line,
            problem,
        };
        Some(match resolve_inside(&base, relative, repository_root) {
            None => Err(error(Problem::PathOutsideRepository {
                path: relative.clone(),
            })),
            Some(resolved) if !resolved.is_file() => Err(error(Problem::MissingFile {
                path: relative.clone(),
                resolved,
            })),
            Some(resolved) => Ok(resolved),
        })
    }
}

#[cfg(test)]
mod tests;
