//! Add-on health with real parts: the demo add-on's container on a real containerd, killed and
//! started again; a component that hangs; and `berth health`'s exit status.

use crate::support;

use std::time::{Duration, Instant};

use support::*;

fn demo_spec(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    fs_err::create_dir_all(dir).unwrap();
    let path = dir.join("demo.yaml");
    fs_err::write(
        &path,
        format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: demo\nspec:\n  demo:\n    version: 1.0.0\n    port: {port}\n"
        ),
    )
    .unwrap();
    path
}

/// `berth status` as a table, and the line of `name`.
fn status_line(node: &Node, name: &str) -> (String, String) {
    let output = node.berth(&["status"]);
    let table = printed(&output);
    let line = table
        .lines()
        .find(|line| line.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {table}"))
        .to_string();
    (table, line)
}

#[test]
fn a_killed_demo_container_degrades_demo_and_running_the_installer_again_repairs_it() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["demo"]);
    let specs = tempfile::tempdir().unwrap();
    let spec = demo_spec(specs.path(), free_port());
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    // A second node on the same containerd: its demo container is not this node's.
    let other = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let other_spec = demo_spec(&specs.path().join("other"), free_port());
    succeeded(&other.install(&other_spec, &dist.url(), &[]));

    let (table, line) = status_line(&node, "demo");
    assert!(
        table.contains("AVAILABLE  DEGRADED  PROGRESSING"),
        "{table}"
    );
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[4..], ["True", "False", "Succeeded"], "{table}");
    succeeded(&node.berth(&["health", "demo"]));
    let health = &node.status()["demo"]["health"];
    let container = &health["components"][0];
    assert_eq!(container["name"], "container");
    assert_eq!(container["matchLabels"]["berth.addon"], "demo");
    // Shown as probed: its values rendered.
    let root = container["matchLabels"]["berth.root"].as_str().unwrap();
    assert!(
        !root.contains("{{") && root.starts_with('/'),
        "{container:#}"
    );
    assert_eq!(container["refs"][0]["kind"], "container");
    assert_eq!(container["refs"][0]["conditions"][0]["reason"], "Running");
    assert_eq!(
        container["refs"].as_array().unwrap().len(),
        1,
        "only this node's container: {container:#}"
    );

    // The container's task killed: demo is Degraded, naming its container.
    let id = container["refs"][0]["name"].as_str().unwrap().to_string();
    let ctr = |arguments: &[&str]| {
        let mut all = vec!["--namespace", "k8s.io"];
        all.extend(arguments);
        containerd.ctr(&all)
    };
    ctr(&["tasks", "kill", "--signal", "SIGKILL", &id]);
    wait_until("the demo task to stop", Duration::from_secs(20), || {
        !text(&ctr(&["tasks", "ls"]).stdout)
            .lines()
            .any(|line| line.starts_with(&id) && line.contains("RUNNING"))
    });
    let (table, line) = status_line(&node, "demo");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[4..6], ["False", "True"], "{table}");
    assert!(
        table.contains("demo: Degraded: not healthy: container"),
        "{table}"
    );
    // Its answer is down too, said in a few words: the cause, not the HTTP client's chain.
    let health = node.status()["demo"]["health"].clone();
    let answers = health["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|component| component["name"] == "answers")
        .unwrap()["conditions"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        answers.ends_with("Connection refused (os error 111)")
            && !answers.contains("error sending request"),
        "{answers}"
    );
    let output = node.berth(&["health", "demo"]);
    assert_eq!(output.status.code(), Some(1), "{}", printed(&output));
    assert!(
        printed(&output).contains("container"),
        "{}",
        printed(&output)
    );

    // The installer run again repairs it: the plan says so and why, the run starts the
    // container again, and both transitions are in the history.
    let plan = printed(&node.berth(&[
        "plan",
        "--spec",
        spec.to_str().unwrap(),
        "--dist",
        &dist.url(),
    ]));
    assert!(
        plan.contains("Repair") && plan.contains("not healthy: container"),
        "{plan}"
    );
    assert_eq!(
        node.decisions(&spec, &dist.url(), &[]),
        [("demo".to_string(), "Repair".to_string())]
    );
    succeeded(&node.install(&spec, &dist.url(), &[]));
    succeeded(&node.berth(&["health", "demo"]));
    // Healthy again, a run again has nothing to do.
    assert_eq!(
        node.decisions(&spec, &dist.url(), &[]),
        [("demo".to_string(), "AlreadyApplied".to_string())]
    );
    let history = node.status()["demo"]["health"]["history"].clone();
    let degraded: Vec<(String, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|transition| transition["type"] == "Degraded")
        .map(|transition| {
            (
                transition["status"].as_str().unwrap().to_string(),
                transition["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        degraded,
        [
            ("False".to_string(), "AsExpected".to_string()),
            ("True".into(), "ComponentUnhealthy".into()),
            ("False".into(), "AsExpected".into()),
        ],
        "{history:#}"
    );
    // demo, its container's PID 1, stops on SIGTERM (ctr's default signal), as a kubelet's
    // stop asks.
    ctr(&["tasks", "kill", &id]);
    wait_until("demo to stop on SIGTERM", Duration::from_secs(10), || {
        !text(&ctr(&["tasks", "ls"]).stdout)
            .lines()
            .any(|line| line.starts_with(&id) && line.contains("RUNNING"))
    });
    succeeded(&node.berth(&["reset"]));
    succeeded(&other.berth(&["reset"]));
}

/// A port something else listens on: demo's preflight refuses it at once, naming it. One held
/// on another local address passes the preflight, and demo's own `bind failed` is shown
/// as soon as its container stops, not after a silent wait.
#[test]
fn a_port_in_use_is_named_before_anything_runs_and_a_failed_bind_says_why() {
    let (_, dist) = TestDist::examples(&["demo"]);
    let specs = tempfile::tempdir().unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let node = Node::new();
    let refused = failed(&node.install(&demo_spec(specs.path(), port), &dist.url(), &[]));
    assert!(
        refused.contains(&format!("port {port} is in use on this node")),
        "{refused}"
    );
    drop(held);

    let containerd = Containerd::start();
    let held = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let spec = demo_spec(&specs.path().join("bind"), port);
    let refused = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(
        refused.contains(&format!(
            "demo 1.0.0 did not answer on port {port}: its container stopped"
        )),
        "{refused}"
    );
    // What it said, as far as its output was copied before it ended: containerd's shim may
    // lose the output of a container that ends at once, or copy only the first of the three
    // writes demo's line is made of (`demo: `, the reason, the line's end).
    let said = refused.split("; it said: ").nth(1).unwrap_or_default();
    let copied = said.split("(a port").next().unwrap_or_default().trim();
    assert!(
        "demo: bind failed: is the port in use?".starts_with(copied),
        "{refused}"
    );
    drop(held);
    let _ = node.berth(&["reset"]);
}

#[test]
fn a_component_that_hangs_times_out_while_the_other_add_ons_status_prints() {
    let mut dist = TestDist::new();
    let hangs = dist.addon("hangs", "1.0.0", "function hangs() { :; }\n");
    fs_err::write(
        hangs.join("health.yaml"),
        "components:\n  - name: stuck\n    command: {run: [sleep, '30']}\n    timeout: 1s\n  - name: quick\n    command: {run: ['true']}\n",
    )
    .unwrap();
    dist.package(&hangs);
    let fine = dist.addon("fine", "1.0.0", "function fine() { :; }\n");
    fs_err::write(
        fine.join("health.yaml"),
        "components:\n  - name: runs\n    command: {run: ['true']}\n",
    )
    .unwrap();
    dist.package(&fine);
    dist.write_versions();
    let spec = dist.spec(
        "installer.yaml",
        &[("hangs", "version: 1.0.0"), ("fine", "version: 1.0.0")],
    );
    // Installed without waiting for health: `stuck` never answers.
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &["--health-timeout", "0"]));

    let started = Instant::now();
    let (table, line) = status_line(&node, "hangs");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "status took {took:?}");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[4..6], ["False", "True"], "{table}");
    assert!(table.contains("no answer within 1.0s"), "{table}");
    let (_, fine_line) = status_line(&node, "fine");
    let words: Vec<&str> = fine_line.split_whitespace().collect();
    assert_eq!(words[4..6], ["True", "False"], "{table}");
}

