//! The mirrors file (`berth-build --mirrors FILE`): where a vendor's build fetches what the
//! Manifests name when their upstreams are not to be used, kept in the repository beside the
//! add-ons rather than repeated on every command line. Packages keep the names the Manifests
//! wrote; only where the bytes come from changes.
//!
//! ```yaml
//! registries:                      # image registry → the registry to pull from instead
//!   k8s.gcr.io: mirror.internal:5000
//! assets:                          # URL prefix → the prefix to fetch from instead
//!   https://github.com/: http://mirror.internal/github/
//! ```
//!
//! `--registry-mirror` and `--asset-mirror` add to it and come first. An asset's URL takes
//! the longest prefix that matches.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// Largest mirrors file read: a list of hosts and prefixes, not data.
const MAX_FILE_SIZE: u64 = 1024 * 1024;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorsFile {
    #[serde(default)]
    pub registries: BTreeMap<String, String>,
    #[serde(default)]
    pub assets: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorsError {
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error(
        "{path}: {message}\n  expected `registries:` (REGISTRY: HOST[:PORT]) and `assets:` (URL PREFIX: REPLACEMENT)"
    )]
    Parse { path: String, message: String },
    #[error("{path}: {section} `{from}`: {problem}")]
    Entry {
        path: String,
        section: &'static str,
        from: String,
        problem: &'static str,
    },
}

impl MirrorsFile {
    pub fn load(path: &Path) -> Result<MirrorsFile, MirrorsError> {
        let shown = path.display().to_string();
        let text =
            berth_formats::files::read_to_string_at_most(path, MAX_FILE_SIZE).map_err(|error| {
                MirrorsError::Read {
                    path: shown.clone(),
                    message: error.to_string(),
                }
            })?;
        let file: MirrorsFile =
            serde_norway::from_str(&text).map_err(|error| MirrorsError::Parse {
                path: shown.clone(),
                message: error.to_string(),
            })?;
        for (section, entries) in [("registries", &file.registries), ("assets", &file.assets)] {
            for (from, to) in entries {
                let problem = if from.is_empty() || to.is_empty() {
                    Some("an empty name or replacement")
                } else if section == "registries" && (from.contains('/') || to.contains("://")) {
                    Some("a registry is a host[:port], with no scheme or path")
                } else if section == "assets"
                    && !(to.starts_with("http://") || to.starts_with("https://"))
                {
                    Some("the replacement is not an http:// or https:// URL prefix")
                } else {
                    None
                };
                if let Some(problem) = problem {
                    return Err(MirrorsError::Entry {
                        path: shown,
                        section,
                        from: from.clone(),
                        problem,
                    });
                }
            }
        }
        Ok(file)
    }
}

/// The asset mirrors in the order [`crate::fetch::asset::mirrored`] tries them: the longest
/// prefix first, so that a specific mapping wins over a general one whatever their order.
pub fn by_longest_prefix(mut mirrors: Vec<(String, String)>) -> Vec<(String, String)> {
    mirrors.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    mirrors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<MirrorsFile, MirrorsError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mirrors.yaml");
        fs_err::write(&path, text).unwrap();
        MirrorsFile::load(&path)
    }

    #[test]
    fn reads_registries_and_assets() {
        let file = load(
            "registries:\n  k8s.gcr.io: 127.0.0.1:5000\nassets:\n  https://github.com/: http://127.0.0.1:8080/github/\n",
        )
        .unwrap();
        assert_eq!(file.registries["k8s.gcr.io"], "127.0.0.1:5000");
        assert_eq!(
            file.assets["https://github.com/"],
            "http://127.0.0.1:8080/github/"
        );
    }

    #[test]
    fn refuses_what_cannot_be_a_mirror_naming_it() {
        for (text, expected) in [
            (
                "registries:\n  k8s.gcr.io: http://mirror/\n",
                "registries `k8s.gcr.io`",
            ),
            (
                "assets:\n  https://github.com/: /srv/mirror\n",
                "assets `https://github.com/`",
            ),
            ("mirrors:\n  a: b\n", "unknown field `mirrors`"),
        ] {
            let error = load(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn the_longest_prefix_is_tried_first() {
        let ordered = by_longest_prefix(vec![
            ("https://github.com/".into(), "http://a/".into()),
            (
                "https://github.com/kubernetes-sigs/".into(),
                "http://b/".into(),
            ),
        ]);
        assert_eq!(ordered[0].1, "http://b/");
    }
}
