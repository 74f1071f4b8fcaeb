//! After a restore: what the cluster's other nodes need, found in the restored cluster itself.
//!
//! - Workers that still run come back on their own where the control plane kept its address.
//!   Where it moved, each still names the old one (its kubelet's kubeconfig, and kube-proxy's,
//!   which kubeadm wrote anew in the cluster): kube-proxy is restarted so that its pods take
//!   the new address, and each worker is told to run the join command again, which points it
//!   here and resets nothing (the Kubernetes add-on's join hook does it, once the API server
//!   at the new address shows a certificate of the node's own cluster CA).
//! - Other control-plane nodes ran members of the etcd cluster the restore replaced with a
//!   new one of this node alone: they are removed, reset and joined again as control planes.
//! - The machine backed up, where it was another than this one, is removed for good.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::kubernetes::join::JoinFile;
use crate::kubernetes::kubectl::{Failure, Kubectl, KubectlError};

/// The join parameter that names the address the nodes reach the cluster's API on.
const API_ADDRESS_PARAM: &str = "kubernetes-master-address";

/// How long each kubectl call may take.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

/// The API address `joins` (a node's published join parameters) name, when they name one.
pub fn api_address(joins: &JoinFile) -> Option<String> {
    joins
        .params
        .get(API_ADDRESS_PARAM)
        .map(|param| param.value.clone())
}

/// The cluster's nodes other than this one, by role.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OtherNodes {
    pub workers: Vec<String>,
    pub control_planes: Vec<String>,
    /// The node backed up, where it is not this one (a machine of another name took its place).
    pub backed_up: Option<String>,
}

/// The restored cluster's nodes other than `this` (by their Node objects), the node named
/// `backed_up` set apart.
pub fn other_nodes(
    admin_kubeconfig: &Path,
    this: &str,
    backed_up: &str,
) -> Result<OtherNodes, KubectlError> {
    let kubectl = Kubectl::with_kubeconfig(admin_kubeconfig, KUBECTL_TIMEOUT);
    let nodes = kubectl.items("list the cluster's nodes", &["nodes"])?;
    Ok(sort_nodes(&nodes, this, backed_up))
}

fn sort_nodes(nodes: &[Value], this: &str, backed_up: &str) -> OtherNodes {
    let mut others = OtherNodes::default();
    for node in nodes {
        let Some(name) = node["metadata"]["name"].as_str() else {
            continue;
        };
        if name == this {
            continue;
        }
        if name == backed_up.to_lowercase() {
            others.backed_up = Some(name.to_string());
            continue;
        }
        let labels = &node["metadata"]["labels"];
        let control_plane = ["master", "control-plane"].iter().any(|role| {
            labels
                .get(format!("node-role.kubernetes.io/{role}"))
                .is_some()
        });
        if control_plane {
            others.control_planes.push(name.to_string());
        } else {
            others.workers.push(name.to_string());
        }
    }
    others
}

/// Restarts kube-proxy's pods, so that each takes the API address kubeadm wrote in its
/// ConfigMap (a worker's pod does once its kubelet follows). False where the cluster runs no
/// kube-proxy.
pub fn restart_kube_proxy(admin_kubeconfig: &Path) -> Result<bool, KubectlError> {
    let kubectl = Kubectl::with_kubeconfig(admin_kubeconfig, KUBECTL_TIMEOUT);
    match kubectl.run(
        "restart kube-proxy",
        &[
            "rollout",
            "restart",
            "--namespace",
            "kube-system",
            "daemonset/kube-proxy",
        ],
    ) {
        Ok(_) => Ok(true),
        Err(error) if error.kind == Failure::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// Where the restored cluster's API is, against where the backed-up one's was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiAddress<'a> {
    Same,
    Moved {
        old: &'a str,
        new: &'a str,
    },
    /// The backup's join parameters, or the restored ones, name none.
    Unknown,
}

impl<'a> ApiAddress<'a> {
    pub fn compare(old: Option<&'a str>, new: Option<&'a str>) -> ApiAddress<'a> {
        match (old, new) {
            (Some(old), Some(new)) if old == new => ApiAddress::Same,
            (Some(old), Some(new)) => ApiAddress::Moved { old, new },
            _ => ApiAddress::Unknown,
        }
    }
}

