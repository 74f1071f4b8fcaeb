//! The backup archive written and read back: manifest first, its signature, then the files in
//! the manifest's order, each checked against the manifest as it is copied in and as it is
//! read out.

use std::io::Read;
use std::path::{Path, PathBuf};

use berth_formats::archive::{self as tar_read, TarWriter};
use berth_formats::backup::{
    BackedUpFile, BackupManifest, ETCD_SNAPSHOT, MANIFEST_FILE, MAX_MANIFEST_BYTES, SIGNATURE_FILE,
};
use berth_formats::compression::{Compression, Encoder, Setting, all_cores};
use berth_formats::digest::HashingReader;
use berth_formats::signature::{PublicKey, SignatureError, SigningKey, fingerprints};

use super::BackupError;
use super::etcd::TrailingHash;
use super::seal::{Keys, Protection, Sealed};

/// The largest signature read.
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// Writes the archive to `output` (0600, whole or not at all); returns its size.
pub(super) fn write(
    output: &Path,
    manifest: &BackupManifest,
    sources: &[(BackedUpFile, PathBuf)],
    signing_key: Option<&SigningKey>,
    protection: &Protection,
) -> Result<u64, BackupError> {
    let folder = output.parent().unwrap_or(Path::new("."));
    let failed = |source| BackupError::Write {
        path: output.to_path_buf(),
        source,
    };
    // A temporary file is created 0600 and renamed into place once whole.
    let file = tempfile::Builder::new()
        .prefix(&super::temporary_prefix("backup"))
        .tempfile_in(folder)
        .map_err(failed)?;
    let setting = Setting::new(Compression::Zstd, None).map_err(BackupError::Archive)?;
    let sealed = Sealed::new(file.as_file(), protection).map_err(failed)?;
    let encoder = Encoder::new(sealed, setting, all_cores()).map_err(failed)?;
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let mut tar = TarWriter::over(encoder, mtime);
    let manifest_bytes = manifest.to_bytes();
    tar.append_file(
        MANIFEST_FILE,
        manifest_bytes.len() as u64,
        false,
        &manifest_bytes[..],
    )
    .map_err(failed)?;
    if let Some(key) = signing_key {
        let signature = key
            .sign(MANIFEST_FILE, &manifest_bytes)
            .map_err(|error| BackupError::Archive(error.to_string()))?;
        tar.append_file(
            SIGNATURE_FILE,
            signature.len() as u64,
            false,
            signature.as_bytes(),
        )
        .map_err(failed)?;
    }
    for (listed, path) in sources {
        let opened = fs_err::File::open(path).map_err(|source| BackupError::Read {
            path: path.clone(),
            source,
        })?;
        let mut reader = HashingReader::new(opened.take(listed.size));
        tar.append_file(
            &BackupManifest::archive_path(listed),
            listed.size,
            false,
            &mut reader,
        )
        .map_err(|source| BackupError::Read {
            path: path.clone(),
            source,
        })?;
        let (digest, size) = reader.finish().map_err(|source| BackupError::Read {
            path: path.clone(),
            source,
        })?;
        if digest != listed.sha256 || size != listed.size {
            return Err(BackupError::Archive(format!(
                "{} changed while it was backed up; nothing was written\nhint: run berth backup again",
                path.display()
            )));
        }
    }
    let written = tar
        .finish()
        .map_err(|error| BackupError::Archive(error.to_string()))?
        .finish()
        .map_err(failed)?;
    written.sync_all().map_err(failed)?;
    let bytes = written.metadata().map_err(failed)?.len();
    file.persist_noclobber(output).map_err(|error| {
        if error.error.kind() == std::io::ErrorKind::AlreadyExists {
            BackupError::Exists {
                path: output.to_path_buf(),
            }
        } else {
            failed(error.error)
        }
    })?;
    Ok(bytes)
}

/// An archive read through, every file as its manifest lists it.
pub struct Verified {
    pub manifest: BackupManifest,
    pub signature: Signature,
}

/// What the manifest's signature showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// Signed by this key (its fingerprint), one of those given.
    Trusted(String),
    /// Signed; no key was given to check it with.
    NotChecked,
    /// Not signed, and no key was given.
    Unsigned,
}

/// Why an archive is not a whole backup.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("failed to open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a whole Berth backup: {problem}")]
    Damaged { path: PathBuf, problem: String },
    #[error("{path}: {source}")]
    Manifest {
        path: PathBuf,
        #[source]
        source: berth_formats::backup::ManifestError,
    },
    #[error("the backup cannot be read: {0}")]
    Locked(String),
    #[error("{path}: {source}")]
    Signature {
        path: PathBuf,
        #[source]
        source: berth_formats::signature::SignatureError,
    },
}

