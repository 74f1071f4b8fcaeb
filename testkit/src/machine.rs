//! A host with a filesystem of its own, for hooks that write where a real node keeps things
//! (`/etc/containerd`, `/etc/systemd/system`, `/usr/bin/runc`, `/opt/ekco`, `/var/lib/dpkg`):
//! a network namespace from [`network`](crate::network) plus a mount and a UTS namespace, in
//! which
//! - `/etc`, `/usr`, `/var`, `/opt` and `/root` are overlays of this machine's, whose writes
//!   land in a folder of the test's and vanish with it;
//! - `/run` starts empty, as after a boot;
//! - `/var/lib/containerd` is a folder of its own (containerd's overlay snapshots cannot live
//!   on an overlay);
//! - the hostname is the machine's name, a default route leaves by its link, and no name
//!   server is configured (there is none to reach): names resolve through `/etc/hosts`.
//!
//! These machines boot no init system: `systemctl` is a stand-in (`standins/systemctl`) that
//! starts a unit from its unit file as systemd would and answers kURL's queries, and
//! `policy-rc.d` keeps package scripts from starting services, as in any Debian chroot.
//! Every process of the machine ends with it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::network::Host;
use crate::{Server, require, run, wait_until};

/// A plain PATH for commands run on a machine, whatever the caller's is.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const OVERLAID: [&str; 5] = ["etc", "usr", "var", "opt", "root"];
const SYSTEMCTL: &str = include_str!("../standins/systemctl");

pub struct Machine {
    pub host: Host,
    pub name: String,
    holder: Option<Server>,
    pid: u32,
    /// The overlays' layers and the boot log, kept until the machine ends.
    _dir: tempfile::TempDir,
}

impl Machine {
    /// Boots a machine named `name` on `host` (which it then owns).
    pub fn start(host: Host, name: &str) -> Machine {
        require("unshare", "util-linux");
        require("python3", "python3");
        let dir = tempfile::Builder::new()
            .prefix("machine")
            .tempdir_in("/tmp")
            .unwrap();
        let upper = dir.path().join("upper");
        // The stand-ins are in place before the first process of the machine runs.
        write_executable(&upper.join("usr/bin/systemctl"), SYSTEMCTL);
        write_executable(
            &upper.join("usr/sbin/policy-rc.d"),
            "#!/bin/sh\n# No init system: package scripts start no service.\nexit 101\n",
        );
        fs_err::create_dir_all(upper.join("etc")).unwrap();
        fs_err::write(
            upper.join("etc/resolv.conf"),
            "# No name server: the machine reaches none.\n",
        )
        .unwrap();
        let mut mounts = String::from("set -e\nhostname \"$1\"\n");
        for folder in OVERLAID {
            mounts.push_str(&format!(
                "mkdir -p \"$0/upper/{folder}\" \"$0/work/{folder}\"\n\
                 mount -t overlay overlay -o \"lowerdir=/{folder},upperdir=$0/upper/{folder},workdir=$0/work/{folder}\" /{folder}\n"
            ));
        }
        mounts.push_str(
            "mount -t tmpfs tmpfs /run\n\
             mkdir -p \"$0/containerd\" /var/lib/containerd\n\
             mount --bind \"$0/containerd\" /var/lib/containerd\n\
             touch /run/machine-booted\n\
             exec sleep infinity\n",
        );
        let holder = Server::spawn(
            host.command("unshare")
                .args(["--mount", "--uts", "--propagation", "private", "sh", "-c"])
                .arg(&mounts)
                .arg(dir.path())
                .arg(name),
            &dir.path().join("boot.log"),
        );
        let pid = holder.id();
        let machine = Machine {
            host,
            name: name.to_string(),
            holder: Some(holder),
            pid,
            _dir: dir,
        };
        wait_until(
            &format!("machine {name} to boot (see its boot.log)"),
            Duration::from_secs(30),
            || {
                machine
                    .command("test")
                    .args(["-e", "/run/machine-booted"])
                    .status()
                    .is_ok_and(|status| status.success())
            },
        );
        if let Some(interface) = machine.host.interface.clone() {
            run(machine
                .command("ip")
                // `replace`: a machine started again on the same host finds its route there.
                .args(["route", "replace", "default", "dev", &interface]));
        }
        machine
    }

    /// `program`, to run inside the machine: its network, mounts and hostname.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--target={}", self.pid))
            .args(["--mount", "--uts", "--net", "--wd=/"])
            .arg(program);
        command
    }

    /// `bash -c script` inside the machine; panics with its output if it fails.
    pub fn shell(&self, script: &str) -> String {
        let output = run(self.command("bash").args(["-c", script]));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The text of a file as the machine sees it, if it has one.
    pub fn read(&self, path: &str) -> Option<String> {
        let output = self.command("cat").arg(path).output().unwrap();
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Writes a file the machine sees at `path`, from inside it: overlayfs does not see a
    /// change made to its upper layer from outside once it has looked the file up. A symlink
    /// there (/etc/os-release → ../usr/lib/os-release) is replaced by the file.
    pub fn write(&self, path: &str, contents: impl AsRef<[u8]>) {
        use std::io::Write as _;
        let mut child = self
            .command("sh")
            .args([
                "-c",
                "mkdir -p \"$(dirname \"$1\")\" && rm -f \"$1\" && cat > \"$1\"",
                "sh",
                path,
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(contents.as_ref())
            .unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "writing {path} in machine {}", self.name);
    }

    /// The log of a service the stand-in `systemctl` started.
    pub fn service_log(&self, unit: &str) -> String {
        self.read(&format!("/var/log/systemctl-standin/{unit}.log"))
            .unwrap_or_default()
    }

    /// The processes whose mount namespace is this machine's.
    fn processes(&self) -> Vec<i32> {
        let namespace = |pid: &str| fs_err::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        let Some(own) = namespace(&self.pid.to_string()) else {
            return Vec::new();
        };
        let Ok(entries) = fs_err::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid != self.pid as i32)
            .filter(|pid| namespace(&pid.to_string()).as_ref() == Some(&own))
            .collect()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // Daemons the machine started (containerd, its shims, collectd) end with it.
        for _ in 0..50 {
            let processes = self.processes();
            if processes.is_empty() {
                break;
            }
            for pid in processes {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(self.holder.take());
    }
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, text).unwrap();
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
