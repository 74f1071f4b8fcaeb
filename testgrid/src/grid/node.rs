//! What a test does to a machine, whichever provider gave it: run a script as root, copy a
//! file there, reboot it. Every provider's machines are reached over SSH, so the grid runs the
//! same way on VMs booted here and on a vendor's own hosts.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// What a bounded command did.
#[derive(Debug)]
pub struct Outcome {
    pub success: bool,
    /// `exit 0`, `exit 1`, `killed after 10m (its step's timeout)`.
    pub status: String,
    /// Its standard output (the first MiB).
    pub stdout: String,
}

const KEPT_OUTPUT: usize = 1 << 20;

/// Runs `command`, feeding it `stdin` (streamed: a bundle is not held in memory), until it
/// ends or `timeout` passes (then it is killed); its standard error, and its standard output
/// as well, are appended to `log`.
pub fn run_bounded(
    command: &mut Command,
    mut stdin: impl Read + Send + 'static,
    timeout: Duration,
    log: &Path,
) -> anyhow::Result<Outcome> {
    let log_file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log_file.file().try_clone()?)
        .spawn()
        .with_context(|| format!("cannot start {:?}", command.get_program()))?;
    let mut input = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || std::io::copy(&mut stdin, &mut input));
    let mut output = child.stdout.take().expect("piped");
    let mut log_copy = log_file.file().try_clone()?;
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        while let Ok(read) = output.read(&mut buffer) {
            if read == 0 {
                break;
            }
            let _ = log_copy.write_all(&buffer[..read]);
            let room = KEPT_OUTPUT.saturating_sub(kept.len());
            kept.extend_from_slice(&buffer[..read.min(room)]);
        }
        kept
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline || super::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // A command that exits without reading all its input broke the pipe, which is its own
    // business; input that could not be read makes its success worth nothing (a copy cut
    // short would look whole).
    let unsent = match feeder.join() {
        Ok(Err(error)) if error.kind() != std::io::ErrorKind::BrokenPipe => Some(error),
        _ => None,
    };
    let kept = reader.join().unwrap_or_default();
    let stdout = String::from_utf8_lossy(&kept).into_owned();
    if let Some(error) = unsent {
        return Ok(Outcome {
            success: false,
            status: format!("its input could not be sent: {error}"),
            stdout,
        });
    }
    Ok(match status {
        Some(status) => Outcome {
            success: status.success(),
            status: match status.code() {
                Some(code) => format!("exit {code}"),
                None => format!("ended by {status}"),
            },
            stdout,
        },
        None if super::interrupted() => Outcome {
            success: false,
            status: "stopped: the run was interrupted".to_string(),
            stdout,
        },
        None => Outcome {
            success: false,
            status: format!(
                "killed after {} (its step's timeout)",
                humantime::format_duration(timeout)
            ),
            stdout,
        },
    })
}

/// A machine a test runs on.
pub trait Node: Send + Sync {
    /// Its name in the cell (`primary-1`, `secondary-1`).
    fn name(&self) -> &str;
    /// Runs `script` with bash as root, in `/root` (or the user's home); its output goes to
    /// `log`.
    fn run(&self, script: &str, timeout: Duration, log: &Path) -> anyhow::Result<Outcome>;
    /// Copies `local` to `remote` (a path on the node; its folder is made).
    fn put(&self, local: &Path, remote: &str, log: &Path) -> anyhow::Result<()>;
    /// Reboots it and waits until it is back (a new boot id) and its boot has finished, or
    /// `timeout` passes.
    fn reboot(&self, timeout: Duration, log: &Path) -> anyhow::Result<()>;
    /// Its serial console, when the provider captures one.
    fn console(&self) -> Option<PathBuf>;
}

/// A host reached with the system's `ssh`, as the given user with the given key.
#[derive(Debug, Clone)]
pub struct SshNode {
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub key: PathBuf,
    /// Where host keys are learned for this run (`accept-new`): a host whose key changes
    /// mid-run is refused.
    pub known_hosts: PathBuf,
    /// A local port the node reaches as its own `127.0.0.1:<port>`, through the SSH
    /// connection (the grid's installer server), for every command run there.
    pub forward: Option<u16>,
    pub console: Option<PathBuf>,
}

impl SshNode {
    fn ssh(&self, with_forward: bool) -> Command {
        let mut command = Command::new("ssh");
        command
            .args(["-F", "/dev/null", "-i"])
            .arg(&self.key)
            .args(["-p", &self.port.to_string()])
            .args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"])
            .args(["-o", "StrictHostKeyChecking=accept-new"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()))
            .args(["-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"])
            .args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6"]);
        if let (true, Some(port)) = (with_forward, self.forward) {
            command
                .args(["-o", "ExitOnForwardFailure=yes", "-R"])
                .arg(format!("127.0.0.1:{port}:127.0.0.1:{port}"));
        }
        command
            .arg(format!("{}@{}", self.user, self.address))
            .arg("--");
        command
    }

