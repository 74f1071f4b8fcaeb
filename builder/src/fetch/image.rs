//! Images of an add-on: resolved to one manifest each for the target architecture, with every
//! blob verified into the cache. Blobs shared by several images are fetched once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use berth_formats::Sha256Digest;
use berth_formats::oci::{self, Descriptor, ImageIndex, ImageManifest};
use futures::{StreamExt, TryStreamExt};
use oci_spec::distribution::Reference;

use crate::fetch::archive_image::{self, ArchiveImageError};
use crate::fetch::cache::BlobCache;
use crate::fetch::registry::{RegistryClient, RegistryError};
use crate::reporter::Reporter;

/// An image the Manifest asks for, with its source resolved to a registry or a local file.
#[derive(Debug, Clone)]
pub struct ImageRequest {
    pub name: String,
    pub source: ImageOrigin,
    pub no_remote_load: bool,
}

#[derive(Debug, Clone)]
pub enum ImageOrigin {
    Registry(Reference),
    Archive(PathBuf),
}

/// An image ready to be laid out: its manifest and every blob are in the cache.
#[derive(Debug, Clone)]
pub struct PackagedImage {
    pub name: String,
    /// Full reference it is imported under.
    pub reference: String,
    pub manifest: Descriptor,
    pub blobs: Vec<Descriptor>,
    pub no_remote_load: bool,
}

impl PackagedImage {
    /// Bytes of manifest, config and layers together.
    pub fn size(&self) -> u64 {
        self.manifest.size + self.blobs.iter().map(|blob| blob.size).sum::<u64>()
    }
}

/// Why an image could not be packaged.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image `{name}` ({reference})")]
    Registry {
        name: String,
        reference: String,
        #[source]
        source: RegistryError,
    },
    #[error("image `{name}` ({reference}) has no linux/{arch} variant; it offers {available}")]
    NoPlatform {
        name: String,
        reference: String,
        arch: String,
        available: String,
    },
    #[error("image `{name}` ({reference}) has a manifest this builder cannot read: {reason}")]
    BadManifest {
        name: String,
        reference: String,
        reason: String,
    },
    #[error("image `{name}` from {path}")]
    Archive {
        name: String,
        path: PathBuf,
        #[source]
        source: ArchiveImageError,
    },
    #[error("failed to use the blob cache")]
    Cache(#[source] std::io::Error),
    #[error("{} images could not be fetched:{}", .0.len(), listed(.0))]
    Several(Vec<ImageError>),
}

/// Each error with its causes, one per line.
fn listed(errors: &[ImageError]) -> String {
    errors
        .iter()
        .map(|error| format!("\n  - {}", berth_formats::report::chain(error)))
        .collect()
}

/// What fetching images needs.
pub struct ImageFetcher<'a> {
    pub client: &'a RegistryClient,
    pub cache: &'a BlobCache,
    /// `amd64`, `arm64`, or `arm/v7` style (architecture and variant).
    pub arch: &'a str,
    /// Blob downloads in flight at once.
    pub concurrency: usize,
    pub reporter: &'a dyn Reporter,
}

