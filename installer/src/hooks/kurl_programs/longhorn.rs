//! `kurl longhorn prepare-for-migration` and `kurl longhorn rollback-migration-replicas`, as
//! kURL's `longhorn_prepare_for_migration` and `longhorn_restore_migration_replicas` call them
//! before moving volumes off Longhorn.
//!
//! Preparing: on a one-node cluster every volume with more than one replica is scaled to one
//! (its count kept in the `kurl.sh/pvcmigrate-scale` annotation, as pvmigrate keeps a
//! workload's), and the command waits until Longhorn has dropped the extra replicas (kURL
//! sleeps five minutes and does not look); then every attached volume must be scheduled and
//! healthy, and every Longhorn node ready, schedulable, with its disks ready, schedulable and
//! not over-committed. Rolling back puts each annotated volume, Deployment and StatefulSet
//! back to the count it kept, and EKCO's and Prometheus's operators back to one replica.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kubernetes::kubectl::{Failure, Kubectl, KubectlError, ObjectName};

const NAMESPACE: &str = "longhorn-system";
const VOLUMES: &str = "volumes.longhorn.io";
const REPLICAS: &str = "replicas.longhorn.io";
const NODES: &str = "nodes.longhorn.io";
const SETTINGS: &str = "settings.longhorn.io";
const OVER_PROVISIONING: &str = "storage-over-provisioning-percentage";
/// Where a scaled-down object keeps its former count (pvmigrate's annotation).
pub const SCALE_ANNOTATION: &str = "kurl.sh/pvcmigrate-scale";
const CALL: Duration = Duration::from_secs(30);
/// How long Longhorn gets to drop the replicas of volumes scaled to one.
const SCALE_DOWN_WAIT: Duration = Duration::from_secs(300);
/// Tries of a write that keeps meeting a newer object.
const CONFLICT_TRIES: u32 = 10;

#[derive(Debug, thiserror::Error)]
pub enum LonghornError {
    #[error(transparent)]
    Kubectl(#[from] KubectlError),
    #[error("error preparing longhorn for migration: unhealthy volumes")]
    UnhealthyVolumes,
    #[error("error preparing longhorn for migration: unhealthy nodes")]
    UnhealthyNodes,
    #[error("{object} keeps {annotation}={value:?}, which is not a replica count")]
    BadCount {
        object: String,
        annotation: &'static str,
        value: String,
    },
    #[error(
        "Longhorn still runs {replicas} replicas of volume {volume} after {waited:?}; it was scaled to 1"
    )]
    ReplicasStayed {
        volume: String,
        replicas: usize,
        waited: Duration,
    },
    #[error("{what} changed {CONFLICT_TRIES} times while being written; try again")]
    KeptChanging { what: String },
    #[error("error getting over provisioning setting: {0}")]
    Setting(String),
}

/// Prepares Longhorn's volumes for a migration; says each step on `say`.
pub fn prepare_for_migration(say: &mut dyn FnMut(&str)) -> Result<(), LonghornError> {
    let kubectl = Kubectl::from_environment(CALL);
    say("Preparing Longhorn for migration to a different storage provisioner.");
    let nodes = kubectl.items("list the Kubernetes nodes", &["nodes"])?;
    let mut scaled_down = false;
    if nodes.len() == 1 {
        say("Only one node found, scaling down the number of Longhorn volume replicas to 1.");
        scaled_down = scale_down_replicas(&kubectl, say)?;
    }
    let unhealthy = unhealthy_volumes(&kubectl, say)?
        .into_iter()
        .map(|volume| format!("{NAMESPACE}/{volume}"));
    refuse_unhealthy(say, "volumes", unhealthy, LonghornError::UnhealthyVolumes)?;
    let unhealthy = unhealthy_nodes(&kubectl, say)?.into_iter();
    refuse_unhealthy(say, "nodes", unhealthy, LonghornError::UnhealthyNodes)?;
    if scaled_down {
        say("Storage volumes have been scaled down to 1 replica for the migration.");
        say("If necessary, you can scale them back up to the original value with:");
        say("");
        say("$ kurl longhorn rollback-migration-replicas");
        say("");
    }
    say("All Longhorn volumes and nodes are healthy.");
    say("Environment is ready for the Longhorn migration.");
    Ok(())
}

