//! The first node's rollouts: one record per rollout name under `fleet/rollouts/`, every change
//! made under one lock, so `berth rollout` on the command line and the serving first node
//! (which decides each second and hands out work) never lose each other's writes. A record
//! holds everything a decision needs: the coordinator can be killed at any point and decide
//! again from what it wrote.
//!
//! Which node starts when is [`strategy`]'s to decide; this module turns its decisions into
//! records, hands out work, takes the nodes' progress, and fails a node that turns unhealthy
//! while it soaks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use berth_formats::Sha256Digest;
use berth_formats::fleet::{Action, NodeRecord, Outcome, Work};
use berth_formats::rollout::{
    Control, Direction, Role, Rollout, RolloutRecord, RolloutState, Strategy, TargetRecord,
    TargetState,
};
use serde_json::{Map, Value};

use crate::fleet::strategy::{self, Progress, Target};
use crate::layout::Layout;

/// Every rollout the first node keeps.
pub struct Rollouts {
    dir: PathBuf,
}

/// The most rollouts kept at once.
pub const MAX_ROLLOUTS: usize = 256;

impl Rollouts {
    pub fn new(layout: &Layout) -> Self {
        Self {
            dir: layout.fleet_dir().join("rollouts"),
        }
    }

    /// Runs `change` on every record with the lock held, and writes back those it changed.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<RolloutRecord>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let _lock = self.lock()?;
        let before = self.load_all()?;
        let mut records = before.clone();
        let result = change(&mut records)?;
        for record in &records {
            let unchanged = before.iter().any(|old| {
                old.rollout.metadata.name == record.rollout.metadata.name && old == record
            });
            if !unchanged {
                self.save(record)?;
            }
        }
        Ok(result)
    }

    /// Every record, by name.
    pub fn load_all(&self) -> anyhow::Result<Vec<RolloutRecord>> {
        let entries = match fs_err::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error.into()),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|extension| extension == "json")
            })
            .collect();
        paths.sort();
        if paths.len() > MAX_ROLLOUTS {
            bail!(
                "{} holds {} rollouts, more than {MAX_ROLLOUTS}; remove finished ones with `berth rollout delete`",
                self.dir.display(),
                paths.len()
            );
        }
        paths
            .iter()
            .map(|path| {
                let bytes = fs_err::read(path)?;
                serde_json::from_slice(&bytes).with_context(|| {
                    format!(
                        "{} is damaged; remove it (`berth rollout delete`) and apply the rollout again",
                        path.display()
                    )
                })
            })
            .collect()
    }

    /// Removes a rollout's record; `false` when there was none.
    pub fn delete(&self, name: &str) -> anyhow::Result<bool> {
        berth_formats::name::check_plain("rollout name", name)?;
        let _lock = self.lock()?;
        match fs_err::remove_file(self.path(name)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    fn save(&self, record: &RolloutRecord) -> anyhow::Result<()> {
        let path = self.path(&record.rollout.metadata.name);
        let mut bytes = serde_json::to_vec_pretty(record).expect("records serialize");
        bytes.push(b'\n');
        crate::files::write_atomically(&path, &bytes)
            .with_context(|| format!("failed to write {}", path.display()))
    }

    /// An exclusive `flock`, waited for: the holders are short.
    fn lock(&self) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
        fs_err::create_dir_all(&self.dir)?;
        let path = self.dir.join(".lock");
        let file = fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?
            .into_parts()
            .0;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| anyhow::anyhow!("failed to lock {}: {errno}", path.display()))
    }
}

/// Seconds since the Unix epoch.
pub fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

fn seconds_of(text: &Option<String>) -> Option<u64> {
    text.as_deref()
        .and_then(|text| humantime::parse_rfc3339_weak(text).ok())
        .map(seconds)
}

/// The hash a node's configuration is known by: its version and fields, as canonical JSON.
pub fn config_hash(version: &str, config: &Map<String, Value>) -> String {
    let value = serde_json::json!({ "version": version, "config": config });
    Sha256Digest::of(&serde_json::to_vec(&value).expect("JSON")).to_string()
}

