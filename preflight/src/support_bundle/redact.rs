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
    /// Values in the shapes secrets are written in (`NAME=value`, `name: value`, …), each
    /// applied to every line that `scan` matches.
    Shapes { scan: Regex, shapes: Vec<Shape> },
    /// The lines of a YAML block scalar (`password: |`) under a secret-looking key.
    YamlBlocks(Regex),
}

/// The secret values the caller knows, found together in one pass (Aho-Corasick), longest
/// first, before any other rule changes the text; each value in each of its forms.
#[derive(Debug, Default)]
struct Secrets {
    values: Vec<(String, Vec<u8>)>,
    /// The forms held, so each is held once.
    seen: std::collections::HashSet<Vec<u8>>,
    /// Built at the first redaction after a value is added (not at each of thousands added).
    matcher: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>>,
    /// The longest form: how far a secret split over two lines reaches into each.
    longest: usize,
    /// Whether a value holds a space, so `+` is read as one in percent-encoded text.
    spaced: bool,
}

/// A known secret found: where (start, end) and which form.
type Hit = (usize, usize, usize);

/// A run of base64 (standard or URL-safe alphabet) long enough to hold a secret.
static BASE64_RUN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?-u)[A-Za-z0-9+/_\-]{{{MIN_BASE64_RUN},}}={{0,2}}"
    ))
    .ok()
});

impl Secrets {
    /// Holds `form` of a secret named `name`; whether it is new.
    fn add(&mut self, name: &str, form: Vec<u8>) -> bool {
        if !self.seen.insert(form.clone()) {
            return false;
        }
        self.longest = self.longest.max(form.len());
        self.values.push((name.to_string(), form));
        self.matcher = std::sync::OnceLock::new();
        true
    }

    fn matcher(&self) -> Option<&aho_corasick::AhoCorasick> {
        self.matcher
            .get_or_init(|| {
                if self.values.is_empty() {
                    return None;
                }
                // A DFA's construction grows with the square of a long, repetitive form (30 s
                // for 10,000 bytes of one letter); past a few KiB the NFA is built instead.
                let kind = (self.longest > MAX_DFA_FORM)
                    .then_some(aho_corasick::AhoCorasickKind::ContiguousNFA);
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .kind(kind)
                    .build(self.values.iter().map(|(_, value)| value))
                    .ok()
            })
            .as_ref()
    }

    /// Every known secret in `lines`, line by line: as written, percent-encoded, in base64
    /// runs (decoded), in base64 wrapped over lines, and split over two lines.
    fn hits(&self, lines: &[Vec<u8>]) -> Vec<Vec<Hit>> {
        let mut hits: Vec<Vec<Hit>> = vec![Vec::new(); lines.len()];
        if self.matcher().is_none() {
            return hits;
        }
        let mut budget = MAX_DECODED_PER_FILE;
        for (line, found) in lines.iter().zip(hits.iter_mut()) {
            *found = self.line_hits(line, &mut budget);
        }
        self.wrapped_base64_hits(lines, &mut hits, &mut budget);
        self.split_hits(lines, &mut hits);
        hits
    }

    /// The known secrets in one line (or name).
    fn line_hits(&self, line: &[u8], budget: &mut usize) -> Vec<Hit> {
        let Some(matcher) = self.matcher() else {
            return Vec::new();
        };
        let mut hits: Vec<Hit> = matcher
            .find_iter(line)
            .map(|hit| (hit.start(), hit.end(), hit.pattern().as_usize()))
            .collect();
        // Percent-encoded (any characters encoded, either case of hex), and with `+` for a
        // space where a secret holds one.
        let percent = line.contains(&b'%');
        let plus = self.spaced && line.contains(&b'+');
        for with_plus in [false, true] {
            if (with_plus && !plus) || (!with_plus && !percent) {
                continue;
            }
            if let Some((view, starts)) = percent_decoded(line, with_plus) {
                hits.extend(matcher.find_iter(&view).map(|hit| {
                    (
                        starts[hit.start()],
                        starts[hit.end()],
                        hit.pattern().as_usize(),
                    )
                }));
            }
        }
        // Base64 runs, decoded: a secret anywhere in what they hold (HTTP Basic's
        // `user:password`, a docker config's `auth`) hides the whole run.
        if let Some(runs) = BASE64_RUN.as_ref() {
            for run in runs.find_iter(line) {
                if *budget == 0 {
                    break;
                }
                if !plausible_base64(run.as_bytes()) {
                    continue;
                }
                if let Some(form) = decode_base64(run.as_bytes(), budget)
                    .and_then(|decoded| self.holds(&decoded, MAX_DECODE_DEPTH - 1, budget))
                {
                    hits.push((run.start(), run.end(), form));
                }
            }
        }
        hits
    }

    /// The form of a known secret `bytes` hold, as written or under up to `depth` more
    /// layers of base64 or gzip.
    fn holds(&self, bytes: &[u8], depth: u32, budget: &mut usize) -> Option<usize> {
        let matcher = self.matcher()?;
        if let Some(hit) = matcher.find(bytes) {
            return Some(hit.pattern().as_usize());
        }
        if depth == 0 || *budget == 0 {
            return None;
        }
        if bytes.starts_with(GZIP_MAGIC) {
            let (inner, _) = gunzip(bytes, (*budget).min(MAX_GUNZIP_BYTES));
            *budget = budget.saturating_sub(inner.len());
            return self.holds(&inner, depth - 1, budget);
        }
        let runs = BASE64_RUN.as_ref()?;
        for run in runs.find_iter(bytes) {
            if *budget == 0 {
                return None;
            }
            if !plausible_base64(run.as_bytes()) {
                continue;
            }
            if let Some(form) = decode_base64(run.as_bytes(), budget)
                .and_then(|decoded| self.holds(&decoded, depth - 1, budget))
            {
                return Some(form);
            }
        }
        None
    }

