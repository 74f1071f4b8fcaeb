//! Redaction, as troubleshoot redacts a bundle before it is written: its default redactors
//! (passwords, tokens, AWS keys, connection strings; one line, or a JSON name on one line and
//! its value on the next), `Redactor` documents given by the vendor (literal values, regexes,
//! YAML paths, each for the files its selector names), and values the caller knows are
//! secrets (Berth's join and fleet tokens, credentials in specs). Each value hidden is
//! replaced by troubleshoot's mask and counted, by redactor and by file, never shown.
//!
//! A known secret is found however it is written: as given, JSON-escaped (Go's way too,
//! `\u0026`), percent-encoded, base64 (with `echo`'s newline, inside a longer run such as
//! HTTP Basic's `user:password`, wrapped over lines, base64 within base64 or gzip within
//! base64), hex, split over two lines, and in a file's name. Data compressed whatever its
//! name is told by its first bytes: gzip is decompressed and checked, the rest left out.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::LazyLock;

use regex::bytes::{Captures, Regex};
use serde::Serialize;
use serde_json::Value;

mod defaults;
mod rules;
mod secrets;
#[cfg(test)]
mod tests;

use defaults::*;
pub use defaults::{SECRET_WORDS, is_secret_name};
use rules::*;
use secrets::*;

/// What a hidden value becomes, as troubleshoot writes it.
pub const MASK: &str = "***HIDDEN***";
/// A `Redactor` file Berth reads at most.
pub const MAX_REDACTOR_BYTES: usize = 1 << 20;
/// The most rules (other than known secret values) one redactor set holds.
const MAX_RULES: usize = 1_000;
/// The most secret values one redactor set hides.
pub const MAX_SECRETS: usize = 100_000;
/// The shortest secret value hidden wherever it appears: a shorter one would hide common text.
pub const MIN_SECRET_BYTES: usize = 6;
/// Redactions listed per file at most; the rest are counted.
const MAX_LISTED_PER_FILE: usize = 1_000;
/// A regex Berth compiles at most (bytes of its compiled program), so a crafted one is refused.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// What a known secret in a file's name becomes: [`MASK`] in the characters Berth keeps in
/// bundle names (letters, digits, `.`, `_`, `-`), as `paths::safe_name` would write it.
pub const NAME_MASK: &str = "___HIDDEN___";
/// Of a base64 run, the characters decoded to look for a known secret (a longer run is looked
/// at in its first this many, and in its base64 forms of the secrets throughout).
const MAX_BASE64_RUN: usize = 1 << 20;
/// Layers of encoding undone looking for a known secret (base64 within base64, gzip within
/// base64: a Helm release as `kubectl` prints its Secret).
const MAX_DECODE_DEPTH: u32 = 4;
/// Bytes decoded (base64, and gzip found within it) per file looking for known secrets.
const MAX_DECODED_PER_FILE: usize = 256 << 20;
/// Bytes a file's gzip content is decompressed to at most to be checked (a file keeps 64 MiB);
/// past it the content is left out.
pub const MAX_GUNZIP_BYTES: usize = 64 << 20;
/// Of a known secret split over two lines, the bytes of each line looked at.
const MAX_SPLIT_WINDOW: usize = 4096;
/// The longest form of a secret the matcher is built as a DFA for (see [`Secrets::matcher`]).
const MAX_DFA_FORM: usize = 2048;
/// The fewest characters a base64 run holds to be decoded (6 bytes, the shortest secret).
const MIN_BASE64_RUN: usize = 8;

/// One value hidden: by which redactor, where, and how many bytes it took out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redaction {
    pub redactor_name: String,
    pub characters_removed: i64,
    /// 1-based; 0 where the whole file was rewritten (a YAML path).
    pub line: usize,
    pub file: String,
    pub is_default_redactor: bool,
}

