//! A package's software bill of materials, in CycloneDX 1.5 JSON: the add-on (the BOM's
//! subject), the add-on's own files, each asset (its URL from the Manifest, its sha256), each
//! host package of each distro (name, version, architecture, package URL, sha256, source
//! package, licences), and each image (by manifest digest) with the OS packages its layers'
//! package databases list (dpkg, apk, rpm).
//!
//! CycloneDX rather than SPDX: a container holds its OS packages as nested components, every
//! component carries a package URL, and its schema is checked by the format's own tools. The
//! BOM is made from the package's own files, so it is as reproducible as the package: no
//! timestamp, and a serial number derived from the package's inputs digest. The build puts it
//! inside the package (`sbom.cdx.json`, describing every other file) and beside it
//! (`<package>.cdx.json`, the same BOM with the package's own digest added).

mod databases;
mod host;
mod scan;

pub use host::copyright_licences;
pub use scan::{Scanned, Scanner, scan_package};

use std::collections::BTreeMap;
use std::path::Path;

use berth_formats::Sha256Digest;
use berth_formats::manifest::{AssetSource, Manifest};
use berth_formats::package_index::PackageIndex;
use serde_json::{Value, json};

use host::HostFacts;

use berth_formats::release::BOM_FILE;

/// What a build learned of the package it wrote: its BOM (without the package's own digest,
/// which the copy inside cannot hold) and what its provenance statement is made from.
#[derive(Clone)]
pub struct Described {
    pub bom: Value,
    pub scanned: Scanned,
}

impl std::fmt::Debug for Described {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Described")
    }
}

impl Scanned {
    /// The assets' URLs, by file, from the Manifest the package carries.
    pub fn asset_urls(&self) -> BTreeMap<String, String> {
        let mut urls = BTreeMap::new();
        if let Some(text) = &self.manifest
            && let Ok(manifest) = Manifest::parse(Path::new("Manifest"), text)
        {
            for (_, asset) in manifest.directives().assets {
                if let AssetSource::Url(url) = &asset.source {
                    urls.insert(asset.file.clone(), url.to_string());
                }
            }
        }
        urls
    }

    /// The OS packages an image's layers' databases list (the last layer's file winning), and
    /// notes on what could not be read.
    fn os_packages(&self, manifest: &Sha256Digest) -> (Vec<Value>, Vec<String>) {
        let Some(bytes) = self.small_blobs.get(&manifest.hex()) else {
            return Default::default();
        };
        let Ok(manifest) = serde_json::from_slice::<Value>(bytes) else {
            return Default::default();
        };
        let mut merged: BTreeMap<String, &Vec<u8>> = BTreeMap::new();
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            let Some(hex) = layer["digest"]
                .as_str()
                .and_then(|digest| digest.strip_prefix("sha256:"))
            else {
                continue;
            };
            for (path, bytes) in self
                .layers
                .get(hex)
                .into_iter()
                .flat_map(|found| &found.files)
            {
                merged.insert(path.clone(), bytes);
            }
        }
        databases::os_packages(&merged)
    }
}

/// The BOM of the package at `path`: the one it carries with its digest added, or, for a
/// package made before packages carried one, one made by reading it.
pub fn package_sbom(path: &Path) -> anyhow::Result<Value> {
    described_bom(&scan_package(path, None)?)
}

/// The BOM of a package already read whole: the one it carries with its digest added, or one
/// made from what was read.
pub fn described_bom(scanned: &Scanned) -> anyhow::Result<Value> {
    match (&scanned.carried, &scanned.digest) {
        (Some(bytes), Some(digest)) => {
            let mut bom: Value = serde_json::from_slice(bytes)?;
            with_package_digest(&mut bom, digest);
            Ok(bom)
        }
        _ => Ok(bom(scanned)),
    }
}

/// Adds the package's own digest to a BOM made before the package was written.
pub fn with_package_digest(bom: &mut Value, digest: &Sha256Digest) {
    bom["metadata"]["component"]["hashes"] = json!([{"alg": "SHA-256", "content": digest.hex()}]);
}

