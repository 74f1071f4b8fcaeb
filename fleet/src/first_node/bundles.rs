//! Support bundles from the fleet: the first node's command line asks nodes for their
//! bundles; the serving first node hands the request to each at its next poll and takes the
//! parts each sends, in order, straight to a file (`fleet/bundles/<id>/<machine>.tar.gz`), so
//! fifty nodes sending at once cost a part each in memory. A node that sends out of turn, past
//! the bound, for a request it was not given, or after the request closed is refused; so is a
//! part the first node's disk has no room for, or one past what it holds of all nodes at once.
//! What nodes sent is root's alone (0600, in 0700 folders) while the admin waits for it. A
//! refusal tells the node what was wrong, never where the first node keeps the parts: that
//! goes to the first node's log and to the admin.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine as _;
use berth_formats::files::{DISK_RESERVE, free_space, private_dir};
use berth_formats::fleet::MAX_NODE_BUNDLE;
use sha2::{Digest, Sha256};

use crate::FleetPaths;

/// How long past its wait a request is kept: parts still under way may end.
const GRACE: Duration = Duration::from_secs(60);
/// A node handed a request that has sent nothing this long after is handed it again (the
/// answer to its poll may have been lost).
const HAND_AGAIN: Duration = Duration::from_secs(60);
/// The most bytes of nodes' bundles the first node holds at once, across its requests and
/// nodes: a node may send [`MAX_NODE_BUNDLE`], and a request may name thousands of nodes.
pub const MAX_BUNDLES_BYTES: u64 = 16 << 30;

/// Where a node's bundle for request `id` is written, whole.
pub fn bundle_file(paths: &FleetPaths, id: &str, machine: &str) -> PathBuf {
    bundles_dir(paths)
        .join(id)
        .join(format!("{machine}.tar.gz"))
}

/// Where a node's word that it could not collect a bundle is written.
pub fn error_file(paths: &FleetPaths, id: &str, machine: &str) -> PathBuf {
    bundles_dir(paths).join(id).join(format!("{machine}.error"))
}

pub fn bundles_dir(paths: &FleetPaths) -> PathBuf {
    paths.dir.join("bundles")
}

#[derive(Default)]
struct NodeState {
    handed: Option<Instant>,
    received: u64,
    hasher: Sha256,
    /// A part is being written: another at once is refused.
    writing: bool,
    /// The bytes of the part being written.
    in_flight: u64,
    done: bool,
}

struct Ask {
    nodes: BTreeMap<String, NodeState>,
    since_seconds: Option<u64>,
    expires: Instant,
    /// Bytes its nodes' parts hold on disk, with those being written.
    held: u64,
}

/// Why a part was refused: what the node is told, and what the first node's log is told
/// besides (which may name its own paths).
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) reason: String,
    pub(super) local: Option<String>,
}

impl From<String> for Refusal {
    fn from(reason: String) -> Self {
        Self {
            reason,
            local: None,
        }
    }
}

pub(super) struct Bundles {
    dir: PathBuf,
    asks: Mutex<BTreeMap<String, Ask>>,
    /// The bytes the nodes' parts may still take on the disk of a folder ([`room`]).
    room: fn(&Path) -> u64,
    /// The most bytes held at once ([`MAX_BUNDLES_BYTES`]).
    max_bytes: u64,
}

/// The bytes nodes' bundles may still take on the disk holding `dir`: what is free, less
/// [`DISK_RESERVE`] or a tenth of the disk when that is more. The first node runs the cluster
/// from that disk, and kubelet starts evicting pods when less than a tenth of it is free.
fn room(dir: &Path) -> u64 {
    let size = nix::sys::statvfs::statvfs(dir).map_or(0, |stats| {
        stats.blocks().saturating_mul(stats.fragment_size())
    });
    free_space(dir).saturating_sub(DISK_RESERVE.max(size / 10))
}

impl Bundles {
    /// Requests of an earlier `berth fleet serve` are over: what they left is removed.
    pub(super) fn new(paths: &FleetPaths) -> Self {
        let dir = bundles_dir(paths);
        let _ = fs_err::remove_dir_all(&dir);
        Self {
            dir,
            asks: Mutex::default(),
            room,
            max_bytes: MAX_BUNDLES_BYTES,
        }
    }

