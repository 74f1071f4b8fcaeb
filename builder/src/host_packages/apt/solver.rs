//! The dependency closure over a distro's indices: `Pre-Depends` and `Depends` with versions,
//! the first alternative that can be satisfied, virtual packages and `Conflicts`/`Breaks`, with
//! the packages every host has taken as met.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use debversion::Version;

use super::relation::parse_relation;
use super::{AptError, AptPackage, Relation, read_package};
use crate::host_packages::ClosureError;
use crate::host_packages::control;

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
            if let Some(package) = package
                && chosen.insert(package.name.clone(), package).is_none()
            {
                queue.push_back((package, vec![package.name.clone()]));
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
        crate::host_packages::similar_names(name, self.packages.keys())
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
