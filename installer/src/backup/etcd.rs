//! An etcd snapshot, taken with etcd's own client API (`Maintenance.Snapshot` through its
//! JSON gateway, `POST /v3/maintenance/snapshot`, as `etcdctl snapshot save` calls it over
//! gRPC): etcd streams one consistent copy of its database, which ends with the sha256 of
//! what precedes it. The API server's etcd client certificate authenticates Berth; etcd's CA
//! is the only one trusted for etcd's answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use berth_formats::Sha256Digest;
use berth_formats::digest::{HashingWriter, StreamingDigest};

/// Where kubeadm's local etcd answers on a control-plane node.
pub const DEFAULT_ENDPOINT: &str = "https://127.0.0.1:2379";
/// The longest line of etcd's answer read: each carries one chunk (32 KiB in etcd 3.4),
/// base64-encoded.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The certificates a snapshot is asked with, under a node's root.
pub struct Credentials {
    pub ca: PathBuf,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

impl Credentials {
    /// kubeadm's: etcd's CA, and the API server's client certificate for etcd.
    pub fn kubeadm(root: &Path) -> Self {
        let pki = root.join("etc/kubernetes/pki");
        Self {
            ca: pki.join("etcd/ca.crt"),
            certificate: pki.join("apiserver-etcd-client.crt"),
            key: pki.join("apiserver-etcd-client.key"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("failed to read {path}")]
    Credentials {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} is not a certificate (or key) in PEM Berth can use: {message}")]
    BadPem { what: String, message: String },
    #[error("etcd at {endpoint} did not answer")]
    Request {
        endpoint: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("etcd at {endpoint} refused the snapshot: {message}")]
    Refused { endpoint: String, message: String },
    #[error("etcd's snapshot stream is not what etcd sends: {0}")]
    Stream(String),
    #[error(
        "the snapshot etcd sent does not end with its own sha256 (it was cut short or changed on the way)"
    )]
    Integrity,
    #[error("failed to write the snapshot")]
    Write(#[source] std::io::Error),
}

/// Streams a snapshot of the etcd at `endpoint` into `out`; returns its size and sha256 once
/// its own trailing hash has been checked.
pub fn snapshot(
    endpoint: &str,
    credentials: &Credentials,
    out: impl Write,
) -> Result<(u64, Sha256Digest), SnapshotError> {
    let read = |path: &Path| {
        fs_err::read(path).map_err(|source| SnapshotError::Credentials {
            path: path.to_path_buf(),
            source,
        })
    };
    let ca = read(&credentials.ca)?;
    let mut identity = read(&credentials.certificate)?;
    identity.push(b'\n');
    identity.extend(read(&credentials.key)?);
    let bad_pem = |what: &Path, error: reqwest::Error| SnapshotError::BadPem {
        what: what.display().to_string(),
        message: error.to_string(),
    };
    let client = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(&ca).map_err(|error| bad_pem(&credentials.ca, error))?,
        )
        .identity(
            reqwest::Identity::from_pem(&identity)
                .map_err(|error| bad_pem(&credentials.certificate, error))?,
        )
        .connect_timeout(Duration::from_secs(10))
        // Per read, in reqwest's blocking client: an etcd that stops sending is given up after
        // the stall timeout every download of Berth's has, however long the whole takes.
        .timeout(crate::dist::stall_timeout())
        .build()
        .map_err(|source| SnapshotError::Request {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let url = format!("{}/v3/maintenance/snapshot", endpoint.trim_end_matches('/'));
    let response = client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .map_err(|source| SnapshotError::Request {
            endpoint: endpoint.to_string(),
            source,
        })?;
    if !response.status().is_success() {
        let status = response.status();
        let mut body = String::new();
        let _ = response.take(4096).read_to_string(&mut body);
        return Err(SnapshotError::Refused {
            endpoint: endpoint.to_string(),
            message: format!("{status}: {}", body.trim()),
        });
    }
    receive(BufReader::new(response), out, endpoint)
}

/// Reads the gateway's stream, one JSON object a line (`{"result": {"blob": …}}`, or
/// `{"error": …}` when etcd fails midway), into `out`, checking etcd's trailing sha256.
fn receive(
    mut lines: impl BufRead,
    out: impl Write,
    endpoint: &str,
) -> Result<(u64, Sha256Digest), SnapshotError> {
    let mut writer = HashingWriter::new(out);
    let mut check = TrailingHash::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut lines)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|error| SnapshotError::Stream(format!("reading it: {error}")))?;
        if read == 0 {
            break;
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(SnapshotError::Stream(format!(
                "a line longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        let message: serde_json::Value = serde_json::from_slice(&line)
            .map_err(|error| SnapshotError::Stream(error.to_string()))?;
        if let Some(error) = message.get("error") {
            let said = error
                .get("message")
                .and_then(serde_json::Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(SnapshotError::Refused {
                endpoint: endpoint.to_string(),
                message: said,
            });
        }
        let blob = message
            .pointer("/result/blob")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| SnapshotError::Stream("a message without result.blob".into()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .map_err(|error| SnapshotError::Stream(format!("result.blob: {error}")))?;
        check.update(&bytes);
        writer.write_all(&bytes).map_err(SnapshotError::Write)?;
    }
    if !check.holds() {
        return Err(SnapshotError::Integrity);
    }
    let (digest, size, mut out) = writer.finish();
    out.flush().map_err(SnapshotError::Write)?;
    Ok((size, digest))
}

/// The sha256 of everything but the last 32 bytes, and those 32 bytes: an etcd snapshot is
/// whole when they are equal (`etcdctl snapshot restore` checks the same).
#[derive(Default)]
pub struct TrailingHash {
    digest: StreamingDigest,
    tail: Vec<u8>,
}

impl TrailingHash {
    pub fn update(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 32 {
            let settled = self.tail.len() - 32;
            self.digest.update(&self.tail[..settled]);
            self.tail.drain(..settled);
        }
    }

    pub fn holds(self) -> bool {
        self.tail.len() == 32 && self.digest.finish().hex() == hex::encode(&self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_bytes(database: &[u8]) -> Vec<u8> {
        let mut bytes = database.to_vec();
        bytes.extend(hex::decode(Sha256Digest::of(database).hex()).unwrap());
        bytes
    }

    fn stream(chunks: &[&[u8]]) -> String {
        chunks
            .iter()
            .map(|chunk| {
                format!(
                    "{{\"result\":{{\"blob\":\"{}\"}}}}\n",
                    base64::engine::general_purpose::STANDARD.encode(chunk)
                )
            })
            .collect()
    }

    #[test]
    fn a_stream_is_written_whole_and_its_trailing_hash_checked() {
        let snapshot = snapshot_bytes(&[7u8; 100_000]);
        let (head, tail) = snapshot.split_at(99_990);
        let mut out = Vec::new();
        let (size, digest) = receive(stream(&[head, tail]).as_bytes(), &mut out, "e").unwrap();
        assert_eq!(out, snapshot);
        assert_eq!(
            (size, digest),
            (snapshot.len() as u64, Sha256Digest::of(&snapshot))
        );

        let cut = &snapshot[..snapshot.len() - 1];
        let error = receive(stream(&[cut]).as_bytes(), Vec::new(), "e").unwrap_err();
        assert!(matches!(error, SnapshotError::Integrity), "{error}");
        let error = receive(
            "{\"error\":{\"message\":\"etcdserver: request timed out\"}}\n".as_bytes(),
            Vec::new(),
            "e",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.ends_with("refused the snapshot: etcdserver: request timed out"),
            "{error}"
        );
        let error = receive("{\"result\":{}}\n".as_bytes(), Vec::new(), "e")
            .unwrap_err()
            .to_string();
        assert!(error.contains("without result.blob"), "{error}");
        let long = format!(
            "{{\"result\":{{\"blob\":\"{}",
            "A".repeat(MAX_LINE_BYTES + 10)
        );
        let error = receive(long.as_bytes(), Vec::new(), "e")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a line longer than"), "{error}");
    }
}
