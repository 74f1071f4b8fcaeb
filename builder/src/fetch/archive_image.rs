//! Image archives on disk (`image <name> path/to/image.tar`): docker-archive (`docker save`)
//! or oci-archive (`skopeo`, `buildah push`). Every file is copied into the blob cache and
//! checked against its name where the format names files by digest; a docker-archive gets an
//! OCI manifest written for it, with its layers kept byte for byte.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use berth_formats::Sha256Digest;
use berth_formats::oci::{self, Descriptor, ImageIndex, ImageManifest};
use oci_spec::distribution::Reference;

use crate::fetch::cache::BlobCache;

/// Why an image archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveImageError {
    #[error("failed to read the archive")]
    Io(#[from] std::io::Error),
    #[error("it is neither a docker-archive (manifest.json) nor an oci-archive (index.json)")]
    UnknownFormat,
    #[error("its {file} is not valid: {reason}")]
    BadJson { file: &'static str, reason: String },
    #[error("it holds {count} images ({names}); an `image` line takes an archive of one image")]
    SeveralImages { count: usize, names: String },
    #[error("it holds no image for linux/{arch}")]
    NoPlatform { arch: String },
    #[error(
        "it names no image reference; save it with a tag (`docker save app:1.0`, or `oci-archive:app.tar:app:1.0`)"
    )]
    NoReference,
    #[error("its reference `{reference}` is not valid: {reason}")]
    BadReference { reference: String, reason: String },
    #[error("it lacks the blob `{path}` that its manifest names")]
    MissingBlob { path: String },
    #[error("its blob {path} does not match its digest (content is {actual})")]
    BlobMismatch { path: String, actual: Sha256Digest },
}

/// An image taken from an archive; its manifest and blobs are in the cache.
#[derive(Debug, Clone)]
pub struct ImportedImage {
    pub reference: String,
    pub manifest: Descriptor,
    pub blobs: Vec<Descriptor>,
}

/// One file read out of the archive.
#[derive(Debug, Clone, Copy)]
struct Stored {
    digest: Sha256Digest,
    size: u64,
}

/// Files of the archive: small JSON kept in memory, everything stored in the cache by path.
struct Contents {
    files: HashMap<String, Stored>,
    json: HashMap<String, Vec<u8>>,
}

pub fn import(
    path: &Path,
    cache: &BlobCache,
    arch: &str,
) -> Result<ImportedImage, ArchiveImageError> {
    let contents = read_contents(path, cache)?;
    if contents.json.contains_key("index.json") {
        import_oci(&contents, cache, arch)
    } else if contents.json.contains_key("manifest.json") {
        import_docker(&contents, cache)
    } else {
        Err(ArchiveImageError::UnknownFormat)
    }
}

fn read_contents(path: &Path, cache: &BlobCache) -> Result<Contents, ArchiveImageError> {
    let mut archive = tar::Archive::new(fs_err::File::open(path)?);
    let mut files = HashMap::new();
    let mut json = HashMap::new();
    let mut links = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = normalize(&String::from_utf8_lossy(&entry.path_bytes()));
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if matches!(name.as_str(), "index.json" | "manifest.json" | "oci-layout") {
                    let mut bytes = Vec::new();
                    entry.read_to_end(&mut bytes)?;
                    json.insert(name, bytes);
                    continue;
                }
                let (digest, size) = cache.insert_reader(&mut entry)?;
                if let Some(named) = name
                    .strip_prefix(oci::BLOBS_DIR)
                    .and_then(|rest| rest.strip_prefix('/'))
                    .and_then(|hex| Sha256Digest::from_hex(hex).ok())
                    && named != digest
                {
                    return Err(ArchiveImageError::BlobMismatch {
                        path: name,
                        actual: digest,
                    });
                }
                files.insert(name, Stored { digest, size });
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                // `docker save` links identical layers to one another.
                if let Some(target) = entry.link_name()? {
                    let target = target.to_string_lossy().into_owned();
                    let resolved = if entry.header().entry_type() == tar::EntryType::Symlink {
                        let parent = Path::new(&name).parent().unwrap_or(Path::new(""));
                        normalize(&parent.join(&target).to_string_lossy())
                    } else {
                        normalize(&target)
                    };
                    links.push((name, resolved));
                }
            }
            _ => {}
        }
    }
    for (name, target) in links {
        if let Some(stored) = files.get(&target).copied() {
            files.insert(name, stored);
        }
    }
    Ok(Contents { files, json })
}

/// Folds `.` and `..` in an archive path.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    file: &'static str,
) -> Result<T, ArchiveImageError> {
    serde_json::from_slice(bytes).map_err(|error| ArchiveImageError::BadJson {
        file,
        reason: error.to_string(),
    })
}

fn blob(contents: &Contents, digest: &Sha256Digest) -> Result<Stored, ArchiveImageError> {
    let path = format!("{}/{}", oci::BLOBS_DIR, digest.hex());
    contents
        .files
        .get(&path)
        .copied()
        .ok_or(ArchiveImageError::MissingBlob { path })
}

fn normalize_reference(reference: &str) -> Result<String, ArchiveImageError> {
    Reference::from_str(reference)
        .map(|parsed| parsed.whole())
        .map_err(|error| ArchiveImageError::BadReference {
            reference: reference.to_string(),
            reason: error.to_string(),
        })
}

