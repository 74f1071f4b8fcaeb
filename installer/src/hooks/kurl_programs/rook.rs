//! `kurl rook wait-for-health [TIMEOUT]`, as kURL's Rook hooks and `rook_is_healthy_to_upgrade`
//! call it: Ceph's own account (`ceph status --format json-pretty`, run in the
//! `rook-ceph-tools` pod, which is scaled up or made from the operator's image when missing) read
//! once a second until it is healthy five times in a row. Healthy is kURL's measure:
//! `HEALTH_OK` but for the checks that never block an upgrade (a single node's pools without
//! redundancy, old crashes, …) and those named to ignore, nothing recovering, no inactive,
//! degraded or misplaced placement groups, no task in progress but a global recovery.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use crate::kubernetes::kubectl::{Failure, Kubectl, KubectlError};

const NAMESPACE: &str = "rook-ceph";
const TOOLBOX: &str = "rook-ceph-tools";
const OPERATOR: &str = "rook-ceph-operator";
/// How long one kubectl call may take.
const CALL: Duration = Duration::from_secs(30);
/// Between two readings, as kURL.
const PAUSE: Duration = Duration::from_secs(1);
/// Healthy readings in a row that make the answer, and failed ones that end the wait.
const IN_A_ROW: u32 = 5;

/// The checks kURL never stops for: they do not go away by waiting, or do not stop Ceph.
const NEVER_BLOCKING: [&str; 6] = [
    "TOO_MANY_PGS",
    "POOL_NO_REDUNDANCY",
    "RECENT_CRASH",
    "POOL_PG_NUM_NOT_POWER_OF_TWO",
    "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED",
    "MON_DISK_LOW",
];

