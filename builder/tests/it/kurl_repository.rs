//! `berth-build` over a repository laid out as kURL's: `addons/` with kURL's `template/`
//! folders, `packages/kubernetes/<version>/` (with `conformance/`), `packages/host/<name>/`,
//! and kURL's `scripts/Manifest`, which is not a package.

use crate::support;

use berth_formats::versions::VersionsFile;
use support::{AddonRepository, BerthBuild, FileServer, files_below, kurl_fixtures};

fn fixture_manifest(name: &str) -> String {
    fs_err::read_to_string(kurl_fixtures("kurl-manifests").join(name)).unwrap()
}

/// kURL's real add-on folders (read in place through a link), its real Kubernetes and host
/// Manifests, and its variable file `scripts/Manifest`: check finds no problem.
#[test]
fn check_over_a_kurl_shaped_tree_exits_zero() {
    let tree = AddonRepository::new();
    let root = tree.root();
    fs_err::os::unix::fs::symlink(kurl_fixtures("kurl-addons/addons"), root.join("addons"))
        .unwrap();
    for (relative, fixture) in [
        (
            "packages/kubernetes/1.30.8/Manifest",
            "kubernetes__1.30.8.Manifest",
        ),
        (
            "packages/kubernetes/1.30.5/conformance/Manifest",
            "kubernetes__1.30.5__conformance.Manifest",
        ),
        ("packages/host/openssl/Manifest", "host__openssl.Manifest"),
        ("packages/host/fio/Manifest", "host__fio.Manifest"),
    ] {
        tree.write(relative, fixture_manifest(fixture));
    }
    tree.write("scripts/Manifest", "DIST_URL=\nKURL_VERSION=\n");
    assert!(
        root.join("addons/containerd/template/base/install.sh")
            .is_file(),
        "the fixture has kURL's template folder"
    );
    let (ok, stdout, stderr) = BerthBuild::new().run(&["check", root.to_str().unwrap()]);
    assert!(ok, "{stdout}{stderr}");
    // Six add-on versions and four packages; template/ and scripts/ are not packages.
    assert!(
        stderr.contains("checked 10 Manifests and 6 install.sh scripts: 0 problems"),
        "{stderr}"
    );
}

