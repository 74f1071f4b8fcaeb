//! `berth reset`: each add-on's reset hook, then everything Berth placed on the node removed.

use std::process::ExitCode;

use anyhow::Context as _;
use berth::node::layout::Layout;
use berth::node::lock::NodeLock;

use berth_formats::output::{ApiVersion, OutputArgs, ResetReport, ResetReportKind};

use crate::commands::RootArgs;
use crate::commands::{HookTimeout, Stderr};

#[derive(clap::Args)]
pub struct ResetArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// Reset without asking (asked only on a terminal, as kubeadm reset asks).
    #[arg(long, short = 'y', visible_alias = "force")]
    yes: bool,
    #[command(flatten)]
    hook_timeout: HookTimeout,
    #[command(flatten)]
    root: RootArgs,
}

/// Runs each add-on's reset hook, then removes what Berth placed on this node.
pub fn run(args: ResetArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    if !args.yes && declined(&layout) {
        say!("berth: reset: not confirmed; nothing was changed");
        return Ok(ExitCode::FAILURE);
    }
    let lock = NodeLock::acquire(&layout.lock_file(), "berth reset")?;
    // The fleet's server writes in Berth's folder as long as it runs: the reset would remove
    // it under the server's feet, after the hooks had already taken the cluster down.
    let fleet = berth::fleet::paths(&layout);
    if berth_fleet::first_node::serves(&fleet) {
        anyhow::bail!(
            "berth fleet serve runs on this node; nothing was changed\nhint: stop it, then run berth reset again"
        );
    }
    let report = berth::engine::reset::reset(
        &layout,
        args.hook_timeout.duration(),
        &Stderr,
    )
    .context(
        "the reset did not finish; nothing was removed yet; run it again once the cause is fixed",
    )?;
    drop(lock);
    // Under a root of its own (a second node tried on one machine), the folders Berth's paths
    // hang off go too, when nothing else is in them; `/` keeps its own.
    if layout.root() != std::path::Path::new("/") {
        for folder in ["var/lib", "var/log", "var", "etc"] {
            let _ = fs_err::remove_dir(layout.root().join(folder));
        }
    }
    let format = args.output.format();
    if format.is_document() {
        let document = ResetReport {
            api_version: ApiVersion::V1,
            kind: ResetReportKind::ResetReport,
            hooks: report.hooks,
            images: report.images,
            removed: report
                .removed
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
        };
        let _ = berth_formats::output::write_document(format, &document, &mut std::io::stdout());
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

/// Asks on the terminal whether to reset, no by default; true when the answer is not yes.
/// Without a terminal on standard input (a script, a test grid), nothing is asked.
fn declined(layout: &Layout) -> bool {
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return false;
    }
    berth::terminal::ask(&format!(
        "Reset this node? Each add-on's reset hook runs, then everything Berth placed under {} goes. (y/N) ",
        layout.root().display()
    ))
    .is_some_and(|answer| !matches!(answer.as_str(), "y" | "Y" | "yes" | "Yes"))
}
