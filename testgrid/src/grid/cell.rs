//! One cell of the grid: a test on an OS, step by step, as kURL's testgrid runs it: the spec
//! posted to the installer server, nodes booted, preinit and pre-install scripts, the install
//! on the first primary (online through the served script, or airgap from the bundle), the
//! others joined with the command it prints, the post-install script, a reboot of the
//! secondaries (Berth's), the upgrade on every node and the post-upgrade script; then each
//! node's state and logs are collected, whatever happened.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use super::hosts::HostsFile;
use super::node::{Node, Outcome};
use super::qemu::{Qemu, Vm};
use super::result::{CellResult, StepResult, StepStatus, cell_folder};
use super::server::Server;
use super::specs::{OsSpec, TestSpec, installer_yaml};

/// Where a node keeps an unpacked bundle, and the upgrade's.
const BUNDLE_DIR: &str = "/root/berth-bundle";
const UPGRADE_BUNDLE_DIR: &str = "/root/berth-bundle-upgrade";

/// What `collect` keeps of a node's pods' containers: the last lines of each log the kubelet
/// keeps (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`), which hold what
/// a control plane that never answered said (the crictl a node has may not list containers).
const COLLECT_CONTAINERS: &str = "for log in /var/log/pods/*/*/*.log; do
    [ -f \"$log\" ] || continue
    echo \"==== $log\"
    tail -n 25 \"$log\"
done";

/// Every script the grid runs starts here: bash's strict mode, `berth` found where an
/// online install links it or beside an airgap bundle's scripts, and `sudo` (which the
/// printed join commands start with) run as root where a node has none.
const PRELUDE: &str = "set -euo pipefail\nexport PATH=\"$PATH:/usr/local/bin:/root/berth-bundle\"\ncommand -v sudo >/dev/null || sudo() { \"$@\"; }\ncd /root\n";

/// Where a cell's nodes come from.
pub enum Provider {
    Qemu(Qemu),
    Hosts(HostsFile),
    Namespaces,
}

impl Provider {
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Qemu(_) => "qemu",
            Provider::Hosts(_) => "ssh",
            Provider::Namespaces => "netns",
        }
    }
}

/// A cell's nodes, alive as long as this value (VMs stop when it is dropped; namespace
/// machines end before their network).
struct Machines {
    nodes: Vec<Box<dyn Node>>,
    /// Each node's address on the cell's network, where the provider chose it (a vendor's
    /// hosts resolve each other's names already).
    addresses: Option<Vec<String>>,
    _vms: Vec<Vm>,
    _network: Option<berth_testkit::network::Network>,
}

/// Timeouts of a cell's steps.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub step: Duration,
    pub reboot: Duration,
}

/// Runs one cell; what happened is in its result, whatever failed.
pub fn run(
    test: &TestSpec,
    os: &OsSpec,
    provider: &Provider,
    server: &Server,
    out: &Path,
    timeouts: Timeouts,
) -> CellResult {
    let folder = cell_folder(&test.name, &os.id);
    let dir = out.join(&folder);
    let _ = fs_err::remove_dir_all(&dir);
    let mut cell = Cell {
        test,
        os,
        dir: dir.clone(),
        steps: Vec::new(),
        timeouts,
        started: Instant::now(),
    };
    if let Err(error) = fs_err::create_dir_all(&dir) {
        cell.record("setup", None, Err(error.into()), Instant::now());
    } else {
        let result = cell.steps(provider, server);
        if let Err(error) = result
            && cell
                .steps
                .iter()
                .all(|step| step.status == StepStatus::Passed)
        {
            cell.record("run", None, Err(error), Instant::now());
        }
    }
    cell.finish(provider.name(), folder)
}

struct Cell<'a> {
    test: &'a TestSpec,
    os: &'a OsSpec,
    dir: PathBuf,
    steps: Vec<StepResult>,
    timeouts: Timeouts,
    started: Instant,
}