    fn asks(&self) -> MutexGuard<'_, BTreeMap<String, Ask>> {
        let mut asks = self
            .asks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        asks.retain(|_, ask| ask.expires > now);
        asks
    }

    pub(super) fn ask(
        &self,
        id: &str,
        nodes: &[String],
        since_seconds: Option<u64>,
        wait: Duration,
    ) -> Result<(), String> {
        // Asked by the first node itself: its own paths may be said.
        private_dir(&self.dir)
            .and_then(|()| private_dir(&self.dir.join(id)))
            .map_err(|error| error.to_string())?;
        self.asks().insert(
            id.to_string(),
            Ask {
                nodes: nodes
                    .iter()
                    .map(|node| (node.clone(), NodeState::default()))
                    .collect(),
                since_seconds,
                expires: Instant::now() + wait + GRACE,
                held: 0,
            },
        );
        Ok(())
    }

    /// A request `machine` has not been handed yet: handed now.
    pub(super) fn for_node(&self, machine: &str) -> Option<(String, Option<u64>)> {
        let mut asks = self.asks();
        for (id, ask) in asks.iter_mut() {
            if let Some(state) = ask.nodes.get_mut(machine) {
                let again = state.handed.is_some_and(|handed| {
                    state.received == 0 && !state.done && handed.elapsed() > HAND_AGAIN
                });
                if state.handed.is_none() || again {
                    state.handed = Some(Instant::now());
                    return Some((id.clone(), ask.since_seconds));
                }
            }
        }
        None
    }

    pub(super) fn close(&self, id: &str) {
        self.asks().remove(id);
    }

    /// Takes one part of `machine`'s bundle for request `id`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn part(
        &self,
        machine: &str,
        id: &str,
        offset: u64,
        data: &str,
        last: bool,
        sha256: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), Refusal> {
        if error.is_some() && (!last || !data.is_empty()) {
            return Err(String::from(
                "a part that says why there is no bundle is the last, and empty",
            )
            .into());
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|error| format!("the part is not base64: {error}"))?;
        let size = bytes.len() as u64;
        {
            let mut asks = self.asks();
            let state = asks
                .get(id)
                .ok_or_else(|| format!("no bundle request {id} is open"))?
                .nodes
                .get(machine)
                .filter(|state| state.handed.is_some())
                .ok_or_else(|| format!("bundle request {id} did not ask this node"))?;
            if state.done {
                return Err(format!("this node's bundle for {id} is complete already").into());
            }
            if state.writing || offset != state.received {
                return Err(format!(
                    "a part at {offset} out of turn: {} bytes were taken so far",
                    state.received
                )
                .into());
            }
            if state.received + size > MAX_NODE_BUNDLE {
                return Err(format!(
                    "the bundle is over the {MAX_NODE_BUNDLE} bytes a node may send"
                )
                .into());
            }
            // Under the lock: parts written at once each count against the bound and the room.
            let full = self.full(&asks, size);
            let Some(ask) = asks.get_mut(id) else {
                return Err(format!("no bundle request {id} is open").into());
            };
            let Some(state) = ask.nodes.get_mut(machine) else {
                return Err(format!("bundle request {id} did not ask this node").into());
            };
            if let Some((what, to_do)) = full {
                state.done = true;
                ask.held = ask.held.saturating_sub(state.received);
                drop(asks);
                let _ = fs_err::remove_file(self.partial(id, machine));
                let local = format!("the first node refused its bundle: {what}; {to_do}");
                // Said at once, so the command line waits no longer for it.
                let _ = self.write_error(id, machine, &local);
                return Err(Refusal {
                    reason: format!(
                        "{what}, so the bundle was refused; the first node's admin is told"
                    ),
                    local: Some(local),
                });
            }
            state.writing = true;
            state.in_flight = size;
            ask.held += size;
        }
        let written = self.write(id, machine, offset, &bytes, error);
        let mut asks = self.asks();
        let Some(ask) = asks.get_mut(id) else {
            return Err(format!("bundle request {id} closed while the part was written").into());
        };
        let Some(state) = ask.nodes.get_mut(machine) else {
            return Err(format!("bundle request {id} did not ask this node").into());
        };
        state.writing = false;
        state.in_flight = 0;
        if let Err(problem) = written {
            ask.held = ask.held.saturating_sub(size);
            return Err(self.not_written(problem));
        }
        state.received += size;
        state.hasher.update(&bytes);
        if last {
            state.done = true;
            if error.is_some() {
                return Ok(());
            }
            let digest = format!("sha256:{}", hex::encode(state.hasher.clone().finalize()));
            if sha256 != Some(digest.as_str()) {
                let received = state.received;
                ask.held = ask.held.saturating_sub(received);
                drop(asks);
                let _ = fs_err::remove_file(self.partial(id, machine));
                let reason = format!(
                    "the bundle's sha256 is {digest}, not the {} the node said",
                    sha256.unwrap_or("none")
                );
                // Said at once, so the command line waits no longer for it.
                let _ = self.write_error(
                    id,
                    machine,
                    &format!("its bundle arrived damaged: {reason}"),
                );
                return Err(reason.into());
            }
            drop(asks);
            fs_err::rename(
                self.partial(id, machine),
                self.dir.join(id).join(format!("{machine}.tar.gz")),
            )
            .map_err(|problem| self.not_written(problem))?;
        }
        Ok(())
    }

    /// Whether a part of `size` bytes would take the nodes' bundles past what the first node
    /// holds at once, or past the room on its disk: what is wrong, and what the admin can do.
    fn full(&self, asks: &BTreeMap<String, Ask>, size: u64) -> Option<(String, String)> {
        let fewer =
            "or ask fewer nodes at once (`--nodes NAME …`) or less of their logs (`--since`)";
        let held: u64 = asks.values().map(|ask| ask.held).sum();
        if held + size > self.max_bytes {
            return Some((
                format!(
                    "the first node holds {} MiB of nodes' bundles, the most it takes at once",
                    self.max_bytes >> 20
                ),
                format!("wait for the requests under way to end, {fewer}"),
            ));
        }
        let in_flight: u64 = asks
            .values()
            .flat_map(|ask| ask.nodes.values())
            .map(|state| state.in_flight)
            .sum();
        let room = (self.room)(&self.dir).saturating_sub(in_flight);
        (size > room).then(|| {
            (
                format!(
                    "the first node's disk has room for {} MiB more of nodes' bundles (it keeps a reserve free), not this part",
                    room >> 20
                ),
                format!(
                    "free space on the filesystem of {}, {fewer}",
                    self.dir.display()
                ),
            )
        })
    }

    /// A part the first node failed to write: the node is told that much, the first node's
    /// log where and why.
    fn not_written(&self, problem: std::io::Error) -> Refusal {
        Refusal {
            reason: "the first node failed to write the part; its fleet.log says why".into(),
            local: Some(format!("failed to write a part: {problem}")),
        }
    }

    /// The node's word that it has no bundle (or the first node's word that it refused it),
    /// written whole before it is seen, root's alone.
    fn write_error(&self, id: &str, machine: &str, error: &str) -> std::io::Result<()> {
        let path = self.dir.join(id).join(format!("{machine}.error"));
        berth_formats::files::write_atomically_with_mode(&path, error.as_bytes(), 0o600)
    }

    fn partial(&self, id: &str, machine: &str) -> PathBuf {
        self.dir.join(id).join(format!("{machine}.partial"))
    }

    fn write(
        &self,
        id: &str,
        machine: &str,
        offset: u64,
        bytes: &[u8],
        error: Option<&str>,
    ) -> std::io::Result<()> {
        if let Some(error) = error {
            return self.write_error(id, machine, error);
        }
        append(&self.partial(id, machine), offset, bytes)
    }
}