/// The BOM of a package's scanned files (with the package's digest where it is known).
pub fn bom(scanned: &Scanned) -> Value {
    let index = &scanned.index;
    let hashes = |hex: &str| json!([{"alg": "SHA-256", "content": hex}]);
    let urls = scanned.asset_urls();
    // A host package file is `<distro>/archives/<file>`, a file the index lists for that distro
    // (the same file name may be in several distros).
    fn host_distro<'a>(index: &PackageIndex, path: &'a str) -> Option<&'a str> {
        let (distro, file) = path.split_once("/archives/")?;
        index
            .host_packages
            .get(distro)?
            .iter()
            .any(|listed| listed == file)
            .then_some(distro)
    }
    let mut components = Vec::new();
    for file in &index.files {
        if file.path.starts_with("images/") || file.path == BOM_FILE {
            continue;
        }
        let name = file.path.rsplit('/').next().unwrap_or(&file.path);
        let sha = file.sha256.hex();
        if let Some(distro) = host_distro(index, &file.path) {
            let facts = scanned
                .host
                .get(&(distro.to_string(), name.to_string()))
                .cloned()
                .unwrap_or_default();
            components.push(host_package(name, distro, &sha, &facts));
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
        let (packages, notes) = scanned.os_packages(&image.manifest_digest);
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
        let mut component = json!({
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
        });
        if !notes.is_empty() {
            component["properties"] = notes
                .iter()
                .map(|note| json!({"name": "berth:unread", "value": note}))
                .collect();
        }
        components.push(component);
    }
    let mut bom = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": format!("urn:uuid:{}", uuid_from(&hex_bytes(&index.inputs_digest.hex()))),
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
            },
        },
        "components": components,
    });
    if let Some(digest) = &scanned.digest {
        with_package_digest(&mut bom, digest);
    }
    bom
}

/// A host package's component from its file name (`name_version_arch.deb`,
/// `name-version-release.arch.rpm`) and what it says of itself.
fn host_package(file: &str, distro: &str, sha: &str, facts: &HostFacts) -> Value {
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
    let mut properties = vec![json!({"name": "berth:distro", "value": distro})];
    if let Some(source) = &facts.source {
        properties.push(json!({"name": "berth:source", "value": source}));
    }
    let mut component = json!({
        "type": "library",
        "bom-ref": format!("host:{distro}:{file}"),
        "name": name,
        "version": version,
        "purl": format!(
            "pkg:{kind}/{namespace}/{name}@{}?arch={arch}&distro={distro}",
            percent(&version)
        ),
        "hashes": [{"alg": "SHA-256", "content": sha}],
        "properties": properties,
    });
    if !facts.licences.is_empty() {
        component["licenses"] = databases::licences(&facts.licences);
    }
    component
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
    fn host_packages_are_read_from_their_file_names() {
        let facts = HostFacts {
            source: Some("curl".into()),
            licences: vec!["curl".into()],
        };
        let deb = host_package(
            "curl_7.88.1-10%3adeb12u5_amd64.deb",
            "debian-12",
            "ab",
            &facts,
        );
        assert_eq!(
            (deb["name"].as_str(), deb["version"].as_str()),
            (Some("curl"), Some("7.88.1-10:deb12u5"))
        );
        assert_eq!(deb["licenses"][0]["license"]["name"], "curl");
        let rpm = host_package(
            "curl-7.76.1-26.el9.x86_64.rpm",
            "rhel-9",
            "ab",
            &HostFacts::default(),
        );
        assert_eq!(
            (rpm["name"].as_str(), rpm["version"].as_str()),
            (Some("curl"), Some("7.76.1-26.el9"))
        );
        assert!(rpm.get("licenses").is_none());
        let uuid = uuid_from(&[0xff; 32]);
        assert!(uuid.chars().nth(14) == Some('5'), "{uuid}");
    }
}