impl Cell<'_> {
    fn log(&self, node: Option<&str>) -> PathBuf {
        self.dir.join(format!("{}.log", node.unwrap_or("runner")))
    }

    fn record(
        &mut self,
        name: &str,
        node: Option<&str>,
        result: anyhow::Result<String>,
        started: Instant,
    ) -> bool {
        let (status, message) = match result {
            Ok(message) => (StepStatus::Passed, message),
            Err(error) => (StepStatus::Failed, format!("{error:#}")),
        };
        let line = format!(
            "==== {name}{}: {status:?} {message}\n",
            node.map(|node| format!(" on {node}")).unwrap_or_default()
        );
        let _ = append(&self.log(None), &line);
        eprintln!(
            "berth-testgrid: {} on {}: {}",
            self.test.name,
            self.os.id,
            line.trim_start_matches("==== ").trim_end()
        );
        self.steps.push(StepResult {
            name: name.to_string(),
            node: node.map(str::to_string),
            status,
            message,
            seconds: started.elapsed().as_secs_f64(),
        });
        status == StepStatus::Passed
    }

    /// Runs `script` on `node` as step `name`; fails the step unless the script succeeds.
    fn script(&mut self, name: &str, node: &dyn Node, script: &str) -> anyhow::Result<Outcome> {
        let started = Instant::now();
        let log = self.log(Some(node.name()));
        let _ = append(&log, &format!("\n==== {name} ====\n"));
        let outcome = node.run(&format!("{PRELUDE}{script}\n"), self.timeouts.step, &log);
        let result = match &outcome {
            Ok(outcome) if outcome.success => Ok(outcome.status.clone()),
            Ok(outcome) => {
                // The error that ended the step leads: the grid shows a failure's first line.
                let text =
                    String::from_utf8_lossy(&fs_err::read(&log).unwrap_or_default()).into_owned();
                let ended =
                    step_error(&text).map_or_else(String::new, |error| format!(": {error}"));
                Err(anyhow::anyhow!(
                    "{}{ended}; the last lines of {}.log:\n{}",
                    outcome.status,
                    node.name(),
                    tail(&text, 15)
                ))
            }
            Err(error) => Err(anyhow::anyhow!("{error:#}")),
        };
        if self.record(name, Some(node.name()), result, started) {
            outcome
        } else {
            bail!("step {name} failed on {}", node.name())
        }
    }

    /// Posts `spec` as step `step`; its installer's URL.
    fn post(
        &mut self,
        server: &Server,
        step: &str,
        spec: &serde_norway::Value,
    ) -> anyhow::Result<String> {
        let started = Instant::now();
        let posted = server.post(&installer_yaml(&self.test.name, spec));
        let url = posted.as_ref().ok().cloned();
        self.record(step, None, posted, started);
        url.with_context(|| format!("no {step}"))
    }

    fn steps(&mut self, provider: &Provider, server: &Server) -> anyhow::Result<()> {
        let test = self.test;
        let runner_log = self.log(None);
        // The specs first: a spec the server refuses fails the cell before any machine boots.
        let url = self.post(server, "installer", &test.installer_spec)?;
        let upgrade_url = match &test.upgrade_spec {
            Some(spec) => Some(self.post(server, "upgrade installer", spec)?),
            None => None,
        };

        let started = Instant::now();
        let names: Vec<String> = (1..=test.num_primary_nodes)
            .map(|n| format!("primary-{n}"))
            .chain((1..=test.num_secondary_nodes).map(|n| format!("secondary-{n}")))
            .collect();
        // An airgap node has no route to the server: no forward.
        let forward = (!test.airgap).then_some(server.port);
        let machines = self.machines(provider, &names, forward, &runner_log);
        let machines = match machines {
            Ok(machines) => {
                self.record("boot", None, Ok(format!("{} nodes", names.len())), started);
                machines
            }
            Err(error) => {
                self.record("boot", None, Err(error), started);
                bail!("no machines");
            }
        };
        let result = self.on_machines(&machines, server, &url, upgrade_url.as_deref());
        self.collect(&machines);
        if let Provider::Hosts(_) = provider {
            // A vendor's hosts are used again by the next cell: Berth's state goes, and a host
            // it could not be taken from fails this cell, as the next one would not start clean.
            for node in &machines.nodes {
                let reset = self.script(
                    "reset",
                    node.as_ref(),
                    &format!("if command -v berth >/dev/null; then berth reset; fi\nrm -rf {BUNDLE_DIR} {UPGRADE_BUNDLE_DIR}"),
                );
                if let (Ok(()), Err(error)) = (&result, reset) {
                    return Err(error);
                }
            }
        }
        result
    }

    fn machines(
        &self,
        provider: &Provider,
        names: &[String],
        forward: Option<u16>,
        log: &Path,
    ) -> anyhow::Result<Machines> {
        match provider {
            Provider::Qemu(qemu) => {
                let image = qemu.image(self.os, log)?;
                let vms = qemu.boot(&image, names, &self.dir, forward, log)?;
                Ok(Machines {
                    nodes: vms
                        .iter()
                        .map(|vm| Box::new(vm.node.clone()) as Box<dyn Node>)
                        .collect(),
                    addresses: Some(vms.iter().map(|vm| vm.address.clone()).collect()),
                    _vms: vms,
                    _network: None,
                })
            }
            Provider::Hosts(file) => {
                let hosts: Vec<_> = file
                    .hosts
                    .iter()
                    .filter(|host| host.os == self.os.id)
                    .collect();
                if hosts.len() < names.len() {
                    bail!(
                        "the hosts file has {} host(s) running `{}`; this test needs {}",
                        hosts.len(),
                        self.os.id,
                        names.len()
                    );
                }
                let known_hosts = self.dir.join("known_hosts");
                let mut nodes: Vec<Box<dyn Node>> = Vec::new();
                for (host, name) in hosts.iter().zip(names) {
                    let node = host.node(name, &known_hosts, forward)?;
                    node.wait_until_up(Duration::from_secs(60), log, || Ok(()))?;
                    nodes.push(Box::new(node));
                }
                Ok(Machines {
                    nodes,
                    addresses: None,
                    _vms: Vec::new(),
                    _network: None,
                })
            }
            Provider::Namespaces => {
                let (machines, network) = super::namespaces::start(self.os, names, forward)?;
                Ok(Machines {
                    addresses: Some(machines.iter().map(|node| node.address()).collect()),
                    nodes: machines
                        .into_iter()
                        .map(|node| Box::new(node) as Box<dyn Node>)
                        .collect(),
                    _vms: Vec::new(),
                    _network: Some(network),
                })
            }
        }
    }

    fn on_machines(
        &mut self,
        machines: &Machines,
        server: &Server,
        url: &str,
        upgrade_url: Option<&str>,
    ) -> anyhow::Result<()> {
        let test = self.test;
        let nodes = &machines.nodes;
        let primary = nodes[0].as_ref();
        let secondaries: Vec<&dyn Node> = nodes
            .iter()
            .filter(|node| node.name().starts_with("secondary-"))
            .map(|node| node.as_ref())
            .collect();
        if let Some(addresses) = &machines.addresses {
            let names: Vec<&str> = nodes.iter().map(|node| node.name()).collect();
            let names = names_script(&names, addresses, "/etc/hosts");
            for node in nodes {
                self.script("names", node.as_ref(), &names)?;
            }
        }
        for node in nodes {
            if !self.os.preinit.trim().is_empty() {
                self.script("preinit", node.as_ref(), &self.os.preinit.clone())?;
            }
            if !test.pre_install_script.trim().is_empty() {
                self.script("pre-install", node.as_ref(), &test.pre_install_script)?;
            }
        }
        if test.airgap {
            self.deliver_bundle(nodes, server, url, BUNDLE_DIR, "bundle")?;
        }
        let flags = &test.flags;
        let install = if test.airgap {
            format!("cd {BUNDLE_DIR}\nbash install.sh airgap {flags}")
        } else {
            format!(
                "curl -fsSL {} | bash -s {flags}",
                berth_formats::shell::word(url)
            )
        };
        self.script("install", primary, &install)?;
        for node in &nodes[1..] {
            let command = self.join_command(primary, node.as_ref())?;
            let at = if test.airgap { BUNDLE_DIR } else { "/root" };
            // The test's words go to every node's script, as a user passes them to each.
            self.script(
                "join",
                node.as_ref(),
                &format!("cd {at}\n{command} {flags}"),
            )?;
        }
        for node in nodes {
            self.healthy("health after install", node.as_ref())?;
        }
        if !test.post_install_script.trim().is_empty() {
            self.script("post-install", primary, &test.post_install_script)?;
        }
        if test.reboot_secondaries {
            for node in &secondaries {
                let started = Instant::now();
                let log = self.log(Some(node.name()));
                let rebooted = node.reboot(self.timeouts.reboot, &log);
                if !self.record(
                    "reboot",
                    Some(node.name()),
                    rebooted.map(|()| "back".to_string()),
                    started,
                ) {
                    bail!("reboot failed");
                }
                // What Berth installed is still there and healthy after the reboot.
                self.healthy("health after reboot", *node)?;
                if !test.post_reboot_script.trim().is_empty() {
                    self.script("post-reboot", *node, &test.post_reboot_script)?;
                }
            }
        }
        if let Some(upgrade_url) = upgrade_url {
            if test.airgap {
                self.deliver_bundle(
                    nodes,
                    server,
                    upgrade_url,
                    UPGRADE_BUNDLE_DIR,
                    "upgrade-bundle",
                )?;
            }
            let upgrade = if test.airgap {
                format!("cd {UPGRADE_BUNDLE_DIR}\nbash upgrade.sh airgap {flags}")
            } else {
                format!(
                    "curl -fsSL {} | bash -s {flags}",
                    berth_formats::shell::word(&format!("{upgrade_url}/upgrade.sh"))
                )
            };
            self.script("upgrade", primary, &upgrade)?;
            // The other nodes, as kURL upgrades them: the upgrade script with what the first
            // node gives a joining node (its join command's parameters), which their join
            // hooks take again.
            for node in &nodes[1..] {
                let command = self.join_command(primary, node.as_ref())?;
                let (_, words) = command
                    .split_once("bash -s")
                    .context("the join command runs no script")?;
                let words = words.trim_start().strip_prefix("airgap").unwrap_or(words);
                self.script("upgrade", node.as_ref(), &format!("{upgrade} {words}"))?;
            }
            for node in nodes {
                self.healthy("health after upgrade", node.as_ref())?;
            }
            if !test.post_upgrade_script.trim().is_empty() {
                self.script("post-upgrade", primary, &test.post_upgrade_script)?;
            }
        }
        Ok(())
    }

    /// The command the first primary prints for `node` to join (a control-plane join for
    /// another primary).
    fn join_command(&mut self, primary: &dyn Node, node: &dyn Node) -> anyhow::Result<String> {
        let airgap = if self.test.airgap { " --airgap" } else { "" };
        let control_plane = if node.name().starts_with("primary-") {
            " --control-plane"
        } else {
            ""
        };
        let printed = self.script(
            "join-command",
            primary,
            &format!("berth join-command{airgap}{control_plane}"),
        )?;
        Ok(printed
            .stdout
            .lines()
            .rev()
            .find(|line| line.contains("bash -s"))
            .context("berth join-command printed no command")?
            .to_string())
    }

    /// Fails unless every add-on Berth installed on `node` is Available within five minutes:
    /// probed at once, and again every ten seconds while it is not (a probe that meets a
    /// loaded machine, just after another node joined, times out and is tried again, as
    /// `kubectl wait` would); the last probe of each add-on is printed.
    fn healthy(&mut self, step: &str, node: &dyn Node) -> anyhow::Result<()> {
        let status = self.script(&format!("{step}: add-ons"), node, "berth status --json")?;
        let document: serde_json::Value = serde_json::from_str(&status.stdout)
            .context("berth status --json printed no status document")?;
        let records = document["addons"]
            .as_array()
            .context("berth status --json listed no add-ons")?;
        let mut script = String::from(
            "failed=0\nhealthy() {\n    local attempt said\n    for attempt in $(seq 30); do\n        said=\"$(berth health \"$1\" 2>&1)\" && { printf '%s\\n' \"$said\"; return 0; }\n        sleep 10\n    done\n    printf '%s\\n' \"$said\"\n    return 1\n}\n",
        );
        for record in records {
            let name = record["name"].as_str().unwrap_or_default();
            if !super::specs::is_plain_id(name) {
                bail!("berth status named an add-on `{name}`");
            }
            let word = berth_formats::shell::word(name);
            script.push_str(&format!("healthy {word} || failed=1\n"));
        }
        script.push_str("exit \"$failed\"\n");
        self.script(step, node, &script)?;
        Ok(())
    }

    /// The installer's airgap bundle, downloaded here and unpacked on every node into `at`.
    fn deliver_bundle(
        &mut self,
        nodes: &[Box<dyn Node>],
        server: &Server,
        url: &str,
        at: &str,
        step: &str,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let local = self.dir.join(format!("{step}.tar.gz"));
        let fetched = server.bundle(url, &local).map(|()| {
            let size = fs_err::metadata(&local).map(|meta| meta.len()).unwrap_or(0);
            format!("{} MiB", size >> 20)
        });
        if !self.record(step, None, fetched, started) {
            bail!("no bundle");
        }
        for node in nodes {
            let started = Instant::now();
            let log = self.log(Some(node.name()));
            let put = node
                .put(&local, &format!("{at}.tar.gz"), &log)
                .map(|()| "copied".to_string());
            if !self.record(&format!("copy {step}"), Some(node.name()), put, started) {
                bail!("bundle not copied");
            }
            self.script(
                &format!("unpack {step}"),
                node.as_ref(),
                &format!(
                    "rm -rf {at}\nmkdir -p {at}\ntar xzf {at}.tar.gz -C {at}\nrm -f {at}.tar.gz"
                ),
            )?;
        }
        // The bundle is large and the report keeps what it needs to explain a failure.
        let _ = fs_err::remove_file(&local);
        Ok(())
    }

    /// Each node's Berth state and journal, whatever happened; a node that cannot answer is
    /// noted in its log.
    fn collect(&self, machines: &Machines) {
        for node in &machines.nodes {
            let log = self.log(Some(node.name()));
            let _ = append(&log, "\n==== collect ====\n");
            for (file, script) in [
                ("status.json", "berth status --json || true"),
                (
                    "journal.log",
                    "journalctl -b --no-pager -o short-precise -n 5000 || true",
                ),
                (
                    "services.txt",
                    "systemctl list-units --all --no-pager --plain || true",
                ),
                // A node that ran a kubelet: what its pods' containers said.
                ("containers.txt", COLLECT_CONTAINERS),
            ] {
                let collected = node.run(
                    &format!("{PRELUDE}{script}\n"),
                    Duration::from_secs(120),
                    &self.dir.join(format!("{}.collect.log", node.name())),
                );
                if let Ok(outcome) = collected {
                    let _ = fs_err::write(
                        self.dir.join(format!("{}.{file}", node.name())),
                        outcome.stdout,
                    );
                }
            }
        }
    }

    fn finish(self, provider: &str, folder: String) -> CellResult {
        let failure = self
            .steps
            .iter()
            .find(|step| step.status == StepStatus::Failed)
            .map(|step| {
                format!(
                    "{}{}: {}",
                    step.name,
                    step.node
                        .as_ref()
                        .map(|node| format!(" on {node}"))
                        .unwrap_or_default(),
                    step.message
                )
            });
        let mut files: Vec<String> = fs_err::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok())
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .filter(|name| {
                        [".log", ".json", ".txt"]
                            .iter()
                            .any(|suffix| name.ends_with(suffix))
                            && name != "result.json"
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let result = CellResult {
            test: self.test.name.clone(),
            os_id: self.os.id.clone(),
            os_title: self.os.title(),
            provider: provider.to_string(),
            passed: failure.is_none() && !self.steps.is_empty(),
            failure,
            seconds: self.started.elapsed().as_secs_f64(),
            steps: self.steps,
            folder,
            files,
        };
        let _ = fs_err::write(
            self.dir.join("result.json"),
            serde_json::to_vec_pretty(&result).expect("a result serialises"),
        );
        result
    }
}

