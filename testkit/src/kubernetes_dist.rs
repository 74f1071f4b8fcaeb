//! A dist that installs real Kubernetes v1.20.2: kURL's `packages/kubernetes/1.20.2/Manifest`
//! (less the lines that cannot be built here) with Berth's Kubernetes hooks, Berth's containerd,
//! pod-network and demo add-ons, all built by `berth-build` through its mirror settings from what
//! `scripts/kubernetes.sh` builds from Debian's source package:
//! - a loopback registry holds the images under their own repositories and tags
//!   (`kube-apiserver:v1.20.2`, …), and a loopback file server holds kubeadm and crictl's
//!   release tarball: a mirrors file (`berth-build --mirrors`) maps `k8s.gcr.io`,
//!   `docker.io` (cluster-dns's registry) and the URLs kURL's Manifest names to them;
//! - the artefacts' apt repository (kubelet, kubernetes-cni, Debian's kubernetes-client, and
//!   what they and containerd need) is the mirror of Debian 12 and Debian 11 for this build.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{FileServer, Registry, printed, require};

pub const KUBERNETES_VERSION: &str = "1.20.2";

/// kURL's `packages/kubernetes/1.20.2/Manifest`, less the lines no build here can satisfy
/// (named in the artefacts' `UNBUILT`): `image coredns k8s.gcr.io/coredns:1.7.0` and the
/// two kustomize assets; with cluster-dns, which the hooks deploy for the cluster's DNS in
/// CoreDNS's place. The `apt` lines are what a vendor adds to ship kubelet and kubectl
/// with the package, from upstream's repository (here, the artefacts' apt repository).
pub const KUBERNETES_MANIFEST: &str = "\
image kube-apiserver k8s.gcr.io/kube-apiserver:v1.20.2
image kube-controller-manager k8s.gcr.io/kube-controller-manager:v1.20.2
image kube-scheduler k8s.gcr.io/kube-scheduler:v1.20.2
image kube-proxy k8s.gcr.io/kube-proxy:v1.20.2
image pause k8s.gcr.io/pause:3.2
image etcd k8s.gcr.io/etcd:3.4.13-0
image cluster-dns docker.io/berth/cluster-dns:1.0.0

asset kubeadm https://storage.googleapis.com/kubernetes-release/release/v1.20.2/bin/linux/amd64/kubeadm
asset crictl-linux-amd64.tar.gz https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.20.0/crictl-v1.20.0-linux-amd64.tar.gz

apt kubelet
apt kubernetes-cni
apt kubernetes-client
";

/// The images `scripts/kubernetes.sh` writes: (archive in `images/`, repository, tag).
pub const IMAGES: [(&str, &str, &str); 7] = [
    ("kube-apiserver.tar", "kube-apiserver", "v1.20.2"),
    (
        "kube-controller-manager.tar",
        "kube-controller-manager",
        "v1.20.2",
    ),
    ("kube-scheduler.tar", "kube-scheduler", "v1.20.2"),
    ("kube-proxy.tar", "kube-proxy", "v1.20.2"),
    ("pause.tar", "pause", "3.2"),
    ("etcd.tar", "etcd", "3.4.13-0"),
    ("cluster-dns.tar", "berth/cluster-dns", "1.0.0"),
];

/// The folder `scripts/kubernetes.sh` fills, as `BERTH_KUBERNETES_ARTEFACTS` names it
/// (`scripts/test.sh` sets it), checked to be complete.
pub fn artefacts() -> Result<PathBuf, String> {
    let folder = std::env::var_os("BERTH_KUBERNETES_ARTEFACTS").ok_or(
        "BERTH_KUBERNETES_ARTEFACTS is not set: run scripts/kubernetes.sh (scripts/test.sh does) \
         and set it to the folder it prints",
    )?;
    checked_artefacts(Path::new(&folder))
}

/// `folder`, if `scripts/kubernetes.sh` completed it.
pub fn checked_artefacts(folder: &Path) -> Result<PathBuf, String> {
    let folder = folder.to_path_buf();
    if !folder.join("COMPLETE").is_file() {
        return Err(format!(
            "{}: not a complete build of scripts/kubernetes.sh (no COMPLETE); run it again",
            folder.display()
        ));
    }
    Ok(folder)
}

