//! kURL's lists of add-on versions, `web/src/installers/versions.js`: for each add-on it names,
//! the versions kURL offers, the first being what `latest` means (kURL's comment: "first
//! version of each is latest"; its `bin/generate-addons.js` puts `latest` before that list).
//! The file is JavaScript; only its one object literal of string lists is read, not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where kURL keeps the file, under the repository that holds `addons/`.
pub const KURL_VERSION_LISTS: &str = "web/src/installers/versions.js";
/// The largest file read: kURL's is about 20 KiB.
const MAX_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct ListsError {
    pub path: PathBuf,
    pub problem: String,
}

/// The lists of the repository at `repository`, by add-on folder name; none when the
/// repository has no such file.
pub fn read(repository: &Path) -> Result<BTreeMap<String, Vec<String>>, ListsError> {
    let path = repository.join(KURL_VERSION_LISTS);
    let error = |problem: String| ListsError {
        path: path.clone(),
        problem,
    };
    let Ok(metadata) = fs_err::metadata(&path) else {
        return Ok(BTreeMap::new());
    };
    if metadata.len() > MAX_BYTES {
        return Err(error(format!(
            "{} bytes, more than the {MAX_BYTES} read",
            metadata.len()
        )));
    }
    let text = fs_err::read_to_string(&path).map_err(|source| error(source.to_string()))?;
    parse(&text).map_err(error)
}

/// One token of the object literal.
#[derive(Debug, PartialEq)]
enum Token {
    Text(String),
    Word(String),
    Mark(char),
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        Some('/') if last == '*' => break,
                        Some(next) => last = next,
                        None => return Err("a comment is not closed".into()),
                    }
                }
            }
            '"' | '\'' | '`' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => value.extend(chars.next()),
                        Some(end) if end == c => break,
                        Some(next) => value.push(next),
                        None => return Err("a string is not closed".into()),
                    }
                }
                tokens.push(Token::Text(value));
            }
            c if c.is_whitespace() => {}
            c if c.is_alphanumeric() || c == '_' || c == '$' || c == '.' => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_alphanumeric() || matches!(next, '_' | '$' | '.') {
                        word.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Word(word));
            }
            other => tokens.push(Token::Mark(other)),
        }
    }
    Ok(tokens)
}

/// The object literal after `InstallerVersions =`: `key: ["v", …], …`.
fn parse(text: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let tokens = tokens(text)?;
    let start = tokens
        .windows(3)
        .position(|window| {
            matches!(&window[0], Token::Word(word) if word.ends_with("InstallerVersions"))
                && window[1] == Token::Mark('=')
                && window[2] == Token::Mark('{')
        })
        .ok_or("no `InstallerVersions = {` object")?
        + 3;
    let mut lists = BTreeMap::new();
    let mut index = start;
    let next = |index: &mut usize| {
        let token = tokens.get(*index);
        *index += 1;
        token
    };
    loop {
        let key = match next(&mut index) {
            Some(Token::Mark('}')) => return Ok(lists),
            Some(Token::Mark(',')) => continue,
            Some(Token::Word(word) | Token::Text(word)) => word.clone(),
            other => return Err(format!("expected an add-on name, found {other:?}")),
        };
        if next(&mut index) != Some(&Token::Mark(':'))
            || next(&mut index) != Some(&Token::Mark('['))
        {
            return Err(format!("`{key}`: expected `: [` and a list of versions"));
        }
        let mut versions = Vec::new();
        loop {
            match next(&mut index) {
                Some(Token::Mark(']')) => break,
                Some(Token::Mark(',')) => {}
                Some(Token::Text(version)) => versions.push(version.clone()),
                other => return Err(format!("`{key}`: expected a version, found {other:?}")),
            }
        }
        lists.insert(key, versions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of kURL's file: comments between versions, quoted and bare keys.
    #[test]
    fn kurls_lists_read_in_order() {
        let lists = parse(
            "\n// first version of each is \"latest\"\nmodule.exports.InstallerVersions = {\n  kubernetes: [\n    \"1.19.16\",\n    // cron-kubernetes-update-136\n    \"1.36.3\",\n  ],\n  \"cert-manager\": ['1.9.1', /* pinned */ '1.14.2'],\n};\n",
        )
        .unwrap();
        assert_eq!(lists["kubernetes"], ["1.19.16", "1.36.3"]);
        assert_eq!(lists["cert-manager"], ["1.9.1", "1.14.2"]);
        assert!(parse("module.exports.Other = {}").is_err());
        assert!(parse("module.exports.InstallerVersions = { a: [\"1\"").is_err());
    }
}
