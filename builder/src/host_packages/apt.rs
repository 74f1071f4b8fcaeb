//! apt repositories: a suite's `Release` and `Packages` indices, and the dependency closure of
//! the packages an add-on asks for.
//!
//! The closure follows `Pre-Depends` and `Depends` (not `Recommends`, as `apt-get install
//! --no-install-recommends`), with version constraints, alternatives (the first that can be
//! satisfied, as apt prefers), virtual packages (`Provides`, versioned or not) and `Conflicts`/
//! `Breaks`. Packages every host of the distro already has (`Essential: yes`, `Priority:
//! required`) are left out; a dependency on them is taken as met.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::str::FromStr;

use debversion::Version;

use super::control::{self, ControlError, Paragraph};
use super::{ClosureError, Op};

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

/// `a (>= 1) | b`: any one will do.
pub type Alternatives = Vec<Relation>;

/// `name (op version)`, with any `:any`/`:native` qualifier dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct Relation {
    pub name: String,
    pub constraint: Option<(Op, Version)>,
}

/// How Debian writes an operator.
fn debian_operator(op: Op) -> &'static str {
    match op {
        Op::Less => "<<",
        Op::LessOrEqual => "<=",
        Op::Equal => "=",
        Op::GreaterOrEqual => ">=",
        Op::Greater => ">>",
    }
}

impl std::fmt::Display for Relation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.constraint {
            Some((op, version)) => write!(f, "{} ({} {version})", self.name, debian_operator(*op)),
            None => write!(f, "{}", self.name),
        }
    }
}

impl Relation {
    /// Whether `version` of the package this relation names satisfies it.
    fn admits(&self, version: &Version) -> bool {
        self.constraint
            .as_ref()
            .is_none_or(|(op, wanted)| op.admits(version.cmp(wanted)))
    }
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

/// Parses a relation field: `a (>= 1.0) | b, c:any`.
pub fn parse_relations(text: &str) -> Result<Vec<Alternatives>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|clause| !clause.is_empty())
        .map(|clause| clause.split('|').map(parse_relation).collect())
        .collect()
}

fn parse_relation(text: &str) -> Result<Relation, String> {
    let text = text.trim();
    // Architecture lists (`[amd64]`) and build profiles (`<!nocheck>`) follow the version;
    // they matter to source packages only.
    let end = match text.find('(') {
        Some(_) => text.find(')').map_or(text.len(), |close| close + 1),
        None => text.find(['[', '<']).unwrap_or(text.len()),
    };
    let text = text[..end].trim();
    let (name, constraint) = match text.split_once('(') {
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("`{text}`: unclosed parenthesis"))?
                .trim();
            let split = inner
                .find(|c: char| !matches!(c, '<' | '>' | '='))
                .ok_or_else(|| format!("`{text}`: no version"))?;
            let (op, version) = inner.split_at(split);
            let op = match op {
                "<<" | "<" => Op::Less,
                "<=" => Op::LessOrEqual,
                "=" => Op::Equal,
                ">=" => Op::GreaterOrEqual,
                ">>" | ">" => Op::Greater,
                other => return Err(format!("`{text}`: unknown operator `{other}`")),
            };
            let version = Version::from_str(version.trim())
                .map_err(|e| format!("`{text}`: bad version: {e}"))?;
            (name.trim(), Some((op, version)))
        }
        None => (text, None),
    };
    let name = name.split(':').next().unwrap_or(name);
    if name.is_empty() {
        return Err(format!("`{text}`: no package name"));
    }
    Ok(Relation {
        name: name.to_string(),
        constraint,
    })
}

/// The packages of one distro target, for one architecture.
#[derive(Debug, Default)]
pub struct AptIndex {
    /// By name; each name's versions, highest first.
    packages: HashMap<String, Vec<AptPackage>>,
    /// Virtual name → (providing package, its version, the provided version).
    providers: HashMap<String, Vec<(String, Version, Option<Version>)>>,
}