/// Lists on `say` the Longhorn `what` (volumes, nodes) that are not healthy, and fails with
/// `error` when there is any.
fn refuse_unhealthy(
    say: &mut dyn FnMut(&str),
    what: &str,
    unhealthy: impl Iterator<Item = String>,
    error: LonghornError,
) -> Result<(), LonghornError> {
    let mut unhealthy = unhealthy.peekable();
    if unhealthy.peek().is_none() {
        return Ok(());
    }
    say(&format!("The following Longhorn {what} are unhealthy:"));
    for name in unhealthy {
        say(&format!(" - {name}"));
    }
    Err(error)
}

/// Puts back what preparing (or pvmigrate) scaled down; says each step on `say`.
pub fn rollback_migration_replicas(say: &mut dyn FnMut(&str)) -> Result<(), LonghornError> {
    let kubectl = Kubectl::from_environment(CALL);
    say("Rolling back Longhorn volume replicas to their original value.");
    for volume in kubectl.items(
        "list the Longhorn volumes",
        &[VOLUMES, "--namespace", NAMESPACE],
    )? {
        let object = ObjectName::of(VOLUMES, &volume);
        let Some(kept) = annotation(&volume) else {
            say(&format!(
                "Volume {} has not been scaled down, skipping.",
                object.name
            ));
            continue;
        };
        let replicas = count(&object, &kept)?;
        say(&format!(
            "Rolling back volume {} to {replicas} replicas.",
            object.name
        ));
        restore(
            &kubectl,
            &object,
            json!({"spec": {"numberOfReplicas": replicas}}),
            say,
        )?;
    }
    say("Longhorn volumes have been rolled back to their original replica count.");

    scale_if_there(&kubectl, "kurl", "ekc-operator")?;
    let monitoring = kubectl.run(
        "read the monitoring namespace",
        &["get", "namespace", "--", "monitoring"],
    );
    match monitoring {
        Ok(_) => scale_to_one(&kubectl, "monitoring", "prometheus-operator")?,
        Err(error) if error.kind == Failure::NotFound => {}
        Err(error) => return Err(error.into()),
    }

    say("Scaling up pods using Longhorn volumes.");
    for kind in ["deployments", "statefulsets"] {
        for workload in kubectl.items(&format!("list the {kind}"), &[kind, "--all-namespaces"])? {
            let object = ObjectName::of(kind, &workload);
            let Some(kept) = annotation(&workload) else {
                continue;
            };
            let replicas = count(&object, &kept)?;
            say(&format!(
                "Scaling up {} {}/{}",
                kind.trim_end_matches('s'),
                object.namespace.as_deref().unwrap_or_default(),
                object.name
            ));
            restore(
                &kubectl,
                &object,
                json!({"spec": {"replicas": replicas}}),
                say,
            )?;
        }
    }
    say("Pods using Longhorn volumes have been scaled up.");
    Ok(())
}

fn annotation(object: &Value) -> Option<String> {
    object["metadata"]["annotations"][SCALE_ANNOTATION]
        .as_str()
        .map(str::to_string)
}

fn count(object: &ObjectName, kept: &str) -> Result<u64, LonghornError> {
    kept.trim().parse().map_err(|_| LonghornError::BadCount {
        object: object.to_string(),
        annotation: SCALE_ANNOTATION,
        value: kept.to_string(),
    })
}

/// Writes `patch` with the annotation removed, on the object as it is now; one gone
/// meanwhile is left alone.
fn restore(
    kubectl: &Kubectl,
    object: &ObjectName,
    mut patch: Value,
    say: &mut dyn FnMut(&str),
) -> Result<(), LonghornError> {
    patch["metadata"]["annotations"][SCALE_ANNOTATION] = Value::Null;
    match patch_as_read(kubectl, object, &format!("roll back {object}"), |_| {
        patch.clone()
    }) {
        Err(LonghornError::Kubectl(error)) if error.kind == Failure::NotFound => {
            say(&format!(
                "{object} not found. Ignoring since object must have been deleted."
            ));
            Ok(())
        }
        other => other,
    }
}

