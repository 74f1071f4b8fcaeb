//! The secrets Berth knows on a node, hidden wherever they appear in a bundle: the join
//! parameters marked secret (add-ons' tokens, the fleet's tokens), every value under a
//! secret-looking field of the specs kept on the node, of `node.yaml` and of the first node's
//! rollout records (a rollout's configuration sets add-ons' fields), and the values of
//! secret-looking variables in the environment the bundle is collected from.

use std::path::Path;

use berth_preflight::support_bundle::redact::Redactor;
use serde_json::Value;

use crate::node::layout::Layout;

// Parts of a field or variable name that mark its value secret: the redactor's own.
use berth_preflight::support_bundle::redact::SECRET_WORDS;

/// A spec or node file read at most.
const MAX_FILE_BYTES: usize = 4 << 20;

/// Whether a field or variable called `name` holds a secret (`secretAccessKey`,
/// `DB_PASSWORD`, `fleet-token`, `bootstrapToken`, `AWS_ACCESS_KEY_ID`).
pub fn is_secret_name(name: &str) -> bool {
    let plain: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| plain.contains(word))
        || plain.ends_with("key") && !plain.ends_with("publickey")
        || plain.contains("keyid")
}

/// Adds every secret Berth finds on the node under `layout` to `redactor`; how many.
pub fn gather(layout: &Layout, redactor: &mut Redactor) -> anyhow::Result<usize> {
    let mut found = 0;
    let mut hide = |name: &str, value: &str| -> anyhow::Result<()> {
        if redactor
            .hide_value(name, value)
            .map_err(anyhow::Error::msg)?
        {
            found += 1;
        }
        Ok(())
    };
    // Join parameters marked secret.
    if let Ok(file) = crate::kubernetes::join::JoinStore::new(layout.join_file()).load() {
        for (key, param) in &file.params {
            if param.secret || is_secret_name(key) {
                hide(&format!("Berth join parameter {key}"), &param.value)?;
            }
        }
    }
    // Every spec kept on the node, the node's own fields.
    let mut files = vec![layout.node_config()];
    if let Ok(entries) = fs_err::read_dir(layout.install_dir().join("installers")) {
        for entry in entries.flatten() {
            if let Ok(inner) = fs_err::read_dir(entry.path()) {
                files.extend(inner.flatten().map(|file| file.path()));
            }
        }
    }
    for file in files {
        for (name, value) in secret_fields(&file, MAX_FILE_BYTES) {
            hide(&format!("Berth spec field {name}"), &value)?;
        }
    }
    // The first node's rollouts: the configuration each gives its nodes, as applied and per
    // node (a record holds a line per node, so it may be larger than a spec).
    if let Ok(entries) = fs_err::read_dir(layout.fleet_dir().join("rollouts")) {
        for entry in entries.flatten() {
            let rollout = entry.path();
            for (name, value) in secret_fields(&rollout, berth_fleet::rollouts::MAX_RECORD_BYTES) {
                hide(&format!("Berth rollout field {name}"), &value)?;
            }
        }
    }
    // Variables that are not UTF-8 are left: no name of them is asked for.
    for (name, value) in std::env::vars_os() {
        if let (Some(name), Some(value)) = (name.to_str(), value.to_str())
            && is_secret_name(name)
        {
            hide(&format!("Berth environment variable {name}"), value)?;
        }
    }
    Ok(found)
}

/// The secret-looking fields of a YAML or JSON file (each document) of at most `max` bytes,
/// with their values.
fn secret_fields(path: &Path, max: usize) -> Vec<(String, String)> {
    let Ok(text) = berth_formats::files::read_to_string_at_most(path, max as u64) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    // JSON read as JSON: a large record reads fast.
    if path
        .extension()
        .is_some_and(|extension| extension == "json")
        && let Ok(value) = serde_json::from_str::<Value>(&text)
    {
        walk(&value, "", false, &mut found);
        return found;
    }
    for document in serde_norway::Deserializer::from_str(&text) {
        if let Ok(value) = <Value as serde::Deserialize>::deserialize(document) {
            walk(&value, "", false, &mut found);
        }
    }
    found
}

fn walk(value: &Value, name: &str, secret: bool, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                walk(child, key, secret || is_secret_name(key), found);
            }
        }
        Value::Array(list) => {
            for child in list {
                walk(child, name, secret, found);
            }
        }
        // Text alone: a flag or a number under a secret-looking name (`auth: {enabled: true}`,
        // `tokenTTL: 86400`) is no secret, and hiding it everywhere would garble the bundle.
        Value::String(text)
            if secret && !matches!(text.as_str(), "true" | "false" | "none" | "null") =>
        {
            found.push((name.to_string(), text.clone()))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_told_from_plain_ones() {
        for name in [
            "secretAccessKey",
            "DB_PASSWORD",
            "fleet-token",
            "bootstrapToken",
            "AWS_ACCESS_KEY_ID",
            "apiKey",
            "registryAuth",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "version",
            "port",
            "PATH",
            "publicKey",
            "keys",
            "monkeys_count",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    /// A secret field a rollout sets (for every node, or one node's as the record keeps it)
    /// is a secret Berth knows on the first node: its record is copied into the bundle.
    #[test]
    fn the_secret_fields_of_rollout_records_are_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let record = serde_json::json!({
            "rollout": {"spec": {"addon": "demo", "config": {"dbPassword": "rollout-secret-1"}}},
            "targets": [{"node": "node-2", "config": {"port": 8080, "apiToken": "node-secret-22"}}],
        });
        let folder = layout.fleet_dir().join("rollouts");
        fs_err::create_dir_all(&folder).unwrap();
        fs_err::write(folder.join("demo-2.json"), record.to_string()).unwrap();
        let mut redactor = Redactor::default();
        assert!(gather(&layout, &mut redactor).unwrap() >= 2);
        let text = fs_err::read(folder.join("demo-2.json")).unwrap();
        let (redacted, _) = redactor.redact("host-collectors/berth/rollouts/demo-2.json", &text);
        let redacted = String::from_utf8(redacted).unwrap();
        assert!(!redacted.contains("rollout-secret-1"), "{redacted}");
        assert!(!redacted.contains("node-secret-22"), "{redacted}");
        assert!(redacted.contains("8080"), "{redacted}");
    }
}
