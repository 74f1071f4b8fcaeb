//! Airgap: a bundle made by berth-build, extracted and installed with `bash install.sh airgap`
//! in a network namespace with nothing in it, so any use of the network would fail.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use berth_build::deliver::bundle;
use berth_build::publish::release::Release;
use berth_build::publish::store::{LocalStore, Store};
use berth_formats::spec::InstallerSpec;
use support::{Node, TestDist, require, run, text};

/// Bundles `spec` from the dist, with this build's `berth`, and extracts it into a folder.
fn extracted_bundle(dist: &TestDist, spec: &Path) -> tempfile::TempDir {
    let release = Arc::new(Release::new(
        Store::Local(LocalStore::new(dist.dist.path())),
        String::new(),
        Some(("amd64".into(), PathBuf::from(env!("CARGO_BIN_EXE_berth")))),
    ));
    let spec_text = fs_err::read_to_string(spec).unwrap();
    let parsed = InstallerSpec::parse(spec, &spec_text).unwrap();
    let folder = tempfile::tempdir().unwrap();
    let archive = folder.path().join("bundle.tar.gz");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let plan = bundle::prepare(&release, &parsed, None, &spec_text, "amd64", "", "")
            .await
            .unwrap();
        let file = fs_err::tokio::File::create(&archive).await.unwrap();
        bundle::write(release, &plan, file).await.unwrap();
    });
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .current_dir(folder.path()));
    fs_err::remove_file(&archive).unwrap();
    folder
}

/// `bash install.sh airgap` in the bundle, in a new network namespace (only a down loopback).
fn install_offline(bundle: &Path, node: &Node) -> Output {
    require("unshare", "util-linux");
    Command::new("unshare")
        .args(["-n", "bash", "install.sh", "airgap"])
        .current_dir(bundle)
        .env("BERTH_ROOT", node.root.path())
        .output()
        .unwrap()
}

#[test]
fn a_bundle_installs_with_no_network_at_all() {
    let mut dist = TestDist::new();
    dist.addon(
        "hello",
        "1.0.0",
        "function hello() {\n    echo \"hello from the bundle, AIRGAP=$AIRGAP\"\n}\n",
    );
    let spec = dist.spec("spec.yaml", &[("hello", "version: latest")]);
    let bundle = extracted_bundle(&dist, &spec);

    let node = Node::new();
    let output = install_offline(bundle.path(), &node);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    assert!(all.contains("hello from the bundle, AIRGAP=1"), "{all}");
    let status = node.status();
    assert_eq!(
        status["hello"]["progressing"]["reason"], "Succeeded",
        "{status:?}"
    );
}

#[test]
fn a_bundled_file_that_does_not_match_its_index_is_refused() {
    let mut dist = TestDist::new();
    dist.addon("hello", "1.0.0", "function hello() {\n    echo hello\n}\n");
    let spec = dist.spec("spec.yaml", &[("hello", "version: latest")]);
    let bundle = extracted_bundle(&dist, &spec);
    let changed = bundle.path().join("packages/hello-1.0.0/install.sh");
    fs_err::write(&changed, "function hello() {\n    echo changed\n}\n").unwrap();

    let node = Node::new();
    let output = install_offline(bundle.path(), &node);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains(&changed.display().to_string()),
        "names the file: {all}"
    );
    assert!(all.contains("does not match its expected digest"), "{all}");
    assert!(
        !all.contains("changed\n"),
        "no hook of the changed package ran: {all}"
    );
}

#[test]
fn the_demo_bundle_installs_and_runs_on_a_host_with_loopback_alone() {
    let mut network = support::network::Network::new();
    let host = network.isolated_host();
    let containerd = support::Containerd::start_in(&host);
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let bundle = extracted_bundle(&dist, &spec);
    let root = tempfile::tempdir().unwrap();
    let on_host = |program: &str| {
        let mut command = host.command(program);
        command
            .env("BERTH_ROOT", root.path())
            .env("CONTAINERD_ADDRESS", &containerd.socket)
            .current_dir(bundle.path());
        command
    };

    // With loopback alone the node has no address of its own to publish: the hook says so,
    // and the same command given one continues.
    let output = on_host("bash")
        .args(["install.sh", "airgap"])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains("cannot tell this node's address; pass private-address=IP"),
        "{all}"
    );
    let output = on_host("bash")
        .args(["install.sh", "airgap", "private-address=127.0.0.1"])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    let answer = on_host("curl")
        .args(["-fsS", "--max-time", "2", "http://127.0.0.1:8080/"])
        .output()
        .unwrap();
    assert_eq!(text(&answer.stdout).trim(), "demo 1.0.0");

    // The join command for an airgap node runs the bundle's join.sh.
    let output = on_host(env!("CARGO_BIN_EXE_berth"))
        .args(["join-command", "--airgap"])
        .output()
        .unwrap();
    let command = text(&output.stdout);
    assert!(
        command.starts_with("cat join.sh | sudo bash -s airgap demo-address=127.0.0.1:8080 "),
        "{command}{}",
        text(&output.stderr)
    );
    let output = on_host(env!("CARGO_BIN_EXE_berth"))
        .arg("reset")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
}
