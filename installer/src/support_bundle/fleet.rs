//! The fleet's bundle: on the first node, one archive with a folder per node — its own
//! bundle, and each other node's as it sent it (`nodes/<name>/…`) — beside `nodes.json`
//! (which node sent its bundle, which failed to, which did not answer in time) and one
//! `analysis.json` holding every node's results, each titled with its node. A node's archive
//! is read as the untrusted input it is: regular files alone, at safe paths, within bounds;
//! analysis entries of its that are not troubleshoot's are left out, and said to be; what it
//! sent reaches the admin's terminal escaped ([`said`]).

use std::io::Read as _;
use std::path::Path;

use anyhow::Context as _;
use berth_fleet::first_node::bundles::Gathered;
use berth_formats::fleet::NodeRecord;
use berth_preflight::support_bundle::{archive, paths};
use serde_json::Value;

use super::Collected;

/// The most files one node's bundle may hold.
const MAX_ENTRIES: usize = 100_000;
/// The most bytes of one node's analysis.json read.
const MAX_ANALYSIS_BYTES: u64 = 16 << 20;

/// One node's line in `nodes.json`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLine {
    pub name: String,
    pub machine_id: String,
    pub address: String,
    /// `collected`, `failed` or `missing`.
    pub bundle: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Its folder in the archive, where it has one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub folder: String,
}

/// Writes the fleet's archive to `output`: this node (`own_name`) and every node asked.
/// `max_bytes` bounds what one node's bundle unpacks to. Every file of another node's bundle
/// passes this node's redactors too (its `--redact` files and the secrets it knows), as do
/// the files that sum them up.
pub fn write(
    own: &Collected,
    own_name: &str,
    gathered: &[(NodeRecord, Gathered)],
    waited: std::time::Duration,
    output: &Path,
    max_bytes: u64,
) -> anyhow::Result<Vec<NodeLine>> {
    let mut lines = Vec::new();
    archive::write_archive(output, &super::top_folder(output), |writer| {
        let mut folders = Folders::default();
        let mut results = own.report.results.clone();
        let own_folder = folders.take(own_name);
        writer.add_staging(&own.staging, &format!("nodes/{own_folder}"))?;
        for result in &mut results {
            result.title = format!("{own_name}: {}", result.title);
        }
        let mut analysis = berth_preflight::support_bundle::analysis(&berth_preflight::Report {
            results,
            milliseconds: 0,
        });
        lines.push(NodeLine {
            name: own_name.to_string(),
            machine_id: String::new(),
            address: String::new(),
            bundle: "collected".into(),
            message: "this node".into(),
            folder: format!("nodes/{own_folder}"),
        });
        for (record, result) in gathered {
            let mut line = NodeLine {
                name: record.info.name.clone(),
                machine_id: record.info.machine_id.clone(),
                address: record.info.address.clone(),
                bundle: String::new(),
                message: String::new(),
                folder: String::new(),
            };
            let problem = match result {
                Gathered::Collected(path) => {
                    let folder = folders.take(&record.info.name);
                    let under = format!("nodes/{folder}");
                    match copy_node_archive(path, own, writer, &under, max_bytes) {
                        Ok(node_analysis) => {
                            analysis.extend(titled(&record.info.name, node_analysis));
                            line.bundle = "collected".into();
                            line.folder = under;
                            None
                        }
                        Err(error) => {
                            line.bundle = "failed".into();
                            Some(format!("its bundle could not be read: {error:#}"))
                        }
                    }
                }
                Gathered::Failed(message) => {
                    line.bundle = "failed".into();
                    Some(format!("it could not collect a bundle: {message}"))
                }
                Gathered::Missing => {
                    line.bundle = "missing".into();
                    Some(format!(
                        "no bundle came within {}s (last heard of {})",
                        waited.as_secs(),
                        record.last_contact
                    ))
                }
            };
            if let Some(problem) = problem {
                line.message = problem.clone();
                let missing = berth_preflight::CheckResult {
                    title: format!("{}: support bundle", record.info.name),
                    outcome: berth_preflight::Outcome::Fail,
                    message: problem,
                    uri: String::new(),
                    origin: "berth fleet".into(),
                    kind: "berth".into(),
                    ignored: false,
                };
                analysis.extend(berth_preflight::support_bundle::analysis(
                    &berth_preflight::Report {
                        results: vec![missing],
                        milliseconds: 0,
                    },
                ));
            }
            lines.push(line);
        }
        let closing = |path: &str, bytes: Vec<u8>| own.staging.redact(path, &bytes, false);
        writer.add_bytes(
            "version.yaml",
            archive::version_yaml(env!("CARGO_PKG_VERSION")).as_bytes(),
            0o644,
        )?;
        let text = serde_json::to_vec_pretty(&analysis).map_err(std::io::Error::other)?;
        writer.add_bytes("analysis.json", &closing("analysis.json", text), 0o644)?;
        let text = serde_json::to_vec_pretty(&lines).map_err(std::io::Error::other)?;
        writer.add_bytes("nodes.json", &closing("nodes.json", text), 0o644)
    })?;
    Ok(lines)
}

