use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth_build::package::build;
use clap::Args;

use super::FetchArgs;

#[derive(Args)]
pub struct BuildArgs {
    /// The `addons` folder, or the repository holding it.
    #[arg(default_value = "addons")]
    addons: PathBuf,
    #[command(flatten)]
    fetch: FetchArgs,
    /// Add-ons packaged at once [default: number of CPUs].
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Rebuild packages whose inputs are unchanged too.
    #[arg(long)]
    force: bool,
    /// Sign the dist with this private key (PEM) once built [default: the PEM text of
    /// $BERTH_SIGNING_KEY, if set; else unsigned].
    #[arg(long, value_name = "FILE", visible_alias = "key")]
    signing_key: Option<PathBuf>,
}

pub fn run(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let directories = berth_build::source::repository::discover(&args.addons)
        .with_context(|| format!("failed to list add-ons under {}", args.addons.display()))?;
    if directories.is_empty() {
        anyhow::bail!(
            "no add-ons under {}: expected <name>/<version>/Manifest",
            args.addons.display()
        );
    }
    // The key is read before anything is built: a bad one fails at once.
    let signing_key = berth_build::publish::sign::load_key(args.signing_key.as_deref())?;
    let (context, settings) = super::prepare(&args.fetch, !args.force)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let results =
        super::runtime()?.block_on(build::build_all(&context, directories, &settings, jobs));

    show!(
        "{:<24} {:<20} {:<9} {:>10} {:>8}  SHA256",
        "NAME",
        "VERSION",
        "RESULT",
        "SIZE",
        "TIME"
    );
    let mut failures = Vec::new();
    for result in &results {
        match &result.outcome {
            Ok(outcome) => show!(
                "{:<24} {:<20} {:<9} {:>10} {:>7.1}s  {}",
                outcome.name,
                outcome.version,
                if outcome.unchanged {
                    "unchanged"
                } else {
                    "built"
                },
                super::human_size(outcome.size),
                result.elapsed.as_secs_f64(),
                &outcome.sha256.hex()[..16],
            ),
            Err(error) => {
                let version = result
                    .directory
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy();
                let name = result
                    .directory
                    .parent()
                    .and_then(|parent| parent.file_name())
                    .unwrap_or_default()
                    .to_string_lossy();
                show!(
                    "{:<24} {:<20} {:<9} {:>10} {:>7.1}s",
                    name,
                    version,
                    "FAILED",
                    "-",
                    result.elapsed.as_secs_f64()
                );
                failures.push((result.directory.clone(), error));
            }
        }
    }
    let versions = build::write_versions(&args.addons, &settings.out_dir, &results)?;
    eprintln!("wrote {}", versions.display());
    let removed = berth_build::package::beside::write(&results, &settings, signing_key.as_ref())?;
    for path in removed {
        eprintln!(
            "removed {} (unsigned build; sign the dist again with `berth-build sign`)",
            path.display()
        );
    }
    if let Some(key) = &signing_key {
        let signed = berth_build::publish::sign::sign_dist(
            key,
            &settings.out_dir,
            berth_build::publish::sign::DEFAULT_VALIDITY,
        )?;
        eprintln!(
            "signed {} files with {}",
            signed.len(),
            key.public().fingerprint()
        );
    }
    for (directory, error) in &failures {
        let shown = berth_formats::report::render(*error);
        eprintln!(
            "\nerror: failed to package {}: {}",
            directory.display(),
            shown.trim_start_matches("error: ")
        );
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
