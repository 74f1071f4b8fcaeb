//! One probe of one component: what it found (healthy or not, a reason word and a message,
//! and the objects it looked at). Each runs within its component's timeout; one that hangs is
//! reported as timed out by the caller, not waited for.

use std::io::Read as _;
use std::net::{TcpStream, ToSocketAddrs as _};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use berth_formats::health::{
    CommandProbe, ContainerProbe, HttpProbe, Probe, ProcessProbe, SystemdProbe, TcpProbe,
};

use super::found::{Found, wanted};
use crate::images::Runtime;
use crate::program::{MAX_READ, RunError, run_program, seconds};

/// Where probes look: the node's root (for the kubeconfig) and its container runtime.
pub struct Context<'a> {
    pub kubeconfig: &'a Path,
    pub runtime: Option<&'a Runtime>,
}

/// Runs `probe` within `timeout`; every object it looked at, or one that says why none.
pub fn run(probe: Probe<'_>, timeout: Duration, context: &Context<'_>) -> Vec<Found> {
    match probe {
        Probe::Container(container) => container_probe(container, timeout, context.runtime),
        Probe::Systemd(systemd) => vec![systemd_probe(systemd, timeout)],
        Probe::Process(process) => vec![process_probe(process)],
        Probe::Tcp(tcp) => vec![tcp_probe(tcp, timeout)],
        Probe::Http(http) => vec![http_probe(http, timeout)],
        Probe::Command(command) => vec![command_probe(command, timeout)],
        Probe::Kubernetes(kubernetes) => {
            super::kubernetes::probe(kubernetes, timeout, context.kubeconfig)
        }
    }
}

fn container_probe(
    probe: &ContainerProbe,
    timeout: Duration,
    runtime: Option<&Runtime>,
) -> Vec<Found> {
    let wanted = wanted(probe.name.as_deref(), &probe.match_labels);
    let Some(runtime) = runtime else {
        return vec![Found::new(
            "container",
            &wanted,
            false,
            "NoRuntime",
            "no container runtime answers (containerd or docker)".into(),
        )];
    };
    let listed = match runtime {
        Runtime::Containerd { ctr } => containerd_containers(ctr, probe, timeout),
        Runtime::Docker { docker } => docker_containers(docker, probe, timeout),
    };
    match listed {
        Err(message) => vec![Found::new(
            "container",
            &wanted,
            false,
            "RuntimeError",
            message,
        )],
        Ok(found) if found.is_empty() => vec![Found::new(
            "container",
            &wanted,
            false,
            "NotFound",
            format!("no container {wanted}"),
        )],
        Ok(found) => found,
    }
}

/// containerd's containers (by name or labels) and whether each one's task runs.
fn containerd_containers(
    ctr: &Path,
    probe: &ContainerProbe,
    timeout: Duration,
) -> Result<Vec<Found>, String> {
    let namespace = probe
        .namespace
        .as_deref()
        .unwrap_or(crate::images::NAMESPACE);
    let ctr_run = |arguments: &[&str]| {
        let ran = run_program(
            Command::new(ctr)
                .args(["--namespace", namespace])
                .args(arguments),
            timeout,
        )
        .map_err(|error| error.to_string())?;
        if ran.success {
            Ok(ran.stdout)
        } else {
            Err(format!(
                "ctr {}: {}",
                arguments.join(" "),
                ran.stderr.trim()
            ))
        }
    };
    // `ctr containers ls` filters: one argument whose conditions, joined by commas, must all
    // hold (separate arguments would be alternatives); the name is the container's id.
    let mut filters: Vec<String> = probe
        .match_labels
        .iter()
        .map(|(key, value)| format!("labels.{}=={}", quoted(key), quoted(value)))
        .collect();
    if let Some(name) = &probe.name {
        filters.push(format!("id=={}", quoted(name)));
    }
    let filter = filters.join(",");
    let mut arguments = vec!["containers", "ls", "--quiet"];
    if !filter.is_empty() {
        arguments.push(&filter);
    }
    let containers = ctr_run(&arguments)?;
    let tasks = ctr_run(&["tasks", "ls"])?;
    // TASK PID STATUS
    let statuses: std::collections::BTreeMap<&str, &str> = tasks
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let task = words.next()?;
            let status = words.nth(1)?;
            Some((task, status))
        })
        .collect();
    Ok(containers
        .lines()
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| match statuses.get(id) {
            Some(&"RUNNING") => Found::new("container", id, true, "Running", "running".into()),
            Some(status) => Found::new(
                "container",
                id,
                false,
                &title_case(status),
                format!("its task is {}", status.to_lowercase()),
            ),
            None => Found::new(
                "container",
                id,
                false,
                "NoTask",
                "it exists, but no task runs it".into(),
            ),
        })
        .collect())
}

/// docker's containers (by name or labels) and their state.
fn docker_containers(
    docker: &Path,
    probe: &ContainerProbe,
    timeout: Duration,
) -> Result<Vec<Found>, String> {
    let mut command = Command::new(docker);
    command.args([
        "ps",
        "--all",
        "--no-trunc",
        "--format",
        "{{.Names}}\t{{.State}}",
    ]);
    if let Some(name) = &probe.name {
        command
            .arg("--filter")
            .arg(format!("name=^{}$", regex_escape(name)));
    }
    for (key, value) in &probe.match_labels {
        command.arg("--filter").arg(format!("label={key}={value}"));
    }
    let ran = run_program(&mut command, timeout).map_err(|error| error.to_string())?;
    if !ran.success {
        return Err(format!("docker ps: {}", ran.stderr.trim()));
    }
    Ok(ran
        .stdout
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(name, state)| {
            let running = state == "running";
            Found::new(
                "container",
                name,
                running,
                &title_case(state),
                format!("it is {state}"),
            )
        })
        .collect())
}

