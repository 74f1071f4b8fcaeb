//! A package's software bill of materials, in CycloneDX 1.5 JSON: the add-on (the BOM's
//! subject), the add-on's own files, each asset (its URL from the Manifest, its sha256), each
//! host package of each distro (name, version, architecture, package URL, sha256), and each
//! image (by manifest digest) with the OS packages its layers' package databases list — dpkg's
//! `status` (and distroless `status.d/`), apk's `installed` (with its licence).
//!
//! CycloneDX rather than SPDX: a container holds its OS packages as nested components, every
//! component carries a package URL, and its schema is checked by the format's own tools. The
//! BOM is made from the package alone, so it is as reproducible as the package: no timestamp,
//! and a serial number derived from the package's digest.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::Context as _;
use berth_formats::Sha256Digest;
use berth_formats::manifest::{AssetSource, Directive, Manifest};
use berth_formats::package_index::{PACKAGE_INDEX_FILE, PackageIndex, package_root};
use serde_json::{Value, json};

/// The suffix of a package's BOM beside it.
pub const SBOM_SUFFIX: &str = ".cdx.json";
/// The most bytes of a package database read from a layer.
const MAX_DATABASE_BYTES: u64 = 64 << 20;

/// What a package's bills of materials and provenance are made from, read in one pass over
/// the package: its digest, index, Manifest, its images' manifests, and the package databases
/// of each layer.
pub struct Scanned {
    pub digest: Sha256Digest,
    pub index: PackageIndex,
    manifest: Option<String>,
    /// Blobs small enough to be image manifests and configs, by hex digest.
    small_blobs: BTreeMap<String, Vec<u8>>,
    /// Each larger blob's (a layer's) package databases, by hex digest.
    layers: BTreeMap<String, Databases>,
}

/// The package databases one layer holds.
#[derive(Default, Clone)]
struct Databases {
    dpkg: Option<Vec<u8>>,
    dpkg_parts: BTreeMap<String, Vec<u8>>,
    apk: Option<Vec<u8>>,
}

/// Blobs up to this size are kept whole (image manifests and configs among them).
const SMALL_BLOB: u64 = 4 << 20;

/// Reads the package at `path` once, streaming: nothing is written to disk. `digest` is the
/// package's, where the caller knows it (a build just wrote it).
pub fn scan_package(path: &Path, digest: Option<Sha256Digest>) -> anyhow::Result<Scanned> {
    let file = std::io::BufReader::with_capacity(1 << 20, fs_err::File::open(path)?);
    let mut hashing = berth_formats::digest::HashingReader::new(file);
    let mut index: Option<PackageIndex> = None;
    let mut manifest = None;
    let mut small_blobs = BTreeMap::new();
    let mut layers = BTreeMap::new();
    {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&mut hashing));
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
                entry.read_to_end(&mut bytes)?;
                index = Some(
                    PackageIndex::from_bytes(&bytes)
                        .map_err(|error| anyhow::anyhow!("{}: {name}: {error}", path.display()))?,
                );
                continue;
            }
            let Some(known) = &index else {
                continue;
            };
            let root = format!("{}/", package_root(&known.name, &known.version));
            let Some(relative) = name.strip_prefix(&root) else {
                continue;
            };
            if relative == "Manifest" {
                let mut text = String::new();
                (&mut entry).take(SMALL_BLOB).read_to_string(&mut text)?;
                manifest = Some(text);
            } else if let Some(hex) = relative.strip_prefix("images/blobs/sha256/") {
                let hex = hex.to_string();
                if entry.size() <= SMALL_BLOB {
                    let mut bytes = Vec::new();
                    entry.read_to_end(&mut bytes)?;
                    small_blobs.insert(hex, bytes);
                } else {
                    // A large blob is a layer: its databases are read as it streams by.
                    layers.insert(hex, scan_layer(&mut entry));
                }
            }
        }
    }
    // The rest of the stream (padding) counts toward the digest too.
    std::io::copy(&mut hashing, &mut std::io::sink())?;
    let (read_digest, _) = hashing.finish()?;
    let index = index.with_context(|| format!("{} has no {PACKAGE_INDEX_FILE}", path.display()))?;
    Ok(Scanned {
        digest: digest.unwrap_or(read_digest),
        index,
        manifest,
        small_blobs,
        layers,
    })
}

