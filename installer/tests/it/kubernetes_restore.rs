//! A real cluster (v1.20.2, as `kubernetes.rs` builds and installs it) backed up on its
//! control-plane node, that machine lost and the backup restored onto a fresh one at another
//! address, the workers that kept running pointed at it by the join command run again; then
//! backed up to S3, encrypted, the node reset completely and restored from the bucket at its
//! own address, the workers untouched: each time the objects are back, the workers Ready
//! again, and every node's `berth status` is as before.

use crate::support;

use std::time::{Duration, Instant};

use age::secrecy::ExposeSecret as _;
use support::kubernetes_cluster::{Cluster, nodes, wait_or_explain};
use support::printed;
use support::s3::{ACCESS_KEY, S3Server, SECRET_KEY};

fn cluster(count: usize) -> Cluster {
    Cluster::start(
        count,
        std::path::Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
    )
}

/// Each add-on's name, version and whether it is Available, as `berth status` gives them.
fn status(cluster: &Cluster, index: usize) -> Vec<(String, String, String)> {
    let output = cluster.shell(index, "berth status -o json");
    assert!(output.status.success(), "{}", printed(&output));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", printed(&output)));
    document["addons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|addon| {
            let available = addon["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|condition| condition["type"] == "Available")
                .map(|condition| condition["status"].as_str().unwrap_or("").to_string())
                .unwrap_or_default();
            (
                addon["name"].as_str().unwrap().to_string(),
                addon["currentVersion"].as_str().unwrap_or("").to_string(),
                available,
            )
        })
        .collect()
}

fn all_ready(cluster: &Cluster) -> bool {
    let nodes = nodes(cluster);
    nodes.len() == 3 && nodes.iter().all(|(_, ready)| *ready)
}

