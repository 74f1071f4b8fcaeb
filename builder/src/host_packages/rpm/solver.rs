//! The dependency closure over a target's repositories: `Requires` against `Provides`, package
//! names and file paths, choosing the highest version that fits, with `Conflicts` and
//! `Obsoletes` honoured and the target's base packages taken as met.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::{Capability, Requirement, RpmPackage};
use crate::host_packages::ClosureError;

/// The packages of one target's repositories, for one architecture.
#[derive(Debug, Default)]
pub struct RpmIndex {
    packages: Vec<RpmPackage>,
    /// Package name → its packages, highest version first.
    by_name: HashMap<String, Vec<usize>>,
    /// Capability name or file path → the packages providing it.
    providers: HashMap<String, Vec<usize>>,
}

/// The packages chosen so far, by name.
type Chosen = BTreeMap<String, usize>;

impl RpmIndex {
    /// Adds packages of architecture `architecture` or `noarch`; others are skipped.
    pub fn add(&mut self, packages: Vec<RpmPackage>, architecture: &str) {
        for package in packages {
            if package.arch != architecture && package.arch != "noarch" {
                continue;
            }
            let id = self.packages.len();
            let names = std::iter::once(&package.name)
                .chain(package.provides.iter().map(|capability| &capability.name))
                .chain(&package.files);
            for name in names {
                let providers = self.providers.entry(name.clone()).or_default();
                if providers.last() != Some(&id) {
                    providers.push(id);
                }
            }
            self.by_name
                .entry(package.name.clone())
                .or_default()
                .push(id);
            self.packages.push(package);
        }
        let packages = &self.packages;
        for ids in self.by_name.values_mut() {
            ids.sort_by(|a, b| packages[*b].evr.cmp(&packages[*a].evr));
        }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Names of the packages every host of the target has: `roots` (the target's `base`) and
    /// everything they require. A root the repositories do not have is skipped.
    pub fn base(&self, roots: &[String]) -> BTreeSet<String> {
        let mut base = BTreeSet::new();
        // One at a time, so a root whose requirements cannot be met costs only itself.
        for root in roots {
            if let Ok(closure) = self.resolve("base", std::slice::from_ref(root), &base) {
                base.extend(closure.into_iter().map(|package| package.name.clone()));
            }
        }
        base
    }

    /// The closure of `requested` on `distro`, leaving out (and taking as met) `base`.
    pub fn resolve(
        &self,
        distro: &str,
        requested: &[String],
        base: &BTreeSet<String>,
    ) -> Result<Vec<&RpmPackage>, ClosureError> {
        let unsatisfiable = |chain: Vec<String>, why: String| ClosureError::Unsatisfiable {
            distro: distro.to_string(),
            chain,
            why,
        };
        let mut chosen = Chosen::new();
        let mut queue: VecDeque<(usize, Vec<String>)> = VecDeque::new();
        for text in requested {
            let wanted = Capability::parse(text)
                .map_err(|problem| unsatisfiable(vec![text.clone()], problem))?;
            if !self.providers.contains_key(&wanted.name) {
                return Err(ClosureError::Unknown {
                    distro: distro.to_string(),
                    name: wanted.name.clone(),
                    near: self.near(&wanted.name),
                });
            }
            let added = self
                .satisfy(&Requirement::Capability(wanted.clone()), &chosen, base)
                .map_err(|why| unsatisfiable(vec![wanted.to_string()], why))?;
            self.take(
                added,
                &mut chosen,
                &mut queue,
                std::slice::from_ref(&wanted.name),
            );
        }
        while let Some((id, chain)) = queue.pop_front() {
            // Plain requirements first: what they bring decides which alternative of a rich
            // dependency can be met without a conflict (rpm lists requirements sorted, so a
            // rich one, starting with `(`, would otherwise come first).
            let requires = &self.packages[id].requires;
            let plain = requires
                .iter()
                .filter(|requirement| matches!(requirement, Requirement::Capability(_)));
            let rich = requires
                .iter()
                .filter(|requirement| !matches!(requirement, Requirement::Capability(_)));
            for requirement in plain.chain(rich) {
                let mut chain = chain.clone();
                chain.push(requirement.to_string());
                let added = self
                    .satisfy(requirement, &chosen, base)
                    .map_err(|why| unsatisfiable(chain.clone(), why))?;
                self.take(added, &mut chosen, &mut queue, &chain);
            }
        }
        Ok(chosen.into_values().map(|id| &self.packages[id]).collect())
    }

    /// Records newly chosen packages and queues their requirements.
    fn take(
        &self,
        added: Vec<usize>,
        chosen: &mut Chosen,
        queue: &mut VecDeque<(usize, Vec<String>)>,
        chain: &[String],
    ) {
        for id in added {
            let package = &self.packages[id];
            if chosen.insert(package.name.clone(), id) != Some(id) {
                // The chain names the package when the requirement was met by another name.
                let mut chain = chain.to_vec();
                if chain.last() != Some(&package.name) {
                    chain.push(package.name.clone());
                }
                queue.push_back((id, chain));
            }
        }
    }

    /// Whether a chosen or a base package meets the requirement.
    fn met(&self, requirement: &Requirement, chosen: &Chosen, base: &BTreeSet<String>) -> bool {
        match requirement {
            Requirement::Capability(wanted) => {
                wanted.name.starts_with("rpmlib(")
                    || self
                        .providers
                        .get(&wanted.name)
                        .into_iter()
                        .flatten()
                        .any(|&id| {
                            let package = &self.packages[id];
                            (chosen.get(&package.name) == Some(&id) || base.contains(&package.name))
                                && package.satisfies(wanted)
                        })
            }
            Requirement::And(terms) => terms.iter().all(|term| self.met(term, chosen, base)),
            Requirement::Or(terms) => terms.iter().any(|term| self.met(term, chosen, base)),
            Requirement::If {
                then,
                condition,
                otherwise,
                negated,
            } => {
                if self.met(condition, chosen, base) != *negated {
                    self.met(then, chosen, base)
                } else {
                    otherwise
                        .as_ref()
                        .is_none_or(|otherwise| self.met(otherwise, chosen, base))
                }
            }
        }
    }

    /// The packages to add so that the requirement is met; an error says why it cannot be.
    fn satisfy(
        &self,
        requirement: &Requirement,
        chosen: &Chosen,
        base: &BTreeSet<String>,
    ) -> Result<Vec<usize>, String> {
        if self.met(requirement, chosen, base) {
            return Ok(Vec::new());
        }
        match requirement {
            Requirement::Capability(wanted) => self.choose(wanted, chosen).map(|id| vec![id]),
            Requirement::And(terms) => {
                let mut added = Vec::new();
                for term in terms {
                    added.extend(self.satisfy(term, chosen, base)?);
                }
                Ok(added)
            }
            Requirement::Or(terms) => {
                let mut reasons = Vec::new();
                for term in terms {
                    match self.satisfy(term, chosen, base) {
                        Ok(added) => return Ok(added),
                        Err(why) => reasons.push(why),
                    }
                }
                Err(reasons.join("; "))
            }
            Requirement::If {
                then,
                condition,
                otherwise,
                negated,
            } => {
                if self.met(condition, chosen, base) != *negated {
                    self.satisfy(then, chosen, base)
                } else if let Some(otherwise) = otherwise {
                    self.satisfy(otherwise, chosen, base)
                } else {
                    Ok(Vec::new())
                }
            }
        }
    }

    /// The package that meets `wanted` without a conflict: a package of that name (its
    /// highest admitted version), else a provider (by name, highest version first).
    fn choose(&self, wanted: &Capability, chosen: &Chosen) -> Result<usize, String> {
        let mut candidates: Vec<usize> = self
            .by_name
            .get(&wanted.name)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&id| self.packages[id].satisfies(wanted))
            .collect();
        let mut providers: Vec<usize> = self
            .providers
            .get(&wanted.name)
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| !candidates.contains(id) && self.packages[*id].satisfies(wanted))
            .collect();
        providers.sort_by(|a, b| {
            let (a, b) = (&self.packages[*a], &self.packages[*b]);
            a.name.cmp(&b.name).then_with(|| b.evr.cmp(&a.evr))
        });
        candidates.extend(providers);
        if candidates.is_empty() {
            return Err(match self.by_name.get(&wanted.name) {
                Some(ids) => format!(
                    "{wanted}: only {} on offer",
                    ids.iter()
                        .map(|&id| self.packages[id].evr.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None if wanted.name.starts_with('/') => {
                    format!("no package lists the file {}", wanted.name)
                }
                None => format!("no package or provider of {}", wanted.name),
            });
        }
        let mut reasons = Vec::new();
        for id in candidates {
            match self.conflict(id, chosen) {
                None => return Ok(id),
                Some(with) => reasons.push(format!(
                    "{} conflicts with {with}",
                    self.packages[id].shown()
                )),
            }
        }
        Err(reasons.join("; "))
    }

    /// The chosen package that `id` conflicts with or obsoletes, or that does so to it.
    fn conflict(&self, id: usize, chosen: &Chosen) -> Option<String> {
        let candidate = &self.packages[id];
        chosen
            .values()
            .map(|&other| &self.packages[other])
            .filter(|other| other.name != candidate.name)
            .find(|other| {
                let against = |package: &RpmPackage, of: &RpmPackage| {
                    package
                        .conflicts
                        .iter()
                        .any(|capability| of.satisfies(capability))
                        || package.obsoletes.iter().any(|capability| {
                            capability.name == of.name && of.satisfies(capability)
                        })
                };
                against(candidate, other) || against(other, candidate)
            })
            .map(RpmPackage::shown)
    }

    /// Names close to `name`, for a typo.
    fn near(&self, name: &str) -> Vec<String> {
        crate::host_packages::similar_names(name, self.by_name.keys())
    }
}
