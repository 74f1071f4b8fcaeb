//! The hosts of a fleet (six unless asked) for the rollout and support-bundle tests and benchmark: each a network namespace with
//! its own containerd and Berth root. node-1 installs the spec and serves the fleet; node-2 …
//! node-6 join it with its join command (node-2 and node-4 labelled canary); every node runs
//! `berth fleet agent`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use super::network::{Host, Network};
use super::{Containerd, Server, TestDist, items, text, wait_until};

/// One host of the fleet.
pub struct Machine {
    pub name: String,
    pub host: Host,
    pub containerd: Containerd,
    pub root: MemoryDisk,
    pub logs: tempfile::TempDir,
}

/// A folder on a disk of its own, in memory: what a machine's disk holds and has free is the
/// machine's, not the test host's (the first node refuses nodes' bundles when its disk is
/// nearly full, as a nearly full test host would look).
pub struct MemoryDisk {
    folder: tempfile::TempDir,
}

impl MemoryDisk {
    fn mount() -> MemoryDisk {
        let folder = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2g,mode=0755", "berth-test"])
            .arg(folder.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs on {:?}", folder.path());
        MemoryDisk { folder }
    }

    pub fn path(&self) -> &Path {
        self.folder.path()
    }
}

impl Drop for MemoryDisk {
    fn drop(&mut self) {
        // Lazily: a process of the machine that has not yet ended keeps it busy.
        let _ = std::process::Command::new("umount")
            .arg("--lazy")
            .arg(self.folder.path())
            .status();
    }
}

impl Machine {
    pub fn start(host: Host, name: &str) -> Machine {
        Machine {
            name: name.to_string(),
            containerd: Containerd::start_in(&host),
            host,
            root: MemoryDisk::mount(),
            logs: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self, arguments: &[&str]) -> std::process::Command {
        let mut command = self.host.command(env!("CARGO_BIN_EXE_berth"));
        command
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .env("CONTAINERD_ADDRESS", &self.containerd.socket);
        command
    }

    pub fn berth(&self, arguments: &[&str]) -> Output {
        self.command(arguments).output().unwrap()
    }

    /// `berth` in the background, its error output in this machine's log folder.
    pub fn spawn(&self, arguments: &[&str], log: &str) -> Server {
        Server::spawn(&mut self.command(arguments), &self.logs.path().join(log))
    }

    /// What this machine's demo answers on `port`, asked from this machine.
    pub fn demo(&self, port: u16) -> Option<String> {
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
    pub fn hooks(&self, version: &str) -> Vec<HookRun> {
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
pub struct HookRun {
    pub node: String,
    pub hook: String,
    pub started: std::time::SystemTime,
    pub ended: std::time::SystemTime,
}

pub fn time(value: &serde_json::Value) -> std::time::SystemTime {
    humantime::parse_rfc3339(value.as_str().unwrap()).unwrap()
}

pub fn stdout_of(output: &Output) -> String {
    let printed = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{printed}");
    text(&output.stdout)
}

/// The most runs that overlap at any moment.
pub fn most_at_once(runs: &[&HookRun]) -> usize {
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
pub fn status(first: &Machine, name: &str) -> serde_json::Value {
    let records: Vec<serde_json::Value> = items(
        stdout_of(&first.berth(&["rollout", "status", name, "--json"])).as_bytes(),
        "RolloutList",
    );
    records.into_iter().next().unwrap()
}

/// Each node's state in a rollout record.
pub fn states(record: &serde_json::Value) -> BTreeMap<String, String> {
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
pub fn wait_for_state(
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
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The end of every log the machines' background `berth`s wrote.
pub fn logs(machines: &[Machine]) -> String {
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

pub fn rollout_file(folder: &Path, name: &str, body: &str) -> PathBuf {
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

/// The six hosts, their coordinator and agents. The network goes last.
pub struct Fleet {
    pub machines: Vec<Machine>,
    coordinator: Option<Server>,
    _agents: Vec<Server>,
    _network: Network,
}

impl Fleet {
    /// Six hosts on `spec` from `dist`, all reporting before this returns; their agents
    /// report each second.
    pub fn start(dist: &TestDist, spec: &Path) -> Fleet {
        Self::start_with(dist, spec, Some(1))
    }

    /// As [`Fleet::start`], the agents reporting every `interval` seconds (the agent's
    /// default unless given).
    pub fn start_with(dist: &TestDist, spec: &Path, interval: Option<u64>) -> Fleet {
        Self::start_nodes(dist, spec, 6, interval)
    }

    /// As [`Fleet::start_with`], with `count` hosts.
    pub fn start_nodes(dist: &TestDist, spec: &Path, count: usize, interval: Option<u64>) -> Fleet {
        let mut network = Network::new();
        let machines: Vec<Machine> = (1..=count)
            .map(|number| Machine::start(network.host(), &format!("node-{number}")))
            .collect();
        let first = &machines[0];
        let spec = spec.to_str().unwrap();
        let url = dist.url();
        stdout_of(&first.berth(&["install", "--spec", spec, "--dist", &url]));

        let listen = format!("{}:7433", first.host.address());
        let serve = ["fleet", "serve", "--listen", &listen, "--name", "node-1"];
        let coordinator = Some(first.spawn(&serve, "serve.log"));
        let command = super::fleet_join_command(|| first.berth(&["join-command", "--airgap"]));
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
                    stdout_of(&machine.berth(&words));
                });
            }
        });
        let interval = interval.map(|seconds| seconds.to_string());
        let mut agent = vec!["fleet", "agent"];
        if let Some(interval) = &interval {
            agent.extend(["--interval", interval.as_str()]);
        }
        let agents: Vec<Server> = machines
            .iter()
            .map(|machine| machine.spawn(&agent, "agent.log"))
            .collect();
        wait_until(
            "every node reporting demo 1.0.0",
            Duration::from_secs(60),
            || {
                let nodes: Vec<serde_json::Value> = items(
                    stdout_of(&first.berth(&["nodes", "--json"])).as_bytes(),
                    "NodeList",
                );
                nodes.len() == count
                    && nodes
                        .iter()
                        .all(|node| node["addons"][0]["current"] == "1.0.0")
            },
        );
        Fleet {
            machines,
            coordinator,
            _agents: agents,
            _network: network,
        }
    }

    /// Kills the first node's coordinator (as `kill -9` would) and starts it again.
    pub fn restart_coordinator(&mut self) {
        drop(self.coordinator.take());
        let first = &self.machines[0];
        let listen = format!("{}:7433", first.host.address());
        let serve = ["fleet", "serve", "--listen", &listen, "--name", "node-1"];
        self.coordinator = Some(first.spawn(&serve, "serve-again.log"));
    }
}