/// The package databases in a layer (gzip, zstd or plain tar); none where it is no tar.
fn scan_layer(reader: impl Read) -> Databases {
    let mut reader = std::io::BufReader::new(reader);
    let magic = std::io::BufRead::fill_buf(&mut reader)
        .map(|bytes| bytes.get(..4).map(<[u8]>::to_vec).unwrap_or_default())
        .unwrap_or_default();
    let decoded: Box<dyn Read + '_> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(reader))
    } else if magic == [0x28, 0xb5, 0x2f, 0xfd] {
        match ruzstd::decoding::StreamingDecoder::new(reader) {
            Ok(decoder) => Box::new(decoder),
            Err(_) => return Databases::default(),
        }
    } else {
        Box::new(reader)
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
        let wanted = path == "var/lib/dpkg/status"
            || path.starts_with("var/lib/dpkg/status.d/")
            || path == "lib/apk/db/installed";
        if !wanted {
            continue;
        }
        let mut bytes = Vec::new();
        if (&mut entry)
            .take(MAX_DATABASE_BYTES)
            .read_to_end(&mut bytes)
            .is_err()
        {
            continue;
        }
        match path.as_str() {
            "var/lib/dpkg/status" => found.dpkg = Some(bytes),
            "lib/apk/db/installed" => found.apk = Some(bytes),
            part => {
                found.dpkg_parts.insert(part.to_string(), bytes);
            }
        }
    }
    found
}

impl Scanned {
    /// The assets' URLs, by file, from the Manifest the package carries.
    pub fn asset_urls(&self) -> BTreeMap<String, String> {
        let mut urls = BTreeMap::new();
        if let Some(text) = &self.manifest
            && let Ok(manifest) = Manifest::parse(Path::new("Manifest"), text)
        {
            for entry in manifest.entries {
                if let Directive::Asset(asset) = entry.directive
                    && let AssetSource::Url(url) = asset.source
                {
                    urls.insert(asset.file, url.to_string());
                }
            }
        }
        urls
    }

    /// The OS packages an image's layers' databases list, the last layer's database winning.
    fn os_packages(&self, manifest: &Sha256Digest) -> Vec<Value> {
        let Some(bytes) = self.small_blobs.get(&manifest.hex()) else {
            return Vec::new();
        };
        let Ok(manifest) = serde_json::from_slice::<Value>(bytes) else {
            return Vec::new();
        };
        let mut merged = Databases::default();
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            let Some(hex) = layer["digest"]
                .as_str()
                .and_then(|digest| digest.strip_prefix("sha256:"))
            else {
                continue;
            };
            let databases = match (self.layers.get(hex), self.small_blobs.get(hex)) {
                (Some(databases), _) => databases.clone(),
                (None, Some(bytes)) => scan_layer(bytes.as_slice()),
                (None, None) => continue,
            };
            if databases.dpkg.is_some() {
                merged.dpkg = databases.dpkg;
            }
            if databases.apk.is_some() {
                merged.apk = databases.apk;
            }
            merged.dpkg_parts.extend(databases.dpkg_parts);
        }
        let mut text = merged
            .dpkg
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        for bytes in merged.dpkg_parts.values() {
            text.push_str("\n\n");
            text.push_str(&String::from_utf8_lossy(bytes));
        }
        let mut packages = dpkg_packages(&text);
        if let Some(bytes) = merged.apk {
            packages.extend(apk_packages(&String::from_utf8_lossy(&bytes)));
        }
        packages
    }
}

/// The BOM of the package at `path`.
pub fn package_sbom(path: &Path) -> anyhow::Result<Value> {
    Ok(bom(&scan_package(path, None)?))
}