fn append(path: &Path, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    if file.metadata()?.len() != offset {
        // A part of an earlier, broken attempt: start again from this one.
        file.set_len(offset)?;
    }
    file.write_all(bytes)
}

/// What came of asking a node for its bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gathered {
    /// Its archive, whole and as the node hashed it.
    Collected(PathBuf),
    /// The node said it could not collect one, and why.
    Failed(String),
    /// Nothing came within the bound.
    Missing,
}

/// A request the command line made: its id, and the nodes it asked.
#[derive(Debug)]
pub struct Asked {
    pub id: String,
    pub nodes: Vec<berth_formats::fleet::NodeRecord>,
    /// The first node's own name in its registry.
    pub own_name: String,
}

/// On the first node: asks `which` nodes (names or machine ids; `all` for every node but
/// the first) for their bundles, through the serving first node.
pub fn ask(
    paths: &FleetPaths,
    which: &[String],
    since: Option<Duration>,
    wait: Duration,
) -> anyhow::Result<Asked> {
    use berth_formats::fleet::{Request, Response};
    if super::check_first_node(paths)? != super::Serving::Yes {
        anyhow::bail!(
            "`berth fleet serve` is not running on this node: no other node can be asked for its bundle\nhint: start it, or run `berth support-bundle` without --nodes for this node's alone"
        );
    }
    let registry = crate::registry::Registry::load(&paths.registry())?;
    let others: Vec<&berth_formats::fleet::NodeRecord> = registry
        .nodes()
        .filter(|record| record.seen_from != super::ITSELF)
        .collect();
    let own_name = registry
        .nodes()
        .find(|record| record.seen_from == super::ITSELF)
        .map_or_else(
            || "first-node".to_string(),
            |record| record.info.name.clone(),
        );
    let mut nodes = Vec::new();
    if which.iter().any(|word| word == "all") {
        nodes.extend(others.iter().map(|record| (*record).clone()));
    } else {
        for word in which {
            let found: Vec<&&berth_formats::fleet::NodeRecord> = others
                .iter()
                .filter(|record| record.info.name == *word || record.info.machine_id == *word)
                .collect();
            match found[..] {
                [record] => nodes.push((*record).clone()),
                [] => {
                    let known: Vec<&str> = others
                        .iter()
                        .map(|record| record.info.name.as_str())
                        .collect();
                    anyhow::bail!(
                        "no node of the fleet is called {word}; it knows {}",
                        if known.is_empty() {
                            "no other node".to_string()
                        } else {
                            known.join(", ")
                        }
                    );
                }
                _ => anyhow::bail!(
                    "{} nodes are called {word}; name one by its machine id (`berth nodes --json`)",
                    found.len()
                ),
            }
        }
    }
    let id = format!("bundle-{}", crate::random_hex(6)?);
    let request = Request::BundleAsk {
        id: id.clone(),
        nodes: nodes
            .iter()
            .map(|record| record.info.machine_id.clone())
            .collect(),
        since_seconds: since.map(|since| since.as_secs()),
        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
    };
    let first_node = crate::node::first_node(paths)?;
    match crate::node::exchange(paths, &first_node, &request)? {
        Response::Accepted => Ok(Asked {
            id,
            nodes,
            own_name,
        }),
        other => anyhow::bail!("{}", crate::node::refusal(&other)),
    }
}

