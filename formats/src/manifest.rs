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
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use oci_spec::distribution::Reference;
use url::Url;

use crate::digest::Sha256Digest;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
    pub const ALL: [DirectiveKind; 11] = [
        Self::Image,
        Self::Asset,
        Self::Apt,
        Self::Apt24,
        Self::Apt26,
        Self::Yum,
        Self::Yum8,
        Self::Yum9,
        Self::Yum2023,
        Self::YumOl,
        Self::DockerOut,
    ];

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

    /// Whether the directive names a host package (as opposed to an image, asset or build).
    pub fn is_host_package(self) -> bool {
        !matches!(self, Self::Image | Self::Asset | Self::DockerOut)
    }

    /// `apt24` and `apt26` only list dependencies checked on the host; they ship nothing.
    pub fn ships_package(self) -> bool {
        self.is_host_package() && !matches!(self, Self::Apt24 | Self::Apt26)
    }
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
            .into_iter()
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

/// One problem on one line of a Manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestError {
    pub path: PathBuf,
    pub line: usize,
    pub problem: Problem,
}

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("unknown directive `{keyword}`")]
    UnknownDirective {
        keyword: String,
        suggestion: Option<&'static str>,
    },
    #[error("`{kind}` is missing its {missing}")]
    MissingArgument {
        kind: DirectiveKind,
        missing: &'static str,
    },
    #[error("`{kind}` takes at most {max} argument(s); `{extra}` is one too many")]
    ExtraArgument {
        kind: DirectiveKind,
        max: usize,
        extra: String,
    },
    #[error("bad image reference `{reference}`: {reason}")]
    BadReference { reference: String, reason: String },
    #[error("bad name `{name}`: {reason}")]
    BadName { name: String, reason: &'static str },
    #[error("bad URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("bad pin `{pin}`: expected `sha256:` followed by 64 hexadecimal digits")]
    BadPin { pin: String },
    #[error("bad image flag `{flag}`")]
    BadImageFlag { flag: String },
    #[error("destination `{destination}` leaves the package")]
    BadDestination { destination: String },
    #[error("path `{path}` leaves the add-ons repository")]
    PathOutsideRepository { path: String },
    #[error("`{path}` does not exist (resolved to {resolved})")]
    MissingFile { path: String, resolved: PathBuf },
}

impl Problem {
    /// What the author can do about it.
    pub fn hint(&self) -> String {
        match self {
            Problem::UnknownDirective { suggestion, .. } => {
                let known: Vec<_> = DirectiveKind::ALL.iter().map(|k| k.as_str()).collect();
                match suggestion {
                    Some(close) => format!(
                        "did you mean `{close}`? known directives: {}",
                        known.join(", ")
                    ),
                    None => format!("known directives: {}", known.join(", ")),
                }
            }
            Problem::MissingArgument { kind, .. } | Problem::ExtraArgument { kind, .. } => {
                format!("write it as `{}`", usage(*kind))
            }
            Problem::BadReference { .. } => {
                "write a registry reference such as `registry.example.com/team/app:1.2` \
                 or `app@sha256:<hex>`, or a path to an image archive ending in `.tar`"
                    .to_string()
            }
            Problem::BadName { .. } => {
                "use letters, digits, `.`, `_` and `-` only, with no `/`".to_string()
            }
            Problem::BadUrl { .. } => {
                "use an http:// or https:// URL, or a path relative to the Manifest's folder"
                    .to_string()
            }
            Problem::BadPin { .. } => {
                "copy the digest from `sha256sum FILE` as `sha256:<hex>`".to_string()
            }
            Problem::BadImageFlag { .. } => {
                "the only flag an image takes is `no_remote_load`".to_string()
            }
            Problem::BadDestination { .. } => {
                "write a relative folder without `..`, such as `rhel-9`".to_string()
            }
            Problem::PathOutsideRepository { .. } => {
                "keep every file the add-on uses inside the repository that holds `addons/`"
                    .to_string()
            }
            Problem::MissingFile { .. } => "add the file, or fix the path".to_string(),
        }
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}\n  hint: {}",
            self.path.display(),
            self.line,
            self.problem,
            self.problem.hint()
        )
    }
}

impl std::error::Error for ManifestError {}

/// Every problem found in one Manifest (never empty).
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}

/// Reading a Manifest from disk failed before parsing.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("failed to read Manifest")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(#[from] ManifestErrors),
}

