//! Each add-on's state published in the cluster as an `Addon` (`addons.k8s.io/v1alpha1`,
//! cluster-scoped, its CustomResourceDefinition in `crd.yaml`), as the Addon API proposal
//! shapes it: the version in place and the installer that put it there, the conditions
//! `berth status` gives (Available, Degraded, Progressing), and its components: the labels
//! that select them and a ref per object, with each Kubernetes object's own conditions as
//! read. `kubectl get addons` lists them.
//!
//! Only the cluster's primary publishes (it holds the admin's kubeconfig and judges the
//! cluster's components): after each run and each fleet agent report. An Addon whose add-on
//! the node no longer records is deleted; `berth reset` deletes them all and the definition.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::health::HealthRecord;
use crate::kubernetes::kubectl::{Kubectl, KubectlError};
use crate::node::last_installer::LastInstaller;
use crate::node::layout::Layout;
use crate::node::state::{AddonState, StateStore};

/// The definition, applied before any Addon.
const CRD: &str = include_str!("crd.yaml");
const CRD_NAME: &str = "addons.addons.k8s.io";
const RESOURCE: &str = "addons.addons.k8s.io";
/// The label on every Addon Berth writes: those it may delete.
const MANAGED: &str = "app.kubernetes.io/managed-by=berth";
/// How long one kubectl call may take: an agent's report waits for it.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(20);
/// How often Addons that did not change are written again (their `checkedAt` with them).
const REFRESH: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum AddonResourceError {
    #[error(transparent)]
    Kubectl(#[from] KubectlError),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    State(#[from] crate::node::state::StateError),
}

/// Whether this node publishes: the cluster's primary (it did not join), with the admin's
/// kubeconfig and kubectl.
fn publisher(layout: &Layout) -> Option<PathBuf> {
    let joined = LastInstaller::load(layout)
        .ok()
        .flatten()
        .is_some_and(|last| last.joined);
    let kubeconfig = layout.kubeconfig();
    (!joined && kubeconfig.is_file() && which::which("kubectl").is_ok()).then_some(kubeconfig)
}

/// Publishes every add-on the node records (with a version in place) as an Addon, from the
/// health records its last probes left, and deletes the Addons of add-ons it no longer
/// records. Does nothing off the primary or without a cluster; says how many it wrote.
pub fn publish(layout: &Layout) -> Result<Option<usize>, AddonResourceError> {
    let Some(kubeconfig) = publisher(layout) else {
        return Ok(None);
    };
    let (states, _) = StateStore::new(layout.state_dir()).load_all()?;
    // An Addon's name is the add-on's; one Kubernetes cannot take (`an_addon`) is left out.
    let published: Vec<&AddonState> = states
        .iter()
        .filter(|state| {
            state.current.is_some()
                && berth_formats::health::check_dns_subdomain(&state.name).is_ok()
        })
        .collect();
    let items: Vec<Value> = published
        .iter()
        .map(|state| addon(state, HealthRecord::load(layout, &state.name).as_ref()))
        .collect();
    let folder = layout.work_dir();
    fs_err::create_dir_all(&folder).map_err(|source| AddonResourceError::Write {
        path: folder.clone(),
        source,
    })?;
    // The fleet agent reports every few seconds: what is already published, and not long ago,
    // is not written again.
    let marker = folder.join("addons-published");
    let digest = published_digest(&items);
    if touched_within(&marker, REFRESH)
        && fs_err::read_to_string(&marker).is_ok_and(|text| text == digest)
    {
        return Ok(Some(items.len()));
    }
    let _ = fs_err::remove_file(&marker);
    let crd = folder.join("addon-crd.yaml");
    write(&crd, CRD.as_bytes())?;
    let kubectl = Kubectl::with_kubeconfig(&kubeconfig, KUBECTL_TIMEOUT);
    kubectl.run(
        "apply the Addon definition",
        &["apply".as_ref(), "-f".as_ref(), crd.as_os_str()],
    )?;
    kubectl.run(
        "wait for the Addon definition",
        &[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            &format!("customresourcedefinition/{CRD_NAME}"),
        ],
    )?;
    let list = folder.join("addons.json");
    let count = items.len();
    let document = json!({"apiVersion": "v1", "kind": "List", "items": items});
    write(&list, &serde_json::to_vec(&document).expect("JSON"))?;
    if count > 0 {
        kubectl.run(
            "apply the Addons",
            &["apply".as_ref(), "-f".as_ref(), list.as_os_str()],
        )?;
    }
    let listed = kubectl.run(
        "list the Addons",
        &[
            "get",
            RESOURCE,
            "--selector",
            MANAGED,
            "--output",
            "jsonpath={.items[*].metadata.name}",
        ],
    )?;
    let stale: Vec<&str> = listed
        .split_whitespace()
        .filter(|name| !published.iter().any(|state| state.name == *name))
        .collect();
    if !stale.is_empty() {
        let mut arguments = vec!["delete", RESOURCE, "--ignore-not-found", "--"];
        arguments.extend(&stale);
        kubectl.run("delete Addons no add-on stands for", &arguments)?;
    }
    let _ = fs_err::remove_file(&crd);
    let _ = fs_err::remove_file(&list);
    write(&marker, digest.as_bytes())?;
    Ok(Some(count))
}

/// What the Addons say, less when they were checked: unchanged, they need no new write.
fn published_digest(items: &[Value]) -> String {
    let mut items = items.to_vec();
    for item in &mut items {
        if let Some(status) = item.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("checkedAt");
        }
    }
    berth_formats::Sha256Digest::of(&serde_json::to_vec(&items).expect("JSON")).to_string()
}

