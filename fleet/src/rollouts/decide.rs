//! Carrying a rollout's record forward: each decision (deadlines and soaks judged, then the
//! nodes the strategy starts next), the work handed to a node, and what a node says of it.
//!
//! A node's word alone never makes it succeed: its progress carries its add-ons, and a run
//! counts as succeeded only when they show the add-on at the version and configuration hash
//! the rollout asked for, its last run succeeded, and nothing says it is unhealthy. Anything
//! else fails the node, naming the mismatch.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use berth_formats::fleet::{Action, AddonReport, NodeRecord, Outcome, Work};
use berth_formats::rollout::{
    Control, Direction, RolloutRecord, RolloutState, Strategy, TargetRecord, TargetState,
};
use berth_formats::time::rfc3339;

use super::{seconds, seconds_of, unfinished};
use crate::strategy::{self, Progress, Target};

/// The strategy a record runs with.
fn strategy_of(record: &RolloutRecord) -> Strategy {
    record
        .rollout
        .strategy()
        .expect("a record's rollout was checked when it was applied")
}

/// Whether `target` is the node with machine id `machine` (records from before machine ids
/// name the node alone).
pub fn is_node(target: &TargetRecord, machine: &str) -> bool {
    if target.machine_id.is_empty() {
        target.node == machine
    } else {
        target.machine_id == machine
    }
}

/// What is wrong with `addon` in a node's report for `target`: `None` when it is at the
/// version and configuration hash the target asks for, its last run succeeded, and nothing
/// says it is unhealthy.
pub fn mismatch(target: &TargetRecord, addon: &str, addons: &[AddonReport]) -> Option<String> {
    // A rollback of a node that had no such add-on before wants none.
    let wanted = (target.version != "-").then_some(target.version.as_str());
    let Some(report) = addons.iter().find(|report| report.name == addon) else {
        return wanted.map(|version| format!("the node lists no {addon} (wanted {version})"));
    };
    let current = report.current.as_deref();
    if current != wanted {
        return Some(format!(
            "{addon} is at {}, not {}",
            current.unwrap_or("no version"),
            wanted.unwrap_or("none (a rollback does not uninstall an add-on the rollout added)")
        ));
    }
    let hash = report.config_hash.as_deref().unwrap_or("");
    if hash != target.config_hash {
        let short = |hash: &str| {
            if hash.is_empty() {
                "none".to_string()
            } else {
                hash.chars().take(19).collect()
            }
        };
        return Some(format!(
            "{addon}'s configuration hash is {}, not {}",
            short(hash),
            short(&target.config_hash)
        ));
    }
    if report.progressing != "Succeeded" {
        return Some(format!(
            "{addon}'s last run is {}, not Succeeded",
            report.progressing
        ));
    }
    if report.degraded == Some(true) || report.available == Some(false) {
        return Some(format!("{addon} is not Available"));
    }
    None
}

/// One decision at `now`: deadlines and soaks judged (with the nodes' latest reports), then
/// the nodes the strategy starts next. Returns whether the record changed.
pub fn tick(record: &mut RolloutRecord, nodes: &[NodeRecord], now: SystemTime) -> bool {
    let before = record.clone();
    let strategy = strategy_of(record);
    let now_seconds = seconds(now);
    let now_text = rfc3339(now);
    let addon = record.rollout.spec.addon.clone();
    for target in &mut record.targets {
        match target.state {
            TargetState::Running => {
                let started = seconds_of(&target.started_at).unwrap_or(now_seconds);
                if let Some(deadline) = strategy.progress_deadline
                    && now_seconds >= started.saturating_add(deadline.as_secs())
                {
                    target.state = TargetState::Failed;
                    target.finished_at = Some(now_text.clone());
                    target.message = format!(
                        "did not succeed within progressDeadline ({}){}",
                        humantime::format_duration(deadline),
                        if target.picked_up_at.is_none() {
                            "; its agent never took the work (is `berth fleet agent` running there?)"
                        } else {
                            ""
                        }
                    );
                }
            }
            TargetState::Soaking => {
                let since = seconds_of(&target.succeeded_at).unwrap_or(now_seconds);
                // Only a report made after the run succeeded tells how the node is now.
                let later = nodes
                    .iter()
                    .find(|node| is_node(target, &node.info.machine_id))
                    .filter(|node| {
                        humantime::parse_rfc3339_weak(&node.last_contact)
                            .is_ok_and(|contact| seconds(contact) >= since)
                    });
                let wrong = later.and_then(|node| mismatch(target, &addon, &node.addons));
                if let Some(wrong) = wrong {
                    target.state = TargetState::Failed;
                    target.finished_at = Some(now_text.clone());
                    target.message = format!(
                        "within minSuccessTime ({}) after its run succeeded: {wrong}",
                        humantime::format_duration(strategy.min_success_time)
                    );
                } else if now_seconds >= since.saturating_add(strategy.min_success_time.as_secs()) {
                    target.state = TargetState::Succeeded;
                    target.finished_at = Some(now_text.clone());
                }
            }
            _ => {}
        }
    }
    if record.control != Control::Aborted {
        let targets: Vec<Target> = record
            .targets
            .iter()
            .map(|target| Target {
                node: key(target),
                role: target.role,
                group: target.group.clone(),
            })
            .collect();
        let phases = strategy::phases(
            &strategy,
            &targets,
            record.rollout.spec.nodes_per_decision_group,
        );
        let roles = record
            .targets
            .iter()
            .map(|target| (key(target), target.role))
            .collect();
        let progress: BTreeMap<String, Progress> = record
            .targets
            .iter()
            .map(|target| (key(target), progress_of(target)))
            .collect();
        let decision = strategy::decide(&strategy, &phases, &roles, &progress, now_seconds);
        record.state = match decision.state {
            strategy::RolloutState::Completed => RolloutState::Completed,
            strategy::RolloutState::Stopped { .. } => RolloutState::Stopped,
            strategy::RolloutState::Progressing if record.control == Control::Paused => {
                RolloutState::Paused
            }
            strategy::RolloutState::Progressing => RolloutState::Progressing,
        };
        if record.state == RolloutState::Stopped && record.reason.is_empty() {
            let failed: Vec<&str> = record
                .targets
                .iter()
                .filter(|target| target.state == TargetState::Failed)
                .map(|target| target.node.as_str())
                .collect();
            record.reason = format!(
                "{} node(s) failed ({}), more than maxFailures ({}) allows",
                failed.len(),
                failed.join(", "),
                strategy.max_failures
            );
        }
        if record.control == Control::Running {
            for node in &decision.start {
                if let Some(target) = record.targets.iter_mut().find(|t| key(t) == *node) {
                    target.state = TargetState::Running;
                    target.started_at = Some(now_text.clone());
                }
            }
        }
    }
    let changed = *record != before;
    if changed {
        record.updated_at = now_text;
    }
    changed
}