/// A script that makes `/etc/hosts` name each of the cell's nodes by its address on the cell's
/// network, as a site's name server would (kubeadm's nodes find each other, and an HA test's
/// `loadBalancerAddress` names `primary-1`); the names leave the lines that named them before
/// (Debian's `127.0.1.1 <hostname>`), and a line left naming nothing goes. `hosts` is the
/// file's path (`/etc/hosts` on a node).
fn names_script(names: &[&str], addresses: &[String], hosts: &str) -> String {
    let hosts = berth_formats::shell::word(hosts);
    let mut script = format!(
        "awk -v names={} '
BEGIN {{ split(names, list, \" \"); for (i in list) cell[list[i]] = 1 }}
/^[[:space:]]*(#|$)/ {{ print; next }}
{{
    line = $1; kept = 0
    for (field = 2; field <= NF; field++) if (!($field in cell)) {{ line = line \" \" $field; kept++ }}
    if (kept) print line
}}' {hosts} >{hosts}.grid\n",
        berth_formats::shell::word(&names.join(" "))
    );
    for (name, address) in names.iter().zip(addresses) {
        script.push_str(&format!(
            "echo {} {} >>{hosts}.grid\n",
            berth_formats::shell::word(address),
            berth_formats::shell::word(name)
        ));
    }
    // The file keeps its inode: a netns machine's is an overlay's, a VM's may be bound.
    script.push_str(&format!("cat {hosts}.grid >{hosts}\nrm {hosts}.grid\n"));
    script
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The last `lines` lines of a log.
/// The last error Berth printed in the log's last step (after its `==== step ====` line):
/// its `error:` line with the `caused by:` lines under it, on one line, at most 400
/// characters.
fn step_error(log: &str) -> Option<String> {
    let step = log.rsplit_once("\n==== ").map_or(log, |(_, step)| step);
    let lines: Vec<&str> = step.lines().map(str::trim).collect();
    let start = lines.iter().rposition(|line| line.starts_with("error: "))?;
    let mut error = lines[start].trim_start_matches("error: ").to_string();
    for cause in lines[start + 1..]
        .iter()
        .map_while(|line| line.strip_prefix("caused by: "))
    {
        error.push_str(": ");
        error.push_str(cause);
    }
    if error.chars().count() > 400 {
        error = error.chars().take(399).chain(['…']).collect();
    }
    Some(error)
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_is_named_by_the_last_error_berth_printed_in_it() {
        let log = "\n==== install ====\nerror: an earlier step's\n\n==== upgrade ====\nberth: banner 1.0.0: banner_install\nerror: banner 1.0.0: not healthy within 300s after its hooks\n  caused by: deployment/banner: 0 of 1 pods ready\nthe log: /var/log/berth/x.log\n";
        assert_eq!(
            step_error(log).as_deref(),
            Some(
                "banner 1.0.0: not healthy within 300s after its hooks: deployment/banner: 0 of 1 pods ready"
            )
        );
        assert_eq!(step_error("\n==== upgrade ====\nall fine\n"), None);
        let long = format!("\n==== install ====\nerror: {}\n", "x".repeat(1000));
        assert_eq!(step_error(&long).unwrap().chars().count(), 400);
    }

    #[test]
    fn the_names_step_names_the_cells_nodes_and_keeps_every_other_name() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts");
        fs_err::write(
            &hosts,
            "127.0.0.1 localhost primary-1\n# a comment\n\n127.0.1.1 primary-1\n10.0.0.9 other secondary-10\n",
        )
        .unwrap();
        let script = names_script(
            &["primary-1", "secondary-1"],
            &["10.77.0.11".to_string(), "10.77.0.12".to_string()],
            hosts.to_str().unwrap(),
        );
        let output = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            fs_err::read_to_string(&hosts).unwrap(),
            "127.0.0.1 localhost\n# a comment\n\n10.0.0.9 other secondary-10\n10.77.0.11 primary-1\n10.77.0.12 secondary-1\n"
        );
    }
}
