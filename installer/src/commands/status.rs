use std::process::ExitCode;

use berth::layout::Layout;
use berth::state::{AddonState, StateStore};

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
    let states = StateStore::new(layout.state_dir()).load_all()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&states)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 6]> = states.iter().map(row).collect();
    let header = [
        "NAME",
        "VERSION",
        "CURRENT",
        "LAST",
        "PROGRESSING",
        "AVAILABLE",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    for state in &states {
        if let Some(progressing) = state.progressing.as_ref().filter(|p| p.reason == "Failed") {
            println!("\n{}: {}", state.name, progressing.message);
        }
    }
    Ok(ExitCode::SUCCESS)
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
            .map_or_else(|| "-".into(), |c| c.reason.clone()),
        state.available.as_ref().map_or_else(
            || "False".into(),
            |c| if c.status { "True" } else { "False" }.to_string(),
        ),
    ]
}
