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
    // Each package's bill of materials beside it (the one inside with the package's digest
    // added), and with a key its signed provenance; made again only for a package rebuilt
    // (or one whose files beside it are missing).
    use berth_build::package::{provenance, sbom};
    for result in &results {
        let Ok(outcome) = &result.outcome else {
            continue;
        };
        let package = &outcome.path;
        let beside =
            |suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", package.display()));
        let (bom_path, sealed) = (
            beside(berth_formats::release::BOM_SUFFIX),
            beside(provenance::PROVENANCE_SUFFIX),
        );
        if !settings.sbom {
            // Built without one: none beside it either, not even a stale one.
            for stale in [
                bom_path.clone(),
                beside(&format!("{}.sig", berth_formats::release::BOM_SUFFIX)),
            ] {
                if stale.exists() {
                    fs_err::remove_file(&stale)?;
                }
            }
        }
        let bom_wanted = settings.sbom && !(outcome.unchanged && bom_path.is_file());
        let sealed_wanted = signing_key.is_some() && !(outcome.unchanged && sealed.is_file());
        if !bom_wanted && !sealed_wanted {
            continue;
        }
        // A package written now was read before it was written; one kept as it was is read
        // once here, for both.
        let read;
        let scanned = match &outcome.described {
            Some(described) => &described.scanned,
            None => {
                read = sbom::scan_package(package, Some(outcome.sha256))?;
                &read
            }
        };
        if bom_wanted {
            let bom = match &outcome.described {
                Some(described) => {
                    let mut bom = described.bom.clone();
                    sbom::with_package_digest(&mut bom, &outcome.sha256);
                    bom
                }
                None => sbom::described_bom(scanned)?,
            };
            berth_formats::files::write_atomically(&bom_path, &serde_json::to_vec_pretty(&bom)?)
                .with_context(|| format!("failed to write {}", bom_path.display()))?;
        }
        if let Some(key) = signing_key.as_ref().filter(|_| sealed_wanted) {
            let parts: Vec<String> = result
                .directory
                .components()
                .rev()
                .take(3)
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            let parameters = provenance::BuildParameters {
                addon: parts.into_iter().rev().collect::<Vec<_>>().join("/"),
                arch: settings.arch.clone(),
                compression_format: settings.compression.format,
                compression_level: settings.compression.level,
                mtime: settings.mtime,
                distros: settings.selected_distros.clone(),
                sbom: settings.sbom,
            };
            let statement = provenance::statement_of(package, scanned, &parameters);
            let envelope = berth_formats::dsse::seal(&statement, key)?;
            berth_formats::files::write_atomically(&sealed, &serde_json::to_vec_pretty(&envelope)?)
                .with_context(|| format!("failed to write {}", sealed.display()))?;
        }
    }
    if signing_key.is_none() {
        // An unsigned build leaves no signature it made stale: versions.json's, and those of
        // the packages it rebuilt.
        let mut stale = vec![format!("{}.sig", berth_formats::versions::VERSIONS_FILE)];
        for outcome in results
            .iter()
            .filter_map(|result| result.outcome.as_ref().ok())
        {
            if !outcome.unchanged {
                let package = berth_formats::package_index::package_file_name(
                    &outcome.name,
                    &outcome.version,
                    outcome.compression,
                );
                stale.push(format!("{package}.sha256.sig"));
                stale.push(format!(
                    "{package}{}.sig",
                    berth_formats::release::BOM_SUFFIX
                ));
                stale.push(format!(
                    "{package}{}",
                    berth_build::package::provenance::PROVENANCE_SUFFIX
                ));
            }
        }
        for file in stale {
            let path = settings.out_dir.join(&file);
            if path.exists() {
                fs_err::remove_file(&path)?;
                eprintln!(
                    "removed {} (unsigned build; sign the dist again with `berth-build sign`)",
                    path.display()
                );
            }
        }
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
