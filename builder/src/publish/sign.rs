//! Signing a dist: `versions.json`, each package's `.sha256` (which binds the package by
//! its digest) and its bill of materials get a `<file>.sig` beside them, made with the vendor's key
//! ([`berth_formats::signature`]). A signature is made again on every build: ECDSA's are not
//! deterministic, and a key may have changed.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use berth_formats::signature::{MAX_KEY_FILE_BYTES, SIGNATURE_SUFFIX, SigningKey};
use berth_formats::versions::VERSIONS_FILE;

use crate::process::SIGNING_KEY_VARIABLE;

/// The signing key from `file`, else from [`SIGNING_KEY_VARIABLE`]; none when neither is given.
pub fn load_key(file: Option<&Path>) -> anyhow::Result<Option<SigningKey>> {
    if let Some(file) = file {
        let text = berth_formats::files::read_to_string_at_most(file, MAX_KEY_FILE_BYTES)
            .with_context(|| format!("failed to read the signing key {}", file.display()))?;
        return Ok(Some(SigningKey::from_pem(
            &file.display().to_string(),
            &text,
        )?));
    }
    match std::env::var(SIGNING_KEY_VARIABLE) {
        Ok(text) if !text.trim().is_empty() => {
            Ok(Some(SigningKey::from_pem(SIGNING_KEY_VARIABLE, &text)?))
        }
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
                    || name.ends_with(berth_formats::release::BOM_SUFFIX)
            })
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Stamps `versions.json` as the release after the one it says it is.
fn stamp_release(path: &Path, valid_for: std::time::Duration) -> anyhow::Result<()> {
    let origin = path.display().to_string();
    let bytes = fs_err::read(path)?;
    let mut versions = berth_formats::versions::VersionsFile::parse(&origin, &bytes)?;
    versions.release = Some(berth_formats::versions::ReleaseStamp::next(
        versions.release.as_ref(),
        std::time::SystemTime::now(),
        valid_for,
    ));
    berth_formats::files::write_atomically(path, &versions.to_bytes())
        .with_context(|| format!("failed to write {origin}"))
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

/// How long a signed release stays current unless told otherwise: a year, so a bundle carried
/// by hand still installs months after it was made; sign again to renew.
pub const DEFAULT_VALIDITY: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);

/// Signs every file of `dist` a signature covers; the files signed. `versions.json` is first
/// stamped as the next release, current for `valid_for` (see
/// [`berth_formats::versions::ReleaseStamp`]).
pub fn sign_dist(
    key: &SigningKey,
    dist: &Path,
    valid_for: std::time::Duration,
) -> anyhow::Result<Vec<PathBuf>> {
    let files = signed_files(dist)?;
    if !files.iter().any(|file| file.ends_with(VERSIONS_FILE)) {
        anyhow::bail!(
            "{} holds no {VERSIONS_FILE}: it is not a dist",
            dist.display()
        );
    }
    stamp_release(&dist.join(VERSIONS_FILE), valid_for)?;
    for file in &files {
        // A package's `.sha256` is signed only when it is the package's: a stale or planted
        // one is refused, never signed.
        if let Some(package) = file.to_str().and_then(|text| text.strip_suffix(".sha256")) {
            let text = fs_err::read_to_string(file)?;
            let name = Path::new(package)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy();
            let said = berth_formats::package_index::parse_checksum_file(&text, &name)
                .map_err(|error| anyhow::anyhow!("{}: {error}", file.display()))?;
            let actual = berth_formats::Sha256Digest::of_file(Path::new(package))
                .with_context(|| format!("{} has no package beside it", file.display()))?;
            if actual != said {
                anyhow::bail!(
                    "{} says {said}, but {package} has sha256 {actual}; build it again before signing",
                    file.display()
                );
            }
        }
        sign_file(key, file)?;
    }
    Ok(files)
}

/// Before the vendor's key signs anything read from a store (a bundle's versions.json and
/// lock, a served script's lock), the store's own signatures are checked with the key's public
/// half: `versions.json` and each locked package's `.sha256`, whose digest must be the lock's.
/// Whoever can write the store cannot have their bytes signed.
/// Its `versions.json` must be a current release ([`berth_formats::versions::ReleaseStamp`]),
/// and no older than the highest `seen` (which it raises).
pub async fn check_store(
    release: &crate::publish::release::Release,
    lock: &berth_formats::lock::Lock,
    key: &SigningKey,
    seen: Option<&std::sync::atomic::AtomicU64>,
) -> anyhow::Result<()> {
    let keys = [key.public()];
    let public = &keys;
    let read = |file: String| async move {
        let key = release.key(&file);
        let bytes = release.store.read(&key).await?.with_context(|| {
            format!("the store has no {key}: sign the release's dist first (`berth-build sign`)")
        })?;
        anyhow::Ok(bytes)
    };
    let signed = |file: String| async move {
        let bytes = read(file.clone()).await?;
        let signature = read(format!("{file}{SIGNATURE_SUFFIX}")).await?;
        let text = String::from_utf8_lossy(&signature).into_owned();
        berth_formats::signature::verify(
            public,
            &file,
            &bytes,
            &format!("{file}{SIGNATURE_SUFFIX}"),
            &text,
        )?;
        anyhow::Ok(bytes)
    };
    let versions = signed(VERSIONS_FILE.to_string()).await?;
    let versions = berth_formats::versions::VersionsFile::parse(VERSIONS_FILE, &versions)?;
    let counter = berth_formats::versions::ReleaseStamp::check(
        versions.release.as_ref(),
        &format!("the store's {VERSIONS_FILE}"),
        None,
        std::time::SystemTime::now(),
    )?;
    if let Some(seen) = seen {
        let highest = seen.fetch_max(counter, std::sync::atomic::Ordering::SeqCst);
        if counter < highest {
            anyhow::bail!(
                "the store's {VERSIONS_FILE} is release {counter}, older than release {highest} this server signed for before: the store may have been put back to an older release"
            );
        }
    }
    for addon in &lock.addons {
        let file = berth_formats::package_index::package_file_name(
            &addon.name,
            &addon.version,
            addon.compression,
        );
        let bytes = signed(berth_formats::release::checksum_file(&file)).await?;
        let said = berth_formats::package_index::parse_checksum_file(
            &String::from_utf8_lossy(&bytes),
            &file,
        )
        .map_err(|error| anyhow::anyhow!("the store's {file}.sha256: {error}"))?;
        if said != addon.sha256 {
            anyhow::bail!(
                "the store's signed {file}.sha256 says {said}, the lock {}",
                addon.sha256
            );
        }
    }
    Ok(())
}