/// Every redaction of a bundle, by redactor and by file (troubleshoot's `RedactionList`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedactionList {
    pub by_redactor: BTreeMap<String, Vec<Redaction>>,
    pub by_file: BTreeMap<String, Vec<Redaction>>,
    /// Every redaction, listed or not (a file lists its first thousand).
    pub total: usize,
}

impl RedactionList {
    pub fn add(&mut self, redactions: Vec<Redaction>) {
        for redaction in redactions {
            self.total += 1;
            let listed = self.by_file.entry(redaction.file.clone()).or_default();
            if listed.len() >= MAX_LISTED_PER_FILE {
                continue;
            }
            listed.push(redaction.clone());
            self.by_redactor
                .entry(redaction.redactor_name.clone())
                .or_default()
                .push(redaction);
        }
    }

    pub fn count(&self) -> usize {
        self.total
    }
}

/// The redactors a bundle is written through.
#[derive(Debug, Default)]
pub struct Redactor {
    rules: Vec<Rule>,
    secrets: Secrets,
}

impl Redactor {
    /// troubleshoot's default redactors.
    pub fn defaults() -> Self {
        let mut rules = Vec::new();
        let scan = |text: &str| Regex::new(text).ok();
        for (name, regex, scan_text) in DEFAULT_SINGLE_LINE {
            if let Ok(pattern) = Pattern::compile(regex) {
                rules.push(Rule {
                    name: (*name).to_string(),
                    default: true,
                    files: Vec::new(),
                    kind: RuleKind::Line {
                        scan: scan(scan_text),
                        pattern,
                    },
                });
            }
        }
        for (name, selector, regex, scan_text) in DEFAULT_MULTI_LINE {
            if let (Ok(selector), Ok(pattern)) =
                (Pattern::compile(selector), Pattern::compile(regex))
            {
                rules.push(Rule {
                    name: (*name).to_string(),
                    default: true,
                    files: Vec::new(),
                    kind: RuleKind::NextLine {
                        scan: scan(scan_text),
                        selector: selector.regex,
                        pattern,
                    },
                });
            }
        }
        Self {
            rules,
            secrets: Secrets::default(),
        }
    }

    /// Adds Berth's own rules: private keys (PEM blocks, and PEM in one line), and values in
    /// the shapes secrets are written in: under a secret-looking name (`NAME=value`,
    /// `NAME="a b"`, INI's `key = value`, YAML's `password: …` and its blocks, JSON's
    /// `"token": "…"`), HTTP authorization (`Authorization: Bearer …`), a URL's password
    /// (`redis://:pw@host`) and MySQL's `-pPASSWORD`. The name is kept, the value hidden.
    pub fn add_berth_rules(&mut self) {
        self.rules.push(Rule {
            name: "Redact PEM private keys".to_string(),
            default: false,
            files: Vec::new(),
            kind: RuleKind::PrivateKeys,
        });
        for (name, scan, shapes) in berth_shapes() {
            self.rules.push(Rule {
                name: name.to_string(),
                default: false,
                files: Vec::new(),
                kind: RuleKind::Shapes { scan, shapes },
            });
        }
        if let Some(regex) = yaml_block_regex() {
            self.rules.push(Rule {
                name: "Redact YAML blocks under secret-looking keys".to_string(),
                default: false,
                files: Vec::new(),
                kind: RuleKind::YamlBlocks(regex),
            });
        }
        for (name, regex) in BERTH_SINGLE_LINE {
            if let Ok(pattern) = Pattern::compile(regex) {
                self.rules.push(Rule {
                    name: (*name).to_string(),
                    default: false,
                    files: Vec::new(),
                    kind: RuleKind::Line {
                        scan: None,
                        pattern,
                    },
                });
            }
        }
    }