    /// Base64 wrapped over lines (`base64`'s 76 columns, PEM's 64): lines of base64 alone,
    /// each as wide as the first but the last, decoded together; a secret in them hides
    /// every line of the block.
    fn wrapped_base64_hits(&self, lines: &[Vec<u8>], hits: &mut [Vec<Hit>], budget: &mut usize) {
        let mut index = 0;
        while index < lines.len() {
            let Some((start, end)) = base64_line(&lines[index]) else {
                index += 1;
                continue;
            };
            let width = end - start;
            let mut block = vec![(index, start, end)];
            let mut next = index + 1;
            if width >= 16 && !lines[index][..end].ends_with(b"=") {
                while let Some((start, end)) = lines.get(next).and_then(|line| base64_line(line)) {
                    if end - start > width {
                        break;
                    }
                    block.push((next, start, end));
                    next += 1;
                    if end - start < width || lines[next - 1][..end].ends_with(b"=") {
                        break;
                    }
                }
            }
            if block.len() >= 2 && *budget > 0 {
                let mut joined = Vec::new();
                for (line, start, end) in &block {
                    if joined.len() >= MAX_BASE64_RUN {
                        break;
                    }
                    joined.extend_from_slice(&lines[*line][*start..*end]);
                }
                if let Some(form) = decode_base64(&joined, budget)
                    .and_then(|decoded| self.holds(&decoded, MAX_DECODE_DEPTH - 1, budget))
                {
                    for (line, start, end) in block {
                        hits[line].push((start, end, form));
                    }
                }
            }
            index = next;
        }
    }

    /// Secrets split over two lines (a terminal's or a tool's wrapping): the end of one line
    /// joined to the start of the next (its indent left out, or not), a secret found across
    /// the join hidden in both.
    fn split_hits(&self, lines: &[Vec<u8>], hits: &mut [Vec<Hit>]) {
        let Some(matcher) = self.matcher() else {
            return;
        };
        let window = self.longest.saturating_sub(1).min(MAX_SPLIT_WINDOW);
        if window == 0 {
            return;
        }
        for index in 1..lines.len() {
            let left = &lines[index - 1];
            let left_end = left.len() - usize::from(left.ends_with(b"\r"));
            let left_start = left_end.saturating_sub(window);
            let right = &lines[index];
            let indent = right
                .iter()
                .take_while(|byte| matches!(byte, b' ' | b'\t'))
                .count();
            if left_end == left_start {
                continue;
            }
            let starts: &[usize] = if indent > 0 { &[0, indent] } else { &[0] };
            for &right_start in starts {
                let right_end = (right_start + window).min(right.len());
                if right_end <= right_start {
                    continue;
                }
                let mut joined = left[left_start..left_end].to_vec();
                let cut = joined.len();
                joined.extend_from_slice(&right[right_start..right_end]);
                let mut from = 0;
                while let Some(hit) =
                    matcher.find(aho_corasick::Input::new(&joined).span(from..joined.len()))
                {
                    if hit.start() >= cut {
                        break;
                    }
                    if hit.end() > cut {
                        let form = hit.pattern().as_usize();
                        hits[index - 1].push((left_start + hit.start(), left_end, form));
                        hits[index].push((right_start, right_start + hit.end() - cut, form));
                    }
                    from = hit.start() + 1;
                }
            }
        }
    }
}

/// `line` with each `%XX` decoded (and `+` read as a space where `plus`), and where each byte
/// of it starts in `line` (one more for its end); `None` where nothing was decoded.
fn percent_decoded(line: &[u8], plus: bool) -> Option<(Vec<u8>, Vec<usize>)> {
    let hex = |byte: u8| (byte as char).to_digit(16).map(|digit| digit as u8);
    let mut view = Vec::with_capacity(line.len());
    let mut starts = Vec::with_capacity(line.len() + 1);
    let mut decoded = false;
    let mut at = 0;
    while at < line.len() {
        starts.push(at);
        let escaped = (line[at] == b'%')
            .then(|| Some(hex(*line.get(at + 1)?)? * 16 + hex(*line.get(at + 2)?)?))
            .flatten();
        match (escaped, line[at]) {
            (Some(byte), _) => {
                view.push(byte);
                at += 3;
                decoded = true;
            }
            (None, b'+') if plus => {
                view.push(b' ');
                at += 1;
                decoded = true;
            }
            (None, byte) => {
                view.push(byte);
                at += 1;
            }
        }
    }
    starts.push(line.len());
    decoded.then_some((view, starts))
}

/// Whether a run of base64 characters is worth decoding: it holds a digit, `+` or `/`, or
/// letters of both cases (a plain word of one case is not base64 of a secret).
fn plausible_base64(run: &[u8]) -> bool {
    run.iter()
        .any(|byte| byte.is_ascii_digit() || matches!(byte, b'+' | b'/'))
        || (run.iter().any(u8::is_ascii_lowercase) && run.iter().any(u8::is_ascii_uppercase))
}

/// A base64 run decoded (standard or URL-safe alphabet, padding or not, at most
/// [`MAX_BASE64_RUN`] characters of it), its length taken from `budget`.
fn decode_base64(run: &[u8], budget: &mut usize) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true);
    let mut body = &run[..run.len().min(MAX_BASE64_RUN)];
    while let [rest @ .., b'='] = body {
        body = rest;
    }
    if body.len() % 4 == 1 {
        body = &body[..body.len() - 1];
    }
    let url_safe = body.iter().any(|byte| matches!(byte, b'-' | b'_'));
    if url_safe && body.iter().any(|byte| matches!(byte, b'+' | b'/')) {
        return None;
    }
    let alphabet = if url_safe {
        &base64::alphabet::URL_SAFE
    } else {
        &base64::alphabet::STANDARD
    };
    let decoded = GeneralPurpose::new(alphabet, config).decode(body).ok()?;
    *budget = budget.saturating_sub(decoded.len().max(1));
    Some(decoded)
}