impl AptIndex {
    /// Adds every package of a `Packages` file (named `origin` in errors) for `architecture`
    /// (packages of architecture `all` too).
    pub fn add_packages(
        &mut self,
        origin: &str,
        text: &str,
        architecture: &str,
    ) -> Result<(), AptError> {
        let paragraphs = control::parse(text).map_err(|source| AptError::Control {
            origin: origin.to_string(),
            source,
        })?;
        for paragraph in paragraphs {
            let package = read_package(origin, paragraph)?;
            if package.architecture != architecture && package.architecture != "all" {
                continue;
            }
            for (virtual_name, provided) in &package.provides {
                self.providers
                    .entry(virtual_name.clone())
                    .or_default()
                    .push((
                        package.name.clone(),
                        package.version.clone(),
                        provided.clone(),
                    ));
            }
            self.packages
                .entry(package.name.clone())
                .or_default()
                .push(package);
        }
        for versions in self.packages.values_mut() {
            versions.sort_by(|a, b| b.version.cmp(&a.version));
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.packages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
    }

    /// Names of the packages every host of the distro has: those marked `Essential: yes` or
    /// `Priority: required`, the `extra` names the target adds, and everything they depend on
    /// (what a minimal install holds).
    pub fn base(&self, extra: &[String]) -> BTreeSet<String> {
        let mut roots: Vec<String> = self
            .packages
            .values()
            .filter_map(|versions| versions.first())
            .filter(|package| package.essential || package.priority == "required")
            .map(|package| package.name.clone())
            .collect();
        roots.sort();
        roots.extend(
            extra
                .iter()
                .filter(|name| self.packages.contains_key(*name))
                .cloned(),
        );
        let mut base = BTreeSet::new();
        // One at a time, so a root whose dependencies the index cannot meet costs only itself.
        for root in roots {
            if let Ok(closure) = self.resolve("base", std::slice::from_ref(&root), &base) {
                base.extend(closure.into_iter().map(|package| package.name.clone()));
            }
            base.insert(root);
        }
        base
    }

    /// The closure of `requested` on `distro`, leaving out (and taking as met) `base`.
    /// Returns the packages to ship, by name.
    pub fn resolve(
        &self,
        distro: &str,
        requested: &[String],
        base: &BTreeSet<String>,
    ) -> Result<Vec<&AptPackage>, ClosureError> {
        let mut chosen: BTreeMap<String, &AptPackage> = BTreeMap::new();
        let mut queue: VecDeque<(&AptPackage, Vec<String>)> = VecDeque::new();
        for name in requested {
            let relation = parse_relation(name).map_err(|problem| ClosureError::Unsatisfiable {
                distro: distro.into(),
                chain: vec![name.clone()],
                why: problem,
            })?;
            if !self.packages.contains_key(&relation.name)
                && !self.providers.contains_key(&relation.name)
            {
                return Err(ClosureError::Unknown {
                    distro: distro.into(),
                    name: relation.name.clone(),
                    near: self.near(&relation.name),
                });
            }
            if base.contains(&relation.name) {
                continue;
            }
            let package = self
                .choose(std::slice::from_ref(&relation), &chosen)
                .map_err(|why| ClosureError::Unsatisfiable {
                    distro: distro.into(),
                    chain: vec![relation.to_string()],
                    why,
                })?;
            if let Some(package) = package {
                if chosen.insert(package.name.clone(), package).is_none() {
                    queue.push_back((package, vec![package.name.clone()]));
                }
            }
        }
        while let Some((package, chain)) = queue.pop_front() {
            for alternatives in &package.depends {
                if self.met(alternatives, &chosen, base) {
                    continue;
                }
                let shown = alternatives
                    .iter()
                    .map(Relation::to_string)
                    .collect::<Vec<_>>()
                    .join(" | ");
                let next_chain = || {
                    let mut chain = chain.clone();
                    chain.push(shown.clone());
                    chain
                };
                let dependency = self.choose(alternatives, &chosen).map_err(|why| {
                    ClosureError::Unsatisfiable {
                        distro: distro.into(),
                        chain: next_chain(),
                        why,
                    }
                })?;
                if let Some(dependency) = dependency {
                    chosen.insert(dependency.name.clone(), dependency);
                    let mut chain = chain.clone();
                    chain.push(dependency.name.clone());
                    queue.push_back((dependency, chain));
                }
            }
        }
        Ok(chosen.into_values().collect())
    }

    /// Whether the clause is met by a chosen package or by the base system.
    fn met(
        &self,
        alternatives: &[Relation],
        chosen: &BTreeMap<String, &AptPackage>,
        base: &BTreeSet<String>,
    ) -> bool {
        alternatives.iter().any(|relation| {
            if base.contains(&relation.name) {
                return true;
            }
            if let Some(package) = chosen.get(&relation.name)
                && relation.admits(&package.version)
            {
                return true;
            }
            // A virtual name met by a chosen provider (or a base one).
            self.providers
                .get(&relation.name)
                .into_iter()
                .flatten()
                .any(|(provider, _, provided)| {
                    (chosen.contains_key(provider) || base.contains(provider))
                        && provides_admits(relation, provided.as_ref())
                })
        })
    }

    /// The package that satisfies the first alternative that can be satisfied without a
    /// conflict: a real package (its highest admitted version), else a provider.
    fn choose<'a>(
        &'a self,
        alternatives: &[Relation],
        chosen: &BTreeMap<String, &AptPackage>,
    ) -> Result<Option<&'a AptPackage>, String> {
        let mut reasons = Vec::new();
        for relation in alternatives {
            let real = self
                .packages
                .get(&relation.name)
                .into_iter()
                .flatten()
                .filter(|package| relation.admits(&package.version));
            let provided = self
                .providers
                .get(&relation.name)
                .into_iter()
                .flatten()
                .filter(|(_, _, provided)| provides_admits(relation, provided.as_ref()))
                .filter_map(|(provider, version, _)| {
                    self.packages
                        .get(provider)?
                        .iter()
                        .find(|package| &package.version == version)
                });
            let mut found_any = false;
            for candidate in real.chain(provided) {
                found_any = true;
                match conflict(candidate, chosen) {
                    None => return Ok(Some(candidate)),
                    Some(with) => reasons.push(format!(
                        "{} {} conflicts with {with}",
                        candidate.name, candidate.version
                    )),
                }
            }
            if !found_any {
                reasons.push(match self.packages.get(&relation.name) {
                    Some(versions) => format!(
                        "{relation}: only {} on offer",
                        versions
                            .iter()
                            .map(|p| p.version.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None => format!("no package or provider of {}", relation.name),
                });
            }
        }
        Err(reasons.join("; "))
    }

    /// Names close to `name`, for a typo.
    fn near(&self, name: &str) -> Vec<String> {
        super::similar_names(name, self.packages.keys())
    }
}

/// Whether what a package provides satisfies a relation on the virtual name: an unversioned
/// provide satisfies only unversioned relations.
fn provides_admits(relation: &Relation, provided: Option<&Version>) -> bool {
    match (&relation.constraint, provided) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(_), Some(version)) => relation.admits(version),
    }
}

/// The chosen package `candidate` conflicts with, either way round.
fn conflict(candidate: &AptPackage, chosen: &BTreeMap<String, &AptPackage>) -> Option<String> {
    for relation in &candidate.conflicts {
        if let Some(other) = chosen.get(&relation.name)
            && other.name != candidate.name
            && relation.admits(&other.version)
        {
            return Some(format!("{} {}", other.name, other.version));
        }
    }
    chosen
        .values()
        .find(|other| {
            other.name != candidate.name
                && other.conflicts.iter().any(|relation| {
                    relation.name == candidate.name && relation.admits(&candidate.version)
                })
        })
        .map(|other| format!("{} {}", other.name, other.version))
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
