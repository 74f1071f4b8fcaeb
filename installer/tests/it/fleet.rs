//! The fleet with real `berth` processes on loopback: the first node serving, other nodes
//! registering with the join command's fleet parameters and reporting their add-ons, and
//! every forged or replayed message refused and logged.

use crate::support;

use std::time::Duration;

use berth_fleet::channel::Pin;
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
    let nodes: Vec<serde_json::Value> = items(
        &succeeded_bytes(&first.berth(&["nodes", "--json"])),
        "NodeList",
    );
    nodes
        .into_iter()
        .map(|node| (node["name"].as_str().unwrap().to_string(), node))
        .collect()
}

fn succeeded_bytes(output: &std::process::Output) -> Vec<u8> {
    succeeded(output);
    output.stdout.clone()
}

/// A rollout file named `name` in `folder`.
fn rollout_file_at(folder: &std::path::Path, name: &str, body: &str) -> String {
    let path = folder.join(format!("{name}.yaml"));
    fs_err::write(
        &path,
        format!(
            "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata: {{name: {name}}}\nspec:\n{body}"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
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
    let command = fleet_join_command(|| first.berth(&["join-command", "--airgap"]));
    let (address, pin, token) = (
        join_param(&command, "fleet-address"),
        join_param(&command, "fleet-pin"),
        join_param(&command, "fleet-token"),
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
    // The first node saves reports in batches, a fraction of a second apart.
    wait_until("the report saved", Duration::from_secs(5), || {
        registered(&first)["node-2"]["addons"][0]["name"] == "hello"
    });
    let nodes = registered(&first);
    assert_eq!(nodes["first"]["role"], "primary", "{nodes:#?}");
    // Listed as the others are: the host, not the fleet's port.
    assert_eq!(nodes["first"]["address"], "127.0.0.1");
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
    let second_machine =
        fs_err::read_to_string(second.install_dir().join("fleet/machine-id")).unwrap();
    assert_eq!(
        row("node-2")[..5],
        [
            "node-2",
            &second_machine[..12],
            "secondary",
            "10.0.0.2",
            "canary=true"
        ],
        "{table}"
    );
    assert!(
        row("node-2").ends_with(&["hello".into(), "1.0.0".into(), "Succeeded".into()]),
        "{table}"
    );
    assert_eq!(row("first")[2], "primary", "{table}");

    // The agent reports on its own, every interval: the last contact moves on.
    let reported = registered(&first)["node-2"]["lastContact"].clone();
    let mut agent = spawn_quietly(&mut second.command(&["fleet", "agent", "--interval", "1"]));
    wait_until("a report from the agent", Duration::from_secs(30), || {
        registered(&first)["node-2"]["lastContact"] != reported
    });
    let _ = agent.kill();
    let _ = agent.wait();

    // A stranger: a wrong token; the worker token for the primary role; then the right one
    // under a name another node has: names are labels, so it registers as a node of its own.
    let stranger = installed_node(&dist, &spec);
    let error = failed(&register(&stranger, &pin, "0123456789abcdef", "node-3"));
    assert!(
        error.contains("the join token is wrong or has expired"),
        "{error}"
    );
    let mut primary_claim = stranger.command(&[
        "fleet",
        "register",
        "--first-node",
        &address,
        "--pin",
        &pin,
        "--token",
        &token,
        "--name",
        "node-3",
        "--role",
        "primary",
    ]);
    let error = failed(&primary_claim.output().unwrap());
    assert!(
        error.contains("a primary registers with fleet-primary-token"),
        "{error}"
    );
    succeeded(&register(&stranger, &pin, &token, "node-2"));
    let machine = |node: &Node| {
        fs_err::read_to_string(node.install_dir().join("fleet/machine-id"))
            .unwrap()
            .trim()
            .to_string()
    };
    let (second_id, stranger_id) = (machine(&second), machine(&stranger));
    assert_ne!(second_id, stranger_id);
    let listed: Vec<serde_json::Value> = items(
        &succeeded_bytes(&first.berth(&["nodes", "--json"])),
        "NodeList",
    );
    assert_eq!(
        listed
            .iter()
            .filter(|node| node["name"] == "node-2")
            .count(),
        2,
        "{listed:#?}"
    );
    // Two nodes are named node-2: removing one asks which; by machine id, it goes.
    let error = failed(&first.berth(&["fleet", "remove", "node-2"]));
    assert!(error.contains("2 nodes are named node-2"), "{error}");
    assert!(error.contains(&stranger_id), "{error}");
    let said = succeeded(&first.berth(&["fleet", "remove", &stranger_id]));
    assert!(
        said.contains(&format!("removed node-2 (machine {stranger_id})")),
        "{said}"
    );
    // Removed, it is not heard any more, and its agent stops saying why.
    let error = failed(&stranger.berth(&["fleet", "report"]));
    assert!(
        error.contains("the first node does not know this node"),
        "{error}"
    );
    let agent = stranger
        .command(&["fleet", "agent", "--interval", "1"])
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(1), "{}", text(&agent.stderr));
    assert!(
        text(&agent.stderr).contains("run the join command again"),
        "{}",
        text(&agent.stderr)
    );
    // Nor may it ask for work; and a registered node may speak only of work it was given.
    let ask = |node: &Node, request: &Request| {
        let layout = berth::fleet::paths(&berth::node::layout::Layout::new(node.root.path()));
        let first_node = berth_fleet::node::first_node(&layout).unwrap();
        berth_fleet::node::exchange(&layout, &first_node, request).unwrap()
    };
    let Response::NotRegistered { reason } = ask(&stranger, &Request::Poll { wait_ms: 0 }) else {
        panic!("a stranger's poll was answered");
    };
    assert!(reason.contains("is not registered"), "{reason}");
    assert_eq!(ask(&second, &Request::Poll { wait_ms: 0 }), Response::Idle);
    // A long poll with no work for the node is held, then answered Idle.
    let asked = std::time::Instant::now();
    assert_eq!(
        ask(&second, &Request::Poll { wait_ms: 700 }),
        Response::Idle
    );
    assert!(
        asked.elapsed() >= Duration::from_millis(700),
        "{:?}",
        asked.elapsed()
    );
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
        "a primary registers with fleet-primary-token",
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

    // A node that joins with the control-plane command's parameters registers as it joins,
    // as a primary: that command alone carries the primary token.
    let control_plane = succeeded(&first.berth(&["join-command", "--airgap", "--control-plane"]));
    let primary_token = join_param(&control_plane, "fleet-primary-token");
    assert!(
        !command.contains("fleet-primary-token"),
        "a worker's command carries no primary token: {command}"
    );
    let joining = Node::new();
    let output = joining.run(
        "join",
        &spec,
        &dist.url(),
        &[
            &format!("fleet-address={address}"),
            &format!("fleet-pin={pin}"),
            &format!("fleet-token={token}"),
            &format!("fleet-primary-token={primary_token}"),
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
    // Stopped, the first node says so: what it knows is shown with a warning, and a rollout
    // that nothing would carry out is refused.
    let listed = first.berth(&["nodes"]);
    assert!(listed.status.success());
    assert!(
        text(&listed.stderr).contains("`berth fleet serve` is not running"),
        "{}",
        text(&listed.stderr)
    );
    let idle = rollout_file_at(
        first.root.path(),
        "idle",
        "  addon: hello\n  version: 1.0.0\n",
    );
    let error = failed(&first.berth(&["rollout", "apply", &idle]));
    assert!(
        error.contains("`berth fleet serve` is not running on this node"),
        "{error}"
    );
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
        (
            join_param(&again, "fleet-pin"),
            join_param(&again, "fleet-token")
        ),
        (pin.clone(), token.clone())
    );
    assert_eq!(registered(&first).len(), 3);

    // Fleet commands on a node that is no first node say so.
    for command in [&["nodes"][..], &["rollout", "status"]] {
        let error = failed(&second.berth(command));
        assert!(
            error.contains("this node is not a fleet's first node"),
            "{error}"
        );
    }

    // A rollout of an add-on or version the dist does not offer is refused at once.
    let files = tempfile::tempdir().unwrap();
    let rollout = |name: &str, body: &str| rollout_file_at(files.path(), name, body);
    let misspelled = rollout("typo", "  addon: helo\n  version: 1.0.0\n");
    let error = failed(&first.berth(&["rollout", "apply", &misspelled]));
    assert!(
        error.contains("offers no add-on helo; it offers: hello"),
        "{error}"
    );
    let missing = rollout("typo", "  addon: hello\n  version: 9.9.9\n");
    let error = failed(&first.berth(&["rollout", "apply", &missing]));
    assert!(
        error.contains("offers no version 9.9.9 of hello; it offers: 1.0.0"),
        "{error}"
    );

    // node-2's agent was stopped before any work: its node fails at the deadline, and the
    // rollout stops there (maxFailures 0 by default).
    let stalled = rollout(
        "stalled",
        "  addon: hello\n  version: 1.0.0\n  placements: [{name: two, roles: [secondary], matchLabels: {canary: 'true'}}]\n  strategy: {type: Progressive, progressive: {progressDeadline: 3s}}\n",
    );
    succeeded(&first.berth(&["rollout", "apply", &stalled]));
    let status = |name: &str| -> serde_json::Value {
        let records: Vec<serde_json::Value> = items(
            &succeeded_bytes(&first.berth(&["rollout", "status", name, "--json"])),
            "RolloutList",
        );
        records[0].clone()
    };
    wait_until(
        "the stalled rollout to stop",
        Duration::from_secs(30),
        || status("stalled")["state"] == "Stopped",
    );
    let record = status("stalled");
    assert_eq!(record["targets"][0]["node"], "node-2");
    assert_eq!(record["targets"][0]["state"], "Failed");
    let message = record["targets"][0]["message"].as_str().unwrap();
    assert!(message.contains("progressDeadline (3s)"), "{message}");
    assert!(message.contains("never took the work"), "{message}");
    let table = succeeded(&first.berth(&["rollout", "status", "stalled"]));
    assert!(
        table.contains("strategy: Progressive, maxConcurrency 1, minSuccessTime 0s, progressDeadline 3s, maxFailures 0"),
        "{table}"
    );

    // node-4 says its run succeeded, but its report shows hello at another version: Failed,
    // naming it. Applied again after a delete, its work has a new id.
    let lying = rollout(
        "lying",
        "  addon: hello\n  version: 1.0.0\n  placements: [{name: edge, roles: [primary], matchLabels: {zone: edge}}]\n",
    );
    let mut work_ids = Vec::new();
    for _ in 0..2 {
        let _ = first.berth(&["rollout", "delete", "lying"]);
        succeeded(&first.berth(&["rollout", "apply", &lying]));
        let Response::Work { work } = ask(&joining, &Request::Poll { wait_ms: 10_000 }) else {
            panic!("node-4 was given no work");
        };
        let mut addons = Vec::new();
        for outcome in [Outcome::Running, Outcome::Succeeded] {
            let progress = Request::Progress {
                work: work.id.clone(),
                outcome,
                message: String::new(),
                addons: addons.clone(),
            };
            assert_eq!(ask(&joining, &progress), Response::Accepted);
            addons = vec![berth_formats::fleet::AddonReport {
                name: "hello".into(),
                desired: Some("1.0.0".into()),
                current: Some("0.9.0".into()),
                last: None,
                progressing: "Succeeded".into(),
                available: None,
                degraded: None,
                config_hash: None,
                node_config: Default::default(),
            }];
        }
        let record = status("lying");
        assert_eq!(record["state"], "Completed", "{record:#}");
        assert_eq!(record["targets"][0]["state"], "Failed", "{record:#}");
        let message = record["targets"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("said its run succeeded, but hello is at 0.9.0, not 1.0.0"),
            "{message}"
        );
        work_ids.push(work.id);
    }
    assert_ne!(work_ids[0], work_ids[1]);

    // Nodes on one host, joined without a node name, share its host name and all register;
    // one removed joins again under the same machine id.
    let host_name = berth_fleet::node::host_name().unwrap();
    let worker_params = [
        format!("fleet-address={address}"),
        format!("fleet-pin={pin}"),
        format!("fleet-token={token}"),
    ];
    let worker_params: Vec<&str> = worker_params.iter().map(String::as_str).collect();
    let same_host: Vec<Node> = (0..3).map(|_| Node::new()).collect();
    for node in &same_host {
        succeeded(&node.run("join", &spec, &dist.url(), &worker_params));
    }
    let named = |nodes: &[serde_json::Value]| {
        nodes
            .iter()
            .filter(|node| node["name"] == host_name.as_str())
            .count()
    };
    let listed: Vec<serde_json::Value> = items(
        &succeeded_bytes(&first.berth(&["nodes", "--json"])),
        "NodeList",
    );
    assert_eq!(named(&listed), 3, "{listed:#?}");
    let gone = machine(&same_host[0]);
    succeeded(&first.berth(&["fleet", "remove", &gone[..8]]));
    let listed: Vec<serde_json::Value> = items(
        &succeeded_bytes(&first.berth(&["nodes", "--json"])),
        "NodeList",
    );
    assert_eq!(named(&listed), 2);
    succeeded(&same_host[0].run("join", &spec, &dist.url(), &worker_params));
    let listed: Vec<serde_json::Value> = items(
        &succeeded_bytes(&first.berth(&["nodes", "--json"])),
        "NodeList",
    );
    assert_eq!(named(&listed), 3);
    assert!(listed.iter().any(|node| node["machineId"] == gone.as_str()));
    succeeded(&same_host[0].berth(&["fleet", "report"]));

    // The first node is not reset while it serves the fleet; once the server stops, it is.
    let refused = failed(&first.berth(&["reset", "--yes"]));
    assert!(
        refused.contains("berth fleet serve runs on this node; nothing was changed"),
        "{refused}"
    );
    assert!(first.install_dir().join("fleet/nodes.json").exists());
    assert!(first.status().contains_key("hello"));
    let _ = server.kill();
    let _ = server.wait();
    succeeded(&first.berth(&["reset", "--yes"]));
    assert!(!first.install_dir().exists());
}

/// A fleet upgrade installs the package its rollout pinned when it was applied: a package and
/// its `.sha256` replaced in the dist since are refused, and none of their hooks runs. The
/// genuine package back, the rollout applied again goes through, and a rollback returns the
/// node to the package it ran before, by the digest it kept.
#[test]
fn a_fleet_upgrade_installs_only_the_package_its_rollout_pinned() {
    let mut dist = TestDist::new();
    dist.addon("hello", "1.0.0", "function hello() { :; }\n");
    let genuine = "function hello() { :; }\n";
    let version_two = dist.addon("hello", "2.0.0", genuine);
    let spec = dist.spec("hello.yaml", &[("hello", "version: 1.0.0")]);
    let first = installed_node(&dist, &spec);
    let address = format!("127.0.0.1:{}", free_port());
    let mut server = spawn_quietly(
        &mut first.command(&["fleet", "serve", "--listen", &address, "--name", "first"]),
    );
    let command = fleet_join_command(|| first.berth(&["join-command", "--airgap"]));
    let second = installed_node(&dist, &spec);
    succeeded(&second.berth(&[
        "fleet",
        "register",
        "--first-node",
        &address,
        "--pin",
        &join_param(&command, "fleet-pin"),
        "--token",
        &join_param(&command, "fleet-token"),
        "--name",
        "node-2",
        "--label",
        "canary=true",
    ]));
    succeeded(&second.berth(&["fleet", "report"]));
    wait_until("node-2's report saved", Duration::from_secs(5), || {
        registered(&first)["node-2"]["addons"][0]["current"] == "1.0.0"
    });
    let files = tempfile::tempdir().unwrap();
    let rollout = rollout_file_at(
        files.path(),
        "pinned",
        "  addon: hello\n  version: 2.0.0\n  placements: [{name: canaries, matchLabels: {canary: 'true'}}]\n",
    );
    let target = || -> serde_json::Value {
        let records: Vec<serde_json::Value> = items(
            &succeeded_bytes(&first.berth(&["rollout", "status", "pinned", "--json"])),
            "RolloutList",
        );
        records[0]["targets"][0].clone()
    };
    let finished = || {
        let state = target()["state"].clone();
        state == "Failed" || state == "Succeeded"
    };
    succeeded(&first.berth(&["rollout", "apply", &rollout]));

    // After the apply, someone who can write the dist swaps hello 2.0.0 and its .sha256.
    let marker = files.path().join("tampered-hook-ran");
    fs_err::write(
        version_two.join("install.sh"),
        format!("function hello() {{ touch '{}'; }}\n", marker.display()),
    )
    .unwrap();
    dist.package(&version_two);
    let mut agent = spawn_quietly(&mut second.command(&["fleet", "agent", "--interval", "1"]));
    wait_until("node-2's work to end", Duration::from_secs(60), finished);
    let failed_target = target();
    assert_eq!(failed_target["state"], "Failed", "{failed_target:#}");
    let message = failed_target["message"].as_str().unwrap();
    assert!(
        message.contains("does not match its expected digest"),
        "{message}"
    );
    assert!(!marker.exists(), "the swapped package's hook ran");
    assert_eq!(second.status()["hello"]["current"]["version"], "1.0.0");

    // The genuine package back, the same rollout applied again installs it.
    fs_err::write(version_two.join("install.sh"), genuine).unwrap();
    dist.package(&version_two);
    succeeded(&first.berth(&["rollout", "delete", "pinned"]));
    succeeded(&first.berth(&["rollout", "apply", &rollout]));
    wait_until("node-2's work to end", Duration::from_secs(60), finished);
    assert_eq!(target()["state"], "Succeeded", "{:#}", target());
    assert_eq!(second.status()["hello"]["current"]["version"], "2.0.0");
    assert!(!marker.exists());

    // Rolled back, node-2 runs hello 1.0.0 again, from the package whose digest it kept,
    // though the dist's 1.0.0 has been swapped meanwhile.
    let version_one = dist.addons.root().join("addons/hello/1.0.0");
    fs_err::write(
        version_one.join("install.sh"),
        format!("function hello() {{ touch '{}'; }}\n", marker.display()),
    )
    .unwrap();
    dist.package(&version_one);
    succeeded(&first.berth(&["rollout", "rollback", "pinned"]));
    wait_until("node-2 rolled back", Duration::from_secs(60), finished);
    let rolled_back = target();
    assert_eq!(rolled_back["state"], "Succeeded", "{rolled_back:#}");
    assert_eq!(second.status()["hello"]["current"]["version"], "1.0.0");
    assert!(!marker.exists(), "the swapped package's hook ran");

    // With the vendor's key kept on the first node, a rollout pins only what the key signed:
    // a package swapped with its .sha256 re-signed by another key is refused at the apply,
    // before any node is asked to move.
    let vendor = berth_formats::signature::SigningKey::generate().unwrap();
    let intruder = berth_formats::signature::SigningKey::generate().unwrap();
    berth_build::publish::sign::sign_dist(
        &vendor,
        dist.dist.path(),
        berth_build::publish::sign::DEFAULT_VALIDITY,
    )
    .unwrap();
    // Kept for the dist's origin, as an install given the key (or a served script) keeps it:
    // the rollout reads the keys kept for the dist the node installed from.
    let origin = berth::dist::Dist::parse(&dist.url()).unwrap().origin();
    let kept = first
        .root
        .path()
        .join("etc/berth/trusted-keys")
        .join(berth::dist::trust::origin_folder(&origin));
    fs_err::create_dir_all(&kept).unwrap();
    fs_err::write(kept.join("vendor.pub"), vendor.public().to_pem()).unwrap();
    let signed = rollout_file_at(files.path(), "signed", "  addon: hello\n  version: 2.0.0\n");
    fs_err::write(
        version_two.join("install.sh"),
        "function hello() { :; } # 2\n",
    )
    .unwrap();
    dist.package(&version_two);
    berth_build::publish::sign::sign_file(
        &intruder,
        &dist.dist.path().join("hello-2.0.0.tar.gz.sha256"),
    )
    .unwrap();
    let refused = failed(&first.berth(&["rollout", "apply", &signed]));
    assert!(
        refused.contains("hello-2.0.0.tar.gz.sha256 is not signed by a trusted key")
            && refused.contains(&vendor.public().fingerprint()),
        "{refused}"
    );
    assert!(
        !text(&first.berth(&["rollout", "list"]).stdout).contains("signed"),
        "a refused rollout is not recorded"
    );
    // Signed by the vendor, it is taken.
    berth_build::publish::sign::sign_file(
        &vendor,
        &dist.dist.path().join("hello-2.0.0.tar.gz.sha256"),
    )
    .unwrap();
    succeeded(&first.berth(&["rollout", "apply", &signed]));

    let _ = agent.kill();
    let _ = agent.wait();
    let _ = server.kill();
    let _ = server.wait();
}
