//! Signing a dist: `versions.json`, each package's `.sha256` (which binds the package by
//! its digest) and its bill of materials get a `<file>.sig` beside them, made with the vendor's key
//! ([`berth_formats::signature`]). A signature is made again on every build: ECDSA's are not
//! deterministic, and a key may have changed.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use berth_formats::signature::{MAX_KEY_FILE_BYTES, SIGNATURE_SUFFIX, SigningKey};
use berth_formats::versions::VERSIONS_FILE;

/// The environment variable that may hold the signing key's PEM text (a CI secret).
pub const KEY_VARIABLE: &str = "BERTH_SIGNING_KEY";

/// The signing key from `file`, else from [`KEY_VARIABLE`]; none when neither is given.
pub fn load_key(file: Option<&Path>) -> anyhow::Result<Option<SigningKey>> {
    if let Some(file) = file {
        let text = berth_formats::files::read_to_string_at_most(file, MAX_KEY_FILE_BYTES)
            .with_context(|| format!("failed to read the signing key {}", file.display()))?;
        return Ok(Some(SigningKey::from_pem(
            &file.display().to_string(),
            &text,
        )?));
    }
    match std::env::var(KEY_VARIABLE) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(SigningKey::from_pem(KEY_VARIABLE, &text)?)),
        _ => Ok(None),
    }
}

/// The files of `dist` a signature covers: versions.json, every `.sha256` and every bill of
/// materials.
pub fn signed_files(dist: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(dist)?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name().is_some_and(|name| {
                let name = name.to_string_lossy();
                name == VERSIONS_FILE
                    || name.ends_with(".sha256")
                    || name.ends_with(crate::package::sbom::SBOM_SUFFIX)
            })
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Signs one file: writes `<file>.sig`.
pub fn sign_file(key: &SigningKey, file: &Path) -> anyhow::Result<PathBuf> {
    let bytes = fs_err::read(file)?;
    let signature = key.sign(&file.display().to_string(), &bytes)?;
    let path = PathBuf::from(format!("{}{SIGNATURE_SUFFIX}", file.display()));
    berth_formats::files::write_atomically(&path, format!("{signature}\n").as_bytes())
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(path)
}

/// Signs every file of `dist` a signature covers; the files signed.
pub fn sign_dist(key: &SigningKey, dist: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let files = signed_files(dist)?;
    if !files.iter().any(|file| file.ends_with(VERSIONS_FILE)) {
        anyhow::bail!(
            "{} holds no {VERSIONS_FILE}: it is not a dist",
            dist.display()
        );
    }
    for file in &files {
        sign_file(key, file)?;
    }
    Ok(files)
}
