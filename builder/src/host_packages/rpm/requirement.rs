//! What packages provide and require: capabilities with version constraints, and rich
//! (boolean) dependencies such as `(a or b)` and `(a if b else c)`.

use std::fmt;

use super::Evr;
use crate::host_packages::Op;

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
    pub(super) fn meets(provided: Option<&(Op, Evr)>, wanted: &Capability) -> bool {
        match (provided, &wanted.constraint) {
            (_, None) | (None, _) => true,
            (Some((_, version)), Some((op, evr))) => op.admits(version.against(evr)),
        }
    }

    /// Reads `name [op evr]`.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
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
