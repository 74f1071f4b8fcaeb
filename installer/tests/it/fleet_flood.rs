//! The first node under a flood from peers with no key or token: a thousand connections from
//! one address dripping a byte at a time, and strangers' messages that claim a megabyte and
//! send most of it. A registered node still reports and polls at once, and the first node
//! stays small.

use crate::support;

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use berth_fleet::channel::{self, Identity};
use berth_formats::fleet::{Request, Response};
use support::*;

/// The dripping connections, more than the first node's whole connection limit.
const DRIPPING: usize = 1100;
/// Strangers that each claim a 1 MiB message and send all of it but its last byte.
const PARTIAL_FRAMES: usize = 300;

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    let (IpAddr::V4(from), SocketAddr::V4(to)) = (from, to) else {
        unreachable!("loopback v4")
    };
    let fd: OwnedFd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?;
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::from(std::net::SocketAddrV4::new(from, 0)),
    )?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(to))?;
    Ok(TcpStream::from(fd))
}

/// The first node's peak resident memory, in MiB.
fn peak_mib(pid: u32) -> f64 {
    let status = fs_err::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

#[test]
fn a_registered_node_is_heard_through_a_flood_of_strangers() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    assert!(
        hard > DRIPPING as u64 + 200,
        "the test needs {DRIPPING} descriptors"
    );

    let mut dist = TestDist::new();
    let folder = dist.addon("hello", "1.0.0", "function hello() { :; }\n");
    dist.package(&folder);
    dist.write_versions();
    let spec = dist.spec("hello.yaml", &[("hello", "version: 1.0.0")]);
    let first = Node::new();
    succeeded(&first.install(&spec, &dist.url(), &[]));
    let port = free_port();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut server = spawn_quietly(&mut first.command(&[
        "fleet",
        "serve",
        "--listen",
        &address.to_string(),
        "--name",
        "first",
    ]));
    let command = fleet_join_command(|| first.berth(&["join-command", "--airgap"]));
    let (pin, token) = (
        join_param(&command, "fleet-pin"),
        join_param(&command, "fleet-token"),
    );
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &[]));
    succeeded(&node.berth(&[
        "fleet",
        "register",
        "--first-node",
        &address.to_string(),
        "--pin",
        &pin,
        "--token",
        &token,
        "--name",
        "node-2",
    ]));

    // Strangers from 127.0.0.2 drip a byte into each of their connections every half
    // second, and open them again as they are closed.
    let stop = Arc::new(AtomicBool::new(false));
    let dripper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let from: IpAddr = "127.0.0.2".parse().unwrap();
            let mut connections: Vec<Option<TcpStream>> = (0..DRIPPING).map(|_| None).collect();
            while !stop.load(Ordering::SeqCst) {
                let mut opened = 0;
                for slot in &mut connections {
                    if slot.is_none() && opened < 200 {
                        *slot = connect_from(from, address).ok();
                        opened += 1;
                    }
                    if let Some(connection) = slot
                        && connection.write_all(&[0x16]).is_err()
                    {
                        *slot = None;
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    // Strangers with keys of their own claim a 1 MiB message and send it but its last byte.
    let partial = {
        let pin = berth_fleet::channel::Pin(pin.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..PARTIAL_FRAMES {
                let stranger = Identity::generate().unwrap();
                let config = channel::client_config(&stranger, &pin).unwrap();
                let Ok(mut connection) = channel::connect(config, address) else {
                    continue;
                };
                let claimed = (1u32 << 20) - 16;
                let mut frame = claimed.to_be_bytes().to_vec();
                frame.extend(std::iter::repeat_n(b' ', claimed as usize - 1));
                let _ = connection.write_raw(&frame);
                held.push(connection);
            }
            held
        })
    };
    std::thread::sleep(Duration::from_secs(2));

    // Through it all, the registered node reports and polls within its interval.
    for _ in 0..3 {
        let asked = Instant::now();
        succeeded(&node.berth(&["fleet", "report"]));
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "{:?}",
            asked.elapsed()
        );
        let paths = berth::fleet::paths(&berth::node::layout::Layout::new(node.root.path()));
        let first_node = berth_fleet::node::first_node(&paths).unwrap();
        let asked = Instant::now();
        let answer =
            berth_fleet::node::exchange(&paths, &first_node, &Request::Poll { wait_ms: 0 })
                .unwrap();
        assert_eq!(answer, Response::Idle);
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "{:?}",
            asked.elapsed()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let held = partial.join().unwrap();
    let peak = peak_mib(server.id());
    stop.store(true, Ordering::SeqCst);
    dripper.join().unwrap();
    drop(held);
    assert!(peak < 128.0, "the first node's peak memory: {peak:.1} MiB");
    // The flood is in the log, said in a bounded number of lines.
    let log = fs_err::read_to_string(first.root.path().join("var/log/berth/fleet.log")).unwrap();
    assert!(
        log.contains("connections from unregistered keys fill their share"),
        "{log}"
    );
    assert!(log.contains("over the 196608 allowed"), "{log}");
    assert!(log.lines().count() < 2000, "{} lines", log.lines().count());
    let _ = server.kill();
    let _ = server.wait();
}
