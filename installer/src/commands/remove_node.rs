//! `berth remove-node NODE` (kURL's `ekco-purge-node`): on a control-plane node, removes
//! another node from the cluster for good.

use std::process::ExitCode;

use anyhow::Context as _;
use berth::node::layout::Layout;
use berth::node::lock::NodeLock;

use crate::commands::RootArgs;
use crate::commands::{HookTimeout, Stderr};

#[derive(clap::Args)]
pub struct RemoveNodeArgs {
    /// The node's name, as `kubectl get nodes` lists it.
    node: String,
    #[command(flatten)]
    hook_timeout: HookTimeout,
    #[command(flatten)]
    root: RootArgs,
}

/// Runs each add-on's `_remove_node` hook for the node.
pub fn run(args: RemoveNodeArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let _lock = NodeLock::acquire(&layout.lock_file(), "berth remove-node")?;
    let hooks = berth::engine::remove_node::remove_node(
        &layout,
        &args.node,
        args.hook_timeout.duration(),
        &Stderr,
    )
    .with_context(|| format!("node {} was not removed", args.node))?;
    say!(
        "berth: node {} removed ({} hook(s) ran); on it, berth reset takes it back to before its install",
        args.node,
        hooks.len()
    );
    Ok(ExitCode::SUCCESS)
}