/// Berth's own add-ons the dist holds beside Kubernetes: the container runtime and the pod
/// network it needs, demo, whose image is a workload every node has, and cluster-demo, the
/// same program as a Deployment the cluster runs.
const OWN_ADDONS: [&str; 4] = ["containerd", "pod-network", "demo", "cluster-demo"];

/// The checkout's `versions.json`: the install order of Berth's own add-ons (cluster-demo
/// after the pod network its pods need).
fn own_versions() -> PathBuf {
    own_addons().join("../versions.json")
}

/// What a dist holds beside Kubernetes and Berth's own add-ons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    None,
    /// kURL's registry add-on from kURL's own folder (the fixtures' `registry/3.1.1`, read in
    /// place), its image Debian's Distribution registry (2.8.2) under kURL's name
    /// `registry:3.1.1`, `kurlsh/s3cmd` (used only to move a registry off an object store)
    /// standing in as busybox; and `local-volume`, a stand-in for the storage provisioner
    /// kURL installs before it (OpenEBS, Longhorn, Rook): one hostPath volume the registry's
    /// claim binds.
    KurlRegistry,
}

/// The version of kURL's registry add-on [`Extra::KurlRegistry`] packages.
pub const KURL_REGISTRY_VERSION: &str = "3.1.1";

/// `local-volume`'s install hook: a 50Gi hostPath PersistentVolume with no class.
const LOCAL_VOLUME_HOOKS: &str = r#"# shellcheck shell=bash
# A stand-in for the storage provisioner kURL installs before its registry: one 50Gi hostPath
# PersistentVolume with no class, which a claim with no class (the registry's) binds.
function local_volume() {
    kubectl apply -f - <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-volume
spec:
  capacity:
    storage: 50Gi
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath:
    path: /var/lib/local-volume
    type: DirectoryOrCreate
EOF
}
"#;

/// The dist's `versions.json`: the checkout's install order, with Kubernetes right after the
/// container runtime (as kURL installs it), before every add-on that needs a cluster, and the
/// extra add-ons last, in their order (kURL's registry after the volume its claim binds).
fn install_order(extra: Extra) -> Result<String, String> {
    let text = fs_err::read_to_string(own_versions()).map_err(|error| error.to_string())?;
    let mut versions: serde_json::Value =
        serde_json::from_str(&text).map_err(|error| error.to_string())?;
    let addons = versions["addons"]
        .as_array_mut()
        .ok_or("versions.json has no addons list")?;
    let runtime = addons
        .iter()
        .position(|addon| addon["name"] == "containerd")
        .ok_or("versions.json does not list containerd")?;
    addons.insert(
        runtime + 1,
        serde_json::json!({"name": "kubernetes", "versions": [{"version": KUBERNETES_VERSION}]}),
    );
    if extra == Extra::KurlRegistry {
        // Berth's own registry add-on has the same name: kURL's takes its place.
        addons.retain(|addon| addon["name"] != "registry");
        addons
            .push(serde_json::json!({"name": "local-volume", "versions": [{"version": "1.0.0"}]}));
        addons.push(
            serde_json::json!({"name": "registry", "versions": [{"version": KURL_REGISTRY_VERSION}]}),
        );
    }
    serde_json::to_string_pretty(&versions).map_err(|error| error.to_string())
}

/// The repository folder of Berth's own add-ons (`addons/` of this checkout).
fn own_addons() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../addons")
}

