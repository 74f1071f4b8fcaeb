//! `berth support-bundle`: everything a vendor needs from a node in one archive, laid out as
//! troubleshoot.sh lays out a host bundle. Berth's built-in `SupportBundle` document
//! (`builtin/support-bundle.yaml`), the `support-bundle.yaml` of each add-on in place, a
//! journal collector for each systemd unit an add-on's health names, and the documents given
//! on the command line are collected by the host engine of `berth-preflight`; Berth's own
//! analyzers read its records. Everything is redacted before it is written: troubleshoot's
//! default redactors, the `Redactor` documents given, private keys, and every secret Berth
//! knows on the node ([`secrets`]).

mod analysis;
pub mod cluster;
pub mod fleet;
pub mod secrets;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use berth_preflight::support_bundle::redact::Redactor;
use berth_preflight::support_bundle::{self as engine, BundleLimits, Staging, archive};
use berth_preflight::{Document, DocumentKind, Origin, Report, TemplateContext};

use crate::node::layout::Layout;

/// Berth's own support bundle document.
pub const BUILTIN: &str = include_str!("../../builtin/support-bundle.yaml");
/// An add-on's own host collectors and analyzers, beside its hooks.
pub const ADDON_FILE: &str = "support-bundle.yaml";
/// The kinds a document given to `berth support-bundle` may be.
const KINDS: [DocumentKind; 3] = [
    DocumentKind::SupportBundle,
    DocumentKind::HostCollector,
    DocumentKind::HostPreflight,
];

/// What to collect, and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// SupportBundle, HostCollector, HostPreflight or Redactor files, besides the built-in.
    pub specs: Vec<PathBuf>,
    /// troubleshoot `Redactor` files.
    pub redactors: Vec<PathBuf>,
    /// Journals and log files of this long ago at most.
    pub since: Option<Duration>,
    pub limits: BundleLimits,
}

/// A node's bundle, collected into a folder of its own (removed when it is dropped).
pub struct Collected {
    pub staging: Staging,
    pub report: Report,
    /// Secret values Berth hid besides the redactors' patterns.
    pub secrets: usize,
    _folder: tempfile::TempDir,
}

