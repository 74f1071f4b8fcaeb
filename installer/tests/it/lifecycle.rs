//! The node lifecycle on one host with the repository's `demo` add-on, run by a private
//! containerd: install, a failed upgrade, an unknown version, an upgrade, a rollback with the
//! dist gone; join secrets that expire and never reach a log; reset, then a fresh install;
//! flags that change what hooks read.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use support::{
    Containerd, Node, TestDist, failed, files_below, free_port, succeeded, text, wait_until,
};

/// A spec asking for `demo` `version` on `port`.
fn demo_spec(dir: &Path, name: &str, version: &str, port: &str) -> PathBuf {
    let path = dir.join(name);
    fs_err::write(
        &path,
        format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: demo\nspec:\n  demo:\n    version: {version}\n    port: {port}\n"
        ),
    )
    .unwrap();
    path
}

/// What the demo answers on `port`, if anything.
fn answer(port: u16) -> Option<String> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let response = client
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .ok()?;
    response.text().ok().map(|body| body.trim().to_string())
}

fn reasons(node: &Node) -> Vec<String> {
    node.status()["demo"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|transition| transition["reason"].as_str().unwrap().to_string())
        .collect()
}

/// The demo's record says Failed, with `message` in its message; returns the record.
fn assert_failed(node: &Node, message: &str) -> serde_json::Value {
    let status = node.status();
    assert_eq!(status["demo"]["progressing"]["reason"], "Failed");
    assert!(
        status["demo"]["progressing"]["message"]
            .as_str()
            .unwrap()
            .contains(message),
        "{status:?}"
    );
    status["demo"].clone()
}

#[test]
fn demo_upgrades_fails_to_upgrade_and_rolls_back_while_the_status_records_each_transition() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["demo"]);
    let specs = tempfile::tempdir().unwrap();
    let port = free_port();
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let install = |spec: &Path| node.install(spec, &dist.url(), &[]);

    succeeded(&install(&demo_spec(
        specs.path(),
        "v1.yaml",
        "1.0.0",
        &port.to_string(),
    )));
    assert_eq!(answer(port).as_deref(), Some("demo 1.0.0"));

    // A failed upgrade: version 2 with a port out of the range demo declares, refused before
    // any hook runs. Version 1 keeps running.
    let output = failed(&install(&demo_spec(
        specs.path(),
        "bad-port.yaml",
        "2.0.0",
        "99999",
    )));
    assert!(
        output.contains("bad-port.yaml:8: spec.demo.port is 99999, more than 65535"),
        "{output}"
    );
    let demo = assert_failed(&node, "spec.demo.port is 99999, more than 65535");
    assert_eq!(demo["available"]["status"], true);
    assert_eq!(demo["current"]["version"], "1.0.0");
    assert_eq!(answer(port).as_deref(), Some("demo 1.0.0"));

    // An unknown version fails before anything is touched, and says so in the status.
    let output = failed(&install(&demo_spec(
        specs.path(),
        "unknown.yaml",
        "9.9.9",
        &port.to_string(),
    )));
    assert!(output.contains("demo has no version `9.9.9`"), "{output}");
    let demo = assert_failed(&node, "offers: 2.0.0, 1.0.0");
    assert_eq!(demo["desired"], "9.9.9");
    assert_eq!(answer(port).as_deref(), Some("demo 1.0.0"));

    // The upgrade, with a good port.
    succeeded(&install(&demo_spec(
        specs.path(),
        "v2.yaml",
        "2.0.0",
        &port.to_string(),
    )));
    assert_eq!(answer(port).as_deref(), Some("demo 2.0.0"));
    let status = node.status();
    assert_eq!(status["demo"]["current"]["version"], "2.0.0");
    assert_eq!(status["demo"]["last"]["version"], "1.0.0");

    // The rollback reads nothing from the dist: it is gone.
    for file in files_below(dist.dist.path()) {
        fs_err::remove_file(dist.dist.path().join(file)).unwrap();
    }
    let output = succeeded(&node.berth(&["rollback", "demo"]));
    assert!(output.contains("rolling back from 2.0.0"), "{output}");
    assert_eq!(answer(port).as_deref(), Some("demo 1.0.0"));
    let status = node.status();
    assert_eq!(status["demo"]["current"]["version"], "1.0.0");
    assert_eq!(status["demo"]["last"]["version"], "2.0.0");
    assert_eq!(status["demo"]["progressing"]["reason"], "Succeeded");

    assert_eq!(
        reasons(&node),
        [
            "Installing",
            "Succeeded",
            // The port out of range, then the unknown version: each refused before a hook.
            "Failed",
            "Failed",
            "Upgrading",
            "Succeeded",
            "RollingBack",
            "Succeeded"
        ]
    );
    for transition in node.status()["demo"]["history"].as_array().unwrap() {
        let time = transition["time"].as_str().unwrap();
        humantime::parse_rfc3339(time).unwrap_or_else(|_| panic!("a time: {transition}"));
        assert!(!transition["message"].as_str().unwrap().is_empty());
    }

    // Nothing further back to go to than what the node keeps.
    let output = failed(&node.berth(&["rollback", "demo", "--to", "0.5.0"]));
    assert!(
        output.contains("no package of version 0.5.0 is kept on this node; kept: 2.0.0, 1.0.0"),
        "{output}"
    );
}