/// Builds the dist into `dist` with `builder` (`berth-build`) from `artefacts`, with more of
/// the builder's options. The stand-ins stop when it is done. Fails with what the builder
/// printed.
pub fn build(
    builder: &Path,
    artefacts: &Path,
    dist: &Path,
    cache: &Path,
    options: &[&str],
    extra: Extra,
) -> Result<(), String> {
    let skopeo = require("skopeo", "skopeo");
    let registry = Registry::start();
    if extra == Extra::KurlRegistry {
        crate::images::push_image(
            &registry,
            "library/registry",
            KURL_REGISTRY_VERSION,
            vec![crate::images::registry_layer()],
        );
        crate::images::push_image(
            &registry,
            "kurlsh/s3cmd",
            "20260224-0d00dd0",
            vec![crate::images::busybox_layer()],
        );
    }
    for (archive, repository, tag) in IMAGES {
        let output = Command::new(&skopeo)
            .args([
                "--insecure-policy",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
            ])
            .arg(format!(
                "oci-archive:{}",
                artefacts.join("images").join(archive).display()
            ))
            .arg(format!("docker://{}/{repository}:{tag}", registry.address))
            .output()
            .map_err(|error| error.to_string())?;
        if !output.status.success() {
            return Err(format!("skopeo copy {archive}: {}", printed(&output)));
        }
    }
    let assets = FileServer::serve(&artefacts.join("assets"), None);
    let apt = FileServer::serve(&artefacts.join("debs"), None);
    let work = tempfile::tempdir().map_err(|error| error.to_string())?;
    let repository = work.path().join("repository");
    let kubernetes = repository
        .join("packages/kubernetes")
        .join(KUBERNETES_VERSION);
    fs_err::create_dir_all(&kubernetes).map_err(|error| error.to_string())?;
    fs_err::write(kubernetes.join("Manifest"), KUBERNETES_MANIFEST)
        .map_err(|error| error.to_string())?;
    // Copies of Berth's own add-ons: the builder does not follow links below the folder it
    // is given.
    fs_err::create_dir_all(repository.join("addons")).map_err(|error| error.to_string())?;
    for name in OWN_ADDONS {
        let copied = Command::new("cp")
            .arg("-r")
            .arg(own_addons().join(name))
            .arg(repository.join("addons"))
            .status()
            .map_err(|error| error.to_string())?;
        if !copied.success() {
            return Err(format!("could not copy the {name} add-on"));
        }
    }
    if extra == Extra::KurlRegistry {
        let folder = repository.join("addons/registry");
        fs_err::create_dir_all(&folder).map_err(|error| error.to_string())?;
        let copied = Command::new("cp")
            .arg("-r")
            .arg(kurl_registry())
            .arg(&folder)
            .status()
            .map_err(|error| error.to_string())?;
        if !copied.success() {
            return Err("could not copy kURL's registry add-on".into());
        }
        let volume = repository.join("addons/local-volume/1.0.0");
        fs_err::create_dir_all(&volume).map_err(|error| error.to_string())?;
        fs_err::write(volume.join("Manifest"), "# no image\n")
            .map_err(|error| error.to_string())?;
        fs_err::write(volume.join("install.sh"), LOCAL_VOLUME_HOOKS)
            .map_err(|error| error.to_string())?;
    }
    fs_err::write(repository.join("versions.json"), install_order(extra)?)
        .map_err(|error| error.to_string())?;
    let distros = work.path().join("distros.yaml");
    crate::dist_build::distros_file(
        &distros,
        &apt.url,
        &[("debian-12", "bookworm"), ("debian-11", "bullseye")],
    )?;
    // The vendor's mirrors file: the images' registry and the assets' URL prefixes.
    let mirrors = work.path().join("mirrors.yaml");
    fs_err::write(
        &mirrors,
        format!(
            "registries:\n  k8s.gcr.io: {registry}\n  docker.io: {registry}\nassets:\n  https://storage.googleapis.com/kubernetes-release/release/v1.20.2/bin/linux/amd64/: {assets}/\n  https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.20.0/: {assets}/\n",
            registry = registry.address,
            assets = assets.url
        ),
    )
    .map_err(|error| error.to_string())?;
    let mut arguments = vec![OsString::from("--mirrors"), mirrors.into_os_string()];
    arguments.extend(options.iter().map(OsString::from));
    crate::dist_build::build(builder, &repository, dist, cache, &distros, arguments)?;
    Ok(())
}