    /// The remote command that runs bash as root.
    fn root_bash(&self) -> &'static str {
        if self.user == "root" {
            "bash -s"
        } else {
            "sudo -n bash -s"
        }
    }

    /// Whether the node answers over SSH right now.
    pub fn answers(&self, log: &Path) -> bool {
        let mut command = self.ssh(false);
        command.arg("true");
        run_bounded(&mut command, std::io::empty(), Duration::from_secs(20), log)
            .is_ok_and(|outcome| outcome.success)
    }

    /// Waits until the node answers over SSH and has finished booting, while `alive` holds.
    pub fn wait_until_up(
        &self,
        timeout: Duration,
        log: &Path,
        mut alive: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        while !self.answers(log) {
            alive()?;
            if super::interrupted() {
                bail!("interrupted");
            }
            if started.elapsed() > timeout {
                bail!(
                    "{} did not answer over SSH at {}:{} within {}",
                    self.name,
                    self.address,
                    self.port,
                    humantime::format_duration(timeout)
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        self.boot_finished(timeout.saturating_sub(started.elapsed()), log)?;
        Ok(started.elapsed())
    }

    /// Waits until systemd has finished starting the boot's services (running, or degraded:
    /// what failed is the test's to see): sshd answers before they all have.
    fn boot_finished(&self, timeout: Duration, log: &Path) -> anyhow::Result<()> {
        let outcome = self.run(
            "command -v systemctl >/dev/null || exit 0\nsystemctl is-system-running --wait || true\n",
            timeout,
            log,
        )?;
        if !outcome.success {
            bail!(
                "{} answers over SSH, but its boot did not finish ({})",
                self.name,
                outcome.status
            );
        }
        Ok(())
    }

    fn boot_id(&self, log: &Path) -> anyhow::Result<String> {
        let outcome = self.run(
            "cat /proc/sys/kernel/random/boot_id",
            Duration::from_secs(30),
            log,
        )?;
        if !outcome.success {
            bail!(
                "{}: cannot read its boot id ({})",
                self.name,
                outcome.status
            );
        }
        Ok(outcome.stdout.trim().to_string())
    }
}

impl Node for SshNode {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, script: &str, timeout: Duration, log: &Path) -> anyhow::Result<Outcome> {
        let mut command = self.ssh(true);
        command.arg(self.root_bash());
        run_bounded(
            &mut command,
            std::io::Cursor::new(script.to_owned()),
            timeout,
            log,
        )
    }

    fn put(&self, local: &Path, remote: &str, log: &Path) -> anyhow::Result<()> {
        let quoted = berth_formats::shell::word(remote);
        let mut command = self.ssh(false);
        command.arg(format!(
            "{} -c {}",
            self.root_bash().trim_end_matches(" -s"),
            berth_formats::shell::word(&format!(
                "mkdir -p \"$(dirname {quoted})\" && cat > {quoted}.partial && mv -f {quoted}.partial {quoted}"
            ))
        ));
        let file = fs_err::File::open(local)?;
        let size = file.metadata()?.len();
        // A minute, and a minute for every 100 MiB more.
        let timeout = Duration::from_secs(60 + 60 * (size >> 20) / 100);
        let outcome = run_bounded(&mut command, file, timeout, log)?;
        if !outcome.success {
            bail!(
                "cannot copy {} to {}:{remote} ({})",
                local.display(),
                self.name,
                outcome.status
            );
        }
        Ok(())
    }

    fn reboot(&self, timeout: Duration, log: &Path) -> anyhow::Result<()> {
        let before = self.boot_id(log)?;
        // The connection may drop before the command returns: its status says nothing.
        let _ = self.run("systemctl reboot || reboot", Duration::from_secs(30), log);
        let started = Instant::now();
        loop {
            if super::interrupted() {
                bail!("interrupted");
            }
            if started.elapsed() > timeout {
                bail!(
                    "{} was not back from its reboot within {}",
                    self.name,
                    humantime::format_duration(timeout)
                );
            }
            if let Ok(now) = self.boot_id(log)
                && now != before
            {
                return self.boot_finished(timeout.saturating_sub(started.elapsed()), log);
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    fn console(&self) -> Option<PathBuf> {
        self.console.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_command_is_killed_at_its_timeout_and_says_so() {
        let log = tempfile::NamedTempFile::new().unwrap();
        let started = Instant::now();
        let outcome = run_bounded(
            Command::new("sleep").arg("30"),
            std::io::empty(),
            Duration::from_millis(300),
            log.path(),
        )
        .unwrap();
        assert!(!outcome.success);
        assert!(
            outcome.status.contains("killed after 300ms"),
            "{}",
            outcome.status
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_bounded_command_gets_its_input_and_logs_its_output() {
        let log = tempfile::NamedTempFile::new().unwrap();
        let outcome = run_bounded(
            Command::new("bash").arg("-s"),
            &b"echo out; echo err >&2; exit 3"[..],
            Duration::from_secs(10),
            log.path(),
        )
        .unwrap();
        assert_eq!(outcome.status, "exit 3");
        assert_eq!(outcome.stdout, "out\n");
        let logged = fs_err::read_to_string(log.path()).unwrap();
        assert!(logged.contains("out") && logged.contains("err"), "{logged}");
    }
}
