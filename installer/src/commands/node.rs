//! Commands on an installed node: the join command and its parameters, rollback and reset.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use berth::dist::Dist;
use berth::engine::{self, InstallSettings, Mode};
use berth::join::{CommandOptions, JoinStore, join_command};
use berth::layout::Layout;
use berth::plan::Permissions;
use berth::state::NodeLock;

use crate::RootArgs;
use crate::commands::Stderr;

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
pub fn join_command_run(args: JoinCommandArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let file = JoinStore::new(layout.join_file()).load()?;
    let command = join_command(
        &file,
        CommandOptions {
            control_plane: args.control_plane,
            airgap: args.airgap,
        },
    )?;
    println!("{command}");
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Subcommand)]
pub enum JoinParamCommand {
    /// Publish a join parameter; its value is read from standard input, so it never shows in
    /// a process list (the `berth_set_join_param` helper calls this).
    Set {
        key: String,
        /// A secret: it expires after --ttl and is kept out of logs.
        #[arg(long)]
        secret: bool,
        /// Given only to nodes that join the control plane.
        #[arg(long)]
        control_plane: bool,
        /// How long a secret stays valid.
        #[arg(long, env = "BERTH_JOIN_TTL", default_value = "24h", value_parser = berth::join::parse_ttl)]
        ttl: Duration,
        #[command(flatten)]
        root: RootArgs,
    },
}

pub fn join_param_run(command: JoinParamCommand) -> anyhow::Result<ExitCode> {
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

#[derive(clap::Args)]
pub struct RollbackArgs {
    /// The add-on to roll back.
    addon: String,
    /// The version to go back to (default: the one applied before the current one). Its
    /// package must be kept on this node.
    #[arg(long, value_name = "VERSION")]
    to: Option<String>,
    /// Seconds a hook may run before its process group is killed.
    #[arg(long, default_value_t = 1800)]
    hook_timeout: u64,
    #[command(flatten)]
    root: RootArgs,
}

/// Applies an add-on's previous version again from the packages kept on this node.
pub fn rollback_run(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let layout = Layout::new(&args.root.root);
    let lock = NodeLock::acquire(
        &layout.lock_file(),
        &format!("berth rollback {}", args.addon),
    )?;
    let plan = engine::rollback_plan(&layout, &args.addon, args.to.as_deref())?;
    let addon = &plan.addons[0];
    say!("berth: {} {}: {}", addon.name, addon.version, addon.reason);
    let settings = InstallSettings {
        dist: Dist::Local(layout.package_cache()),
        // Not read: the plan comes from the records, not from a spec.
        spec_path: layout.package_cache(),
        lock: None,
        overrides: Vec::new(),
        params: Vec::new(),
        permissions: Permissions::default(),
        hook_timeout: Duration::from_secs(args.hook_timeout),
        mode: Mode::Install,
        join_ttl: berth::join::DEFAULT_TTL,
        scripts_url: None,
        reuse_unpacked: true,
        layout,
    };
    engine::apply(&settings, &plan, &lock, &Stderr)
        .context("the rollback did not finish; run the same command again to continue")?;
    say!(
        "berth: rolled {} back to {} in {:.1}s; see `berth status`",
        addon.name,
        addon.version,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct ResetArgs {
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
    /// Seconds a hook may run before its process group is killed.
    #[arg(long, default_value_t = 1800)]
    hook_timeout: u64,
    #[command(flatten)]
    root: RootArgs,
}

/// Runs each add-on's reset hook, then removes what Berth placed on this node.
pub fn reset_run(args: ResetArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let lock = NodeLock::acquire(&layout.lock_file(), "berth reset")?;
    let report = berth::reset::reset(&layout, Duration::from_secs(args.hook_timeout), &Stderr)
        .context("the reset did not finish; nothing was removed yet; run it again once the cause is fixed")?;
    drop(lock);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        say!(
            "berth: reset: {} hook(s) ran, {} image(s) and {} path(s) removed",
            report.hooks.len(),
            report.images.len(),
            report.removed.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
