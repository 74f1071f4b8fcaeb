//! The target distros of host packages: a checked-in YAML file (`builder/distros.yaml` is the
//! default, carried in the binary) naming each target's format, mirrors, suite, components,
//! architecture, keyring and the Manifest directives that feed it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::apt::AptSource;
use super::rpm::RpmSource;

/// The default targets.
pub const DEFAULT: &str = include_str!("../../distros.yaml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistrosFile {
    pub distros: Vec<Distro>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Deb,
    Rpm,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distro {
    pub name: String,
    pub format: Format,
    pub mirrors: Vec<String>,
    /// apt: the suite (`bookworm`).
    #[serde(default)]
    pub suite: Option<String>,
    /// rpm: the release (`9`).
    #[serde(default)]
    pub release: Option<String>,
    #[serde(default)]
    pub components: Vec<String>,
    pub architecture: String,
    #[serde(default)]
    pub keyring: Option<PathBuf>,
    /// The Manifest directives whose packages this target ships.
    pub directives: Vec<String>,
    /// Packages every host of the target has: they and all they depend on are left out of
    /// closures, and a dependency on them is taken as met. deb targets also leave out every
    /// `Essential` and `Priority: required` package.
    #[serde(default)]
    pub base: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DistrosError {
    #[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        origin: String,
        line: Option<usize>,
        message: String,
    },
    #[error("no target distro `{name}`; {origin} has: {}", known.join(", "))]
    Unknown {
        name: String,
        origin: String,
        known: Vec<String>,
    },
    #[error("--mirror {text}: expected NAME=URL")]
    BadMirror { text: String },
    #[error("{name} is a target for {format} packages, not {wanted} packages")]
    WrongFormat {
        name: String,
        format: &'static str,
        wanted: &'static str,
    },
}

impl DistrosFile {
    /// `path`, or the default targets.
    pub fn load(path: Option<&Path>) -> Result<Self, DistrosError> {
        match path {
            Some(path) => {
                let text = fs_err::read_to_string(path).map_err(|error| DistrosError::Parse {
                    origin: path.display().to_string(),
                    line: None,
                    message: error.to_string(),
                })?;
                Self::parse(&path.display().to_string(), &text)
            }
            None => Self::parse("builder/distros.yaml (built in)", DEFAULT),
        }
    }

    pub fn parse(origin: &str, text: &str) -> Result<Self, DistrosError> {
        serde_norway::from_str(text).map_err(|error| DistrosError::Parse {
            origin: origin.to_string(),
            line: error.location().map(|location| location.line()),
            message: error.to_string(),
        })
    }

    /// The targets named (all when `names` is empty), with `mirrors` (`NAME=URL`) applied:
    /// a target's first replaces its mirrors, the next add to them.
    pub fn select(
        &self,
        origin: &str,
        names: &[String],
        mirrors: &[String],
    ) -> Result<Vec<Distro>, DistrosError> {
        let known = || self.distros.iter().map(|d| d.name.clone()).collect();
        let mut selected: Vec<Distro> = if names.is_empty() {
            self.distros.clone()
        } else {
            names
                .iter()
                .map(|name| {
                    self.distros
                        .iter()
                        .find(|distro| &distro.name == name)
                        .cloned()
                        .ok_or_else(|| DistrosError::Unknown {
                            name: name.clone(),
                            origin: origin.to_string(),
                            known: known(),
                        })
                })
                .collect::<Result<_, _>>()?
        };
        // The first `--mirror` of a target replaces its mirrors; more add to them.
        let mut replaced = std::collections::BTreeSet::new();
        for text in mirrors {
            let (name, url) = text
                .split_once('=')
                .ok_or_else(|| DistrosError::BadMirror { text: text.clone() })?;
            let distro = selected
                .iter_mut()
                .find(|distro| distro.name == name)
                .ok_or_else(|| DistrosError::Unknown {
                    name: name.to_string(),
                    origin: origin.to_string(),
                    known: known(),
                })?;
            if replaced.insert(name) {
                distro.mirrors.clear();
            }
            distro.mirrors.push(url.to_string());
        }
        Ok(selected)
    }
}

impl Distro {
    /// Whether the Manifest directive `kind` (`apt`, `yum8`, …) feeds this target.
    pub fn takes(&self, directive: &str) -> bool {
        self.directives.iter().any(|taken| taken == directive)
    }

    /// The apt source of a deb target (its first mirror).
    pub fn apt_source(&self) -> Result<AptSource, DistrosError> {
        if self.format != Format::Deb {
            return Err(DistrosError::WrongFormat {
                name: self.name.clone(),
                format: "rpm",
                wanted: "deb",
            });
        }
        Ok(AptSource {
            mirror: self.mirrors.first().cloned().unwrap_or_default(),
            suite: self.suite.clone().unwrap_or_default(),
            components: self.components.clone(),
            architecture: self.architecture.clone(),
            keyring: self.keyring.clone(),
        })
    }

    /// The repositories of an rpm target (each of its mirrors is one repository).
    pub fn rpm_source(&self) -> Result<RpmSource, DistrosError> {
        if self.format != Format::Rpm {
            return Err(DistrosError::WrongFormat {
                name: self.name.clone(),
                format: "deb",
                wanted: "rpm",
            });
        }
        Ok(RpmSource {
            repositories: self.mirrors.clone(),
            architecture: self.architecture.clone(),
            keyring: self.keyring.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_targets_cover_the_supported_distros() {
        let file = DistrosFile::load(None).unwrap();
        let names: Vec<&str> = file.distros.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ubuntu-20.04",
                "ubuntu-22.04",
                "ubuntu-24.04",
                "debian-11",
                "debian-12",
                "rhel-8",
                "rhel-9",
                "amazon-2023",
                "ol-7"
            ]
        );
        let debian = &file.select("default", &["debian-12".into()], &[]).unwrap()[0];
        assert!(debian.takes("apt") && !debian.takes("yum"));
        assert_eq!(debian.apt_source().unwrap().suite, "bookworm");
        let rhel9 = &file.select("default", &["rhel-9".into()], &[]).unwrap()[0];
        assert!(rhel9.takes("yum") && rhel9.takes("yum9") && !rhel9.takes("yum8"));
        assert_eq!(rhel9.rpm_source().unwrap().repositories.len(), 2);
        assert!(rhel9.base.contains(&"dnf".to_string()));
        assert_eq!(
            debian.rpm_source().unwrap_err().to_string(),
            "debian-12 is a target for deb packages, not rpm packages"
        );
    }

    #[test]
    fn mirrors_are_overridden_per_run_and_unknown_names_listed() {
        let file = DistrosFile::load(None).unwrap();
        let selected = file
            .select(
                "default",
                &["debian-12".into()],
                &["debian-12=http://127.0.0.1:8080/debian".into()],
            )
            .unwrap();
        assert_eq!(selected[0].mirrors, ["http://127.0.0.1:8080/debian"]);
        let error = file
            .select("default", &["debian-13".into()], &[])
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("no target distro `debian-13`; default has: ubuntu-20.04"),
            "{error}"
        );
    }
}
