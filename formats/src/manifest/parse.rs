//! One Manifest line into its directive: words, references, URLs, pins, names and paths,
//! each checked.

use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use oci_spec::distribution::Reference;
use url::Url;

use super::*;
use crate::digest::Sha256Digest;

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
pub(super) fn words(line: &str) -> Vec<&str> {
    line.split([' ', '\t', '\r'])
        .filter(|word| !word.is_empty())
        .take_while(|word| !word.starts_with('#'))
        .collect()
}

pub(super) fn parse_directive(keyword: &str, arguments: &[&str]) -> Result<Directive, Problem> {
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
    let Syntax {
        class,
        arguments: argument_names,
        required,
        ..
    } = kind.syntax();
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
    match class {
        Class::Image => parse_image(arguments[0], arguments[1], optional),
        Class::Asset => parse_asset(arguments[0], arguments[1], optional),
        Class::DockerOut => {
            check_destination(arguments[0])?;
            Ok(Directive::DockerOut(DockerOutDirective {
                destination: arguments[0].to_string(),
                dockerfile: arguments[1].to_string(),
                version: optional.map(str::to_string),
            }))
        }
        Class::HostPackage { .. } => Ok(Directive::HostPackage(HostPackageDirective {
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
