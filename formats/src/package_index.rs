//! `package.json`, the index inside every add-on package.
//!
//! It records what the package was built from (the inputs digest, used to skip rebuilds) and
//! what it holds (every file with size and sha256, every image with reference and manifest
//! digest, host packages per distro), so the installer can verify each byte before using it and
//! `berth-build inspect` can show it without unpacking.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compression::Compression;
use crate::digest::Sha256Digest;

/// File name of the index, at the root of the add-on folder in the package.
pub const PACKAGE_INDEX_FILE: &str = "package.json";

/// Bumped when the package layout or the inputs digest recipe changes, so old packages rebuild.
pub const SCHEMA_VERSION: u32 = 1;

/// The index of one add-on package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageIndex {
    pub schema_version: u32,
    #[serde(deserialize_with = "crate::name::plain_name")]
    pub name: String,
    #[serde(deserialize_with = "crate::name::plain_version")]
    pub version: String,
    /// Target architecture of the images (`amd64`, `arm64`, …).
    pub arch: String,
    /// Digest of everything the package was built from; equal inputs give equal packages.
    pub inputs_digest: Sha256Digest,
    /// Every file in the package except this index, sorted by path, relative to the add-on folder.
    pub files: Vec<FileRecord>,
    /// Every image, in Manifest order.
    pub images: Vec<ImageRecord>,
    /// Host package file names per target distro.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_packages: BTreeMap<String, Vec<String>>,
}

/// One file of the package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileRecord {
    /// Path relative to the add-on folder, `/`-separated.
    pub path: String,
    pub size: u64,
    pub sha256: Sha256Digest,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// One image of the package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageRecord {
    /// The add-on's name for it (the Manifest's `image <name>`).
    pub name: String,
    /// Full reference it is imported under.
    pub reference: String,
    pub manifest_digest: Sha256Digest,
    pub media_type: String,
    /// Bytes of manifest, config and layers together.
    pub size: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_remote_load: bool,
}

impl PackageIndex {
    /// Canonical bytes: pretty JSON with a final newline, fields in declaration order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("package index serializes");
        bytes.push(b'\n');
        bytes
    }

    pub fn from_bytes(bytes: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(bytes)
    }
}

/// The most a `package.json` may weigh (a package of 100,000 files has one of ~20 MiB).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// A package's index as read from its archive: the bytes as stored (what a lock's
/// `indexSha256` is the digest of) and what they say.
#[derive(Debug)]
pub struct ArchivedIndex {
    pub bytes: Vec<u8>,
    pub index: PackageIndex,
}

/// Why a package archive gave no index.
#[derive(Debug, thiserror::Error)]
pub enum IndexReadError {
    #[error("it is not a readable package")]
    Archive(#[source] crate::archive::ExtractError),
    #[error("it holds no {PACKAGE_INDEX_FILE}; is it a Berth package?")]
    Missing,
    #[error("its {PACKAGE_INDEX_FILE} is not valid: {0}")]
    Invalid(String),
}

/// Reads `addons/<name>/<version>/package.json` out of a package archive without unpacking
/// it: of the add-on `expected` names, or of any add-on. The one reader of package indices,
/// for the builder's rebuild check, `inspect` and bundles, and the node's `berth unpack`.
pub fn read_from_archive(
    reader: impl std::io::Read,
    expected: Option<(&str, &str)>,
) -> Result<ArchivedIndex, IndexReadError> {
    let wanted = |path: &str| match expected {
        Some((name, version)) => {
            path.strip_suffix(PACKAGE_INDEX_FILE)
                .and_then(|root| root.strip_suffix('/'))
                == Some(package_root(name, version).as_str())
        }
        None => {
            let parts: Vec<&str> = path.split('/').collect();
            parts.len() == 4 && parts[0] == "addons" && parts[3] == PACKAGE_INDEX_FILE
        }
    };
    let (_, bytes) = crate::archive::read_entry_within(reader, wanted, MAX_INDEX_BYTES)
        .map_err(IndexReadError::Archive)?
        .ok_or(IndexReadError::Missing)?;
    let index = PackageIndex::from_bytes(&bytes)
        .map_err(|error| IndexReadError::Invalid(error.to_string()))?;
    if let Some((name, version)) = expected
        && (index.name != name || index.version != version)
    {
        return Err(IndexReadError::Invalid(format!(
            "it is the index of {} {}, not of {name} {version}",
            index.name, index.version
        )));
    }
    Ok(ArchivedIndex { bytes, index })
}

/// `<name>-<version>.tar.gz`, or `.tar.zst` for a package in zstd.
pub fn package_file_name(name: &str, version: &str, compression: Compression) -> String {
    format!("{name}-{version}{}", compression.tar_suffix())
}

/// This machine's architecture as packages name it (`amd64`, `arm64`, `arm/v7`, …).
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm/v7",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl PackageIndex {
    /// Refuses a package built for another architecture than this machine's: its images
    /// would not run here.
    pub fn check_arch(&self) -> Result<(), String> {
        // `arm` and `arm/v7` name the same images.
        let built = self.arch.trim_end_matches("/v7");
        if built == host_arch().trim_end_matches("/v7") {
            Ok(())
        } else {
            Err(format!(
                "{} {} was built for {} and this machine is {}; build the dist with `--arch {}`",
                self.name,
                self.version,
                self.arch,
                host_arch(),
                host_arch()
            ))
        }
    }
}