/// A new record for `rollout` over the registered `nodes`: each node the placements select,
/// with its version and layered configuration. Refused while another rollout of the same
/// add-on, or an earlier generation of this one, still has nodes to move.
pub fn plan(
    rollout: Rollout,
    records: &[RolloutRecord],
    nodes: &[NodeRecord],
    now: SystemTime,
) -> anyhow::Result<RolloutRecord> {
    let name = &rollout.metadata.name;
    let addon = &rollout.spec.addon;
    rollout.strategy().map_err(anyhow::Error::msg)?;
    for record in records {
        if record.rollout.spec.addon == *addon && unfinished(record) {
            bail!(
                "rollout {} is still moving {addon} ({:?}); wait for it, or `berth rollout abort {}`",
                record.rollout.metadata.name,
                record.state,
                record.rollout.metadata.name
            );
        }
    }
    let generation = records
        .iter()
        .find(|record| record.rollout.metadata.name == *name)
        .map_or(1, |record| record.generation + 1);
    let mut targets = Vec::new();
    for node in nodes {
        let chosen = if rollout.spec.placements.is_empty() {
            Some(None)
        } else {
            rollout
                .spec
                .placements
                .iter()
                .find(|placement| {
                    (placement.roles.is_empty() || placement.roles.contains(&node.info.role))
                        && labels_match(&placement.match_labels, &node.info.labels)
                })
                .map(Some)
        };
        let Some(placement) = chosen else { continue };
        let version = placement
            .and_then(|placement| placement.version.clone())
            .unwrap_or_else(|| rollout.spec.version.clone());
        let report = node.addons.iter().find(|report| report.name == *addon);
        // Defaults < placement < node, as OCM layers add-on configuration.
        let mut config = rollout
            .spec
            .config
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect::<Map<String, Value>>();
        if let Some(placement) = placement {
            config.extend(placement.config.clone());
        }
        if let Some(report) = report {
            config.extend(report.node_config.clone());
        }
        let group = rollout
            .spec
            .decision_groups
            .iter()
            .find(|group| labels_match(&group.match_labels, &node.info.labels))
            .map(|group| group.group_name.clone());
        targets.push(TargetRecord {
            group,
            placement: placement.map(|placement| placement.name.clone()),
            config_hash: config_hash(&version, &config),
            version,
            previous_version: report.and_then(|report| report.current.clone()),
            config,
            ..unstarted(node.info.name.clone(), node.info.role)
        });
    }
    if targets.is_empty() {
        bail!(
            "no registered node matches rollout {name}'s placements; `berth nodes` lists the nodes, their roles and labels"
        );
    }
    Ok(new_record(
        rollout,
        generation,
        Direction::Forward,
        targets,
        now,
    ))
}

/// A generation of a rollout, started at `now` with no node moved yet.
fn new_record(
    rollout: Rollout,
    generation: u32,
    direction: Direction,
    targets: Vec<TargetRecord>,
    now: SystemTime,
) -> RolloutRecord {
    let now = rfc3339(now);
    RolloutRecord {
        rollout,
        generation,
        direction,
        control: Control::Running,
        state: RolloutState::Progressing,
        reason: String::new(),
        applied_at: now.clone(),
        updated_at: now,
        targets,
    }
}

/// A node of a rollout before anything happened to it.
fn unstarted(node: String, role: Role) -> TargetRecord {
    TargetRecord {
        node,
        role,
        group: None,
        placement: None,
        version: String::new(),
        previous_version: None,
        config: Map::new(),
        config_hash: String::new(),
        state: TargetState::ToApply,
        started_at: None,
        picked_up_at: None,
        succeeded_at: None,
        finished_at: None,
        message: String::new(),
    }
}