/// The `key=value` words of a printed join command, after `bash -s`.
fn join_words(command: &str) -> Vec<String> {
    let (_, words) = command.split_once("bash -s ").expect("a join command");
    words.split(' ').map(str::to_string).collect()
}

#[test]
fn join_secrets_expire_and_never_reach_a_log() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["demo"]);
    let specs = tempfile::tempdir().unwrap();
    let first_port = free_port();
    let spec = demo_spec(specs.path(), "demo.yaml", "1.0.0", &first_port.to_string());
    let first = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let scripts = "http://installer.example/abc1234";
    succeeded(&first.install(
        &spec,
        &dist.url(),
        &[
            "--join-ttl",
            "3s",
            "--scripts-url",
            scripts,
            "--param",
            "private-address=127.0.0.1",
        ],
    ));

    assert_eq!(answer(first_port).as_deref(), Some("demo 1.0.0"));
    let join_file = first.install_dir().join("join.json");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        fs_err::metadata(&join_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let command = text(&succeeded_stdout(&first.berth(&["join-command"])));
    assert!(
        command.starts_with(&format!(
            "curl -fsSL {scripts}/join.sh | sudo bash -s demo-address="
        )),
        "{command}"
    );
    let words = join_words(command.trim());
    let token = words
        .iter()
        .find_map(|word| word.strip_prefix("demo-join-token="))
        .expect("the secret is in the command")
        .to_string();
    assert_eq!(token.len(), 32, "{command}");
    let expires = words
        .iter()
        .find_map(|word| word.strip_prefix("join-expires="))
        .expect("the command carries its expiry");
    let expires = humantime::parse_rfc3339(expires).unwrap();

    // Past its time to live the command is refused on the joining node, before any hook.
    wait_until("the join secret to expire", Duration::from_secs(10), || {
        SystemTime::now() > expires
    });
    let second_port = free_port().to_string();
    // Another host's containerd: the demo container has one name per containerd.
    let second_containerd = Containerd::start();
    let joining = Node::new().env("CONTAINERD_ADDRESS", &second_containerd.socket);
    let join = |words: &[String]| {
        let mut arguments = vec![
            "join".to_string(),
            "--spec".into(),
            spec.display().to_string(),
            "--dist".into(),
            dist.url(),
            "--set".into(),
            format!("demo.port={second_port}"),
        ];
        arguments.extend(words.iter().cloned());
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        joining.berth(&arguments)
    };
    let output = failed(&join(&words));
    assert!(output.contains("this join command expired at"), "{output}");
    assert!(
        output.contains("berth join-command"),
        "says what to do: {output}"
    );
    assert!(
        joining.status().is_empty(),
        "nothing ran on the joining node"
    );
    let output = failed(&first.berth(&["join-command"]));
    assert!(
        output.contains("the join secret demo-join-token expired"),
        "{output}"
    );
    // The first node's demo refuses the expired token itself: a command stripped of its
    // expiry gets no further.
    let stripped: Vec<String> = words
        .iter()
        .filter(|word| !word.starts_with("join-expires="))
        .cloned()
        .collect();
    let output = failed(&join(&stripped));
    assert!(
        output.contains("refused this node's join token (HTTP 403)"),
        "{output}"
    );

    // A re-run on the first node publishes the secret again; the fresh command joins.
    succeeded(&first.install(
        &spec,
        &dist.url(),
        &["--param", "private-address=127.0.0.1"],
    ));
    let command = text(&succeeded_stdout(&first.berth(&["join-command"])));
    let output = succeeded(&join(&join_words(command.trim())));
    assert!(output.contains("joined the demo at"), "{output}");
    let status = joining.status();
    assert_eq!(
        status["demo"]["progressing"]["reason"], "Succeeded",
        "{status:?}"
    );
    assert_eq!(
        answer(second_port.parse().unwrap()).as_deref(),
        Some("demo 1.0.0")
    );

    // A wrong token is refused by the first node's demo itself.
    let mut forged = join_words(command.trim());
    for word in &mut forged {
        if word.starts_with("demo-join-token=") {
            *word = "demo-join-token=00000000000000000000000000000000".into();
        }
    }
    let again = Node::new().env("CONTAINERD_ADDRESS", &second_containerd.socket);
    let dist_url = dist.url();
    let port_override = format!("demo.port={}", free_port());
    let mut arguments = vec![
        "join",
        "--spec",
        spec.to_str().unwrap(),
        "--dist",
        &dist_url,
        "--set",
        &port_override,
    ];
    arguments.extend(forged.iter().map(String::as_str));
    let output = failed(&again.berth(&arguments));
    assert!(
        output.contains("refused this node's join token"),
        "{output}"
    );

    // No secret in any log of either node.
    let current = fs_err::read_to_string(first.install_dir().join("demo/join-token")).unwrap();
    for node in [&first, &joining, &again] {
        let logs = node.root.path().join("var/log/berth");
        for file in files_below(&logs) {
            let log = fs_err::read_to_string(logs.join(&file)).unwrap();
            assert!(!log.contains(&token), "{file} holds the first secret");
            assert!(!log.contains(&current), "{file} holds the current secret");
        }
    }
    for node in [&joining, &again] {
        let _ = node.berth(&["reset"]);
    }
}