    /// How many rules the defaults compile to: all of troubleshoot's (a test holds it).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Hides `value` wherever it appears, as redactor `name`: as written; JSON-escaped (as
    /// serde and as Go escape it, `&` `<` `>` as `\u0026` `\u003c` `\u003e`, and JSON in a
    /// JSON string); base64-encoded (and with `echo`'s newline, and at each offset of a
    /// longer run); hex; in a file name's safe characters; and each line of a value of
    /// several. Percent-encoded, inside base64 runs (HTTP Basic's `user:password`), wrapped
    /// and split over lines it is found as [`Redactor::redact`] reads. A value shorter than
    /// [`MIN_SECRET_BYTES`] is left (it would hide common text). Says whether it was added;
    /// an error past [`MAX_SECRETS`].
    pub fn hide_value(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let value = value.trim();
        if value.len() < MIN_SECRET_BYTES {
            return Ok(false);
        }
        let forms = secret_forms(value);
        self.secrets.spaced |= value.contains(' ');
        let mut added = false;
        for form in forms {
            if form.len() < MIN_SECRET_BYTES || self.secrets.seen.contains(form.as_bytes()) {
                continue;
            }
            if self.secrets.values.len() >= MAX_SECRETS {
                return Err(format!(
                    "more than {MAX_SECRETS} secret values to hide; the bundle is not written"
                ));
            }
            added |= self.secrets.add(name, form.into_bytes());
        }
        Ok(added)
    }

