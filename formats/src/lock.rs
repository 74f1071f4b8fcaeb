//! The lock of one installer: the exact version and package digest of each of its add-ons,
//! resolved when its scripts are rendered. It is embedded in the scripts served for the
//! installer and carried in its airgap bundle, so a node installs exactly what was rendered
//! and refuses any other byte, whatever the store holds by then.

use serde::{Deserialize, Serialize};

use crate::Sha256Digest;
use crate::compression::Compression;

/// The file name of a lock beside a spec (in a bundle, or where the scripts put it).
pub const LOCK_FILE: &str = "lock.json";
/// The most bytes of a lock a node reads.
pub const MAX_LOCK_BYTES: u64 = 16 << 20;

pub const LOCK_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lock {
    pub schema_version: u32,
    /// The installer id of the spec it was resolved for.
    pub id: String,
    /// Add-ons in install order.
    pub addons: Vec<LockedAddon>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LockedAddon {
    #[serde(deserialize_with = "crate::name::plain_name")]
    pub name: String,
    #[serde(deserialize_with = "crate::name::plain_version")]
    pub version: String,
    /// sha256 of `<name>-<version>.tar.gz` (`.tar.zst` when `compression` is zstd).
    pub sha256: Sha256Digest,
    /// How the package is compressed, which names its file; gzip when absent.
    #[serde(default, skip_serializing_if = "Compression::is_gzip")]
    pub compression: Compression,
    /// sha256 of the package's `package.json`, which lists every file's sha256: an airgap
    /// bundle carries packages unpacked (image blobs shared between add-ons once), and is
    /// checked through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_sha256: Option<Sha256Digest>,
}

#[derive(Debug, thiserror::Error)]
#[error("{origin}: not a Berth lock: {message}")]
pub struct LockError {
    pub origin: String,
    pub message: String,
}

impl Lock {
    /// Parses `text`, the contents of `origin` (a path or URL, named in errors).
    pub fn parse(origin: &str, text: &[u8]) -> Result<Self, LockError> {
        let lock: Lock = serde_json::from_slice(text).map_err(|error| LockError {
            origin: origin.to_string(),
            message: error.to_string(),
        })?;
        if lock.schema_version != LOCK_SCHEMA_VERSION {
            return Err(LockError {
                origin: origin.to_string(),
                message: format!(
                    "schema version {} (this Berth reads {LOCK_SCHEMA_VERSION})",
                    lock.schema_version
                ),
            });
        }
        Ok(lock)
    }

    /// The lock's JSON, indented, with a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a lock serializes");
        bytes.push(b'\n');
        bytes
    }

    pub fn addon(&self, name: &str) -> Option<&LockedAddon> {
        self.addons.iter().find(|addon| addon.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_reads_back_and_refuses_another_schema() {
        let lock = Lock {
            schema_version: LOCK_SCHEMA_VERSION,
            id: "abc1234".into(),
            addons: vec![LockedAddon {
                name: "hello".into(),
                version: "1.0.0".into(),
                sha256: Sha256Digest::of(b"package"),
                compression: Compression::Zstd,
                index_sha256: None,
            }],
        };
        let bytes = lock.to_bytes();
        assert_eq!(Lock::parse("lock.json", &bytes).unwrap(), lock);
        // zstd is named; gzip, the default, is left out, so a gzip lock reads as before.
        assert!(String::from_utf8_lossy(&bytes).contains("\"compression\": \"zstd\""));
        let mut gzip = lock.clone();
        gzip.addons[0].compression = Compression::Gzip;
        assert!(!String::from_utf8_lossy(&gzip.to_bytes()).contains("compression"));
        let other = String::from_utf8(bytes)
            .unwrap()
            .replace("\"schemaVersion\": 1", "\"schemaVersion\": 9");
        let error = Lock::parse("lock.json", other.as_bytes()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "lock.json: not a Berth lock: schema version 9 (this Berth reads 1)"
        );
    }
}