/// Where a line that is base64 alone lies in it (its indent and a trailing `\r` left out).
fn base64_line(line: &[u8]) -> Option<(usize, usize)> {
    let start = line
        .iter()
        .take_while(|byte| matches!(byte, b' ' | b'\t'))
        .count();
    let end = line.len() - usize::from(line.ends_with(b"\r"));
    let text = line.get(start..end)?;
    let body = text.iter().take_while(|byte| **byte != b'=').count();
    let padding = text.len() - body;
    (body >= 4
        && padding <= 2
        && text[body..].iter().all(|byte| *byte == b'=')
        && text[..body]
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/')))
    .then_some((start, end))
}

/// gzip's first bytes (its magic, and deflate, the one method it defines).
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

/// gzip data (every member) decompressed, at most `limit` bytes; and whether it was whole
/// (neither cut at `limit` nor broken).
fn gunzip(bytes: &[u8], limit: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out);
    let whole = read.is_ok() && out.len() <= limit;
    out.truncate(limit);
    (out, whole)
}

/// The compression a file's content is in, told by its first bytes (never by its name).
fn compression(bytes: &[u8]) -> Option<&'static str> {
    let bzip2 = bytes.len() >= 10
        && bytes.starts_with(b"BZh")
        && (b'1'..=b'9').contains(&bytes[3])
        && (bytes[4..10] == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59]
            || bytes[4..10] == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90]);
    if bytes.starts_with(GZIP_MAGIC) {
        Some("gzip")
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd")
    } else if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Some("xz")
    } else if bzip2 {
        Some("bzip2")
    } else if bytes.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        Some("lz4")
    } else if bytes.starts_with(b"PK\x03\x04") {
        Some("zip")
    } else {
        None
    }
}

/// `line` with each range of `hits` (merged where they overlap or touch) replaced by `mask`;
/// and for each range, the bytes it took out and the forms found in it.
fn mask_hits(line: &[u8], mut hits: Vec<Hit>, mask: &[u8]) -> (Vec<u8>, Vec<(i64, Vec<usize>)>) {
    hits.retain(|(start, end, _)| start < end && *end <= line.len());
    hits.sort_unstable();
    let mut merged: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (start, end, form) in hits {
        match merged.last_mut() {
            Some((_, last_end, forms)) if start <= *last_end => {
                *last_end = (*last_end).max(end);
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
            _ => merged.push((start, end, vec![form])),
        }
    }
    let mut out = Vec::with_capacity(line.len());
    let mut last = 0;
    let mut found = Vec::with_capacity(merged.len());
    for (start, end, forms) in merged {
        out.extend_from_slice(&line[last..start]);
        out.extend_from_slice(mask);
        last = end;
        found.push(((end - start) as i64 - mask.len() as i64, forms));
    }
    out.extend_from_slice(&line[last..]);
    (out, found)
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

/// Berth's own single-line rule, after troubleshoot's: a private key held in one line (PEM in
/// a JSON or YAML string).
const BERTH_SINGLE_LINE: &[(&str, &str)] = &[(
    "Redact PEM private keys held in one line",
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)(?P<mask>.*?)(-----END [A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)",
)];

/// Parts of a field or variable name that mark its value secret, for the redactor's rules and
/// the fields the installer hides (`installer/src/support_bundle/secrets.rs`); `keydata` is a
/// kubeconfig's `client-key-data`.
pub const SECRET_WORDS: [&str; 10] = [
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
    "auth",
    "keydata",
];

/// Whether a field or variable called `name` holds a secret (`DB_PASSWORD`, `fleet-token`,
/// `secretAccessKey`, `AWS_ACCESS_KEY_ID`, `client-key-data`, `STRIPE_KEY`), as the installer
/// tells the fields it hides; but a name ends in "key" only as a word of its own (`API_KEY`,
/// `apiKey`, `tls.key`, not `MONKEY`), since in text every word ending so would be hidden.
pub fn is_secret_name(name: &str) -> bool {
    let plain: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let words = name_words(name);
    let last_is_key = words.last().is_some_and(|word| word == "key")
        && !(words.len() >= 2 && words[words.len() - 2] == "public");
    SECRET_WORDS.iter().any(|word| plain.contains(word)) || last_is_key || plain.contains("keyid")
}

/// A name's words, lower-cased: split at anything not a letter or digit and where a lower-case
/// letter or digit meets an upper-case one (`apiKey`, `API_KEY`, `api-key`: `api`, `key`).
fn name_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Ends of a secret-looking name whose value names or describes a secret rather than holds it
/// (`secretName`, `tokenFile`, `authorization-mode`, `tokenTTL`, `AUTH_URL`).
const NOT_SECRET_ENDS: [&str; 12] = [
    "name", "names", "file", "files", "path", "dir", "mode", "type", "ttl", "ref", "url", "uri",
];

/// Whether a name written in text (`NAME=`, `name:`) holds a secret: [`is_secret_name`], but
/// not a name that names or describes one ([`NOT_SECRET_ENDS`], `author`, `authority`), nor,
/// before a colon, a bare `key` (Kubernetes' tolerations, selectors and `secretKeyRef`s
/// name a key: `key: node-role.kubernetes.io/control-plane`).
fn is_secret_text_name(name: &[u8], colon: bool) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    let name = name.trim_start_matches('-');
    let plain: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let describes = NOT_SECRET_ENDS.iter().any(|end| plain.ends_with(end))
        || plain.contains("author")
        || (colon && plain == "key");
    is_secret_name(name) && !describes
}

/// Whether a value after a secret-looking name is plainly no secret: empty, already hidden, a
/// flag or null, a variable's name (`$DB_PASSWORD`, `${TOKEN}`); for a bare YAML value also a
/// whole number (`tokenTTL: 86400`) and what starts a block, a flow, an anchor or a tag.
fn is_plain_value(value: &[u8], yaml: bool) -> bool {
    let lower = value.to_ascii_lowercase();
    let identifier = |text: &[u8]| {
        !text.is_empty()
            && !text[0].is_ascii_digit()
            && text
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
    };
    let variable = match value {
        [b'$', b'{', inner @ .., b'}'] => !inner.is_empty() && !inner.contains(&b' '),
        [b'$', name @ ..] => identifier(name),
        _ => false,
    };
    value.is_empty()
        || value == MASK.as_bytes()
        || value.iter().all(|byte| *byte == b'*')
        || variable
        || matches!(
            lower.as_slice(),
            b"true"
                | b"false"
                | b"yes"
                | b"no"
                | b"on"
                | b"off"
                | b"null"
                | b"none"
                | b"nil"
                | b"~"
                | b"<none>"
                | b"<nil>"
                | b"<unset>"
        )
        || (yaml
            && (value.iter().all(u8::is_ascii_digit)
                || matches!(
                    value[0],
                    b'|' | b'>' | b'&' | b'*' | b'!' | b'{' | b'[' | b'#'
                )))
}

/// What decides whether a [`Shape`]'s value is hidden.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// Its `name` group looks secret ([`is_secret_text_name`]; `colon`: written `name:`)
    /// and the value is not plainly none ([`is_plain_value`]).
    Name { colon: bool },
    /// Always, unless empty or hidden already.
    Always,
    /// A URL's password: always, but not an image's tag (`name:tag@sha256:…`).
    UrlPassword,
}

