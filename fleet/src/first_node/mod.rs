//! The first node's side of the fleet: it listens for the other nodes, registers those that
//! bring a join token, takes their reports and progress, and answers their polls with work,
//! one thread per connection. Every refusal is logged with the peer's key and address.
//!
//! Nothing slow happens under a lock: the registry lock covers an in-memory change (the file
//! is written at most five times a second, outside the lock; a registration is answered once
//! it is on disk); polls read the rollouts from
//! memory and may be held (a long poll) until the coordinator hands the node work. The
//! coordinator decides on every progress a node sends, on every change of the rollout files
//! (`berth rollout` on the command line), and when a deadline or soak falls due.
//!
//! `prepare` makes the first node's key and the join tokens, and publishes the fleet's join
//! parameters in one write so that `berth join-command` carries them to the next node.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use berth_formats::fleet::{NodeRecord, Request};
use berth_formats::rollout::RolloutRecord;

mod admin;
mod admission;
pub mod bundles;
mod messages;

use admin::serve_lock;
pub use admin::{Serving, age, check_first_node, nodes, prepare, remove, serves};
use admission::{Admission, MAX_UNREGISTERED_FRAME, Slot};
use bundles::Bundles;

use crate::channel::{self, ChannelError, Identity, Pin};
use crate::log::FleetLog;
use crate::registry::Registry;
use crate::rollouts::{self, Rollouts};
use crate::{FleetPaths, JoinParams};

/// Where the first node's own record was seen from: its add-ons are read from its own state.
pub const ITSELF: &str = "itself";

/// The most connections served at once (each a thread).
pub const MAX_CONNECTIONS: usize = 1024;
/// The most polls held at once: past it, a poll is answered at once and the node learns of
/// its work at its next one.
pub const MAX_HELD_POLLS: usize = MAX_CONNECTIONS / 2;
/// How often the registry is saved, at most: one write for all the messages of that time,
/// `berth nodes` a fraction of a second behind, a registration answered that much later.
const SAVE_EVERY: Duration = Duration::from_millis(200);
/// How often the coordinator looks for rollout files the command line changed.
const WATCH_EVERY: Duration = Duration::from_millis(25);