/// The dist [`build`] makes with `builder` from `artefacts`, built once and kept in
/// `cache_root` (beside the builder: `target/<profile>/kubernetes-dist`), so that the
/// clusters of a test run, each test in a process of its own, serve the same one rather than
/// each building its own. Its key is what it is built from: the artefacts folder (named by its
/// own content key), the builder binary (size and modification time), this Manifest and
/// Berth's add-ons it copies. A dist is built in a folder of its own and renamed into place
/// once complete, never read half-made; a test that finds it being built waits for it. Dists
/// of other keys are removed once a new one is in place.
pub fn cached(builder: &Path, artefacts: &Path, cache_root: &Path) -> Result<PathBuf, String> {
    cached_with(builder, artefacts, cache_root, Extra::None)
}

/// [`cached`], with `extra` add-ons (a dist of its own, kept beside the others).
pub fn cached_with(
    builder: &Path,
    artefacts: &Path,
    cache_root: &Path,
    extra: Extra,
) -> Result<PathBuf, String> {
    // Each kind of dist keeps its own newest: tests of both run at once.
    let prefix = match extra {
        Extra::None => "dist-",
        Extra::KurlRegistry => "dist-kurl-registry-",
    };
    let dist = cache_root.join(format!("{prefix}{}", key(builder, artefacts, extra)?));
    // The key holds the hooks' source, and a dist is checked against it once, when built.
    if dist.is_dir() {
        return Ok(dist);
    }
    fs_err::create_dir_all(cache_root).map_err(|error| error.to_string())?;
    // One build of each kind at a time: a test that starts while another builds the same
    // dist waits for it rather than building it too (released when the file closes, also
    // by a test that panics).
    let lock = fs_err::File::create(cache_root.join(format!(".{prefix}lock")))
        .map_err(|error| error.to_string())?;
    lock.file().lock().map_err(|error| error.to_string())?;
    if dist.is_dir() {
        return Ok(dist);
    }
    let building = tempfile::Builder::new()
        .prefix("building-")
        .tempdir_in(cache_root)
        .map_err(|error| error.to_string())?;
    let built = building.path().join("dist");
    // A dist with extra add-ons starts from the plain one's packages, linked: the builder
    // keeps each whose inputs are unchanged (the 200 MB kubernetes package among them), so
    // the two dists hold it once and it is built once.
    if extra != Extra::None {
        link_packages(&cached(builder, artefacts, cache_root)?, &built)?;
    }
    build(
        builder,
        artefacts,
        &built,
        &building.path().join("cache"),
        &[],
        extra,
    )?;
    check_hooks(builder, &built)?;
    if let Err(error) = fs_err::rename(&built, &dist) {
        // Another test put the same dist in place first.
        if !dist.is_dir() {
            return Err(error.to_string());
        }
    }
    for entry in fs_err::read_dir(cache_root).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let same_kind = name.strip_prefix(prefix).is_some_and(|rest| {
            // `dist-` also begins `dist-kurl-registry-`: a key is 16 hex digits alone.
            rest.len() == 16 && rest.bytes().all(|byte| byte.is_ascii_hexdigit())
        });
        if same_kind && path != dist {
            let _ = fs_err::remove_dir_all(&path);
        }
    }
    Ok(dist)
}

/// The source of the Kubernetes hooks the builder embeds.
/// Links each package of `from` and its `.sha256` (what the builder reads to keep an unchanged
/// package, and never writes to) into the new folder `to`.
fn link_packages(from: &Path, to: &Path) -> Result<(), String> {
    fs_err::create_dir_all(to).map_err(|error| error.to_string())?;
    for entry in fs_err::read_dir(from).map_err(|error| error.to_string())? {
        let name = entry.map_err(|error| error.to_string())?.file_name();
        let text = name.to_string_lossy();
        let package = text.strip_suffix(".sha256").unwrap_or(&text);
        if berth_formats::compression::Compression::of_file_name(package).is_some() {
            fs_err::hard_link(from.join(&name), to.join(&name))
                .map_err(|error| error.to_string())?;
        }
    }
    Ok(())
}

fn hooks_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../builder/hooks/kubernetes.sh")
}

