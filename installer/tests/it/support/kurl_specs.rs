//! kURL's test-grid specs (`shared/fixtures/kurl-specs`) as the tests read them: each with its
//! `__testver__` as `latest`, and a dist offering a version of each add-on it names.

use std::path::PathBuf;

use serde_json::Value;

use super::{TestDist, kurl_fixtures};

/// kURL's keys that hold settings, not an add-on with a version.
pub const SETTINGS: [&str; 6] = [
    "kurl",
    "selinuxConfig",
    "iptablesConfig",
    "firewalldConfig",
    "ufwConfig",
    "helm",
];

/// The add-on folder a spec key names.
pub fn folder(key: &str) -> &str {
    match key {
        "certManager" => "cert-manager",
        "metricsServer" => "metrics-server",
        other => other,
    }
}

/// A version that the spec's request names: itself, `X.Y.0` for `X.Y.x`, `1.0.0` for latest.
pub fn version_for(request: &str) -> String {
    match request {
        "latest" | "__testver__" => "1.0.0".into(),
        request => match request.strip_suffix(".x") {
            Some(minor) => format!("{minor}.0"),
            None => request.into(),
        },
    }
}

/// The spec files, sorted, with their text (`__testver__` as `latest`).
pub fn specs() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(kurl_fixtures("kurl-specs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 60, "{} specs", files.len());
    files
        .into_iter()
        .map(|file| {
            let text = fs_err::read_to_string(&file)
                .unwrap()
                .replace("__testver__", "latest");
            (file, text)
        })
        .collect()
}

/// A dist offering, for each add-on of `spec`, the version its request names, each with the
/// install.sh `hooks` gives for its folder name and version.
pub fn dist_for(
    spec: &serde_json::Map<String, Value>,
    hooks: impl Fn(&str, &str) -> String,
) -> (TestDist, std::collections::BTreeMap<String, String>) {
    let mut dist = TestDist::new();
    let mut versions = std::collections::BTreeMap::new();
    for (key, section) in spec {
        if SETTINGS.contains(&key.as_str()) {
            continue;
        }
        let request = match &section["version"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let version = version_for(&request);
        let name = folder(key);
        dist.addon(name, &version, &hooks(name, &version));
        versions.insert(key.clone(), version);
    }
    (dist, versions)
}
