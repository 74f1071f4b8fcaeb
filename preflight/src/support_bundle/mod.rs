//! Support bundles, as troubleshoot.sh's `support-bundle` collects a host's: every host
//! collector of the `SupportBundle` (and `HostCollector`) documents given, written where
//! troubleshoot writes it under `host-collectors/`, through the redactors, within bounds;
//! then the host analyzers over what was collected; then `analysis.json`, `version.yaml` and
//! the execution summary, and one `.tar.gz` whose layout troubleshoot's reader opens.
//!
//! Nothing a collector gathers reaches the disk before it is redacted. A collector that fails,
//! times out or runs past a bound is recorded (`host-collectors/errors/…`) and the bundle goes
//! on without it.

pub mod archive;
pub mod command;
pub mod fields;
mod host_files;
pub mod paths;
pub mod redact;
mod text_analyze;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::PreflightError;
use crate::checks::{self, Limits};
use crate::document::{Document, Item};
use crate::report::{CheckResult, Report};
use redact::{RedactionList, Redactor};

/// File collectors run at once: most of their time is spent waiting on the programs they run.
const FILE_WORKERS: usize = 8;

/// The bounds a bundle keeps to.
#[derive(Debug, Clone)]
pub struct BundleLimits {
    /// The longest one program collector runs (`run`, `journald`), whatever its spec says.
    pub collector_timeout: Duration,
    /// The most bytes one collected file keeps.
    pub file_bytes: u64,
    /// The most bytes the bundle's files hold together, before compression.
    pub total_bytes: u64,
    /// Whether filesystemPerformance runs (off unless asked: it writes to the disk).
    pub filesystem_performance: bool,
    /// Log files (`*.log`) copied only when changed since then.
    pub since: Option<std::time::SystemTime>,
}

impl Default for BundleLimits {
    fn default() -> Self {
        Self {
            collector_timeout: Duration::from_secs(60),
            file_bytes: 64 << 20,
            total_bytes: 1 << 30,
            filesystem_performance: false,
            since: None,
        }
    }
}

/// A collector's line in the execution summary: S(ucceeded), X (excluded), F(ailed).
#[derive(Debug, Clone)]
pub struct CollectorRun {
    pub title: String,
    pub status: char,
    pub milliseconds: u64,
}

/// One file of the bundle as written.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    pub bytes: u64,
    pub mode: u32,
}

#[derive(Default)]
struct StagingState {
    total: u64,
    files: BTreeMap<String, Written>,
    redactions: RedactionList,
    collectors: Vec<CollectorRun>,
    /// Files left out for the total bound.
    left_out: Vec<String>,
    /// Paths being written now: a second writer of one is refused.
    writing: std::collections::BTreeSet<String>,
}

/// The bundle's folder as it is written: every file passes the redactor and the bounds.
pub struct Staging {
    root: PathBuf,
    redactor: Redactor,
    limits: BundleLimits,
    state: Mutex<StagingState>,
}