/// How the strategy knows a target: its machine id (its name in records from before them).
fn key(target: &TargetRecord) -> String {
    if target.machine_id.is_empty() {
        target.node.clone()
    } else {
        target.machine_id.clone()
    }
}

fn progress_of(target: &TargetRecord) -> Progress {
    let since = |time: &Option<String>| seconds_of(time).unwrap_or(0);
    match target.state {
        TargetState::ToApply => Progress::ToApply,
        TargetState::Running => Progress::Running {
            since: since(&target.started_at),
        },
        TargetState::Soaking | TargetState::Succeeded => Progress::Succeeded {
            since: since(&target.succeeded_at),
        },
        TargetState::Failed => Progress::Failed,
    }
}

/// How long the coordinator may wait before a record can change with no node saying
/// anything: the earliest deadline or soak end still ahead, a second at most.
pub fn next_tick(records: &[RolloutRecord], now: SystemTime) -> Duration {
    let now_seconds = seconds(now);
    records
        .iter()
        .filter(|record| unfinished(record))
        .filter_map(|record| {
            let progress = record
                .targets
                .iter()
                .map(|target| (key(target), progress_of(target)))
                .collect();
            strategy::next_change(&strategy_of(record), &progress, now_seconds)
        })
        .min()
        .unwrap_or(Duration::from_secs(1))
        .min(Duration::from_secs(1))
}

/// Whether a rollout has started the node with machine id `machine`.
pub fn has_work(records: &[RolloutRecord], machine: &str) -> bool {
    records.iter().any(|record| {
        record
            .targets
            .iter()
            .any(|target| is_node(target, machine) && target.state == TargetState::Running)
    })
}

/// The work the node with machine id `machine` is to run now, if a rollout started it.
/// `params` are the first node's join parameters, for a node that joined.
pub fn work_for(
    records: &[RolloutRecord],
    machine: &str,
    params: &[(String, String)],
) -> Option<Work> {
    records.iter().find_map(|record| {
        let target = record
            .targets
            .iter()
            .find(|target| is_node(target, machine) && target.state == TargetState::Running)?;
        let action = match record.direction {
            // A record without the version's digest (plan never makes one) gives no work.
            Direction::Forward => Action::Apply {
                version: target.version.clone(),
                config: target.config.clone(),
                config_hash: target.config_hash.clone(),
                package_sha256: *record.packages.get(&target.version)?,
                allow_downgrade: record.rollout.spec.allow_downgrade,
            },
            Direction::Rollback => Action::Restore {
                work: record.work_id_of(record.generation.saturating_sub(1)),
            },
        };
        Some(Work {
            id: record.work_id(),
            addon: record.rollout.spec.addon.clone(),
            action,
            params: params.to_vec(),
        })
    })
}

/// Takes what the node with machine id `machine` says of work `work`, with the add-ons it
/// reported with it. `Ok` says how it was judged; `Err` (the message refused, and logged)
/// when the node was given no such work: a node speaks only for itself.
pub fn progress(
    records: &mut [RolloutRecord],
    machine: &str,
    work: &str,
    outcome: Outcome,
    message: &str,
    addons: &[AddonReport],
    now: SystemTime,
) -> Result<String, String> {
    let Some(record) = records.iter_mut().find(|record| record.work_id() == work) else {
        return Err(format!("no rollout gave work {work}"));
    };
    let addon = record.rollout.spec.addon.clone();
    let Some(target) = record
        .targets
        .iter_mut()
        .find(|target| is_node(target, machine))
    else {
        return Err(format!("work {work} is not this node's ({machine})"));
    };
    let now_text = rfc3339(now);
    // A late word on a node already judged (timed out, say) changes nothing.
    if target.state != TargetState::Running {
        return Ok(format!(
            "{outcome:?}, ignored: the node is {:?} already",
            target.state
        ));
    }
    target.picked_up_at.get_or_insert(now_text.clone());
    let failed = match outcome {
        Outcome::Running => None,
        Outcome::Succeeded => match mismatch(target, &addon, addons) {
            None => {
                target.state = TargetState::Soaking;
                target.succeeded_at = Some(now_text.clone());
                None
            }
            Some(wrong) => Some(format!("the node said its run succeeded, but {wrong}")),
        },
        Outcome::Failed => Some(message.to_string()),
    };
    let judged = match failed {
        Some(message) => {
            target.state = TargetState::Failed;
            target.finished_at = Some(now_text.clone());
            target.message = message;
            format!("Failed: {}", target.message)
        }
        None => format!("{:?}", target.state),
    };
    record.updated_at = now_text;
    Ok(judged)
}