/// A quoted string of containerd's filter syntax (Go's quoting: `\\` and `"` escaped).
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped = !c.is_ascii_alphanumeric() && c != '_' && c != '-';
            escaped.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// `RUNNING` → `Running`, `exited` → `Exited`.
fn title_case(word: &str) -> String {
    let lower = word.to_lowercase();
    let mut chars = lower.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn systemd_probe(probe: &SystemdProbe, timeout: Duration) -> Found {
    let unit = probe.unit.as_str();
    let found = |healthy, reason: &str, message| Found::new("unit", unit, healthy, reason, message);
    let Ok(systemctl) = which::which("systemctl") else {
        return found(false, "NoSystemd", "systemctl is not on this node".into());
    };
    match run_program(
        Command::new(systemctl).args(["is-active", "--", unit]),
        timeout,
    ) {
        Ok(ran) => {
            let state = ran.stdout.trim().to_string();
            let state = if state.is_empty() {
                "unknown".into()
            } else {
                state
            };
            found(ran.success, &title_case(&state), format!("it is {state}"))
        }
        Err(error) => found(false, "TimedOut", error.to_string()),
    }
}

fn process_probe(probe: &ProcessProbe) -> Found {
    let file = probe.pid_file.as_str();
    let found =
        |healthy, reason: &str, message| Found::new("process", file, healthy, reason, message);
    let mut text = String::new();
    let read =
        fs_err::File::open(file).and_then(|handle| handle.take(64).read_to_string(&mut text));
    if let Err(error) = read {
        return found(false, "NoPidFile", error.to_string());
    }
    // What the file holds is not quoted: `pidFile` may name any file, and health records are
    // shown to whoever asks.
    let Ok(pid) = text.trim().parse::<i32>() else {
        return found(
            false,
            "BadPidFile",
            "it does not hold a process id".to_string(),
        );
    };
    if pid <= 0 {
        return found(false, "BadPidFile", format!("{pid} is not a process id"));
    }
    // A zombie has exited: only its parent's wait is missing.
    match fs_err::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("?");
            if state == "Z" || state == "X" {
                found(false, "Exited", format!("process {pid} has exited"))
            } else {
                found(true, "Running", format!("process {pid} runs"))
            }
        }
        Err(_) => found(false, "Exited", format!("no process {pid}")),
    }
}

fn tcp_probe(probe: &TcpProbe, timeout: Duration) -> Found {
    let address = probe.address.as_str();
    let found =
        |healthy, reason: &str, message| Found::new("address", address, healthy, reason, message);
    let targets: Vec<_> = match address.to_socket_addrs() {
        Ok(targets) => targets.collect(),
        Err(error) => return found(false, "BadAddress", format!("{error}")),
    };
    let deadline = Instant::now() + timeout;
    let mut last = found(false, "BadAddress", "it names no address".into());
    for target in targets {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        last = match TcpStream::connect_timeout(&target, left) {
            Ok(_) => return found(true, "Connected", format!("{target} accepts")),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                found(false, "Refused", format!("{target} refused the connection"))
            }
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => found(
                false,
                "TimedOut",
                format!("{target}: no answer within {}", seconds(timeout)),
            ),
            Err(error) => found(false, "Unreachable", format!("{target}: {error}")),
        };
    }
    last
}

/// The innermost error of `error`'s chain.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest.to_string()
}

fn http_probe(probe: &HttpProbe, timeout: Duration) -> Found {
    let url = probe.url.as_str();
    let found = |healthy, reason: &str, message| Found::new("url", url, healthy, reason, message);
    let client = match reqwest::blocking::Client::builder()
        .timeout(timeout)
        .danger_accept_invalid_certs(probe.insecure_skip_verify)
        .build()
    {
        Ok(client) => client,
        Err(error) => return found(false, "ClientError", error.to_string()),
    };
    let response = match client.get(url).send() {
        Ok(response) => response,
        Err(error) if error.is_timeout() => {
            return found(
                false,
                "TimedOut",
                format!("no answer within {}", seconds(timeout)),
            );
        }
        // The URL is the component's name already: the deepest cause says the rest
        // (`Connection refused`), where the client's chain repeats the URL and its layers.
        Err(error) => return found(false, "Unreachable", root_cause(&error)),
    };
    let status = response.status().as_u16();
    if status != probe.status {
        return found(
            false,
            &format!("Status{status}"),
            format!("it answered {status}, not {}", probe.status),
        );
    }
    if let Some(wanted) = &probe.body_contains {
        let mut body = String::new();
        let _ = response.take(MAX_READ).read_to_string(&mut body);
        if !body.contains(wanted.as_str()) {
            return found(
                false,
                "UnexpectedBody",
                format!("it answered {status}, without `{wanted}` in its body"),
            );
        }
    }
    found(
        true,
        &format!("Status{status}"),
        format!("it answered {status}"),
    )
}

fn command_probe(probe: &CommandProbe, timeout: Duration) -> Found {
    let shown = probe.run.join(" ");
    let found =
        |healthy, reason: &str, message| Found::new("command", &shown, healthy, reason, message);
    let Some((program, arguments)) = probe.run.split_first() else {
        return found(false, "NoCommand", "no program to run".into());
    };
    match run_program(Command::new(program).args(arguments), timeout) {
        Ok(ran) if ran.success => found(true, "Succeeded", "it exited 0".into()),
        Ok(ran) => {
            let said = ran.stderr.trim().lines().last().unwrap_or("").to_string();
            found(false, "Failed", format!("it failed: {said}"))
        }
        Err(RunError::TimedOut(message)) => found(false, "TimedOut", message),
        Err(RunError::NotRun(message)) => found(false, "NotRun", format!("{program}: {message}")),
    }
}