/// Fails unless the Kubernetes package of `dist` holds the hooks of this source tree: the
/// builder embeds them, and a builder older than the source (a test run that built only the
/// installer) would test hooks that are no longer the ones in the tree.
fn check_hooks(builder: &Path, dist: &Path) -> Result<(), String> {
    let source = hooks_source();
    let wanted = fs_err::read(&source).map_err(|error| error.to_string())?;
    let package = dist.join(format!("kubernetes-{KUBERNETES_VERSION}.tar.gz"));
    let file = fs_err::File::open(&package).map_err(|error| error.to_string())?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let hooks = format!("addons/kubernetes/{KUBERNETES_VERSION}/install.sh");
    for entry in archive.entries().map_err(|error| error.to_string())? {
        let mut entry = entry.map_err(|error| error.to_string())?;
        if entry.path().map_err(|error| error.to_string())?.as_ref() == Path::new(&hooks) {
            let mut packaged = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut packaged)
                .map_err(|error| error.to_string())?;
            if packaged != wanted {
                return Err(format!(
                    "{} packages Kubernetes hooks other than {}: it is older than the source; build it (cargo build -p berth-build) and run again",
                    builder.display(),
                    source.display()
                ));
            }
            return Ok(());
        }
    }
    Err(format!("{} holds no {hooks}", package.display()))
}

/// kURL's registry add-on folder in the fixtures.
fn kurl_registry() -> PathBuf {
    crate::kurl_fixtures("kurl-addons/addons/registry").join(KURL_REGISTRY_VERSION)
}

/// What a dist is built from, as a short hex key.
fn key(builder: &Path, artefacts: &Path, extra: Extra) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(artefacts.as_os_str().as_encoded_bytes());
    let metadata = fs_err::metadata(builder).map_err(|error| error.to_string())?;
    let modified = metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    hasher.update(format!("\n{} {}\n", metadata.len(), modified.as_nanos()));
    hasher.update(KUBERNETES_MANIFEST);
    hasher.update(fs_err::read(hooks_source()).map_err(|error| error.to_string())?);
    hasher.update(fs_err::read(own_versions()).map_err(|error| error.to_string())?);
    hasher.update(format!("{extra:?}\n"));
    let mut folders: Vec<PathBuf> = OWN_ADDONS
        .iter()
        .map(|name| own_addons().join(name))
        .collect();
    if extra == Extra::KurlRegistry {
        hasher.update(LOCAL_VOLUME_HOOKS);
        folders.push(kurl_registry());
    }
    for folder in folders {
        for entry in walkdir::WalkDir::new(folder).sort_by_file_name() {
            let entry = entry.map_err(|error| error.to_string())?;
            if entry.file_type().is_file() {
                hasher.update(entry.path().as_os_str().as_encoded_bytes());
                hasher.update(fs_err::read(entry.path()).map_err(|error| error.to_string())?);
            }
        }
    }
    let digest = hasher.finalize();
    Ok(digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dist whose Kubernetes package holds `hooks` as its install.sh.
    fn dist_with_hooks(hooks: &[u8]) -> tempfile::TempDir {
        let dist = tempfile::tempdir().unwrap();
        let file = fs_err::File::create(
            dist.path()
                .join(format!("kubernetes-{KUBERNETES_VERSION}.tar.gz")),
        )
        .unwrap();
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        let mut header = tar::Header::new_gnu();
        header.set_size(hooks.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(
                &mut header,
                format!("addons/kubernetes/{KUBERNETES_VERSION}/install.sh"),
                hooks,
            )
            .unwrap();
        builder.into_inner().unwrap().finish().unwrap();
        dist
    }

    #[test]
    fn a_dist_from_a_builder_older_than_the_hooks_is_refused() {
        let current = dist_with_hooks(&fs_err::read(hooks_source()).unwrap());
        assert_eq!(
            check_hooks(Path::new("berth-build"), current.path()),
            Ok(())
        );
        let stale = dist_with_hooks(b"function kubernetes() { :; }\n");
        let error = check_hooks(Path::new("berth-build"), stale.path()).unwrap_err();
        assert!(
            error.contains("berth-build packages Kubernetes hooks other than"),
            "{error}"
        );
        assert!(error.contains("cargo build -p berth-build"), "{error}");
    }
}
