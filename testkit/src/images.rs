//! Images made by the tests: layers as tar.gz bytes, assembled into an OCI layout and pushed
//! with skopeo. The busybox layer (from Debian's busybox-static) lets containers run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use berth_formats::Sha256Digest;
use berth_formats::oci::{self, Descriptor, ImageIndex, ImageManifest, Platform};

use crate::{Registry, require, run};

/// A layer: its compressed bytes and the digest of its uncompressed tar (the diff ID).
#[derive(Clone)]
pub struct Layer {
    pub gz: Vec<u8>,
    pub diff_id: Sha256Digest,
}

pub enum Entry<'a> {
    File(&'a str, &'a [u8], u32),
    Symlink(&'a str, &'a str),
}

pub fn layer(entries: &[Entry]) -> Layer {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        match entry {
            Entry::File(path, data, mode) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_size(data.len() as u64);
                builder.append_data(&mut header, path, *data).unwrap();
            }
            Entry::Symlink(path, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                builder.append_link(&mut header, path, target).unwrap();
            }
        }
    }
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    Layer {
        gz: gz.finish().unwrap(),
        diff_id: Sha256Digest::of(&tar),
    }
}

/// `/bin/busybox` and `/bin/sh`: enough to run commands in a container.
pub fn busybox_layer() -> Layer {
    static LAYER: OnceLock<Layer> = OnceLock::new();
    LAYER
        .get_or_init(|| {
            require("busybox", "busybox-static");
            let busybox = fs_err::read("/bin/busybox").unwrap();
            layer(&[
                Entry::File("bin/busybox", &busybox, 0o755),
                Entry::Symlink("bin/sh", "busybox"),
            ])
        })
        .clone()
}

/// A layer holding Debian's Distribution registry (`docker-registry`, 2.8.2 on Debian 12) as
/// `/bin/registry`, where kURL's registry add-on runs it, with the C library it links.
pub fn registry_layer() -> Layer {
    static LAYER: OnceLock<Layer> = OnceLock::new();
    LAYER
        .get_or_init(|| {
            require("docker-registry", "docker-registry");
            let read = |path: &str| fs_err::read(fs_err::canonicalize(path).unwrap()).unwrap();
            let registry = read("/usr/bin/docker-registry");
            let libc = read("/lib/x86_64-linux-gnu/libc.so.6");
            let loader = read("/lib64/ld-linux-x86-64.so.2");
            layer(&[
                Entry::File("bin/registry", &registry, 0o755),
                Entry::File("lib/x86_64-linux-gnu/libc.so.6", &libc, 0o755),
                Entry::File("lib64/ld-linux-x86-64.so.2", &loader, 0o755),
            ])
        })
        .clone()
}

/// A layer holding one file of `size` bytes that do not compress (derived from `seed`).
pub fn unique_layer(path: &str, seed: &str, size: usize) -> Layer {
    let mut data = Vec::with_capacity(size);
    let mut block = Sha256Digest::of(seed.as_bytes());
    while data.len() < size {
        block = Sha256Digest::of(block.hex().as_bytes());
        data.extend_from_slice(&hex_bytes(&block));
    }
    data.truncate(size);
    layer(&[Entry::File(path, &data, 0o644)])
}

fn hex_bytes(digest: &Sha256Digest) -> Vec<u8> {
    (0..32)
        .map(|i| u8::from_str_radix(&digest.hex()[i * 2..i * 2 + 2], 16).unwrap())
        .collect()
}

/// One platform's image in a layout.
pub struct PlatformImage<'a> {
    pub arch: &'a str,
    pub layers: Vec<Layer>,
}

fn write_blob(layout: &Path, bytes: &[u8]) -> Descriptor {
    let digest = Sha256Digest::of(bytes);
    let dir = layout.join("blobs/sha256");
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(dir.join(digest.hex()), bytes).unwrap();
    Descriptor {
        media_type: String::new(),
        digest,
        size: bytes.len() as u64,
        platform: None,
        annotations: BTreeMap::new(),
    }
}

/// Tars the contents of `folder` into `archive` (as `ctr images import` and an `image … x.tar`
/// Manifest line take an OCI layout), the same content giving the same bytes: an add-on's
/// inputs digest counts the archive, so two dists built from one image agree.
pub fn tar_folder(folder: &Path, archive: &Path) {
    run(Command::new("tar")
        .args([
            "--sort=name",
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
        ])
        .arg("-C")
        .arg(folder)
        .arg("-cf")
        .arg(archive)
        .arg("."));
}

