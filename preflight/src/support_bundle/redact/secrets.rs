//! The secret values the caller knows, found however they are written: each value's forms
//! (JSON-escaped, percent-encoded, base64, hex, split over two lines) in one Aho-Corasick pass,
//! and inside what a file encodes (base64 runs and lines, gzip).

use super::*;

/// The secret values the caller knows, found together in one pass (Aho-Corasick), longest
/// first, before any other rule changes the text; each value in each of its forms.
#[derive(Debug, Default)]
pub(super) struct Secrets {
    pub(super) values: Vec<(String, Vec<u8>)>,
    /// The forms held, so each is held once.
    pub(super) seen: std::collections::HashSet<Vec<u8>>,
    /// Built at the first redaction after a value is added (not at each of thousands added).
    pub(super) matcher: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>>,
    /// The longest form: how far a secret split over two lines reaches into each.
    pub(super) longest: usize,
    /// Whether a value holds a space, so `+` is read as one in percent-encoded text.
    pub(super) spaced: bool,
}

/// A known secret found: where (start, end) and which form.
pub(super) type Hit = (usize, usize, usize);

/// A run of base64 (standard or URL-safe alphabet) long enough to hold a secret.
pub(super) static BASE64_RUN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?-u)[A-Za-z0-9+/_\-]{{{MIN_BASE64_RUN},}}={{0,2}}"
    ))
    .ok()
});

impl Secrets {
    /// Holds `form` of a secret named `name`; whether it is new.
    pub(super) fn add(&mut self, name: &str, form: Vec<u8>) -> bool {
        if !self.seen.insert(form.clone()) {
            return false;
        }
        self.longest = self.longest.max(form.len());
        self.values.push((name.to_string(), form));
        self.matcher = std::sync::OnceLock::new();
        true
    }

    pub(super) fn matcher(&self) -> Option<&aho_corasick::AhoCorasick> {
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
    pub(super) fn hits(&self, lines: &[Vec<u8>]) -> Vec<Vec<Hit>> {
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
    pub(super) fn line_hits(&self, line: &[u8], budget: &mut usize) -> Vec<Hit> {
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
    pub(super) fn holds(&self, bytes: &[u8], depth: u32, budget: &mut usize) -> Option<usize> {
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
    pub(super) fn wrapped_base64_hits(
        &self,
        lines: &[Vec<u8>],
        hits: &mut [Vec<Hit>],
        budget: &mut usize,
    ) {
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
    pub(super) fn split_hits(&self, lines: &[Vec<u8>], hits: &mut [Vec<Hit>]) {
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
pub(super) fn percent_decoded(line: &[u8], plus: bool) -> Option<(Vec<u8>, Vec<usize>)> {
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
pub(super) fn plausible_base64(run: &[u8]) -> bool {
    run.iter()
        .any(|byte| byte.is_ascii_digit() || matches!(byte, b'+' | b'/'))
        || (run.iter().any(u8::is_ascii_lowercase) && run.iter().any(u8::is_ascii_uppercase))
}

/// A base64 run decoded (standard or URL-safe alphabet, padding or not, at most
/// [`MAX_BASE64_RUN`] characters of it), its length taken from `budget`.
pub(super) fn decode_base64(run: &[u8], budget: &mut usize) -> Option<Vec<u8>> {
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
pub(super) fn base64_line(line: &[u8]) -> Option<(usize, usize)> {
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
pub(super) const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

/// gzip data (every member) decompressed, at most `limit` bytes; and whether it was whole
/// (neither cut at `limit` nor broken).
pub(super) fn gunzip(bytes: &[u8], limit: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out);
    let whole = read.is_ok() && out.len() <= limit;
    out.truncate(limit);
    (out, whole)
}

/// The compression a file's content is in, told by its first bytes (never by its name).
pub(super) fn compression(bytes: &[u8]) -> Option<&'static str> {
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
pub(super) fn mask_hits(
    line: &[u8],
    mut hits: Vec<Hit>,
    mask: &[u8],
) -> (Vec<u8>, Vec<(i64, Vec<usize>)>) {
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

/// The forms a known secret `value` is looked for in, as written (see [`Redactor::hide_value`]).
pub(super) fn secret_forms(value: &str) -> Vec<String> {
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

pub(super) fn hex(bytes: &[u8], upper: bool) -> String {
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
pub(super) fn replace_literal(line: &[u8], value: &[u8]) -> Option<Vec<u8>> {
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
pub(super) fn redact_yaml_path(bytes: &[u8], path: &[String]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut value: Value = serde_norway::from_str(text).ok()?;
    if !mask_path(&mut value, path) {
        return None;
    }
    serde_norway::to_string(&value).ok().map(String::into_bytes)
}

pub(super) fn mask_path(value: &mut Value, path: &[String]) -> bool {
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
