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

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;

use super::{ClosureError, Op};

/// An rpm version: `[epoch:]version[-release]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evr {
    pub epoch: String,
    pub version: String,
    pub release: String,
}

impl Evr {
    /// Reads `[epoch:]version[-release]`.
    pub fn parse(text: &str) -> Self {
        let (epoch, version, release) = rpm_version::Evr::parse_values(text);
        Self {
            epoch: epoch.to_string(),
            version: version.to_string(),
            release: release.to_string(),
        }
    }

    fn as_rpm(&self, release: bool) -> rpm_version::Evr<'_> {
        let epoch = if self.epoch.is_empty() {
            "0"
        } else {
            &self.epoch
        };
        let release = if release { self.release.as_str() } else { "" };
        rpm_version::Evr::new(epoch, self.version.as_str(), release)
    }

    /// How this version orders against a wanted one; a wanted version without a release
    /// (`>= 1.2`) matches every release of its version, as rpm has it.
    fn against(&self, wanted: &Evr) -> Ordering {
        let release = !wanted.release.is_empty() && !self.release.is_empty();
        self.as_rpm(release).cmp(&wanted.as_rpm(release))
    }
}

impl Ord for Evr {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_rpm(true).cmp(&other.as_rpm(true))
    }
}

impl PartialOrd for Evr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Evr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.epoch.is_empty() && self.epoch != "0" {
            write!(f, "{}:", self.epoch)?;
        }
        f.write_str(&self.version)?;
        if !self.release.is_empty() {
            write!(f, "-{}", self.release)?;
        }
        Ok(())
    }
}

/// A named capability with an optional version constraint: `libfoo.so.1()(64bit)`,
/// `containerd >= 1.6`, `/usr/bin/sh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub name: String,
    pub constraint: Option<(Op, Evr)>,
}

impl Capability {
    /// Whether a package providing this capability at `provided` (none: any version) meets
    /// `wanted`, a requirement on the same name.
    fn meets(provided: Option<&(Op, Evr)>, wanted: &Capability) -> bool {
        match (provided, &wanted.constraint) {
            (_, None) | (None, _) => true,
            (Some((_, version)), Some((op, evr))) => op.admits(version.against(evr)),
        }
    }

    /// Reads `name [op evr]`.
    fn parse(text: &str) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        let name = words
            .next()
            .ok_or_else(|| "an empty requirement".to_string())?;
        let constraint = match (words.next(), words.next()) {
            (None, _) => None,
            (Some(op), Some(evr)) => Some((parse_operator(op)?, Evr::parse(evr))),
            (Some(op), None) => return Err(format!("`{text}`: no version after `{op}`")),
        };
        if let Some(extra) = words.next() {
            return Err(format!("`{text}`: unexpected `{extra}`"));
        }
        Ok(Self {
            name: name.to_string(),
            constraint,
        })
    }
}

fn parse_operator(text: &str) -> Result<Op, String> {
    Ok(match text {
        "<" | "LT" => Op::Less,
        "<=" | "LE" => Op::LessOrEqual,
        "=" | "==" | "EQ" => Op::Equal,
        ">=" | "GE" => Op::GreaterOrEqual,
        ">" | "GT" => Op::Greater,
        other => return Err(format!("unknown operator `{other}`")),
    })
}

/// The operator of a metadata entry's `flags` attribute.
pub fn flags_operator(flags: &str) -> Result<Op, String> {
    parse_operator(flags)
}

fn rpm_operator(op: Op) -> &'static str {
    match op {
        Op::Less => "<",
        Op::LessOrEqual => "<=",
        Op::Equal => "=",
        Op::GreaterOrEqual => ">=",
        Op::Greater => ">",
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.constraint {
            Some((op, evr)) => write!(f, "{} {} {evr}", self.name, rpm_operator(*op)),
            None => f.write_str(&self.name),
        }
    }
}