/// An add-on whose version `version` is healthy while the file `healthy` exists (each version
/// with a health.yaml that says so), and whose hooks do nothing else.
fn addon_with_health(dist: &mut TestDist, version: &str, healthy: &std::path::Path) {
    let folder = dist.addon("flaky", version, "function flaky() { :; }\n");
    fs_err::write(
        folder.join("health.yaml"),
        format!(
            "components:\n  - name: marker\n    command: {{run: [test, -e, '{}']}}\n",
            healthy.display()
        ),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
}

#[test]
fn an_upgrade_that_never_becomes_healthy_is_failed_and_rollback_brings_back_a_healthy_version() {
    let marks = tempfile::tempdir().unwrap();
    let good = marks.path().join("good");
    fs_err::write(&good, "").unwrap();
    let mut dist = TestDist::new();
    addon_with_health(&mut dist, "1.0.0", &good);
    addon_with_health(&mut dist, "2.0.0", &marks.path().join("never"));
    let first = dist.spec("first.yaml", &[("flaky", "version: 1.0.0")]);
    let second = dist.spec("second.yaml", &[("flaky", "version: 2.0.0")]);
    let node = Node::new();
    succeeded(&node.install(&first, &dist.url(), &[]));
    assert_eq!(node.status()["flaky"]["progressing"]["reason"], "Succeeded");

    let started = Instant::now();
    let error = failed(&node.install(&second, &dist.url(), &["--health-timeout", "2"]));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        error.contains("flaky 2.0.0: not healthy within 2s after its hooks: not healthy: marker"),
        "{error}"
    );
    let status = node.status();
    let flaky = &status["flaky"];
    assert_eq!(flaky["progressing"]["reason"], "Failed", "{flaky:#}");
    assert!(
        flaky["progressing"]["message"]
            .as_str()
            .unwrap()
            .contains("marker"),
        "{flaky:#}"
    );
    assert_eq!(flaky["available"]["reason"], "Unhealthy", "{flaky:#}");
    assert_eq!(flaky["current"]["version"], "2.0.0");
    assert_eq!(flaky["last"]["version"], "1.0.0");
    assert_eq!(node.berth(&["health", "flaky"]).status.code(), Some(1));
    // Run again, the failed spec retries the add-on.
    let plan = node.decisions(&second, &dist.url(), &[]);
    assert_eq!(plan, [("flaky".to_string(), "Retry".to_string())]);

    // Back to 1.0.0, which is healthy: Succeeded and Available.
    succeeded(&node.berth(&["rollback", "flaky"]));
    let status = node.status();
    assert_eq!(status["flaky"]["current"]["version"], "1.0.0");
    assert_eq!(status["flaky"]["progressing"]["reason"], "Succeeded");
    succeeded(&node.berth(&["health", "flaky"]));
}