/// What the operator does next on each other node, one line each (none when nothing is
/// needed).
pub fn advice(others: &OtherNodes, address: ApiAddress) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(old) = &others.backed_up {
        lines.push(format!(
            "{old} is the machine backed up, not this one: once it is gone for good, `berth remove-node {old}` here takes it out of the cluster"
        ));
    }
    if !others.workers.is_empty() {
        let workers = others.workers.join(", ");
        lines.push(match address {
            ApiAddress::Same => format!("{workers}: still running, they come back on their own"),
            ApiAddress::Moved { old, new } => format!(
                "{workers}: they reach the cluster's API at {old}, and it is at {new} now: run the join command below on each; it points the node here and resets nothing"
            ),
            ApiAddress::Unknown => format!(
                "{workers}: the backup does not say where they reach the cluster's API; those that reach it where this node serves it come back on their own, and on any other, run the join command below: it points the node here and resets nothing"
            ),
        });
    }
    if !others.control_planes.is_empty() {
        let names = others.control_planes.join(", ");
        lines.push(format!(
            "{names}: control planes that ran members of the etcd cluster this restore replaced: for each, `berth remove-node NAME` here, `berth reset` on it, then join it again with the command `berth join-command --control-plane` prints"
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, role: Option<&str>) -> Value {
        let mut labels = serde_json::json!({"kubernetes.io/hostname": name});
        if let Some(role) = role {
            labels[format!("node-role.kubernetes.io/{role}")] = "".into();
        }
        serde_json::json!({"metadata": {"name": name, "labels": labels}})
    }

    #[test]
    fn the_other_nodes_are_sorted_by_role_and_each_told_what_it_needs() {
        let nodes = [
            node("node-1", Some("master")),
            node("node-2", None),
            node("node-3", None),
            node("node-4", Some("control-plane")),
            node("old-1", Some("master")),
        ];
        let others = sort_nodes(&nodes, "node-1", "Old-1");
        assert_eq!(
            others,
            OtherNodes {
                workers: vec!["node-2".into(), "node-3".into()],
                control_planes: vec!["node-4".into()],
                backed_up: Some("old-1".into()),
            }
        );
        let stayed = advice(&others, ApiAddress::Same);
        assert_eq!(stayed.len(), 3, "{stayed:?}");
        assert!(stayed[0].contains("berth remove-node old-1"), "{stayed:?}");
        assert!(
            stayed[1].starts_with("node-2, node-3: still running"),
            "{stayed:?}"
        );
        assert!(
            stayed[2].starts_with("node-4: control planes"),
            "{stayed:?}"
        );
        let moved = advice(
            &others,
            ApiAddress::compare(Some("10.0.0.2:6443"), Some("10.0.0.9:6443")),
        );
        assert!(
            moved[1]
                .contains("at 10.0.0.2:6443, and it is at 10.0.0.9:6443 now: run the join command"),
            "{moved:?}"
        );
        // The backed-up node restored onto its own name is this one, and nothing is said of it.
        let alone = sort_nodes(&nodes[..1], "node-1", "node-1");
        assert_eq!(alone, OtherNodes::default());
        assert!(advice(&alone, ApiAddress::Same).is_empty());
        let unknown = advice(&others, ApiAddress::compare(None, Some("10.0.0.9:6443")));
        assert!(
            unknown[1].contains("the backup does not say where they reach"),
            "{unknown:?}"
        );
        assert_eq!(
            ApiAddress::compare(Some("10.0.0.9:6443"), Some("10.0.0.9:6443")),
            ApiAddress::Same
        );
    }
}
