//! `berth status`: each add-on's versions and conditions (its components probed live), and
//! the installer the node runs.

use std::process::ExitCode;
use std::time::Duration;

use berth::health::{HealthRecord, RuntimeOnce};
use berth::last_installer::LastInstaller;
use berth::layout::Layout;
use berth::state::{AddonState, Reason};
use berth_formats::table::{self, Align};

use crate::RootArgs;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Probe and print again every --interval, until interrupted.
    #[arg(long)]
    watch: bool,
    /// How long between two probes with --watch (`2s`, `1m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = berth_formats::duration::a_second_to_a_day)]
    interval: Duration,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    if !args.watch {
        return show_once(&args);
    }
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        if terminal {
            // Home and clear: each round replaces the last.
            show!("\x1b[H\x1b[2J");
        }
        // Until Ctrl-C ends the process, as `watch` does.
        show_once(&args)?;
        std::thread::sleep(args.interval);
        if !terminal {
            show!("");
        }
    }
}

fn show_once(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(args.root.existing()?);
    let (states, damaged) = berth::state::load_as_seen(&layout)?;
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
    let health = berth::health::check_all(&layout, &states, &RuntimeOnce::new());
    if args.json {
        // Each add-on's record, with `health`: its components (the Addon API's shape) and
        // the Available and Degraded conditions they make, when it lists components.
        let mut shown = Vec::new();
        for state in &states {
            let mut value = serde_json::to_value(state)?;
            if let (Some(record), Some(object)) = (health.get(&state.name), value.as_object_mut()) {
                object.insert("health".into(), serde_json::to_value(record)?);
            }
            shown.push(value);
        }
        show!("{}", serde_json::to_string_pretty(&shown)?);
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
    let rows: Vec<[String; 7]> = states
        .iter()
        .map(|state| row(state, health.get(&state.name)))
        .collect();
    show!(
        "{}",
        table::render(
            [
                "NAME",
                "VERSION",
                "CURRENT",
                "LAST",
                "AVAILABLE",
                "DEGRADED",
                "PROGRESSING"
            ],
            [Align::Left; 7],
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
        if let Some(degraded) = health
            .get(&state.name)
            .filter(|record| record.degraded())
            .and_then(|record| record.condition("Degraded"))
        {
            show!("\n{}: Degraded: {}", state.name, degraded.message);
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

/// One add-on's line. AVAILABLE is what its components say when it lists any, else whether
/// a version is in place; DEGRADED is `-` for an add-on that lists no components.
fn row(state: &AddonState, health: Option<&HealthRecord>) -> [String; 7] {
    let version = |applied: &Option<berth::state::Applied>| {
        applied
            .as_ref()
            .map_or_else(|| "-".to_string(), |a| a.target.version.clone())
    };
    let word = |flag: bool| if flag { "True" } else { "False" }.to_string();
    let applied = state.available.as_ref().is_some_and(|c| c.status);
    [
        state.name.clone(),
        state.desired.clone().unwrap_or_else(|| "-".into()),
        version(&state.current),
        version(&state.last),
        word(health.map_or(applied, HealthRecord::available)),
        health.map_or_else(|| "-".into(), |record| word(record.degraded())),
        state
            .progressing
            .as_ref()
            .map_or_else(|| "-".into(), |c| c.reason.to_string()),
    ]
}
