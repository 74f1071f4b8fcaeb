//! Making a rollout's record: which nodes its placements select, the version and layered
//! configuration each gets, and the checks that refuse a rollout no node could carry out (an
//! add-on or version the dist does not offer, a downgrade not allowed). A rollback is the
//! next generation of the same record, back to what each node ran before.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use anyhow::bail;
use berth_formats::Sha256Digest;
use berth_formats::fleet::NodeRecord;
use berth_formats::rollout::{
    Control, Direction, Role, Rollout, RolloutRecord, RolloutState, TargetRecord, TargetState,
};
use berth_formats::time::rfc3339;
use berth_formats::versions::{VersionsFile, compare_versions};
use serde_json::{Map, Value};

use super::unfinished;

/// The hash a node's configuration is known by: its version and fields, as canonical JSON.
pub fn config_hash(version: &str, config: &Map<String, Value>) -> String {
    let value = serde_json::json!({ "version": version, "config": config });
    Sha256Digest::of(&serde_json::to_vec(&value).expect("JSON")).to_string()
}

/// The versions a rollout moves nodes to: its own and its placements'.
pub fn wanted_versions(rollout: &Rollout) -> BTreeSet<&str> {
    std::iter::once(&rollout.spec.version)
        .chain(
            rollout
                .spec
                .placements
                .iter()
                .filter_map(|placement| placement.version.as_ref()),
        )
        .map(String::as_str)
        .collect()
}

/// Refuses a rollout whose add-on, or one of whose versions, `versions` (the first node's
/// dist) does not offer, naming what it offers.
pub fn check_offered(rollout: &Rollout, versions: &VersionsFile, dist: &str) -> anyhow::Result<()> {
    let addon = &rollout.spec.addon;
    let Some(offered) = versions.addon(addon) else {
        let names: Vec<&str> = versions
            .addons
            .iter()
            .map(|addon| addon.name.as_str())
            .collect();
        bail!(
            "the dist {dist} offers no add-on {addon}; it offers: {}",
            names.join(", ")
        );
    };
    for version in wanted_versions(rollout) {
        if !offered
            .versions
            .iter()
            .any(|entry| entry.version == version)
        {
            bail!(
                "the dist {dist} offers no version {version} of {addon}; it offers: {}",
                offered
                    .versions
                    .iter()
                    .map(|entry| entry.version.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}

/// A new record for `rollout` over the registered `nodes`: each node the placements select,
/// with its version and layered configuration. Refused while another rollout of the same
/// add-on, or an earlier generation of this one, still has nodes to move, and when it would
/// move a node to an older version than it runs without `allowDowngrade`. `uid` makes its
/// work ids new; `packages` pins the package of each of [`wanted_versions`].
pub fn plan(
    rollout: Rollout,
    records: &[RolloutRecord],
    nodes: &[NodeRecord],
    uid: String,
    packages: BTreeMap<String, Sha256Digest>,
    now: SystemTime,
) -> anyhow::Result<RolloutRecord> {
    let name = &rollout.metadata.name;
    let addon = &rollout.spec.addon;
    rollout.strategy().map_err(anyhow::Error::msg)?;
    if let Some(version) = wanted_versions(&rollout)
        .into_iter()
        .find(|version| !packages.contains_key(*version))
    {
        bail!("rollout {name}: no package digest was pinned for {addon} {version}");
    }
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
    let mut downgrades = Vec::new();
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
        if let Some(current) = report.and_then(|report| report.current.as_deref())
            && compare_versions(&version, current).is_lt()
            && !rollout.spec.allow_downgrade
        {
            downgrades.push(format!(
                "{} ({}) runs {current}",
                node.info.name,
                node.info.machine_id.chars().take(12).collect::<String>()
            ));
        }
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
            previous_config_hash: report.and_then(|report| report.config_hash.clone()),
            config,
            ..unstarted(&node.info.name, &node.info.machine_id, node.info.role)
        });
    }
    if !downgrades.is_empty() {
        bail!(
            "rollout {name} would move {addon} back to an older version ({}); set `allowDowngrade: true` in its spec if that is what you want",
            downgrades.join(", ")
        );
    }
    if targets.is_empty() {
        bail!(
            "no registered node matches rollout {name}'s placements; `berth nodes` lists the nodes, their roles and labels"
        );
    }
    Ok(new_record(
        rollout,
        uid,
        generation,
        Direction::Forward,
        packages,
        targets,
        now,
    ))
}

/// A generation of a rollout, started at `now` with no node moved yet.
fn new_record(
    rollout: Rollout,
    uid: String,
    generation: u32,
    direction: Direction,
    packages: BTreeMap<String, Sha256Digest>,
    targets: Vec<TargetRecord>,
    now: SystemTime,
) -> RolloutRecord {
    let now = rfc3339(now);
    RolloutRecord {
        rollout,
        uid,
        generation,
        direction,
        control: Control::Running,
        state: RolloutState::Progressing,
        reason: String::new(),
        applied_at: now.clone(),
        updated_at: now,
        packages,
        targets,
    }
}

/// A node of a rollout before anything happened to it.
fn unstarted(node: &str, machine_id: &str, role: Role) -> TargetRecord {
    TargetRecord {
        node: node.to_string(),
        machine_id: machine_id.to_string(),
        role,
        group: None,
        placement: None,
        version: String::new(),
        previous_version: None,
        config: Map::new(),
        config_hash: String::new(),
        previous_config_hash: None,
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
            config_hash: target.previous_config_hash.clone().unwrap_or_default(),
            previous_config_hash: Some(target.config_hash.clone()),
            group: target.group.clone(),
            placement: target.placement.clone(),
            ..unstarted(&target.node, &target.machine_id, target.role)
        })
        .collect();
    if targets.is_empty() {
        bail!("rollout {name} changed no node; there is nothing to roll back");
    }
    Ok(new_record(
        record.rollout.clone(),
        record.uid.clone(),
        record.generation + 1,
        Direction::Rollback,
        BTreeMap::new(),
        targets,
        now,
    ))
}
