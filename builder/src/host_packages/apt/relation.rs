//! Debian's relation fields (`Depends`, `Conflicts`, `Provides`): `a (>= 1.0) | b, c:any`.

use std::str::FromStr;

use debversion::Version;

use crate::host_packages::Op;

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
    pub(super) fn admits(&self, version: &Version) -> bool {
        self.constraint
            .as_ref()
            .is_none_or(|(op, wanted)| op.admits(version.cmp(wanted)))
    }
}

/// Parses a relation field: `a (>= 1.0) | b, c:any`.
pub fn parse_relations(text: &str) -> Result<Vec<Alternatives>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|clause| !clause.is_empty())
        .map(|clause| clause.split('|').map(parse_relation).collect())
        .collect()
}

pub(super) fn parse_relation(text: &str) -> Result<Relation, String> {
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
