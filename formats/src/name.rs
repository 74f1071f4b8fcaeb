//! Add-on names and versions become folder and file names on every node
//! (`addons/<name>/<version>/`, `<name>-<version>.tar.gz`, `state/<name>.json`), and they come
//! from places an attacker may write: a package's own `package.json`, a lock, versions.json, a
//! spec, a state record. Each is checked where it is read to be one plain path component, so no
//! name can climb out of the folder it is joined to.

use serde::{Deserialize, Deserializer};

/// The longest name or version accepted, in bytes.
pub const MAX_LENGTH: usize = 128;

/// Why a name or version was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{what} `{}` is not a plain name: {reason}; use letters, digits, `.`, `_`, `+` and `-`, starting with a letter or digit",
    text.escape_debug()
)]
pub struct NameError {
    pub what: &'static str,
    pub text: String,
    pub reason: &'static str,
}

/// Checks that `text` (an add-on name or version; `what` says which) is one plain path
/// component: 1 to [`MAX_LENGTH`] bytes of ASCII letters, digits, `.`, `_`, `+` and `-`,
/// starting with a letter or digit (so never `.`, `..` or an option).
pub fn check_plain(what: &'static str, text: &str) -> Result<(), NameError> {
    let refuse = |reason| {
        Err(NameError {
            what,
            text: text.to_string(),
            reason,
        })
    };
    if text.is_empty() {
        return refuse("it is empty");
    }
    if text.len() > MAX_LENGTH {
        return refuse("it is longer than 128 bytes");
    }
    if !text.as_bytes()[0].is_ascii_alphanumeric() {
        return refuse("it does not start with a letter or digit");
    }
    if !text
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'+' | b'-'))
    {
        return refuse("it holds a character other than letters, digits, `.`, `_`, `+` and `-`");
    }
    Ok(())
}

/// serde's `deserialize_with` for a field that holds an add-on name.
pub fn plain_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    check_plain("name", &text).map_err(serde::de::Error::custom)?;
    Ok(text)
}

/// serde's `deserialize_with` for a field that holds an add-on version.
pub fn plain_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    check_plain("version", &text).map_err(serde::de::Error::custom)?;
    Ok(text)
}

/// The same for an optional version.
pub fn plain_version_option<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    if let Some(text) = &text {
        check_plain("version", text).map_err(serde::de::Error::custom)?;
    }
    Ok(text)
}

/// The name of `known` nearest to `name`, when it is near enough to be a typo of it (`dmeo`
/// for `demo`): for the "did you mean" of every message that meets an unknown name.
pub fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = name.to_lowercase();
    known
        .into_iter()
        .map(|candidate| {
            (
                strsim::levenshtein(&wanted, &candidate.to_lowercase()),
                candidate,
            )
        })
        .min()
        .filter(|(distance, _)| *distance <= name.chars().count().max(3) / 2 + 1)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_names_and_versions_kurl_uses() {
        for text in [
            "containerd",
            "cert-manager",
            "1.6.20",
            "v5",
            "2.6.5-20221025",
            "0.87.1-80.14.4",
            "2023-04-13T03-08-07Z",
            "1.2.3+build.4",
            "host_openssl",
        ] {
            assert_eq!(check_plain("name", text), Ok(()), "{text}");
        }
    }

    #[test]
    fn refuses_anything_that_is_not_one_plain_component() {
        for text in [
            "", ".", "..", "../x", "l/../..", "a/b", "/abs", "-rf", ".hidden", "a b", "a\nb",
            "a\0b", "ä", "a;b", "$(x)",
        ] {
            assert!(check_plain("name", text).is_err(), "{text:?} was taken");
        }
        assert!(check_plain("name", &"a".repeat(MAX_LENGTH + 1)).is_err());
        assert!(check_plain("name", &"a".repeat(MAX_LENGTH)).is_ok());
    }

    #[test]
    fn the_error_names_what_was_refused_and_why() {
        let error = check_plain("version", "l/../..").unwrap_err().to_string();
        assert!(error.contains("version `l/../..`"), "{error}");
        assert!(error.contains("holds a character"), "{error}");
    }

    #[test]
    fn the_nearest_name_is_a_typos_and_no_other() {
        let known = ["demo", "containerd", "kubernetes"];
        assert_eq!(nearest("dmeo", known), Some("demo"));
        assert_eq!(nearest("Kubernets", known), Some("kubernetes"));
        assert_eq!(nearest("registry", known), None);
        assert_eq!(nearest("x", ["demo"]), None);
        assert_eq!(nearest("demo", []), None);
    }
}
