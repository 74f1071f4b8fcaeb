//! kURL's real add-ons (`shared/fixtures/kurl-addons`, read in place) packaged by `berth-build`
//! for Debian 12, with loopback stand-ins for the upstreams no machine here reaches:
//! - a registry holds a busybox image under each reference the Manifests name
//!   (`registry.k8s.io/pause:3.6`, `docker.io/replicated/ekco:v0.28.14`, …), reached through
//!   the builder's `--registry-mirror`;
//! - a file server answers for github.com with Debian's own `runc`, through `--asset-mirror`;
//! - Kubernetes' package (kURL's `packages/kubernetes/1.30.8` Manifest from the fixtures) gets
//!   busybox under each image and, for kubeadm, crictl and kustomize, programs that say they
//!   are stand-ins and fail;
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

/// The Kubernetes version whose kURL Manifest (`kurl-manifests/kubernetes__<v>.Manifest`)
/// stands in the dist's repository as `packages/kubernetes/<v>/Manifest`.
pub const KUBERNETES_VERSION: &str = "1.30.8";

/// The images of that Kubernetes Manifest: (registry, repository, tag).
pub const KUBERNETES_IMAGES: [(&str, &str, &str); 7] = [
    ("registry.k8s.io", "kube-apiserver", "v1.30.8"),
    ("registry.k8s.io", "kube-controller-manager", "v1.30.8"),
    ("registry.k8s.io", "kube-scheduler", "v1.30.8"),
    ("registry.k8s.io", "kube-proxy", "v1.30.8"),
    ("registry.k8s.io", "coredns/coredns", "v1.11.3"),
    ("registry.k8s.io", "pause", "3.9"),
    ("registry.k8s.io", "etcd", "3.5.15-0"),
];

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
    build_with(builder, dist, cache, &[])
}

/// [`build`], with more of the builder's options (`--compression zstd`).
pub fn build_with(
    builder: &Path,
    dist: &Path,
    cache: &Path,
    options: &[&str],
) -> Result<(), String> {
    let registry = Registry::start();
    for (_, repository, tag) in IMAGES.iter().chain(&KUBERNETES_IMAGES) {
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
    // Kubernetes' assets: programs that say what they are and fail, so that nothing here can
    // take a stand-in for kubeadm, crictl or kustomize.
    let stand_in = |name: &str| {
        format!("#!/bin/sh\necho 'a stand-in for {name} in a test dist, not {name}' >&2\nexit 1\n")
    };
    let kubeadm = served.path().join("dl-k8s/v1.30.8/bin/linux/amd64/kubeadm");
    let crictl = served
        .path()
        .join("github/kubernetes-sigs/cri-tools/releases/download/v1.30.1/crictl-v1.30.1-linux-amd64.tar.gz");
    let kustomize = served.path().join(
        "github/kubernetes-sigs/kustomize/releases/download/kustomize%2Fv5.4.3/kustomize_v5.4.3_linux_amd64.tar.gz",
    );
    for path in [&kubeadm, &crictl, &kustomize] {
        fs_err::create_dir_all(path.parent().expect("a folder"))
            .map_err(|error| error.to_string())?;
    }
    fs_err::write(&kubeadm, stand_in("kubeadm")).map_err(|error| error.to_string())?;
    for (archive, program) in [(&crictl, "crictl"), (&kustomize, "kustomize")] {
        let folder = tempfile::tempdir().map_err(|error| error.to_string())?;
        fs_err::write(folder.path().join(program), stand_in(program))
            .map_err(|error| error.to_string())?;
        let status = Command::new("tar")
            .arg("-czf")
            .arg(archive)
            .arg("-C")
            .arg(folder.path())
            .arg(program)
            .status()
            .map_err(|error| error.to_string())?;
        if !status.success() {
            return Err(format!("tar could not write {}", archive.display()));
        }
    }
    let dl_k8s = FileServer::serve(&served.path().join("dl-k8s"), None);
    let github = FileServer::serve(&served.path().join("github"), None);
    // The repository: kURL's add-on folders and its Kubernetes package folder, each a link to
    // the fixture it reads.
    let repository = served.path().join("repository");
    let kubernetes = repository
        .join("packages/kubernetes")
        .join(KUBERNETES_VERSION);
    fs_err::create_dir_all(&kubernetes).map_err(|error| error.to_string())?;
    fs_err::os::unix::fs::symlink(
        kurl_fixtures("kurl-addons").join("addons"),
        repository.join("addons"),
    )
    .map_err(|error| error.to_string())?;
    fs_err::os::unix::fs::symlink(
        kurl_fixtures("kurl-manifests").join(format!("kubernetes__{KUBERNETES_VERSION}.Manifest")),
        kubernetes.join("Manifest"),
    )
    .map_err(|error| error.to_string())?;
    let suite = served.path().join("debian");
    crate::apt::deb(&suite, "collectd", "5.12.0-14", "amd64", &[]);
    crate::apt::index(&suite, "bookworm");
    let apt = FileServer::serve(&suite, None);
    let distros = served.path().join("distros.yaml");
    crate::dist_build::distros_file(&distros, &apt.url, &[("debian-12", "bookworm")])?;
    let mut arguments: Vec<String> = vec![
        "--distro".into(),
        "debian-12".into(),
        "--asset-mirror".into(),
        format!("https://github.com/={}/", github.url),
        "--asset-mirror".into(),
        format!("https://dl.k8s.io/={}/", dl_k8s.url),
    ];
    for mirrored in ["registry.k8s.io", "docker.io", "ghcr.io"] {
        arguments.push("--registry-mirror".into());
        arguments.push(format!("{mirrored}={}", registry.address));
    }
    arguments.extend(options.iter().map(|option| option.to_string()));
    crate::dist_build::build(builder, &repository, dist, cache, &distros, arguments)?;
    Ok(())
}
