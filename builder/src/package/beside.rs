//! The files a build leaves beside each package it built: the bill of materials (the one inside
//! with the package's digest added) and, with a key, the signed provenance; each made again only
//! for a package rebuilt, or one whose files beside it are missing. An unsigned build leaves no
//! signature it made stale, and a build without a bill of materials leaves none beside.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use berth_formats::release::BOM_SUFFIX;
use berth_formats::signature::{SIGNATURE_SUFFIX, SigningKey};
use berth_formats::versions::VERSIONS_FILE;

use super::build::BuildResult;
use super::provenance::{self, PROVENANCE_SUFFIX};
use super::{PackageOutcome, PackageSettings, sbom};

/// Writes what belongs beside each package of `results` (those that failed have nothing), and,
/// without `key`, removes the signatures the packages rebuilt and versions.json no longer
/// match. Returns the files it removed. Signing the dist is publishing's
/// ([`crate::publish::sign::sign_dist`]), after this.
pub fn write(
    results: &[BuildResult],
    settings: &PackageSettings,
    key: Option<&SigningKey>,
) -> anyhow::Result<Vec<PathBuf>> {
    for result in results {
        if let Ok(outcome) = &result.outcome {
            write_one(&result.directory, outcome, settings, key)?;
        }
    }
    if key.is_some() {
        return Ok(Vec::new());
    }
    let mut stale = vec![format!("{VERSIONS_FILE}{SIGNATURE_SUFFIX}")];
    for outcome in results
        .iter()
        .filter_map(|result| result.outcome.as_ref().ok())
        .filter(|outcome| !outcome.unchanged)
    {
        let package = berth_formats::package_index::package_file_name(
            &outcome.name,
            &outcome.version,
            outcome.compression,
        );
        stale.push(format!("{package}.sha256{SIGNATURE_SUFFIX}"));
        stale.push(format!("{package}{BOM_SUFFIX}{SIGNATURE_SUFFIX}"));
        stale.push(format!("{package}{PROVENANCE_SUFFIX}"));
    }
    remove_present(stale.iter().map(|file| settings.out_dir.join(file)))
}

/// The bill of materials and provenance beside one package.
fn write_one(
    directory: &Path,
    outcome: &PackageOutcome,
    settings: &PackageSettings,
    key: Option<&SigningKey>,
) -> anyhow::Result<()> {
    let beside = |suffix: &str| PathBuf::from(format!("{}{suffix}", outcome.path.display()));
    let (bom_path, sealed) = (beside(BOM_SUFFIX), beside(PROVENANCE_SUFFIX));
    if !settings.sbom {
        // Built without one: none beside it either, not even a stale one.
        remove_present([
            bom_path.clone(),
            beside(&format!("{BOM_SUFFIX}{SIGNATURE_SUFFIX}")),
        ])?;
    }
    let bom_wanted = settings.sbom && !(outcome.unchanged && bom_path.is_file());
    let sealed_wanted = key.is_some() && !(outcome.unchanged && sealed.is_file());
    if !bom_wanted && !sealed_wanted {
        return Ok(());
    }
    // A package written now was read before it was written; one kept as it was is read once
    // here, for both.
    let read;
    let scanned = match &outcome.described {
        Some(described) => &described.scanned,
        None => {
            read = sbom::scan_package(&outcome.path, Some(outcome.sha256))?;
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
    if let Some(key) = key.filter(|_| sealed_wanted) {
        let parameters = provenance::BuildParameters {
            addon: addon_folder(directory),
            arch: settings.arch.clone(),
            compression_format: settings.compression.format,
            compression_level: settings.compression.level,
            mtime: settings.mtime,
            distros: settings.selected_distros.clone(),
            sbom: settings.sbom,
        };
        let statement = provenance::statement_of(&outcome.path, scanned, &parameters);
        let envelope = berth_formats::dsse::seal(&statement, key)?;
        berth_formats::files::write_atomically(&sealed, &serde_json::to_vec_pretty(&envelope)?)
            .with_context(|| format!("failed to write {}", sealed.display()))?;
    }
    Ok(())
}

/// The add-on folder as a statement names it: its last three parts (`addons/<name>/<version>`).
fn addon_folder(directory: &Path) -> String {
    let mut parts: Vec<String> = directory
        .components()
        .rev()
        .take(3)
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.reverse();
    parts.join("/")
}

/// Removes each of `paths` that exists; returns those it removed.
fn remove_present(paths: impl IntoIterator<Item = PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for path in paths {
        if path.exists() {
            fs_err::remove_file(&path)?;
            removed.push(path);
        }
    }
    Ok(removed)
}
