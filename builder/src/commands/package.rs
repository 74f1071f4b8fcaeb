use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use super::FetchArgs;

#[derive(Args)]
pub struct PackageArgs {
    /// The add-on folder, `addons/<name>/<version>`.
    addon: PathBuf,
    #[command(flatten)]
    fetch: FetchArgs,
}

pub fn run(args: PackageArgs) -> anyhow::Result<ExitCode> {
    let (context, settings) = super::prepare(&args.fetch, false)?;
    let outcome = super::runtime()?
        .block_on(berth_build::package::package(
            &context,
            &args.addon,
            &settings,
        ))
        .with_context(|| format!("failed to package {}", args.addon.display()))?;
    show!(
        "{}  {} ({}, {} images, {} files)",
        outcome.sha256.hex(),
        outcome.path.display(),
        super::human_size(outcome.size),
        outcome.images,
        outcome.files
    );
    Ok(ExitCode::SUCCESS)
}
