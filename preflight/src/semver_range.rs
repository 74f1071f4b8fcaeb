//! sprig's `semverCompare`: a version against a constraint, as Masterminds/semver (v3) reads
//! them. Versions may drop the `v` and their minor or patch (`v1.24` is 1.24.0); constraints
//! are comparisons joined by `,` or spaces (all must hold) and `||` (any may), with hyphen
//! ranges (`1.6.0 - 1.6.4`), `~` (same minor) and `^` (same major). A version with a
//! pre-release only satisfies a comparison whose own version has one.

use semver::{BuildMetadata, Prerelease, Version};

/// Whether `version` satisfies `constraint`; an error names whichever cannot be read.
pub fn matches(constraint: &str, version: &str) -> Result<bool, String> {
    let version = parse_version(version)
        .ok_or_else(|| format!("semverCompare: `{version}` is not a version"))?;
    for alternative in constraint.split("||") {
        let comparisons = comparisons(alternative)
            .ok_or_else(|| format!("semverCompare: cannot read the constraint `{constraint}`"))?;
        if comparisons
            .iter()
            .all(|comparison| comparison.holds(&version))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Operator {
    Equal,
    NotEqual,
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
    Tilde,
    Caret,
}

struct Comparison {
    operator: Operator,
    version: Version,
}

impl Comparison {
    fn holds(&self, version: &Version) -> bool {
        if !version.pre.is_empty() && self.version.pre.is_empty() {
            return false;
        }
        let bound = &self.version;
        let plain = |v: &Version| Version::new(v.major, v.minor, v.patch);
        match self.operator {
            Operator::Equal => version == bound,
            Operator::NotEqual => version != bound,
            Operator::Greater => version > bound,
            Operator::GreaterOrEqual => version >= bound,
            Operator::Less => version < bound,
            Operator::LessOrEqual => version <= bound,
            Operator::Tilde => {
                version >= bound && plain(version) < Version::new(bound.major, bound.minor + 1, 0)
            }
            Operator::Caret => {
                let ceiling = if bound.major > 0 {
                    Version::new(bound.major + 1, 0, 0)
                } else if bound.minor > 0 {
                    Version::new(0, bound.minor + 1, 0)
                } else {
                    Version::new(0, 0, bound.patch + 1)
                };
                version >= bound && plain(version) < ceiling
            }
        }
    }
}

/// One alternative of a constraint: its comparisons, hyphen ranges opened into two.
fn comparisons(text: &str) -> Option<Vec<Comparison>> {
    let tokens: Vec<&str> = text
        .split([',', ' '])
        .filter(|token| !token.is_empty())
        .collect();
    let mut out = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        if tokens.get(index + 1) == Some(&"-") {
            let low = parse_version(tokens[index])?;
            let high = parse_version(tokens.get(index + 2)?)?;
            out.push(Comparison {
                operator: Operator::GreaterOrEqual,
                version: low,
            });
            out.push(Comparison {
                operator: Operator::LessOrEqual,
                version: high,
            });
            index += 3;
            continue;
        }
        let mut token = tokens[index];
        // `>= 1.2` is written with a space as often as without one.
        let operators = [">=", "<=", "!=", "=>", "=<", ">", "<", "=", "~", "^"];
        if operators.contains(&token) {
            index += 1;
            let joined = format!("{token}{}", tokens.get(index)?);
            out.push(comparison(&joined)?);
            index += 1;
            continue;
        }
        token = token.trim();
        out.push(comparison(token)?);
        index += 1;
    }
    (!out.is_empty()).then_some(out)
}

fn comparison(token: &str) -> Option<Comparison> {
    let table = [
        (">=", Operator::GreaterOrEqual),
        ("=>", Operator::GreaterOrEqual),
        ("<=", Operator::LessOrEqual),
        ("=<", Operator::LessOrEqual),
        ("!=", Operator::NotEqual),
        (">", Operator::Greater),
        ("<", Operator::Less),
        ("=", Operator::Equal),
        ("~", Operator::Tilde),
        ("^", Operator::Caret),
    ];
    let (operator, rest) = table
        .iter()
        .find_map(|(prefix, operator)| token.strip_prefix(prefix).map(|rest| (*operator, rest)))
        .unwrap_or((Operator::Equal, token));
    Some(Comparison {
        operator,
        version: parse_version(rest.trim())?,
    })
}

/// A version as Masterminds reads one: `v` allowed, missing minor and patch are 0.
pub fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim();
    let text = text.strip_prefix(['v', 'V']).unwrap_or(text);
    let (text, build) = text.split_once('+').unwrap_or((text, ""));
    let (core, pre) = text.split_once('-').unwrap_or((text, ""));
    let mut numbers = core.split('.');
    let mut next = || -> Option<u64> {
        match numbers.next() {
            None => Some(0),
            Some(part) if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) => {
                part.parse().ok()
            }
            Some(_) => None,
        }
    };
    let (major, minor, patch) = (next()?, next()?, next()?);
    if numbers.next().is_some() || core.is_empty() {
        return None;
    }
    let mut version = Version::new(major, minor, patch);
    if !pre.is_empty() {
        version.pre = Prerelease::new(pre).ok()?;
    }
    if !build.is_empty() {
        version.build = BuildMetadata::new(build).ok()?;
    }
    Some(version)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn constraints_read_as_masterminds_reads_them() {
        let cases = [
            (">= 20.10.17", "20.10.17", true),
            (">= 20.10.17", "20.10.7", false),
            ("1.6.0 - 1.6.4", "1.6.4", true),
            ("1.6.0 - 1.6.4", "1.6.5", false),
            ("> v1.96.2", "1.100.0", true),
            ("> v1.96.2", "v1.96.2", false),
            ("< 1.29.0", "1.28", true),
            (">= 1.24.0", "1.24.0-rc.1", false),
            (">= 1.24.0-0", "1.24.0-rc.1", true),
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("< 1.0 || >= 2.0", "2.1.0", true),
            (">= 1.0, < 2.0", "2.1.0", false),
        ];
        for (constraint, version, expected) in cases {
            assert_eq!(
                matches(constraint, version),
                Ok(expected),
                "{version} against {constraint}"
            );
        }
        assert!(matches(">= 1.0", "latest").is_err());
        assert!(matches(">= what", "1.0.0").is_err());
    }
}