fn import_oci(
    contents: &Contents,
    cache: &BlobCache,
    arch: &str,
) -> Result<ImportedImage, ArchiveImageError> {
    let index: ImageIndex = parse_json(&contents.json["index.json"], "index.json")?;
    if index.manifests.len() > 1 {
        let names: Vec<String> = index
            .manifests
            .iter()
            .map(|entry| image_name(entry).unwrap_or_else(|| entry.digest.to_string()))
            .collect();
        return Err(ArchiveImageError::SeveralImages {
            count: names.len(),
            names: names.join(", "),
        });
    }
    let top = index
        .manifests
        .first()
        .ok_or(ArchiveImageError::NoReference)?;
    let name = image_name(top).or_else(|| docker_repo_tag(contents));
    let mut entry = top.clone();
    if oci::is_image_index(&entry.media_type) {
        blob(contents, &entry.digest)?;
        let nested: ImageIndex = parse_json(&cache.read(&entry.digest)?, "nested index")?;
        entry =
            nested
                .platform_entry(arch)
                .cloned()
                .ok_or_else(|| ArchiveImageError::NoPlatform {
                    arch: arch.to_string(),
                })?;
    }
    let stored = blob(contents, &entry.digest)?;
    let manifest: ImageManifest = parse_json(&cache.read(&stored.digest)?, "image manifest")?;
    for descriptor in manifest.blobs() {
        blob(contents, &descriptor.digest)?;
    }
    let reference = normalize_reference(&name.ok_or(ArchiveImageError::NoReference)?)?;
    Ok(ImportedImage {
        reference,
        manifest: Descriptor {
            media_type: entry.media_type.clone(),
            digest: stored.digest,
            size: stored.size,
            platform: None,
            annotations: Default::default(),
        },
        blobs: manifest.blobs().cloned().collect(),
    })
}

/// The name an index entry carries, if it is a full reference.
fn image_name(entry: &Descriptor) -> Option<String> {
    [oci::CONTAINERD_NAME_ANNOTATION, oci::REF_NAME_ANNOTATION]
        .iter()
        .filter_map(|key| entry.annotations.get(*key))
        .find(|name| Reference::from_str(name).is_ok() && name.contains([':', '@', '/']))
        .cloned()
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerArchiveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

fn docker_repo_tag(contents: &Contents) -> Option<String> {
    let entries: Vec<DockerArchiveEntry> =
        serde_json::from_slice(contents.json.get("manifest.json")?).ok()?;
    entries.first()?.repo_tags.as_ref()?.first().cloned()
}

fn import_docker(
    contents: &Contents,
    cache: &BlobCache,
) -> Result<ImportedImage, ArchiveImageError> {
    let entries: Vec<DockerArchiveEntry> =
        parse_json(&contents.json["manifest.json"], "manifest.json")?;
    let [entry] = entries.as_slice() else {
        let names: Vec<String> = entries
            .iter()
            .map(|entry| entry.repo_tags.clone().unwrap_or_default().join(" "))
            .collect();
        return Err(ArchiveImageError::SeveralImages {
            count: entries.len(),
            names: names.join(", "),
        });
    };
    let stored = |path: &str| {
        contents
            .files
            .get(&normalize(path))
            .copied()
            .ok_or_else(|| ArchiveImageError::MissingBlob {
                path: path.to_string(),
            })
    };
    let config = stored(&entry.config)?;
    let mut layers = Vec::new();
    for layer in &entry.layers {
        let layer_blob = stored(layer)?;
        let mut magic = [0u8; 2];
        let gzipped = fs_err::File::open(cache.path(&layer_blob.digest))?
            .read_exact(&mut magic)
            .is_ok()
            && magic == [0x1f, 0x8b];
        layers.push(Descriptor {
            media_type: if gzipped {
                format!("{}+gzip", oci::OCI_LAYER_TAR_MEDIA_TYPE)
            } else {
                oci::OCI_LAYER_TAR_MEDIA_TYPE.to_string()
            },
            digest: layer_blob.digest,
            size: layer_blob.size,
            platform: None,
            annotations: Default::default(),
        });
    }
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(oci::OCI_MANIFEST_MEDIA_TYPE.to_string()),
        config: Descriptor {
            media_type: oci::OCI_CONFIG_MEDIA_TYPE.to_string(),
            digest: config.digest,
            size: config.size,
            platform: None,
            annotations: Default::default(),
        },
        layers,
    };
    let bytes = serde_json::to_vec(&manifest).expect("manifest serializes");
    let digest = cache.insert_bytes(&bytes)?;
    let name = entry
        .repo_tags
        .as_ref()
        .and_then(|tags| tags.first())
        .ok_or(ArchiveImageError::NoReference)?;
    Ok(ImportedImage {
        reference: normalize_reference(name)?,
        manifest: Descriptor {
            media_type: oci::OCI_MANIFEST_MEDIA_TYPE.to_string(),
            digest,
            size: bytes.len() as u64,
            platform: None,
            annotations: Default::default(),
        },
        blobs: manifest.blobs().cloned().collect(),
    })
}
