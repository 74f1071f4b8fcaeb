//! The `netns` provider: machines that are namespaces of this host (`berth_testkit::machine`), on a
//! bridge of their own: seconds to start, for quick runs and the suite. They share this
//! host's kernel and userland, so they run only this host's own OS (its `ID-VERSION_ID`, as
//! `debian-12`), with the OS spec's packages already installed here; they boot no init system
//! (`systemctl` is the machines' stand-in) and cannot reboot.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::node::{Node, Outcome, run_bounded};
use super::specs::OsSpec;
use berth_testkit::kubelet_host::{self, KubeletCgroup};
use berth_testkit::machine::Machine;
use berth_testkit::network::Network;

/// This host's OS as an OS spec's id names it: `<ID>-<VERSION_ID>`.
pub fn host_os_id() -> anyhow::Result<String> {
    let text = fs_err::read_to_string("/etc/os-release")?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}=")))
            .map(|value| value.trim_matches('"').to_string())
    };
    Ok(format!(
        "{}-{}",
        field("ID").context("/etc/os-release has no ID")?,
        field("VERSION_ID").unwrap_or_default()
    ))
}

/// Whether the machines can run `os`: this host's own, with its packages installed.
pub fn check_os(os: &OsSpec) -> anyhow::Result<()> {
    let own = host_os_id()?;
    if os.id != own {
        bail!(
            "the netns provider's machines run this host's own {own}; `{}` needs the qemu or ssh provider",
            os.id
        );
    }
    for package in &os.packages {
        let installed = std::process::Command::new("dpkg-query")
            .args(["-W", "-f=${Status}", package])
            .output()
            .is_ok_and(|output| {
                String::from_utf8_lossy(&output.stdout).contains("install ok installed")
            });
        if !installed {
            bail!(
                "the netns provider's machines have this host's packages: install {package} here (the OS spec lists it)"
            );
        }
    }
    Ok(())
}

/// Starts one machine per name on a bridge of their own (drop the machines before it).
pub fn start(
    os: &OsSpec,
    names: &[String],
    forward: Option<u16>,
) -> anyhow::Result<(Vec<NamespaceNode>, Network)> {
    check_os(os)?;
    // The harness panics where a tool fails; a cell reports it instead.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut network = Network::new();
        let mut nodes = Vec::new();
        for name in names {
            let machine = Arc::new(Machine::start(network.host(), name));
            let forwarder = forward.map(|port| Forwarder::start(&machine, port));
            let kubelet = kubelet_host::prepare(&machine);
            nodes.push(NamespaceNode {
                machine,
                forwarder: forwarder.transpose().map_err(|error| error.to_string())?,
                _kubelet: kubelet,
            });
        }
        Ok::<_, String>((nodes, network))
    }))
    .map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
            .unwrap_or_default();
        anyhow::anyhow!("a machine could not start: {message}")
    })?
    .map_err(anyhow::Error::msg)
}

/// A machine of the `netns` provider, readied for a kubelet as the grid's Kubernetes cells
/// need ([`berth_testkit::kubelet_host`]).
pub struct NamespaceNode {
    machine: Arc<Machine>,
    forwarder: Option<Forwarder>,
    /// After the machine, as fields drop in order: what its kubelet ran ends once it has.
    _kubelet: KubeletCgroup,
}

impl NamespaceNode {
    /// Its address on the cell's bridge, where the other machines reach it.
    pub fn address(&self) -> String {
        self.machine.host.address().to_string()
    }
}

impl Node for NamespaceNode {
    fn name(&self) -> &str {
        &self.machine.name
    }

    fn run(&self, script: &str, timeout: Duration, log: &Path) -> anyhow::Result<Outcome> {
        let mut command = self.machine.command("bash");
        command.arg("-s");
        run_bounded(
            &mut command,
            std::io::Cursor::new(script.to_owned()),
            timeout,
            log,
        )
    }

    fn put(&self, local: &Path, remote: &str, log: &Path) -> anyhow::Result<()> {
        let mut command = self.machine.command("sh");
        command.args([
            "-c",
            "mkdir -p \"$(dirname \"$1\")\" && cat > \"$1.partial\" && mv -f \"$1.partial\" \"$1\"",
            "sh",
            remote,
        ]);
        let outcome = run_bounded(
            &mut command,
            fs_err::File::open(local)?,
            Duration::from_secs(600),
            log,
        )?;
        if !outcome.success {
            bail!(
                "cannot copy {} to {}:{remote} ({})",
                local.display(),
                self.name(),
                outcome.status
            );
        }
        Ok(())
    }

    fn reboot(&self, _: Duration, _: &Path) -> anyhow::Result<()> {
        bail!(
            "the netns provider cannot reboot {}: its machines are namespaces of this host; run the test with the qemu or ssh provider",
            self.name()
        )
    }

    fn console(&self) -> Option<PathBuf> {
        None
    }
}

impl Drop for NamespaceNode {
    fn drop(&mut self) {
        if let Some(forwarder) = &self.forwarder {
            forwarder.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// `127.0.0.1:<port>` inside a machine, forwarded to the same port on this host's loopback
/// (the grid's installer server): its listening socket is made in the machine's network
/// namespace, and each connection it takes is carried to the server from this host's.
struct Forwarder {
    stop: Arc<AtomicBool>,
}

impl Forwarder {
    fn start(machine: &Machine, port: u16) -> anyhow::Result<Forwarder> {
        let listener = std::thread::scope(|scope| {
            scope
                .spawn(|| -> anyhow::Result<TcpListener> {
                    // This thread alone enters the machine's namespace, and ends there.
                    let namespace =
                        fs_err::File::open(format!("/run/netns/{}", machine.host.namespace))?;
                    nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET)
                        .context("cannot enter the machine's network namespace")?;
                    Ok(TcpListener::bind(("127.0.0.1", port))?)
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the forwarder's thread panicked"))?
        })?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((inside, _)) => {
                        std::thread::spawn(move || carry(inside, port));
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(_) => break,
                }
            }
        });
        Ok(Forwarder { stop })
    }
}

/// Copies a connection both ways between the machine and the server, until either closes.
fn carry(inside: TcpStream, port: u16) {
    let Ok(outside) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let _ = inside.set_nonblocking(false);
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        let mut buffer = [0u8; 32 * 1024];
        while let Ok(read) = from.read(&mut buffer) {
            if read == 0 || to.write_all(&buffer[..read]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    };
    let (Ok(inside_copy), Ok(outside_copy)) = (inside.try_clone(), outside.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || pipe(inside_copy, outside_copy));
    pipe(outside, inside);
    let _ = upstream.join();
}
