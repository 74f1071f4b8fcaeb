//! `berth status`: each add-on's versions and conditions, and the installer the node runs.

use std::process::ExitCode;

use berth::last_installer::LastInstaller;
use berth::layout::Layout;
use berth::node_lock::NodeLock;
use berth::state::{AddonState, Outcome, Reason, StateStore};
use berth_formats::table::{self, Align};

use crate::RootArgs;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let (mut states, damaged) = StateStore::new(layout.state_dir()).load_all()?;
    // A run that was killed leaves its add-ons Installing (or Upgrading…): with no run holding
    // the node's lock, say that it stopped.
    if !NodeLock::is_held(&layout.lock_file()) {
        for state in &mut states {
            let running = state
                .attempt
                .as_ref()
                .is_some_and(|attempt| attempt.outcome == Outcome::Running);
            if running && state.progressing.as_ref().is_some_and(|p| p.status) {
                let phase = state.attempt.as_ref().map_or("", |a| a.phase.name());
                state.set_progressing(
                    false,
                    Reason::Interrupted,
                    format!("the run stopped during {phase} and no run is under way; run the install again to continue"),
                );
            }
        }
    }
    // The other records are shown all the same; a damaged one is named, and the exit status
    // says something is wrong.
    let status = if damaged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    for damage in &damaged {
        say!("berth: {damage}");
    }
    if args.json {
        show!("{}", serde_json::to_string_pretty(&states)?);
        return Ok(status);
    }
    if states.is_empty() && damaged.is_empty() {
        show!(
            "no add-on is installed on this node ({} holds no records)",
            layout.state_dir().display()
        );
        show_host_preflights(&layout);
        return Ok(status);
    }
    let rows: Vec<[String; 6]> = states.iter().map(row).collect();
    show!(
        "{}",
        table::render(
            [
                "NAME",
                "VERSION",
                "CURRENT",
                "LAST",
                "PROGRESSING",
                "AVAILABLE"
            ],
            [Align::Left; 6],
            &rows
        )
        .trim_end_matches('\n')
    );
    // What the node runs: the installer `berth plan` takes when given no spec.
    if let Ok(Some(last)) = LastInstaller::load(&layout) {
        show!("\ninstaller {} from {}", last.id, last.dist);
    }
    show_host_preflights(&layout);
    for state in &states {
        if let Some(progressing) = state
            .progressing
            .as_ref()
            .filter(|p| matches!(p.reason, Reason::Failed | Reason::Interrupted))
        {
            show!("\n{}: {}", state.name, progressing.message);
        }
    }
    Ok(status)
}

/// The last host preflights' results: the summary, and each check that warned or failed.
fn show_host_preflights(layout: &Layout) {
    if let Some(record) = berth::engine::PreflightRecord::load(layout) {
        show!(
            "\nhost preflights of {} ({}): {}; {}",
            record.run,
            record.role,
            record.report.summary(),
            record.decision
        );
        for result in &record.report.results {
            if result.outcome >= berth_preflight::Outcome::Warn {
                show!(
                    "  {} {}: {}",
                    result.outcome.word(),
                    result.title,
                    result.message
                );
            }
        }
    }
}

fn row(state: &AddonState) -> [String; 6] {
    let version = |applied: &Option<berth::state::Applied>| {
        applied
            .as_ref()
            .map_or_else(|| "-".to_string(), |a| a.target.version.clone())
    };
    [
        state.name.clone(),
        state.desired.clone().unwrap_or_else(|| "-".into()),
        version(&state.current),
        version(&state.last),
        state
            .progressing
            .as_ref()
            .map_or_else(|| "-".into(), |c| c.reason.to_string()),
        state.available.as_ref().map_or_else(
            || "False".into(),
            |c| if c.status { "True" } else { "False" }.to_string(),
        ),
    ]
}
