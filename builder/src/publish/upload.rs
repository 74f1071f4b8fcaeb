//! Publishing a built dist folder to a store under `{dist|staging}/<release>/`.
//!
//! Packages and every other file (their signatures too) go first, several at once;
//! `versions.json` and its signature go last, so a node that reads it never finds a version
//! whose package is not there yet. A file the store
//! already holds with the same sha256 is not written again.

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::package_index::checksum_file_text;
use berth_formats::release::{berth_binary_file, berth_binary_name, checksum_file};
use berth_formats::versions::VERSIONS_FILE;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::publish::store::{Put, Store, StoreError, release_key};

/// What to publish and where.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    pub release: String,
    pub staging: bool,
    /// The node binary to publish as `bin/berth-linux-<arch>`, with its arch.
    pub berth: Option<(PathBuf, String)>,
    /// Files put at once.
    pub jobs: usize,
}

/// One file's outcome.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub key: String,
    pub size: u64,
    pub put: Put,
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Uploads every file below `dir` (and the node binary), `versions.json` last.
pub async fn upload(
    store: &Store,
    dir: &Path,
    settings: &UploadSettings,
) -> Result<Vec<Uploaded>, UploadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UploadError::Io { path, source }
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(|error| UploadError::Io {
            path: dir.to_path_buf(),
            source: error.into(),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let relative = entry
            .path()
            .strip_prefix(dir)
            .expect("below the walked folder")
            .to_string_lossy()
            .replace('\\', "/");
        files.push((relative, entry.path().to_path_buf()));
    }
    // The binary's `.sha256` is written for the upload, beside nothing else.
    let scratch = tempfile::tempdir().map_err(io(dir))?;
    if let Some((binary, arch)) = &settings.berth {
        let file = berth_binary_file(arch);
        let digest = Sha256Digest::of_reader(fs_err::File::open(binary).map_err(io(binary))?)
            .map_err(io(binary))?;
        let checksum = scratch.path().join("berth.sha256");
        fs_err::write(
            &checksum,
            checksum_file_text(&digest, &berth_binary_name(arch)),
        )
        .map_err(io(&checksum))?;
        files.push((file.clone(), binary.clone()));
        files.push((checksum_file(&file), checksum));
    }
    let (last, first): (Vec<_>, Vec<_>) = files.into_iter().partition(|(relative, _)| {
        relative == VERSIONS_FILE
            || *relative
                == format!(
                    "{VERSIONS_FILE}{}",
                    berth_formats::signature::SIGNATURE_SUFFIX
                )
    });
    let mut uploaded = put_all(store, first, settings).await?;
    uploaded.extend(put_all(store, last, settings).await?);
    Ok(uploaded)
}

async fn put_all(
    store: &Store,
    files: Vec<(String, PathBuf)>,
    settings: &UploadSettings,
) -> Result<Vec<Uploaded>, UploadError> {
    futures::stream::iter(files)
        .map(|(relative, path)| async move {
            let io = |source| UploadError::Io {
                path: path.clone(),
                source,
            };
            let (digest, size) = tokio::task::spawn_blocking({
                let path = path.clone();
                move || -> std::io::Result<(Sha256Digest, u64)> {
                    let file = fs_err::File::open(&path)?;
                    let size = file.metadata()?.len();
                    Ok((Sha256Digest::of_reader(file)?, size))
                }
            })
            .await
            .expect("hashing does not panic")
            .map_err(io)?;
            let key = release_key(settings.staging, &settings.release, &relative);
            let put = store.put(&key, &path, digest).await?;
            tracing::debug!("{key}: {put:?}");
            Ok(Uploaded { key, size, put })
        })
        .buffered(settings.jobs.max(1))
        .try_collect()
        .await
}
