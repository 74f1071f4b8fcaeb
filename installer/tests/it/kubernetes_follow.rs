//! Berth's Kubernetes join hook on a node that joined before, apart from a cluster (a machine
//! of its own, for a private `/etc`): a node whose API address no longer answers follows the
//! join command's address only to an API server whose certificate the node's own cluster CA
//! signed for that address; an address that still answers is kept; a control plane is not
//! moved; every refusal leaves the kubelet's kubeconfig as it was. (The cluster restore test
//! runs the same on a real cluster whose control plane moved.)

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use support::certificates::{authority, certificate};
use support::machine::Machine;
use support::network::Network;
use support::{Server, printed};

const KUBECONFIG: &str = "/etc/kubernetes/kubelet.conf";

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0E=
    server: {server}
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    user: default-auth
  name: default-context
current-context: default-context
kind: Config
users:
- name: default-auth
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
"
    )
}

/// `server` (a shell command run in `folder`, inside the machine), once it listens on `port`.
fn listening(machine: &Machine, folder: &Path, server: &str, port: u16) -> Server {
    let started = Server::spawn(
        machine
            .command("bash")
            .args(["-c", &format!("cd {} && exec {server}", folder.display())]),
        &folder.join(format!("server-{port}.log")),
    );
    support::wait_until("a server to listen", Duration::from_secs(10), || {
        machine
            .command("bash")
            .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")])
            .status()
            .is_ok_and(|status| status.success())
    });
    started
}

/// The hook's step with the join command's `address`, the kubelet's kubeconfig naming
/// `current`; what it said, and the kubeconfig after.
fn follow(machine: &Machine, current: &str, address: &str) -> (Output, String) {
    machine.write(KUBECONFIG, kubeconfig(current));
    let library = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common");
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../builder/hooks/kubernetes.sh");
    let output = machine
        .command("setsid")
        .args([
            "bash",
            "-c",
            "set -e; for file in \"$LIBRARY\"/*.sh; do . \"$file\"; done; . \"$HOOKS\"; __kubernetes_follow_api_address",
        ])
        .env("LIBRARY", library)
        .env("HOOKS", hooks)
        .env("KUBERNETES_MASTER_ADDR", address)
        .env("KUBERNETES_CONTROL_PLANE_TIMEOUT", "5s")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (output, machine.read(KUBECONFIG).unwrap())
}

/// [`follow`] refused, saying `why`, the kubeconfig left naming `current`.
fn refused(machine: &Machine, current: &str, address: &str, why: &str) {
    let (said, after) = follow(machine, current, address);
    assert!(!said.status.success(), "{address}: {}", printed(&said));
    assert!(
        printed(&said).contains(why),
        "{address}: {}",
        printed(&said)
    );
    assert_eq!(after, kubeconfig(current), "{address}");
}

#[test]
fn a_joined_node_follows_a_moved_api_only_to_a_server_its_own_ca_vouches_for() {
    support::require("openssl", "openssl");
    let mut network = Network::new();
    let machine = Machine::start(network.host(), "worker");
    let folder = tempfile::tempdir().unwrap();
    let folder = folder.path();
    authority(folder, "cluster");
    authority(folder, "other");
    for (name, issuer, address) in [
        ("restored", "cluster", "127.0.0.1"),
        ("rogue", "other", "127.0.0.1"),
        ("misnamed", "cluster", "10.9.9.9"),
    ] {
        certificate(
            folder,
            name,
            issuer,
            &format!("basicConstraints=CA:FALSE\nsubjectAltName=IP:{address}\n"),
        );
    }
    fs_err::write(folder.join("healthz"), "ok\n").unwrap();
    machine.write(
        "/etc/kubernetes/pki/ca.crt",
        fs_err::read(folder.join("cluster.crt")).unwrap(),
    );
    let mut servers = Vec::new();
    for (name, port) in [("restored", 6444), ("rogue", 6445), ("misnamed", 6446)] {
        servers.push(listening(
            &machine,
            folder,
            &format!(
                "openssl s_server -quiet -WWW -cert {name}.crt -key {name}.key -accept 127.0.0.1:{port}"
            ),
            port,
        ));
    }
    // The kubelet's health port, which the hook waits on after the restart.
    servers.push(listening(
        &machine,
        folder,
        "python3 -m http.server 10248 --bind 127.0.0.1",
        10248,
    ));
    let dead = "https://127.0.0.1:6999";

    // Not a host and port: refused before anything is read.
    refused(&machine, dead, "a#b:6443", "is not a host and port");

    // A kubeconfig that names no server is not guessed at.
    refused(&machine, "", "127.0.0.1:6444", "names no API server");

    // The address the node has, named again, where nothing answers: not reported joined.
    refused(
        &machine,
        dead,
        "127.0.0.1:6999",
        "which the join command names too, did not answer for 5s",
    );

    // An address that still answers is kept (a load balancer the kubelet reaches the API by).
    let (said, after) = follow(&machine, "https://127.0.0.1:6444", "127.0.0.1:6446");
    assert!(said.status.success(), "{}", printed(&said));
    assert!(
        printed(&said).contains("which answers"),
        "{}",
        printed(&said)
    );
    assert_eq!(after, kubeconfig("https://127.0.0.1:6444"));

    // A server of another CA, and one of the cluster's CA for another address: nothing changes.
    // (6445: another CA; 6446: the cluster's CA for another address; 6447: no server.)
    for address in ["127.0.0.1:6445", "127.0.0.1:6446", "127.0.0.1:6447"] {
        refused(
            &machine,
            dead,
            address,
            "where no API server of this node's cluster answered for 5s",
        );
    }

    // A control plane is not pointed elsewhere.
    machine.write("/etc/kubernetes/manifests/etcd.yaml", "kind: Pod\n");
    refused(
        &machine,
        dead,
        "127.0.0.1:6444",
        "this control-plane node reaches the cluster at",
    );
    machine.shell("rm /etc/kubernetes/manifests/etcd.yaml");

    // The restored API server, its certificate the cluster CA's for the address: followed,
    // the kubeconfig otherwise as it was, still the node's alone.
    let (said, after) = follow(&machine, dead, "127.0.0.1:6444");
    assert!(said.status.success(), "{}", printed(&said));
    assert!(
        printed(&said).contains("the kubelet follows it"),
        "{}",
        printed(&said)
    );
    assert_eq!(after, kubeconfig("https://127.0.0.1:6444"));
    assert_eq!(
        machine.shell(&format!("stat -c %a {KUBECONFIG}")).trim(),
        "600"
    );
    // At the address the command names already, nothing is done.
    let (said, after) = follow(&machine, "https://127.0.0.1:6444", "127.0.0.1:6444");
    assert!(said.status.success(), "{}", printed(&said));
    assert!(!printed(&said).contains("follows"), "{}", printed(&said));
    assert_eq!(after, kubeconfig("https://127.0.0.1:6444"));
}