#[test]
fn status_watch_probes_again_every_interval() {
    let mut dist = TestDist::new();
    let marks = tempfile::tempdir().unwrap();
    let healthy = marks.path().join("healthy");
    fs_err::write(&healthy, "").unwrap();
    addon_with_health(&mut dist, "1.0.0", &healthy);
    let spec = dist.spec("first.yaml", &[("flaky", "version: 1.0.0")]);
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &[]));

    // Watched without a terminal: each round is printed after the last.
    let log = marks.path().join("watch.log");
    let mut watch = node
        .command(&["status", "--watch", "--interval", "1"])
        .stdout(fs_err::File::create(&log).unwrap().into_parts().0)
        .spawn()
        .unwrap();
    let shown = || fs_err::read_to_string(&log).unwrap_or_default();
    let flaky_lines = || -> Vec<String> {
        shown()
            .lines()
            .filter(|line| line.starts_with("flaky "))
            .map(str::to_string)
            .collect()
    };
    wait_until("a first round", Duration::from_secs(20), || {
        flaky_lines()
            .first()
            .is_some_and(|line| line.contains(" True "))
    });
    // The component fails between two rounds: a later round shows it.
    fs_err::remove_file(&healthy).unwrap();
    wait_until(
        "a round showing flaky Degraded",
        Duration::from_secs(20),
        || {
            flaky_lines().last().is_some_and(|line| {
                line.split_whitespace().collect::<Vec<_>>()[4..6] == ["False", "True"]
            })
        },
    );
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(flaky_lines().len() >= 2, "{}", shown());
}

