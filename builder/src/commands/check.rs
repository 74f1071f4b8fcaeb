use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct CheckArgs {
    /// Files or folders to check.
    #[arg(default_value = "addons")]
    paths: Vec<PathBuf>,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let report = berth_build::source::check::check(&args.paths)?;
    for problem in &report.problems {
        show!("{problem}");
    }
    eprintln!(
        "checked {} Manifests and {} install.sh scripts: {} problems",
        report.manifests,
        report.scripts,
        report.problems.len()
    );
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
