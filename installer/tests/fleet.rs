//! The fleet with real `berth` processes on loopback: the first node serving, other nodes
//! registering with the join command's fleet parameters and reporting their add-ons, and
//! every forged or replayed message refused and logged.

mod support;

use std::time::Duration;

use berth::fleet::channel::Pin;
use berth_formats::fleet::{Outcome, Request, Response};
use support::*;

/// A node with the `hello` add-on installed from `dist`.
fn installed_node(dist: &TestDist, spec: &std::path::Path) -> Node {
    let node = Node::new();
    succeeded(&node.install(spec, &dist.url(), &[]));
    node
}

/// The first node's registry, by node name.
fn registered(first: &Node) -> std::collections::BTreeMap<String, serde_json::Value> {
    let nodes: Vec<serde_json::Value> =
        serde_json::from_slice(&succeeded_bytes(&first.berth(&["nodes", "--json"]))).unwrap();
    nodes
        .into_iter()
        .map(|node| (node["name"].as_str().unwrap().to_string(), node))
        .collect()
}

fn succeeded_bytes(output: &std::process::Output) -> Vec<u8> {
    succeeded(output);
    output.stdout.clone()
}

/// The `key=value` words of a join command.
fn param(command: &str, key: &str) -> String {
    command
        .split_whitespace()
        .find_map(|word| word.trim_matches('\'').strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {command}"))
        .to_string()
}

#[test]
fn nodes_register_with_the_first_node_report_and_forged_messages_are_refused() {
    let mut dist = TestDist::new();
    let folder = dist.addon("hello", "1.0.0", "function hello() { :; }\n");
    dist.package(&folder);
    dist.write_versions();
    let spec = dist.spec("hello.yaml", &[("hello", "version: 1.0.0")]);
    let first = installed_node(&dist, &spec);
    let port = free_port();
    let mut server = spawn_quietly(&mut first.command(&[
        "fleet",
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--name",
        "first",
    ]));
    let mut command = String::new();
    wait_until(
        "the fleet's join parameters",
        Duration::from_secs(30),
        || {
            command = text(&first.berth(&["join-command", "--airgap"]).stdout);
            command.contains("fleet-token=")
        },
    );
    let (address, pin, token) = (
        param(&command, "fleet-address"),
        param(&command, "fleet-pin"),
        param(&command, "fleet-token"),
    );
    assert_eq!(address, format!("127.0.0.1:{port}"));
    assert!(command.contains("join-expires="), "{command}");
    let register = |node: &Node, pin: &str, token: &str, name: &str| {
        node.berth(&[
            "fleet",
            "register",
            "--first-node",
            &address,
            "--pin",
            pin,
            "--token",
            token,
            "--name",
            name,
            "--label",
            "canary=true",
            "--address",
            "10.0.0.2",
        ])
    };

    let second = installed_node(&dist, &spec);
    assert_eq!(
        succeeded(&register(&second, &pin, &token, "node-2")).trim(),
        "registered as node-2"
    );
    assert_eq!(
        succeeded(&second.berth(&["fleet", "report"])).trim(),
        "reported 1 add-on(s)"
    );
    let nodes = registered(&first);
    assert_eq!(nodes["first"]["role"], "primary", "{nodes:#?}");
    assert_eq!(nodes["first"]["address"], address);
    let record = &nodes["node-2"];
    assert_eq!(record["role"], "secondary");
    assert_eq!(record["labels"]["canary"], "true");
    assert_eq!(record["addons"][0]["name"], "hello");
    assert_eq!(record["addons"][0]["current"], "1.0.0");
    assert_eq!(record["addons"][0]["progressing"], "Succeeded");
    let certificate = fs_err::read(second.install_dir().join("fleet/fleet.crt")).unwrap();
    assert_eq!(record["pin"], Pin::of(&certificate).0);
    assert_eq!(nodes["first"]["addons"][0]["current"], "1.0.0");
    let table = succeeded(&first.berth(&["nodes"]));
    let row = |name: &str| -> Vec<String> {
        let line = table.lines().find(|line| line.starts_with(name)).unwrap();
        line.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(
        row("node-2")[..4],
        ["node-2", "secondary", "10.0.0.2", "canary=true"],
        "{table}"
    );
    assert!(
        row("node-2").ends_with(&["hello".into(), "1.0.0".into(), "Succeeded".into()]),
        "{table}"
    );
    assert_eq!(row("first")[..2], ["first", "primary"], "{table}");

    // The agent reports on its own, every interval: the last contact moves on.
    let reported = registered(&first)["node-2"]["lastContact"].clone();
    let mut agent = spawn_quietly(&mut second.command(&["fleet", "agent", "--interval", "1"]));
    wait_until("a report from the agent", Duration::from_secs(30), || {
        registered(&first)["node-2"]["lastContact"] != reported
    });
    let _ = agent.kill();
    let _ = agent.wait();

    // A stranger: a wrong token, then the right one (as if it had read the join command) but
    // the name of a node it has not the key of, then a report from a key never registered.
    let stranger = installed_node(&dist, &spec);
    let error = failed(&register(&stranger, &pin, "0123456789abcdef", "node-3"));
    assert!(
        error.contains("the join token is wrong or has expired"),
        "{error}"
    );
    let error = failed(&register(&stranger, &pin, &token, "node-2"));
    assert!(error.contains("registered with another key"), "{error}");
    fs_err::create_dir_all(stranger.install_dir().join("fleet")).unwrap();
    fs_err::copy(
        second.install_dir().join("fleet/first-node.json"),
        stranger.install_dir().join("fleet/first-node.json"),
    )
    .unwrap();
    let error = failed(&stranger.berth(&["fleet", "report"]));
    assert!(error.contains("is not registered"), "{error}");
    // Nor may it ask for work; and a registered node may speak only of work it was given.
    let ask = |node: &Node, request: &Request| {
        let layout = berth::layout::Layout::new(node.root.path());
        let first_node = berth::fleet::node::first_node(&layout).unwrap();
        berth::fleet::node::exchange(&layout, &first_node, request).unwrap()
    };
    let Response::Refused { reason } = ask(&stranger, &Request::Poll) else {
        panic!("a stranger's poll was answered");
    };
    assert!(reason.contains("is not registered"), "{reason}");
    assert_eq!(ask(&second, &Request::Poll), Response::Idle);
    let forged = Request::Progress {
        work: "demo-2.1".into(),
        outcome: Outcome::Succeeded,
        message: String::new(),
        addons: Vec::new(),
    };
    let Response::Refused { reason } = ask(&second, &forged) else {
        panic!("progress of work never given was taken");
    };
    assert!(reason.contains("no rollout gave work demo-2.1"), "{reason}");
    // A first node whose key is not the pinned one is not trusted.
    let error = failed(&register(
        &stranger,
        &pin.replace("sha256:", "sha256:0"),
        &token,
        "node-3",
    ));
    assert!(error.contains("this node was given"), "{error}");

    let log = fs_err::read_to_string(first.root.path().join("var/log/berth/fleet.log")).unwrap();
    for reason in [
        "the join token is wrong or has expired",
        "registered with another key",
        "is not registered",
        "no rollout gave work demo-2.1",
    ] {
        let line = log.lines().find(|line| line.contains(reason));
        assert!(
            line.is_some_and(|line| line.contains("refused 127.0.0.1:")),
            "{reason}: {log}"
        );
    }
    assert_eq!(
        registered(&first).keys().collect::<Vec<_>>(),
        ["first", "node-2"]
    );

    // A node that joins with the command's parameters registers as it joins.
    let joining = Node::new();
    let output = joining.run(
        "join",
        &spec,
        &dist.url(),
        &[
            &format!("fleet-address={address}"),
            &format!("fleet-pin={pin}"),
            &format!("fleet-token={token}"),
            "node-name=node-4",
            "labels=zone=edge,canary=true",
            "private-address=10.0.0.4",
            "control-plane",
        ],
    );
    succeeded(&output);
    assert!(
        text(&output.stderr).contains("registered with the first node as node-4"),
        "{}",
        text(&output.stderr)
    );
    let nodes = registered(&first);
    let joined = &nodes["node-4"];
    assert_eq!(joined["role"], "primary", "{joined:#}");
    assert_eq!(joined["labels"]["zone"], "edge");
    assert_eq!(joined["labels"]["canary"], "true");
    assert_eq!(joined["address"], "10.0.0.4");

    // The first node restarted keeps its key, its token and its registry: the join command
    // handed out still works, and the nodes go on reporting.
    let _ = server.kill();
    let _ = server.wait();
    let mut server = spawn_quietly(
        &mut first.command(&["fleet", "serve", "--listen", &address, "--name", "first"]),
    );
    wait_until(
        "the first node serving again",
        Duration::from_secs(30),
        || second.berth(&["fleet", "report"]).status.success(),
    );
    let again = succeeded(&first.berth(&["join-command", "--airgap"]));
    assert_eq!(
        (param(&again, "fleet-pin"), param(&again, "fleet-token")),
        (pin.clone(), token.clone())
    );
    assert_eq!(registered(&first).len(), 3);
    let _ = server.kill();
    let _ = server.wait();
}
