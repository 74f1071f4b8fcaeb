//! The fleet's bundle: on the first node, one archive with a folder per node — its own
//! bundle, and each other node's as it sent it (`nodes/<name>/…`) — beside `nodes.json`
//! (which node sent its bundle, which failed to, which did not answer in time) and one
//! `analysis.json` holding every node's results, each titled with its node. A node's archive
//! is read as the untrusted input it is: regular files alone, at safe paths, within bounds.

use std::io::Read as _;
use std::path::Path;

use anyhow::Context as _;
use berth_fleet::first_node::bundles::Gathered;
use berth_formats::fleet::NodeRecord;
use berth_preflight::bundle::{archive, paths};
use serde_json::{Value, json};

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
/// `max_bytes` bounds what one node's bundle unpacks to.
pub fn write(
    own: &Collected,
    own_name: &str,
    gathered: &[(NodeRecord, Gathered)],
    waited: std::time::Duration,
    output: &Path,
    max_bytes: u64,
) -> anyhow::Result<Vec<NodeLine>> {
    let top = super::top_folder(output);
    let partial = output.with_extension("partial");
    let mut writer = archive::ArchiveWriter::create(&partial, &top)
        .with_context(|| format!("failed to create {}", partial.display()))?;
    let mut used = std::collections::BTreeSet::new();
    let mut folder_for = |name: &str, machine: &str| {
        let mut folder = paths::safe_name(name);
        if !used.insert(folder.clone()) {
            folder = format!("{folder}-{}", paths::safe_name(machine));
            used.insert(folder.clone());
        }
        folder
    };
    let mut lines = Vec::new();
    let mut analysis: Vec<Value> = Vec::new();
    let own_folder = folder_for(own_name, "first");
    writer.add_staging(&own.staging, &format!("nodes/{own_folder}"))?;
    analysis.extend(titled(
        own_name,
        berth_preflight::bundle::analysis(&own.report),
    ));
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
                let folder = folder_for(&record.info.name, &record.info.machine_id);
                match copy_node_archive(path, &mut writer, &format!("nodes/{folder}"), max_bytes) {
                    Ok(node_analysis) => {
                        analysis.extend(titled(&record.info.name, node_analysis));
                        line.bundle = "collected".into();
                        line.folder = format!("nodes/{folder}");
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
            let title = format!("{}: support bundle", record.info.name);
            analysis.push(json!({
                "name": format!("{}.support.bundle", paths::safe_name(&record.info.name).to_lowercase()),
                "insight": {"name": "support.bundle", "primary": title, "detail": problem, "severity": "error"},
                "severity": "error",
                "analyzerSpec": "",
                "error": problem,
            }));
        }
        lines.push(line);
    }
    writer.add_bytes(
        "version.yaml",
        archive::version_yaml(env!("CARGO_PKG_VERSION")).as_bytes(),
        0o644,
    )?;
    writer.add_bytes(
        "analysis.json",
        serde_json::to_string_pretty(&analysis)?.as_bytes(),
        0o644,
    )?;
    writer.add_bytes(
        "nodes.json",
        serde_json::to_string_pretty(&lines)?.as_bytes(),
        0o644,
    )?;
    writer.finish()?;
    fs_err::rename(&partial, output)?;
    Ok(lines)
}

/// A node's analysis entries, each titled with the node.
fn titled(node: &str, entries: Vec<Value>) -> Vec<Value> {
    entries
        .into_iter()
        .filter(Value::is_object)
        .map(|mut entry| {
            if let Some(primary) = entry
                .pointer("/insight/primary")
                .and_then(Value::as_str)
                .map(str::to_string)
            {
                entry["insight"]["primary"] = Value::String(format!("{node}: {primary}"));
            }
            entry
        })
        .collect()
}

/// Copies a node's archive under `under`, its own top folder left out; its analysis.json.
fn copy_node_archive(
    path: &Path,
    writer: &mut archive::ArchiveWriter,
    under: &str,
    max_bytes: u64,
) -> anyhow::Result<Vec<Value>> {
    let file = fs_err::File::open(path)?;
    let mut reader = tar::Archive::new(flate2::read::GzDecoder::new(file));
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
        total += size;
        if total > max_bytes {
            anyhow::bail!("it unpacks to more than {max_bytes} bytes");
        }
        let mode = entry.header().mode().unwrap_or(0o600) & 0o644;
        let target = format!("{under}/{inside}");
        if inside == "analysis.json" && size <= MAX_ANALYSIS_BYTES {
            let mut bytes = Vec::new();
            (&mut entry).take(size).read_to_end(&mut bytes)?;
            analysis = serde_json::from_slice::<Vec<Value>>(&bytes).unwrap_or_default();
            writer.add_bytes(&target, &bytes, mode)?;
        } else {
            writer.add_reader(&target, &mut entry, size, mode)?;
        }
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
        let cases: [Case; 4] = [
            (&[("b/../../etc/cron.d/x", b"x")], "not a path inside"),
            (&[("top-level-file", b"x")], "not under the bundle's folder"),
            (&[("b/big", &[0u8; 4096])], "more than 1000 bytes"),
            (
                &[
                    ("b/version.yaml", b"v"),
                    ("b/analysis.json", b"[{\"insight\": {\"primary\": \"x\"}}]"),
                ],
                "",
            ),
        ];
        for (entries, expected) in cases {
            let node = dir.path().join("node.tar.gz");
            crafted(&node, entries);
            let mut writer = archive::ArchiveWriter::create(&out, "fleet").unwrap();
            let result = copy_node_archive(&node, &mut writer, "nodes/n", 1000);
            writer.finish().unwrap();
            match result {
                Ok(analysis) => {
                    assert!(expected.is_empty(), "{entries:?} was taken");
                    assert_eq!(titled("n", analysis)[0]["insight"]["primary"], "n: x");
                }
                Err(error) => assert!(
                    !expected.is_empty() && error.to_string().contains(expected),
                    "{entries:?}: {error}"
                ),
            }
        }
    }
}
