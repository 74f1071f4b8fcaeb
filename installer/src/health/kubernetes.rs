//! Kubernetes components: objects of one kind, selected by name or labels, read with
//! `kubectl … -o json` and judged by their own status: a Deployment by its `Available`
//! condition (and `Progressing` not past its deadline), a DaemonSet and a StatefulSet by their
//! available pods, a CustomResourceDefinition by `NamesAccepted` and `Established`. A
//! workload's status counts only once its controller has observed the object's current
//! generation, as `kubectl rollout status` waits for: until then it describes an older spec.
//! A Deployment whose rollout cannot finish is also judged by its pods (see [`stuck_rollout`]).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use berth_formats::health::KubernetesProbe;
use serde_json::Value;

use super::found::{Found, MAX_OBJECT_CONDITIONS, ObjectFacts, wanted};
use crate::program::{RunError, run_program};

pub fn probe(probe: &KubernetesProbe, timeout: Duration, kubeconfig: &Path) -> Vec<Found> {
    let wanted = wanted(probe.name.as_deref(), &probe.match_labels);
    let failed = |reason: &str, message: String| {
        vec![Found::new(&probe.kind, &wanted, false, reason, message)]
    };
    let Ok(kubectl) = which::which("kubectl") else {
        return failed("NoKubectl", "kubectl is not on this node".into());
    };
    let kubectl = Kubectl {
        program: &kubectl,
        kubeconfig,
        timeout,
    };
    let mut arguments = vec![
        "get".to_string(),
        probe.kind.clone(),
        "--output".into(),
        "json".into(),
    ];
    match (&probe.namespace, &probe.name) {
        (Some(namespace), _) => arguments.extend(["--namespace".into(), namespace.clone()]),
        // Labels without a namespace select across the cluster, as the Addon API's
        // components are found; a name without one is looked up in the kubeconfig's.
        (None, None) => arguments.push("--all-namespaces".into()),
        (None, Some(_)) => {}
    }
    // Options before `--`: every word after it is a name.
    match &probe.name {
        Some(name) => arguments.extend(["--".into(), name.clone()]),
        None => arguments.extend(["--selector".into(), wanted.clone()]),
    }
    let read = match kubectl.json(&arguments) {
        Ok(read) => read,
        Err((reason, message)) => return failed(reason, message),
    };
    // The server selected by labels; each object is checked again, so that a server which
    // ignores the selector cannot make another add-on's objects count.
    let objects: Vec<&Value> = objects(&read)
        .into_iter()
        .filter(|object| has_labels(object, &probe.match_labels))
        .collect();
    if objects.is_empty() {
        return failed("NotFound", format!("no {} {wanted}", probe.kind));
    }
    objects
        .into_iter()
        .map(|object| {
            let mut found = judge(object);
            if found.healthy
                && let Some((reason, message)) = stuck_rollout(object, &kubectl)
            {
                found.healthy = false;
                found.reason = reason;
                found.message = message;
            }
            found
        })
        .collect()
}

/// `kubectl` with the node's kubeconfig and the probe's time.
struct Kubectl<'a> {
    program: &'a Path,
    kubeconfig: &'a Path,
    timeout: Duration,
}

impl Kubectl<'_> {
    /// The JSON `kubectl ARGUMENTS` printed (they ask for `--output json`), or a reason and
    /// message why there is none.
    fn json(&self, arguments: &[String]) -> Result<Value, (&'static str, String)> {
        let mut command = Command::new(self.program);
        if self.kubeconfig.is_file() {
            command.arg("--kubeconfig").arg(self.kubeconfig);
        }
        command
            .arg(format!(
                "--request-timeout={}s",
                self.timeout.as_secs().max(1)
            ))
            .args(arguments);
        let ran = match run_program(&mut command, self.timeout) {
            Ok(ran) => ran,
            Err(RunError::TimedOut(message)) => return Err(("TimedOut", message)),
            Err(RunError::NotRun(message)) => {
                return Err(("NotRun", format!("kubectl: {message}")));
            }
        };
        if !ran.success {
            let said = ran.stderr.trim().lines().last().unwrap_or("").to_string();
            let reason = if said.contains("NotFound") || said.contains("not found") {
                "NotFound"
            } else {
                "KubectlFailed"
            };
            return Err((reason, said));
        }
        serde_json::from_str::<Value>(&ran.stdout)
            .map_err(|_| ("KubectlFailed", "kubectl printed no JSON".into()))
    }
}