/// `build` packages every kind of folder under kURL's names; versions.json lists only what a
/// spec can ask for, and a template's Manifest is never built.
#[test]
fn build_names_kubernetes_and_host_packages_as_kurl_does_and_offers_kubernetes() {
    let served = tempfile::tempdir().unwrap();
    for file in ["kubeadm", "conformance.txt", "openssl.txt"] {
        fs_err::write(served.path().join(file), format!("{file} stand-in\n")).unwrap();
    }
    let server = FileServer::serve(served.path(), None);
    let tree = AddonRepository::new();
    let root = tree.root();
    let url = &server.url;
    tree.write(
        "packages/kubernetes/1.30.8/Manifest",
        format!("asset kubeadm {url}/kubeadm\n"),
    );
    tree.write(
        "packages/kubernetes/1.30.8/conformance/Manifest",
        format!("asset conformance.txt {url}/conformance.txt\n"),
    );
    tree.write(
        "packages/host/openssl/Manifest",
        format!("asset openssl.txt {url}/openssl.txt\n"),
    );
    tree.write("addons/hello/1.0.0/Manifest", "# nothing to fetch\n");
    tree.write("addons/hello/1.0.0/install.sh", "function hello() { :; }\n");
    // kURL's generator: a Manifest that is a template, never a package.
    tree.write(
        "addons/hello/template/base/Manifest",
        "image hello __IMAGE__\n",
    );
    let out = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = BerthBuild::new().run(&[
        "build",
        root.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(ok, "{stdout}{stderr}");
    let packages: Vec<String> = files_below(out.path())
        .into_iter()
        .filter(|file| file.ends_with(".tar.gz"))
        .collect();
    assert_eq!(
        packages,
        [
            "hello-1.0.0.tar.gz",
            "host-openssl.tar.gz",
            "kubernetes-1.30.8.tar.gz",
            "kubernetes-conformance-1.30.8.tar.gz",
        ]
    );
    let (_, kubeadm) = berth_formats::archive::read_entry(
        fs_err::File::open(out.path().join("kubernetes-1.30.8.tar.gz")).unwrap(),
        |path| path.ends_with("/assets/kubeadm"),
    )
    .unwrap()
    .expect("the asset is packaged");
    assert_eq!(kubeadm, b"kubeadm stand-in\n");
    // Kubernetes is offered as an add-on (kURL's install order puts it before the others),
    // its package carrying Berth's hooks as its install.sh; conformance and host packages are not.
    let (_, hooks) = berth_formats::archive::read_entry(
        fs_err::File::open(out.path().join("kubernetes-1.30.8.tar.gz")).unwrap(),
        |path| path.ends_with("/install.sh"),
    )
    .unwrap()
    .expect("Berth's hooks are packaged");
    let hooks = String::from_utf8(hooks).unwrap();
    assert!(
        hooks.contains("function kubernetes()") && hooks.contains("function kubernetes_join()"),
        "{hooks}"
    );
    let versions = VersionsFile::load(&out.path().join("versions.json")).unwrap();
    let names: Vec<&str> = versions
        .addons
        .iter()
        .map(|addon| addon.name.as_str())
        .collect();
    assert_eq!(names, ["kubernetes", "hello"]);
}

/// kURL's real containerd add-on, read in place, built for Debian 12 the way restricted CI
/// builds it: its image and its asset come through mirrors (a loopback registry stands in for
/// registry.k8s.io and a loopback file server for github.com, neither reachable here), and
/// its `dockerout` lines, each for another distro's folder, are not built.
#[test]
fn kurls_containerd_builds_for_one_distro_through_mirrors() {
    use berth_formats::package_index::PackageIndex;
    use support::Registry;
    use support::images::{busybox_layer, push_image};
    let registry = Registry::start();
    // Stand-in for registry.k8s.io/pause:3.10, pushed under the same repository and tag.
    let pause = push_image(&registry, "pause", "3.10", vec![busybox_layer()]);
    let served = tempfile::tempdir().unwrap();
    let runc = b"runc stand-in\n";
    let release = served
        .path()
        .join("opencontainers/runc/releases/download/v1.3.6");
    fs_err::create_dir_all(&release).unwrap();
    fs_err::write(release.join("runc.amd64"), runc).unwrap();
    let github = FileServer::serve(served.path(), None);

    let addon = kurl_fixtures("kurl-addons/addons/containerd/2.2.6");
    let out = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = BerthBuild::new().run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--distro",
        "debian-12",
        "--registry-mirror",
        &format!("registry.k8s.io={}", registry.address),
        "--asset-mirror",
        &format!("https://github.com/={}/", github.url),
    ]);
    assert!(ok, "{stdout}{stderr}");
    let package = out.path().join("containerd-2.2.6.tar.gz");
    let (_, index) =
        berth_formats::archive::read_entry(fs_err::File::open(&package).unwrap(), |path| {
            path.ends_with("package.json")
        })
        .unwrap()
        .expect("the package has its index");
    let index: PackageIndex = serde_json::from_slice(&index).unwrap();
    let image = &index.images[0];
    assert_eq!(
        image.reference, "registry.k8s.io/pause:3.10",
        "named as the Manifest names it"
    );
    assert_eq!(image.manifest_digest, pause);
    let (_, packaged) =
        berth_formats::archive::read_entry(fs_err::File::open(&package).unwrap(), |path| {
            path.ends_with("/assets/runc")
        })
        .unwrap()
        .expect("the asset is packaged");
    assert_eq!(packaged, runc);
    // No other distro's folder was built into it.
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&package)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for folder in ["rhel-7", "rhel-9", "ubuntu-22.04"] {
        assert!(!listing.contains(&format!("/{folder}/")), "{listing}");
    }
}

/// kURL's real Kubernetes 1.30.8 Manifest through mirrors that hold none of it: the build
/// fails naming every image and every asset the mirrors lack, not the first alone.
#[test]
fn a_mirror_lacking_several_inputs_fails_naming_each() {
    use support::Registry;
    let registry = Registry::start();
    let served = tempfile::tempdir().unwrap();
    let files = FileServer::serve(served.path(), None);
    let tree = AddonRepository::new();
    tree.write(
        "packages/kubernetes/1.30.8/Manifest",
        fixture_manifest("kubernetes__1.30.8.Manifest"),
    );
    let out = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = BerthBuild::new().run(&[
        "build",
        tree.root().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--distro",
        "debian-12",
        "--registry-mirror",
        &format!("registry.k8s.io={}", registry.address),
        "--asset-mirror",
        &format!("https://dl.k8s.io/={}/", files.url),
        "--asset-mirror",
        &format!("https://github.com/={}/", files.url),
    ]);
    assert!(!ok, "{stdout}{stderr}");
    for image in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-proxy",
        "coredns",
        "pause",
        "etcd",
    ] {
        assert!(
            stderr.contains(&format!("image `{image}`")),
            "{image}: {stderr}"
        );
    }
    // Each names the mirror that lacks it.
    let lacking = format!(
        "registry {} (the mirror of registry.k8s.io) has no such",
        registry.address
    );
    assert_eq!(stderr.matches(&lacking).count(), 7, "{stderr}");
    for asset in [
        "kubeadm",
        "crictl-linux-amd64.tar.gz",
        "kustomize-v5.4.3.tar.gz",
    ] {
        assert!(stderr.contains(&format!("`{asset}`")), "{asset}: {stderr}");
    }
}
