//! Berth's own analyzers: what its records say is wrong on the node, each a result of the
//! bundle's analysis — an add-on whose last run failed or stopped (and the run's log), one
//! whose components are not healthy (naming them), and the host preflights that failed.

use std::collections::BTreeMap;

use berth_preflight::{CheckResult, Outcome};

use crate::health::HealthRecord;
use crate::node::state::{AddonState, Reason};

const ORIGIN: &str = "berth built-in analysis";

fn result(title: String, outcome: Outcome, message: String) -> CheckResult {
    CheckResult {
        title,
        outcome,
        message,
        uri: String::new(),
        origin: ORIGIN.to_string(),
        kind: "berth".to_string(),
        ignored: false,
    }
}

/// One result per add-on for its last run, one per add-on with components for its health.
pub fn addons(states: &[AddonState], health: &BTreeMap<String, HealthRecord>) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for state in states {
        let version = state
            .current
            .as_ref()
            .map(|current| current.target.version.clone())
            .or_else(|| state.desired.clone())
            .unwrap_or_default();
        let run_log = state
            .attempt
            .as_ref()
            .map(|attempt| format!("host-collectors/berth/logs/{}.log", attempt.run))
            .unwrap_or_default();
        if let Some(progressing) = &state.progressing {
            let title = format!("Add-on {} run", state.name);
            let (outcome, message) = match progressing.reason {
                Reason::Failed => (
                    Outcome::Fail,
                    format!(
                        "{} {version}: its last run failed: {}; the run's log, with its hooks' output, is {run_log}",
                        state.name, progressing.message
                    ),
                ),
                Reason::Interrupted => (
                    Outcome::Warn,
                    format!(
                        "{} {version}: {}; the run's log is {run_log}",
                        state.name, progressing.message
                    ),
                ),
                Reason::Succeeded => (
                    Outcome::Pass,
                    format!("{} {version}: its last run succeeded", state.name),
                ),
                _ => (
                    Outcome::Warn,
                    format!(
                        "{} {version}: {} ({})",
                        state.name, progressing.message, progressing.reason
                    ),
                ),
            };
            results.push(result(title, outcome, message));
        }
        if let Some(record) = health.get(&state.name) {
            let title = format!("Add-on {} health", state.name);
            let unhealthy: Vec<String> = record
                .components
                .iter()
                .filter(|component| !component.healthy())
                .map(|component| {
                    let why: Vec<String> = component
                        .conditions
                        .iter()
                        .filter(|condition| !condition.is_true())
                        .map(|condition| format!("{}: {}", condition.reason, condition.message))
                        .collect();
                    let refs: Vec<String> = component
                        .refs
                        .iter()
                        .map(|reference| format!("{} {}", reference.kind, reference.name))
                        .collect();
                    format!(
                        "component {} ({}{}): {}",
                        component.name,
                        component.probe,
                        if refs.is_empty() {
                            String::new()
                        } else {
                            format!(" {}", refs.join(", "))
                        },
                        why.join("; ")
                    )
                })
                .collect();
            let (outcome, word) = match (record.available(), record.degraded()) {
                (false, true) => (Outcome::Fail, "Unavailable and Degraded"),
                (false, false) => (Outcome::Fail, "Unavailable"),
                (true, true) => (Outcome::Fail, "Degraded"),
                (true, false) => (Outcome::Pass, "Healthy"),
            };
            let message = if unhealthy.is_empty() {
                format!(
                    "{} {}: {word}: every component is healthy",
                    state.name, record.version
                )
            } else {
                format!(
                    "{} {}: {word}: {}; see host-collectors/berth/health/{}.json",
                    state.name,
                    record.version,
                    unhealthy.join("; "),
                    state.name
                )
            };
            results.push(result(title, outcome, message));
        }
    }
    results
}

/// The host preflights of the last run that failed or warned.
pub fn host_preflights(layout: &crate::node::layout::Layout) -> Vec<CheckResult> {
    let Some(record) = crate::engine::PreflightRecord::load(layout) else {
        return Vec::new();
    };
    record
        .report
        .results
        .iter()
        .filter(|check| matches!(check.outcome, Outcome::Fail | Outcome::Warn))
        .map(|check| {
            result(
                format!("Host preflight {}", check.title),
                check.outcome,
                format!(
                    "{} (at the last run's host preflights; {})",
                    check.message, check.origin
                ),
            )
        })
        .collect()
}
