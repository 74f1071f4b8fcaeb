//! Bad input is refused with a clear error, before any hook runs, and loses nothing.

use crate::support;

use std::path::Path;

use berth_formats::Sha256Digest;
use support::{Node, TestDist, failed, succeeded};

fn dist_with_demo() -> TestDist {
    let mut dist = TestDist::new();
    dist.addon(
        "demo",
        "1.0.0",
        "function demo() { echo demo >> \"$TRACE\"; }\n",
    );
    dist.addon(
        "demo",
        "1.1.0",
        "function demo() { echo demo >> \"$TRACE\"; }\n",
    );
    dist
}

fn write(path: &Path, text: &str) -> String {
    fs_err::write(path, text).unwrap();
    path.display().to_string()
}

#[test]
fn a_spec_that_is_not_yaml_names_its_line() {
    let dist = dist_with_demo();
    let spec = dist.addons.root().join("spec.yaml");
    write(
        &spec,
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo: {version: [1.0.0\n",
    );
    let output = failed(&Node::new().install(&spec, &dist.url(), &[]));
    assert!(
        output.contains(&format!("{}:5", spec.display()))
            || output.contains(&format!("{}:4", spec.display())),
        "names the file and line: {output}"
    );
    assert!(output.contains("not a valid Installer spec"), "{output}");
}

#[test]
fn a_spec_of_another_kind_is_refused() {
    let dist = dist_with_demo();
    let spec = dist.addons.root().join("spec.yaml");
    write(
        &spec,
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Cluster\nspec:\n  demo: {version: latest}\n",
    );
    let output = failed(&Node::new().install(&spec, &dist.url(), &[]));
    assert!(
        output.contains(&format!(
            "{}:2: kind is `Cluster`, expected `Installer`",
            spec.display()
        )),
        "{output}"
    );
    assert!(output.contains("hint: use `kind: Installer`"), "{output}");
}

#[test]
fn an_unknown_addon_lists_those_on_offer() {
    let dist = dist_with_demo();
    let spec = dist.spec(
        "spec.yaml",
        &[("demo", "version: latest"), ("weave", "version: latest")],
    );
    let output = failed(&Node::new().install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("unknown add-on `weave`; versions.json offers: demo"),
        "{output}"
    );
}

#[test]
fn an_unknown_version_lists_the_versions_on_offer() {
    let dist = dist_with_demo();
    let spec = dist.spec("spec.yaml", &[("demo", "version: 2.0.x")]);
    let output = failed(&Node::new().install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("demo has no version `2.0.x`; versions.json offers: 1.1.0, 1.0.0"),
        "{output}"
    );
}

/// A package built for another architecture is refused before its hooks run, naming both
/// architectures and the build option that makes the right one.
#[test]
fn a_package_built_for_another_architecture_is_refused() {
    let mut dist = TestDist::new();
    dist.arch = "ppc64le".into();
    dist.addon(
        "demo",
        "1.0.0",
        "function demo() { echo ran >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("demo", "version: 1.0.0")]);
    let trace = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace);
    let output = failed(&node.install(&spec, &dist.url(), &[]));
    let host = berth_formats::package_index::host_arch();
    assert!(
        output.contains(&format!(
            "demo 1.0.0 was built for ppc64le and this machine is {host}; build the dist with `--arch {host}`"
        )),
        "{output}"
    );
    assert!(!trace.exists(), "a hook ran");
    assert!(!node.install_dir().join("addons/demo").exists());
}

#[test]
fn a_package_with_one_byte_flipped_is_refused_before_any_hook_runs() {
    let mut dist = TestDist::new();
    dist.addon(
        "first",
        "1.0.0",
        "function first() { echo first >> \"$TRACE\"; }\n",
    );
    dist.addon(
        "demo",
        "1.0.0",
        "function demo() { echo demo >> \"$TRACE\"; }\n",
    );
    let package = dist.dist.path().join("demo-1.0.0.tar.gz");
    let published = Sha256Digest::of(&fs_err::read(&package).unwrap());
    let mut bytes = fs_err::read(&package).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs_err::write(&package, &bytes).unwrap();
    let found = Sha256Digest::of(&bytes);

    let spec = dist.spec(
        "spec.yaml",
        &[("first", "version: latest"), ("demo", "version: latest")],
    );
    let trace = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace);
    let output = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("demo 1.0.0: the package is refused"),
        "{output}"
    );
    assert!(
        output.contains(&format!("expected {published}, found {found}")),
        "names both digests: {output}"
    );
    assert!(
        !trace.exists(),
        "a hook ran: {:?}",
        fs_err::read_to_string(&trace)
    );
    assert!(!node.install_dir().join("addons/demo").exists());
    let status = node.status();
    assert_eq!(status["demo"]["progressing"]["reason"], "Failed");
    assert!(status["first"]["current"].is_null(), "nothing was applied");
}

#[test]
fn a_package_with_a_path_out_of_its_root_is_refused() {
    let dist = dist_with_demo();
    // A package whose digest is published correctly but which holds `../` paths.
    let mut raw = tar::Builder::new(Vec::new());
    for (path, body) in [
        ("addons/evil/1.0.0/install.sh", "function evil() { :; }\n"),
        ("addons/evil/1.0.0/../../../../escaped.txt", "outside\n"),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        raw.append(&header, body.as_bytes()).unwrap();
    }
    let tar_bytes = raw.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar_bytes).unwrap();
    let package = gz.finish().unwrap();
    let digest = Sha256Digest::of(&package);
    fs_err::write(dist.dist.path().join("evil-1.0.0.tar.gz"), &package).unwrap();
    fs_err::write(
        dist.dist.path().join("evil-1.0.0.tar.gz.sha256"),
        format!("{}  evil-1.0.0.tar.gz\n", digest.hex()),
    )
    .unwrap();
    fs_err::write(
        dist.dist.path().join("versions.json"),
        r#"{"addons": [{"name": "evil", "versions": [{"version": "1.0.0"}]}]}"#,
    )
    .unwrap();
    let spec = dist.spec("spec.yaml", &[("evil", "version: latest")]);
    let node = Node::new();
    let output = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(
        output.contains("evil 1.0.0: the package is refused"),
        "{output}"
    );
    assert!(output.contains("`..`"), "says why: {output}");
    let escaped: Vec<_> = walk(node.root.path())
        .into_iter()
        .filter(|path| path.ends_with("escaped.txt"))
        .collect();
    assert!(escaped.is_empty(), "{escaped:?}");
    assert!(!node.install_dir().join("addons/evil").exists());
}

#[test]
fn a_bad_set_is_refused_and_the_good_one_works() {
    let dist = dist_with_demo();
    let spec = dist.spec("spec.yaml", &[("demo", "version: latest")]);
    let node = Node::new().env("TRACE", dist.addons.root().join("trace"));
    let output = failed(&node.install(&spec, &dist.url(), &["--set", "demo=1"]));
    assert!(
        output.contains("--set demo=1: expected addon.field=value"),
        "{output}"
    );
    let output = failed(&node.install(&spec, &dist.url(), &["--set", "weave.x=1"]));
    assert!(
        output.contains("the spec has no add-on `weave`"),
        "{output}"
    );
    succeeded(&node.install(&spec, &dist.url(), &["--set", "demo.version=1.0.0"]));
    assert_eq!(node.status()["demo"]["current"]["version"], "1.0.0");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = fs_err::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                found.extend(walk(&path));
            }
            found.push(path);
        }
    }
    found
}
