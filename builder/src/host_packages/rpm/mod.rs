//! rpm repositories: the packages of a target's repositories and the dependency closure of the
//! packages an add-on asks for.
//!
//! The closure follows `Requires` (not the weak `Recommends`/`Suggests`/`Supplements`/
//! `Enhances`, as `dnf install --setopt=install_weak_deps=False`) against `Provides`, package
//! names and file paths, with epoch:version-release comparison (rpm's own order), rich
//! dependencies (`(a or b)`, `and`, `if`/`else`, `unless`, `with`, `without`), and `Conflicts`/
//! `Obsoletes`. `rpmlib(…)` capabilities are rpm's own and always met. Packages every host of
//! the target already has (the closure of the target's `base` names) are left out, and a
//! dependency on them is taken as met.

mod requirement;
mod solver;
mod version;

pub use requirement::{Capability, Requirement, flags_operator};
pub use solver::RpmIndex;
pub use version::Evr;

use super::Op;

/// One package of a repository's primary metadata.
#[derive(Debug, Clone)]
pub struct RpmPackage {
    pub name: String,
    pub arch: String,
    pub evr: Evr,
    /// The package file's sha256, as the metadata gives it.
    pub sha256: String,
    pub size: u64,
    /// The package file's URL.
    pub url: String,
    pub provides: Vec<Capability>,
    pub requires: Vec<Requirement>,
    pub conflicts: Vec<Capability>,
    pub obsoletes: Vec<Capability>,
    /// The paths the primary metadata lists (those in `/etc` and the `bin` folders).
    pub files: Vec<String>,
    /// The licence and the source package the metadata names (empty where it names none).
    pub license: String,
    pub source_rpm: String,
    /// The `<package>` element as the metadata has it, for the package's own repodata.
    pub xml: String,
}

impl RpmPackage {
    /// The file name the package is shipped under.
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }

    fn shown(&self) -> String {
        format!("{} {}", self.name, self.evr)
    }

    /// What the package provides of `name`, if anything: its version, or none for "any".
    fn provision(&self, name: &str) -> Option<Option<(Op, Evr)>> {
        if self.name == name {
            return Some(Some((Op::Equal, self.evr.clone())));
        }
        self.provides
            .iter()
            .find(|capability| capability.name == name)
            .map(|capability| capability.constraint.clone())
    }

    /// Whether the package meets `wanted` through its name, its provides or its files.
    fn satisfies(&self, wanted: &Capability) -> bool {
        if wanted.name.starts_with('/') && self.files.iter().any(|file| file == &wanted.name) {
            return true;
        }
        self.provision(&wanted.name)
            .is_some_and(|provided| Capability::meets(provided.as_ref(), wanted))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RpmError {
    #[error("{origin}: {problem}")]
    Metadata { origin: String, problem: String },
}

/// Where a target's rpm packages come from.
#[derive(Debug, Clone)]
pub struct RpmSource {
    /// Each repository's root (the folder holding `repodata/`), or a `mirror.list` URL
    /// whose first line names it.
    pub repositories: Vec<String>,
    pub architecture: String,
    /// A keyring to check `repomd.xml.asc` with, when present on the build host.
    pub keyring: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests;
