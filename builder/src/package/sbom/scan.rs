//! What a bill of materials is made from, read file by file: from a package's archive as it
//! streams by (`scan_package`), or from the sources of a package being built, before it is
//! written, so the BOM can go inside it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::Context as _;
use berth_formats::Sha256Digest;
use berth_formats::compression::{Compression, decompress};
use berth_formats::package_index::{PACKAGE_INDEX_FILE, PackageIndex, package_root};

use berth_formats::release::BOM_FILE;

use super::host::{self, HostFacts};

/// The most bytes of one package database (or `os-release`) read from a layer.
const MAX_DATABASE_BYTES: u64 = 128 << 20;
/// Blobs up to this size are read whole (image manifests and configs among them).
const SMALL_BLOB: u64 = 4 << 20;
/// The most bytes of image manifests and configs kept for one package.
const MAX_KEPT_JSON: u64 = 256 << 20;

/// What a package's bills of materials and provenance are made from.
#[derive(Clone)]
pub struct Scanned {
    /// The package's digest, once it is written.
    pub digest: Option<Sha256Digest>,
    pub index: PackageIndex,
    pub(super) manifest: Option<String>,
    /// Image manifests and configs, by hex digest.
    pub(super) small_blobs: BTreeMap<String, Vec<u8>>,
    /// Each larger blob's (a layer's) package databases, by hex digest.
    pub(super) layers: BTreeMap<String, Databases>,
    /// What each host package file says of itself, by distro and file name.
    pub(super) host: BTreeMap<(String, String), HostFacts>,
    /// The bill of materials the package carries, if it does.
    pub(super) carried: Option<Vec<u8>>,
}

impl Scanned {
    /// Keeps only what a provenance statement needs (the index and the Manifest).
    pub fn lighten(&mut self) {
        self.small_blobs.clear();
        self.layers.clear();
        self.host.clear();
        self.carried = None;
    }
}

/// The package databases one layer holds, by path in the layer.
#[derive(Default, Clone)]
pub(super) struct Databases {
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Whether a layer's file is one the BOM reads: a package database or the OS's release.
fn wanted_in_layer(path: &str) -> bool {
    path == "var/lib/dpkg/status"
        || path.starts_with("var/lib/dpkg/status.d/")
        || path == "lib/apk/db/installed"
        || super::databases::is_rpm_database(path)
        || path == "etc/os-release"
        || path == "usr/lib/os-release"
}

/// Reads what a BOM needs, one file of the package at a time.
#[derive(Default)]
pub struct Scanner {
    manifest: Option<String>,
    carried: Option<Vec<u8>>,
    small_blobs: BTreeMap<String, Vec<u8>>,
    kept_bytes: u64,
    layers: BTreeMap<String, Databases>,
    host: BTreeMap<(String, String), HostFacts>,
}

impl Scanner {
    /// Whether [`Scanner::file`] reads the file at `relative` at all.
    pub fn reads(relative: &str) -> bool {
        relative == "Manifest"
            || relative == BOM_FILE
            || relative.starts_with("images/blobs/sha256/")
            || relative
                .split_once('/')
                .is_some_and(|(_, rest)| rest.starts_with("archives/"))
    }

    /// Reads the file at `relative` (its path in the package) of `size` bytes.
    pub fn file(
        &mut self,
        relative: &str,
        size: u64,
        reader: &mut dyn Read,
    ) -> std::io::Result<()> {
        if relative == "Manifest" {
            let mut text = String::new();
            reader.take(SMALL_BLOB).read_to_string(&mut text)?;
            self.manifest = Some(text);
        } else if relative == BOM_FILE {
            let mut bytes = Vec::new();
            reader.take(MAX_KEPT_JSON).read_to_end(&mut bytes)?;
            self.carried = Some(bytes);
        } else if let Some(hex) = relative.strip_prefix("images/blobs/sha256/") {
            if size <= SMALL_BLOB {
                let mut bytes = Vec::new();
                reader.take(SMALL_BLOB).read_to_end(&mut bytes)?;
                // Image manifests and configs are JSON and kept (within a bound); any other
                // blob is a layer, read now.
                if bytes.first() == Some(&b'{')
                    && self.kept_bytes + bytes.len() as u64 <= MAX_KEPT_JSON
                {
                    self.kept_bytes += bytes.len() as u64;
                    self.small_blobs.insert(hex.to_string(), bytes);
                } else {
                    self.layers
                        .insert(hex.to_string(), scan_layer(bytes.as_slice()));
                }
            } else {
                // A large blob is a layer: its databases are read as it streams by.
                self.layers.insert(hex.to_string(), scan_layer(reader));
            }
        } else if let Some((distro, file)) = relative
            .split_once('/')
            .and_then(|(distro, rest)| Some((distro, rest.strip_prefix("archives/")?)))
        {
            if file.ends_with(".deb") && !file.contains('/') {
                self.host
                    .insert((distro.into(), file.into()), host::deb_facts(reader));
            } else if file.starts_with("repodata/") && file.ends_with("primary.xml.gz") {
                for (name, facts) in host::primary_facts(reader) {
                    self.host.insert((distro.into(), name), facts);
                }
            }
        }
        Ok(())
    }

