//! The first node's side of the fleet: it listens for the other nodes, registers those that
//! bring the join token, and takes the reports of those it knows, one thread per connection,
//! the registry behind one lock. Every refusal is logged with the peer's key and address.
//!
//! `prepare` makes the first node's key and the join token, and publishes the three join
//! parameters (`fleet-address`, `fleet-pin`, `fleet-token`, the token a secret that expires)
//! so that `berth join-command` carries them to the next node.

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use berth_formats::fleet::{
    ADDRESS_PARAM, NodeInfo, NodeRecord, PIN_PARAM, Request, Response, Role, TOKEN_PARAM,
};

use crate::fleet::channel::{self, ChannelError, Identity, Pin};
use crate::fleet::registry::Registry;
use crate::fleet::rollouts::{self, Rollouts};
use crate::join::JoinStore;
use crate::layout::Layout;
use crate::state::now;

/// Where the first node's own record was seen from: its add-ons are read from its own state.
pub const ITSELF: &str = "itself";

/// Makes (or keeps) the first node's key and join token, and publishes them as join
/// parameters with `address`, where the other nodes reach this one.
pub fn prepare(
    layout: &Layout,
    name: &str,
    address: &str,
    token_ttl: Duration,
) -> anyhow::Result<Pin> {
    let identity = Identity::load_or_create(&layout.fleet_dir())?;
    // The first node is in its own registry, as the primary it is.
    let mut registry = Registry::load(&layout.fleet_registry())?;
    let own = NodeInfo {
        name: name.to_string(),
        role: Role::Primary,
        labels: Default::default(),
        address: address.to_string(),
    };
    registry
        .register(&identity.pin(), own, ITSELF, &now())
        .map_err(anyhow::Error::msg)?;
    registry.save()?;
    let store = JoinStore::new(layout.join_file());
    let joined = store.load()?;
    let current = joined.params.get(TOKEN_PARAM).filter(|param| {
        param
            .expires_at
            .as_deref()
            .is_some_and(|expires| expires > now().as_str())
    });
    store.set(ADDRESS_PARAM, address.to_string(), false, false, token_ttl)?;
    store.set(PIN_PARAM, identity.pin().0, false, false, token_ttl)?;
    // A token still valid is kept: join commands already handed out go on working.
    if current.is_none() {
        store.set(TOKEN_PARAM, new_token()?, true, false, token_ttl)?;
    }
    // The first node is a node of the fleet too: its `berth fleet agent` reports to itself.
    crate::fleet::node::keep_first_node(
        layout,
        &crate::fleet::node::FirstNode {
            address: address.to_string(),
            pin: identity.pin(),
        },
    )?;
    Ok(identity.pin())
}

/// 128 random bits, hex.
fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    use std::io::Read as _;
    fs_err::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Serves the other nodes on `listener` until the process ends.