/// A shape a secret is written in: a regex whose `dq`, `sq` or `bare` group is the value
/// (inside its quotes, which are kept).
#[derive(Debug)]
struct Shape {
    regex: Regex,
    check: Check,
    /// A bare value runs to the end of the line, less a ` #` or ` ;` comment (INI, YAML).
    to_end: bool,
}

impl Shape {
    fn new(regex: &str, check: Check, to_end: bool) -> Option<Self> {
        Some(Self {
            regex: Regex::new(regex).ok()?,
            check,
            to_end,
        })
    }

    /// The line with each secret value of this shape masked, or `None` where it holds none.
    fn replace(&self, line: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut last = 0;
        let mut changed = false;
        for captures in self.regex.captures_iter(line) {
            let quoted = captures.name("dq").or_else(|| captures.name("sq"));
            let Some(value) = quoted.or_else(|| captures.name("bare")) else {
                continue;
            };
            let (start, mut end) = (value.start(), value.end());
            if quoted.is_none() && self.to_end {
                end = start + bare_end(&line[start..end]);
            }
            let text = &line[start..end];
            let hidden = match self.check {
                Check::Name { colon } => {
                    let yaml_bare = colon && quoted.is_none();
                    captures
                        .name("name")
                        .is_some_and(|name| is_secret_text_name(name.as_bytes(), colon))
                        && !is_plain_value(text, yaml_bare)
                        // JSON's value unquoted is a number, a flag or an object: no secret.
                        && !(yaml_bare && captures.name("json").is_some())
                }
                Check::Always => !text.is_empty() && text != MASK.as_bytes(),
                Check::UrlPassword => {
                    let after = captures
                        .name("after")
                        .map_or(&b""[..], |after| after.as_bytes());
                    text != MASK.as_bytes()
                        && !after.to_ascii_lowercase().starts_with(b"sha256:")
                        && !after.to_ascii_lowercase().starts_with(b"sha512:")
                }
            };
            if !hidden || start < last {
                continue;
            }
            out.extend_from_slice(&line[last..start]);
            out.extend_from_slice(MASK.as_bytes());
            last = end;
            changed = true;
        }
        if !changed {
            return None;
        }
        out.extend_from_slice(&line[last..]);
        Some(out)
    }
}

