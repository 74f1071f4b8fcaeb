//! Names from the OCI image layout that builder and installer agree on.
//!
//! A package's `images/` folder is one OCI image layout holding every image of the add-on.
//! Each manifest in its `index.json` carries the image reference in two annotations, so that
//! `ctr images import` names the image correctly without any extra flag.

/// `images/` inside a package.
pub const IMAGES_DIR: &str = "images";
/// The layout marker file and its fixed content.
pub const LAYOUT_FILE: &str = "oci-layout";
pub const LAYOUT_CONTENT: &str = "{\"imageLayoutVersion\":\"1.0.0\"}";
/// The layout's entry point.
pub const INDEX_FILE: &str = "index.json";
/// Where blobs live, relative to the layout root.
pub const BLOBS_DIR: &str = "blobs/sha256";

/// The annotation OCI tools read for an image's name.
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";
/// The annotation containerd reads for an image's name on import.
pub const CONTAINERD_NAME_ANNOTATION: &str = "io.containerd.image.name";

pub const OCI_INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST_MEDIA_TYPE: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";
pub const OCI_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER_TAR_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";

/// Whether a media type names a single-platform image manifest (OCI or Docker schema 2).
pub fn is_image_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST_MEDIA_TYPE || media_type == DOCKER_MANIFEST_MEDIA_TYPE
}

/// Whether a media type names a multi-platform index (OCI index or Docker manifest list).
pub fn is_image_index(media_type: &str) -> bool {
    media_type == OCI_INDEX_MEDIA_TYPE || media_type == DOCKER_MANIFEST_LIST_MEDIA_TYPE
}

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

/// A content descriptor: what a manifest or index says about a blob it points to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: Sha256Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The platform an index entry is built for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// An OCI image index or Docker manifest list (also the layout's `index.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

impl ImageIndex {
    /// The index entry for `linux/<arch>` (`arch` may carry a variant: `arm/v7`).
    pub fn platform_entry(&self, arch: &str) -> Option<&Descriptor> {
        let (architecture, variant) = match arch.split_once('/') {
            Some((architecture, variant)) => (architecture, Some(variant)),
            None => (arch, None),
        };
        let candidates = self.manifests.iter().filter(|entry| {
            entry.platform.as_ref().is_some_and(|platform| {
                platform.os == "linux" && platform.architecture == architecture
            })
        });
        let mut fallback = None;
        for entry in candidates {
            let entry_variant = entry.platform.as_ref().and_then(|p| p.variant.as_deref());
            if variant.is_none() || entry_variant == variant {
                return Some(entry);
            }
            fallback.get_or_insert(entry);
        }
        fallback.filter(|_| variant.is_none())
    }
}

/// A single-platform image manifest (OCI or Docker schema 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

impl ImageManifest {
    /// The config and every layer: the blobs an image needs besides its manifest.
    pub fn blobs(&self) -> impl Iterator<Item = &Descriptor> {
        std::iter::once(&self.config).chain(&self.layers)
    }
}

/// Tells a manifest from an index when the registry or archive gives no media type.
pub fn sniff_media_type(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
        config: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(bytes).ok()?;
    probe.media_type.or(match (probe.manifests, probe.config) {
        (Some(_), _) => Some(OCI_INDEX_MEDIA_TYPE.to_string()),
        (None, Some(_)) => Some(OCI_MANIFEST_MEDIA_TYPE.to_string()),
        _ => None,
    })
}
