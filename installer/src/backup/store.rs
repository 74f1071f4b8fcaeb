//! Where backups are kept: files in a folder on the node (the newest `--keep` of Berth's own
//! names kept), or objects in S3, sent and fetched with presigned requests (rusty-s3 signs
//! them; reqwest sends them), so that the node binary carries no S3 SDK.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusty_s3::{Bucket, Credentials, S3Action as _, UrlStyle};

/// A backup's place, as `--output` or `--verify` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    File(PathBuf),
    /// `s3://bucket/key`.
    S3 {
        bucket: String,
        key: String,
    },
}

/// How S3 is reached: AWS by default; another endpoint (MinIO, SeaweedFS, Ceph) is addressed
/// path-style.
#[derive(Debug, Clone)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{0}` is not an S3 location: give s3://BUCKET/KEY")]
    BadLocation(String),
    #[error("S3: {0}")]
    Settings(String),
    #[error(
        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)"
    )]
    NoCredentials,
    #[error("failed to {action} {location}")]
    Request {
        action: &'static str,
        location: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("S3 refused to {action} {location}: {status}: {body}")]
    Refused {
        action: &'static str,
        location: String,
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("failed to {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Place {
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let Some(rest) = text.strip_prefix("s3://") else {
            return Ok(Place::File(PathBuf::from(text)));
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() || text.chars().any(char::is_control) {
            return Err(StoreError::BadLocation(text.to_string()));
        }
        Ok(Place::S3 {
            bucket: bucket.to_string(),
            key: key.to_string(),
        })
    }

    /// The same place with `name` for a key or path that names a folder (ends in `/`, or is
    /// a folder on this node).
    pub fn named(self, name: &str) -> Self {
        match self {
            Place::S3 { bucket, key } if key.is_empty() || key.ends_with('/') => Place::S3 {
                bucket,
                key: format!("{key}{name}"),
            },
            Place::File(path)
                if path.as_os_str().to_string_lossy().ends_with('/') || path.is_dir() =>
            {
                Place::File(path.join(name))
            }
            other => other,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Place::File(path) => path.display().to_string(),
            Place::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
        }
    }
}

impl S3Settings {
    fn bucket(&self, name: &str) -> Result<Bucket, StoreError> {
        let (endpoint, style) = match &self.endpoint {
            Some(endpoint) => (endpoint.clone(), UrlStyle::Path),
            None => (
                format!("https://s3.{}.amazonaws.com", self.region),
                UrlStyle::VirtualHost,
            ),
        };
        let url = endpoint
            .parse()
            .map_err(|error| StoreError::Settings(format!("endpoint `{endpoint}`: {error}")))?;
        Bucket::new(url, style, name.to_string(), self.region.clone())
            .map_err(|error| StoreError::Settings(format!("bucket `{name}`: {error}")))
    }

    /// Sends the request `request` builds (on a client with Berth's timeouts) and answers its
    /// response when S3 took it; `action` and `location` name it in errors.
    fn send(
        action: &'static str,
        location: &str,
        timeout: Duration,
        request: impl FnOnce(&reqwest::blocking::Client) -> reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::Response, StoreError> {
        let failed = |source| StoreError::Request {
            action,
            location: location.to_string(),
            source,
        };
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .map_err(failed)?;
        let response = request(&client).send().map_err(failed)?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let mut body = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::Read::take(response, 2048), &mut body);
        Err(StoreError::Refused {
            action,
            location: location.to_string(),
            status,
            body: body.trim().to_string(),
        })
    }

    /// Sends `file` to `s3://bucket/key`.
    pub fn upload(&self, bucket: &str, key: &str, file: &Path) -> Result<(), StoreError> {
        let credentials = Credentials::from_env().ok_or(StoreError::NoCredentials)?;
        let url = self
            .bucket(bucket)?
            .put_object(Some(&credentials), key)
            .sign(PRESIGNED_FOR);
        let io = |source| StoreError::Io {
            action: "read",
            path: file.to_path_buf(),
            source,
        };
        let opened = fs_err::File::open(file).map_err(io)?;
        let size = opened.metadata().map_err(io)?.len();
        let location = format!("s3://{bucket}/{key}");
        // reqwest's blocking client bounds a request until its answer's head by this: the
        // whole upload, which may be gigabytes.
        Self::send("upload to", &location, PRESIGNED_FOR, |client| {
            client
                .put(url)
                .body(reqwest::blocking::Body::sized(opened, size))
        })
        .map(drop)
    }

    /// Fetches `s3://bucket/key` into `file`.
    pub fn download(&self, bucket: &str, key: &str, file: &Path) -> Result<(), StoreError> {
        let credentials = Credentials::from_env().ok_or(StoreError::NoCredentials)?;
        let url = self
            .bucket(bucket)?
            .get_object(Some(&credentials), key)
            .sign(PRESIGNED_FOR);
        let location = format!("s3://{bucket}/{key}");
        // Bounded per read (its head, then each read of the body): a stall, not a long download.
        let stall = crate::dist::stall_timeout();
        let mut response = Self::send("download", &location, stall, |client| client.get(url))?;
        let mut out = fs_err::File::create(file).map_err(|source| StoreError::Io {
            action: "write",
            path: file.to_path_buf(),
            source,
        })?;
        response
            .copy_to(&mut out)
            .map_err(|source| StoreError::Request {
                action: "download",
                location,
                source,
            })?;
        Ok(())
    }
}

/// How long a presigned request stays good: as long as the client waits for it.
const PRESIGNED_FOR: Duration = Duration::from_secs(3600);

/// Berth's own backup names (`backup-<time>.tar.zst`, `.tar.zst.age`), which sort by time.
pub fn is_backup_name(name: &str) -> bool {
    name.starts_with("backup-") && (name.ends_with(".tar.zst") || name.ends_with(".tar.zst.age"))
}

/// Removes all but the newest `keep` backups of Berth's own names in `folder`; returns what it
/// removed. Other files are left alone.
pub fn prune(folder: &Path, keep: usize) -> Result<Vec<PathBuf>, StoreError> {
    let io = |action, source| StoreError::Io {
        action,
        path: folder.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = fs_err::read_dir(folder)
        .map_err(|source| io("read", source))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| is_backup_name(name))
        .collect();
    names.sort();
    let surplus = names.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for name in &names[..surplus] {
        let path = folder.join(name);
        fs_err::remove_file(&path).map_err(|source| io("remove a backup from", source))?;
        removed.push(path);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_files_or_s3_objects() {
        assert_eq!(
            Place::parse("/mnt/b.tar.zst").unwrap(),
            Place::File("/mnt/b.tar.zst".into())
        );
        assert_eq!(
            Place::parse("s3://backups/cluster/")
                .unwrap()
                .named("backup-1.tar.zst"),
            Place::S3 {
                bucket: "backups".into(),
                key: "cluster/backup-1.tar.zst".into()
            }
        );
        assert_eq!(
            Place::parse("s3://backups").unwrap().named("n"),
            Place::S3 {
                bucket: "backups".into(),
                key: "n".into()
            }
        );
        assert!(Place::parse("s3:///key").is_err());
    }

    #[test]
    fn pruning_keeps_the_newest_of_berths_names_alone() {
        let folder = tempfile::tempdir().unwrap();
        for name in [
            "backup-2026-11-01T000000Z.tar.zst",
            "backup-2026-11-03T000000Z.tar.zst",
            "backup-2026-11-02T000000Z.tar.zst",
            "mine.tar.zst",
        ] {
            fs_err::write(folder.path().join(name), "x").unwrap();
        }
        let removed = prune(folder.path(), 2).unwrap();
        assert_eq!(
            removed,
            [folder.path().join("backup-2026-11-01T000000Z.tar.zst")]
        );
        assert_eq!(prune(folder.path(), 2).unwrap(), Vec::<PathBuf>::new());
        assert!(folder.path().join("mine.tar.zst").exists());
    }
}