    /// What was read, for the package `index` describes (`digest` once it is written).
    pub fn finish(self, index: PackageIndex, digest: Option<Sha256Digest>) -> Scanned {
        Scanned {
            digest,
            index,
            manifest: self.manifest,
            small_blobs: self.small_blobs,
            layers: self.layers,
            host: self.host,
            carried: self.carried,
        }
    }
}

/// Reads the package at `path` once, streaming: nothing is written to disk. `digest` is the
/// package's, where the caller knows it. A package whose index lists the bill of materials it
/// carries has only that and its Manifest read: its layers and host packages are passed over.
pub fn scan_package(path: &Path, digest: Option<Sha256Digest>) -> anyhow::Result<Scanned> {
    let file = std::io::BufReader::with_capacity(1 << 20, fs_err::File::open(path)?);
    let mut hashing = berth_formats::digest::HashingReader::new(file);
    let mut index: Option<PackageIndex> = None;
    let mut carries_bom = false;
    let mut scanner = Scanner::default();
    {
        let mut archive = tar::Archive::new(
            decompress(&mut hashing)
                .with_context(|| format!("{} is not a package Berth can read", path.display()))?,
        );
        for entry in archive
            .entries()
            .with_context(|| format!("{} is not a package Berth can read", path.display()))?
        {
            let mut entry = entry?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = entry.path()?.to_string_lossy().into_owned();
            if name.ends_with(&format!("/{PACKAGE_INDEX_FILE}")) && index.is_none() {
                let mut bytes = Vec::new();
                (&mut entry).take(SMALL_BLOB).read_to_end(&mut bytes)?;
                let read = PackageIndex::from_bytes(&bytes)
                    .map_err(|error| anyhow::anyhow!("{}: {name}: {error}", path.display()))?;
                carries_bom = read.files.iter().any(|file| file.path == BOM_FILE);
                index = Some(read);
                continue;
            }
            let Some(known) = &index else {
                continue;
            };
            let root = format!("{}/", package_root(&known.name, &known.version));
            if let Some(relative) = name.strip_prefix(&root)
                && (!carries_bom || [BOM_FILE, "Manifest"].contains(&relative))
            {
                let size = entry.size();
                scanner.file(relative, size, &mut entry)?;
            }
        }
    }
    if carries_bom && scanner.carried.is_none() {
        anyhow::bail!(
            "{}: its {PACKAGE_INDEX_FILE} lists {BOM_FILE}, which the package lacks",
            path.display()
        );
    }
    // The rest of the stream (padding) counts toward the digest too.
    std::io::copy(&mut hashing, &mut std::io::sink())?;
    let (read_digest, _) = hashing.finish()?;
    let index = index.with_context(|| format!("{} has no {PACKAGE_INDEX_FILE}", path.display()))?;
    Ok(scanner.finish(index, Some(digest.unwrap_or(read_digest))))
}

/// The package databases in a layer (gzip, zstd or plain tar); none where it is no tar.
pub(super) fn scan_layer(reader: impl Read) -> Databases {
    let mut reader = std::io::BufReader::new(reader);
    let magic = std::io::BufRead::fill_buf(&mut reader)
        .map(|bytes| bytes.get(..4).map(<[u8]>::to_vec).unwrap_or_default())
        .unwrap_or_default();
    let decoded: Box<dyn Read + '_> = match Compression::sniff(&magic) {
        Some(_) => match decompress(reader) {
            Ok(decoder) => decoder,
            Err(_) => return Databases::default(),
        },
        None => Box::new(reader),
    };
    let mut found = Databases::default();
    let mut archive = tar::Archive::new(decoded);
    let Ok(entries) = archive.entries() else {
        return found;
    };
    for entry in entries {
        let Ok(mut entry) = entry else {
            break;
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let Ok(path) = entry
            .path()
            .map(|path| path.to_string_lossy().trim_start_matches("./").to_string())
        else {
            continue;
        };
        if !wanted_in_layer(&path) {
            continue;
        }
        let mut bytes = Vec::new();
        if (&mut entry)
            .take(MAX_DATABASE_BYTES)
            .read_to_end(&mut bytes)
            .is_ok()
        {
            found.files.insert(path, bytes);
        }
    }
    found
}