/// Each node's folder: its name, made unique.
#[derive(Default)]
struct Folders(std::collections::BTreeSet<String>);

impl Folders {
    fn take(&mut self, name: &str) -> String {
        let base = paths::safe_name(name);
        let mut folder = base.clone();
        let mut number = 1;
        while !self.0.insert(folder.clone()) {
            number += 1;
            folder = format!("{base}-{number}");
        }
        folder
    }
}

/// A line for the admin's terminal of what `node` sent or what became of it: on one line, the
/// control characters and terminal escapes a node may put in its name or its messages (or in
/// the names of its archive's files) escaped.
pub fn said(node: &str, text: &str) -> String {
    use berth_fleet::log::escape;
    format!("{}: {}", escape(node), escape(text))
}

/// A node's analysis entries, each titled with the node. An entry that is not troubleshoot's
/// (an object whose `insight.primary` is text) is left out, and one entry, titled with the
/// node, says how many were.
fn titled(node: &str, entries: Vec<Value>) -> Vec<Value> {
    let mut kept = Vec::new();
    let mut malformed = 0usize;
    for mut entry in entries {
        let Some(primary) = entry
            .pointer("/insight/primary")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            malformed += 1;
            continue;
        };
        entry["insight"]["primary"] = Value::String(format!("{node}: {primary}"));
        kept.push(entry);
    }
    if malformed > 0 {
        kept.extend(berth_preflight::support_bundle::analysis(&berth_preflight::Report {
            results: vec![berth_preflight::CheckResult {
                title: format!("{node}: analysis"),
                outcome: berth_preflight::Outcome::Warn,
                message: format!(
                    "{malformed} of the entries of its analysis.json are not troubleshoot's (an object whose insight.primary is text) and were left out; its own analysis.json is in its folder"
                ),
                uri: String::new(),
                origin: "berth fleet".into(),
                kind: "berth".into(),
                ignored: false,
            }],
            milliseconds: 0,
        }));
    }
    kept
}