impl ImageFetcher<'_> {
    /// Resolves every image, then fetches all blobs not yet cached.
    pub async fn fetch(&self, requests: &[ImageRequest]) -> Result<Vec<PackagedImage>, ImageError> {
        // Every image is resolved, so that a registry or mirror lacking several names them all.
        let results: Vec<_> = futures::stream::iter(requests)
            .map(|request| self.resolve(request))
            .buffered(self.concurrency.max(1))
            .collect()
            .await;
        let (resolved, mut failed): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        let resolved: Vec<(PackagedImage, Option<Reference>)> =
            resolved.into_iter().map(Result::unwrap).collect();
        match failed.len() {
            0 => {}
            1 => return Err(failed.remove(0).unwrap_err()),
            _ => {
                return Err(ImageError::Several(
                    failed.into_iter().map(Result::unwrap_err).collect(),
                ));
            }
        }

        // One download per distinct blob, whichever image (and repository) it is fetched for.
        let mut wanted: BTreeMap<Sha256Digest, (&Descriptor, &Reference, &str)> = BTreeMap::new();
        for (image, reference) in &resolved {
            if let Some(reference) = reference {
                for blob in &image.blobs {
                    wanted
                        .entry(blob.digest)
                        .or_insert((blob, reference, image.name.as_str()));
                }
            }
        }
        futures::stream::iter(wanted.into_values())
            .map(|(blob, reference, name)| async move {
                let label = format!("{name} {}", &blob.digest.hex()[..12]);
                let progress = self.reporter.start(&label, Some(blob.size));
                let result = self
                    .client
                    .fetch_blob(reference, blob, self.cache, progress.as_ref())
                    .await;
                progress.finish();
                result.map_err(|source| ImageError::Registry {
                    name: name.to_string(),
                    reference: reference.whole(),
                    source,
                })
            })
            .buffer_unordered(self.concurrency.max(1))
            .try_collect::<Vec<_>>()
            .await?;
        Ok(resolved.into_iter().map(|(image, _)| image).collect())
    }

    async fn resolve(
        &self,
        request: &ImageRequest,
    ) -> Result<(PackagedImage, Option<Reference>), ImageError> {
        match &request.source {
            ImageOrigin::Archive(path) => {
                let cache = self.cache.clone();
                let archive = path.clone();
                let arch = self.arch.to_string();
                let imported = tokio::task::spawn_blocking(move || {
                    archive_image::import(&archive, &cache, &arch)
                })
                .await
                .expect("archive import does not panic")
                .map_err(|source| ImageError::Archive {
                    name: request.name.clone(),
                    path: path.clone(),
                    source,
                })?;
                Ok((
                    PackagedImage {
                        name: request.name.clone(),
                        reference: imported.reference,
                        manifest: imported.manifest,
                        blobs: imported.blobs,
                        no_remote_load: request.no_remote_load,
                    },
                    None,
                ))
            }
            ImageOrigin::Registry(reference) => {
                let (manifest, parsed) = self.resolve_manifest(request, reference).await?;
                let image = PackagedImage {
                    name: request.name.clone(),
                    reference: reference.whole(),
                    manifest,
                    blobs: parsed.blobs().cloned().collect(),
                    no_remote_load: request.no_remote_load,
                };
                Ok((image, Some(reference.clone())))
            }
        }
    }

    /// The single-platform manifest for the target architecture, stored in the cache.
    async fn resolve_manifest(
        &self,
        request: &ImageRequest,
        reference: &Reference,
    ) -> Result<(Descriptor, ImageManifest), ImageError> {
        let target = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_string();
        let mut fetched = self.manifest_bytes(request, reference, &target).await?;
        if oci::is_image_index(&fetched.media_type) {
            let index: ImageIndex = serde_json::from_slice(&fetched.bytes)
                .map_err(|error| self.bad_manifest(request, reference, error.to_string()))?;
            let chosen = index.platform_entry(self.arch).ok_or_else(|| {
                let available: Vec<String> = index
                    .manifests
                    .iter()
                    .filter_map(|entry| entry.platform.as_ref())
                    .map(|p| match &p.variant {
                        Some(variant) => format!("{}/{}/{variant}", p.os, p.architecture),
                        None => format!("{}/{}", p.os, p.architecture),
                    })
                    .collect();
                ImageError::NoPlatform {
                    name: request.name.clone(),
                    reference: reference.whole(),
                    arch: self.arch.to_string(),
                    available: if available.is_empty() {
                        "no platforms".into()
                    } else {
                        available.join(", ")
                    },
                }
            })?;
            fetched = self
                .manifest_bytes(request, reference, &chosen.digest.to_string())
                .await?;
        }
        let CachedManifest {
            bytes,
            media_type,
            digest,
        } = fetched;
        if !oci::is_image_manifest(&media_type) {
            return Err(self.bad_manifest(
                request,
                reference,
                format!("media type `{media_type}` is not an image manifest"),
            ));
        }
        let parsed: ImageManifest = serde_json::from_slice(&bytes)
            .map_err(|error| self.bad_manifest(request, reference, error.to_string()))?;
        Ok((
            Descriptor {
                media_type,
                digest,
                size: bytes.len() as u64,
                platform: None,
                annotations: BTreeMap::new(),
            },
            parsed,
        ))
    }

    /// The manifest `target` names, stored in the cache; a digest already there needs no network.
    async fn manifest_bytes(
        &self,
        request: &ImageRequest,
        reference: &Reference,
        target: &str,
    ) -> Result<CachedManifest, ImageError> {
        if let Ok(digest) = target.parse::<Sha256Digest>()
            && self.cache.contains(&digest)
        {
            let bytes = self.cache.read(&digest).map_err(ImageError::Cache)?;
            if Sha256Digest::of(&bytes) == digest
                && let Some(media_type) = oci::sniff_media_type(&bytes)
            {
                return Ok(CachedManifest {
                    bytes,
                    media_type,
                    digest,
                });
            }
            self.cache.evict(&digest);
        }
        let fetched = self
            .client
            .fetch_manifest(reference, target)
            .await
            .map_err(|source| ImageError::Registry {
                name: request.name.clone(),
                reference: reference.whole(),
                source,
            })?;
        self.cache
            .insert_bytes(&fetched.bytes)
            .map_err(ImageError::Cache)?;
        Ok(CachedManifest {
            bytes: fetched.bytes,
            media_type: fetched.media_type,
            digest: fetched.digest,
        })
    }

    fn bad_manifest(
        &self,
        request: &ImageRequest,
        reference: &Reference,
        reason: String,
    ) -> ImageError {
        ImageError::BadManifest {
            name: request.name.clone(),
            reference: reference.whole(),
            reason,
        }
    }
}

/// A manifest or index held in the cache under `digest`.
struct CachedManifest {
    bytes: Vec<u8>,
    media_type: String,
    digest: Sha256Digest,
}