/// The BOM of a package already scanned.
pub fn bom(scanned: &Scanned) -> Value {
    let (index, digest) = (&scanned.index, &scanned.digest);
    let hashes = |hex: &str| json!([{"alg": "SHA-256", "content": hex}]);
    // Assets' URLs, from the Manifest the package carries.
    let urls = scanned.asset_urls();
    // Host package files, by name, with their distro.
    let mut host: BTreeMap<&str, &str> = BTreeMap::new();
    for (distro, files) in &index.host_packages {
        for file in files {
            host.insert(file.as_str(), distro.as_str());
        }
    }
    let mut components = Vec::new();
    for file in &index.files {
        if file.path.starts_with("images/") {
            continue;
        }
        let name = file.path.rsplit('/').next().unwrap_or(&file.path);
        let sha = file.sha256.hex();
        if let Some(distro) = host.get(name) {
            components.push(host_package(name, distro, &sha));
        } else if let Some(asset) = file.path.strip_prefix("assets/") {
            let mut component = json!({
                "type": "file",
                "bom-ref": format!("asset:{asset}"),
                "name": asset,
                "hashes": hashes(&sha),
            });
            if let Some(url) = urls.get(asset) {
                component["externalReferences"] = json!([{"type": "distribution", "url": url}]);
            }
            components.push(component);
        } else {
            components.push(json!({
                "type": "file",
                "bom-ref": format!("file:{}", file.path),
                "name": file.path,
                "hashes": hashes(&sha),
            }));
        }
    }
    for image in &index.images {
        let packages = scanned.os_packages(&image.manifest_digest);
        let repository = image
            .reference
            .split(['@'])
            .next()
            .unwrap_or(&image.reference)
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'))
            .map_or(image.reference.as_str(), |(repository, _)| repository)
            .to_string();
        let last = repository.rsplit('/').next().unwrap_or(&repository);
        components.push(json!({
            "type": "container",
            "bom-ref": format!("image:{}", image.name),
            "name": image.reference,
            "version": image.manifest_digest.to_string(),
            "purl": format!(
                "pkg:oci/{last}@{}?repository_url={}",
                percent(&image.manifest_digest.to_string()),
                percent(&repository)
            ),
            "components": packages,
        }));
    }
    let bytes = hex_bytes(&digest.hex());
    json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": format!("urn:uuid:{}", uuid_from(&bytes)),
        "version": 1,
        "metadata": {
            "tools": {"components": [{
                "type": "application",
                "name": "berth-build",
                "version": env!("CARGO_PKG_VERSION"),
            }]},
            "component": {
                "type": "application",
                "bom-ref": "addon",
                "name": index.name,
                "version": index.version,
                "hashes": hashes(&digest.hex()),
            },
        },
        "components": components,
    })
}

/// A host package's component from its file name (`name_version_arch.deb`,
/// `name-version-release.arch.rpm`).
fn host_package(file: &str, distro: &str, sha: &str) -> Value {
    let (kind, name, version, arch) = if let Some(stem) = file.strip_suffix(".deb") {
        let mut parts = stem.splitn(3, '_');
        let name = parts.next().unwrap_or(stem);
        let version = parts.next().unwrap_or("").replace("%3a", ":");
        (
            "deb",
            name.to_string(),
            version,
            parts.next().unwrap_or("").to_string(),
        )
    } else if let Some(stem) = file.strip_suffix(".rpm") {
        let (rest, arch) = stem.rsplit_once('.').unwrap_or((stem, ""));
        let (rest, release) = rest.rsplit_once('-').unwrap_or((rest, ""));
        let (name, version) = rest.rsplit_once('-').unwrap_or((rest, ""));
        (
            "rpm",
            name.to_string(),
            format!("{version}-{release}"),
            arch.to_string(),
        )
    } else {
        ("generic", file.to_string(), String::new(), String::new())
    };
    let namespace = distro.split('-').next().unwrap_or(distro);
    json!({
        "type": "library",
        "bom-ref": format!("host:{distro}:{file}"),
        "name": name,
        "version": version,
        "purl": format!(
            "pkg:{kind}/{namespace}/{name}@{}?arch={arch}&distro={distro}",
            percent(&version)
        ),
        "hashes": [{"alg": "SHA-256", "content": sha}],
        "properties": [{"name": "berth:distro", "value": distro}],
    })
}

