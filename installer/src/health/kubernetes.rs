//! Kubernetes components: objects of one kind, selected by name or labels, read with
//! `kubectl … -o json` and judged by their own status, as `kubectl rollout status` and the
//! API's conditions tell: a Deployment by `Available` (and `Progressing` not past its
//! deadline), a DaemonSet and a StatefulSet by their ready counts, a CustomResourceDefinition
//! by `Established` and `NamesAccepted`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use berth_formats::health::KubernetesProbe;
use serde_json::Value;

use super::probe::{Found, run_program};

pub fn probe(probe: &KubernetesProbe, timeout: Duration, kubeconfig: &Path) -> Vec<Found> {
    let wanted = super::probe::wanted(probe.name.as_deref(), &probe.match_labels);
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
    if let Some(namespace) = &probe.namespace {
        command.args(["--namespace", namespace]);
    }
    match &probe.name {
        Some(name) => {
            command.arg("--").arg(name);
        }
        None => {
            command.args(["--selector", &wanted]);
        }
    }
    command.args(["--output", "json"]);
    let ran = match run_program(&mut command, timeout) {
        Ok(ran) => ran,
        Err(error) => return failed("TimedOut", error.to_string()),
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
    let objects = objects(&read);
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

/// Whether one object is healthy, by its kind's own status.
fn judge(object: &Value) -> Found {
    let kind = text(object, &["kind"]).to_string();
    let name = text(object, &["metadata", "name"]).to_string();
    let (healthy, reason, message) = match kind.as_str() {
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
    Found {
        kind,
        name,
        healthy,
        reason,
        message,
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
    let ready = number(object, &["status", "numberReady"]).unwrap_or(0);
    let updated = number(object, &["status", "updatedNumberScheduled"]).unwrap_or(desired);
    let message = format!("{ready} of {desired} pods ready, {updated} updated");
    if ready >= desired && updated >= desired {
        (true, "Ready".into(), message)
    } else {
        (false, "NotReady".into(), message)
    }
}

fn stateful_set(object: &Value) -> (bool, String, String) {
    let wanted = number(object, &["spec", "replicas"]).unwrap_or(1);
    let ready = number(object, &["status", "readyReplicas"]).unwrap_or(0);
    let message = format!("{ready} of {wanted} replicas ready");
    if ready >= wanted {
        (true, "Ready".into(), message)
    } else {
        (false, "NotReady".into(), message)
    }
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
