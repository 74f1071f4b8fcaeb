//! `textAnalyze` over the bundle's files, as troubleshoot runs it on a host bundle: the files
//! `collectorName`/`fileName` name (a glob), each matched against `regex` (one result per
//! file, the last outcome whose `when` equals whether it matched) or `regexGroups` (the first
//! outcome whose `when` holds over the named groups, its message a template over them).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::checks::outcomes;
use crate::document::{Document, Item};
use crate::report::{CheckResult, Outcome};

/// The most files one analyzer reads, and the most bytes of each.
const MAX_FILES: usize = 1_000;
const MAX_FILE_BYTES: u64 = 64 << 20;

pub fn analyze(document: &Document, item: &Item, root: &Path) -> Vec<CheckResult> {
    let title = item
        .check_name()
        .unwrap_or("Regular Expression")
        .to_string();
    let origin = document.origin.at(item.line);
    let result = |outcome, message: String, uri: String| CheckResult {
        title: title.clone(),
        outcome,
        message,
        uri,
        origin: origin.clone(),
        kind: item.kind.clone(),
        ignored: false,
    };
    match run(item, root) {
        Ok(Found::NoFiles) if super::fields::flag(&item.fields, "ignoreIfNoFiles") => Vec::new(),
        Ok(Found::NoFiles) => vec![result(
            Outcome::Warn,
            "No matching files".into(),
            String::new(),
        )],
        Ok(Found::Results(results)) => results
            .into_iter()
            .map(|(outcome, message, uri)| result(outcome, message, uri))
            .collect(),
        Err(error) => vec![result(
            Outcome::Fail,
            format!("Analyzer Failed: {error} (at {origin})"),
            String::new(),
        )],
    }
}

enum Found {
    NoFiles,
    Results(Vec<(Outcome, String, String)>),
}

fn field<'a>(item: &'a Item, key: &str) -> &'a str {
    super::fields::text(&item.fields, key).unwrap_or("")
}

/// troubleshoot's path: `collectorName/fileName`, and `collectorName/*/*/fileName` for a
/// plain name of a pod's stdout, stderr or errors file.
fn pattern(collector: &str, file: &str) -> String {
    let special = ["-stdout.txt", "-stderr.txt", "-errors.json"];
    if special.iter().any(|suffix| file.ends_with(suffix)) && !file.contains(['*', '?', '[']) {
        return join(collector, &format!("*/*/{file}"));
    }
    join(collector, file)
}

fn join(left: &str, right: &str) -> String {
    match (left.trim_end_matches('/'), right.trim_start_matches('/')) {
        ("", right) => right.to_string(),
        (left, right) => format!("{left}/{right}"),
    }
}

