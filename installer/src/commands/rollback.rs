//! `berth rollback`: an add-on's previous version applied again from the packages kept on
//! this node.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use berth::dist::Dist;
use berth::engine::{self, Mode, RunSettings};
use berth::node::layout::Layout;
use berth::node::lock::NodeLock;

use crate::commands::RootArgs;
use crate::commands::{HealthTimeout, HookTimeout, Stderr};

#[derive(clap::Args)]
pub struct RollbackArgs {
    /// The add-on to roll back.
    addon: String,
    /// The version to go back to (default: the one applied before the current one). Its
    /// package must be kept on this node.
    #[arg(long, value_name = "VERSION")]
    to: Option<String>,
    #[command(flatten)]
    hook_timeout: HookTimeout,
    #[command(flatten)]
    health_timeout: HealthTimeout,
    #[command(flatten)]
    root: RootArgs,
}

/// Applies an add-on's previous version again from the packages kept on this node.
pub fn run(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let layout = Layout::new(args.root.existing()?);
    let lock = NodeLock::acquire(
        &layout.lock_file(),
        &format!("berth rollback {}", args.addon),
    )?;
    let plan = engine::rollback_plan(&layout, &args.addon, args.to.as_deref())?;
    let addon = &plan.addons[0];
    say!("berth: {} {}: {}", addon.name, addon.version, addon.reason);
    // The keys kept for the dist the node's last installer came from: the cache holds its
    // packages, with their signed `.sha256`.
    let origin = berth::node::last_installer::LastInstaller::load(&layout)?
        .map(|last| Dist::parse(&last.dist))
        .transpose()?;
    let trust = berth::dist::trust::Trust::load(&layout, &[], origin.as_ref())?;
    let settings = RunSettings {
        dist: Dist::Local(layout.package_cache()),
        params: Vec::new(),
        hook_timeout: args.hook_timeout.duration(),
        health_timeout: args.health_timeout.duration(),
        mode: Mode::Rollback,
        join_ttl: berth::kubernetes::join::DEFAULT_TTL,
        reuse_unpacked: true,
        bundle: None,
        trust,
        layout,
    };
    let session = engine::SessionStart::begin(&settings, &lock)?;
    engine::apply(&settings, &plan, &lock, session, &Stderr)
        .context("the rollback did not finish; run the same command again to continue")?;
    say!(
        "berth: rolled {} back to {} in {:.1}s; see `berth status`",
        addon.name,
        addon.version,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