#[test]
fn crafted_health_values_stop_at_their_bounds_and_tell_nothing_of_other_files() {
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("shadow");
    fs_err::write(&secret, "root:SECRET-HASH:19000:0:99999:7:::\n").unwrap();
    let mut dist = TestDist::new();
    let folder = dist.addon("crafted", "1.0.0", "function crafted() { :; }\n");
    fs_err::write(
        folder.join("fields.yaml"),
        "fields:\n  - name: where\n    type: string\n    default: '8080'\n    help: the port the probe asks\n",
    )
    .unwrap();
    fs_err::write(
        folder.join("health.yaml"),
        format!(
            "components:\n  - name: loops\n    command: {{run: ['true', '{{% for a in range(10000) %}}{{% for b in range(10000) %}}{{% endfor %}}{{% endfor %}}']}}\n  - name: pid\n    process: {{pidFile: '{}'}}\n  - name: web\n    http: {{url: 'http://127.0.0.1:{{{{ where }}}}/health'}}\n",
            secret.display()
        ),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
    // The spec's value would move the http probe to another host.
    let spec = dist.spec(
        "installer.yaml",
        &[("crafted", "version: 1.0.0, where: '80@example.invalid'")],
    );
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &["--health-timeout", "0"]));

    let started = Instant::now();
    let output = node.berth(&["health", "crafted"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let said = printed(&output);
    assert!(!said.contains("SECRET-HASH"), "{said}");
    let health = &node.status()["crafted"]["health"];
    let component = |name: &str| {
        health["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|component| component["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {health:#}"))
            .clone()
    };
    let reason = |name: &str| {
        let component = component(name);
        let found = if component["refs"]
            .as_array()
            .is_some_and(|refs| !refs.is_empty())
        {
            component["refs"][0]["conditions"][0].clone()
        } else {
            component["conditions"][0].clone()
        };
        (
            found["reason"].as_str().unwrap_or_default().to_string(),
            found["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    let (why, message) = reason("loops");
    assert_eq!(why, "BadValue", "{message}");
    assert!(message.contains("fuel"), "{message}");
    let (why, message) = reason("pid");
    assert_eq!(why, "BadPidFile", "{message}");
    let (why, message) = reason("web");
    assert_eq!(why, "BadValue", "{message}");
    assert!(
        message.contains("move the probe off 127.0.0.1"),
        "{message}"
    );
    // The record is root's alone.
    use std::os::unix::fs::PermissionsExt as _;
    let records = node.root.path().join("var/lib/berth/health");
    let record = fs_err::read_dir(&records)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mode = fs_err::metadata(&record).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", record.display());
    let mode = fs_err::metadata(&records).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// kURL's add-ons run their install hook on the primary alone: `banner` (no `_join` hook)
/// added by an upgrade runs on the first node, and on a node that joined the upgrade neither
/// runs it nor waits for what only the primary's hook makes (its output file); banner is
/// Available there, saying its component lives on the primary. On the primary it is judged
/// as ever: the file removed, it is Degraded naming the component.
#[test]
fn a_component_made_by_the_primary_s_hook_is_not_waited_for_on_a_node_that_joined() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["hello", "banner"]);
    let before = dist.spec("hello.yaml", &[("hello", "version: 1.0.0")]);
    let after = dist.spec(
        "hello-banner.yaml",
        &[("hello", "version: 1.0.0"), ("banner", "version: 1.0.0")],
    );
    let primary = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let joined = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    succeeded(&primary.install(&before, &dist.url(), &[]));
    succeeded(&joined.run("join", &before, &dist.url(), &[]));

    succeeded(&primary.run("upgrade", &after, &dist.url(), &[]));
    // A wait would last the whole minute and fail; the upgrade ends at once instead.
    let started = Instant::now();
    let output =
        succeeded(&joined.run("upgrade", &after, &dist.url(), &["--health-timeout", "60s"]));
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the joined node waited for banner's component: {output}"
    );
    assert!(!output.contains("banner 1.0.0: banner\n"), "{output}");
    let status = joined.status();
    let banner = &status["banner"];
    assert_eq!(banner["current"]["version"], "1.0.0", "{banner}");
    assert_eq!(banner["current"]["role"], "worker", "{banner}");
    assert_eq!(banner["current"]["hooksRan"], "nothing", "{banner}");
    let available = &banner["health"]["conditions"][0];
    assert_eq!(available["type"], "Available", "{banner}");
    assert_eq!(available["status"], "True", "{banner}");
    assert_eq!(available["reason"], "JudgedElsewhere", "{banner}");
    let message = available["message"].as_str().unwrap();
    assert!(
        message.contains("last-run") && message.contains("primary"),
        "{message}"
    );
    let output = joined.berth(&["health", "banner"]);
    assert!(output.status.success(), "{}", printed(&output));

    // On the primary, the component is its own: judged, and missed when it goes.
    let status = primary.status();
    assert_eq!(status["banner"]["current"]["role"], "primary");
    assert_eq!(status["banner"]["current"]["hooksRan"], "install");
    assert_eq!(
        status["banner"]["health"]["conditions"][0]["status"],
        "True"
    );
    fs_err::remove_file(primary.install_dir().join("banner/last-output")).unwrap();
    let output = primary.berth(&["health", "banner"]);
    assert!(!output.status.success(), "{}", printed(&output));
    assert!(
        printed(&output).contains("last-run"),
        "{}",
        printed(&output)
    );
}