/// A `Requires` entry: a capability, or a rich (boolean) dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Capability(Capability),
    /// `(a and b)`, and `(a with b)`, which one package must meet: taken as both.
    And(Vec<Requirement>),
    /// `(a or b)`: the first that can be met, as dnf prefers.
    Or(Vec<Requirement>),
    /// `(a if b [else c])`, and with `unless` the condition negated.
    If {
        then: Box<Requirement>,
        condition: Box<Requirement>,
        otherwise: Option<Box<Requirement>>,
        negated: bool,
    },
}

impl Requirement {
    /// Reads a requirement: a capability, or a rich dependency in parentheses.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if !text.starts_with('(') {
            return Capability::parse(text).map(Requirement::Capability);
        }
        let tokens = tokenize(text);
        let mut position = 0;
        let requirement = parse_term(&tokens, &mut position)?;
        if position != tokens.len() {
            return Err(format!("`{text}`: unexpected `{}`", tokens[position]));
        }
        Ok(requirement)
    }
}

fn tokenize(text: &str) -> Vec<String> {
    text.replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

const RICH_OPERATORS: [&str; 7] = ["and", "or", "if", "else", "unless", "with", "without"];

/// A term: `( expression )` or a capability (`name [op evr]`).
fn parse_term(tokens: &[String], position: &mut usize) -> Result<Requirement, String> {
    match tokens.get(*position).map(String::as_str) {
        Some("(") => {
            *position += 1;
            let requirement = parse_expression(tokens, position)?;
            if tokens.get(*position).map(String::as_str) != Some(")") {
                return Err("unclosed parenthesis".into());
            }
            *position += 1;
            Ok(requirement)
        }
        Some(")") | None => Err("a rich dependency is missing a term".into()),
        Some(_) => {
            let mut words = Vec::new();
            while let Some(token) = tokens.get(*position) {
                if token == "(" || token == ")" || RICH_OPERATORS.contains(&token.as_str()) {
                    break;
                }
                words.push(token.as_str());
                *position += 1;
            }
            Capability::parse(&words.join(" ")).map(Requirement::Capability)
        }
    }
}

fn parse_expression(tokens: &[String], position: &mut usize) -> Result<Requirement, String> {
    let first = parse_term(tokens, position)?;
    let operator = match tokens.get(*position).map(String::as_str) {
        Some(")") | None => return Ok(first),
        Some(operator) => operator.to_string(),
    };
    *position += 1;
    match operator.as_str() {
        "and" | "or" | "with" => {
            let mut terms = vec![first, parse_term(tokens, position)?];
            while tokens.get(*position) == Some(&operator) {
                *position += 1;
                terms.push(parse_term(tokens, position)?);
            }
            Ok(if operator == "or" {
                Requirement::Or(terms)
            } else {
                Requirement::And(terms)
            })
        }
        "if" | "unless" => {
            let condition = parse_term(tokens, position)?;
            let otherwise = if tokens.get(*position).map(String::as_str) == Some("else") {
                *position += 1;
                Some(Box::new(parse_term(tokens, position)?))
            } else {
                None
            };
            Ok(Requirement::If {
                then: Box::new(first),
                condition: Box::new(condition),
                otherwise,
                negated: operator == "unless",
            })
        }
        // `a without b`: a package that meets a and not b; a is what must be installed.
        "without" => {
            parse_term(tokens, position)?;
            Ok(first)
        }
        other => Err(format!("unknown rich dependency operator `{other}`")),
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, terms: &[Requirement], word: &str| {
            f.write_str("(")?;
            for (index, term) in terms.iter().enumerate() {
                if index > 0 {
                    write!(f, " {word} ")?;
                }
                write!(f, "{term}")?;
            }
            f.write_str(")")
        };
        match self {
            Requirement::Capability(capability) => write!(f, "{capability}"),
            Requirement::And(terms) => join(f, terms, "and"),
            Requirement::Or(terms) => join(f, terms, "or"),
            Requirement::If {
                then,
                condition,
                otherwise,
                negated,
            } => {
                let word = if *negated { "unless" } else { "if" };
                write!(f, "({then} {word} {condition}")?;
                if let Some(otherwise) = otherwise {
                    write!(f, " else {otherwise}")?;
                }
                f.write_str(")")
            }
        }
    }
}

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
        super::similar_names(name, self.by_name.keys())
    }
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
