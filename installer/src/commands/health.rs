//! `berth health ADDON`: probe an add-on's components once, print each, and exit non-zero
//! when the add-on is not Available (for scripts and monitoring).

use std::process::ExitCode;

use anyhow::bail;
use berth::health::{self, HealthRecord, RuntimeOnce};
use berth::layout::Layout;
use berth::state::StateStore;
use berth_formats::table::{self, Align};

use crate::RootArgs;

#[derive(clap::Args)]
pub struct HealthArgs {
    /// The add-on to probe.
    addon: String,
    /// Print the add-on's health record as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    root: RootArgs,
}

/// Exit 0 when Available, 1 when not (or the add-on is not installed).
pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(args.root.existing()?);
    let state = StateStore::new(layout.state_dir()).load(&args.addon)?;
    let Some(current) = &state.current else {
        bail!(
            "{} has no version in place on this node\nhint: {}; `berth status` lists the add-ons and their versions",
            args.addon,
            StateStore::new(layout.state_dir()).not_installed_hint(&args.addon)
        );
    };
    let Some(record) = health::check(&layout, &state, &RuntimeOnce::new()) else {
        if args.json {
            show!("null");
        } else {
            show!(
                "{} {} lists no components (no health.yaml): Available as applied",
                args.addon,
                current.target.version
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    if args.json {
        show!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        show(&record);
    }
    Ok(if record.available() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn show(record: &HealthRecord) {
    let rows: Vec<[String; 5]> = record
        .components
        .iter()
        .map(|component| {
            let condition = component.conditions.first();
            [
                component.name.clone(),
                component.probe.clone(),
                if component.required { "yes" } else { "no" }.into(),
                condition.map_or_else(String::new, |c| c.status.clone()),
                condition.map_or_else(String::new, |c| format!("{}: {}", c.reason, c.message)),
            ]
        })
        .collect();
    show!(
        "{}",
        table::render(
            ["COMPONENT", "PROBE", "REQUIRED", "HEALTHY", "REASON"],
            [Align::Left; 5],
            &rows
        )
        .trim_end_matches('\n')
    );
    for condition in &record.conditions {
        show!(
            "{} {}: {} ({})",
            record.name,
            condition.kind,
            condition.status,
            condition.message
        );
    }
}
