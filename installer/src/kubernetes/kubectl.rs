//! kubectl as Berth runs it against a cluster: each call bounded in time (a stopped API server
//! must not hang a run), its output bounded, and what it said on failure kept for the error,
//! with the two answers callers act on told apart: the object is not there, or it changed
//! since it was read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::program::{RunError, run_program_bounded};

/// The most of kubectl's output read: a cluster-wide list of a large cluster's objects.
const MAX_OUTPUT: u64 = 64 << 20;

/// Why a kubectl call gave no answer.
#[derive(Debug, thiserror::Error)]
#[error("kubectl could not {what}: {message}")]
pub struct KubectlError {
    pub what: String,
    pub message: String,
    pub kind: Failure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server has no such object (or no such kind).
    NotFound,
    /// The object changed since it was read: read it again and retry.
    Conflict,
    /// Anything else: refused, unreachable, timed out.
    Other,
}

/// kubectl with one kubeconfig (or kubectl's own choice: `KUBECONFIG`, then `~/.kube/config`,
/// as kURL's programs find the cluster) and one bound per call.
#[derive(Debug, Clone)]
pub struct Kubectl {
    kubeconfig: Option<PathBuf>,
    timeout: Duration,
}

impl Kubectl {
    /// The cluster kubectl itself would choose.
    pub fn from_environment(timeout: Duration) -> Kubectl {
        Kubectl {
            kubeconfig: None,
            timeout,
        }
    }

    pub fn with_kubeconfig(kubeconfig: &Path, timeout: Duration) -> Kubectl {
        Kubectl {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            timeout,
        }
    }

    /// Runs kubectl with `arguments`; its standard output. `what` says, for the error, what
    /// the call was for ("list the Longhorn volumes").
    pub fn run<S: AsRef<std::ffi::OsStr>>(
        &self,
        what: &str,
        arguments: &[S],
    ) -> Result<String, KubectlError> {
        let mut command = Command::new("kubectl");
        if let Some(kubeconfig) = &self.kubeconfig {
            command.arg("--kubeconfig").arg(kubeconfig);
        }
        command
            .arg(format!(
                "--request-timeout={}s",
                self.timeout.as_secs().max(1)
            ))
            .args(arguments);
        let failed = |message: String, kind: Failure| KubectlError {
            what: what.to_string(),
            message,
            kind,
        };
        // The server's own bound, then ours a little later for a kubectl that hangs anyway.
        let ran = run_program_bounded(
            &mut command,
            self.timeout + Duration::from_secs(5),
            MAX_OUTPUT,
        )
        .map_err(|error| match error {
            RunError::TimedOut(message) | RunError::NotRun(message) => {
                failed(message, Failure::Other)
            }
        })?;
        if ran.stdout_cut {
            return Err(failed(
                format!("it printed more than {} MiB", MAX_OUTPUT >> 20),
                Failure::Other,
            ));
        }
        if ran.success {
            return Ok(ran.stdout);
        }
        let said = ran.stderr.trim().to_string();
        let kind = if said.contains("(NotFound)")
            || said.contains("the server doesn't have a resource type")
        {
            Failure::NotFound
        } else if said.contains("(Conflict)") || said.contains("the object has been modified") {
            Failure::Conflict
        } else {
            Failure::Other
        };
        Err(failed(said, kind))
    }

    /// `kubectl VERB --output json REST…` for `arguments` VERB REST… (right after the verb,
    /// where a `--` that ends the options cannot make it a name), read.
    pub fn json<S: AsRef<std::ffi::OsStr>>(
        &self,
        what: &str,
        arguments: &[S],
    ) -> Result<Value, KubectlError> {
        let mut all: Vec<&std::ffi::OsStr> = arguments.iter().map(AsRef::as_ref).collect();
        let after_verb = all.len().min(1);
        all.splice(
            after_verb..after_verb,
            [
                std::ffi::OsStr::new("--output"),
                std::ffi::OsStr::new("json"),
            ],
        );
        let text = self.run(what, &all)?;
        serde_json::from_str(&text).map_err(|error| KubectlError {
            what: what.to_string(),
            message: format!("kubectl printed no JSON object: {error}"),
            kind: Failure::Other,
        })
    }

    /// The items of `kubectl get ARGUMENTS -o json` (a list).
    pub fn items<S: AsRef<std::ffi::OsStr>>(
        &self,
        what: &str,
        arguments: &[S],
    ) -> Result<Vec<Value>, KubectlError> {
        let mut all = vec![std::ffi::OsStr::new("get")];
        all.extend(arguments.iter().map(AsRef::as_ref));
        Ok(
            match self.json(what, &all)?.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
        )
    }

    /// A merge patch of one object that holds only if the object is still at
    /// `resource_version` (the server answers Conflict otherwise): a value read from the
    /// object and written back is never written over a change made in between.
    pub fn patch_if_unchanged(
        &self,
        what: &str,
        object: &ObjectName,
        resource_version: &str,
        mut patch: Value,
    ) -> Result<(), KubectlError> {
        patch["metadata"]["resourceVersion"] = resource_version.into();
        let mut arguments = vec!["patch".to_string(), object.kind.clone()];
        if let Some(namespace) = &object.namespace {
            arguments.extend(["--namespace".to_string(), namespace.clone()]);
        }
        arguments.extend([
            "--type".to_string(),
            "merge".to_string(),
            "--patch".to_string(),
            patch.to_string(),
            "--".to_string(),
            object.name.clone(),
        ]);
        self.run(what, &arguments).map(drop)
    }
}

/// Which object: its kind as kubectl takes it (`deployment`, `volumes.longhorn.io`), its
/// namespace (none for cluster-scoped ones) and name.
#[derive(Debug, Clone)]
pub struct ObjectName {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectName {
    /// The object `item` (as kubectl printed it) of `kind`.
    pub fn of(kind: &str, item: &Value) -> ObjectName {
        ObjectName {
            kind: kind.to_string(),
            namespace: item["metadata"]["namespace"].as_str().map(str::to_string),
            name: item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        }
    }
}

impl std::fmt::Display for ObjectName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}