fn run(item: &Item, root: &Path) -> Result<Found, String> {
    let collector = field(item, "collectorName");
    let file = field(item, "fileName");
    // Joined under the bundle's folder, as Go's filepath.Join does: a leading `/` stays inside.
    let relative = pattern(collector, file).trim_start_matches('/').to_string();
    if relative.split('/').any(|part| part == "..") {
        return Err(format!("`{relative}` leaves the bundle"));
    }
    let root_glob = glob::Pattern::escape(&root.to_string_lossy());
    let excluded: Vec<glob::Pattern> = match item.fields.get("excludeFiles") {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|text| {
                glob::Pattern::new(&root.join(pattern(collector, text)).to_string_lossy()).ok()
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut files: Vec<std::path::PathBuf> = glob::glob(&format!("{root_glob}/{relative}"))
        .map_err(|error| format!("`{relative}` is not a glob: {error}"))?
        .filter_map(Result::ok)
        .filter(|path| path.is_file() && !excluded.iter().any(|pattern| pattern.matches_path(path)))
        .take(MAX_FILES)
        .collect();
    files.sort();
    if files.is_empty() {
        return Ok(Found::NoFiles);
    }
    let regex_text = field(item, "regex");
    let groups_text = field(item, "regexGroups");
    if regex_text.is_empty() && groups_text.is_empty() {
        return Ok(Found::Results(vec![(
            Outcome::Fail,
            "Invalid analyzer".into(),
            String::new(),
        )]));
    }
    let compile = |text: &str| {
        regex::RegexBuilder::new(text)
            .size_limit(1 << 20)
            .build()
            .map_err(|error| format!("`{text}` is not a regex Berth can run: {error}"))
    };
    let spec_outcomes = outcomes(item)?;
    let regex = compile(if regex_text.is_empty() {
        groups_text
    } else {
        regex_text
    })?;
    let mut results = Vec::new();
    for path in files {
        let mut bytes = Vec::new();
        use std::io::Read as _;
        fs_err::File::open(&path)
            .and_then(|file| file.take(MAX_FILE_BYTES).read_to_end(&mut bytes))
            .map_err(|error| error.to_string())?;
        let text = String::from_utf8_lossy(&bytes);
        if !regex_text.is_empty() {
            let matched = regex.is_match(&text);
            let mut chosen = None;
            for outcome in &spec_outcomes {
                let default = outcome.outcome == Outcome::Pass;
                let when = match outcome.when.trim() {
                    "" => default,
                    other => other
                        .parse::<bool>()
                        .map_err(|_| format!("when `{other}` is not true or false"))?,
                };
                if when == matched {
                    chosen = Some((
                        outcome.outcome,
                        outcome.message.clone(),
                        outcome.uri.clone(),
                    ));
                }
            }
            results.extend(chosen);
        } else {
            let mut values: BTreeMap<String, String> = BTreeMap::new();
            if let Some(captures) = regex.captures(&text) {
                for name in regex.capture_names().flatten() {
                    if let Some(found) = captures.name(name) {
                        values.insert(name.to_string(), found.as_str().to_string());
                    }
                }
            }
            for outcome in &spec_outcomes {
                let when = outcome.when.trim();
                if when.is_empty() || holds(when, &values)? {
                    let data = crate::context::json_value(
                        &serde_json::to_value(&values).unwrap_or_default(),
                    );
                    let message = crate::template::render_message(&outcome.message, &data);
                    results.push((outcome.outcome, message, outcome.uri.clone()));
                    break;
                }
            }
        }
    }
    Ok(Found::Results(results))
}

/// `<group> <op> <value>`: compared as integers where the value is one, else equal or not.
fn holds(when: &str, values: &BTreeMap<String, String>) -> Result<bool, String> {
    let parts: Vec<&str> = when.split(' ').collect();
    let [group, operator, expected] = parts[..] else {
        return Err(format!("when `{when}`: expected `<group> <op> <value>`"));
    };
    let Some(actual) = values.get(group) else {
        return Ok(false);
    };
    if let Ok(expected) = expected.parse::<i64>() {
        let Ok(actual) = actual.trim().parse::<i64>() else {
            return Ok(false);
        };
        return Ok(match operator {
            "=" | "==" | "===" => actual == expected,
            "<" => actual < expected,
            ">" => actual > expected,
            "<=" => actual <= expected,
            ">=" => actual >= expected,
            _ => return Err(format!("when `{when}`: unknown operator `{operator}`")),
        });
    }
    Ok(match operator {
        "=" | "==" | "===" => actual == expected,
        _ => return Err(format!("when `{when}`: text is compared with = alone")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_troubleshoots_rewrite() {
        assert_eq!(
            pattern("host-collectors/run-host", "x.txt"),
            "host-collectors/run-host/x.txt"
        );
        assert_eq!(pattern("logs", "pod-stderr.txt"), "logs/*/*/pod-stderr.txt");
        assert_eq!(
            pattern("", "host-collectors/a/*.txt"),
            "host-collectors/a/*.txt"
        );
    }

    #[test]
    fn group_comparisons() {
        let values: BTreeMap<String, String> = [
            ("Restarts".to_string(), "4".to_string()),
            ("State".to_string(), "Degraded".to_string()),
        ]
        .into_iter()
        .collect();
        assert!(holds("Restarts > 3", &values).unwrap());
        assert!(!holds("Restarts <= 3", &values).unwrap());
        assert!(holds("State == Degraded", &values).unwrap());
        assert!(!holds("Missing == x", &values).unwrap());
        assert!(holds("State > x", &values).is_err());
    }
}