/// Where a bare value running to the end of a line ends: before a ` #` or ` ;` comment and
/// trailing white space.
fn bare_end(value: &[u8]) -> usize {
    let mut end = value.len();
    for (at, pair) in value.windows(2).enumerate() {
        if matches!(pair[0], b' ' | b'\t') && matches!(pair[1], b'#' | b';') {
            end = at;
            break;
        }
    }
    while end > 0 && value[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// A name as it is written before `=` or `:`.
const NAME: &str = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*";
/// A double-quoted value (its closing quote may be missing: the value runs to the line's end).
const DOUBLE_QUOTED: &str = r#""(?P<dq>(?:[^"\\]|\\.)*)(?:"|$)"#;
/// A single-quoted value.
const SINGLE_QUOTED: &str = r"'(?P<sq>[^']*)(?:'|$)";
/// What a line must hold for a secret-looking name to be in it (every word of
/// [`SECRET_WORDS`] and a word `key` hold one of these).
const SECRET_WORDS_SCAN: &str = r"(?i-u)pass|secret|token|credential|auth|key";

/// Berth's rules for secrets in the shapes they are commonly written in: name, what a line
/// must match for any to apply, shapes.
fn berth_shapes() -> Vec<(&'static str, Regex, Vec<Shape>)> {
    let name = |colon| Check::Name { colon };
    let words = SECRET_WORDS_SCAN;
    let rules = [
        (
            "Redact values of secret-looking variables",
            words,
            vec![
                // `NAME=value`, `NAME="a b"`, `NAME='a b'`, `--db-password=…`, `?token=…`.
                Shape::new(
                    &format!(
                        r#"(?-u)(?:^|[^A-Za-z0-9_.\-])(?P<name>-{{0,2}}{NAME})=(?:{DOUBLE_QUOTED}|{SINGLE_QUOTED}|(?P<bare>(?:[^"'\s,;\\=]|\\[^"\s])(?:[^"\s,;\\]|\\[^"\s])*))"#
                    ),
                    name(false),
                    false,
                ),
                // INI and TOML: `password = a b` at a line's start, to its end.
                Shape::new(
                    &format!(
                        r#"(?-u)^[ \t]*(?P<name>{NAME})(?:[ \t]+=|=[ \t]+)[ \t]*(?:{DOUBLE_QUOTED}|{SINGLE_QUOTED}|(?P<bare>[^\s"'].*))"#
                    ),
                    name(false),
                    true,
                ),
            ],
        ),
        (
            "Redact values of secret-looking keys in YAML and JSON",
            words,
            vec![
                // YAML (and JSON a key to a line): `password: …`, `- token: "…"`.
                Shape::new(
                    &format!(
                        r#"(?-u)^[ \t]*(?:-[ \t]+)?(?:(?P<json>")|')?(?P<name>{NAME})["']?[ \t]*:[ \t]+(?:{DOUBLE_QUOTED}|{SINGLE_QUOTED}|(?P<bare>[^\s"'].*))"#
                    ),
                    name(true),
                    true,
                ),
                // JSON anywhere in a line: `"password":"…"`.
                Shape::new(
                    &format!(r#"(?-u)"(?P<name>{NAME})"[ \t]*:[ \t]*"(?P<dq>(?:[^"\\]|\\.)*)""#),
                    name(true),
                    false,
                ),
                // JSON in a JSON string: `\"password\":\"…\"`.
                Shape::new(
                    &format!(
                        r#"(?-u)\\"(?P<name>{NAME})\\"[ \t]*:[ \t]*\\"(?P<dq>(?:[^"\\]|\\[^"])*)\\""#
                    ),
                    name(true),
                    false,
                ),
            ],
        ),
        (
            "Redact credentials of HTTP authorization",
            r"(?i-u)authorization|bearer",
            vec![
                // `Authorization: Bearer …`, `Proxy-Authorization: Basic …`, Go's
                // `Authorization:[Bearer …]`.
                Shape::new(
                    r#"(?i-u)(?:^|[^A-Za-z0-9_\-])(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["'\[]?[ \t]*(?:(?:bearer|basic|token|negotiate|ntlm|apikey)[ \t]+)?(?P<bare>[^\s"',\]\[{}|>][^\s"',\]]*)"#,
                    Check::Always,
                    false,
                ),
                // A bearer token wherever it is written.
                Shape::new(
                    r"(?i-u)\bbearer[ \t]+(?P<bare>[A-Za-z0-9\-._~+/]{16,}=*)",
                    Check::Always,
                    false,
                ),
            ],
        ),
        (
            "Redact passwords in URLs",
            "://",
            vec![Shape::new(
                r#"(?i-u)\b[a-z][a-z0-9+.\-]*://[^:@/\s"'<>]*:(?P<bare>[^@/\s"'<>]+)@(?P<after>[^\s]{0,7})"#,
                Check::UrlPassword,
                false,
            )],
        ),
        (
            "Redact passwords given as -pPASSWORD",
            // MySQL's and MariaDB's clients and sshpass take a password so; other programs'
            // `-p` is a port, a path or a flag (`mkdir -p`, `netstat -plnt`).
            r"(?i-u)(?:^|[^A-Za-z0-9_\-])(?:mysql[a-z_\-]*|mariadb[a-z_\-]*|sshpass)(?:$|[^A-Za-z0-9_\-])",
            vec![Shape::new(
                &format!(
                    r#"(?-u)(?:^|[ \t])-p(?:{DOUBLE_QUOTED}|{SINGLE_QUOTED}|(?P<bare>[^\s"']+))"#
                ),
                Check::Always,
                false,
            )],
        ),
    ];
    rules
        .into_iter()
        .filter_map(|(name, scan, shapes)| {
            Some((
                name,
                Regex::new(scan).ok()?,
                shapes.into_iter().flatten().collect(),
            ))
        })
        .collect()
}

/// A YAML key (its own line) whose value is a block scalar: `password: |`, `- tls.key: >-`.
fn yaml_block_regex() -> Option<Regex> {
    Regex::new(&format!(
        r#"(?-u)^(?P<indent>[ \t]*(?:-[ \t]+)?)["']?(?P<name>{NAME})["']?[ \t]*:[ \t]+[|>][-+0-9]*[ \t]*(?:#.*)?\r?$"#
    ))
    .ok()
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

/// The forms a known secret `value` is looked for in, as written (see [`Redactor::hide_value`]).
fn secret_forms(value: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    let json = |text: &str| {
        let quoted = serde_json::to_string(text).unwrap_or_default();
        quoted
            .strip_prefix('"')
            .and_then(|inner| inner.strip_suffix('"'))
            .unwrap_or_default()
            .to_string()
    };
    // Go's encoding/json escapes HTML's characters, and the line and paragraph separators.
    let go = |escaped: &str| {
        escaped
            .replace('&', "\\u0026")
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    };
    let escaped = json(value);
    let mut forms = vec![
        value.to_string(),
        escaped.clone(),
        go(&escaped),
        json(&escaped),
        go(&json(&go(&escaped))),
        STANDARD.encode(value),
        STANDARD.encode(format!("{value}\n")),
        hex(value.as_bytes(), false),
        hex(value.as_bytes(), true),
    ];
    // In a longer base64 run, the secret at each offset (mod 3) encodes to the same
    // characters but for its first and last few, which it shares with its neighbours: those
    // are left out.
    for offset in 0..3 {
        let mut shifted = vec![0u8; offset];
        shifted.extend_from_slice(value.as_bytes());
        let encoded = STANDARD_NO_PAD.encode(&shifted);
        let first = (offset * 8).div_ceil(6);
        let last = (shifted.len() * 8) / 6;
        if let Some(inner) = encoded.get(first..last)
            && inner.len() >= 8
        {
            forms.push(inner.to_string());
        }
    }
    // A file's name keeps letters, digits, space, `.`, `_` and `-`; the rest become `_`.
    let safe: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.chars().filter(char::is_ascii_alphanumeric).count() >= MIN_SECRET_BYTES {
        forms.push(safe);
    }
    forms.extend(value.lines().map(str::trim).map(str::to_string));
    forms
}

fn hex(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|byte| {
            if upper {
                format!("{byte:02X}")
            } else {
                format!("{byte:02x}")
            }
        })
        .collect()
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

    fn knowing(value: &str) -> Redactor {
        let mut redactor = Redactor::default();
        assert!(redactor.hide_value("registry password", value).unwrap());
        redactor
    }

    fn berths() -> Redactor {
        let mut redactor = Redactor::default();
        redactor.add_berth_rules();
        redactor
    }

    fn b64(bytes: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn known_secrets_are_hidden_as_go_escapes_json() {
        let redactor = knowing("pa&ss<wo>rd\"1");
        // Go's encoding/json (ctr, kubectl) writes `&` `<` `>` as \u escapes.
        assert_eq!(
            redacted(
                &redactor,
                r#"{"data":"pa\u0026ss\u003cwo\u003erd\"1","other":"kept"}"#
            ),
            r#"{"data":"***HIDDEN***","other":"kept"}"#
        );
        // And that JSON inside a JSON string (kubectl's last-applied-configuration).
        let nested = r#"{"last":"{\"data\":\"pa\\u0026ss\\u003cwo\\u003erd\\\"1\"}"}"#;
        assert_eq!(
            redacted(&redactor, nested),
            r#"{"last":"{\"data\":\"***HIDDEN***\"}"}"#
        );
    }

    #[test]
    fn known_secrets_are_hidden_percent_encoded() {
        let redactor = knowing("p@ss w&rd/1");
        for (text, expected) in [
            (
                "GET /login?pw=p%40ss+w%26rd%2F1&next=%2Fhome",
                "GET /login?pw=***HIDDEN***&next=%2Fhome",
            ),
            ("p%40ss%20w%26rd%2f1", "***HIDDEN***"),
            ("url p%40ss%20w&rd/1 end", "url ***HIDDEN*** end"),
        ] {
            assert_eq!(redacted(&redactor, text), expected, "{text}");
        }
        // A `%` that is no escape, and `+` with no secret holding a space, are left.
        let plain = "100% done, 1+1=2";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn known_secrets_are_hidden_as_base64_with_echos_newline() {
        let redactor = knowing("hunter22secret");
        // `echo hunter22secret | base64`
        let text = format!("value: {}", b64(b"hunter22secret\n"));
        assert_eq!(redacted(&redactor, &text), "value: ***HIDDEN***");
    }

    #[test]
    fn known_secrets_are_hidden_inside_basic_auth_and_base64_runs() {
        let redactor = knowing("hunter22secret");
        let basic = b64(b"admin:hunter22secret");
        assert_eq!(
            redacted(&redactor, &format!("Authorization: Basic {basic}")),
            "Authorization: Basic ***HIDDEN***"
        );
        // A docker config's `auth` (base64 of user:password) in a Secret's base64.
        let config = format!(r#"{{"auths":{{"registry.example":{{"auth":"{basic}"}}}}}}"#);
        let secret = format!("  .dockerconfigjson: {}", b64(config.as_bytes()));
        assert_eq!(
            redacted(&redactor, &secret),
            "  .dockerconfigjson: ***HIDDEN***"
        );
        // gzip within base64 (a Helm release as its Secret holds it).
        let release = b64(b64(&gzip(br#"{"config":{"password":"hunter22secret"}}"#)).as_bytes());
        assert_eq!(
            redacted(&redactor, &format!("release: {release}")),
            "release: ***HIDDEN***"
        );
        // Base64 that holds no secret is kept.
        let other = format!("ca: {}", b64(b"just a certificate, nothing more"));
        assert_eq!(redacted(&redactor, &other), other);
    }

    #[test]
    fn known_secrets_are_hidden_in_base64_wrapped_over_lines() {
        let redactor = knowing("hunter22secret");
        // The secret straddles the first wrap (57 bytes a 76-column line).
        let data = format!("{}hunter22secret{}", "x".repeat(50), "y".repeat(80));
        let encoded = b64(data.as_bytes());
        let wrapped: Vec<&str> = encoded
            .as_bytes()
            .chunks(76)
            .map(|chunk| std::str::from_utf8(chunk).unwrap())
            .collect();
        let text = format!("data:\n  {}\nend", wrapped.join("\n  "));
        let out = redacted(&redactor, &text);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"data:"));
        assert_eq!(lines.last(), Some(&"end"));
        for line in &lines[1..lines.len() - 1] {
            assert_eq!(*line, "  ***HIDDEN***", "{out}");
        }
    }

    #[test]
    fn known_secrets_are_hidden_as_hex() {
        let redactor = knowing("hunter22secret");
        let lower: String = b"hunter22secret"
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let text = format!("dump {lower} and {}", lower.to_uppercase());
        assert_eq!(
            redacted(&redactor, &text),
            "dump ***HIDDEN*** and ***HIDDEN***"
        );
    }

    #[test]
    fn known_secrets_split_over_two_lines_are_hidden_in_both() {
        let redactor = knowing("hunter22secret");
        assert_eq!(
            redacted(&redactor, "login with hunter22se\ncret then go\r\nnext"),
            "login with ***HIDDEN***\n***HIDDEN*** then go\r\nnext"
        );
        // Continued on an indented line.
        assert_eq!(
            redacted(&redactor, "pw: hunter\r\n    22secret\nnext"),
            "pw: ***HIDDEN***\r\n    ***HIDDEN***\nnext"
        );
        // Two lines that do not make it are kept.
        let plain = "hunter22\nsomething";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn known_secrets_are_hidden_in_a_files_name() {
        let redactor = knowing("hunter22secret");
        let file = "host-collectors/copy/backup-hunter22secret.log";
        assert_eq!(
            redactor.redact_name(file),
            "host-collectors/copy/backup-___HIDDEN___.log"
        );
        // And in what redactions.json says of the file.
        let (out, redactions) = redactor.redact(file, b"pw hunter22secret");
        assert_eq!(out, b"pw ***HIDDEN***");
        assert_eq!(
            redactions[0].file,
            "host-collectors/copy/backup-___HIDDEN___.log"
        );
        // A name is written in its safe characters: a secret's others become `_`.
        let redactor = knowing("p@ss/w0rd!x");
        assert_eq!(
            redactor.redact_name("host-collectors/copy/p_ss_w0rd_x.txt"),
            "host-collectors/copy/___HIDDEN___.txt"
        );
        assert_eq!(redactor.redact_name("a/plain.txt"), "a/plain.txt");
    }

    #[test]
    fn gzip_content_is_told_by_its_bytes_and_checked() {
        let mut redactor = knowing("hunter22secret");
        redactor.add_berth_rules();
        let file = "host-collectors/copy/app.log";
        let text = b"started\nregistry password hunter22secret\nDB_PASSWORD=s3cr3t-db\n";
        let (out, redactions) = redactor.redact(file, &gzip(text));
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("[Berth: this file held gzip-compressed data with secrets in it"),
            "{out}"
        );
        assert!(
            out.ends_with("\nstarted\nregistry password ***HIDDEN***\nDB_PASSWORD=***HIDDEN***\n"),
            "{out}"
        );
        // Lines counted in what is written, after the note.
        assert!(redactions.iter().any(|redaction| redaction.line == 3));
        assert!(redactions.iter().any(|redaction| redaction.line == 0));
        // gzip that holds no secret is kept as it is.
        let clean = gzip(b"started\nall well\n");
        let (out, redactions) = redactor.redact(file, &clean);
        assert_eq!(out, clean);
        assert!(redactions.is_empty());
        // gzip broken, and compression Berth cannot read, are left out, and said so.
        let mut broken = gzip(text);
        broken.truncate(broken.len() / 2);
        let zstd = [&[0x28, 0xb5, 0x2f, 0xfd][..], b"hunter22secret"].concat();
        for (bytes, kind) in [(broken, "gzip"), (zstd, "zstd")] {
            let (out, redactions) = redactor.redact(file, &bytes);
            let out = String::from_utf8(out).unwrap();
            assert!(
                out.starts_with(&format!("[Berth: this file held {kind}-compressed data")),
                "{out}"
            );
            assert!(!out.contains("hunter22secret") && redactions.len() == 1);
        }
    }

    #[test]
    fn quoted_values_of_secret_variables_are_hidden_whole() {
        assert_eq!(
            redacted(
                &berths(),
                r#"DB_PASSWORD="hunter 22" API_TOKEN='a b c' next"#
            ),
            r#"DB_PASSWORD="***HIDDEN***" API_TOKEN='***HIDDEN***' next"#
        );
        assert_eq!(
            redacted(&berths(), r#"export SECRET="with \"quote\" inside""#),
            r#"export SECRET="***HIDDEN***""#
        );
    }

    #[test]
    fn names_ending_in_key_are_secret_as_the_installers_fields_are() {
        assert_eq!(
            redacted(
                &berths(),
                "ENCRYPTION_KEY=abc123 licenseKey=xyz signing.key=k1k1 --tls-key=k2k2"
            ),
            "ENCRYPTION_KEY=***HIDDEN*** licenseKey=***HIDDEN*** signing.key=***HIDDEN*** --tls-key=***HIDDEN***"
        );
        let plain = "MONKEY=banana PUBLIC_KEY=ssh-ed25519 KEYS=a,b";
        assert_eq!(redacted(&berths(), plain), plain);
        for name in [
            "secretAccessKey",
            "DB_PASSWORD",
            "fleet-token",
            "bootstrapToken",
            "AWS_ACCESS_KEY_ID",
            "apiKey",
            "registryAuth",
            "client-key-data",
            "STRIPE_KEY",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["version", "port", "PATH", "publicKey", "keys", "monkey"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn yaml_and_json_values_under_secret_keys_are_hidden() {
        let text = "password: hunter22\n  token: \"abc def\"  # the API's\n- client-key-data: LS0tLS1CRUdJTi\nstringData:\n  db.password: 'p w'\n{\"user\":\"bob\",\"password\":\"hunter22\",\"tokenTTL\":3600}";
        assert_eq!(
            redacted(&berths(), text),
            "password: ***HIDDEN***\n  token: \"***HIDDEN***\"  # the API's\n- client-key-data: ***HIDDEN***\nstringData:\n  db.password: '***HIDDEN***'\n{\"user\":\"bob\",\"password\":\"***HIDDEN***\",\"tokenTTL\":3600}"
        );
        // A block under a secret key, to the key's indent.
        let block = "tls.key: |\n  MIIEvQIBADANBg\n\n  kqhkiG9w0BAQEF\nother: kept\n";
        assert_eq!(
            redacted(&berths(), block),
            "tls.key: |\n  ***HIDDEN***\n\n  ***HIDDEN***\nother: kept\n"
        );
        assert_eq!(
            redacted(&berths(), "- password: >-\r\n    a b\r\n  next: 1\r\n"),
            "- password: >-\r\n    ***HIDDEN***\r\n  next: 1\r\n"
        );
        // What names or describes a secret, and Kubernetes' `key`s, are kept.
        let plain = "secretName: registry-creds\ntokenTTL: 86400\nautomountServiceAccountToken: false\n- key: node-role.kubernetes.io/control-plane\n  certificate-authority-data: LS0tCERT\nsecretKeyRef:\n  key: password\n\"secretExists\": true,\npassword: ${DB_PASSWORD}\nauthor: Jane";
        assert_eq!(redacted(&berths(), plain), plain);
    }

    #[test]
    fn bearer_and_authorization_credentials_are_hidden() {
        let redactor = berths();
        for (text, expected) in [
            (
                r#"curl -H "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig" https://x"#,
                r#"curl -H "Authorization: Bearer ***HIDDEN***" https://x"#,
            ),
            (
                "Authorization: Basic YWRtaW46aHVudGVyMjI=",
                "Authorization: Basic ***HIDDEN***",
            ),
            (
                "headers map[Authorization:[Bearer abcdefghijklmnop1234]]",
                "headers map[Authorization:[Bearer ***HIDDEN***]]",
            ),
            (
                "token sent as bearer abcdefghijklmnop1234 to the API",
                "token sent as bearer ***HIDDEN*** to the API",
            ),
        ] {
            assert_eq!(redacted(&redactor, text), expected, "{text}");
        }
        let plain = "using bearer token authentication\n--authorization-mode=Node,RBAC";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn passwords_in_urls_are_hidden_and_the_rest_kept() {
        let redactor = berths();
        for (text, expected) in [
            (
                "REDIS=redis://:hunter22@redis:6379/0",
                "REDIS=redis://:***HIDDEN***@redis:6379/0",
            ),
            (
                "cloning https://alice:pw123456@git.example/repo.git",
                "cloning https://alice:***HIDDEN***@git.example/repo.git",
            ),
            ("amqp://bob:s3cret@mq", "amqp://bob:***HIDDEN***@mq"),
        ] {
            assert_eq!(redacted(&redactor, text), expected, "{text}");
        }
        let plain = "imageID: docker-pullable://nginx:1.25@sha256:0123abcd\nhttp://host:8080/path";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn ini_and_toml_values_with_spaces_around_the_equals_are_hidden() {
        let text = "[default]\nregion = us-east-1\naws_secret_access_key = abc/def\npassword = hunter 22 ; old\ntoken = \"t0k3n\"\ntimeout = 30\ntoken_ttl = 30";
        assert_eq!(
            redacted(&berths(), text),
            "[default]\nregion = us-east-1\naws_secret_access_key = ***HIDDEN***\npassword = ***HIDDEN*** ; old\ntoken = \"***HIDDEN***\"\ntimeout = 30\ntoken_ttl = 30"
        );
    }

    #[test]
    fn mysql_style_dash_p_passwords_are_hidden() {
        let redactor = berths();
        assert_eq!(
            redacted(&redactor, "mysql -u root -phunter22 -P3306 app"),
            "mysql -u root -p***HIDDEN*** -P3306 app"
        );
        assert_eq!(
            redacted(&redactor, "/usr/bin/mysqldump -p'a b' db"),
            "/usr/bin/mysqldump -p'***HIDDEN***' db"
        );
        let plain = "mkdir -p /var/lib/x\nnetstat -plnt\nssh -p22 host\nmysql -p app";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn ordinary_text_is_left_as_it_is() {
        let mut redactor = Redactor::defaults();
        redactor.add_berth_rules();
        redactor
            .hide_value("registry password", "hunter22secret")
            .unwrap();
        let plain = "kube-apiserver --authorization-mode=Node,RBAC --service-account-key-file=/etc/kubernetes/pki/sa.pub\n\
                     level=info msg=\"token refreshed\" took=3ms\n\
                     Failed to get token: connection refused\n\
                     TOKEN=$TOKEN\n\
                     Kubernetes containerd overlay 100% (6.1.0+deb12) 2024-01-02T03:04:05+00:00\n\
                     sha256:0f3e9a1b2c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f\n\
                     keyExists: true\n";
        assert_eq!(redacted(&redactor, plain), plain);
    }

    #[test]
    fn no_input_makes_redaction_panic() {
        let mut redactor = Redactor::defaults();
        redactor.add_berth_rules();
        redactor.hide_value("secret", "hunter22 secret").unwrap();
        redactor.hide_value("long", &"x".repeat(10_000)).unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = |len: usize| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 24) as u8
                })
                .collect()
        };
        let mut inputs: Vec<Vec<u8>> = (0..50).map(|len| random(len * 37)).collect();
        inputs.extend([
            Vec::new(),
            b"%".to_vec(),
            b"%4".to_vec(),
            b"a=%zz+%".to_vec(),
            b"=".to_vec(),
            b"PASSWORD=\"".to_vec(),
            b"password: |\n".to_vec(),
            b"\n\n\r\n".to_vec(),
            GZIP_MAGIC.to_vec(),
            [GZIP_MAGIC, &random(100)].concat(),
            b"BZh91AY&SY".to_vec(),
            "==========\n====\n".as_bytes().to_vec(),
            "aGVsbG8=\naGVsbG8=\n".as_bytes().to_vec(),
            "é=ü password: ñ \u{2028}".as_bytes().to_vec(),
            vec![b'A'; 3 * MAX_BASE64_RUN],
        ]);
        for input in inputs {
            let _ = redactor.redact("host-collectors/x.log", &input);
            let _ = redactor.redact_name(&String::from_utf8_lossy(&input));
        }
    }
}
