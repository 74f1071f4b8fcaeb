//! `berth join-command` and `berth join-param`: what a new node needs, published by hooks
//! and printed as the command to run there.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use berth::kubernetes::join::{CommandOptions, JoinStore};
use berth::node::layout::Layout;

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct JoinCommandArgs {
    /// The command for a node that joins the control plane (with its parameters too).
    #[arg(long)]
    control_plane: bool,
    /// The command for an airgap node, which runs the bundle's join.sh.
    #[arg(long)]
    airgap: bool,
    #[command(flatten)]
    root: RootArgs,
}

/// Prints the command that joins a new node to this one's cluster.
pub fn run(args: JoinCommandArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let command = JoinStore::new(layout.join_file()).command(CommandOptions {
        control_plane: args.control_plane,
        airgap: args.airgap,
    })?;
    show!("{command}");
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Subcommand)]
pub enum JoinParamCommand {
    /// Publish a join parameter; its value is read from standard input, so it never shows in
    /// a process list (the `berth_set_join_param` helper calls this).
    Set {
        /// The parameter's name, as the join command carries it (`key=value`).
        key: String,
        /// A secret: it expires after --ttl and is kept out of logs.
        #[arg(long)]
        secret: bool,
        /// Given only to nodes that join the control plane.
        #[arg(long)]
        control_plane: bool,
        /// How long a secret stays valid.
        #[arg(long, env = "BERTH_JOIN_TTL", value_name = "DURATION", default_value = "24h", value_parser = berth::kubernetes::join::parse_ttl)]
        ttl: Duration,
        #[command(flatten)]
        root: RootArgs,
    },
}

pub fn param_run(command: JoinParamCommand) -> anyhow::Result<ExitCode> {
    let JoinParamCommand::Set {
        key,
        secret,
        control_plane,
        ttl,
        root,
    } = command;
    let mut value = String::new();
    std::io::stdin()
        .read_to_string(&mut value)
        .context("failed to read the parameter's value from standard input")?;
    let value = value.strip_suffix('\n').unwrap_or(&value).to_string();
    let layout = Layout::new(&root.root);
    JoinStore::new(layout.join_file()).set(&key, value, secret, control_plane, ttl)?;
    Ok(ExitCode::SUCCESS)
}