/// `addons/<name>/<version>`, the folder every path in a package lives under.
pub fn package_root(name: &str, version: &str) -> String {
    format!("addons/{name}/{version}")
}

/// `<package>.sha256`, the checksum file beside a package.
pub fn checksum_path(package: &std::path::Path) -> std::path::PathBuf {
    let mut name = package.as_os_str().to_owned();
    name.push(crate::release::CHECKSUM_SUFFIX);
    name.into()
}

/// The `.sha256` file written beside a package, in `sha256sum` format.
pub fn checksum_file_text(digest: &Sha256Digest, file_name: &str) -> String {
    format!("{}  {file_name}\n", digest.hex())
}

/// Why a `.sha256` file's text gives no digest for the file it was read for.
#[derive(Debug, thiserror::Error)]
pub enum ChecksumFileError {
    #[error("it is not one `sha256sum` line: `<hex>  <file name>`")]
    Malformed,
    #[error("it gives the digest of `{named}`, not of `{expected}`")]
    OtherFile { named: String, expected: String },
}

/// Reads the digest back from the text of `<file_name>.sha256`. The line names the file, and
/// the name (the add-on and its version) is what the signature over the text binds along with
/// the digest: one package's `.sha256` (and its signature) copied over another's is refused.
pub fn parse_checksum_file(text: &str, file_name: &str) -> Result<Sha256Digest, ChecksumFileError> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let (hex, named) = line
        .split_once("  ")
        .or_else(|| line.split_once(" *"))
        .ok_or(ChecksumFileError::Malformed)?;
    if line.contains('\n') {
        return Err(ChecksumFileError::Malformed);
    }
    let digest = Sha256Digest::from_hex(hex).map_err(|_| ChecksumFileError::Malformed)?;
    // Named as `sha256sum` names it, run in the file's own folder (`bin/berth-linux-amd64`'s
    // says `berth-linux-amd64`).
    let expected = file_name.rsplit('/').next().unwrap_or(file_name);
    if named != expected {
        return Err(ChecksumFileError::OtherFile {
            named: named.to_string(),
            expected: expected.to_string(),
        });
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_file_round_trips_and_matches_sha256sum_format() {
        let digest = Sha256Digest::of(b"package");
        let text = checksum_file_text(&digest, "demo-1.0.0.tar.gz");
        assert_eq!(text, format!("{}  demo-1.0.0.tar.gz\n", digest.hex()));
        assert_eq!(
            parse_checksum_file(&text, "demo-1.0.0.tar.gz").unwrap(),
            digest
        );
    }

    #[test]
    fn a_checksum_file_gives_a_digest_only_for_the_file_it_names() {
        let digest = Sha256Digest::of(b"package");
        let text = checksum_file_text(&digest, "demo-1.0.0.tar.gz");
        let error = parse_checksum_file(&text, "demo-2.0.0.tar.gz").unwrap_err();
        // A file in a folder of the dist is named as sha256sum names it there.
        let binary = checksum_file_text(&digest, "berth-linux-amd64");
        assert_eq!(
            parse_checksum_file(&binary, "bin/berth-linux-amd64").unwrap(),
            digest
        );
        assert!(
            error
                .to_string()
                .contains("`demo-1.0.0.tar.gz`, not of `demo-2.0.0.tar.gz`"),
            "{error}"
        );
        for malformed in [
            digest.hex().to_string(),
            format!(
                "{}  demo-1.0.0.tar.gz\n{}  demo-1.0.0.tar.gz\n",
                digest.hex(),
                digest.hex()
            ),
            "zz  demo-1.0.0.tar.gz\n".to_string(),
        ] {
            assert!(
                matches!(
                    parse_checksum_file(&malformed, "demo-1.0.0.tar.gz"),
                    Err(ChecksumFileError::Malformed)
                ),
                "{malformed}"
            );
        }
    }

    #[test]
    fn index_round_trips_and_refuses_unknown_fields() {
        let index = PackageIndex {
            schema_version: SCHEMA_VERSION,
            name: "demo".into(),
            version: "1.0.0".into(),
            arch: "amd64".into(),
            inputs_digest: Sha256Digest::of(b"inputs"),
            files: vec![FileRecord {
                path: "install.sh".into(),
                size: 3,
                sha256: Sha256Digest::of(b"abc"),
                executable: true,
            }],
            images: vec![],
            host_packages: BTreeMap::new(),
        };
        let bytes = index.to_bytes();
        assert_eq!(PackageIndex::from_bytes(&bytes).unwrap(), index);
        let tampered =
            String::from_utf8(bytes)
                .unwrap()
                .replacen("\"name\"", "\"extra\": 1, \"name\"", 1);
        assert!(PackageIndex::from_bytes(tampered.as_bytes()).is_err());
    }
}
