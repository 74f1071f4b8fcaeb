//! A download into the blob cache that resumes, retries and verifies.
//!
//! Registry blobs and URL assets both come through here. Bytes are hashed as they stream in;
//! a dropped connection resumes with an HTTP `Range` request from the last byte received; the
//! result enters the cache only if its size and digest match what was expected.

use std::io::{Seek, Write};
use std::path::PathBuf;
use std::time::Duration;

use berth_formats::Sha256Digest;
use berth_formats::digest::StreamingDigest;
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, RANGE};

use crate::fetch::cache::BlobCache;
use crate::reporter::Progress;

/// How often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_delay: Duration::from_millis(250),
        }
    }
}

impl RetryPolicy {
    /// The pause before attempt `attempt` (1-based; attempt 1 has none).
    pub fn delay(&self, attempt: u32) -> Duration {
        self.first_delay * 2u32.saturating_pow(attempt.saturating_sub(2))
    }
}

/// What a download must turn out to be.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expected {
    pub digest: Option<Sha256Digest>,
    pub size: Option<u64>,
}

/// A verified download, now in the cache.
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub digest: Sha256Digest,
    pub size: u64,
    pub path: PathBuf,
}

/// Why a download failed.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("cannot reach {url} (after {attempts} attempts)")]
    Transport {
        url: String,
        attempts: u32,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {status}")]
    Status { url: String, status: StatusCode },
    #[error(
        "{url} sent {actual} but {expected} was expected: the content does not match its digest"
    )]
    DigestMismatch {
        url: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("{url} sent {actual} bytes but {expected} were expected")]
    SizeMismatch {
        url: String,
        expected: u64,
        actual: u64,
    },
    #[error("failed to write into the blob cache")]
    Cache(#[source] std::io::Error),
}

impl DownloadError {
    fn is_transient(&self) -> bool {
        match self {
            DownloadError::Transport { .. } => true,
            DownloadError::Status { status, .. } => {
                status.is_server_error()
                    || *status == StatusCode::TOO_MANY_REQUESTS
                    || *status == StatusCode::REQUEST_TIMEOUT
            }
            _ => false,
        }
    }
}

/// Downloads what `request` fetches into the cache. `request` is called once per attempt and
/// must build the same GET each time; this adds the `Range` header when resuming.
pub async fn download_to_cache(
    url: &str,
    cache: &BlobCache,
    expected: Expected,
    retry: RetryPolicy,
    progress: &dyn Progress,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> Result<Downloaded, DownloadError> {
    if let Some(digest) = expected.digest.filter(|digest| cache.contains(digest)) {
        let path = cache.path(&digest);
        let size = fs_err::metadata(&path).map_err(DownloadError::Cache)?.len();
        progress.advance(size);
        return Ok(Downloaded { digest, size, path });
    }
    let mut file = cache.temp_file().map_err(DownloadError::Cache)?;
    let mut hasher = StreamingDigest::new();
    let mut attempt = 0;
    loop {
        attempt += 1;
        if attempt > 1 {
            tokio::time::sleep(retry.delay(attempt)).await;
        }
        match receive(url, &request, &mut file, &mut hasher, progress, attempt).await {
            Ok(()) => break,
            Err(error) if error.is_transient() && attempt < retry.attempts => {
                tracing::debug!("retrying {url} from byte {}: {error}", hasher.length());
            }
            Err(error) => return Err(error),
        }
    }
    let size = hasher.length();
    let digest = hasher.finish();
    if let Some(expected_size) = expected.size.filter(|expected| *expected != size) {
        return Err(DownloadError::SizeMismatch {
            url: url.to_string(),
            expected: expected_size,
            actual: size,
        });
    }
    if let Some(expected) = expected.digest.filter(|expected| *expected != digest) {
        return Err(DownloadError::DigestMismatch {
            url: url.to_string(),
            expected,
            actual: digest,
        });
    }
    let path = cache.commit(file, &digest).map_err(DownloadError::Cache)?;
    Ok(Downloaded { digest, size, path })
}

/// One attempt: continue from what `hasher` has seen, or start over if the server ignores `Range`.
async fn receive(
    url: &str,
    request: &impl Fn() -> reqwest::RequestBuilder,
    file: &mut tempfile::NamedTempFile,
    hasher: &mut StreamingDigest,
    progress: &dyn Progress,
    attempt: u32,
) -> Result<(), DownloadError> {
    let transport = |source| DownloadError::Transport {
        url: url.to_string(),
        attempts: attempt,
        source,
    };
    let offset = hasher.length();
    let mut builder = request();
    if offset > 0 {
        builder = builder.header(RANGE, format!("bytes={offset}-"));
    }
    let response = builder.send().await.map_err(transport)?;
    let status = response.status();
    let resumed = status == StatusCode::PARTIAL_CONTENT
        && response
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with(&format!("bytes {offset}-")));
    if !status.is_success() {
        return Err(DownloadError::Status {
            url: url.to_string(),
            status,
        });
    }
    if offset > 0 && !resumed {
        // The server sent the whole content again: start over.
        file.as_file_mut()
            .set_len(0)
            .map_err(DownloadError::Cache)?;
        file.rewind().map_err(DownloadError::Cache)?;
        *hasher = StreamingDigest::new();
    }
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(transport)?;
        file.write_all(&chunk).map_err(DownloadError::Cache)?;
        hasher.update(&chunk);
        progress.advance(chunk.len() as u64);
    }
    file.flush().map_err(DownloadError::Cache)?;
    Ok(())
}