impl Staging {
    /// Writes into `root` (made, and empty), through `redactor`.
    pub fn new(root: &Path, redactor: Redactor, limits: BundleLimits) -> std::io::Result<Self> {
        fs_err::create_dir_all(root)?;
        Ok(Self {
            root: root.to_path_buf(),
            redactor,
            limits,
            state: Mutex::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn limits(&self) -> &BundleLimits {
        &self.limits
    }

    fn state(&self) -> std::sync::MutexGuard<'_, StagingState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes a collector's file (0600, as troubleshoot's redacted files are).
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        self.write_with_mode(path, bytes, 0o600, true)
    }

    /// Writes one of the files that close a bundle (0644): outside the total bound, so a
    /// bundle that reached it is still whole.
    pub fn write_closing(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        self.write_with_mode(path, bytes, 0o644, false)
    }

    /// Writes `bytes` at bundle path `path`, redacted, cut to the per-file bound; refused
    /// past the total bound (when `bounded`) or at a path outside the bundle.
    fn write_with_mode(
        &self,
        path: &str,
        bytes: &[u8],
        mode: u32,
        bounded: bool,
    ) -> Result<(), String> {
        // A known secret in a copied file's name is hidden there too.
        let path = &self.redactor.redact_name(path);
        if !paths::is_safe_relative(path) {
            return Err(format!("`{path}` is not a path inside the bundle"));
        }
        // Redacted whole, then cut: a secret across the cut is hidden before it is cut.
        let (mut redacted, redactions) = self.redactor.redact_as(path, bytes, bounded);
        redacted.truncate(self.limits.file_bytes as usize);
        {
            let mut state = self.state();
            if state.files.contains_key(path) || !state.writing.insert(path.to_string()) {
                return Err(format!("{path} was written already, by another collector"));
            }
            let total = state.total + redacted.len() as u64;
            if bounded && total > self.limits.total_bytes {
                state.writing.remove(path);
                state.left_out.push(path.to_string());
                return Err(format!(
                    "{path} left out: the bundle reached its bound of {} bytes",
                    self.limits.total_bytes
                ));
            }
            state.total = total;
        }
        let written = self.write_file(path, &redacted);
        let mut state = self.state();
        state.writing.remove(path);
        match written {
            Ok(()) => {
                state.files.insert(
                    path.to_string(),
                    Written {
                        bytes: redacted.len() as u64,
                        mode,
                    },
                );
                state.redactions.add(redactions);
                Ok(())
            }
            Err(error) => {
                state.total -= redacted.len() as u64;
                Err(format!("{path}: {error}"))
            }
        }
    }

    fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        let target = self.root.join(path);
        if let Some(parent) = target.parent() {
            fs_err::create_dir_all(parent).map_err(|error| error.to_string())?;
        }
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        use std::io::Write as _;
        fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&target)
            .and_then(|mut file| file.write_all(bytes))
            .map_err(|error| error.to_string())
    }

    /// `bytes` of bundle path `path` through the redactors, for a file written elsewhere (the
    /// fleet's archive); `rewrite: false` leaves YAML paths, for files that close a bundle.
    pub fn redact(&self, path: &str, bytes: &[u8], rewrite: bool) -> Vec<u8> {
        self.redactor.redact_as(path, bytes, rewrite).0
    }

    /// A file's name with any known secret in it hidden.
    pub fn redact_name(&self, path: &str) -> String {
        self.redactor.redact_name(path)
    }

    /// troubleshoot's record of a collector that failed: `host-collectors/errors/<Title>-error.json`.
    pub fn write_error(&self, title: &str, error: &str) {
        let record = serde_json::json!({
            "collector": title,
            "error": error,
            "timestamp": berth_formats::time::now(),
        });
        let path = format!(
            "host-collectors/errors/{}-error.json",
            paths::safe_name(title)
        );
        let _ = self.write(&path, record.to_string().as_bytes());
    }

    /// Records a collector's line in the execution summary.
    pub fn ran(&self, title: &str, status: char, started: Instant) {
        self.state().collectors.push(CollectorRun {
            title: title.to_string(),
            status,
            milliseconds: started.elapsed().as_millis() as u64,
        });
    }

    /// Every file written, by bundle path.
    pub fn files(&self) -> BTreeMap<String, Written> {
        self.state().files.clone()
    }

    /// What the redactors hid, by redactor and by file.
    pub fn redactions(&self) -> RedactionList {
        self.state().redactions.clone()
    }

    pub fn collectors(&self) -> Vec<CollectorRun> {
        self.state().collectors.clone()
    }

    pub fn left_out(&self) -> Vec<String> {
        self.state().left_out.clone()
    }
}

/// The collector kinds that write files rather than one result (`run`, `copy`, `journald`).
fn writes_files(kind: &str) -> bool {
    host_files::KINDS.contains(&kind)
}

/// The analyzer kinds that read the bundle's files (`textAnalyze`).
fn reads_files(kind: &str) -> bool {
    kind == "textAnalyze"
}

/// Runs every host collector of `documents` into `staging`, then every host analyzer;
/// `progress` hears of each collector as it starts.
pub fn collect(
    documents: &[Document],
    staging: &Staging,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, PreflightError> {
    let started = Instant::now();
    let mut report = Report::default();
    let limits = Limits {
        filesystem_performance: staging.limits.filesystem_performance,
        network_timeout_cap: staging.limits.collector_timeout,
    };
    // Excluded collectors are listed as troubleshoot lists them.
    for document in documents {
        for item in &document.collectors {
            if item.excluded(&document.origin)? {
                staging.ran(&title(item), 'X', Instant::now());
            }
        }
    }
    // The collectors that gather one result each, in parallel (the preflights' engine).
    progress("host facts (os, cpu, memory, services, interfaces, disks…)");
    let value_started = Instant::now();
    let gathered = crate::run::collect(documents, &limits, &writes_files, &mut report)?;
    for ((kind, name), collected) in &gathered {
        let name = Some(name.as_str()).filter(|name| !name.is_empty());
        // Only Berth's own kinds gather values.
        let Some(kind) = checks::kind(kind) else {
            continue;
        };
        let title = name.map_or_else(|| kind.title.to_string(), str::to_string);
        let path = kind.result.path(name);
        match collected {
            Ok(value) => {
                // certificate's result is a word, written bare as troubleshoot writes it.
                let bytes = match value {
                    Value::String(text) => text.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                };
                match staging.write(&path, &bytes) {
                    Ok(()) => staging.ran(&title, 'S', value_started),
                    Err(error) => {
                        staging.write_error(&title, &error);
                        staging.ran(&title, 'F', value_started);
                    }
                }
            }
            Err(error) => {
                staging.write_error(&title, error);
                staging.ran(&title, 'F', value_started);
            }
        }
    }
    // The collectors that write files, several at once.
    let mut file_items: Vec<&Item> = Vec::new();
    for document in documents {
        for item in &document.collectors {
            if writes_files(&item.kind) && !item.excluded(&document.origin)? {
                file_items.push(item);
            }
        }
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..FILE_WORKERS.min(file_items.len()) {
            scope.spawn(|| {
                while let Some(item) = file_items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let title = title(item);
                    progress(&title);
                    let started = Instant::now();
                    match host_files::collect(item, staging) {
                        Ok(()) => staging.ran(&title, 'S', started),
                        Err(error) => {
                            staging.write_error(&title, &error);
                            staging.ran(&title, 'F', started);
                        }
                    }
                }
            });
        }
    });
    crate::run::analyze(
        documents,
        &gathered,
        &|document, item| {
            reads_files(&item.kind).then(|| text_analyze::analyze(document, item, staging.root()))
        },
        &mut report,
    )?;
    report.milliseconds = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// The in-cluster analyzers of `documents` that read the bundle's files (`textAnalyze`),
/// run over what was collected; the kinds Berth does not run are named in `skipped`.
pub fn analyze_cluster(
    documents: &[Document],
    staging: &Staging,
    skipped: &mut Vec<String>,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for document in documents {
        for item in &document.cluster_analyzers {
            if item.excluded(&document.origin).unwrap_or(true) {
                continue;
            }
            if reads_files(&item.kind) {
                results.extend(text_analyze::analyze(document, item, staging.root()));
            } else {
                skipped.push(format!("{} ({})", item.kind, document.origin.at(item.line)));
            }
        }
    }
    results
}

/// A collector's title: its name, else troubleshoot's title for its kind.
pub fn title(item: &Item) -> String {
    if let Some(name) = item.collector_name().filter(|name| !name.is_empty()) {
        return name.to_string();
    }
    match item.kind.as_str() {
        "run" => "Run Host".to_string(),
        "copy" => "copy".to_string(),
        "journald" => "journald".to_string(),
        other => {
            checks::kind(other).map_or_else(|| other.to_string(), |kind| kind.title.to_string())
        }
    }
}

/// The analyzers' results as troubleshoot's `analysis.json` holds them.
pub fn analysis(report: &Report) -> Vec<Value> {
    report
        .results
        .iter()
        .map(|result: &CheckResult| {
            // troubleshoot writes an analyzer that chose no outcome with no severity.
            let severity = match result.outcome {
                crate::Outcome::Fail => "error",
                crate::Outcome::Warn => "warn",
                crate::Outcome::Pass => "debug",
                crate::Outcome::None => "",
            };
            let name = analysis_name(&result.title);
            let mut entry = serde_json::json!({
                "name": name,
                "labels": {"desiredPosition": "1", "iconKey": "", "iconUri": ""},
                "insight": {
                    "name": name,
                    "labels": {"iconKey": "", "iconUri": ""},
                    "primary": result.title,
                    "detail": result.message,
                    "severity": severity,
                },
                "severity": severity,
                "analyzerSpec": "",
            });
            if result.outcome == crate::Outcome::Fail {
                entry["error"] = Value::String(result.message.clone());
            }
            entry
        })
        .collect()
}

/// troubleshoot's entry name: the title lower-cased, each run of other characters a `.`.
fn analysis_name(title: &str) -> String {
    let mut name = String::new();
    let mut gap = false;
    for c in title.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c);
            gap = false;
        } else if !gap {
            name.push('.');
            gap = true;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_secret_in_a_files_name_is_hidden_in_the_name_written() {
        let mut redactor = Redactor::default();
        assert!(
            redactor
                .hide_value("registry password", "hunter22secret")
                .unwrap()
        );
        let root = tempfile::tempdir().unwrap();
        let staging = Staging::new(root.path(), redactor, BundleLimits::default()).unwrap();
        staging
            .write(
                "host-collectors/copy/backup-hunter22secret.log",
                b"pw hunter22secret\n",
            )
            .unwrap();
        let written = root
            .path()
            .join("host-collectors/copy/backup-___HIDDEN___.log");
        assert_eq!(fs_err::read(&written).unwrap(), b"pw ***HIDDEN***\n");
        assert!(
            !root
                .path()
                .join("host-collectors/copy/backup-hunter22secret.log")
                .exists()
        );
    }

    #[test]
    fn analysis_names_follow_troubleshoots() {
        assert_eq!(analysis_name("Host OS Info"), "host.os.info");
        assert_eq!(analysis_name("demo: Degraded!"), "demo.degraded.");
    }
}
