//! apt repositories: a suite's `Release` and `Packages` indices, and the dependency closure of
//! the packages an add-on asks for.
//!
//! The closure follows `Pre-Depends` and `Depends` (not `Recommends`, as `apt-get install
//! --no-install-recommends`), with version constraints, alternatives (the first that can be
//! satisfied, as apt prefers), virtual packages (`Provides`, versioned or not) and `Conflicts`/
//! `Breaks`. Packages every host of the distro already has (`Essential: yes`, `Priority:
//! required`) are left out; a dependency on them is taken as met.

use std::collections::HashMap;
use std::str::FromStr;

use debversion::Version;

use super::control::{self, ControlError, Paragraph};
mod relation;
mod solver;

pub use relation::{Alternatives, Relation, parse_relations};
pub use solver::AptIndex;

/// One binary package of an index.
#[derive(Debug, Clone)]
pub struct AptPackage {
    pub name: String,
    pub version: Version,
    pub architecture: String,
    pub essential: bool,
    pub priority: String,
    pub depends: Vec<Alternatives>,
    pub conflicts: Vec<Relation>,
    pub provides: Vec<(String, Option<Version>)>,
    /// Path of the .deb relative to the mirror's root.
    pub filename: String,
    pub size: u64,
    pub sha256: String,
    /// The paragraph as the index has it, for the package's own index.
    pub paragraph: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AptError {
    #[error("{origin}: {source}")]
    Control {
        origin: String,
        #[source]
        source: ControlError,
    },
    #[error("{origin}: package `{package}`: {problem}")]
    BadPackage {
        origin: String,
        package: String,
        problem: String,
    },
}

fn read_package(origin: &str, paragraph: Paragraph<'_>) -> Result<AptPackage, AptError> {
    let name = paragraph.get("Package").unwrap_or_default().to_string();
    let bad = |problem: String| AptError::BadPackage {
        origin: origin.to_string(),
        package: name.clone(),
        problem,
    };
    if name.is_empty() {
        return Err(bad("no Package field".into()));
    }
    let field = |key: &str| paragraph.get(key).unwrap_or_default();
    let version = Version::from_str(field("Version"))
        .map_err(|e| bad(format!("Version `{}`: {e}", field("Version"))))?;
    let relations = |key: &str| parse_relations(field(key)).map_err(|e| bad(format!("{key}: {e}")));
    let mut depends = relations("Pre-Depends")?;
    depends.extend(relations("Depends")?);
    let mut conflicts: Vec<Relation> = relations("Conflicts")?.into_iter().flatten().collect();
    conflicts.extend(relations("Breaks")?.into_iter().flatten());
    let provides = relations("Provides")?
        .into_iter()
        .flatten()
        .map(|relation| {
            let version = relation.constraint.map(|(_, version)| version);
            (relation.name, version)
        })
        .collect();
    Ok(AptPackage {
        version,
        architecture: field("Architecture").to_string(),
        essential: field("Essential") == "yes",
        priority: field("Priority").to_string(),
        depends,
        conflicts,
        provides,
        filename: field("Filename").to_string(),
        size: field("Size").parse().unwrap_or(0),
        sha256: field("SHA256").to_string(),
        name: name.clone(),
        paragraph: paragraph.text.to_string(),
    })
}

#[cfg(test)]
mod tests;

/// Where a distro's apt packages come from.
#[derive(Debug, Clone)]
pub struct AptSource {
    /// The mirror's root, e.g. `http://deb.debian.org/debian`.
    pub mirror: String,
    pub suite: String,
    pub components: Vec<String>,
    pub architecture: String,
    /// A keyring to check the InRelease signature with, when present on the build host.
    pub keyring: Option<std::path::PathBuf>,
}

/// The `SHA256` section of a Release file: path → (size, hex digest).
pub fn release_digests(
    origin: &str,
    text: &str,
) -> Result<HashMap<String, (u64, String)>, AptError> {
    let paragraphs = control::parse(text).map_err(|source| AptError::Control {
        origin: origin.to_string(),
        source,
    })?;
    let section = paragraphs
        .first()
        .and_then(|paragraph| paragraph.get("SHA256"))
        .ok_or_else(|| AptError::BadPackage {
            origin: origin.to_string(),
            package: "Release".into(),
            problem: "no SHA256 section".into(),
        })?;
    Ok(section
        .lines()
        .filter_map(|line| {
            let mut columns = line.split_whitespace();
            let digest = columns.next()?;
            let size = columns.next()?.parse().ok()?;
            let path = columns.next()?;
            Some((path.to_string(), (size, digest.to_string())))
        })
        .collect())
}
