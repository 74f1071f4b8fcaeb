//! `berth-build` over a repository laid out as kURL's: `addons/` with kURL's `template/`
//! folders, `packages/kubernetes/<version>/` (with `conformance/`), `packages/host/<name>/`,
//! and kURL's `scripts/Manifest`, which is not a package.

mod support;

use std::path::Path;

use berth_formats::versions::VersionsFile;
use support::{BerthBuild, FileServer, files_below, kurl_fixtures};

/// Writes `text` to `root/relative`, making its folders.
fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, text).unwrap();
}

fn fixture_manifest(name: &str) -> String {
    fs_err::read_to_string(kurl_fixtures("kurl-manifests").join(name)).unwrap()
}

/// kURL's real add-on folders (read in place through a link), its real Kubernetes and host
/// Manifests, and its variable file `scripts/Manifest`: check finds no problem.
#[test]
fn check_over_a_kurl_shaped_tree_exits_zero() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
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
        write(root, relative, &fixture_manifest(fixture));
    }
    write(root, "scripts/Manifest", "DIST_URL=\nKURL_VERSION=\n");
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
fn build_names_kubernetes_and_host_packages_as_kurl_does() {
    let served = tempfile::tempdir().unwrap();
    for file in ["kubeadm", "conformance.txt", "openssl.txt"] {
        fs_err::write(served.path().join(file), format!("{file} stand-in\n")).unwrap();
    }
    let server = FileServer::serve(served.path(), None);
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    let url = &server.url;
    write(
        root,
        "packages/kubernetes/1.30.8/Manifest",
        &format!("asset kubeadm {url}/kubeadm\n"),
    );
    write(
        root,
        "packages/kubernetes/1.30.8/conformance/Manifest",
        &format!("asset conformance.txt {url}/conformance.txt\n"),
    );
    write(
        root,
        "packages/host/openssl/Manifest",
        &format!("asset openssl.txt {url}/openssl.txt\n"),
    );
    write(root, "addons/hello/1.0.0/Manifest", "# nothing to fetch\n");
    write(
        root,
        "addons/hello/1.0.0/install.sh",
        "function hello() { :; }\n",
    );
    // kURL's generator: a Manifest that is a template, never a package.
    write(
        root,
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
    let versions = VersionsFile::load(&out.path().join("versions.json")).unwrap();
    let names: Vec<&str> = versions
        .addons
        .iter()
        .map(|addon| addon.name.as_str())
        .collect();
    assert_eq!(names, ["hello"]);
}