/// Collects this node's bundle. `progress` hears of each collector as it starts.
pub fn collect(
    layout: &Layout,
    options: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<Collected> {
    let mut redactor = Redactor::defaults();
    redactor.add_berth_rules();
    for path in &options.redactors {
        let text = berth_formats::files::read_to_string_at_most(
            path,
            engine::redact::MAX_REDACTOR_BYTES as u64,
        )
        .with_context(|| format!("failed to read the redactor file {}", path.display()))?;
        redactor
            .add_documents(&path.display().to_string(), &text)
            .map_err(anyhow::Error::msg)?;
    }
    let secrets = secrets::gather(layout, &mut redactor)?;
    let context = TemplateContext {
        root: match layout.root().to_string_lossy().trim_end_matches('/') {
            "" => String::new(),
            root => root.to_string(),
        },
        ..TemplateContext::default()
    };
    // The given files first: a bad one is refused before anything is collected.
    let mut documents = Vec::new();
    for path in &options.specs {
        let text = berth_formats::files::read_to_string_at_most(
            path,
            berth_preflight::document::MAX_DOCUMENT_BYTES as u64,
        )
        .with_context(|| format!("failed to read {}", path.display()))?;
        documents.extend(documents_of(
            &path.display().to_string(),
            Some(path),
            &text,
            &context,
            &mut redactor,
        )?);
    }
    documents.extend(documents_of(
        cluster::BUILTIN_ORIGIN,
        None,
        BUILTIN,
        &context,
        &mut redactor,
    )?);
    // Each add-on's own document and units, and its health as probed now.
    progress("add-on records and health");
    let (states, damaged) = crate::node::state::load_as_seen(layout)?;
    let health = crate::health::check_all(layout, &states, &crate::health::RuntimeOnce::new());
    let mut units = std::collections::BTreeSet::new();
    for state in &states {
        let Some(current) = &state.current else {
            continue;
        };
        let folder = layout.addon_dir(&state.name, &current.target.version);
        let name = format!("{} {}", state.name, current.target.version);
        // kURL's add-ons ship theirs as Kubernetes objects, for the cluster.
        documents.extend(cluster::kurl_documents(&folder, &name));
        let file = folder.join(ADDON_FILE);
        if file.is_file() {
            let text = berth_formats::files::read_to_string_at_most(
                &file,
                berth_preflight::document::MAX_DOCUMENT_BYTES as u64,
            )?;
            documents.extend(documents_of(
                &name,
                Some(&file),
                &text,
                &context,
                &mut redactor,
            )?);
        }
        if let Some(record) = health.get(&state.name) {
            for component in &record.components {
                if component.probe == "systemd" {
                    units.extend(
                        component
                            .refs
                            .iter()
                            .map(|reference| reference.name.clone()),
                    );
                }
            }
        }
    }
    if !units.is_empty() {
        let collectors: Vec<serde_json::Value> = units
            .iter()
            .map(|unit| {
                serde_json::json!({"journald": {"collectorName": format!("unit-{unit}"), "units": [unit]}})
            })
            .collect();
        let value = serde_json::json!({
            "apiVersion": "troubleshoot.sh/v1beta2",
            "kind": "SupportBundle",
            "spec": {"hostCollectors": collectors},
        });
        let text = serde_norway::to_string(&value)?;
        documents.push(Document::parse_as(
            Origin::new("add-ons' systemd units", None),
            &text,
            &KINDS,
        )?);
    }
    if let Some(since) = options.since {
        since_for_journals(&mut documents, since);
    }
    let folder = tempfile::Builder::new()
        .prefix("berth-support-bundle-")
        .tempdir()
        .context("failed to make a folder to collect into")?;
    let mut limits = options.limits.clone();
    limits.since = options
        .since
        .and_then(|since| SystemTime::now().checked_sub(since));
    let staging = Staging::new(&folder.path().join("bundle"), redactor, limits)?;
    let mut report = engine::collect(&documents, &staging, progress)?;
    progress("in-cluster collectors");
    cluster::collect(
        layout,
        &documents,
        &staging,
        options.limits.collector_timeout,
    );
    let mut skipped = Vec::new();
    report
        .results
        .extend(engine::analyze_cluster(&documents, &staging, &mut skipped));
    if !skipped.is_empty() {
        let record =
            serde_json::json!({"error": "analyzers Berth does not run", "analyzers": skipped});
        let _ = staging.write(
            "collector-errors/analyzers-not-run.json",
            record.to_string().as_bytes(),
        );
    }
    report.results.extend(analysis::addons(&states, &health));
    report.results.extend(analysis::host_preflights(layout));
    for damage in damaged {
        report.results.push(berth_preflight::CheckResult {
            title: "Damaged add-on record".into(),
            outcome: berth_preflight::Outcome::Fail,
            message: damage.to_string(),
            uri: String::new(),
            origin: "berth built-in analysis".into(),
            kind: "berth".into(),
            ignored: false,
        });
    }
    archive::close(&staging, &report, env!("CARGO_PKG_VERSION")).map_err(anyhow::Error::msg)?;
    Ok(Collected {
        staging,
        report,
        secrets,
        _folder: folder,
    })
}

/// The documents of one file: templated, split on `---`, each a SupportBundle, HostCollector
/// or HostPreflight; a `Redactor` joins `redactor`.
fn documents_of(
    name: &str,
    path: Option<&Path>,
    text: &str,
    context: &TemplateContext,
    redactor: &mut Redactor,
) -> anyhow::Result<Vec<Document>> {
    let rendered = berth_preflight::template::render_kurl(name, text, &context.data())
        .map_err(|error| anyhow::anyhow!("{name}: {error}"))?;
    let mut documents = Vec::new();
    for (index, part) in split_documents(&rendered).into_iter().enumerate() {
        let value: serde_json::Value = serde_norway::from_str(part).map_err(|error| {
            anyhow::anyhow!("{name}: document {}: not YAML: {error}", index + 1)
        })?;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(serde_json::Value::as_str) == Some("Redactor") {
            redactor
                .add_documents(name, part)
                .map_err(anyhow::Error::msg)?;
            continue;
        }
        let document =
            Document::parse_as(Origin::new(name, path.map(Path::to_path_buf)), part, &KINDS)
                .map_err(|error| match error {
                    // Said as a bundle's file, not a host preflight's.
                    berth_preflight::PreflightError::Invalid { at, message } => {
                        anyhow::anyhow!("{at}: {message}")
                    }
                    other => other.into(),
                })?;
        documents.push(document);
    }
    Ok(documents)
}

/// A YAML stream's documents, as text.
fn split_documents(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            parts.push(&text[start..offset]);
            start = offset + line.len();
        }
        offset += line.len();
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .collect()
}

/// `--since` for every journald collector that gives no `since` of its own.
fn since_for_journals(documents: &mut [Document], since: Duration) {
    for document in documents {
        for item in &mut document.collectors {
            if item.kind == "journald" && !item.fields.contains_key("since") {
                item.fields.insert(
                    "since".into(),
                    serde_json::Value::String(format!("-{}s", since.as_secs())),
                );
            }
        }
    }
}

/// Writes the bundle to `output` (through a new file beside it, renamed when whole), its
/// entries under a folder named as the archive is.
pub fn write(collected: &Collected, output: &Path) -> anyhow::Result<()> {
    archive::write_archive(output, &top_folder(output), |writer| {
        writer.add_staging(&collected.staging, "")
    })
    .with_context(|| format!("failed to write the bundle {}", output.display()))
}

/// `support-bundle-2026-11-26T10_20_30` for `…/support-bundle-2026-11-26T10_20_30.tar.gz`.
pub fn top_folder(output: &Path) -> String {
    let name = output
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".tar.gz")
        .or_else(|| name.strip_suffix(".tgz"))
        .unwrap_or(&name);
    engine::paths::safe_name(stem)
}

/// troubleshoot's default name, in UTC: `support-bundle-2006-01-02T15_04_05.tar.gz`.
pub fn default_name() -> String {
    let now = berth_formats::time::now();
    let stamp = now.trim_end_matches('Z').replace(':', "_");
    format!("support-bundle-{stamp}.tar.gz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_split_and_names_follow_troubleshoots() {
        assert_eq!(split_documents("a: 1\n---\nb: 2\n").len(), 2);
        assert_eq!(top_folder(Path::new("/x/bundle.tar.gz")), "bundle");
        assert!(default_name().starts_with("support-bundle-20"));
        assert!(!default_name().contains(':'));
    }
}