/// The parts of `ceph status --format json` the judgement reads.
#[derive(Debug, Default, Deserialize)]
pub struct CephStatus {
    #[serde(default)]
    pub health: Health,
    #[serde(default)]
    pub pgmap: PlacementGroups,
    #[serde(default)]
    pub progress_events: BTreeMap<String, ProgressEvent>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Health {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub checks: BTreeMap<String, Check>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Check {
    #[serde(default)]
    pub summary: Summary,
}

#[derive(Debug, Default, Deserialize)]
pub struct Summary {
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct PlacementGroups {
    #[serde(default)]
    pub recovering_bytes_per_sec: f64,
    #[serde(default)]
    pub inactive_pgs_ratio: f64,
    #[serde(default)]
    pub degraded_ratio: f64,
    #[serde(default)]
    pub misplaced_ratio: f64,
}

#[derive(Debug, Default, Deserialize)]
pub struct ProgressEvent {
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub progress: f64,
}

/// Why Ceph is not healthy by kURL's measure, in kURL's words; `None` when it is.
pub fn unhealthy_because(status: &CephStatus, ignore: &[String]) -> Option<String> {
    let mut said = Vec::new();
    if status.health.status != "HEALTH_OK" {
        let mut reasons: Vec<&str> = status
            .health
            .checks
            .iter()
            .filter(|(name, _)| {
                !NEVER_BLOCKING.contains(&name.as_str()) && !ignore.iter().any(|i| i == *name)
            })
            .map(|(_, check)| check.summary.message.as_str())
            .collect();
        reasons.sort_unstable();
        if !reasons.is_empty() {
            said.push(format!(
                "health is {} because {:?}",
                status.health.status,
                reasons.join(" and ")
            ));
        }
    }
    let groups = &status.pgmap;
    if groups.recovering_bytes_per_sec != 0.0 {
        said.push(format!(
            "{} bytes are being recovered per second, 0 desired",
            groups.recovering_bytes_per_sec
        ));
    }
    if groups.inactive_pgs_ratio != 0.0
        || groups.degraded_ratio != 0.0
        || groups.misplaced_ratio != 0.0
    {
        said.push(format!(
            "{:.6}% of PGs are inactive, {:.6}% are degraded, and {:.6}% are misplaced, 0 required for all",
            groups.inactive_pgs_ratio * 100.0,
            groups.degraded_ratio * 100.0,
            groups.misplaced_ratio * 100.0
        ));
    }
    if let Some(progress) = progress_events(status) {
        said.push(progress);
    }
    (!said.is_empty()).then(|| said.join(" and "))
}

/// The first task in progress (by key) that is not a global recovery, with how many there are.
fn progress_events(status: &CephStatus) -> Option<String> {
    let first = status
        .progress_events
        .values()
        .find(|event| !event.message.contains("Global Recovery Event"))?;
    Some(format!(
        "{} tasks in progress, first task {:?} is {:.6}% complete",
        status.progress_events.len(),
        first.message.replace('\n', ""),
        first.progress * 100.0
    ))
}

/// Why the wait ended without a healthy Ceph.
#[derive(Debug, thiserror::Error)]
pub enum RookHealthError {
    #[error("failed to wait for rook health {IN_A_ROW}x in a row: {0}")]
    Unreadable(String),
    #[error("timed out waiting rook to become healthy, currently {0:?}")]
    TimedOut(String),
}

/// Waits (up to `timeout`, or without end) for Ceph to be healthy [`IN_A_ROW`] readings in a
/// row; says on `progress` what it is waiting for.
pub fn wait_for_health(
    timeout: Option<Duration>,
    ignore: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<(), RookHealthError> {
    let kubectl = Kubectl::from_environment(CALL);
    let deadline = timeout.map(|timeout| Instant::now() + timeout);
    progress("Waiting for Rook-Ceph to be healthy");
    let (mut failures, mut healthy) = (0, 0);
    let mut last_reason = String::new();
    loop {
        match current_status(&kubectl, deadline) {
            Err(error) => {
                failures += 1;
                if failures >= IN_A_ROW {
                    return Err(RookHealthError::Unreadable(error));
                }
                last_reason = error;
            }
            Ok(status) => {
                failures = 0;
                match unhealthy_because(&status, ignore) {
                    None => {
                        healthy += 1;
                        if healthy >= IN_A_ROW {
                            return Ok(());
                        }
                    }
                    Some(reason) => {
                        healthy = 0;
                        if reason != last_reason {
                            progress(&reason);
                        }
                        last_reason = reason;
                    }
                }
            }
        }
        if deadline.is_some_and(|deadline| Instant::now() + PAUSE >= deadline) {
            return Err(RookHealthError::TimedOut(last_reason));
        }
        std::thread::sleep(PAUSE);
    }
}

/// One reading of `ceph status` in the toolbox, started first if it is not running.
fn current_status(kubectl: &Kubectl, deadline: Option<Instant>) -> Result<CephStatus, String> {
    start_toolbox(kubectl, deadline).map_err(|error| {
        format!("failed to start toolbox, required for rook health checks: {error}")
    })?;
    let text = in_toolbox(kubectl, &["ceph", "status", "--format", "json-pretty"])?;
    serde_json::from_str(&text)
        .map_err(|error| format!("failed to decode 'ceph status --format json-pretty': {error}"))
}

/// Runs `command` in the one toolbox pod; its standard output.
fn in_toolbox(kubectl: &Kubectl, command: &[&str]) -> Result<String, String> {
    let pods = kubectl
        .items(
            "find the rook-ceph-tools pod",
            &[
                "pods",
                "--namespace",
                NAMESPACE,
                "--selector",
                "app=rook-ceph-tools",
            ],
        )
        .map_err(|error| error.to_string())?;
    let [pod] = pods.as_slice() else {
        let names: Vec<&str> = pods
            .iter()
            .filter_map(|pod| pod["metadata"]["name"].as_str())
            .collect();
        return Err(format!(
            "found {} rook-ceph-tools pods, with names {:?}, expected 1",
            pods.len(),
            names.join(", ")
        ));
    };
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let container = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or_default();
    let mut arguments = vec![
        "exec",
        "--namespace",
        NAMESPACE,
        "--container",
        container,
        name,
        "--",
    ];
    arguments.extend_from_slice(command);
    kubectl
        .run(
            &format!("run {:?} in {name}", command.join(" ")),
            &arguments,
        )
        .map_err(|error| error.to_string())
}

/// The toolbox when there is none, as kURL makes it: Rook's own tools container, run from
/// the operator's image (which carries `ceph`), with the monitors' addresses and the admin
/// key the operator keeps in `rook-ceph-mon-endpoints` and `rook-ceph-mon`.
fn toolbox_deployment(image: &str) -> serde_json::Value {
    let host = |name: &str, path: &str| json!({"name": name, "hostPath": {"path": path}});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": TOOLBOX, "namespace": NAMESPACE, "labels": {"app": TOOLBOX}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": TOOLBOX}},
            "template": {
                "metadata": {"labels": {"app": TOOLBOX}},
                "spec": {
                    // `rbd map` hangs without the host's network (Rook's own note).
                    "hostNetwork": true,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "containers": [{
                        "name": TOOLBOX,
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/tini"],
                        "args": ["-g", "--", "/usr/local/bin/toolbox.sh"],
                        "env": [{
                            "name": "ROOK_ADMIN_SECRET",
                            "valueFrom": {"secretKeyRef": {"name": "rook-ceph-mon", "key": "admin-secret"}},
                        }],
                        "securityContext": {"privileged": true},
                        "volumeMounts": [
                            {"name": "dev", "mountPath": "/dev"},
                            {"name": "sysbus", "mountPath": "/sys/bus"},
                            {"name": "libmodules", "mountPath": "/lib/modules"},
                            {"name": "mon-endpoint-volume", "mountPath": "/etc/rook"},
                        ],
                    }],
                    "volumes": [
                        host("dev", "/dev"),
                        host("sysbus", "/sys/bus"),
                        host("libmodules", "/lib/modules"),
                        {
                            "name": "mon-endpoint-volume",
                            "configMap": {
                                "name": "rook-ceph-mon-endpoints",
                                "items": [{"key": "data", "path": "mon-endpoints"}],
                            },
                        },
                    ],
                },
            },
        },
    })
}

