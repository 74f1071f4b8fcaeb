//! Redaction, as troubleshoot redacts a bundle before it is written: its default redactors
//! (passwords, tokens, AWS keys, connection strings; one line, or a JSON name on one line and
//! its value on the next), `Redactor` documents given by the vendor (literal values, regexes,
//! YAML paths, each for the files its selector names), and values the caller knows are
//! secrets (Berth's join and fleet tokens, credentials in specs). Each value hidden is
//! replaced by troubleshoot's mask and counted, by redactor and by file, never shown.

use std::collections::BTreeMap;

use regex::bytes::{Captures, Regex};
use serde::Serialize;
use serde_json::Value;

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

/// troubleshoot's default single-line redactors (`pkg/redact/redact.go`): name, regex, scan.
const DEFAULT_SINGLE_LINE: &[(&str, &str, &str)] = &[
    (
        "Redact values for environment variables that look like AWS Secret Access Keys",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*SECRET_?ACCESS_?KEY\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "secret_?access_?key",
    ),
    (
        "Redact values for environment variables that look like AWS Access Keys",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*ACCESS_?KEY_?ID\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "access_?key_?id",
    ),
    (
        "Redact values for environment variables that look like AWS Owner or Account numbers",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*OWNER_?ACCOUNT\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "owner_?account",
    ),
    (
        "Redact values for environment variables with names beginning with 'password'",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*password[^\"]*\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "password",
    ),
    (
        "Redact values for environment variables with names beginning with 'token'",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*token[^\"]*\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "token",
    ),
    (
        "Redact values for environment variables with names beginning with 'database'",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*database[^\"]*\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "database",
    ),
    (
        "Redact values for environment variables with names beginning with 'user'",
        r#"(?i)(\\\"name\\\":\\\"[^\"]*user[^\"]*\\\",\\\"value\\\":\\\")(?P<mask>[^\"]*)(\\\")"#,
        "user",
    ),
    (
        "Redact connection strings with username and password",
        r#"(?i)(https?|ftp)(:\/\/)(?P<mask>[^:\"\/]+){1}(:)(?P<mask>[^@\"\/]+){1}(?P<host>@[^:\/\s\"]+){1}(?P<port>:[\d]+)?"#,
        "https?|ftp",
    ),
    (
        "Redact database connection strings that contain username and password",
        r#"\b(?P<mask>[^:\"\/]*){1}(:)(?P<mask>[^:\"\/]*){1}(@tcp\()(?P<mask>[^:\"\/]*){1}(?P<port>:[\d]*)?(\)\/)(?P<mask>[\w\d\S-_]+){1}\b"#,
        "@tcp",
    ),
    (
        "Redact database connection strings that contain username and password",
        r#"\b(\w*:\/\/)(?P<mask>[^:\"\/]*){1}(:)(?P<mask>[^:\"\/]*){1}(@)(?P<mask>[^:\"\/]*){1}(?P<port>:[\d]*)?(\/)(?P<mask>[\w\d\S-_]+){1}\b"#,
        r#"\b(\w*:\/\/)([^:\"\/]*)(:)([^@\"\/]*)(@)([^:\"\/]*)(:[\d]*)?(\/)([\w\d\S-_]+)\b"#,
    ),
    (
        "Redact 'Data Source' values commonly found in database connection strings",
        r"(?i)(Data Source *= *)(?P<mask>[^\;]+)(;)",
        "data source",
    ),
    (
        "Redact 'location' values commonly found in database connection strings",
        r"(?i)(location *= *)(?P<mask>[^\;]+)(;)",
        "location",
    ),
    (
        "Redact 'User ID' values commonly found in database connection strings",
        r"(?i)(User ID *= *)(?P<mask>[^\;]+)(;)",
        "user id",
    ),
    (
        "Redact 'password' values commonly found in database connection strings",
        r"(?i)(password *= *)(?P<mask>[^\;]+)(;)",
        "password",
    ),
    (
        "Redact 'Server' values commonly found in database connection strings",
        r"(?i)(Server *= *)(?P<mask>[^\;]+)(;)",
        "server",
    ),
    (
        "Redact 'Database' values commonly found in database connection strings",
        r"(?i)(Database *= *)(?P<mask>[^\;]+)(;)",
        "database",
    ),
    (
        "Redact 'UID' values commonly found in database connection strings",
        r"(?i)(Uid *= *)(?P<mask>[^\;]+)(;)",
        "uid",
    ),
    (
        "Redact 'Pwd' values commonly found in database connection strings",
        r"(?i)(Pwd *= *)(?P<mask>[^\;]+)(;)",
        "pwd",
    ),
];

/// The value line of a JSON `{"name": …, "value": …}` pair.
const JSON_VALUE: &str = r#"(?i)("value": *")(?P<mask>.*[^\"]*)(")"#;

/// troubleshoot's default multi-line redactors: name, selector (line N), redactor (line N+1), scan.
const DEFAULT_MULTI_LINE: &[(&str, &str, &str, &str)] = &[
    (
        "Redact AWS Secret Access Key values in multiline JSON",
        r#"(?i)"name": *"[^\"]*SECRET_?ACCESS_?KEY[^\"]*""#,
        JSON_VALUE,
        "secret_?access_?key",
    ),
    (
        "Redact AWS Access Key ID values in multiline JSON",
        r#"(?i)"name": *"[^\"]*ACCESS_?KEY_?ID[^\"]*""#,
        JSON_VALUE,
        "access_?key_?id",
    ),
    (
        "Redact AWS Owner and Account Numbers in multiline JSON",
        r#"(?i)"name": *"[^\"]*OWNER_?ACCOUNT[^\"]*""#,
        JSON_VALUE,
        "owner_?account",
    ),
    (
        "Redact password environment variables in multiline JSON",
        r#"(?i)"name": *".*password[^\"]*""#,
        JSON_VALUE,
        "password",
    ),
    (
        "Redact values that look like API tokens in multiline JSON",
        r#"(?i)"name": *".*token[^\"]*""#,
        JSON_VALUE,
        "token",
    ),
    (
        "Redact database connection strings in multiline JSON",
        r#"(?i)"name": *".*database[^\"]*""#,
        JSON_VALUE,
        "database",
    ),
    (
        "Redact usernames in multiline JSON",
        r#"(?i)"name": *".*user[^\"]*""#,
        JSON_VALUE,
        "user",
    ),
    (
        "Redact 'key' values found in Ceph auth lists",
        r#"(?i)"entity": *"(osd|client|mgr)\..*[^\"]*""#,
        r#"(?i)("key": *")(?P<mask>.{38}==[^\"]*)(")"#,
        "(osd|client|mgr)",
    ),
];

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

/// What a regex's capture groups become, in order (troubleshoot's replacement pattern).
#[derive(Debug, Clone, Copy)]
enum Group {
    /// Kept as matched (unnamed, or named other than below).
    Keep,
    /// `mask`: the mask text.
    Mask,
    /// `drop`: nothing.
    Drop,
}

#[derive(Debug)]
struct Pattern {
    regex: Regex,
    groups: Vec<Group>,
}

impl Pattern {
    /// A Go (RE2) regex as Rust's reads it: repeated group names made unique (each keeps its
    /// meaning), `\w \d \s \b` and classes ASCII as Go's are.
    fn compile(source: &str) -> Result<Self, String> {
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
    fn replace(&self, line: &[u8]) -> Option<Vec<u8>> {
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
enum RuleKind {
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
}

/// The secret values the caller knows, found together in one pass (Aho-Corasick), longest
/// first, before any other rule changes the text.
#[derive(Debug, Default)]
struct Secrets {
    values: Vec<(String, Vec<u8>)>,
    matcher: Option<aho_corasick::AhoCorasick>,
}

impl Secrets {
    fn build(&mut self) {
        self.matcher = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(self.values.iter().map(|(_, value)| value))
            .ok();
    }

    /// The line with every known secret masked, and the name of each one found.
    fn replace(&self, line: &[u8]) -> Option<(Vec<u8>, Vec<&str>)> {
        let matcher = self.matcher.as_ref()?;
        let mut found = Vec::new();
        let mut out = Vec::with_capacity(line.len());
        let mut last = 0;
        for hit in matcher.find_iter(line) {
            out.extend_from_slice(&line[last..hit.start()]);
            out.extend_from_slice(MASK.as_bytes());
            last = hit.end();
            found.push(self.values[hit.pattern().as_usize()].0.as_str());
        }
        if found.is_empty() {
            return None;
        }
        out.extend_from_slice(&line[last..]);
        Some((out, found))
    }
}

#[derive(Debug)]
struct Rule {
    name: String,
    default: bool,
    /// The files it applies to (bundle paths); all files when empty.
    files: Vec<glob::Pattern>,
    kind: RuleKind,
}

impl Rule {
    fn applies_to(&self, file: &str) -> bool {
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

/// The redactors a bundle is written through.
#[derive(Debug, Default)]
pub struct Redactor {
    rules: Vec<Rule>,
    secrets: Secrets,
}

/// Berth's own single-line rules, after troubleshoot's: a secret-looking variable's value in
/// `NAME=value` text (a hook's `set` output, a container's environment), and a private key
/// held in one line (PEM in a JSON or YAML string).
const BERTH_SINGLE_LINE: &[(&str, &str)] = &[
    (
        "Redact values of secret-looking variables",
        r#"(?i)(\b[A-Za-z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|APIKEY|API_KEY|ACCESS_KEY|PRIVATE_KEY|AUTH)[A-Za-z0-9_]*=)(?P<mask>[^"\s,;]+)"#,
    ),
    (
        "Redact PEM private keys held in one line",
        r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)(?P<mask>.*?)(-----END [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)",
    ),
];

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

    /// Adds Berth's own rules: private keys (PEM blocks, and PEM in one line) and the values
    /// of secret-looking variables.
    pub fn add_berth_rules(&mut self) {
        self.rules.push(Rule {
            name: "Redact PEM private keys".to_string(),
            default: false,
            files: Vec::new(),
            kind: RuleKind::PrivateKeys,
        });
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

    /// Hides `value` wherever it appears, as redactor `name`: as written, JSON-escaped and
    /// base64-encoded, and each line of a value of several. A value shorter than
    /// [`MIN_SECRET_BYTES`] is left (it would hide common text). Says whether it was added;
    /// an error past [`MAX_SECRETS`].
    pub fn hide_value(&mut self, name: &str, value: &str) -> Result<bool, String> {
        use base64::Engine as _;
        let value = value.trim();
        if value.len() < MIN_SECRET_BYTES {
            return Ok(false);
        }
        let mut forms: Vec<String> = vec![value.to_string()];
        let escaped = serde_json::to_string(value).unwrap_or_default();
        forms.push(escaped.trim_matches('"').to_string());
        forms.push(base64::engine::general_purpose::STANDARD.encode(value));
        forms.extend(value.lines().map(str::trim).map(str::to_string));
        let mut added = false;
        for form in forms {
            if form.len() < MIN_SECRET_BYTES
                || self
                    .secrets
                    .values
                    .iter()
                    .any(|(_, known)| *known == form.as_bytes())
            {
                continue;
            }
            if self.secrets.values.len() >= MAX_SECRETS {
                return Err(format!(
                    "more than {MAX_SECRETS} secret values to hide; the bundle is not written"
                ));
            }
            self.secrets
                .values
                .push((name.to_string(), form.into_bytes()));
            added = true;
        }
        if added {
            self.secrets.build();
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
    /// bundle keep their format).
    pub fn redact_as(&self, file: &str, bytes: &[u8], rewrite: bool) -> (Vec<u8>, Vec<Redaction>) {
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
                        file: file.to_string(),
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
        for (number, line) in lines.iter_mut().enumerate() {
            if let Some((replaced, names)) = self.secrets.replace(line) {
                let removed =
                    (line.len() as i64 - replaced.len() as i64) / names.len().max(1) as i64;
                for name in names {
                    redactions.push(Redaction {
                        redactor_name: name.to_string(),
                        characters_removed: removed,
                        line: number + 1,
                        file: file.to_string(),
                        is_default_redactor: false,
                    });
                }
                *line = replaced;
            }
        }
        for rule in self.rules.iter().filter(|rule| rule.applies_to(file)) {
            let mut note = |line: usize, before: usize, after: usize| {
                redactions.push(Redaction {
                    redactor_name: rule.name.clone(),
                    characters_removed: before as i64 - after as i64,
                    line,
                    file: file.to_string(),
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
                RuleKind::YamlPath(_) => {}
            }
        }
        (lines.join(&b'\n'), redactions)
    }
}

/// `line` with every `value` masked, or `None` where it holds none.
fn replace_literal(line: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    if value.is_empty() || line.len() < value.len() {
        return None;
    }
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    let mut found = false;
    while let Some(at) = rest.windows(value.len()).position(|window| window == value) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(MASK.as_bytes());
        rest = &rest[at + value.len()..];
        found = true;
    }
    found.then(|| {
        out.extend_from_slice(rest);
        out
    })
}

/// The file rewritten with the value at `path` masked (`*` every item; a number an index),
/// or `None` when it is not YAML or the path finds nothing (the file stays as it is).
fn redact_yaml_path(bytes: &[u8], path: &[String]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut value: Value = serde_norway::from_str(text).ok()?;
    if !mask_path(&mut value, path) {
        return None;
    }
    serde_norway::to_string(&value).ok().map(String::into_bytes)
}

fn mask_path(value: &mut Value, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        *value = Value::String(MASK.to_string());
        return true;
    };
    match value {
        Value::Object(map) if first == "*" => {
            let mut any = false;
            for child in map.values_mut() {
                any |= mask_path(child, rest);
            }
            any
        }
        Value::Object(map) => map
            .get_mut(first)
            .is_some_and(|child| mask_path(child, rest)),
        Value::Array(list) if first == "*" => {
            let mut any = false;
            for child in list {
                any |= mask_path(child, rest);
            }
            any
        }
        Value::Array(list) => first
            .parse::<usize>()
            .ok()
            .and_then(|index| list.get_mut(index))
            .is_some_and(|child| mask_path(child, rest)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(redactor: &Redactor, text: &str) -> String {
        String::from_utf8(redactor.redact("host-collectors/x.txt", text.as_bytes()).0).unwrap()
    }

    #[test]
    fn every_default_redactor_compiles() {
        assert_eq!(
            Redactor::defaults().len(),
            DEFAULT_SINGLE_LINE.len() + DEFAULT_MULTI_LINE.len()
        );
    }

    #[test]
    fn the_defaults_hide_what_troubleshoots_hide() {
        let redactor = Redactor::defaults();
        // troubleshoot's own example (pkg/preflight/collect_test.go).
        assert_eq!(
            redacted(
                &redactor,
                "HTTPS_PROXY=http://alice:sw0rdfish@proxy.example.com:3128"
            ),
            "HTTPS_PROXY=http://***HIDDEN***:***HIDDEN***@proxy.example.com:3128"
        );
        assert_eq!(
            redacted(
                &redactor,
                "Server=db;Database=app;User ID=sa;Password=hunter22;"
            ),
            "Server=***HIDDEN***;Database=***HIDDEN***;User ID=***HIDDEN***;Password=***HIDDEN***;"
        );
        let env = "[\n  {\n    \"name\": \"DB_PASSWORD\",\n    \"value\": \"hunter22\"\n  }\n]";
        let out = redacted(&redactor, env);
        assert!(out.contains("\"value\": \"***HIDDEN***\""), "{out}");
        assert!(!out.contains("hunter22"));
        let inline = r#"{\"name\":\"AWS_SECRET_ACCESS_KEY\",\"value\":\"abc/def\"}"#;
        assert!(!redacted(&redactor, inline).contains("abc/def"));
        // Text that holds no secret is left as it is.
        let plain = "kernel 6.1.0 loaded module overlay\n";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn redactor_documents_hide_values_regexes_and_yaml_paths_in_the_files_they_select() {
        let mut redactor = Redactor::default();
        let added = redactor
            .add_documents(
                "r.yaml",
                "apiVersion: troubleshoot.sh/v1beta2\nkind: Redactor\nspec:\n  redactors:\n  - name: mine\n    fileSelector:\n      files: [\"host-collectors/**/*.yaml\"]\n    removals:\n      values: [\"s3cr3t-value\"]\n      regex:\n      - redactor: '(apikey=)(?P<mask>\\w+)'\n      yamlPath: [\"auth.*.password\"]\n",
            )
            .unwrap();
        assert_eq!(added, 3);
        let file = "host-collectors/berth/spec.yaml";
        let text = "note: apikey=abcd\nkey: s3cr3t-value\nauth:\n  one:\n    password: p1p1p1\n";
        let (out, redactions) = redactor.redact(file, text.as_bytes());
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains("abcd") && !out.contains("s3cr3t-value") && !out.contains("p1p1p1"),
            "{out}"
        );
        assert_eq!(redactions.len(), 3);
        // Another file is not selected.
        let (same, none) = redactor.redact("host-collectors/other.txt", text.as_bytes());
        assert_eq!(same, text.as_bytes());
        assert!(none.is_empty());
        for bad in [
            "kind: Pod\n",
            "apiVersion: troubleshoot.sh/v1beta2\nkind: Redactor\nspec:\n  redactors:\n  - removals:\n      regex:\n      - redactor: '(unclosed'\n",
        ] {
            assert!(
                Redactor::default().add_documents("bad.yaml", bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn berths_rules_hide_secret_variables_and_keys_in_one_line() {
        let mut redactor = Redactor::default();
        redactor.add_berth_rules();
        assert_eq!(
            redacted(
                &redactor,
                r#""env": ["PATH=/bin", "DB_PASSWORD=hunter22", "API_TOKEN=xyz"]"#
            ),
            r#""env": ["PATH=/bin", "DB_PASSWORD=***HIDDEN***", "API_TOKEN=***HIDDEN***"]"#
        );
        assert_eq!(
            redacted(&redactor, "KEEPER_ADMIN_PASSWORD=s3cret"),
            "KEEPER_ADMIN_PASSWORD=***HIDDEN***"
        );
        assert_eq!(redacted(&redactor, "MONKEY=banana"), "MONKEY=banana");
        let inline =
            r#"{"key": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"}"#;
        let out = redacted(&redactor, inline);
        assert!(!out.contains("MHcCAQEE"), "{out}");
        assert!(
            out.contains("-----BEGIN EC PRIVATE KEY-----***HIDDEN***-----END"),
            "{out}"
        );
    }

    #[test]
    fn private_key_blocks_are_hidden_line_by_line() {
        let mut redactor = Redactor::default();
        redactor.add_berth_rules();
        let key = "x\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\ny";
        assert_eq!(
            redacted(&redactor, key),
            "x\n-----BEGIN PRIVATE KEY-----\n***HIDDEN***\n***HIDDEN***\n-----END PRIVATE KEY-----\ny"
        );
    }

    #[test]
    fn secret_values_are_hidden_whole_and_short_ones_left() {
        let mut redactor = Redactor::default();
        assert!(redactor.hide_value("token", "abcdef").unwrap());
        assert!(redactor.hide_value("token", "abcdefgh").unwrap());
        assert!(!redactor.hide_value("short", "abcde").unwrap());
        assert_eq!(
            redacted(&redactor, "t=abcdefgh u=abcdef v=abcde"),
            "t=***HIDDEN*** u=***HIDDEN*** v=abcde"
        );
        // Its other forms: JSON-escaped, base64, each line of a value of several.
        assert!(
            redactor
                .hide_value("key", "line-one-x\nline\"two\"")
                .unwrap()
        );
        let text =
            "a: \"line-one-x\\nline\\\"two\\\"\"\nb: bGluZS1vbmUteApsaW5lInR3byI=\nline-one-x";
        let out = redacted(&redactor, text);
        assert!(
            !out.contains("line-one-x") && !out.contains("bGluZS1v"),
            "{out}"
        );
    }
}