/// Why a pod waits that waiting will not mend: its image cannot be had, or its container
/// keeps failing. The kubelet tries again with a back-off, and the reason alternates between
/// the failure and the back-off.
const STUCK_REASONS: [&str; 7] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// A Deployment that still counts as progressing while its rollout cannot finish: a pod of it
/// has waited for a reason in [`STUCK_REASONS`] for longer than the progress deadline since
/// it was made. Kubernetes' own `ProgressDeadlineExceeded` is undone by any pod that becomes
/// ready again (an old one whose readiness probe missed, on a busy node), so it comes and goes
/// while the new pods stay stuck; the pods themselves do not.
fn stuck_rollout(object: &Value, kubectl: &Kubectl) -> Option<(String, String)> {
    if text(object, &["kind"]) != "Deployment" || !rollout_unfinished(object) {
        return None;
    }
    let namespace = text(object, &["metadata", "namespace"]);
    let labels = object
        .pointer("/spec/selector/matchLabels")?
        .as_object()?
        .iter()
        .map(|(key, value)| Some(format!("{key}={}", value.as_str()?)))
        .collect::<Option<Vec<_>>>()?;
    if namespace.is_empty() || labels.is_empty() {
        return None;
    }
    let deadline = number(object, &["spec", "progressDeadlineSeconds"]).unwrap_or(600);
    let read = kubectl
        .json(&[
            "get".into(),
            "pods".into(),
            "--output".into(),
            "json".into(),
            "--namespace".into(),
            namespace.into(),
            "--selector".into(),
            labels.join(","),
        ])
        .ok()?;
    let now = std::time::SystemTime::now();
    objects(&read).into_iter().find_map(|pod| {
        let made = humantime::parse_rfc3339(text(pod, &["metadata", "creationTimestamp"])).ok()?;
        let waited = now.duration_since(made).ok()?.as_secs();
        if waited <= deadline.max(0).unsigned_abs() {
            return None;
        }
        let waiting = ["initContainerStatuses", "containerStatuses"]
            .iter()
            .filter_map(|field| pod.pointer(&format!("/status/{field}"))?.as_array())
            .flatten()
            .filter_map(|status| status.pointer("/state/waiting"))
            .find(|waiting| STUCK_REASONS.contains(&text(waiting, &["reason"])))?;
        let reason = text(waiting, &["reason"]);
        Some((
            reason.to_string(),
            format!(
                "pod {} has waited {waited}s, past its progress deadline ({deadline}s): {reason}: {}",
                text(pod, &["metadata", "name"]),
                text(waiting, &["message"]),
            ),
        ))
    })
}

/// Whether a Deployment's pods are not yet all of its current template and available.
fn rollout_unfinished(object: &Value) -> bool {
    let wanted = number(object, &["spec", "replicas"]).unwrap_or(1);
    let status = |field| number(object, &["status", field]).unwrap_or(0);
    status("updatedReplicas") < wanted
        || status("replicas") > status("updatedReplicas")
        || status("unavailableReplicas") > 0
}

/// The objects of `kubectl get -o json`: a `List`'s items, or the one object.
fn objects(read: &Value) -> Vec<&Value> {
    match read.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None if read.get("kind").is_some() => vec![read],
        None => Vec::new(),
    }
}

fn has_labels(object: &Value, wanted: &std::collections::BTreeMap<String, String>) -> bool {
    let labels = object
        .get("metadata")
        .and_then(|metadata| metadata.get("labels"));
    wanted.iter().all(|(key, value)| {
        labels
            .and_then(|labels| labels.get(key))
            .and_then(Value::as_str)
            == Some(value.as_str())
    })
}

