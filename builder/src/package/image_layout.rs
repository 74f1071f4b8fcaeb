//! The images of a package as one OCI image layout (`images/`): each blob once, and an
//! `index.json` naming every image the way containerd and OCI tools read it.

use std::collections::BTreeMap;

use berth_formats::Sha256Digest;
use berth_formats::oci::{self, Descriptor, ImageIndex};

use crate::fetch::image::PackagedImage;

/// Every blob the images need (manifests, configs, layers), each once, with its size.
pub(super) fn blobs(images: &[PackagedImage]) -> BTreeMap<Sha256Digest, u64> {
    let mut blobs = BTreeMap::new();
    for image in images {
        for blob in std::iter::once(&image.manifest).chain(&image.blobs) {
            blobs.insert(blob.digest, blob.size);
        }
    }
    blobs
}

/// The layout's `index.json`: one entry per distinct image, in Manifest order, named by the
/// two annotations containerd and OCI tools read.
pub(super) fn layout_index(images: &[PackagedImage]) -> Vec<u8> {
    let mut manifests: Vec<Descriptor> = Vec::new();
    for image in images {
        let descriptor = Descriptor {
            annotations: BTreeMap::from([
                (
                    oci::CONTAINERD_NAME_ANNOTATION.to_string(),
                    image.reference.clone(),
                ),
                (
                    oci::REF_NAME_ANNOTATION.to_string(),
                    image.reference.clone(),
                ),
            ]),
            ..image.manifest.clone()
        };
        if !manifests.contains(&descriptor) {
            manifests.push(descriptor);
        }
    }
    let index = ImageIndex {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX_MEDIA_TYPE.to_string()),
        manifests,
    };
    let mut bytes = serde_json::to_vec_pretty(&index).expect("index serializes");
    bytes.push(b'\n');
    bytes
}
