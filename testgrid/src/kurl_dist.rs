//! kURL's real add-ons (`shared/fixtures/kurl-addons`, read in place) packaged by `berth-build`
//! for Debian 12, with loopback stand-ins for the upstreams no machine here reaches:
//! - a registry holds a busybox image under each reference the Manifests name
//!   (`registry.k8s.io/pause:3.6`, `docker.io/replicated/ekco:v0.28.14`, …), reached through
//!   the builder's `--registry-mirror`;
//! - a file server answers for github.com with Debian's own `runc`, through `--asset-mirror`;
//! - an apt suite stands for Debian 12's mirror, with a stand-in `collectd` package for the
//!   builder to resolve (nodes that run these add-ons have Debian's collectd already, as the
//!   spec sets kURL's `skipSystemPackageInstall`).
//!
//! The installer's tests run the dist on machines of their own; `berth-testgrid kurl-dist`
//! writes it for the grid's VMs.

use std::path::Path;
use std::process::Command;

use crate::images::{busybox_layer, push_image};
use crate::{FileServer, Registry, kurl_fixtures};

/// Every image the fixture add-ons' Manifests name: (registry, repository, tag).
pub const IMAGES: [(&str, &str, &str); 8] = [
    ("registry.k8s.io", "pause", "3.6"),
    ("registry.k8s.io", "pause", "3.10"),
    ("docker.io", "replicated/ekco", "v0.28.14"),
    ("docker.io", "library/haproxy", "3.4.2-alpine3.24"),
    ("docker.io", "library/registry", "3.1.1"),
    ("docker.io", "kurlsh/s3cmd", "20260224-0d00dd0"),
    ("ghcr.io", "flannel-io/flannel", "v0.28.7"),
    (
        "ghcr.io",
        "flannel-io/flannel-cni-plugin",
        "v1.9.1-flannel2",
    ),
];

/// Runs `berth-build build` (the binary `builder`) over the fixtures' kURL repository into
/// `dist`, for Debian 12, through the stand-ins, which stop when it is done. Fails with what
/// the builder printed.
pub fn build(builder: &Path, dist: &Path, cache: &Path) -> Result<(), String> {
    let registry = Registry::start();
    for (_, repository, tag) in IMAGES {
        push_image(&registry, repository, tag, vec![busybox_layer()]);
    }
    let served = tempfile::tempdir().map_err(|error| error.to_string())?;
    // Debian's runc under the release path of the Manifests: containerd's hook copies it over
    // the node's own runc, which must go on working.
    let runc = which::which("runc").map_err(|_| "runc is not installed (apt-get install runc)")?;
    for version in ["v1.3.1", "v1.3.6"] {
        let release = served
            .path()
            .join("github/opencontainers/runc/releases/download")
            .join(version);
        fs_err::create_dir_all(&release).map_err(|error| error.to_string())?;
        fs_err::copy(&runc, release.join("runc.amd64")).map_err(|error| error.to_string())?;
    }
    let github = FileServer::serve(&served.path().join("github"), None);
    let suite = served.path().join("debian");
    crate::apt::deb(&suite, "collectd", "5.12.0-14", "amd64", &[]);
    crate::apt::index(&suite, "bookworm");
    let apt = FileServer::serve(&suite, None);
    let distros = served.path().join("distros.yaml");
    fs_err::write(
        &distros,
        format!(
            "distros:\n  - name: debian-12\n    format: deb\n    mirrors: [{}]\n    suite: bookworm\n    components: [main]\n    architecture: amd64\n    directives: [apt]\n",
            apt.url
        ),
    )
    .map_err(|error| error.to_string())?;
    let mut build = Command::new(builder);
    build
        .arg("build")
        .arg(kurl_fixtures("kurl-addons"))
        .arg("--out")
        .arg(dist)
        .arg("--cache-dir")
        .arg(cache)
        .args([
            "--distros",
            distros.to_str().expect("a UTF-8 temporary path"),
        ])
        .args(["--distro", "debian-12"])
        .args([
            "--asset-mirror",
            &format!("https://github.com/={}/", github.url),
        ]);
    for mirrored in ["registry.k8s.io", "docker.io", "ghcr.io"] {
        build.args([
            "--registry-mirror",
            &format!("{mirrored}={}", registry.address),
        ]);
    }
    let output = build.output().map_err(|error| error.to_string())?;
    if !output.status.success() {
        return Err(format!("berth-build: {}", crate::printed(&output)));
    }
    Ok(())
}
