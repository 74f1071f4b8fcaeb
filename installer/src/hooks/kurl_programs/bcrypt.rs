//! kURL's `bcrypt` (`kurl_util/cmd/bcrypt`: each line of standard input hashed, one hash a
//! line, `-cost` 14) and `htpasswd` (`kurl_util/cmd/htpasswd`: `-u USER -p PASSWORD -f FILE`
//! sets the user's bcrypt hash in an htpasswd file). Hashes are Go's `$2a$` form.

use std::io::{BufRead, Write};

use super::Failure;
use super::go_flags::{Flag, FlagSet};

/// Go's bcrypt: the longest password it hashes, and the costs it takes.
const MAX_PASSWORD_BYTES: usize = 72;
const MIN_COST: u32 = 4;
const MAX_COST: u32 = 31;
const DEFAULT_COST: u32 = 10;

/// A bcrypt hash in Go's `$2a$` form. As Go's `GenerateFromPassword`: a cost below 4 is 10,
/// one above 31 and a password longer than 72 bytes are errors.
fn hash(password: &[u8], cost: u32) -> Result<String, Failure> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(Failure::Error(
            "bcrypt: password length exceeds 72 bytes".into(),
        ));
    }
    let cost = if cost < MIN_COST { DEFAULT_COST } else { cost };
    if cost > MAX_COST {
        return Err(Failure::Error(format!(
            "crypto/bcrypt: cost {cost} is outside allowed inclusive range {MIN_COST}..{MAX_COST}"
        )));
    }
    ::bcrypt::hash_with_result(password, cost)
        .map(|parts| parts.format_for_version(::bcrypt::Version::TwoA))
        .map_err(|error| Failure::Error(error.to_string()))
}

const BCRYPT_FLAGS: FlagSet = FlagSet {
    program: "bcrypt",
    flags: &[Flag {
        name: "cost",
        boolean: false,
        default: "14",
        usage: "cost",
    }],
};

/// The longest line read, as Go's `bufio.Scanner`: a longer one ends the input.
const MAX_LINE_BYTES: usize = 64 * 1024;

pub fn bcrypt(
    arguments: &[String],
    input: &mut impl BufRead,
    output: &mut dyn Write,
) -> Result<(), Failure> {
    let parsed = BCRYPT_FLAGS.parse(arguments)?;
    let cost: u32 = parsed.get("cost").parse().map_err(|_| {
        Failure::Usage(format!(
            "invalid value {:?} for flag -cost: parse error\n{}",
            parsed.get("cost"),
            BCRYPT_FLAGS.usage()
        ))
    })?;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = std::io::Read::take(&mut *input, MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if read == 0 || (line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n")) {
            return Ok(());
        }
        let mut password = line.as_slice();
        password = password.strip_suffix(b"\n").unwrap_or(password);
        password = password.strip_suffix(b"\r").unwrap_or(password);
        writeln!(output, "{}", hash(password, cost)?)?;
    }
}

const HTPASSWD_FLAGS: FlagSet = FlagSet {
    program: "htpasswd",
    flags: &[
        Flag {
            name: "u",
            boolean: false,
            default: "",
            usage: "username",
        },
        Flag {
            name: "p",
            boolean: false,
            default: "",
            usage: "password",
        },
        Flag {
            name: "f",
            boolean: false,
            default: "",
            usage: "filePath",
        },
    ],
};

/// The largest htpasswd file read: a registry's has a line or two.
const MAX_HTPASSWD_BYTES: u64 = 1 << 20;

/// The htpasswd file's default bcrypt cost (Go's `bcrypt.DefaultCost`, which kURL's htpasswd
/// library uses).
pub fn htpasswd(arguments: &[String]) -> Result<(), Failure> {
    let parsed = HTPASSWD_FLAGS.parse(arguments)?;
    let (user, password, file) = (parsed.get("u"), parsed.get("p"), parsed.get("f"));
    if user.is_empty() || password.is_empty() {
        return Err(Failure::UsageExit1(HTPASSWD_FLAGS.usage()));
    }
    if user.contains([':', '\n', '\r']) {
        return Err(Failure::Error(format!(
            "user {user:?}: an htpasswd user name holds no `:` and no line break"
        )));
    }
    let path = std::path::Path::new(file);
    // Every other user's line is kept; the user's own is replaced.
    let mut users = std::collections::BTreeMap::new();
    match crate::files::read_to_string_at_most(path, MAX_HTPASSWD_BYTES) {
        Ok(text) => {
            for line in text.lines().filter(|line| !line.trim().is_empty()) {
                let (name, hash) = line.split_once(':').ok_or_else(|| {
                    Failure::Error(format!("{file}: the line {line:?} is not user:hash"))
                })?;
                users.insert(name.to_string(), hash.to_string());
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error.into()),
    }
    users.insert(user.to_string(), hash(password.as_bytes(), DEFAULT_COST)?);
    let text: String = users
        .iter()
        .map(|(name, hash)| format!("{name}:{hash}\n"))
        .collect();
    // Hashes of passwords: readable by root alone.
    crate::files::write_atomically_with_mode(path, text.as_bytes(), 0o600)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kURL's kotsadm pipes one password and reads one `$2a$` hash of cost 14; the hash
    /// checks against the password.
    #[test]
    fn each_line_is_hashed_as_gos_bcrypt_hashes_it() {
        let mut output = Vec::new();
        bcrypt(
            &["--cost=4".to_string()],
            &mut &b"s3cret\r\nother\n"[..],
            &mut output,
        )
        .unwrap();
        let text = String::from_utf8(output).unwrap();
        let hashes: Vec<&str> = text.lines().collect();
        assert_eq!(hashes.len(), 2);
        assert!(hashes[0].starts_with("$2a$04$"), "{}", hashes[0]);
        assert!(::bcrypt::verify("s3cret", hashes[0]).unwrap());
        assert!(::bcrypt::verify("other", hashes[1]).unwrap());
        assert!(matches!(
            hash(&[b'x'; 73], 4),
            Err(Failure::Error(text)) if text.contains("exceeds 72 bytes")
        ));
        assert!(hash(&[b'x'; 72], 4).is_ok());
        assert!(hash(b"x", 2).unwrap().starts_with("$2a$10$"));
        assert!(matches!(hash(b"x", 32), Err(Failure::Error(_))));
    }

    #[test]
    fn htpasswd_sets_one_user_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("htpasswd");
        let file_text = file.to_str().unwrap().to_string();
        let run = |user: &str, password: &str| {
            htpasswd(&[
                "-u".into(),
                user.into(),
                "-p".into(),
                password.into(),
                "-f".into(),
                file_text.clone(),
            ])
        };
        run("kurl", "one").unwrap();
        run("other", "two").unwrap();
        run("kurl", "three").unwrap();
        let text = fs_err::read_to_string(&file).unwrap();
        let lines: Vec<(&str, &str)> = text
            .lines()
            .map(|line| line.split_once(':').unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0].0, "kurl");
        assert!(::bcrypt::verify("three", lines[0].1).unwrap());
        assert!(lines[0].1.starts_with("$2a$10$"));
        assert!(::bcrypt::verify("two", lines[1].1).unwrap());
        assert!(matches!(
            htpasswd(&["-u".into(), "kurl".into()]),
            Err(Failure::UsageExit1(_))
        ));
        assert!(run("a:b", "x").is_err());
    }
}