/// The objects made before the backup are there, the workers Ready, and every
/// node's add-ons as `before`: the same versions, Available (probed live).
fn assert_back(cluster: &Cluster, before: &[Vec<(String, String, String)>]) {
    for (kind, name, field, wanted) in [
        ("configmap", "settings", "colour", "blue"),
        ("secret", "password", "password", "aHVudGVyMg=="),
        ("deployment", "web", "spec.replicas", "2"),
    ] {
        let path = if kind == "deployment" {
            field.to_string()
        } else {
            format!("data.{field}")
        };
        let output = cluster.kubectl(&format!("get {kind} {name} -o jsonpath={{.{path}}}"));
        assert_eq!(printed(&output).trim(), wanted, "{kind} {name}");
    }
    wait_or_explain(
        "the workers Ready again",
        Duration::from_secs(300),
        || all_ready(cluster),
        || cluster.account(),
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let after: Vec<_> = (0..3).map(|index| status(cluster, index)).collect();
        if after == before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "berth status: {after:?}, before: {before:?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
fn a_control_plane_lost_or_reset_is_restored_with_its_objects_and_workers_back() {
    let started = Instant::now();
    let mut cluster = cluster(3);
    let install = cluster.shell(
        0,
        &format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id),
    );
    assert!(install.status.success(), "{}", printed(&install));
    let join_command = cluster.shell(0, "berth join-command");
    assert!(join_command.status.success(), "{}", printed(&join_command));
    let join_command = String::from_utf8_lossy(&join_command.stdout)
        .trim()
        .replacen("sudo ", "", 1);
    for index in 1..3 {
        let joined = cluster.shell(index, &join_command);
        assert!(joined.status.success(), "{}", printed(&joined));
    }
    let all_ready = || {
        let nodes = nodes(&cluster);
        nodes.len() == 3 && nodes.iter().all(|(_, ready)| *ready)
    };
    wait_or_explain(
        "three Ready nodes",
        Duration::from_secs(300),
        all_ready,
        || cluster.account(),
    );
    eprintln!("the cluster is up after {:?}", started.elapsed());
    for index in 0..3 {
        cluster.import_busybox(index);
    }

    let objects = "apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {colour: blue}
---
apiVersion: v1
kind: Secret
metadata: {name: password, namespace: default}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: docker.io/library/busybox:berth-test, command: [sleep, '86400']}]
";
    let applied = cluster.shell(
        0,
        &format!(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - <<'EOF'\n{objects}EOF"
        ),
    );
    assert!(applied.status.success(), "{}", printed(&applied));
    let before: Vec<_> = (0..3).map(|index| status(&cluster, index)).collect();
    for (index, addons) in before.iter().enumerate() {
        assert!(
            !addons.is_empty() && addons.iter().all(|(_, _, available)| available == "True"),
            "node-{}: {addons:?}",
            index + 1
        );
    }

    let archive = cluster.work.path().join("backup.tar.zst");
    let backup = cluster.shell(0, &format!("berth backup --output {}", archive.display()));
    assert!(backup.status.success(), "{}", printed(&backup));
    eprintln!(
        "backed up after {:?}: {}",
        started.elapsed(),
        printed(&backup)
    );

    // The control-plane machine lost: a fresh one of its name in its place, at another
    // address.
    let (old_address, new_address) = cluster.replace_machine_elsewhere(0);
    let files = "find /etc/kubernetes /var/lib/etcd /var/lib/berth -type f 2>/dev/null || true";
    let gone = cluster.shell(0, files);
    assert_eq!(
        printed(&gone).trim(),
        "",
        "the fresh machine has the old one's files"
    );

    // A fresh node has no berth yet: the one built here (a node would fetch the dist's).
    let berth = env!("CARGO_BIN_EXE_berth");
    // A damaged backup is refused before anything changes.
    let cut = cluster.work.path().join("cut.tar.zst");
    let bytes = fs_err::read(&archive).unwrap();
    fs_err::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let refused = cluster.shell(0, &format!("{berth} restore {}", cut.display()));
    assert!(!refused.status.success());
    assert!(
        printed(&refused).contains("is not a whole Berth backup"),
        "{}",
        printed(&refused)
    );
    let untouched = cluster.shell(0, files);
    assert_eq!(
        printed(&untouched).trim(),
        "",
        "a refused restore changed the node"
    );

    let restored = cluster.shell(0, &format!("{berth} restore {}", archive.display()));
    assert!(restored.status.success(), "{}", printed(&restored));
    eprintln!("restored after {:?}", started.elapsed());
    let said = printed(&restored);
    assert!(
        said.contains("restoring etcd from the backup's snapshot"),
        "{said}"
    );
    // It ends with the command a new node joins with, the one `berth join-command` prints.
    let join = cluster.shell(0, "berth join-command");
    let command = String::from_utf8_lossy(&join.stdout).trim().to_string();
    assert!(
        command.contains("join.sh") && said.contains(&command),
        "{said}\n{}",
        printed(&join)
    );
    // The workers still reach for the old address, and are told so.
    for line in [
        format!("the cluster's API was at {old_address}:6443 and is at {new_address}:6443 now"),
        format!("node-2, node-3: they reach the cluster's API at {old_address}:6443"),
        "kube-proxy restarted".to_string(),
    ] {
        assert!(said.contains(&line), "{line}: {said}");
    }
    let kubelet_server = |index: usize| {
        let output = cluster.shell(
            index,
            "awk '$1 == \"server:\" { print $2 }' /etc/kubernetes/kubelet.conf",
        );
        printed(&output).trim().to_string()
    };
    // A join command naming an address where no API server of the cluster answers (the
    // installer server's host) changes nothing.
    let server_host = cluster
        .served
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap();
    let elsewhere = join_command.replace(
        &format!("{old_address}:6443"),
        &format!("{server_host}:6443"),
    );
    assert_ne!(elsewhere, join_command);
    let stale = cluster.shell(
        1,
        &format!("{elsewhere} kubernetes-control-plane-timeout=10s"),
    );
    assert!(!stale.status.success(), "{}", printed(&stale));
    assert!(
        printed(&stale).contains("where no API server of this node's cluster answered for 10s"),
        "{}",
        printed(&stale)
    );
    assert_eq!(kubelet_server(1), format!("https://{old_address}:6443"));
    // The restored node's join command points each worker here, resetting nothing.
    let command = command.replacen("sudo ", "", 1);
    for index in 1..3 {
        let followed = cluster.shell(index, &command);
        assert!(followed.status.success(), "{}", printed(&followed));
        assert!(
            printed(&followed).contains("the kubelet follows it"),
            "{}",
            printed(&followed)
        );
        assert_eq!(kubelet_server(index), format!("https://{new_address}:6443"));
    }

    // Restored twice: the node runs the cluster now, and says so.
    let again = cluster.shell(0, &format!("{berth} restore {}", archive.display()));
    assert!(!again.status.success());
    assert!(
        printed(&again).contains("this node already runs a cluster"),
        "{}",
        printed(&again)
    );

    assert_back(&cluster, &before);
    eprintln!(
        "restored from a file, checked after {:?}",
        started.elapsed()
    );

    // The same through S3 (SeaweedFS on a host of the cluster's network), encrypted to a
    // recipient: the restored node backs up to a bucket, is reset again, and comes back from
    // the bucket with the recipient's identity.
    let s3_host = cluster.add_host();
    let s3 = S3Server::start_on(&s3_host);
    s3.create_bucket("backups");
    let identity = age::x25519::Identity::generate();
    let identity_file = cluster.work.path().join("operator.age");
    fs_err::write(
        &identity_file,
        format!("{}\n", identity.to_string().expose_secret()),
    )
    .unwrap();
    let with_s3 = |command: &str| {
        format!(
            "AWS_ACCESS_KEY_ID={ACCESS_KEY} AWS_SECRET_ACCESS_KEY={SECRET_KEY} {berth} {command} --s3-endpoint {}",
            s3.endpoint
        )
    };
    let backup = cluster.shell(
        0,
        &with_s3(&format!(
            "backup --output s3://backups/cluster/ --encrypt-to {}",
            identity.to_public()
        )),
    );
    assert!(backup.status.success(), "{}", printed(&backup));
    let place = String::from_utf8_lossy(&backup.stdout).trim().to_string();
    assert_eq!(
        s3.keys("backups", "cluster/"),
        [place.trim_start_matches("s3://backups/")]
    );
    // This time the node is reset completely (kubeadm's reset leaves its folders, empty).
    let reset = cluster.shell(0, "berth reset --yes");
    assert!(reset.status.success(), "{}", printed(&reset));
    let gone = cluster.shell(0, files);
    assert_eq!(printed(&gone).trim(), "", "the reset left files");
    let refused = cluster.shell(0, &with_s3(&format!("restore {place}")));
    assert!(!refused.status.success());
    assert!(
        printed(&refused).contains("give --identity FILE"),
        "{}",
        printed(&refused)
    );
    let restored = cluster.shell(
        0,
        &with_s3(&format!(
            "restore {place} --identity {}",
            identity_file.display()
        )),
    );
    assert!(restored.status.success(), "{}", printed(&restored));
    let said = printed(&restored);
    assert!(
        said.contains("node-2, node-3: still running, they come back on their own")
            && !said.contains("kube-proxy restarted"),
        "{said}"
    );
    assert_back(&cluster, &before);
    eprintln!("done after {:?}", started.elapsed());
}
