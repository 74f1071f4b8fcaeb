//! Rollouts across six hosts, each a network namespace with its own containerd and Berth root:
//! node-1 installed demo and serves the fleet, node-2 … node-6 joined it (node-2 and node-4
//! labelled canary), and every node runs `berth fleet agent`. The first node moves demo across
//! them: a version that fails on the canaries stops there and rolls back; 1.0.0 → 2.0.0 goes
//! canaries first, two at a time, through a restart of the coordinator; a node cut off and a
//! node that turns Degraded while it soaks count as failed.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use support::network::{Host, Network};
use support::{Containerd, Server, TestDist, text, wait_until};

/// One host of the fleet.
struct Machine {
    name: String,
    host: Host,
    containerd: Containerd,
    root: tempfile::TempDir,
    logs: tempfile::TempDir,
}

impl Machine {
    fn start(host: Host, name: &str) -> Machine {
        Machine {
            name: name.to_string(),
            containerd: Containerd::start_in(&host),
            host,
            root: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, arguments: &[&str]) -> std::process::Command {
        let mut command = self.host.command(env!("CARGO_BIN_EXE_berth"));
        command
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .env("CONTAINERD_ADDRESS", &self.containerd.socket);
        command
    }

    fn berth(&self, arguments: &[&str]) -> Output {
        self.command(arguments).output().unwrap()
    }

    /// `berth` in the background, its error output in this machine's log folder.
    fn spawn(&self, arguments: &[&str], log: &str) -> Server {
        Server::spawn(&mut self.command(arguments), &self.logs.path().join(log))
    }

    /// What this machine's demo answers on `port`, asked from this machine.
    fn demo(&self, port: u16) -> Option<String> {
        let output = self
            .host
            .command("curl")
            .args(["-fsS", "--max-time", "2"])
            .arg(format!("http://127.0.0.1:{port}/"))
            .output()
            .unwrap();
        output
            .status
            .success()
            .then(|| text(&output.stdout).trim().to_string())
    }

    /// The hooks this machine ran for demo `version`, as `hooks.log` records them.
    fn hooks(&self, version: &str) -> Vec<HookRun> {
        let path = self.root.path().join("var/log/berth/hooks.log");
        fs_err::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|line| line["addon"] == "demo" && line["version"] == version)
            .map(|line| HookRun {
                node: self.name.clone(),
                hook: line["hook"].as_str().unwrap().to_string(),
                started: time(&line["started"]),
                ended: time(&line["ended"]),
            })
            .collect()
    }
}

#[derive(Debug)]
struct HookRun {
    node: String,
    hook: String,
    started: std::time::SystemTime,
    ended: std::time::SystemTime,
}

fn time(value: &serde_json::Value) -> std::time::SystemTime {
    humantime::parse_rfc3339(value.as_str().unwrap()).unwrap()
}

fn succeeded(output: &Output) -> String {
    let printed = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{printed}");
    text(&output.stdout)
}

