//! What is wrong with a Manifest line, with the hint that fixes it; every bad line of a file
//! is reported at once.

use std::fmt;
use std::path::PathBuf;

use super::DirectiveKind;

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
                format!("write it as `{}`", kind.usage())
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
