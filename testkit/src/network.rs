//! Several hosts on this machine: each a network namespace with its own address, all joined by
//! a bridge in a namespace of its own (veth pairs), so they reach each other and nothing else.
//! A host with no link at all has loopback alone: the airgap host.
//!
//! Names carry the test process's id and a counter, so tests running side by side do not meet;
//! everything is deleted when the network is dropped.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{require, run};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A bridge namespace and the hosts attached to it.
pub struct Network {
    prefix: String,
    switch: String,
    /// The first three octets of the hosts' addresses.
    subnet: String,
    namespaces: Vec<String>,
}

/// One host: a network namespace.
#[derive(Debug, Clone)]
pub struct Host {
    pub namespace: String,
    /// Its address on the network (none for an isolated host).
    pub address: Option<String>,
    /// Its link to the network (none for an isolated host).
    pub interface: Option<String>,
}

impl Host {
    /// `program`, to run inside this host's network namespace. It enters that namespace
    /// alone (`nsenter`, not `ip netns exec`, which mounts a sysfs of its own over /sys and so
    /// hides the cgroup mounts runc needs).
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net=/run/netns/{}", self.namespace))
            .arg(program);
        command
    }

    /// Runs `work` on a thread inside this host's network namespace: the sockets it opens and
    /// the processes it starts are the host's (a browser, and the connection that drives it).
    pub fn run_inside<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.namespace);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let namespace = fs_err::File::open(&path).unwrap();
                    nix::sched::setns(namespace, nix::sched::CloneFlags::CLONE_NEWNET)
                        .unwrap_or_else(|error| panic!("entering {path}: {error}"));
                    work()
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    pub fn address(&self) -> &str {
        self.address.as_deref().expect("a host on the network")
    }

    /// Cuts the host's link to the network (as a pulled cable), or puts it back.
    pub fn set_link(&self, up: bool) {
        let interface = self.interface.as_deref().expect("a host on the network");
        run(Command::new("ip").args([
            "-n",
            &self.namespace,
            "link",
            "set",
            interface,
            if up { "up" } else { "down" },
        ]));
    }
}

impl Network {
    pub fn new() -> Network {
        require("ip", "iproute2");
        require("nsenter", "util-linux");
        let counter = NEXT.fetch_add(1, Ordering::SeqCst);
        let id = std::process::id();
        let prefix = format!("b{}{counter}", id % 100_000);
        let switch = format!("{prefix}sw");
        run(Command::new("ip").args(["netns", "add", &switch]));
        run(Command::new("ip").args(["-n", &switch, "link", "add", "br0", "type", "bridge"]));
        run(Command::new("ip").args(["-n", &switch, "link", "set", "br0", "up"]));
        // 10.<a>.<b>.0/24, from the process id and counter: distinct between concurrent tests.
        let subnet = format!("10.{}.{}", 100 + (id % 100), (counter * 7 + id / 100) % 250);
        Network {
            prefix,
            namespaces: vec![switch.clone()],
            switch,
            subnet,
        }
    }

    /// A new host on the network, with the next address.
    pub fn host(&mut self) -> Host {
        let number = self.namespaces.len();
        let namespace = format!("{}h{number}", self.prefix);
        let outside = format!("{}v{number}", self.prefix);
        let inside = format!("{}p{number}", self.prefix);
        let address = format!("{}.{}", self.subnet, number);
        run(Command::new("ip").args(["netns", "add", &namespace]));
        self.namespaces.push(namespace.clone());
        run(Command::new("ip").args([
            "link", "add", &inside, "type", "veth", "peer", "name", &outside,
        ]));
        run(Command::new("ip").args(["link", "set", &inside, "netns", &namespace]));
        run(Command::new("ip").args(["link", "set", &outside, "netns", &self.switch]));
        run(Command::new("ip").args([
            "-n",
            &self.switch,
            "link",
            "set",
            &outside,
            "master",
            "br0",
            "up",
        ]));
        run(Command::new("ip").args([
            "-n",
            &namespace,
            "addr",
            "add",
            &format!("{address}/24"),
            "dev",
            &inside,
        ]));
        run(Command::new("ip").args(["-n", &namespace, "link", "set", &inside, "up"]));
        run(Command::new("ip").args(["-n", &namespace, "link", "set", "lo", "up"]));
        Host {
            namespace,
            address: Some(address),
            interface: Some(inside),
        }
    }

    /// A host with loopback alone: no link to anything.
    pub fn isolated_host(&mut self) -> Host {
        let namespace = format!("{}i{}", self.prefix, self.namespaces.len());
        run(Command::new("ip").args(["netns", "add", &namespace]));
        self.namespaces.push(namespace.clone());
        run(Command::new("ip").args(["-n", &namespace, "link", "set", "lo", "up"]));
        Host {
            namespace,
            address: None,
            interface: None,
        }
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for namespace in self.namespaces.iter().rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .status();
        }
    }
}
