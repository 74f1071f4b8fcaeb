//! `berth health ADDON`: probe an add-on's components once, print each, and exit non-zero
//! when the add-on is not Available (for scripts and monitoring).

use std::process::ExitCode;

use anyhow::bail;
use berth::health::{self, RuntimeOnce};
use berth::node::layout::Layout;
use berth::node::state::StateStore;
use berth_formats::output::{AddonHealth, ConditionStatus, ConditionType, Format, OutputArgs};
use berth_formats::table::{self, Align};

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct HealthArgs {
    /// The add-on to probe.
    addon: String,
    #[command(flatten)]
    output: OutputArgs,
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
    let document = match health::check(&layout, &state, &RuntimeOnce::new()) {
        Some(record) => berth::node::status::addon_health(&record),
        None => berth::node::status::addon_health_without_components(
            &args.addon,
            &current.target.version,
        ),
    };
    let format = args.output.format();
    if format.is_document() {
        let _ = berth_formats::output::write_document(format, &document, &mut std::io::stdout());
    } else {
        show(&document, format == Format::Wide);
    }
    let available = document
        .conditions
        .iter()
        .any(|c| c.kind == ConditionType::Available && c.status == ConditionStatus::True);
    Ok(if available {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn show(document: &AddonHealth, wide: bool) {
    if !document.components.is_empty() {
        let mut header = vec!["COMPONENT", "PROBE", "REQUIRED", "HEALTHY", "REASON"];
        if wide {
            header.push("OBJECTS");
        }
        let rows: Vec<Vec<String>> = document
            .components
            .iter()
            .map(|component| {
                let mut row = vec![
                    component.name.clone(),
                    component.probe.clone(),
                    if component.required { "yes" } else { "no" }.into(),
                    component.healthy.as_str().into(),
                    format!("{}: {}", component.reason, component.message),
                ];
                if wide {
                    let objects: Vec<String> = component
                        .objects
                        .iter()
                        .map(|object| format!("{}/{}", object.kind, object.name))
                        .collect();
                    row.push(objects.join(","));
                }
                row
            })
            .collect();
        show!(
            "{}",
            table::render_columns(&header, &[Align::Left], &rows).trim_end_matches('\n')
        );
    }
    for condition in &document.conditions {
        show!(
            "{} {}: {} ({})",
            document.name,
            condition.kind.as_str(),
            condition.status.as_str(),
            condition.message
        );
    }
}