/// Writes an oci-archive at `archive`: the layout `write_layout` would write, tarred.
pub fn write_oci_archive(
    archive: &Path,
    tag: &str,
    platforms: &[PlatformImage],
) -> Vec<Sha256Digest> {
    let layout = tempfile::tempdir().unwrap();
    let digests = write_layout(layout.path(), tag, platforms);
    tar_folder(layout.path(), archive);
    digests
}

/// Writes an OCI layout at `layout` whose `tag` names one image (one platform) or an index
/// (several). Returns the manifest digest of each platform, in order.
pub fn write_layout(layout: &Path, tag: &str, platforms: &[PlatformImage]) -> Vec<Sha256Digest> {
    fs_err::create_dir_all(layout).unwrap();
    fs_err::write(layout.join("oci-layout"), oci::LAYOUT_CONTENT).unwrap();
    let mut manifests = Vec::new();
    for platform in platforms {
        let config = serde_json::json!({
            "architecture": platform.arch,
            "os": "linux",
            "config": { "Cmd": ["/bin/sh"] },
            "rootfs": {
                "type": "layers",
                "diff_ids": platform.layers.iter().map(|l| l.diff_id.to_string()).collect::<Vec<_>>(),
            },
        });
        let mut config_descriptor = write_blob(layout, &serde_json::to_vec(&config).unwrap());
        config_descriptor.media_type = oci::OCI_CONFIG_MEDIA_TYPE.into();
        let layers = platform
            .layers
            .iter()
            .map(|layer| Descriptor {
                media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
                ..write_blob(layout, &layer.gz)
            })
            .collect();
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(oci::OCI_MANIFEST_MEDIA_TYPE.into()),
            config: config_descriptor,
            layers,
        };
        let mut descriptor = write_blob(layout, &serde_json::to_vec(&manifest).unwrap());
        descriptor.media_type = oci::OCI_MANIFEST_MEDIA_TYPE.into();
        descriptor.platform = Some(Platform {
            architecture: platform.arch.into(),
            os: "linux".into(),
            variant: None,
        });
        manifests.push(descriptor);
    }
    let digests = manifests.iter().map(|m| m.digest).collect();
    let mut top = if manifests.len() == 1 {
        manifests.pop().unwrap()
    } else {
        let index = ImageIndex {
            schema_version: 2,
            media_type: Some(oci::OCI_INDEX_MEDIA_TYPE.into()),
            manifests,
        };
        Descriptor {
            media_type: oci::OCI_INDEX_MEDIA_TYPE.into(),
            ..write_blob(layout, &serde_json::to_vec(&index).unwrap())
        }
    };
    top.platform = None;
    top.annotations
        .insert(oci::REF_NAME_ANNOTATION.into(), tag.into());
    let outer = ImageIndex {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX_MEDIA_TYPE.into()),
        manifests: vec![top],
    };
    fs_err::write(
        layout.join("index.json"),
        serde_json::to_vec(&outer).unwrap(),
    )
    .unwrap();
    digests
}

/// Pushes the image `tag` of `layout` to `registry` as `repository:tag`, unchanged.
pub fn push(layout: &Path, tag: &str, registry: &Registry, repository: &str) {
    let skopeo = require("skopeo", "skopeo");
    let mut command = Command::new(skopeo);
    command.args([
        "--insecure-policy",
        "copy",
        "--all",
        "--quiet",
        "--preserve-digests",
        "--dest-tls-verify=false",
    ]);
    if let Some(credentials) = &registry.credentials {
        command.args(["--dest-creds", credentials]);
    }
    command
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("docker://{}/{repository}:{tag}", registry.address));
    run(&mut command);
}

/// Writes a one-platform image and pushes it; returns its manifest digest.
pub fn push_image(
    registry: &Registry,
    repository: &str,
    tag: &str,
    layers: Vec<Layer>,
) -> Sha256Digest {
    let dir = tempfile::tempdir().unwrap();
    let digests = write_layout(
        dir.path(),
        tag,
        &[PlatformImage {
            arch: "amd64",
            layers,
        }],
    );
    push(dir.path(), tag, registry, repository);
    digests[0]
}