/// Waits until every node asked has sent its bundle or said why not, or until `deadline`;
/// `arrived` hears of each node as its answer comes.
pub fn wait(
    paths: &FleetPaths,
    asked: &Asked,
    deadline: Instant,
    arrived: &dyn Fn(&str, &Gathered),
) -> Vec<(berth_formats::fleet::NodeRecord, Gathered)> {
    let mut answers: BTreeMap<String, Gathered> = BTreeMap::new();
    loop {
        for record in &asked.nodes {
            let machine = &record.info.machine_id;
            if answers.contains_key(machine) {
                continue;
            }
            let archive = bundle_file(paths, &asked.id, machine);
            let error = error_file(paths, &asked.id, machine);
            let gathered = if archive.exists() {
                Gathered::Collected(archive)
            } else if let Ok(message) = fs_err::read_to_string(&error) {
                Gathered::Failed(message)
            } else {
                continue;
            };
            arrived(&record.info.name, &gathered);
            answers.insert(machine.clone(), gathered);
        }
        if answers.len() == asked.nodes.len() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    asked
        .nodes
        .iter()
        .map(|record| {
            let gathered = answers
                .remove(&record.info.machine_id)
                .unwrap_or(Gathered::Missing);
            (record.clone(), gathered)
        })
        .collect()
}

/// Tells the serving first node the request is over (later parts are refused), and removes
/// what it received.
pub fn close(paths: &FleetPaths, id: &str) {
    use berth_formats::fleet::Request;
    if let Ok(first_node) = crate::node::first_node(paths) {
        let _ = crate::node::exchange(
            paths,
            &first_node,
            &Request::BundleClose { id: id.to_string() },
        );
    }
    let _ = fs_err::remove_dir_all(bundles_dir(paths).join(id));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn parts_are_taken_in_turn_from_nodes_asked_and_checked_by_their_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let paths = FleetPaths {
            dir: dir.path().join("fleet"),
            log_dir: dir.path().join("log"),
        };
        let bundles = with_room(Bundles::new(&paths));
        let nodes = ["m1".to_string(), "m2".to_string()];
        bundles
            .ask("b1", &nodes, None, Duration::from_secs(60))
            .unwrap();
        // Not handed yet: a node that was not given the request is refused.
        let refused = bundles.part("m1", "b1", 0, &encode(b"ab"), false, None, None);
        assert!(
            refused
                .unwrap_err()
                .reason
                .contains("did not ask this node")
        );
        assert_eq!(bundles.for_node("m1"), Some(("b1".to_string(), None)));
        assert_eq!(
            bundles.for_node("m1"),
            None,
            "handed once (again only after a minute of silence)"
        );
        assert_eq!(bundles.for_node("m3"), None, "a node not asked");
        bundles
            .part("m1", "b1", 0, &encode(b"hello "), false, None, None)
            .unwrap();
        // Out of turn.
        let error = bundles
            .part("m1", "b1", 0, &encode(b"again"), false, None, None)
            .unwrap_err()
            .reason;
        assert!(error.contains("out of turn"), "{error}");
        assert!(
            bundles
                .part("m1", "b1", 6, "not base64!", false, None, None)
                .is_err()
        );
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(b"hello world")));
        bundles
            .part("m1", "b1", 6, &encode(b"world"), true, Some(&digest), None)
            .unwrap();
        assert_eq!(
            fs_err::read(bundle_file(&paths, "b1", "m1")).unwrap(),
            b"hello world"
        );
        assert!(
            bundles
                .part("m1", "b1", 11, &encode(b"!"), true, None, None)
                .is_err(),
            "complete"
        );
        // A wrong digest keeps nothing.
        bundles.for_node("m2").unwrap();
        let error = bundles
            .part("m2", "b1", 0, &encode(b"x"), true, Some("sha256:00"), None)
            .unwrap_err()
            .reason;
        assert!(error.contains("not the sha256:00"), "{error}");
        assert!(!bundle_file(&paths, "b1", "m2").exists());
        let said = fs_err::read_to_string(error_file(&paths, "b1", "m2")).unwrap();
        assert!(said.contains("arrived damaged"), "{said}");
        // A closed request takes nothing more.
        bundles
            .ask("b2", &nodes, None, Duration::from_secs(60))
            .unwrap();
        bundles.for_node("m2").unwrap();
        bundles.close("b2");
        assert!(
            bundles
                .part("m2", "b2", 0, &encode(b"x"), false, None, None)
                .unwrap_err()
                .reason
                .contains("no bundle request")
        );
        // A node that could not collect says why.
        bundles
            .ask("b3", &nodes, None, Duration::from_secs(60))
            .unwrap();
        bundles.for_node("m1").unwrap();
        bundles
            .part("m1", "b3", 0, "", true, None, Some("disk full"))
            .unwrap();
        assert_eq!(
            fs_err::read_to_string(error_file(&paths, "b3", "m1")).unwrap(),
            "disk full"
        );
    }

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        fs_err::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Bundles whose disk has a gibibyte of room, whatever the disk the tests run on holds:
    /// a nearly full test machine must not look like a full first node.
    fn with_room(mut bundles: Bundles) -> Bundles {
        bundles.room = |_| 1 << 30;
        bundles
    }

    fn asked(dir: &Path, nodes: &[&str]) -> (FleetPaths, Bundles) {
        let paths = FleetPaths {
            dir: dir.join("fleet"),
            log_dir: dir.join("log"),
        };
        let bundles = with_room(Bundles::new(&paths));
        let nodes: Vec<String> = nodes.iter().map(|node| node.to_string()).collect();
        bundles
            .ask("b1", &nodes, None, Duration::from_secs(60))
            .unwrap();
        for node in &nodes {
            bundles.for_node(node).unwrap();
        }
        (paths, bundles)
    }

    /// What nodes sent is root's alone while the admin waits for it.
    #[test]
    fn parts_and_their_folders_are_root_s_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, bundles) = asked(dir.path(), &["m1", "m2"]);
        bundles
            .part("m1", "b1", 0, &encode(b"hello"), false, None, None)
            .unwrap();
        assert_eq!(mode(&bundles_dir(&paths)), 0o700);
        assert_eq!(mode(&bundles_dir(&paths).join("b1")), 0o700);
        assert_eq!(mode(&bundles.partial("b1", "m1")), 0o600);
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(b"hello")));
        bundles
            .part("m1", "b1", 5, "", true, Some(&digest), None)
            .unwrap();
        assert_eq!(mode(&bundle_file(&paths, "b1", "m1")), 0o600);
        bundles
            .part("m2", "b1", 0, "", true, None, Some("disk full"))
            .unwrap();
        assert_eq!(mode(&error_file(&paths, "b1", "m2")), 0o600);
    }

    /// A part the first node's disk has no room for, or one past what it holds of all nodes,
    /// is refused: the node told what is wrong (not where), the admin what to do, at once.
    #[test]
    fn parts_past_the_room_on_the_disk_or_the_bound_across_nodes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, mut bundles) = asked(dir.path(), &["m1", "m2", "m3"]);
        let store = bundles_dir(&paths).display().to_string();
        bundles.max_bytes = 10;
        bundles
            .part("m1", "b1", 0, &encode(b"123456"), false, None, None)
            .unwrap();
        let refusal = bundles
            .part("m2", "b1", 0, &encode(b"123456"), false, None, None)
            .unwrap_err();
        assert!(
            refusal
                .reason
                .contains("holds 0 MiB of nodes' bundles, the most it takes"),
            "{refusal:?}"
        );
        let said = fs_err::read_to_string(error_file(&paths, "b1", "m2")).unwrap();
        assert!(said.contains("ask fewer nodes"), "{said}");
        assert!(
            bundles
                .part("m2", "b1", 0, &encode(b"1"), false, None, None)
                .is_err(),
            "a refused node sends no more"
        );
        // The first node's disk is full (but for its reserve).
        bundles.max_bytes = MAX_BUNDLES_BYTES;
        bundles.room = |_| 3;
        let refusal = bundles
            .part("m3", "b1", 0, &encode(b"1234"), false, None, None)
            .unwrap_err();
        assert!(
            refusal.reason.contains("disk has room for 0 MiB"),
            "{refusal:?}"
        );
        assert!(!refusal.reason.contains(&store), "{refusal:?}");
        let local = refusal.local.unwrap();
        assert!(
            local.contains(&store) && local.contains("free space"),
            "{local}"
        );
        let said = fs_err::read_to_string(error_file(&paths, "b1", "m3")).unwrap();
        assert_eq!(said, local);
        assert!(!bundles.partial("b1", "m3").exists());
        // What fits is taken.
        bundles
            .part("m1", "b1", 6, &encode(b"78"), false, None, None)
            .unwrap();
        // The real room: far less than an exabyte on any test disk.
        assert!(room(dir.path()) < 1 << 60);
    }

    /// A part the first node fails to write tells the node that much, never the path.
    #[test]
    fn a_part_not_written_names_no_path_to_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, bundles) = asked(dir.path(), &["m1"]);
        let folder = bundles_dir(&paths).join("b1");
        fs_err::remove_dir_all(&folder).unwrap();
        fs_err::write(&folder, "in the way").unwrap();
        let refusal = bundles
            .part("m1", "b1", 0, &encode(b"x"), false, None, None)
            .unwrap_err();
        let store = paths.dir.display().to_string();
        assert!(!refusal.reason.contains(&store), "{refusal:?}");
        assert!(
            refusal.reason.contains("failed to write the part"),
            "{refusal:?}"
        );
        assert!(refusal.local.unwrap().contains(&store));
    }
}