pub fn serve(layout: &Layout, listener: TcpListener) -> anyhow::Result<()> {
    let identity = Identity::load_or_create(&layout.fleet_dir())?;
    let config = channel::server_config(&identity)?;
    let shared = Arc::new(Shared {
        registry: Mutex::new(Registry::load(&layout.fleet_registry())?),
        rollouts: Rollouts::new(layout),
        own: identity.pin(),
        join_file: layout.join_file(),
        log: layout.log_dir().join("fleet.log"),
    });
    // The coordinator: decides each rollout again every second, from what is on disk.
    {
        let shared = shared.clone();
        std::thread::spawn(move || {
            loop {
                let pause = match shared.tick() {
                    Ok(pause) => pause,
                    Err(error) => {
                        shared.log(&format!(
                            "rollouts: {}",
                            berth_formats::report::chain(error.as_ref())
                        ));
                        Duration::from_secs(1)
                    }
                };
                std::thread::sleep(pause);
            }
        });
    }
    let open = Arc::new(AtomicUsize::new(0));
    for tcp in listener.incoming() {
        let Ok(tcp) = tcp else { continue };
        // A flood of connections costs a bounded number of threads: past the limit, a
        // connection is closed at once (a node retries).
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            shared.log(&format!(
                "closed a connection from {}: {MAX_CONNECTIONS} are open",
                tcp.peer_addr()
                    .map_or_else(|_| "?".into(), |address| address.to_string())
            ));
            continue;
        }
        let (config, shared, open) = (config.clone(), shared.clone(), open.clone());
        std::thread::spawn(move || {
            if let Err(error) = handle(config, tcp, &shared) {
                shared.log(&format!(
                    "connection ended: {}",
                    berth_formats::report::chain(&error)
                ));
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

/// The most connections served at once (each a thread).
pub const MAX_CONNECTIONS: usize = 1024;

struct Shared {
    registry: Mutex<Registry>,
    rollouts: Rollouts,
    /// The first node's own key: its agent's messages are its own.
    own: Pin,
    join_file: PathBuf,
    log: PathBuf,
}

impl Shared {
    /// One decision for every rollout; how long until the next.
    fn tick(&self) -> anyhow::Result<Duration> {
        let nodes: Vec<NodeRecord> = self.registry().nodes().cloned().collect();
        let now = SystemTime::now();
        self.rollouts.update(|records| {
            for record in records.iter_mut() {
                let was = (record.state, failed_nodes(record));
                if rollouts::tick(record, &nodes, now) {
                    let is = (record.state, failed_nodes(record));
                    if was != is {
                        self.log(&format!(
                            "rollout {}: {:?}, failed: [{}]",
                            record.work_id(),
                            record.state,
                            is.1.join(", ")
                        ));
                    }
                }
            }
            Ok(rollouts::next_tick(records, now))
        })
    }

    /// The work a rollout gives `node` now, with the join parameters a joined node's upgrade
    /// needs (the fleet's own left out: the node registered already).
    fn work_for(&self, node: &str, primary: bool) -> anyhow::Result<Response> {
        let records = self.rollouts.load_all()?;
        if !records.iter().any(|record| {
            record.targets.iter().any(|target| {
                target.node == node && target.state == berth_formats::rollout::TargetState::Running
            })
        }) {
            return Ok(Response::Idle);
        }
        let file = JoinStore::new(self.join_file.clone()).load()?;
        let params: Vec<(String, String)> = crate::join::join_params(&file, primary)?
            .into_iter()
            .filter(|(key, _)| ![ADDRESS_PARAM, PIN_PARAM, TOKEN_PARAM].contains(&key.as_str()))
            .collect();
        Ok(rollouts::work_for(&records, node, &params)
            .map_or(Response::Idle, |work| Response::Work { work }))
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One line in the fleet log (and on standard error): refusals are what an admin looks for.
    fn log(&self, line: &str) {
        let line = format!("{} {line}\n", now());
        eprint!("berth fleet: {line}");
        if let Some(parent) = self.log.parent() {
            let _ = fs_err::create_dir_all(parent);
        }
        if let Ok(mut file) = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }

    /// Whether `token` is the published, unexpired join token.
    fn token_is_good(&self, token: &str) -> bool {
        let Ok(file) = JoinStore::new(self.join_file.clone()).load() else {
            return false;
        };
        file.params.get(TOKEN_PARAM).is_some_and(|param| {
            param
                .expires_at
                .as_deref()
                .is_some_and(|expires| expires > now().as_str())
                && constant_time_equal(param.value.as_bytes(), token.as_bytes())
        })
    }

    fn answer(&self, peer: &Pin, address: &str, request: Request) -> Response {
        let refused = |reason: String| {
            self.log(&format!("refused {address} (key {peer}): {reason}"));
            Response::Refused { reason }
        };
        if let Err(reason) = request.check() {
            return refused(reason);
        }
        let address = if *peer == self.own { ITSELF } else { address };
        let mut registry = self.registry();
        let now = now();
        let outcome = match request {
            Request::Register { token, node } => {
                if !self.token_is_good(&token) {
                    return refused("the join token is wrong or has expired".into());
                }
                let name = node.name.clone();
                registry
                    .register(peer, node, address, &now)
                    .map(|()| Response::Registered { name })
            }
            Request::Report { addons } => registry
                .report(peer, addons, address, &now)
                .map(|_| Response::Accepted),
            Request::Poll => match registry.touch(peer, address, &now) {
                Ok(name) => {
                    let primary = registry
                        .by_pin(peer)
                        .is_some_and(|record| record.info.role == Role::Primary);
                    Ok(self.work_for(&name, primary).unwrap_or_else(|error| {
                        self.log(&format!(
                            "rollouts: {}",
                            berth_formats::report::chain(error.as_ref())
                        ));
                        Response::Idle
                    }))
                }
                Err(reason) => Err(reason),
            },
            Request::Progress {
                work,
                outcome,
                message,
                addons,
            } => registry
                .report(peer, addons, address, &now)
                .map(|record| record.info.name.clone())
                .and_then(|name| {
                    let said = self.rollouts.update(|records| {
                        Ok(rollouts::progress(
                            records,
                            &name,
                            &work,
                            outcome,
                            &message,
                            SystemTime::now(),
                        ))
                    });
                    match said {
                        Ok(Ok(())) => {
                            self.log(&format!("{name}: {work} {outcome:?}"));
                            Ok(Response::Accepted)
                        }
                        Ok(Err(reason)) => Err(reason),
                        Err(error) => Err(berth_formats::report::chain(error.as_ref())),
                    }
                }),
        };
        match outcome {
            Ok(response) => match registry.save() {
                Ok(()) => response,
                Err(error) => refused(berth_formats::report::chain(&error)),
            },
            Err(reason) => refused(reason),
        }
    }
}

fn handle(
    config: Arc<rustls::ServerConfig>,
    tcp: TcpStream,
    shared: &Shared,
) -> Result<(), ChannelError> {
    let mut connection = channel::accept(config, tcp)?;
    let (peer, address) = (connection.peer().clone(), connection.address().to_string());
    // A node may say several things on one connection; it ends when the node hangs up.
    loop {
        let request: Request = match connection.receive() {
            Ok(request) => request,
            Err(ChannelError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                return Ok(());
            }
            Err(error) => {
                // Logged here, where the peer's key is known; the connection ends.
                shared.log(&format!(
                    "refused {address} (key {peer}): {}",
                    berth_formats::report::chain(&error)
                ));
                return Ok(());
            }
        };
        let response = shared.answer(&peer, &address, request);
        connection.send(&response)?;
    }
}

/// Compares without stopping at the first difference, so the time taken tells nothing of
/// how much of a guessed token was right.
fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |difference, (left, right)| difference | (left ^ right))
            == 0
}

fn failed_nodes(record: &berth_formats::rollout::RolloutRecord) -> Vec<String> {
    record
        .targets
        .iter()
        .filter(|target| target.state == berth_formats::rollout::TargetState::Failed)
        .map(|target| target.node.clone())
        .collect()
}

/// Every registered node as the first node knows it, its own record with its add-ons as
/// they are now.
pub fn nodes(layout: &Layout) -> anyhow::Result<Vec<NodeRecord>> {
    let registry = Registry::load(&layout.fleet_registry())?;
    let mut own = None;
    let mut records: Vec<NodeRecord> = registry.nodes().cloned().collect();
    for record in &mut records {
        if record.seen_from == ITSELF {
            if own.is_none() {
                own = Some(crate::fleet::node::local_addons(layout)?);
            }
            record.addons = own.clone().unwrap_or_default();
            record.last_contact = now();
        }
    }
    Ok(records)
}

/// How long ago an RFC 3339 time was, for `berth nodes`.
pub fn age(time: &str) -> Option<Duration> {
    let then = humantime::parse_rfc3339_weak(time).ok()?;
    SystemTime::now().duration_since(then).ok()
}
