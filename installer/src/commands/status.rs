//! `berth status`: each add-on's versions and conditions (its components probed live), and
//! the installer the node runs: a table, or the node's status document (`-o json|yaml`).

use std::process::ExitCode;
use std::time::Duration;

use berth::node::layout::Layout;
use berth_formats::output::{
    AddonStatus, ConditionStatus, ConditionType, Format, NodeStatus, OutputArgs,
};
use berth_formats::table::{self, Align};

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    output: OutputArgs,
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
    let status = berth::node::status::collect(&layout)?;
    // The other records are shown all the same; a damaged one is named, and the exit status
    // says something is wrong.
    let code = if status.damaged_records.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    for damage in &status.damaged_records {
        say!("berth: {damage}");
    }
    print(&status, args.output.format(), &layout);
    Ok(code)
}

/// The document, or the table made from it.
pub fn print(status: &NodeStatus, format: Format, layout: &Layout) {
    if format.is_document() {
        let _ = berth_formats::output::write_document(format, status, &mut std::io::stdout());
        return;
    }
    if status.addons.is_empty() && status.damaged_records.is_empty() {
        show!(
            "no add-on is installed on this node ({} holds no records)",
            layout.state_dir().display()
        );
        show_host_preflights(status);
        return;
    }
    let wide = format == Format::Wide;
    let mut header = vec![
        "NAME",
        "VERSION",
        "CURRENT",
        "LAST",
        "AVAILABLE",
        "DEGRADED",
        "PROGRESSING",
    ];
    if wide {
        header.extend(["APPLIED", "COMPONENTS"]);
    }
    let rows: Vec<Vec<String>> = status.addons.iter().map(|addon| row(addon, wide)).collect();
    show!(
        "{}",
        table::render_columns(&header, &[Align::Left], &rows).trim_end_matches('\n')
    );
    if let Some(installer) = &status.installer {
        show!("\ninstaller {} from {}", installer.id, installer.dist);
    }
    show_host_preflights(status);
    for addon in &status.addons {
        if let Some(progressing) = addon
            .condition(ConditionType::Progressing)
            .filter(|c| matches!(c.reason.as_str(), "Failed" | "Interrupted"))
        {
            show!("\n{}: {}", addon.name, progressing.message);
        }
        if let Some(degraded) = addon
            .condition(ConditionType::Degraded)
            .filter(|c| c.status == ConditionStatus::True)
        {
            show!("\n{}: Degraded: {}", addon.name, degraded.message);
        }
    }
}

/// The last host preflights' results: the summary, and each check that warned or failed.
fn show_host_preflights(status: &NodeStatus) {
    if let Some(preflights) = &status.host_preflights {
        show!(
            "\nhost preflights of {} ({}): {}; {}",
            preflights.run,
            preflights.role,
            preflights.summary,
            preflights.decision
        );
        for check in &preflights.checks {
            if matches!(check.outcome.as_str(), "WARN" | "FAIL") {
                show!("  {} {}: {}", check.outcome, check.title, check.message);
            }
        }
    }
}

/// One add-on's line: the conditions' statuses, PROGRESSING's reason (the last run's outcome
/// while none is under way); `-` where nothing is known.
fn row(addon: &AddonStatus, wide: bool) -> Vec<String> {
    let text = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    let status = |kind| {
        addon
            .condition(kind)
            .map_or("-", |c| match c.status {
                ConditionStatus::Unknown => "-",
                status => status.as_str(),
            })
            .to_string()
    };
    let mut row = vec![
        addon.name.clone(),
        text(&addon.desired_version),
        text(&addon.current_version),
        text(&addon.last_version),
        status(ConditionType::Available),
        status(ConditionType::Degraded),
        addon
            .condition(ConditionType::Progressing)
            .filter(|c| c.status != ConditionStatus::Unknown)
            .map_or_else(|| "-".into(), |c| c.reason.clone()),
    ];
    if wide {
        let healthy = addon
            .components
            .iter()
            .filter(|c| c.healthy == ConditionStatus::True)
            .count();
        row.push(text(&addon.applied_at));
        row.push(if addon.components.is_empty() {
            "-".into()
        } else {
            format!("{healthy}/{} healthy", addon.components.len())
        });
    }
    row
}