fn succeeded_stdout(output: &std::process::Output) -> Vec<u8> {
    succeeded(output);
    output.stdout.clone()
}

#[test]
fn reset_runs_the_reset_hooks_removes_what_berth_placed_and_a_fresh_install_works() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["demo"]);
    let specs = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = demo_spec(specs.path(), "demo.yaml", "1.0.0", "8080");
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    // The node's own settings, written by its admin: reset keeps them.
    let node_config = node.root.path().join("etc/berth/node.yaml");
    fs_err::create_dir_all(node_config.parent().unwrap()).unwrap();
    fs_err::write(&node_config, format!("demo:\n  port: {port}\n")).unwrap();
    let before = files_below(node.root.path());

    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        answer(port).as_deref(),
        Some("demo 1.0.0"),
        "node.yaml's port"
    );
    let images = || text(&containerd.ctr(&["images", "ls", "-q"]).stdout);
    assert!(images().contains("docker.io/berth/demo:1.0.0"));
    let upgrade = demo_spec(specs.path(), "demo-2.yaml", "2.0.0", "8080");
    succeeded(&node.install(&upgrade, &dist.url(), &[]));
    assert_eq!(answer(port).as_deref(), Some("demo 2.0.0"));

    let output = succeeded(&node.berth(&["reset"]));
    assert!(output.contains("demo 2.0.0: demo_reset"), "{output}");
    assert_eq!(
        files_below(node.root.path()),
        before,
        "only node.yaml is left"
    );
    // The images of both versions, and the sha256: names containerd gave them, are gone.
    assert!(images().trim().is_empty(), "{}", images());
    assert!(
        text(&containerd.ctr(&["containers", "ls", "-q"]).stdout)
            .trim()
            .is_empty(),
        "the demo container is gone"
    );
    assert_eq!(answer(port), None);
    // Nothing to reset is not an error.
    succeeded(&node.berth(&["reset"]));

    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(answer(port).as_deref(), Some("demo 1.0.0"));
    assert_eq!(node.status()["demo"]["progressing"]["reason"], "Succeeded");
    succeeded(&node.berth(&["reset"]));
}