/// Copies a node's archive under `under`, its own top folder left out, each file read whole
/// (as long as its header says, or the archive is refused) and passed through this node's
/// redactors; gives its analysis.json. A node's archive refused part-way leaves the files it
/// added so far, which `nodes.json` says were from a bundle that could not be read.
fn copy_node_archive(
    path: &Path,
    own: &Collected,
    writer: &mut archive::ArchiveWriter,
    under: &str,
    max_bytes: u64,
) -> anyhow::Result<Vec<Value>> {
    let file = fs_err::File::open(path)?;
    // Every gzip member, as `tar` reads the archive the admin is handed.
    let mut reader = tar::Archive::new(berth_formats::compression::decompress(file)?);
    let file_bytes = own.staging.limits().file_bytes;
    let mut total = 0u64;
    let mut count = 0usize;
    let mut analysis = Vec::new();
    for entry in reader.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        count += 1;
        if count > MAX_ENTRIES {
            anyhow::bail!("it holds more than {MAX_ENTRIES} files");
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some((_, inside)) = name.split_once('/') else {
            anyhow::bail!("{name} is not under the bundle's folder");
        };
        if !paths::is_safe_relative(inside) {
            anyhow::bail!("{name} is not a path inside the bundle");
        }
        let size = entry.header().size()?;
        if size > file_bytes {
            anyhow::bail!("{name} is {size} bytes, over the {file_bytes} a file may be");
        }
        total = total
            .checked_add(size)
            .filter(|total| *total <= max_bytes)
            .with_context(|| format!("it unpacks to more than {max_bytes} bytes"))?;
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry).take(size).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != size {
            anyhow::bail!("{name} ends before the {size} bytes its header says");
        }
        if inside == "analysis.json" {
            // One that is too large or no list counts as one malformed entry.
            analysis = Some(bytes.as_slice())
                .filter(|_| size <= MAX_ANALYSIS_BYTES)
                .and_then(|bytes| serde_json::from_slice::<Vec<Value>>(bytes).ok())
                .unwrap_or_else(|| vec![Value::Null]);
        }
        let closing = matches!(inside, "version.yaml" | "analysis.json")
            || inside.starts_with("execution-data/");
        let redacted = own.staging.redact(inside, &bytes, !closing);
        let mode = entry.header().mode().unwrap_or(0o600) & 0o644;
        let shown = own.staging.redact_name(inside);
        writer.add_bytes(&format!("{under}/{shown}"), &redacted, mode)?;
    }
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzip'd tar of `entries` (raw names, as a crafted archive may hold them).
    fn crafted(path: &Path, entries: &[(&str, &[u8])]) {
        let file = fs_err::File::create(path).unwrap().into_parts().0;
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        for (name, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
    }

    /// An archive's entries, and what reading it must say (nothing: it is taken).
    type Case<'a> = (&'a [(&'a str, &'a [u8])], &'a str);

    #[test]
    fn a_nodes_archive_is_read_as_untrusted_input() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.tar.gz");
        let folder = tempfile::tempdir().unwrap();
        let mut redactor = berth_preflight::support_bundle::redact::Redactor::default();
        redactor
            .hide_value("first node's secret", "planted-secret")
            .unwrap();
        let staging = berth_preflight::support_bundle::Staging::new(
            &folder.path().join("bundle"),
            redactor,
            berth_preflight::support_bundle::BundleLimits::default(),
        )
        .unwrap();
        let own = Collected {
            staging,
            report: Default::default(),
            secrets: 1,
            _folder: folder,
        };
        let cases: [Case; 5] = [
            (&[("b/../../etc/cron.d/x", b"x")], "not a path inside"),
            (&[("top-level-file", b"x")], "not under the bundle's folder"),
            (&[("b/big", &[0u8; 4096])], "more than 1000 bytes"),
            (
                &[
                    ("b/version.yaml", b"v"),
                    ("b/analysis.json", b"[{\"insight\": {\"primary\": \"x\"}}]"),
                    ("b/host-collectors/x.txt", b"token planted-secret here"),
                ],
                "",
            ),
            (&[("b/version.yaml", b"v"), ("b/other", b"")], ""),
        ];
        for (entries, expected) in cases {
            let node = dir.path().join("node.tar.gz");
            crafted(&node, entries);
            let mut result = None;
            archive::write_archive(&out, "fleet", |writer| {
                result = Some(copy_node_archive(&node, &own, writer, "nodes/n", 1000));
                Ok(())
            })
            .unwrap();
            match result.unwrap() {
                Ok(analysis) => {
                    assert!(expected.is_empty(), "{entries:?} was taken");
                    if !analysis.is_empty() {
                        assert_eq!(titled("n", analysis)[0]["insight"]["primary"], "n: x");
                        // The node's file passed the first node's redactors.
                        let listed = std::process::Command::new("tar")
                            .args([
                                "xzOf",
                                out.to_str().unwrap(),
                                "fleet/nodes/n/host-collectors/x.txt",
                            ])
                            .output()
                            .unwrap();
                        assert_eq!(
                            String::from_utf8_lossy(&listed.stdout),
                            "token ***HIDDEN*** here"
                        );
                    }
                }
                Err(error) => assert!(
                    !expected.is_empty() && error.to_string().contains(expected),
                    "{entries:?}: {error}"
                ),
            }
        }
    }

    /// Every entry of a node's analysis names the node; one that is not troubleshoot's is left
    /// out and counted, and so is an analysis.json that is no list.
    #[test]
    fn every_analysis_entry_of_a_node_is_attributed_and_malformed_ones_are_marked() {
        let entries = vec![
            serde_json::json!({"insight": {"primary": "x"}, "severity": "debug"}),
            serde_json::json!({"insight": {"primary": 5}, "severity": "error"}),
            serde_json::json!({"insight": "x"}),
            serde_json::json!("text"),
            Value::Null,
        ];
        let titled = titled("n", entries);
        assert_eq!(titled.len(), 2, "{titled:#?}");
        for entry in &titled {
            let primary = entry["insight"]["primary"].as_str().unwrap();
            assert!(primary.starts_with("n: "), "{entry}");
        }
        let detail = titled[1]["insight"]["detail"].as_str().unwrap();
        assert!(detail.starts_with("4 of the entries"), "{detail}");
        assert_eq!(titled[1]["severity"], "warn");
    }

    /// What a node sent reaches the admin's terminal with no control character, terminal
    /// escape or bidirectional override of its own, on one line.
    #[test]
    fn what_a_node_sent_reaches_the_terminal_escaped() {
        let line = said(
            "node\u{1b}]0;owned\u{7}",
            "no bundle: boom\u{1b}[2J\nforged line\u{9b}31m\u{202e}txt.exe",
        );
        assert!(
            !line.chars().any(|character| character.is_control()
                || matches!(character, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{line:?}"
        );
        assert!(line.contains("boom\\u{1b}[2J\\nforged line"), "{line}");
    }
}