    /// Adds the redactors of a `Redactor` document (troubleshoot.sh/v1beta2; several in one
    /// file, separated by `---`). `at` names the file in errors.
    pub fn add_documents(&mut self, at: &str, text: &str) -> Result<usize, String> {
        if text.len() > MAX_REDACTOR_BYTES {
            return Err(format!(
                "{at}: {} bytes, more than the {MAX_REDACTOR_BYTES} a Redactor may be",
                text.len()
            ));
        }
        let mut added = 0;
        for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
            let value = <Value as serde::Deserialize>::deserialize(document)
                .map_err(|error| format!("{at}: document {}: not YAML: {error}", index + 1))?;
            if value.is_null() {
                continue;
            }
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
            let api = value
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if kind != "Redactor" || !api.starts_with("troubleshoot.sh/") {
                return Err(format!(
                    "{at}: document {} is apiVersion `{api}`, kind `{kind}`; --redact takes \
                     `apiVersion: troubleshoot.sh/v1beta2`, `kind: Redactor`",
                    index + 1
                ));
            }
            let redactors = value
                .pointer("/spec/redactors")
                .cloned()
                .unwrap_or(Value::Null);
            let redactors = match redactors {
                Value::Array(list) => list,
                Value::Null => Vec::new(),
                _ => return Err(format!("{at}: spec.redactors is not a list")),
            };
            for (number, redactor) in redactors.iter().enumerate() {
                added += self
                    .add_redactor(redactor, number)
                    .map_err(|error| format!("{at}: spec.redactors[{number}]: {error}"))?;
            }
        }
        Ok(added)
    }

    fn add_redactor(&mut self, redactor: &Value, number: usize) -> Result<usize, String> {
        let name = redactor
            .get("name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map_or_else(|| format!("unnamed-{number}"), str::to_string);
        let selector = redactor.get("fileSelector");
        let mut globs: Vec<String> = Vec::new();
        if let Some(file) = selector
            .and_then(|selector| selector.get("file"))
            .and_then(Value::as_str)
            && !file.is_empty()
        {
            globs.push(file.to_string());
        }
        if let Some(files) = selector
            .and_then(|selector| selector.get("files"))
            .and_then(Value::as_array)
        {
            globs.extend(files.iter().filter_map(Value::as_str).map(str::to_string));
        }
        let files = globs
            .iter()
            .map(|text| {
                glob::Pattern::new(text)
                    .map_err(|error| format!("fileSelector `{text}` is not a glob: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let removals = redactor.get("removals").cloned().unwrap_or(Value::Null);
        let mut new = Vec::new();
        let strings = |key: &str| -> Result<Vec<String>, String> {
            match removals.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("removals.{key} holds {item}, not text"))
                    })
                    .collect(),
                Some(other) => Err(format!("removals.{key} is {other}, not a list")),
            }
        };
        for (index, value) in strings("values")?.into_iter().enumerate() {
            if !value.is_empty() {
                new.push((
                    format!("{name}.literal.{index}"),
                    RuleKind::Literal(value.into_bytes()),
                ));
            }
        }
        match removals.get("regex") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (index, entry) in list.iter().enumerate() {
                    let text = |key: &str| {
                        entry
                            .get(key)
                            .and_then(Value::as_str)
                            .filter(|text| !text.is_empty())
                    };
                    let Some(redactor) = text("redactor") else {
                        return Err(format!("removals.regex[{index}] has no redactor"));
                    };
                    let pattern = Pattern::compile(redactor)?;
                    match text("selector") {
                        Some(selector) => new.push((
                            format!("{name}.multiLine.{index}"),
                            RuleKind::NextLine {
                                scan: None,
                                selector: Pattern::compile(selector)?.regex,
                                pattern,
                            },
                        )),
                        None => new.push((
                            format!("{name}.regex.{index}"),
                            RuleKind::Line {
                                scan: None,
                                pattern,
                            },
                        )),
                    }
                }
            }
            Some(other) => return Err(format!("removals.regex is {other}, not a list")),
        }
        for (index, path) in strings("yamlPath")?.into_iter().enumerate() {
            new.push((
                format!("{name}.yaml.{index}"),
                RuleKind::YamlPath(path.split('.').map(str::to_string).collect()),
            ));
        }
        if self.rules.len() + new.len() > MAX_RULES {
            return Err(format!("more than {MAX_RULES} redaction rules"));
        }
        let added = new.len();
        for (name, kind) in new {
            self.rules.push(Rule {
                name,
                default: false,
                files: files.clone(),
                kind,
            });
        }
        Ok(added)
    }

    /// `bytes` of bundle file `file` with every rule applied, and what was hidden.
    pub fn redact(&self, file: &str, bytes: &[u8]) -> (Vec<u8>, Vec<Redaction>) {
        self.redact_as(file, bytes, true)
    }

    /// As [`Redactor::redact`]; without `rewrite`, YAML paths are left (the files that close a
    /// bundle keep their format). Each redaction names the file as [`Redactor::redact_name`]
    /// writes it. Content compressed (told by its first bytes, whatever the file's name) is
    /// looked into: gzip is decompressed (at most [`MAX_GUNZIP_BYTES`]) and redacted; where a
    /// redactor hid something in it, the file becomes that text, decompressed, after a line
    /// saying so; where nothing, it is kept as it was. Content Berth cannot decompress (zstd,
    /// xz, bzip2, lz4, zip; gzip broken or too large) cannot be checked, and is replaced by a
    /// line saying so.
    pub fn redact_as(&self, file: &str, bytes: &[u8], rewrite: bool) -> (Vec<u8>, Vec<Redaction>) {
        let shown = self.redact_name(file);
        let Some(kind) = compression(bytes) else {
            return self.redact_text(file, &shown, bytes, rewrite);
        };
        let note = |redactor: &str, written: usize| Redaction {
            redactor_name: redactor.to_string(),
            characters_removed: bytes.len() as i64 - written as i64,
            line: 0,
            file: shown.clone(),
            is_default_redactor: false,
        };
        if kind == "gzip" {
            let (text, whole) = gunzip(bytes, MAX_GUNZIP_BYTES);
            // Compressed within compressed is not looked into again: left out below.
            if whole && compression(&text).is_none() {
                let (redacted, mut redactions) = self.redact_text(file, &shown, &text, rewrite);
                if redactions.is_empty() {
                    return (bytes.to_vec(), redactions);
                }
                let mut out = format!(
                    "[Berth: this file held gzip-compressed data with secrets in it ({} bytes); \
                     written here decompressed, with them hidden]\n",
                    bytes.len()
                )
                .into_bytes();
                for redaction in &mut redactions {
                    if redaction.line > 0 {
                        redaction.line += 1;
                    }
                }
                out.extend_from_slice(&redacted);
                redactions.push(note(
                    "Redact secrets in compressed data (decompressed)",
                    out.len(),
                ));
                return (out, redactions);
            }
        }
        let out = format!(
            "[Berth: this file held {kind}-compressed data ({} bytes) that Berth could not \
             decompress to check for secrets; left out]\n",
            bytes.len()
        )
        .into_bytes();
        let redaction = note("Redact compressed data that cannot be checked", out.len());
        (out, vec![redaction])
    }

    /// A bundle path with every secret Berth knows in it (as [`Redactor::hide_value`] lists
    /// its forms, percent-encoded or in base64 too) replaced by [`NAME_MASK`]: the name to
    /// write a file under, and the one `redactions.json` names it by.
    pub fn redact_name(&self, path: &str) -> String {
        let mut budget = MAX_DECODED_PER_FILE;
        let hits = self.secrets.line_hits(path.as_bytes(), &mut budget);
        if hits.is_empty() {
            return path.to_string();
        }
        let (masked, _) = mask_hits(path.as_bytes(), hits, NAME_MASK.as_bytes());
        String::from_utf8_lossy(&masked).into_owned()
    }

    /// The redaction of text (or any bytes not compressed): `file` chooses the rules, `shown`
    /// names it in each redaction.
    fn redact_text(
        &self,
        file: &str,
        shown: &str,
        bytes: &[u8],
        rewrite: bool,
    ) -> (Vec<u8>, Vec<Redaction>) {
        let mut redactions = Vec::new();
        // YAML paths first, while the file is still YAML: a mask written by a line rule
        // (`***HIDDEN***`) reads as an alias and would stop the file parsing.
        let mut rewritten = None;
        for rule in self
            .rules
            .iter()
            .filter(|rule| rewrite && rule.applies_to(file))
        {
            if let RuleKind::YamlPath(path) = &rule.kind {
                let current = rewritten.as_deref().unwrap_or(bytes);
                if let Some(masked) = redact_yaml_path(current, path) {
                    redactions.push(Redaction {
                        redactor_name: rule.name.clone(),
                        characters_removed: current.len() as i64 - masked.len() as i64,
                        line: 0,
                        file: shown.to_string(),
                        is_default_redactor: false,
                    });
                    rewritten = Some(masked);
                }
            }
        }
        let bytes = rewritten.as_deref().unwrap_or(bytes);
        let mut lines: Vec<Vec<u8>> = bytes
            .split(|byte| *byte == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        // The secrets the caller knows first, before any other rule changes the text.
        let known = self.secrets.hits(&lines);
        for (number, (line, hits)) in lines.iter_mut().zip(known).enumerate() {
            if hits.is_empty() {
                continue;
            }
            let (replaced, ranges) = mask_hits(line, hits, MASK.as_bytes());
            for (removed, forms) in ranges {
                let mut names: Vec<&str> = forms
                    .iter()
                    .filter_map(|form| self.secrets.values.get(*form))
                    .map(|(name, _)| name.as_str())
                    .collect();
                names.sort_unstable();
                names.dedup();
                let each = removed / names.len().max(1) as i64;
                for name in names {
                    redactions.push(Redaction {
                        redactor_name: name.to_string(),
                        characters_removed: each,
                        line: number + 1,
                        file: shown.to_string(),
                        is_default_redactor: false,
                    });
                }
            }
            *line = replaced;
        }
        for rule in self.rules.iter().filter(|rule| rule.applies_to(file)) {
            let mut note = |line: usize, before: usize, after: usize| {
                redactions.push(Redaction {
                    redactor_name: rule.name.clone(),
                    characters_removed: before as i64 - after as i64,
                    line,
                    file: shown.to_string(),
                    is_default_redactor: rule.default,
                })
            };
            match &rule.kind {
                RuleKind::Line { scan, pattern } => {
                    for (number, line) in lines.iter_mut().enumerate() {
                        if scan
                            .as_ref()
                            .is_some_and(|scan| !scan.is_match(&line.to_ascii_lowercase()))
                        {
                            continue;
                        }
                        if let Some(replaced) = pattern.replace(line)
                            && replaced != *line
                        {
                            note(number + 1, line.len(), replaced.len());
                            *line = replaced;
                        }
                    }
                }
                RuleKind::NextLine {
                    scan,
                    selector,
                    pattern,
                } => {
                    let mut number = 0;
                    while number + 1 < lines.len() {
                        let selected = scan
                            .as_ref()
                            .is_none_or(|scan| scan.is_match(&lines[number].to_ascii_lowercase()))
                            && selector.is_match(&lines[number]);
                        if selected {
                            if let Some(replaced) = pattern.replace(&lines[number + 1])
                                && replaced != lines[number + 1]
                            {
                                note(number + 2, lines[number + 1].len(), replaced.len());
                                lines[number + 1] = replaced;
                            }
                            number += 2;
                        } else {
                            number += 1;
                        }
                    }
                }
                RuleKind::Literal(value) => {
                    for (number, line) in lines.iter_mut().enumerate() {
                        if let Some(replaced) = replace_literal(line, value) {
                            note(number + 1, line.len(), replaced.len());
                            *line = replaced;
                        }
                    }
                }
                RuleKind::PrivateKeys => {
                    let mut inside = false;
                    for (number, line) in lines.iter_mut().enumerate() {
                        let text = String::from_utf8_lossy(line);
                        let begins = text.contains("-----BEGIN") && text.contains("PRIVATE KEY");
                        let ends = text.contains("-----END");
                        if begins && ends {
                            // A key held in one line: Berth's one-line rule hides it.
                            continue;
                        }
                        if begins {
                            inside = true;
                        } else if ends {
                            inside = false;
                        } else if inside && !line.is_empty() && *line != MASK.as_bytes() {
                            note(number + 1, line.len(), MASK.len());
                            *line = MASK.as_bytes().to_vec();
                        }
                    }
                }
                RuleKind::Shapes { scan, shapes } => {
                    for (number, line) in lines.iter_mut().enumerate() {
                        if !scan.is_match(line) {
                            continue;
                        }
                        for shape in shapes {
                            if let Some(replaced) = shape.replace(line) {
                                note(number + 1, line.len(), replaced.len());
                                *line = replaced;
                            }
                        }
                    }
                }
                RuleKind::YamlBlocks(regex) => {
                    let mut number = 0;
                    while number < lines.len() {
                        let column = regex.captures(&lines[number]).and_then(|captures| {
                            let name = captures.name("name")?;
                            is_secret_text_name(name.as_bytes(), true)
                                .then(|| captures.name("indent").map_or(0, |indent| indent.end()))
                        });
                        number += 1;
                        let Some(column) = column else {
                            continue;
                        };
                        // The block: the lines after, each blank or indented past the key.
                        while let Some(line) = lines.get_mut(number) {
                            let indent = line
                                .iter()
                                .take_while(|byte| matches!(byte, b' ' | b'\t'))
                                .count();
                            let blank = line.iter().all(u8::is_ascii_whitespace);
                            if !blank && indent <= column {
                                break;
                            }
                            let end = line.len() - usize::from(line.ends_with(b"\r"));
                            if !blank && line[indent..end] != *MASK.as_bytes() {
                                let mut replaced = line[..indent].to_vec();
                                replaced.extend_from_slice(MASK.as_bytes());
                                replaced.extend_from_slice(&line[end..]);
                                note(number + 1, line.len(), replaced.len());
                                *line = replaced;
                            }
                            number += 1;
                        }
                    }
                }
                RuleKind::YamlPath(_) => {}
            }
        }
        (lines.join(&b'\n'), redactions)
    }
}
