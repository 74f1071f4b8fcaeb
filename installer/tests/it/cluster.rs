//! Several hosts on this machine, each a network namespace with its own address, containerd
//! and Berth root: host A serves the installer (`berth-build serve`), host B installs with
//! `curl -fsSL http://A/<id> | bash`, host C runs the join command B printed.

use crate::support;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use berth_formats::spec::InstallerSpec;
use support::network::{Host, Network};
use support::{Containerd, Server, TestDist, conforms, text, wait_until};

/// The installer's server binary, built beside `berth` when the workspace is built.
fn berth_build_binary() -> PathBuf {
    support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build")
}

/// A host of the cluster: its namespace, containerd and Berth root.
struct Node {
    host: Host,
    containerd: Containerd,
    root: tempfile::TempDir,
}

impl Node {
    fn start(host: Host) -> Node {
        Node {
            containerd: Containerd::start_in(&host),
            host,
            root: tempfile::tempdir().unwrap(),
        }
    }

    /// `bash -c script` on this host, as root would run it there.
    fn shell(&self, script: &str) -> Output {
        self.host
            .command("bash")
            .args(["-c", script])
            .env("BERTH_ROOT", self.root.path())
            .env("CONTAINERD_ADDRESS", &self.containerd.socket)
            .output()
            .unwrap()
    }

    /// `berth` on this host.
    fn berth(&self, arguments: &[&str]) -> Output {
        self.host
            .command(env!("CARGO_BIN_EXE_berth"))
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .env("CONTAINERD_ADDRESS", &self.containerd.socket)
            .output()
            .unwrap()
    }

    /// `berth status -o json`'s add-ons.
    fn status(&self) -> Vec<serde_json::Value> {
        let output = self.berth(&["status", "-o", "json"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        conforms("node-status.v1.json", &document);
        document["addons"].as_array().unwrap().clone()
    }

    /// What `url` answers, fetched from this host.
    fn get(&self, url: &str) -> Option<String> {
        let output = self
            .host
            .command("curl")
            .args(["-fsS", "--max-time", "2", url])
            .output()
            .unwrap();
        output
            .status
            .success()
            .then(|| text(&output.stdout).trim().to_string())
    }
}

fn all(output: &Output) -> String {
    format!("{}{}", text(&output.stdout), text(&output.stderr))
}

#[test]
fn a_node_installs_from_the_served_script_and_another_joins_it() {
    let mut network = Network::new();
    let (server, first, joining) = (network.host(), network.host(), network.host());
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let id = InstallerSpec::load(&spec).unwrap().id();

    let listen = format!("{}:8800", server.address());
    let log = tempfile::tempdir().unwrap();
    let _serving = Server::spawn(
        server
            .command(&berth_build_binary().display().to_string())
            .args([
                "serve",
                "--dist",
                &dist.url(),
                "--listen",
                &listen,
                "--spec",
            ])
            .arg(&spec)
            .arg("--berth")
            .arg(env!("CARGO_BIN_EXE_berth"))
            .arg("--installers")
            .arg(log.path().join("installers")),
        &log.path().join("serve.log"),
    );
    let first = Node::start(first);
    wait_until("the server to answer", Duration::from_secs(30), || {
        first
            .get(&format!("http://{listen}/versions.json"))
            .is_some()
    });

    // B: the online install, as a user runs it.
    let output = first.shell(&format!("curl -fsSL http://{listen}/{id} | bash"));
    let printed = all(&output);
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("downloading"),
        "berth came from the server: {printed}"
    );
    let demo_on_first = format!("http://{}:8080/", first.host.address());
    let joining = Node::start(joining);
    assert_eq!(joining.get(&demo_on_first).as_deref(), Some("demo 1.0.0"));

    // The join command B prints, run on C as printed (root needs no sudo).
    let output = first.berth(&["join-command"]);
    let command = text(&output.stdout).trim().to_string();
    assert!(output.status.success(), "{}", all(&output));
    assert!(
        command.starts_with(&format!(
            "curl -fsSL http://{listen}/{id}/join.sh | sudo bash -s "
        )),
        "{command}"
    );
    assert!(
        command.contains(&format!("demo-address={}:8080", first.host.address())),
        "{command}"
    );
    let output = joining.shell(&command.replacen("sudo ", "", 1));
    let printed = all(&output);
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("demo 1.0.0: demo_join"),
        "the join hook ran: {printed}"
    );
    assert!(
        printed.contains(&format!("joined the demo at {}:8080", first.host.address())),
        "{printed}"
    );
    let demo_on_joining = format!("http://{}:8080/", joining.host.address());
    assert_eq!(first.get(&demo_on_joining).as_deref(), Some("demo 1.0.0"));

    for node in [&first, &joining] {
        let status = node.status();
        assert!(!status.is_empty());
        for addon in &status {
            let condition = |kind: &str| {
                addon["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|condition| condition["type"] == kind)
                    .unwrap()
                    .clone()
            };
            assert_eq!(condition("Progressing")["reason"], "Succeeded", "{addon}");
            assert_eq!(condition("Available")["status"], "True", "{addon}");
        }
    }
    for node in [&joining, &first] {
        let output = node.berth(&["reset"]);
        assert!(output.status.success(), "{}", all(&output));
    }
}
