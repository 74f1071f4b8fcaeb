//! Kubernetes components: objects of one kind, selected by name or labels, read with
//! `kubectl … -o json` and judged by their own status: a Deployment by its `Available`
//! condition (and `Progressing` not past its deadline), a DaemonSet and a StatefulSet by their
//! available pods, a CustomResourceDefinition by `NamesAccepted` and `Established`. A
//! workload's status counts only once its controller has observed the object's current
//! generation, as `kubectl rollout status` waits for: until then it describes an older spec.

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
    let mut command = Command::new(kubectl);
    if kubeconfig.is_file() {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    command
        .args(["get", &probe.kind])
        .arg(format!("--request-timeout={}s", timeout.as_secs().max(1)));
    match (&probe.namespace, &probe.name) {
        (Some(namespace), _) => {
            command.args(["--namespace", namespace]);
        }
        // Labels without a namespace select across the cluster, as the Addon API's
        // components are found; a name without one is looked up in the kubeconfig's.
        (None, None) => {
            command.arg("--all-namespaces");
        }
        (None, Some(_)) => {}
    }
    command.args(["--output", "json"]);
    // Options before `--`: every word after it is a name.
    match &probe.name {
        Some(name) => {
            command.arg("--").arg(name);
        }
        None => {
            command.args(["--selector", &wanted]);
        }
    }
    let ran = match run_program(&mut command, timeout) {
        Ok(ran) => ran,
        Err(RunError::TimedOut(message)) => return failed("TimedOut", message),
        Err(RunError::NotRun(message)) => return failed("NotRun", format!("kubectl: {message}")),
    };
    if !ran.success {
        let said = ran.stderr.trim().lines().last().unwrap_or("").to_string();
        let reason = if said.contains("NotFound") || said.contains("not found") {
            "NotFound"
        } else {
            "KubectlFailed"
        };
        return failed(reason, said);
    }
    let Ok(read) = serde_json::from_str::<Value>(&ran.stdout) else {
        return failed("KubectlFailed", "kubectl printed no JSON".into());
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
    objects.into_iter().map(judge).collect()
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
