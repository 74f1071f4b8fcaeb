//! The airgap bundle's layout: what the builder writes and the node reads, at these names.
//!
//! ```text
//! contents.json                             what the packages take on disk, first
//! install.sh join.sh upgrade.sh tasks.sh    the scripts, rendered for the installer
//! berth                                     the node binary
//! installer.yaml  lock.json  versions.json  the spec, its lock, the versions it pins
//! packages/<name>-<version>/…               each package's files, unpacked
//! blobs/sha256/<hex>                        image blobs, each once for all packages
//! bundle.sha256                             every other file's sha256, last
//! ```
//!
//! The lock, the versions and the spec come first in the archive, so a reader of the stream
//! knows every package's digest before the package arrives. Signed, each of `lock.json`,
//! `versions.json`, the bills of materials and `bundle.sha256` has its `.sig` beside it.

use crate::Sha256Digest;
use crate::oci;

/// The node binary, beside the scripts.
pub const BINARY: &str = "berth";
/// Every other file of the bundle with its sha256, as `sha256sum` writes them (its own
/// signature aside): what says the scripts and the binary are the vendor's.
pub const FILES_LIST: &str = "bundle.sha256";
/// What a bundle's packages take on a node's disk, so a node reading the bundle as a stream
/// can refuse up front when they would not fit.
pub const CONTENTS_FILE: &str = "contents.json";

/// `contents.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Contents {
    /// Bytes of every package file, each shared image blob counted once.
    pub installed_bytes: u64,
}

/// The Installer spec the bundle was made for.
pub const SPEC_FILE: &str = "installer.yaml";
/// The unpacked packages' folder.
pub const PACKAGES_DIR: &str = "packages";
/// The image blobs every package shares.
pub const BLOBS_DIR: &str = oci::BLOBS_DIR;

/// `packages/<name>-<version>`: where one package's files are.
pub fn package_dir(name: &str, version: &str) -> String {
    format!("{PACKAGES_DIR}/{name}-{version}")
}

/// `blobs/sha256/<hex>`: where an image blob is, for every package that names it.
pub fn blob_path(hex: &str) -> String {
    format!("{BLOBS_DIR}/{hex}")
}

/// The hex digest of a package file that the bundle keeps among the shared blobs
/// (`images/blobs/sha256/<hex>` in the package), or `None` for a file kept in the package.
pub fn shared_blob(package_path: &str) -> Option<&str> {
    package_path
        .strip_prefix(oci::IMAGES_DIR)?
        .strip_prefix('/')?
        .strip_prefix(oci::BLOBS_DIR)?
        .strip_prefix('/')
        .filter(|hex| Sha256Digest::from_hex(hex).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_image_blobs_named_by_digest_are_shared() {
        let hex = "a".repeat(64);
        assert_eq!(
            shared_blob(&format!("images/blobs/sha256/{hex}")),
            Some(hex.as_str())
        );
        assert_eq!(shared_blob("images/index.json"), None);
        assert_eq!(shared_blob("images/blobs/sha256/../../etc"), None);
        assert_eq!(shared_blob(&format!("assets/blobs/sha256/{hex}")), None);
        assert_eq!(blob_path(&hex), format!("blobs/sha256/{hex}"));
        assert_eq!(package_dir("demo", "1.0.0"), "packages/demo-1.0.0");
    }
}
