//! `berth remove-node NODE`: on a control-plane node, another node leaves the cluster for good,
//! as kURL's `ekco-purge-node` does it: each installed add-on's `<name>_remove_node` hook runs
//! with the node's name in `BERTH_REMOVE_NODE` (Kubernetes' drains the node, removes its etcd
//! member and its API endpoint, and deletes its Node object). Nothing of this node changes.

use std::time::Duration;

use crate::engine::node_hooks::{installed_addons, run_node_hooks};
use crate::engine::{EngineError, Reporter};
use crate::node::layout::Layout;

/// The variable a `<name>_remove_node` hook reads the node's name from.
pub const NODE_VARIABLE: &str = "BERTH_REMOVE_NODE";

/// Why a node cannot be removed from here.
#[derive(Debug, thiserror::Error)]
pub enum RemoveNodeError {
    #[error(
        "'{0}' is not a node name: a Kubernetes node is named in lower-case letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit"
    )]
    BadName(String),
    #[error(
        "no add-on installed on this node removes nodes (none defines a _remove_node hook); run berth remove-node on a control-plane node of the cluster"
    )]
    NoHook,
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Runs the installed add-ons' `<name>_remove_node` hooks for `node`; returns those that ran.
pub fn remove_node(
    layout: &Layout,
    node: &str,
    hook_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<Vec<String>, RemoveNodeError> {
    if !is_node_name(node) {
        return Err(RemoveNodeError::BadName(node.to_string()));
    }
    let installed = installed_addons(layout)?;
    let ran = run_node_hooks(
        layout,
        &installed,
        "_remove_node",
        &|_| vec![(NODE_VARIABLE.to_string(), node.to_string())],
        hook_timeout,
        reporter,
        &mut |_| Ok(()),
    )?;
    if ran.is_empty() {
        return Err(RemoveNodeError::NoHook);
    }
    Ok(ran)
}

/// A node's name as Kubernetes takes it: a DNS subdomain (RFC 1123).
fn is_node_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alphanumeric = |byte: &u8| byte.is_ascii_lowercase() || byte.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 253
        && bytes.first().is_some_and(alphanumeric)
        && bytes.last().is_some_and(alphanumeric)
        && bytes
            .iter()
            .all(|byte| alphanumeric(byte) || *byte == b'-' || *byte == b'.')
}

#[cfg(test)]
mod tests {
    use super::is_node_name;

    #[test]
    fn node_names_are_dns_subdomains() {
        for name in ["node-3", "a", "worker.example.com", "10-0-0-1"] {
            assert!(is_node_name(name), "{name}");
        }
        let long = "a".repeat(254);
        for name in [
            "",
            "Node-3",
            "-a",
            "a-",
            "a b",
            "a;rm -rf /",
            "$(id)",
            "a/b",
            &long,
        ] {
            assert!(!is_node_name(name), "{name}");
        }
    }
}
