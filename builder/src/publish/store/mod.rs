//! Where published files live: a local folder (the default, no cloud account needed) or an S3
//! bucket (AWS, MinIO, SeaweedFS, Ceph: endpoint, region and path-style addressing are
//! settings). Files are addressed by key (`dist/<release>/<name>-<version>.tar.gz`); every
//! stored file carries its sha256 (S3: the `sha256` object metadata), so a put of unchanged
//! bytes writes nothing.

mod local;
mod s3;

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_formats::Sha256Digest;

pub use local::LocalStore;
pub use s3::S3Store;

/// A store named on the command line: `s3://bucket/prefix` or a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Local(PathBuf),
    S3 { bucket: String, prefix: String },
}

impl StoreLocation {
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(StoreError::BadLocation {
                    text: text.to_string(),
                });
            }
            return Ok(StoreLocation::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
            });
        }
        if text.contains("://") {
            return Err(StoreError::BadLocation {
                text: text.to_string(),
            });
        }
        Ok(StoreLocation::Local(PathBuf::from(text)))
    }
}

/// How to reach an S3 store.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// An endpoint other than AWS's (`http://127.0.0.1:8333`).
    pub endpoint: Option<String>,
    /// The region [default: the standard chain's, else `us-east-1`].
    pub region: Option<String>,
    /// `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`.
    pub path_style: bool,
    /// Files larger than this go up in parts of this size.
    pub part_size: u64,
    /// Parts in flight at once, per file.
    pub concurrency: usize,
    /// Attempts per request, with exponential backoff between them.
    pub attempts: u32,
}

impl Default for S3Settings {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            path_style: false,
            part_size: 16 * 1024 * 1024,
            concurrency: 4,
            attempts: 4,
        }
    }
}

/// What a put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The stored file already had these bytes.
    Unchanged,
    Written,
    /// Written in this many parts.
    WrittenInParts(usize),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{text}` is not a store: give a folder or s3://bucket/prefix")]
    BadLocation { text: String },
    #[error("{location}: {message}")]
    S3 { location: String, message: String },
    #[error("{location}")]
    Io {
        location: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{location} does not exist")]
    Missing { location: String },
}

/// A store, opened.
pub enum Store {
    Local(LocalStore),
    S3(S3Store),
}

impl Store {
    pub async fn open(location: &StoreLocation, settings: &S3Settings) -> Result<Self, StoreError> {
        Ok(match location {
            StoreLocation::Local(root) => Store::Local(LocalStore::new(root)),
            StoreLocation::S3 { bucket, prefix } => {
                Store::S3(S3Store::connect(bucket, prefix, settings).await?)
            }
        })
    }

    /// Where `key` is, for messages: a path or an `s3://` URL.
    pub fn describe(&self, key: &str) -> String {
        match self {
            Store::Local(store) => store.path(key).display().to_string(),
            Store::S3(store) => store.describe(key),
        }
    }

    /// Stores the file at `path` (of this digest) under `key`, unless it is there already.
    pub async fn put(
        &self,
        key: &str,
        path: &Path,
        digest: Sha256Digest,
    ) -> Result<Put, StoreError> {
        match self {
            Store::Local(store) => store.put(key, path, digest).await,
            Store::S3(store) => store.put(key, path, digest).await,
        }
    }

    /// A whole (small) file, or `None` when there is none under `key`.
    pub async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self {
            Store::Local(store) => store.read(key).await,
            Store::S3(store) => store.read(key).await,
        }
    }

    /// The file under `key` as a stream of bytes, for files too large to hold.
    pub async fn reader(
        &self,
        key: &str,
    ) -> Result<Box<dyn tokio::io::AsyncRead + Send + Unpin>, StoreError> {
        match self {
            Store::Local(store) => store.reader(key).await,
            Store::S3(store) => store.reader(key).await,
        }
    }
}

/// The key of a published file: `dist/<release>/<file>` (`staging/…` for a staging upload).
pub fn release_key(staging: bool, release: &str, file: &str) -> String {
    let tree = if staging { "staging" } else { "dist" };
    format!("{tree}/{release}/{file}")
}

/// How long a whole upload may take before it is abandoned.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        assert_eq!(
            StoreLocation::parse("s3://bucket/some/prefix/").unwrap(),
            StoreLocation::S3 {
                bucket: "bucket".into(),
                prefix: "some/prefix".into()
            }
        );
        assert_eq!(
            StoreLocation::parse("s3://bucket").unwrap(),
            StoreLocation::S3 {
                bucket: "bucket".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            StoreLocation::parse("out/store").unwrap(),
            StoreLocation::Local("out/store".into())
        );
        assert!(StoreLocation::parse("gs://bucket").is_err());
        assert!(StoreLocation::parse("s3:///x").is_err());
    }
}