/// A field of a package database's stanza (`Package: x` in dpkg's, `P:x` in apk's).
fn stanza_field<'a>(stanza: &'a str, name: &str) -> &'a str {
    stanza
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map_or("", str::trim)
}

/// The installed packages of a dpkg `status` text.
pub fn dpkg_packages(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for paragraph in text.split("\n\n") {
        let field = |name: &str| stanza_field(paragraph, name);
        let (name, version) = (field("Package"), field("Version"));
        let status = field("Status");
        if name.is_empty()
            || version.is_empty()
            || (!status.is_empty() && !status.ends_with(" installed"))
        {
            continue;
        }
        let arch = field("Architecture");
        let mut component = json!({
            "type": "library",
            "bom-ref": format!("deb:{name}@{version}:{arch}"),
            "name": name,
            "version": version,
            "purl": format!("pkg:deb/debian/{name}@{}?arch={arch}", percent(version)),
        });
        let source = field("Source");
        if !source.is_empty() {
            component["properties"] = json!([{"name": "berth:source", "value": source}]);
        }
        out.push(component);
    }
    out
}

/// The packages of an apk `installed` database.
pub fn apk_packages(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for paragraph in text.split("\n\n") {
        let field = |name: &str| stanza_field(paragraph, name);
        let (name, version, arch) = (field("P"), field("V"), field("A"));
        if name.is_empty() || version.is_empty() {
            continue;
        }
        let mut component = json!({
            "type": "library",
            "bom-ref": format!("apk:{name}@{version}:{arch}"),
            "name": name,
            "version": version,
            "purl": format!("pkg:apk/alpine/{name}@{}?arch={arch}", percent(version)),
        });
        let licence = field("L");
        if !licence.is_empty() {
            component["licenses"] = json!([{"expression": licence}]);
        }
        out.push(component);
    }
    out
}

/// Percent-encoding of a package URL's version or qualifier value.
fn percent(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .filter_map(|at| u8::from_str_radix(&hex[at * 2..at * 2 + 2], 16).ok())
        .collect()
}

/// A version-5-shaped UUID from a digest, so a package's BOM has one serial number.
fn uuid_from(bytes: &[u8]) -> String {
    let mut id = [0u8; 16];
    id.copy_from_slice(&bytes[..16]);
    id[6] = (id[6] & 0x0f) | 0x50;
    id[8] = (id[8] & 0x3f) | 0x80;
    let hex = hex::encode(id);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn databases_and_file_names_read_as_their_tools_read_them() {
        let dpkg = "Package: base-files\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.4+deb12u5\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n\nPackage: libc6\nStatus: install ok installed\nArchitecture: amd64\nSource: glibc\nVersion: 2.36-9+deb12u4\n";
        let packages = dpkg_packages(dpkg);
        assert_eq!(packages.len(), 2);
        assert_eq!(
            packages[1]["purl"],
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64"
        );
        let apk = "C:Q1x\nP:musl\nV:1.2.4-r2\nA:x86_64\nL:MIT\n\nP:busybox\nV:1.36.1-r5\nA:x86_64\nL:GPL-2.0-only\n";
        let packages = apk_packages(apk);
        assert_eq!(packages[0]["licenses"][0]["expression"], "MIT");
        let deb = host_package("curl_7.88.1-10%3adeb12u5_amd64.deb", "debian-12", "ab");
        assert_eq!(
            (deb["name"].as_str(), deb["version"].as_str()),
            (Some("curl"), Some("7.88.1-10:deb12u5"))
        );
        let rpm = host_package("curl-7.76.1-26.el9.x86_64.rpm", "rhel-9", "ab");
        assert_eq!(
            (rpm["name"].as_str(), rpm["version"].as_str()),
            (Some("curl"), Some("7.76.1-26.el9"))
        );
        let uuid = uuid_from(&[0xff; 32]);
        assert!(uuid.chars().nth(14) == Some('5'), "{uuid}");
    }
}