/// Serves the other nodes on `listener` until the process ends.
pub fn serve(
    paths: &FleetPaths,
    join: Arc<dyn JoinParams>,
    listener: TcpListener,
) -> anyhow::Result<()> {
    // Held while serving (a plain flock: the kernel lets go when the process dies), so
    // commands can tell whether the server runs.
    let path = serve_lock(paths);
    let _serving = crate::lock_file(&path, false).map_err(|_| {
        anyhow::anyhow!(
            "berth fleet serve already runs on this node ({} is held)",
            path.display()
        )
    })?;
    let identity = Identity::load_or_create(&paths.dir)?;
    let config = channel::server_config(&identity)?;
    let rollouts = Rollouts::new(paths);
    let records = rollouts.load_all()?;
    let shared = Arc::new(Shared {
        registry: Mutex::new(Registry::load(&paths.registry())?),
        rollouts,
        records: Mutex::new(Arc::new(records)),
        changed: Condvar::new(),
        saved: Condvar::new(),
        held_polls: AtomicUsize::new(0),
        seen: Mutex::new(None),
        own: identity.pin(),
        join,
        log: FleetLog::new(paths.log()),
        bundles: Bundles::new(paths),
    });
    {
        let shared = shared.clone();
        std::thread::spawn(move || shared.coordinate());
    }
    {
        let shared = shared.clone();
        std::thread::spawn(move || shared.save_changes());
    }
    raise_open_files_limit();
    let open = Arc::new(AtomicUsize::new(0));
    let admission = Arc::new(Admission::default());
    for tcp in listener.incoming() {
        let tcp = match tcp {
            Ok(tcp) => tcp,
            Err(error) => {
                // Out of descriptors, say: wait a little rather than spin on the error.
                shared
                    .log
                    .write_throttled(&format!("failed to accept a connection: {error}"));
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let address = tcp
            .peer_addr()
            .map_or_else(|_| "?".into(), |address| address.to_string());
        // A flood of connections costs a bounded number of threads: past the limits, a
        // connection is closed at once, saying it is for load (the node waits and retries).
        // Strangers have a budget of their own.
        let slot = tcp
            .peer_addr()
            .ok()
            .and_then(|peer| admission.admit(peer.ip()));
        let Some(slot) = slot else {
            shared.log.write_throttled(&format!(
                "busy: closed a connection from {address}: connections from unregistered keys fill their share"
            ));
            channel::refuse_busy(tcp);
            continue;
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            shared.log.write_throttled(&format!(
                "busy: closed a connection from {address}: {MAX_CONNECTIONS} are open"
            ));
            channel::refuse_busy(tcp);
            continue;
        }
        let (config, shared, open) = (config.clone(), shared.clone(), open.clone());
        std::thread::spawn(move || {
            if let Err(error) = handle(config, tcp, slot, &shared) {
                shared.log.write_throttled(&format!(
                    "connection ended: {}",
                    berth_formats::report::chain(&error)
                ));
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

struct Shared {
    registry: Mutex<Registry>,
    rollouts: Rollouts,
    /// The rollouts as last read or written: polls read them here, never from disk.
    records: Mutex<Arc<Vec<RolloutRecord>>>,
    /// Signalled whenever `records` changes: held polls look again.
    changed: Condvar,
    /// Signalled whenever the registry was saved: registrations wait for it.
    saved: Condvar,
    held_polls: AtomicUsize,
    /// When the rollout files had last changed at the coordinator's last decision.
    seen: Mutex<Option<Option<SystemTime>>>,
    /// The first node's own key: its agent's messages are its own.
    own: Pin,
    /// The node's join parameters: the tokens, and what a joined node's upgrade needs.
    join: Arc<dyn JoinParams>,
    log: FleetLog,
    /// Support bundles the command line asked the nodes for.
    bundles: Bundles,
}

impl Shared {
    /// The coordinator: decides again whenever a deadline or soak falls due or the rollout
    /// files change.
    fn coordinate(&self) {
        loop {
            // A panic in a decision must not end the coordinator for good.
            let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.tick()))
                .unwrap_or_else(|_| {
                    Err(anyhow::anyhow!("a decision panicked; see standard error"))
                });
            let pause = match ticked {
                Ok(pause) => pause,
                Err(error) => {
                    self.log.write_throttled(&format!(
                        "rollouts: {}",
                        berth_formats::report::chain(error.as_ref())
                    ));
                    Duration::from_secs(1)
                }
            };
            let seen = self.rollouts.modified();
            let until = Instant::now() + pause;
            while Instant::now() < until && self.rollouts.modified() == seen {
                std::thread::sleep(
                    WATCH_EVERY.min(until.saturating_duration_since(Instant::now())),
                );
            }
        }
    }

    /// The saver: writes the registry whenever it changed, at most every [`SAVE_EVERY`], the
    /// file written with the registry free for messages; wakes the registrations that wait
    /// for their record to be on disk.
    fn save_changes(&self) {
        loop {
            std::thread::sleep(SAVE_EVERY);
            let (changes, bytes, path) = {
                let registry = self.registry();
                if registry.is_saved(registry.changes()) {
                    continue;
                }
                let (changes, bytes) = registry.snapshot();
                (changes, bytes, registry.path().to_path_buf())
            };
            match Registry::write(&path, &bytes) {
                Ok(()) => self.registry().saved_up_to(changes),
                Err(error) => self.log.write(&berth_formats::report::chain(&error)),
            }
            self.saved.notify_all();
        }
    }

    /// Waits until the registry's first `changes` changes are on disk.
    fn wait_saved(&self, changes: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut registry = self.registry();
        while !registry.is_saved(changes) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            registry = self
                .saved
                .wait_timeout(registry, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        true
    }

    /// One decision for every rollout; how long until the next is due.
    fn tick(&self) -> anyhow::Result<Duration> {
        // Nothing to decide while every rollout is finished and no file changed.
        let modified = self.rollouts.modified();
        let idle = !self.records().iter().any(rollouts::unfinished);
        let changed = {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let changed = *seen != Some(modified);
            if idle && !changed {
                return Ok(Duration::from_secs(1));
            }
            *seen = Some(modified);
            changed
        };
        // A record turns damaged only when the files change: said then, not every second.
        if changed {
            for damaged in self.rollouts.load_all_reporting()?.1 {
                self.log.write_throttled(&damaged);
            }
        }
        let nodes: Vec<NodeRecord> = self.registry().nodes().cloned().collect();
        let now = SystemTime::now();
        self.rollouts.update(|records| {
            for record in records.iter_mut() {
                self.decide(record, &nodes, now);
            }
            self.publish(records);
            Ok(rollouts::next_tick(records, now))
        })
    }

    /// One decision for `record`, logged when its state or failures change.
    fn decide(&self, record: &mut RolloutRecord, nodes: &[NodeRecord], now: SystemTime) {
        let was = (record.state, failed_nodes(record));
        if rollouts::tick(record, nodes, now) {
            let is = (record.state, failed_nodes(record));
            if was != is {
                self.log.write(&format!(
                    "rollout {}: {:?}, failed: [{}]",
                    record.work_id(),
                    record.state,
                    is.1.join(", ")
                ));
            }
        }
    }

    /// Makes `records` what polls see, and wakes the polls held.
    fn publish(&self, records: &[RolloutRecord]) {
        *self.records() = Arc::new(records.to_vec());
        self.changed.notify_all();
    }

    fn records(&self) -> MutexGuard<'_, Arc<Vec<RolloutRecord>>> {
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn handle(
    config: Arc<rustls::ServerConfig>,
    tcp: TcpStream,
    mut slot: Slot,
    shared: &Shared,
) -> Result<(), ChannelError> {
    let mut connection = channel::accept(config, tcp)?;
    let (peer, address) = (connection.peer().clone(), connection.address().to_string());
    // A registered node's connection leaves the strangers' budget, and may send more.
    if peer == shared.own || shared.registry().by_pin(&peer).is_some() {
        slot.release();
    }
    let limit = if slot.is_held() {
        MAX_UNREGISTERED_FRAME
    } else {
        channel::MAX_FRAME
    };
    // A node may say several things on one connection; it ends when the node hangs up.
    loop {
        let request: Request = match connection.receive_at_most(limit) {
            Ok(request) => request,
            Err(ChannelError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                return Ok(());
            }
            Err(error) => {
                // Logged here, where the peer's key is known; the connection ends.
                shared.log.write_throttled(&format!(
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

fn failed_nodes(record: &RolloutRecord) -> Vec<String> {
    record
        .targets
        .iter()
        .filter(|target| target.state == berth_formats::rollout::TargetState::Failed)
        .map(|target| target.node.clone())
        .collect()
}

/// Lifts the soft limit on open files to the hard one: every connection is a descriptor.
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
