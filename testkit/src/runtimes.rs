//! Container runtimes of their own for a test: a private containerd, a private dockerd.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use crate::{Server, network, require, wait_until};

/// A private containerd with its own root, state and socket.
pub struct Containerd {
    pub socket: PathBuf,
    _server: Server,
    _dir: tempfile::TempDir,
}

impl Containerd {
    pub fn start() -> Containerd {
        Self::start_with(None)
    }

    /// A containerd inside `host`'s network namespace: containers it runs with the host
    /// network share that host's addresses.
    pub fn start_in(host: &network::Host) -> Containerd {
        Self::start_with(Some(host))
    }

    fn start_with(host: Option<&network::Host>) -> Containerd {
        let binary = require("containerd", "containerd");
        require("runc", "runc");
        let dir = tempfile::Builder::new()
            .prefix("ctd")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("containerd.sock");
        let config = dir.path().join("config.toml");
        fs_err::write(
            &config,
            format!(
                "version = 2\nroot = \"{root}/root\"\nstate = \"{root}/state\"\n[grpc]\n  address = \"{socket}\"\n[debug]\n  level = \"error\"\n",
                root = dir.path().display(),
                socket = socket.display()
            ),
        )
        .unwrap();
        // runc keeps container state in /run/containerd/runc whatever containerd's own state
        // folder: each containerd gets a private one (a mount namespace with a tmpfs there; ctr
        // makes its FIFOs in /run/containerd/fifo, which stays shared),
        // so two of them can run containers of the same name.
        let mut command = match host {
            Some(host) => host.command("unshare"),
            None => Command::new("unshare"),
        };
        fs_err::create_dir_all("/run/containerd/runc").unwrap();
        let server = Server::spawn(
            command
                .args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg("mount -t tmpfs tmpfs /run/containerd/runc && exec \"$0\" --config \"$1\"")
                .arg(&binary)
                .arg(&config),
            &dir.path().join("containerd.log"),
        );
        let containerd = Containerd {
            socket,
            _server: server,
            _dir: dir,
        };
        wait_until("containerd to answer", Duration::from_secs(30), || {
            containerd.ctr(&["version"]).status.success()
        });
        containerd
    }

    /// Every container task ends with containerd: shims outlive it otherwise.
    fn end_tasks(&self) {
        let tasks = self.ctr(&["tasks", "ls", "-q"]);
        for task in String::from_utf8_lossy(&tasks.stdout).split_whitespace() {
            let _ = self.ctr(&["tasks", "delete", "--force", task]);
        }
    }

    pub fn ctr(&self, arguments: &[&str]) -> Output {
        Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(arguments)
            .output()
            .unwrap()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.end_tasks();
    }
}

/// A private docker daemon (Debian's docker.io) with its own data, exec root and socket; no
/// iptables or bridge, so it can run beside anything else.
pub struct Docker {
    pub host: String,
    _server: Server,
    _dir: tempfile::TempDir,
}

impl Docker {
    pub fn start() -> Docker {
        let binary = require("dockerd", "docker.io");
        let dir = tempfile::Builder::new()
            .prefix("dkr")
            .tempdir_in("/tmp")
            .unwrap();
        let host = format!("unix://{}/docker.sock", dir.path().display());
        let server = Server::spawn(
            Command::new(binary)
                .arg("--data-root")
                .arg(dir.path().join("data"))
                .arg("--exec-root")
                .arg(dir.path().join("exec"))
                .arg("--pidfile")
                .arg(dir.path().join("docker.pid"))
                .args(["-H", &host])
                .args(["--iptables=false", "--ip6tables=false", "--bridge=none"]),
            &dir.path().join("dockerd.log"),
        );
        let docker = Docker {
            host,
            _server: server,
            _dir: dir,
        };
        wait_until("dockerd to answer", Duration::from_secs(60), || {
            docker.docker(&["info"]).status.success()
        });
        docker
    }

    pub fn docker(&self, arguments: &[&str]) -> Output {
        Command::new("docker")
            .env("DOCKER_HOST", &self.host)
            .args(arguments)
            .output()
            .unwrap()
    }
}