/// Reads `path` through: the manifest, its signature (checked with `keys` at once, before any
/// file is read; with keys given, an unsigned backup is refused), then every file it lists,
/// in order, each of its size and sha256 (and the etcd snapshot's own trailing hash), and
/// nothing else.
pub fn verify(path: &Path, keys: &[PublicKey], unlock: &Keys) -> Result<Verified, VerifyError> {
    let file = fs_err::File::open(path).map_err(|source| VerifyError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let damaged = |problem: String| VerifyError::Damaged {
        path: path.to_path_buf(),
        problem,
    };
    let io_problem = |error: std::io::Error| {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            "the file is cut short".to_string()
        } else {
            error.to_string()
        }
    };
    let mut archive = open(path, file, unlock)?;
    let mut entries = archive
        .entries()
        .map_err(|error| damaged(io_problem(error)))?;
    let mut manifest: Option<(BackupManifest, Vec<u8>)> = None;
    let mut signature: Option<Signature> = None;
    let mut listed_index = 0;
    for entry in &mut entries {
        let mut entry = entry.map_err(|error| damaged(io_problem(error)))?;
        if let Some(problem) = tar_read::unsafe_entry(&mut entry) {
            return Err(damaged(problem.to_string()));
        }
        let name = entry
            .path()
            .map_err(|error| damaged(io_problem(error)))?
            .to_string_lossy()
            .into_owned();
        let size = entry.size();
        if !entry.header().entry_type().is_file() {
            return Err(damaged(format!("`{name}` is not a file")));
        }
        let Some((listed, manifest_bytes)) = &manifest else {
            if name != MANIFEST_FILE || size > MAX_MANIFEST_BYTES {
                return Err(damaged(format!(
                    "it does not start with {MANIFEST_FILE} (of at most {MAX_MANIFEST_BYTES} bytes)"
                )));
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|error| damaged(io_problem(error)))?;
            let parsed = BackupManifest::parse(&bytes).map_err(|source| VerifyError::Manifest {
                path: path.to_path_buf(),
                source,
            })?;
            manifest = Some((parsed, bytes));
            continue;
        };
        if signature.is_none() {
            let text = if name == SIGNATURE_FILE {
                if size > MAX_SIGNATURE_BYTES {
                    return Err(damaged(format!("{SIGNATURE_FILE} is {size} bytes")));
                }
                let mut text = String::new();
                entry
                    .read_to_string(&mut text)
                    .map_err(|error| damaged(io_problem(error)))?;
                Some(text)
            } else {
                None
            };
            signature = Some(check_signature(
                path,
                keys,
                manifest_bytes,
                text.as_deref(),
            )?);
            if text.is_some() {
                continue;
            }
        }
        let Some(expected) = listed.files.get(listed_index) else {
            return Err(damaged(format!("`{name}` is not in the manifest")));
        };
        listed_index += 1;
        let wanted = BackupManifest::archive_path(expected);
        if name != wanted {
            return Err(damaged(format!(
                "`{name}` comes where the manifest lists `{wanted}`"
            )));
        }
        if size != expected.size {
            return Err(damaged(format!(
                "`{name}` is {size} bytes; the manifest lists {}",
                expected.size
            )));
        }
        let mut trailing = (expected.path == ETCD_SNAPSHOT).then(TrailingHash::default);
        let mut digest = berth_formats::digest::StreamingDigest::new();
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            let read = entry
                .read(&mut buffer)
                .map_err(|error| damaged(io_problem(error)))?;
            if read == 0 {
                break;
            }
            digest.update(&buffer[..read]);
            if let Some(trailing) = &mut trailing {
                trailing.update(&buffer[..read]);
            }
        }
        let found = digest.finish();
        if found != expected.sha256 {
            return Err(damaged(format!(
                "`{name}` has sha256 {found}; the manifest lists {}",
                expected.sha256
            )));
        }
        if trailing.is_some_and(|trailing| !trailing.holds()) {
            return Err(damaged(format!(
                "{ETCD_SNAPSHOT} does not end with its own sha256, as an etcd snapshot does"
            )));
        }
    }
    let Some((manifest, manifest_bytes)) = manifest else {
        return Err(damaged(format!("it holds no {MANIFEST_FILE}")));
    };
    let signature = match signature {
        Some(signature) => signature,
        None => check_signature(path, keys, &manifest_bytes, None)?,
    };
    if let Some(missing) = manifest.files.get(listed_index) {
        return Err(damaged(format!(
            "it ends before `{}`, which the manifest lists",
            BackupManifest::archive_path(missing)
        )));
    }
    tar_read::finish(archive).map_err(|error| damaged(io_problem(error)))?;
    Ok(Verified {
        manifest,
        signature,
    })
}

/// The archive's tar, decrypted with `unlock` when it is encrypted.
pub(super) fn open<'a>(
    path: &Path,
    file: fs_err::File,
    unlock: &Keys,
) -> Result<tar_read::TarReader<'a>, VerifyError> {
    let plain = unlock
        .open(std::io::BufReader::new(file))
        .map_err(VerifyError::Locked)?;
    tar_read::open(plain).map_err(|error| VerifyError::Damaged {
        path: path.to_path_buf(),
        problem: format!("not a zstd tar: {error}"),
    })
}

fn check_signature(
    path: &Path,
    keys: &[PublicKey],
    manifest: &[u8],
    text: Option<&str>,
) -> Result<Signature, VerifyError> {
    let failed = |source| VerifyError::Signature {
        path: path.to_path_buf(),
        source,
    };
    match (text, keys.is_empty()) {
        (None, true) => Ok(Signature::Unsigned),
        (Some(_), true) => Ok(Signature::NotChecked),
        (None, false) => Err(failed(SignatureError::Unsigned {
            file: MANIFEST_FILE.to_string(),
            signature: SIGNATURE_FILE.to_string(),
            keys: fingerprints(keys),
        })),
        (Some(text), false) => {
            let key = berth_formats::signature::verify(
                keys,
                MANIFEST_FILE,
                manifest,
                SIGNATURE_FILE,
                text,
            )
            .map_err(failed)?;
            Ok(Signature::Trusted(key.fingerprint()))
        }
    }
}
