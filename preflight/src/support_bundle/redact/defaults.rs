//! The redactors a bundle gets without being given any: troubleshoot's defaults, and Berth's
//! own rules for secrets in the shapes they are commonly written in (and the names that mark a
//! value secret).

use super::*;

/// troubleshoot's default single-line redactors (`pkg/redact/redact.go`): name, regex, scan.
pub(super) const DEFAULT_SINGLE_LINE: &[(&str, &str, &str)] = &[
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
pub(super) const JSON_VALUE: &str = r#"(?i)("value": *")(?P<mask>.*[^\"]*)(")"#;

/// troubleshoot's default multi-line redactors: name, selector (line N), redactor (line N+1), scan.
pub(super) const DEFAULT_MULTI_LINE: &[(&str, &str, &str, &str)] = &[
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

/// Berth's own single-line rule, after troubleshoot's: a private key held in one line (PEM in
/// a JSON or YAML string).
pub(super) const BERTH_SINGLE_LINE: &[(&str, &str)] = &[(
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
pub(super) fn name_words(name: &str) -> Vec<String> {
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
pub(super) const NOT_SECRET_ENDS: [&str; 12] = [
    "name", "names", "file", "files", "path", "dir", "mode", "type", "ttl", "ref", "url", "uri",
];

/// Whether a name written in text (`NAME=`, `name:`) holds a secret: [`is_secret_name`], but
/// not a name that names or describes one ([`NOT_SECRET_ENDS`], `author`, `authority`), nor,
/// before a colon, a bare `key` (Kubernetes' tolerations, selectors and `secretKeyRef`s
/// name a key: `key: node-role.kubernetes.io/control-plane`).
pub(super) fn is_secret_text_name(name: &[u8], colon: bool) -> bool {
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
pub(super) fn is_plain_value(value: &[u8], yaml: bool) -> bool {
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
pub(super) enum Check {
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
pub(super) struct Shape {
    pub(super) regex: Regex,
    pub(super) check: Check,
    /// A bare value runs to the end of the line, less a ` #` or ` ;` comment (INI, YAML).
    pub(super) to_end: bool,
}

impl Shape {
    pub(super) fn new(regex: &str, check: Check, to_end: bool) -> Option<Self> {
        Some(Self {
            regex: Regex::new(regex).ok()?,
            check,
            to_end,
        })
    }

    /// The line with each secret value of this shape masked, or `None` where it holds none.
    pub(super) fn replace(&self, line: &[u8]) -> Option<Vec<u8>> {
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
pub(super) fn bare_end(value: &[u8]) -> usize {
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
pub(super) const NAME: &str = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*";
/// A double-quoted value (its closing quote may be missing: the value runs to the line's end).
pub(super) const DOUBLE_QUOTED: &str = r#""(?P<dq>(?:[^"\\]|\\.)*)(?:"|$)"#;
/// A single-quoted value.
pub(super) const SINGLE_QUOTED: &str = r"'(?P<sq>[^']*)(?:'|$)";
/// What a line must hold for a secret-looking name to be in it (every word of
/// [`SECRET_WORDS`] and a word `key` hold one of these).
pub(super) const SECRET_WORDS_SCAN: &str = r"(?i-u)pass|secret|token|credential|auth|key";

/// Berth's rules for secrets in the shapes they are commonly written in: name, what a line
/// must match for any to apply, shapes.
pub(super) fn berth_shapes() -> Vec<(&'static str, Regex, Vec<Shape>)> {
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
pub(super) fn yaml_block_regex() -> Option<Regex> {
    Regex::new(&format!(
        r#"(?-u)^(?P<indent>[ \t]*(?:-[ \t]+)?)["']?(?P<name>{NAME})["']?[ \t]*:[ \t]+[|>][-+0-9]*[ \t]*(?:#.*)?\r?$"#
    ))
    .ok()
}