/// The most runs that overlap at any moment.
fn most_at_once(runs: &[&HookRun]) -> usize {
    runs.iter()
        .map(|run| {
            runs.iter()
                .filter(|other| other.started <= run.started && run.started < other.ended)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The rollout's record on the first node.
fn status(first: &Machine, name: &str) -> serde_json::Value {
    let records: Vec<serde_json::Value> = serde_json::from_str(&succeeded(
        &first.berth(&["rollout", "status", name, "--json"]),
    ))
    .unwrap();
    records.into_iter().next().unwrap()
}

/// Each node's state in a rollout record.
fn states(record: &serde_json::Value) -> BTreeMap<String, String> {
    record["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|target| {
            (
                target["node"].as_str().unwrap().to_string(),
                target["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Waits until the rollout is in `state` with no node running or soaking; says where it
/// stood, and what every machine logged, if it never gets there.
fn wait_for_state(
    machines: &[Machine],
    name: &str,
    state: &str,
    timeout: Duration,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let record = status(&machines[0], name);
        let settled = !states(&record)
            .values()
            .any(|state| state == "Running" || state == "Soaking");
        if record["state"] == state && settled {
            return record;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "rollout {name} is not {state} after {timeout:?}: {record:#}\n{}",
                logs(machines)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The end of every log the machines' background `berth`s wrote.
fn logs(machines: &[Machine]) -> String {
    let mut text = String::new();
    for machine in machines {
        for entry in fs_err::read_dir(machine.logs.path()).unwrap() {
            let path = entry.unwrap().path();
            let log = fs_err::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            text.push_str(&format!(
                "--- {} {}\n{}\n",
                machine.name,
                path.file_name().unwrap().to_string_lossy(),
                lines[lines.len().saturating_sub(15)..].join("\n")
            ));
        }
    }
    text
}

fn rollout_file(folder: &Path, name: &str, body: &str) -> PathBuf {
    let path = folder.join(format!("{name}.yaml"));
    fs_err::write(
        &path,
        format!(
            "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata:\n  name: {name}\nspec:\n{body}"
        ),
    )
    .unwrap();
    path
}

/// demo's versions, and 2.0.1: the same fields, but its install and join hooks fail.
fn dist() -> TestDist {
    let (_, mut dist) = TestDist::examples(&["demo"]);
    let failing = "function demo_preflight() { :; }\n\
                   function demo() { bail \"demo 2.0.1 fails on purpose\"; }\n\
                   function demo_join() { bail \"demo 2.0.1 fails on purpose\"; }\n";
    let folder = dist.addon_with_manifest("demo", "2.0.1", "# no image\n", failing);
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    fs_err::copy(
        repository.join("addons/demo/2.0.0/fields.yaml"),
        folder.join("fields.yaml"),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
    dist
}

#[test]
fn demo_rolls_out_across_six_hosts_canaries_first_two_at_a_time() {
    let mut network = Network::new();
    let machines: Vec<Machine> = (1..=6)
        .map(|number| Machine::start(network.host(), &format!("node-{number}")))
        .collect();
    let first = &machines[0];
    let dist = dist();
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let spec = spec.to_str().unwrap();
    let url = dist.url();
    succeeded(&first.berth(&["install", "--spec", spec, "--dist", &url]));

    let listen = format!("{}:7433", first.host.address());
    let serve = ["fleet", "serve", "--listen", &listen, "--name", "node-1"];
    let mut coordinator = Some(first.spawn(&serve, "serve.log"));
    let mut command = String::new();
    wait_until(
        "the fleet's join parameters",
        Duration::from_secs(30),
        || {
            command = text(&first.berth(&["join-command", "--airgap"]).stdout);
            command.contains("fleet-token=")
        },
    );
    let params: Vec<String> = command
        .split_whitespace()
        .skip_while(|word| *word != "-s")
        .skip(1)
        .map(|word| word.trim_matches('\'').to_string())
        .filter(|word| word.contains('='))
        .collect();
    std::thread::scope(|scope| {
        for machine in &machines[1..] {
            let params = &params;
            let (spec, url) = (spec, &url);
            scope.spawn(move || {
                let mut words = vec![
                    "join".to_string(),
                    "--spec".into(),
                    spec.into(),
                    "--dist".into(),
                    url.clone(),
                    format!("node-name={}", machine.name),
                    format!("private-address={}", machine.host.address()),
                ];
                if machine.name == "node-2" || machine.name == "node-4" {
                    words.push("labels=canary=true".into());
                }
                words.extend(params.iter().cloned());
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                succeeded(&machine.berth(&words));
            });
        }
    });
    let _agents: Vec<Server> = machines
        .iter()
        .map(|machine| machine.spawn(&["fleet", "agent", "--interval", "1"], "agent.log"))
        .collect();
    wait_until(
        "six nodes reporting demo 1.0.0",
        Duration::from_secs(60),
        || {
            let nodes: Vec<serde_json::Value> =
                serde_json::from_str(&succeeded(&first.berth(&["nodes", "--json"]))).unwrap();
            nodes.len() == 6
                && nodes
                    .iter()
                    .all(|node| node["addons"][0]["current"] == "1.0.0")
        },
    );
    let files = tempfile::tempdir().unwrap();
    let progressive = |soak: &str, deadline: &str, failures: u32| {
        format!(
            "  decisionGroups:\n    - groupName: canary\n      matchLabels: {{canary: \"true\"}}\n  strategy:\n    type: Progressive\n    progressive:\n      mandatoryDecisionGroups: [{{groupName: canary}}]\n      maxConcurrency: 2\n      minSuccessTime: {soak}\n      progressDeadline: {deadline}\n      maxFailures: {failures}\n"
        )
    };

    // A version that fails on the canaries stops there: no other node starts.
    let broken = rollout_file(
        files.path(),
        "broken",
        &format!(
            "  addon: demo\n  version: 2.0.1\n{}",
            progressive("2s", "2m", 0)
        ),
    );
    succeeded(&first.berth(&["rollout", "apply", broken.to_str().unwrap()]));
    let record = wait_for_state(&machines, "broken", "Stopped", Duration::from_secs(120));
    let stopped = states(&record);
    assert_eq!(stopped["node-2"], "Failed", "{record:#}");
    assert_eq!(stopped["node-4"], "Failed", "{record:#}");
    for node in ["node-1", "node-3", "node-5", "node-6"] {
        assert_eq!(stopped[node], "ToApply", "{node} never started: {record:#}");
    }
    let table = succeeded(&first.berth(&["rollout", "status", "broken"]));
    for node in ["node-2", "node-4"] {
        let row = table.lines().find(|line| line.starts_with(node)).unwrap();
        assert!(row.contains("Failed"), "{table}");
        assert!(row.contains("fails on purpose"), "why it failed: {table}");
    }
    assert!(table.contains("more than maxFailures"), "{table}");
    for machine in &machines {
        let tried = machine.hooks("2.0.1");
        let canary = machine.name == "node-2" || machine.name == "node-4";
        assert_eq!(!tried.is_empty(), canary, "{}: {tried:?}", machine.name);
    }
    // The rollback returns the canaries to 1.0.0.
    let said = succeeded(&first.berth(&["rollout", "rollback", "broken"]));
    assert!(said.contains("node-2 to 1.0.0"), "{said}");
    wait_for_state(&machines, "broken", "Completed", Duration::from_secs(120));
    for machine in &machines {
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 1.0.0"),
            "{}",
            machine.name
        );
    }

    // 1.0.0 → 2.0.0: the canaries, then the primary, then the rest, two at a time; the
    // coordinator is killed on the way and restarted.
    let upgrade = rollout_file(
        files.path(),
        "demo-2",
        &format!(
            "  addon: demo\n  version: 2.0.0\n{}",
            progressive("3s", "3m", 0)
        ),
    );
    succeeded(&first.berth(&["rollout", "apply", upgrade.to_str().unwrap()]));
    wait_until("the canaries to succeed", Duration::from_secs(120), || {
        let states = states(&status(first, "demo-2"));
        states["node-2"] == "Succeeded" && states["node-4"] == "Succeeded"
    });
    drop(coordinator.take());
    let untouched = states(&status(first, "demo-2"));
    let _coordinator = first.spawn(&serve, "serve-again.log");
    let record = wait_for_state(&machines, "demo-2", "Completed", Duration::from_secs(240));
    assert!(
        states(&record).values().all(|state| state == "Succeeded"),
        "{record:#}"
    );
    assert!(
        untouched.values().any(|state| state != "Succeeded"),
        "the coordinator was killed before the rollout ended: {untouched:?}"
    );
    let runs: Vec<HookRun> = machines
        .iter()
        .flat_map(|machine| machine.hooks("2.0.0"))
        .filter(|run| run.hook == "demo" || run.hook == "demo_join")
        .collect();
    for machine in &machines {
        let count = runs.iter().filter(|run| run.node == machine.name).count();
        assert_eq!(count, 1, "{} ran 2.0.0 once: {runs:#?}", machine.name);
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 2.0.0"),
            "{}",
            machine.name
        );
    }
    let all: Vec<&HookRun> = runs.iter().collect();
    assert!(most_at_once(&all) <= 2, "at most two at once: {runs:#?}");
    let of = |node: &str| runs.iter().find(|run| run.node == node).unwrap();
    let canaries_done = of("node-2").ended.max(of("node-4").ended);
    for node in ["node-1", "node-3", "node-5", "node-6"] {
        assert!(
            of(node).started > canaries_done,
            "canaries first: {runs:#?}"
        );
    }
    for node in ["node-3", "node-5", "node-6"] {
        assert!(
            of(node).started > of("node-1").ended,
            "the primary first: {runs:#?}"
        );
    }
    let nodes: Vec<serde_json::Value> =
        serde_json::from_str(&succeeded(&first.berth(&["nodes", "--json"]))).unwrap();
    for node in &nodes {
        let demo = &node["addons"][0];
        assert_eq!(demo["current"], "2.0.0", "{node:#}");
        assert_eq!(demo["rollout"]["desiredVersion"], "2.0.0", "{node:#}");
        assert_eq!(
            demo["configHash"], demo["rollout"]["desiredConfigHash"],
            "the last-applied config is the desired one: {node:#}"
        );
    }
    let table = succeeded(&first.berth(&["nodes"]));
    assert_eq!(table.matches("demo 2.0.0 Succeeded").count(), 6, "{table}");

    // A node cut off counts as failed after progressDeadline; a node that turns Degraded
    // while it soaks counts as failed. The secondaries move demo to port 8081.
    machines[5].host.set_link(false);
    let port = rollout_file(
        files.path(),
        "port",
        "  addon: demo\n  version: 2.0.0\n  placements:\n    - name: secondaries\n      roles: [secondary]\n      config: {port: 8081}\n  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 5\n      minSuccessTime: 25s\n      progressDeadline: 20s\n      maxFailures: 2\n",
    );
    succeeded(&first.berth(&["rollout", "apply", port.to_str().unwrap()]));
    wait_until("node-3 to soak", Duration::from_secs(60), || {
        states(&status(first, "port"))["node-3"] == "Soaking"
    });
    machines[2].containerd.ctr(&[
        "task",
        "kill",
        "--signal",
        "SIGKILL",
        &container_of(&machines[2]),
    ]);
    let record = wait_for_state(&machines, "port", "Completed", Duration::from_secs(120));
    let targets = record["targets"].as_array().unwrap();
    let target = |node: &str| {
        targets
            .iter()
            .find(|target| target["node"] == node)
            .unwrap()
    };
    assert!(
        targets.iter().all(|target| target["node"] != "node-1"),
        "{record:#}"
    );
    assert_eq!(target("node-3")["state"], "Failed", "{record:#}");
    assert!(
        target("node-3")["message"]
            .as_str()
            .unwrap()
            .contains("turned Degraded within minSuccessTime"),
        "{record:#}"
    );
    assert_eq!(target("node-6")["state"], "Failed", "{record:#}");
    assert!(
        target("node-6")["message"]
            .as_str()
            .unwrap()
            .contains("did not succeed within progressDeadline"),
        "{record:#}"
    );
    for node in ["node-2", "node-4", "node-5"] {
        assert_eq!(target(node)["state"], "Succeeded", "{record:#}");
    }
    assert_eq!(machines[1].demo(8081).as_deref(), Some("demo 2.0.0"));
    machines[5].host.set_link(true);
    let log = fs_err::read_to_string(first.root.path().join("var/log/berth/fleet.log")).unwrap();
    assert!(log.contains("node-2: demo-2.1 Succeeded"), "{log}");
}

/// The name demo's hook gives its container on a machine whose root is not /.
fn container_of(machine: &Machine) -> String {
    use sha2::Digest as _;
    let hash = hex::encode(sha2::Sha256::digest(
        machine.root.path().display().to_string().as_bytes(),
    ));
    format!("berth-demo-{}", &hash[..12])
}