/// Flags that change what hooks see but no add-on's fields (`public-address=`, `labels=`)
/// re-run the add-ons whose scripts read them, as kURL's every-hook run would reach them:
/// `reader` (its hook writes PUBLIC_ADDRESS and NODE_LABELS to a file) runs again when either
/// is given anew, and not when it is given again the same or left out; `bystander`, which
/// reads neither, is left as applied throughout.
#[test]
fn flags_that_change_what_hooks_read_run_those_hooks_again() {
    let mut dist = TestDist::new();
    let reader = dist.addon_with_manifest(
        "reader",
        "1.0.0",
        "# no image\n",
        "function reader() {\n    mkdir -p \"$DIR/reader\"\n    echo \"${PUBLIC_ADDRESS:-} ${NODE_LABELS:-}\" >>\"$DIR/reader/runs\"\n}\n",
    );
    dist.package(&reader);
    let bystander = dist.addon_with_manifest(
        "bystander",
        "1.0.0",
        "# no image\n",
        "function bystander() {\n    mkdir -p \"$DIR/bystander\"\n    echo ran >>\"$DIR/bystander/runs\"\n}\n",
    );
    dist.package(&bystander);
    dist.write_versions();
    let spec = dist.spec(
        "readers.yaml",
        &[
            ("reader", "version: 1.0.0"),
            ("bystander", "version: 1.0.0"),
        ],
    );
    let node = Node::new();
    let runs = |name: &str| {
        fs_err::read_to_string(node.install_dir().join(name).join("runs"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let decisions = |extra: &[&str]| node.decisions(&spec, &dist.url(), extra);
    let install = |extra: &[&str]| succeeded(&node.install(&spec, &dist.url(), extra));
    install(&[]);
    assert_eq!(runs("reader"), [" "]);

    let address = ["--param", "public-address=10.0.0.9"];
    let planned = decisions(&address);
    assert!(
        planned.contains(&("reader".into(), "Reapply".into()))
            && planned.contains(&("bystander".into(), "AlreadyApplied".into())),
        "{planned:?}"
    );
    let said = install(&address);
    assert!(
        said.contains("its hooks read PUBLIC_ADDRESS, which this run's flags set anew"),
        "{said}"
    );
    assert_eq!(runs("reader"), [" ", "10.0.0.9 "]);
    // The same flag again, or none: nothing to apply.
    install(&address);
    install(&[]);
    assert_eq!(runs("reader").len(), 2, "{:?}", runs("reader"));
    // Another value, and another flag.
    install(&[
        "--param",
        "public-address=10.0.0.10",
        "--param",
        "labels=zone=edge",
    ]);
    assert_eq!(runs("reader").last().unwrap(), "10.0.0.10 zone=edge");
    assert_eq!(runs("reader").len(), 3);
    assert_eq!(runs("bystander"), ["ran"]);
    // The record keeps digests, never the values (a flag may carry a secret).
    let record = fs_err::read_to_string(node.install_dir().join("state/reader.json")).unwrap();
    assert!(
        record.contains("NODE_LABELS") && !record.contains("zone=edge"),
        "{record}"
    );
}