fn usage(kind: DirectiveKind) -> &'static str {
    match kind {
        DirectiveKind::Image => "image <name> <reference or path/to/image.tar> [no_remote_load]",
        DirectiveKind::Asset => "asset <file> <https://url or relative/path> [sha256:<hex>]",
        DirectiveKind::DockerOut => "dockerout <destination> <path/to/Dockerfile> [<version>]",
        DirectiveKind::Apt => "apt <package>",
        DirectiveKind::Apt24 => "apt24 <package>",
        DirectiveKind::Apt26 => "apt26 <package>",
        DirectiveKind::Yum => "yum <package>",
        DirectiveKind::Yum8 => "yum8 <package>",
        DirectiveKind::Yum9 => "yum9 <package>",
        DirectiveKind::Yum2023 => "yum2023 <package>",
        DirectiveKind::YumOl => "yumol <package>",
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
            _ => return None,
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

/// Joins `relative` onto `base` lexically and returns it only if it stays inside `root`.
pub fn resolve_inside(base: &Path, relative: &str, root: &Path) -> Option<PathBuf> {
    let relative = Path::new(relative);
    if relative.is_absolute() {
        return None;
    }
    // Compare absolute forms, so a relative Manifest path and an absolute root still agree.
    let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = normalize(&absolute(root));
    let joined = normalize(&absolute(&base.join(relative)));
    joined.starts_with(&root).then_some(joined)
}

/// Removes `.` and folds `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Splits a line into words: any run of spaces or tabs separates, a trailing `\r` is dropped,
/// and a word starting with `#` begins a comment that runs to the end of the line.
fn words(line: &str) -> Vec<&str> {
    line.split([' ', '\t', '\r'])
        .filter(|word| !word.is_empty())
        .take_while(|word| !word.starts_with('#'))
        .collect()
}

fn parse_directive(keyword: &str, arguments: &[&str]) -> Result<Directive, Problem> {
    let Ok(kind) = keyword.parse::<DirectiveKind>() else {
        let suggestion = DirectiveKind::ALL
            .iter()
            .map(|kind| kind.as_str())
            .filter(|known| strsim::levenshtein(&keyword.to_ascii_lowercase(), known) <= 2)
            .min_by_key(|known| strsim::levenshtein(&keyword.to_ascii_lowercase(), known));
        return Err(Problem::UnknownDirective {
            keyword: keyword.to_string(),
            suggestion,
        });
    };
    let argument_names: &[&'static str] = match kind {
        DirectiveKind::Image => &["image name", "image reference", "flag"],
        DirectiveKind::Asset => &["file name", "URL or path", "sha256 pin"],
        DirectiveKind::DockerOut => &["destination folder", "Dockerfile path", "version"],
        _ => &["package name"],
    };
    let required = match kind {
        DirectiveKind::Image | DirectiveKind::Asset | DirectiveKind::DockerOut => 2,
        _ => 1,
    };
    if arguments.len() < required {
        return Err(Problem::MissingArgument {
            kind,
            missing: argument_names[arguments.len()],
        });
    }
    if arguments.len() > argument_names.len() {
        return Err(Problem::ExtraArgument {
            kind,
            max: argument_names.len(),
            extra: arguments[argument_names.len()].to_string(),
        });
    }
    let optional = arguments.get(required).copied();
    match kind {
        DirectiveKind::Image => parse_image(arguments[0], arguments[1], optional),
        DirectiveKind::Asset => parse_asset(arguments[0], arguments[1], optional),
        DirectiveKind::DockerOut => {
            check_destination(arguments[0])?;
            Ok(Directive::DockerOut(DockerOutDirective {
                destination: arguments[0].to_string(),
                dockerfile: arguments[1].to_string(),
                version: optional.map(str::to_string),
            }))
        }
        _ => Ok(Directive::HostPackage(HostPackageDirective {
            kind,
            package: arguments[0].to_string(),
        })),
    }
}

fn parse_image(name: &str, source: &str, flag: Option<&str>) -> Result<Directive, Problem> {
    check_name(name)?;
    let no_remote_load = match flag {
        None => false,
        Some("no_remote_load") => true,
        Some(other) => {
            return Err(Problem::BadImageFlag {
                flag: other.to_string(),
            });
        }
    };
    let source = if source.ends_with(".tar") {
        ImageSource::Archive(source.to_string())
    } else {
        let reference = Reference::from_str(source).map_err(|error| Problem::BadReference {
            reference: source.to_string(),
            reason: error.to_string(),
        })?;
        ImageSource::Registry(reference)
    };
    Ok(Directive::Image(ImageDirective {
        name: name.to_string(),
        source,
        no_remote_load,
    }))
}

fn parse_asset(file: &str, source: &str, pin: Option<&str>) -> Result<Directive, Problem> {
    check_name(file)?;
    let source = if source.contains("://") {
        let url = Url::parse(source).map_err(|error| Problem::BadUrl {
            url: source.to_string(),
            reason: error.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Problem::BadUrl {
                url: source.to_string(),
                reason: format!("scheme `{}` is not supported", url.scheme()),
            });
        }
        AssetSource::Url(url)
    } else {
        if Path::new(source).is_absolute() {
            return Err(Problem::PathOutsideRepository {
                path: source.to_string(),
            });
        }
        AssetSource::Path(source.to_string())
    };
    let sha256 = pin
        .map(|pin| {
            pin.parse::<Sha256Digest>().map_err(|_| Problem::BadPin {
                pin: pin.to_string(),
            })
        })
        .transpose()?;
    Ok(Directive::Asset(AssetDirective {
        file: file.to_string(),
        source,
        sha256,
    }))
}

fn check_name(name: &str) -> Result<(), Problem> {
    let reason = if name == "." || name == ".." {
        Some("`.` and `..` are not names")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
    {
        Some("it may hold only letters, digits, `.`, `_`, `+` and `-`")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Problem::BadName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn check_destination(path: &str) -> Result<(), Problem> {
    let escapes = Path::new(path).is_absolute()
        || Path::new(path)
            .components()
            .any(|component| component == Component::ParentDir);
    if escapes {
        Err(Problem::BadDestination {
            destination: path.to_string(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