/// Writes `patch(object)` on the object as it is now, read again after each conflict: a value
/// read from it is never written over a change made in between.
fn patch_as_read(
    kubectl: &Kubectl,
    object: &ObjectName,
    what: &str,
    patch: impl Fn(&Value) -> Value,
) -> Result<(), LonghornError> {
    for _ in 0..CONFLICT_TRIES {
        let current = read(kubectl, object)?;
        match kubectl.patch_if_unchanged(what, object, resource_version(&current), patch(&current))
        {
            Ok(()) => return Ok(()),
            Err(error) if error.kind == Failure::Conflict => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(LonghornError::KeptChanging {
        what: object.to_string(),
    })
}

fn read(kubectl: &Kubectl, object: &ObjectName) -> Result<Value, KubectlError> {
    let mut arguments = vec!["get", object.kind.as_str()];
    if let Some(namespace) = &object.namespace {
        arguments.extend(["--namespace", namespace]);
    }
    arguments.extend(["--", object.name.as_str()]);
    kubectl.json(&format!("read {object}"), &arguments)
}

fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
}

/// Scales Deployment `namespace/name` to one replica.
fn scale_to_one(kubectl: &Kubectl, namespace: &str, name: &str) -> Result<(), KubectlError> {
    kubectl
        .run(
            &format!("scale up deployment {namespace}/{name}"),
            &[
                "scale",
                "deployment",
                "--namespace",
                namespace,
                "--replicas=1",
                "--",
                name,
            ],
        )
        .map(drop)
}

/// [`scale_to_one`] if that Deployment is there.
fn scale_if_there(kubectl: &Kubectl, namespace: &str, name: &str) -> Result<(), KubectlError> {
    match scale_to_one(kubectl, namespace, name) {
        Err(error) if error.kind == Failure::NotFound => Ok(()),
        other => other,
    }
}

/// Scales every volume with more than one replica to one, keeping its count; waits for
/// Longhorn to drop the extra replicas. Whether any was scaled.
fn scale_down_replicas(
    kubectl: &Kubectl,
    say: &mut dyn FnMut(&str),
) -> Result<bool, LonghornError> {
    let mut scaled = Vec::new();
    for volume in kubectl.items(
        "list the Longhorn volumes",
        &[VOLUMES, "--namespace", NAMESPACE],
    )? {
        let object = ObjectName::of(VOLUMES, &volume);
        if volume["spec"]["numberOfReplicas"].as_u64() == Some(1) {
            say(&format!(
                "Volume {} already has 1 replica, skipping.",
                object.name
            ));
            continue;
        }
        say(&format!(
            "Scaling down replicas for volume {}.",
            object.name
        ));
        patch_as_read(
            kubectl,
            &object,
            &format!("scale down {object}"),
            |current| {
                // The first count kept stays: a second preparation must not keep the 1 it wrote.
                let kept = annotation(current).unwrap_or_else(|| {
                    current["spec"]["numberOfReplicas"]
                        .as_u64()
                        .unwrap_or(0)
                        .to_string()
                });
                json!({
                    "metadata": {"annotations": {SCALE_ANNOTATION: kept}},
                    "spec": {"numberOfReplicas": 1},
                })
            },
        )?;
        scaled.push(object.name);
    }
    if scaled.is_empty() {
        return Ok(false);
    }
    say(&format!(
        "Waiting up to {} for Longhorn volume replicas to scale down.",
        humantime::format_duration(SCALE_DOWN_WAIT)
    ));
    let deadline = Instant::now() + SCALE_DOWN_WAIT;
    for volume in &scaled {
        loop {
            let replicas = kubectl
                .items(
                    &format!("list the replicas of volume {volume}"),
                    &[
                        REPLICAS,
                        "--namespace",
                        NAMESPACE,
                        "--selector",
                        &format!("longhornvolume={volume}"),
                    ],
                )?
                .len();
            if replicas <= 1 {
                break;
            }
            if Instant::now() >= deadline {
                return Err(LonghornError::ReplicasStayed {
                    volume: volume.clone(),
                    replicas,
                    waited: SCALE_DOWN_WAIT,
                });
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    Ok(true)
}

/// The attached volumes that are not scheduled or not healthy.
fn unhealthy_volumes(
    kubectl: &Kubectl,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<String>, KubectlError> {
    let mut unhealthy = Vec::new();
    for volume in kubectl.items(
        "list the Longhorn volumes",
        &[VOLUMES, "--namespace", NAMESPACE],
    )? {
        let name = volume["metadata"]["name"].as_str().unwrap_or_default();
        say(&format!("Checking health of volume {name}."));
        let status = &volume["status"];
        if status["state"] != "attached" {
            continue;
        }
        let scheduled = condition(&status["conditions"], "scheduled").unwrap_or(true);
        if !scheduled || status["robustness"] != "healthy" {
            unhealthy.push(name.to_string());
        }
    }
    Ok(unhealthy)
}

/// The Longhorn nodes not ready or schedulable, with a disk that is not, or over-committed.
fn unhealthy_nodes(
    kubectl: &Kubectl,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<String>, LonghornError> {
    let nodes = kubectl.items("list the Longhorn nodes", &[NODES, "--all-namespaces"])?;
    let mut over_provisioning = None;
    let mut unhealthy = Vec::new();
    for node in nodes {
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        say(&format!("Checking health of node {name}."));
        let status = &node["status"];
        let disks: Vec<&Value> = status["diskStatus"]
            .as_object()
            .map(|disks| disks.values().collect())
            .unwrap_or_default();
        let healthy = condition(&status["conditions"], "ready") == Some(true)
            && condition(&status["conditions"], "schedulable") == Some(true)
            && !disks.is_empty()
            && disks.iter().all(|disk| {
                condition(&disk["conditions"], "ready") == Some(true)
                    && condition(&disk["conditions"], "schedulable") == Some(true)
            });
        let healthy = healthy && {
            let percent = match over_provisioning {
                Some(percent) => percent,
                None => *over_provisioning.insert(over_provisioning_percent(kubectl)?),
            };
            !disks.iter().any(|disk| over_committed(disk, percent))
        };
        if !healthy {
            unhealthy.push(name);
        }
    }
    Ok(unhealthy)
}

/// Whether the disk has scheduled as much as it may hold (its free space times the setting).
fn over_committed(disk: &Value, percent: u64) -> bool {
    let number = |field: &str| disk[field].as_f64().unwrap_or(0.0);
    number("storageScheduled") >= (number("storageAvailable") * percent as f64 / 100.0).floor()
}

fn over_provisioning_percent(kubectl: &Kubectl) -> Result<u64, LonghornError> {
    let setting = kubectl
        .json(
            "read Longhorn's over-provisioning setting",
            &[
                "get",
                SETTINGS,
                "--namespace",
                NAMESPACE,
                "--",
                OVER_PROVISIONING,
            ],
        )
        .map_err(|error| LonghornError::Setting(error.to_string()))?;
    let value = setting["value"].as_str().unwrap_or_default();
    value.trim().parse().map_err(|_| {
        LonghornError::Setting(format!(
            "{OVER_PROVISIONING} is {value:?}, not a percentage"
        ))
    })
}

/// Whether the condition of `kind` (case aside) is True, in a list of conditions or a map of
/// them by type (Longhorn's older API); `None` when it is not there.
fn condition(conditions: &Value, kind: &str) -> Option<bool> {
    let matches = |condition: &Value| {
        condition["type"]
            .as_str()
            .is_some_and(|found| found.eq_ignore_ascii_case(kind))
    };
    let found = match conditions {
        Value::Array(list) => list.iter().find(|condition| matches(condition)),
        Value::Object(map) => map
            .iter()
            .find(|(key, condition)| key.eq_ignore_ascii_case(kind) || matches(condition))
            .map(|(_, condition)| condition),
        _ => None,
    }?;
    Some(found["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_read_from_a_list_or_a_map_by_type() {
        let list = json!([{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "False"}]);
        assert_eq!(condition(&list, "ready"), Some(true));
        assert_eq!(condition(&list, "schedulable"), Some(false));
        assert_eq!(condition(&list, "scheduled"), None);
        let map = json!({"Ready": {"type": "Ready", "status": "True"}});
        assert_eq!(condition(&map, "ready"), Some(true));
    }

    #[test]
    fn a_disk_is_over_committed_when_scheduled_reaches_its_share() {
        let disk = json!({"storageAvailable": 1000, "storageScheduled": 1000});
        assert!(over_committed(&disk, 100));
        assert!(!over_committed(&disk, 200));
        assert!(over_committed(
            &json!({"storageAvailable": 0, "storageScheduled": 0}),
            200
        ));
    }
}