fn read_toolbox(kubectl: &Kubectl) -> Result<serde_json::Value, KubectlError> {
    kubectl.json(
        "read the rook-ceph-tools deployment",
        &["get", "deployment", "--namespace", NAMESPACE, "--", TOOLBOX],
    )
}

fn start_toolbox(kubectl: &Kubectl, deadline: Option<Instant>) -> Result<(), KubectlError> {
    match read_toolbox(kubectl) {
        Ok(toolbox) => {
            if toolbox["status"]["replicas"].as_u64().unwrap_or(0) == 0 {
                kubectl.run(
                    "scale up the rook-ceph-tools deployment",
                    &[
                        "scale",
                        "deployment",
                        "--namespace",
                        NAMESPACE,
                        "--replicas=1",
                        "--",
                        TOOLBOX,
                    ],
                )?;
                await_one_ready(kubectl, deadline)?;
            }
            Ok(())
        }
        Err(error) if error.kind == Failure::NotFound => {
            let operator = kubectl.json(
                "read the rook-ceph-operator deployment",
                &[
                    "get",
                    "deployment",
                    "--namespace",
                    NAMESPACE,
                    "--",
                    OPERATOR,
                ],
            )?;
            let image = operator["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let deployment = toolbox_deployment(&image);
            let file = tempfile::NamedTempFile::new()
                .and_then(|file| fs_err::write(file.path(), deployment.to_string()).map(|()| file))
                .map_err(|error| KubectlError {
                    what: "write the rook-ceph-tools deployment".into(),
                    message: error.to_string(),
                    kind: Failure::Other,
                })?;
            kubectl.run(
                "create the rook-ceph-tools deployment",
                &[
                    "create".as_ref(),
                    "--filename".as_ref(),
                    file.path().as_os_str(),
                ],
            )?;
            await_one_ready(kubectl, deadline)
        }
        Err(error) => Err(error),
    }
}

/// Waits for the toolbox's one pod to be ready (kURL's awaitDeploymentScale to 1).
fn await_one_ready(kubectl: &Kubectl, deadline: Option<Instant>) -> Result<(), KubectlError> {
    loop {
        let toolbox = read_toolbox(kubectl)?;
        let status = &toolbox["status"];
        let one = |field: &str| status[field].as_u64() == Some(1);
        if one("replicas")
            && one("availableReplicas")
            && one("readyReplicas")
            && one("updatedReplicas")
        {
            return Ok(());
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Err(KubectlError {
                what: "wait for the rook-ceph-tools deployment".into(),
                message: format!(
                    "it has {} ready replicas, not 1",
                    status["readyReplicas"].as_u64().unwrap_or(0)
                ),
                kind: Failure::Other,
            });
        }
        std::thread::sleep(PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> CephStatus {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn only_checks_that_block_make_ceph_unhealthy() {
        let single_node = status(
            r#"{"health":{"status":"HEALTH_WARN","checks":{
                "POOL_NO_REDUNDANCY":{"summary":{"message":"3 pool(s) have no replicas configured"}},
                "RECENT_CRASH":{"summary":{"message":"1 daemons have recently crashed"}}}},
              "pgmap":{"recovering_bytes_per_sec":0}}"#,
        );
        assert_eq!(unhealthy_because(&single_node, &[]), None);
        let module = status(
            r#"{"health":{"status":"HEALTH_ERR","checks":{
                "MGR_MODULE_ERROR":{"summary":{"message":"2 mgr modules have failed"}},
                "OSD_DOWN":{"summary":{"message":"1 osds down"}}}}}"#,
        );
        assert_eq!(
            unhealthy_because(&module, &[]).as_deref(),
            Some(r#"health is HEALTH_ERR because "1 osds down and 2 mgr modules have failed""#)
        );
        assert_eq!(
            unhealthy_because(&module, &["MGR_MODULE_ERROR".into(), "OSD_DOWN".into()]),
            None
        );
    }

    #[test]
    fn recovery_and_tasks_in_progress_are_waited_for_but_a_global_recovery_is_not() {
        let recovering = status(
            r#"{"health":{"status":"HEALTH_OK"},
              "pgmap":{"recovering_bytes_per_sec":2048,"degraded_ratio":0.25},
              "progress_events":{
                "b":{"message":"Global Recovery Event (3s)","progress":0.5},
                "c":{"message":"Rebalancing after osd.1 marked in\n","progress":0.1}}}"#,
        );
        let said = unhealthy_because(&recovering, &[]).unwrap();
        assert!(
            said.contains("2048 bytes are being recovered per second"),
            "{said}"
        );
        assert!(said.contains("25.000000% are degraded"), "{said}");
        assert!(
            said.contains(r#"2 tasks in progress, first task "Rebalancing after osd.1 marked in" is 10.000000% complete"#),
            "{said}"
        );
        let global = status(
            r#"{"health":{"status":"HEALTH_OK"},
              "progress_events":{"a":{"message":"Global Recovery Event (1s)","progress":0.9}}}"#,
        );
        assert_eq!(unhealthy_because(&global, &[]), None);
    }
}