/// [`publish`] for a fleet agent's report: after a failure (the API server down), it is not
/// tried again for a minute, so the agent's reports go on at their pace meanwhile.
pub fn publish_from_agent(layout: &Layout) -> Result<Option<usize>, AddonResourceError> {
    let failed = layout.work_dir().join("addons-publish-failed");
    if touched_within(&failed, REFRESH) {
        return Ok(None);
    }
    let published = publish(layout);
    if published.is_err() {
        let _ = fs_err::write(&failed, b"");
    } else {
        let _ = fs_err::remove_file(&failed);
    }
    published
}

/// [`publish`], saying on standard error what it did; a failure is a warning (the run on the
/// node is done either way).
pub fn publish_and_say(layout: &Layout) {
    match publish(layout) {
        Ok(Some(count)) => {
            eprintln!("berth: {count} add-on(s) published as Addon resources (kubectl get addons)")
        }
        Ok(None) => {}
        Err(error) => {
            eprintln!("berth: warning: the add-ons were not published as Addon resources: {error}")
        }
    }
}

/// Deletes every Addon Berth wrote, then the definition (`berth reset` on the primary, before
/// the add-ons' reset hooks take the cluster away). Does nothing off the primary.
pub fn remove(layout: &Layout) -> Result<(), AddonResourceError> {
    let Some(kubeconfig) = publisher(layout) else {
        return Ok(());
    };
    Kubectl::with_kubeconfig(&kubeconfig, KUBECTL_TIMEOUT).run(
        "delete the Addons",
        &[
            "delete",
            "customresourcedefinition",
            CRD_NAME,
            "--ignore-not-found",
        ],
    )?;
    Ok(())
}

/// Whether the file at `path` was written less than `age` ago.
fn touched_within(path: &Path, age: Duration) -> bool {
    fs_err::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|elapsed| elapsed < age)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), AddonResourceError> {
    fs_err::write(path, bytes).map_err(|source| AddonResourceError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// One add-on as an Addon object.
fn addon(state: &AddonState, health: Option<&HealthRecord>) -> Value {
    let status = crate::node::status::addon_status(state, health);
    let version = status.current_version.clone().unwrap_or_default();
    let conditions: Vec<Value> = status
        .conditions
        .iter()
        .map(|condition| without_nulls(serde_json::to_value(condition).expect("JSON")))
        .collect();
    let mut match_labels = serde_json::Map::new();
    let mut refs = Vec::new();
    for component in health
        .map(|record| record.components.as_slice())
        .unwrap_or_default()
    {
        for (key, value) in &component.match_labels {
            match_labels.insert(key.clone(), value.clone().into());
        }
        for found in &component.refs {
            let mut reference = json!({
                "component": component.name,
                "kind": found.kind,
                "name": found.name,
            });
            match &found.object {
                Some(object) => {
                    reference["apiVersion"] = object.api_version.clone().into();
                    if let Some(namespace) = &object.namespace {
                        reference["namespace"] = namespace.clone().into();
                    }
                    reference["conditions"] = object.conditions.clone().into();
                }
                None => {
                    reference["conditions"] = found
                        .conditions
                        .iter()
                        .map(|condition| serde_json::to_value(condition).expect("JSON"))
                        .collect();
                }
            }
            refs.push(reference);
        }
    }
    json!({
        "apiVersion": "addons.k8s.io/v1alpha1",
        "kind": "Addon",
        "metadata": {
            "name": state.name,
            "labels": {"app.kubernetes.io/managed-by": "berth"},
        },
        "spec": {"version": state.desired.clone().unwrap_or_else(|| version.clone())},
        "status": {
            "version": version,
            "installer": state.current.as_ref().map(|current| current.target.id.as_str()),
            "checkedAt": health.map_or_else(berth_formats::time::now, |record| record.checked_at.clone()),
            "conditions": conditions,
            "components": {"matchLabels": match_labels, "refs": refs},
        },
    })
}

/// A condition with its unset fields left out, as Kubernetes writes them.
fn without_nulls(mut value: Value) -> Value {
    if let Value::Object(fields) = &mut value {
        fields.retain(|_, field| !field.is_null());
    }
    value
}
