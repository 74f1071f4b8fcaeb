//! A redactor's rules as Berth applies them: a regex with troubleshoot's replacement pattern,
//! on one line or on the line after a selector, or a YAML path.

use super::*;

/// What a regex's capture groups become, in order (troubleshoot's replacement pattern).
#[derive(Debug, Clone, Copy)]
pub(super) enum Group {
    /// Kept as matched (unnamed, or named other than below).
    Keep,
    /// `mask`: the mask text.
    Mask,
    /// `drop`: nothing.
    Drop,
}

#[derive(Debug)]
pub(super) struct Pattern {
    pub(super) regex: Regex,
    pub(super) groups: Vec<Group>,
}

impl Pattern {
    /// A Go (RE2) regex as Rust's reads it: repeated group names made unique (each keeps its
    /// meaning), `\w \d \s \b` and classes ASCII as Go's are.
    pub(super) fn compile(source: &str) -> Result<Self, String> {
        let mut renamed = String::with_capacity(source.len() + 16);
        let mut rest = source;
        let mut seen = 0usize;
        while let Some(at) = rest.find("(?P<") {
            renamed.push_str(&rest[..at + 4]);
            rest = &rest[at + 4..];
            if let Some(end) = rest.find('>') {
                seen += 1;
                renamed.push_str(&format!("{}__{seen}", &rest[..end]));
                rest = &rest[end..];
            }
        }
        renamed.push_str(rest);
        // Go reads `\S-_` in a class as three members; Rust wants the dash escaped.
        let renamed = renamed.replace(r"\S-_", r"\S\-_");
        let regex = regex::bytes::RegexBuilder::new(&format!("(?-u){renamed}"))
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .or_else(|_| {
                // A pattern that needs Unicode (a literal non-ASCII letter) compiles with it.
                regex::bytes::RegexBuilder::new(&renamed)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
            })
            .map_err(|error| format!("`{source}` is not a regex Berth can run: {error}"))?;
        let groups = regex
            .capture_names()
            .skip(1)
            .map(|name| match name.and_then(|name| name.split("__").next()) {
                Some("mask") => Group::Mask,
                Some("drop") => Group::Drop,
                _ => Group::Keep,
            })
            .collect();
        Ok(Self { regex, groups })
    }

    /// The line with each match replaced by its groups, masked as named.
    pub(super) fn replace(&self, line: &[u8]) -> Option<Vec<u8>> {
        if !self.regex.is_match(line) {
            return None;
        }
        let replaced = self.regex.replace_all(line, |captures: &Captures| {
            let mut out = Vec::new();
            for (index, group) in self.groups.iter().enumerate() {
                match group {
                    Group::Mask => out.extend_from_slice(MASK.as_bytes()),
                    Group::Drop => {}
                    Group::Keep => {
                        if let Some(found) = captures.get(index + 1) {
                            out.extend_from_slice(found.as_bytes());
                        }
                    }
                }
            }
            out
        });
        Some(replaced.into_owned())
    }
}

#[derive(Debug)]
pub(super) enum RuleKind {
    /// A regex applied to every line (where `scan` matches the lower-cased line).
    Line {
        scan: Option<Regex>,
        pattern: Pattern,
    },
    /// A regex applied to the line after one `selector` matches.
    NextLine {
        scan: Option<Regex>,
        selector: Regex,
        pattern: Pattern,
    },
    /// Values hidden wherever they appear (a Redactor's `values`).
    Literal(Vec<u8>),
    /// A path into a YAML (or JSON) file whose value is hidden.
    YamlPath(Vec<String>),
    /// The lines of every PEM private key block (`-----BEGIN … PRIVATE KEY-----`).
    PrivateKeys,
    /// Values in the shapes secrets are written in (`NAME=value`, `name: value`, …), each
    /// applied to every line that `scan` matches.
    Shapes { scan: Regex, shapes: Vec<Shape> },
    /// The lines of a YAML block scalar (`password: |`) under a secret-looking key.
    YamlBlocks(Regex),
}

#[derive(Debug)]
pub(super) struct Rule {
    pub(super) name: String,
    pub(super) default: bool,
    /// The files it applies to (bundle paths); all files when empty.
    pub(super) files: Vec<glob::Pattern>,
    pub(super) kind: RuleKind,
}

impl Rule {
    pub(super) fn applies_to(&self, file: &str) -> bool {
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.files.is_empty()
            || self
                .files
                .iter()
                .any(|pattern| pattern.matches_with(file, options))
    }
}
