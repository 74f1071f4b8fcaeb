//! `asset` directives: a file fetched by URL (retried, resumed, cached by digest) or taken
//! from a path in the add-ons repository, checked against its `sha256:` pin when it has one.

use std::path::PathBuf;

use berth_formats::Sha256Digest;
use berth_formats::manifest::{AssetDirective, AssetSource};

use crate::fetch::cache::BlobCache;
use crate::fetch::download::{self, DownloadError, Expected, RetryPolicy};
use crate::reporter::Reporter;
use crate::source::addon::LocalInput;

/// An asset ready to be packaged.
#[derive(Debug, Clone)]
pub struct FetchedAsset {
    /// File name under `assets/`.
    pub file: String,
    pub path: PathBuf,
    pub digest: Sha256Digest,
    pub size: u64,
}

/// Why an asset could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    #[error("asset `{file}`")]
    Download {
        file: String,
        #[source]
        source: DownloadError,
    },
    #[error("asset `{file}` ({path}) does not match its pin: expected {expected}, found {actual}")]
    PinMismatch {
        file: String,
        path: PathBuf,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("failed to read asset `{file}`")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
}

/// Fetches one asset. `local` is the add-on's already hashed file for a path-sourced asset.
pub async fn fetch(
    http: &reqwest::Client,
    cache: &BlobCache,
    retry: RetryPolicy,
    reporter: &dyn Reporter,
    asset: &AssetDirective,
    local: Option<&LocalInput>,
    mirrors: &[(String, String)],
) -> Result<FetchedAsset, AssetError> {
    match (&asset.source, local) {
        (AssetSource::Path(_), Some(local)) => {
            if let Some(expected) = asset.sha256.filter(|expected| *expected != local.digest) {
                return Err(AssetError::PinMismatch {
                    file: asset.file.clone(),
                    path: local.path.clone(),
                    expected,
                    actual: local.digest,
                });
            }
            Ok(FetchedAsset {
                file: asset.file.clone(),
                path: local.path.clone(),
                digest: local.digest,
                size: local.size,
            })
        }
        (AssetSource::Url(url), _) => {
            let url = mirrored(url.as_str(), mirrors);
            let progress = reporter.start(&asset.file, None);
            let result = download::download_to_cache(
                &url,
                cache,
                Expected {
                    digest: asset.sha256,
                    size: None,
                },
                retry,
                progress.as_ref(),
                || http.get(&url),
            )
            .await;
            progress.finish();
            let downloaded = result.map_err(|source| AssetError::Download {
                file: asset.file.clone(),
                source,
            })?;
            Ok(FetchedAsset {
                file: asset.file.clone(),
                path: downloaded.path,
                digest: downloaded.digest,
                size: downloaded.size,
            })
        }
        (AssetSource::Path(path), None) => Err(AssetError::Io {
            file: asset.file.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{path} was not resolved"),
            ),
        }),
    }
}

/// `url` through the first mirror whose prefix it starts with, or as it is.
pub fn mirrored(url: &str, mirrors: &[(String, String)]) -> String {
    mirrors
        .iter()
        .find_map(|(prefix, replacement)| {
            url.strip_prefix(prefix.as_str())
                .map(|rest| format!("{replacement}{rest}"))
        })
        .unwrap_or_else(|| url.to_string())
}