/// Whether one object is healthy, by its kind's own status.
fn judge(object: &Value) -> Found {
    let kind = text(object, &["kind"]).to_string();
    let name = text(object, &["metadata", "name"]).to_string();
    let workload = matches!(kind.as_str(), "Deployment" | "DaemonSet" | "StatefulSet");
    let (healthy, reason, message) = match kind.as_str() {
        _ if workload && let Some(stale) = not_observed(object) => stale,
        "Deployment" => deployment(object),
        "DaemonSet" => daemon_set(object),
        "StatefulSet" => stateful_set(object),
        "CustomResourceDefinition" => custom_resource_definition(object),
        other => (
            false,
            "UnknownKind".into(),
            format!("Berth does not judge {other}"),
        ),
    };
    let namespace = text(object, &["metadata", "namespace"]);
    let conditions = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|conditions| {
            conditions
                .iter()
                .take(MAX_OBJECT_CONDITIONS)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Found {
        kind,
        name,
        healthy,
        reason,
        message,
        object: Some(ObjectFacts {
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            api_version: text(object, &["apiVersion"]).to_string(),
            conditions,
        }),
    }
}

fn text<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(value, |value, key| value.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn number(value: &Value, path: &[&str]) -> Option<i64> {
    path.iter()
        .try_fold(value, |value, key| value.get(key))
        .and_then(Value::as_i64)
}

/// The status condition of `kind`, if the object has one.
fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|condition| text(condition, &["type"]) == kind)
}

/// A workload whose controller has not yet observed its current generation.
fn not_observed(object: &Value) -> Option<(bool, String, String)> {
    let generation = number(object, &["metadata", "generation"])?;
    let observed = number(object, &["status", "observedGeneration"]).unwrap_or(0);
    (observed < generation).then(|| {
        (
            false,
            "NotObserved".into(),
            format!(
                "its controller has not yet observed generation {generation} \
                 (its status is of generation {observed})"
            ),
        )
    })
}

fn deployment(object: &Value) -> (bool, String, String) {
    if let Some(progressing) = condition(object, "Progressing")
        && text(progressing, &["reason"]) == "ProgressDeadlineExceeded"
    {
        return (
            false,
            "ProgressDeadlineExceeded".into(),
            text(progressing, &["message"]).into(),
        );
    }
    match condition(object, "Available") {
        Some(available) => (
            text(available, &["status"]) == "True",
            non_empty(text(available, &["reason"]), "Available"),
            text(available, &["message"]).into(),
        ),
        None => (
            false,
            "NoCondition".into(),
            "it has no Available condition yet".into(),
        ),
    }
}

fn daemon_set(object: &Value) -> (bool, String, String) {
    let desired = number(object, &["status", "desiredNumberScheduled"]).unwrap_or(0);
    let available = number(object, &["status", "numberAvailable"]).unwrap_or(0);
    let updated = number(object, &["status", "updatedNumberScheduled"]).unwrap_or(0);
    let message = format!("{available} of {desired} pods available, {updated} updated");
    counted(available >= desired, message)
}

fn stateful_set(object: &Value) -> (bool, String, String) {
    let wanted = number(object, &["spec", "replicas"]).unwrap_or(1);
    // `availableReplicas` came with Kubernetes 1.22; before it, ready is what there is.
    let available = number(object, &["status", "availableReplicas"])
        .or_else(|| number(object, &["status", "readyReplicas"]))
        .unwrap_or(0);
    let updated = number(object, &["status", "updatedReplicas"]).unwrap_or(0);
    let message = format!("{available} of {wanted} replicas available, {updated} updated");
    counted(available >= wanted, message)
}

fn counted(enough: bool, message: String) -> (bool, String, String) {
    let reason = if enough { "Available" } else { "NotAvailable" };
    (enough, reason.into(), message)
}

fn custom_resource_definition(object: &Value) -> (bool, String, String) {
    for kind in ["NamesAccepted", "Established"] {
        match condition(object, kind) {
            Some(found) if text(found, &["status"]) == "True" => {}
            Some(found) => {
                return (
                    false,
                    non_empty(text(found, &["reason"]), &format!("Not{kind}")),
                    text(found, &["message"]).into(),
                );
            }
            None => {
                return (
                    false,
                    format!("Not{kind}"),
                    format!("it has no {kind} condition yet"),
                );
            }
        }
    }
    (
        true,
        "Established".into(),
        "its names are accepted and it is established".into(),
    )
}

fn non_empty(text: &str, otherwise: &str) -> String {
    if text.is_empty() {
        otherwise.into()
    } else {
        text.into()
    }
}
