//! Running documents: every collector once (in parallel, those of one port one after
//! another), then every analyzer in order against what was collected, as troubleshoot runs
//! the documents kURL concatenates.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Map, Value};

use crate::PreflightError;
use crate::checks::{self, Collected, Limits};
use crate::document::{Document, Item};
use crate::report::{CheckResult, Outcome, Report};

/// Collectors run at once at most.
const WORKERS: usize = 16;

/// Runs `documents` on this host.
pub fn run(documents: &[Document], limits: &Limits) -> Result<Report, PreflightError> {
    let started = Instant::now();
    let mut report = Report::default();
    let collected = collect(documents, limits, &|_| false, &mut report)?;
    analyze(documents, &collected, &|_, _| None, &mut report)?;
    report.milliseconds = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// What each value collector gathered, by result key.
pub(crate) type Gathered = BTreeMap<Key, Collected>;

/// Runs every collector of a kind [`checks`] knows; a kind neither it nor `elsewhere` runs
/// is reported in `report`.
pub(crate) fn collect(
    documents: &[Document],
    limits: &Limits,
    elsewhere: &dyn Fn(&str) -> bool,
    report: &mut Report,
) -> Result<Gathered, PreflightError> {
    // Each result key's last collector, as troubleshoot's last file of a name wins.
    let mut planned: BTreeMap<Key, (&Item, &'static checks::Kind)> = BTreeMap::new();
    for (_, item, kind) in runnable(documents, Section::Collectors)? {
        match kind {
            Ok(kind) => {
                planned.insert(kind.result_key(item.collector_name()), (item, kind));
            }
            Err(_) if elsewhere(&item.kind) => {}
            Err(unknown) => report.results.push(unknown),
        }
    }
    Ok(collect_all(&planned, limits))
}

/// Runs every analyzer in order against what was collected; `elsewhere` answers for a kind
/// [`checks`] does not know (`None`: nobody does).
pub(crate) fn analyze(
    documents: &[Document],
    collected: &Gathered,
    elsewhere: &dyn Fn(&Document, &Item) -> Option<Vec<CheckResult>>,
    report: &mut Report,
) -> Result<(), PreflightError> {
    for (document, item, kind) in runnable(documents, Section::Analyzers)? {
        let kind = match kind {
            Ok(kind) => kind,
            Err(unknown) => {
                match elsewhere(document, item) {
                    Some(results) => report.results.extend(results),
                    None => report.results.push(unknown),
                }
                continue;
            }
        };
        let title = item
            .check_name()
            .map(str::to_string)
            .unwrap_or_else(|| default_title(kind, item));
        let data = collected.get(&kind.result_key(item.collector_name()));
        let origin = document.origin.at(item.line);
        let result = |outcome, message: String, uri: String, suffix: Option<String>| CheckResult {
            title: match suffix {
                Some(suffix) => format!("{title} - {suffix}"),
                None => title.clone(),
            },
            outcome,
            message,
            uri,
            origin: origin.clone(),
            kind: kind.name.to_string(),
            ignored: false,
        };
        match kind.analyze(item, data) {
            Ok(matched) if matched.is_empty() => {
                let why = match data {
                    None => "no collector gathered what it reads (its collector is \
                             excluded, or names another collectorName)"
                        .to_string(),
                    Some(Err(error)) => format!("its collector gathered nothing: {error}"),
                    Some(Ok(value)) => {
                        format!("no outcome matched what was collected: {}", brief(value))
                    }
                };
                report
                    .results
                    .push(result(Outcome::None, why, String::new(), None));
            }
            Ok(matched) => {
                for matched in matched {
                    report.results.push(result(
                        matched.outcome,
                        matched.message,
                        matched.uri,
                        matched.title_suffix,
                    ));
                }
            }
            Err(error) => report.results.push(result(
                Outcome::Fail,
                format!("Analyzer Failed: {error} (at {origin}; fix the analyzer's outcomes)"),
                String::new(),
                None,
            )),
        }
    }
    Ok(())
}

/// A document's entry, with its kind or the result reporting it unknown.
type Entry<'a> = (
    &'a Document,
    &'a Item,
    Result<&'static checks::Kind, CheckResult>,
);

#[derive(Clone, Copy)]
enum Section {
    Collectors,
    Analyzers,
}

/// The entries of one section of every document that are not excluded, in order, each with
/// its kind, or the result that reports a kind Berth does not run.
fn runnable(documents: &[Document], section: Section) -> Result<Vec<Entry<'_>>, PreflightError> {
    let mut entries = Vec::new();
    for document in documents {
        let (items, what) = match section {
            Section::Collectors => (&document.collectors, "collector"),
            Section::Analyzers => (&document.analyzers, "analyzer"),
        };
        for item in items {
            if item.excluded(&document.origin)? {
                continue;
            }
            let kind = checks::kind(&item.kind).ok_or_else(|| unknown(document, item, what));
            entries.push((document, item, kind));
        }
    }
    Ok(entries)
}

pub(crate) fn default_title(kind: &checks::Kind, item: &Item) -> String {
    match item.collector_name() {
        Some(name) if kind.titled_by_collector => format!("{} {name}", kind.title),
        _ => kind.title.to_string(),
    }
}

fn unknown(document: &Document, item: &Item, what: &str) -> CheckResult {
    let known: Vec<&str> = checks::KINDS.iter().map(|kind| kind.name).collect();
    CheckResult {
        title: format!("Unknown {what} {}", item.kind),
        outcome: Outcome::Warn,
        message: format!(
            "Berth does not run the {what} `{}` ({}), so it is not checked; Berth runs {}",
            item.kind,
            document.origin.at(item.line),
            known.join(", ")
        ),
        uri: String::new(),
        origin: document.origin.at(item.line),
        kind: item.kind.clone(),
        ignored: false,
    }
}

/// A collected value, short enough for a message.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

pub(crate) type Key = (String, String);
/// Collectors run one after another: each one's result key, fields and kind.
type Lane<'a> = Vec<(&'a Key, &'a Map<String, Value>, &'static checks::Kind)>;

/// Runs every planned collector; those binding one port share a lane, run in order.
fn collect_all(
    planned: &BTreeMap<Key, (&Item, &'static checks::Kind)>,
    limits: &Limits,
) -> BTreeMap<Key, Collected> {
    let mut lanes: Vec<Lane> = Vec::new();
    let mut by_port: BTreeMap<u64, usize> = BTreeMap::new();
    for (key, (item, kind)) in planned {
        let entry = (key, &item.fields, *kind);
        match kind.bound_port(&item.fields) {
            Some(port) => {
                let lane = *by_port.entry(port).or_insert_with(|| {
                    lanes.push(Vec::new());
                    lanes.len() - 1
                });
                lanes[lane].push(entry);
            }
            None => lanes.push(vec![entry]),
        }
    }
    let next = AtomicUsize::new(0);
    let results = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS.min(lanes.len()) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(lane) = lanes.get(index) else {
                        break;
                    };
                    for (key, fields, kind) in lane {
                        let collected = kind.collect(fields, limits);
                        if let Ok(mut results) = results.lock() {
                            results.insert((*key).clone(), collected);
                        }
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_default()
}