fn labels_match(wanted: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    wanted
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

/// Whether nodes of the record may still start or are still running.
pub fn unfinished(record: &RolloutRecord) -> bool {
    match record.state {
        RolloutState::Completed | RolloutState::Aborted => false,
        RolloutState::Stopped => active(record),
        RolloutState::Progressing | RolloutState::Paused => true,
    }
}

/// Whether a node of the record runs or soaks.
fn active(record: &RolloutRecord) -> bool {
    record
        .targets
        .iter()
        .any(|target| matches!(target.state, TargetState::Running | TargetState::Soaking))
}

/// The strategy a record runs with.
fn strategy_of(record: &RolloutRecord) -> Strategy {
    record
        .rollout
        .strategy()
        .expect("a record's rollout was checked when it was applied")
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
                    && now_seconds >= started + deadline.as_secs()
                {
                    target.state = TargetState::Failed;
                    target.finished_at = Some(now_text.clone());
                    target.message = format!(
                        "did not succeed within progressDeadline ({})",
                        humantime::format_duration(deadline)
                    );
                }
            }
            TargetState::Soaking => {
                let since = seconds_of(&target.succeeded_at).unwrap_or(now_seconds);
                // Only a report made after the run succeeded tells how the node is now.
                let unhealthy = nodes
                    .iter()
                    .find(|node| node.info.name == target.node)
                    .filter(|node| {
                        humantime::parse_rfc3339_weak(&node.last_contact)
                            .is_ok_and(|contact| seconds(contact) >= since)
                    })
                    .and_then(|node| node.addons.iter().find(|report| report.name == addon))
                    .is_some_and(|report| {
                        report.degraded == Some(true) || report.available == Some(false)
                    });
                if unhealthy {
                    target.state = TargetState::Failed;
                    target.finished_at = Some(now_text.clone());
                    target.message = format!(
                        "{addon} turned Degraded within minSuccessTime ({}) after its run succeeded",
                        humantime::format_duration(strategy.min_success_time)
                    );
                } else if now_seconds >= since + strategy.min_success_time.as_secs() {
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
                node: target.node.clone(),
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
            .map(|target| (target.node.clone(), target.role))
            .collect();
        let progress: BTreeMap<String, Progress> = record
            .targets
            .iter()
            .map(|target| (target.node.clone(), progress_of(target)))
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
                if let Some(target) = record.targets.iter_mut().find(|t| &t.node == node) {
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

/// How long the coordinator may sleep before a record can change with no node saying
/// anything; a second at most, so the admin's commands are seen quickly.
pub fn next_tick(records: &[RolloutRecord], now: SystemTime) -> Duration {
    let now_seconds = seconds(now);
    records
        .iter()
        .filter(|record| unfinished(record))
        .filter_map(|record| {
            let progress = record
                .targets
                .iter()
                .map(|target| (target.node.clone(), progress_of(target)))
                .collect();
            strategy::next_change(&strategy_of(record), &progress, now_seconds)
        })
        .min()
        .unwrap_or(Duration::from_secs(1))
        .min(Duration::from_secs(1))
}

/// The work `node` is to run now, if a rollout started it. `params` are the first node's join
/// parameters, for a node that joined.
pub fn work_for(
    records: &[RolloutRecord],
    node: &str,
    params: &[(String, String)],
) -> Option<Work> {
    records.iter().find_map(|record| {
        let target = record
            .targets
            .iter()
            .find(|target| target.node == node && target.state == TargetState::Running)?;
        let action = match record.direction {
            Direction::Forward => Action::Apply {
                version: target.version.clone(),
                config: target.config.clone(),
                config_hash: target.config_hash.clone(),
            },
            Direction::Rollback => Action::Restore {
                work: format!("{}.{}", record.rollout.metadata.name, record.generation - 1),
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

/// Takes what `node` says of work `work`. `Err` (the message refused, and logged) when the
/// node was given no such work: a node speaks only for itself.
pub fn progress(
    records: &mut [RolloutRecord],
    node: &str,
    work: &str,
    outcome: Outcome,
    message: &str,
    now: SystemTime,
) -> Result<(), String> {
    let Some(record) = records.iter_mut().find(|record| record.work_id() == work) else {
        return Err(format!("no rollout gave work {work}"));
    };
    let Some(target) = record.targets.iter_mut().find(|target| target.node == node) else {
        return Err(format!("work {work} is not this node's ({node})"));
    };
    let now_text = rfc3339(now);
    // A late word on a node already judged (timed out, say) changes nothing.
    if target.state != TargetState::Running {
        return Ok(());
    }
    match outcome {
        Outcome::Running => {
            target.picked_up_at.get_or_insert(now_text.clone());
        }
        Outcome::Succeeded => {
            target.picked_up_at.get_or_insert(now_text.clone());
            target.state = TargetState::Soaking;
            target.succeeded_at = Some(now_text.clone());
        }
        Outcome::Failed => {
            target.picked_up_at.get_or_insert(now_text.clone());
            target.state = TargetState::Failed;
            target.finished_at = Some(now_text.clone());
            target.message = message.to_string();
        }
    }
    record.updated_at = now_text;
    Ok(())
}

/// Finds a record by name, or says which there are.
pub fn find<'a>(
    records: &'a mut [RolloutRecord],
    name: &str,
) -> anyhow::Result<&'a mut RolloutRecord> {
    let names: Vec<String> = records
        .iter()
        .map(|record| record.rollout.metadata.name.clone())
        .collect();
    records
        .iter_mut()
        .find(|record| record.rollout.metadata.name == name)
        .with_context(|| {
            format!(
                "no rollout named {name}; there are: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
}

/// Pause (no node starts), resume, or abort (no node starts, for good). Nodes already
/// running finish either way: a run cut half-way helps no one.
pub fn control(
    record: &mut RolloutRecord,
    control: Control,
    now: SystemTime,
) -> anyhow::Result<()> {
    if record.control == Control::Aborted {
        bail!(
            "rollout {} was aborted; apply it again to start anew",
            record.rollout.metadata.name
        );
    }
    record.control = control;
    record.state = match control {
        Control::Aborted => RolloutState::Aborted,
        Control::Paused if record.state == RolloutState::Progressing => RolloutState::Paused,
        Control::Running if record.state == RolloutState::Paused => RolloutState::Progressing,
        _ => record.state,
    };
    // Work handed out that no node took yet is taken back.
    if control == Control::Aborted {
        for target in &mut record.targets {
            if target.state == TargetState::Running && target.picked_up_at.is_none() {
                target.state = TargetState::ToApply;
                target.started_at = None;
            }
        }
    }
    record.updated_at = rfc3339(now);
    Ok(())
}

/// The next generation of `record`: every node its work reached goes back to what it ran
/// before, through the same strategy. Refused while a node still runs.
pub fn rollback(record: &RolloutRecord, now: SystemTime) -> anyhow::Result<RolloutRecord> {
    let name = &record.rollout.metadata.name;
    if record.direction == Direction::Rollback {
        bail!("rollout {name} is itself a rollback; apply the rollout again to move forward");
    }
    let running: Vec<&str> = record
        .targets
        .iter()
        .filter(|target| target.state == TargetState::Running && target.picked_up_at.is_some())
        .map(|target| target.node.as_str())
        .collect();
    if !running.is_empty() {
        bail!(
            "node(s) {} still run rollout {name}; wait until they finish (or fail at progressDeadline)",
            running.join(", ")
        );
    }
    let targets: Vec<TargetRecord> = record
        .targets
        .iter()
        .filter(|target| target.picked_up_at.is_some())
        .map(|target| TargetRecord {
            version: target
                .previous_version
                .clone()
                .unwrap_or_else(|| "-".into()),
            previous_version: Some(target.version.clone()),
            group: target.group.clone(),
            placement: target.placement.clone(),
            ..unstarted(target.node.clone(), target.role)
        })
        .collect();
    if targets.is_empty() {
        bail!("rollout {name} changed no node; there is nothing to roll back");
    }
    Ok(new_record(
        record.rollout.clone(),
        record.generation + 1,
        Direction::Rollback,
        targets,
        now,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_formats::fleet::{AddonReport, NodeInfo, Role};

    fn node(name: &str, role: Role, labels: &[(&str, &str)], port: Option<u16>) -> NodeRecord {
        NodeRecord {
            info: NodeInfo {
                name: name.into(),
                role,
                labels: labels
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect(),
                address: String::new(),
            },
            pin: format!("sha256:{name}"),
            seen_from: String::new(),
            registered_at: String::new(),
            last_contact: "2026-01-01T00:00:00Z".into(),
            addons: vec![AddonReport {
                name: "demo".into(),
                desired: None,
                current: Some("1.0.0".into()),
                last: None,
                progressing: "Succeeded".into(),
                available: Some(true),
                degraded: Some(false),
                config_hash: None,
                node_config: port
                    .map(|port| Map::from_iter([("port".to_string(), Value::from(port))]))
                    .unwrap_or_default(),
            }],
        }
    }

    fn rollout(body: &str) -> Rollout {
        let text = format!(
            "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata: {{name: demo-2}}\nspec:\n  addon: demo\n  version: 2.0.0\n{body}"
        );
        Rollout::parse("rollout.yaml", &text).unwrap()
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    #[test]
    fn placements_choose_nodes_and_configuration_layers_defaults_placement_node() {
        let nodes = [
            node("node-1", Role::Primary, &[], None),
            node("node-2", Role::Secondary, &[("zone", "edge")], None),
            node("node-3", Role::Secondary, &[("zone", "edge")], Some(9000)),
            node("node-4", Role::Secondary, &[("zone", "core")], None),
        ];
        let rollout = rollout(
            "  config: {port: 8080, greeting: hi}\n  placements:\n    - name: edge\n      roles: [secondary]\n      matchLabels: {zone: edge}\n      version: 2.0.1\n      config: {port: 8081}\n    - name: primaries\n      roles: [primary]\n",
        );
        let record = plan(rollout.clone(), &[], &nodes, at(0)).unwrap();
        let target = |name: &str| record.targets.iter().find(|t| t.node == name);
        assert!(target("node-4").is_none(), "no placement selects node-4");
        let primary = target("node-1").unwrap();
        assert_eq!(
            (primary.version.as_str(), primary.config["port"].as_u64()),
            ("2.0.0", Some(8080))
        );
        let edge = target("node-2").unwrap();
        assert_eq!(
            (edge.version.as_str(), edge.placement.as_deref()),
            ("2.0.1", Some("edge"))
        );
        assert_eq!(edge.config["port"], 8081);
        assert_eq!(edge.config["greeting"], "hi");
        // The node's own fields win over the placement's, and change its hash.
        let own = target("node-3").unwrap();
        assert_eq!(own.config["port"], 9000);
        assert_ne!(own.config_hash, edge.config_hash);
        assert_eq!(own.config_hash, config_hash("2.0.1", &own.config));
        assert_eq!(record.work_id(), "demo-2.1");

        // Another rollout of demo waits for this one.
        let mut other = rollout.clone();
        other.metadata.name = "demo-3".into();
        let error = plan(other, std::slice::from_ref(&record), &nodes, at(1)).unwrap_err();
        assert!(error.to_string().contains("still moving demo"), "{error}");
    }

    #[test]
    fn deadlines_soaks_and_forged_progress() {
        let nodes = vec![
            node("node-1", Role::Secondary, &[], None),
            node("node-2", Role::Secondary, &[], None),
        ];
        let rollout = rollout(
            "  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 2\n      minSuccessTime: 2m\n      progressDeadline: 60s\n      maxFailures: 1\n",
        );
        let mut records = vec![plan(rollout, &[], &nodes, at(0)).unwrap()];
        assert!(tick(&mut records[0], &nodes, at(0)));
        assert!(work_for(&records, "node-1", &[]).is_some());
        assert_eq!(
            progress(
                &mut records,
                "node-1",
                "demo-2.9",
                Outcome::Succeeded,
                "",
                at(1)
            ),
            Err("no rollout gave work demo-2.9".into())
        );
        assert!(
            progress(
                &mut records,
                "node-9",
                "demo-2.1",
                Outcome::Succeeded,
                "",
                at(1)
            )
            .unwrap_err()
            .contains("not this node's")
        );
        progress(
            &mut records,
            "node-1",
            "demo-2.1",
            Outcome::Succeeded,
            "",
            at(10),
        )
        .unwrap();
        let record = &mut records[0];
        // node-2 never answers: failed at its deadline. node-1 soaks; a report from after its
        // run says Degraded: failed too.
        tick(record, &nodes, at(59));
        assert_eq!(record.targets[1].state, TargetState::Running);
        tick(record, &nodes, at(60));
        assert_eq!(record.targets[1].state, TargetState::Failed);
        assert!(record.targets[1].message.contains("progressDeadline (1m)"));
        let mut degraded = nodes.clone();
        degraded[0].addons[0].degraded = Some(true);
        // A report from before the run succeeded does not count.
        tick(record, &degraded, at(61));
        assert_eq!(record.targets[0].state, TargetState::Soaking);
        degraded[0].last_contact = rfc3339(at(20));
        tick(record, &degraded, at(62));
        assert_eq!(record.targets[0].state, TargetState::Failed);
        assert!(record.targets[0].message.contains("turned Degraded"));
        assert_eq!(record.state, RolloutState::Stopped);
        assert!(
            record.reason.contains("node-1, node-2"),
            "{}",
            record.reason
        );

        // The rollback takes back the node the work reached, not the one it never reached.
        let back = rollback(record, at(70)).unwrap();
        assert_eq!(back.work_id(), "demo-2.2");
        assert_eq!(back.targets.len(), 1);
        assert_eq!(
            (
                back.targets[0].node.as_str(),
                back.targets[0].version.as_str()
            ),
            ("node-1", "1.0.0")
        );
        let mut records = vec![back];
        tick(&mut records[0], &nodes, at(71));
        let work = work_for(&records, "node-1", &[]).unwrap();
        assert_eq!(
            work.action,
            Action::Restore {
                work: "demo-2.1".into()
            }
        );
    }

    #[test]
    fn paused_starts_nothing_resumed_goes_on_aborted_takes_back_unclaimed_work() {
        let nodes: Vec<NodeRecord> = (1..=3)
            .map(|number| node(&format!("node-{number}"), Role::Secondary, &[], None))
            .collect();
        let rollout = rollout(
            "  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 1\n",
        );
        let mut record = plan(rollout, &[], &nodes, at(0)).unwrap();
        control(&mut record, Control::Paused, at(0)).unwrap();
        tick(&mut record, &nodes, at(1));
        assert_eq!(record.state, RolloutState::Paused);
        assert!(
            record
                .targets
                .iter()
                .all(|t| t.state == TargetState::ToApply)
        );
        control(&mut record, Control::Running, at(2)).unwrap();
        tick(&mut record, &nodes, at(3));
        assert_eq!(record.state, RolloutState::Progressing);
        assert_eq!(record.targets[0].state, TargetState::Running);
        let mut records = vec![record];
        progress(
            &mut records,
            "node-1",
            "demo-2.1",
            Outcome::Succeeded,
            "",
            at(4),
        )
        .unwrap();
        tick(&mut records[0], &nodes, at(5));
        assert_eq!(records[0].targets[1].state, TargetState::Running);
        // node-2 never took its work: aborting takes it back; node-1's run stands.
        control(&mut records[0], Control::Aborted, at(6)).unwrap();
        tick(&mut records[0], &nodes, at(7));
        let record = &records[0];
        assert_eq!(record.state, RolloutState::Aborted);
        assert_eq!(record.targets[0].state, TargetState::Succeeded);
        assert_eq!(record.targets[1].state, TargetState::ToApply);
        assert!(!unfinished(record));
        assert!(control(&mut records[0], Control::Running, at(8)).is_err());
    }
}
