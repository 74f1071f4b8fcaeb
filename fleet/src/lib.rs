//! The fleet: the first node moves an add-on across every node by a rollout. [`strategy`]
//! decides which nodes start next; [`channel`] is how the first node and the others talk,
//! each known by its pinned key; [`first_node`] serves the others and keeps the [`registry`]
//! of them and the [`rollouts`], deciding on every report and handing out work; [`node`] is
//! a node's side, registering and reporting its add-ons, and [`agent`] runs the work it is
//! given.
//!
//! What only the installer knows of its node (its add-ons and their health, the installer it
//! ran last, its join parameters, how to run an upgrade) reaches the fleet through [`Host`]
//! and [`JoinParams`], which the installer implements: the installer depends on the fleet,
//! never the other way.

pub mod agent;
pub mod channel;
pub mod first_node;
pub mod log;
pub mod node;
pub mod registry;
pub mod rollouts;
pub mod strategy;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use berth_formats::Sha256Digest;
use berth_formats::fleet::AddonReport;
use berth_formats::lock::Lock;

/// Where the fleet keeps its files on a node.
#[derive(Debug, Clone)]
pub struct FleetPaths {
    /// `var/lib/berth/fleet`: keys, machine id, registry, rollouts, work.
    pub dir: PathBuf,
    /// `var/log/berth`: the first node's `fleet.log`.
    pub log_dir: PathBuf,
}

impl FleetPaths {
    pub fn registry(&self) -> PathBuf {
        self.dir.join("nodes.json")
    }

    pub fn log(&self) -> PathBuf {
        self.log_dir.join("fleet.log")
    }
}

/// The installer a node ran last: what a rollout's work changes and runs again.
#[derive(Debug, Clone)]
pub struct LastRun {
    /// The spec it ran, kept on the node.
    pub spec: PathBuf,
    /// The dist it installed from (a folder or a URL).
    pub dist: String,
    /// Whether the node joined (its add-ons run their join hooks).
    pub joined: bool,
}

/// One add-on's record on a node, as much as a rollout's agent needs of it.
#[derive(Debug, Clone, Default)]
pub struct AddonFacts {
    /// What is in place, if anything.
    pub current: Option<InPlace>,
    /// The Progressing condition: its reason (`Succeeded`, `Failed`…), message and time.
    pub progressing: Option<Condition>,
}

/// The version of an add-on a node runs.
#[derive(Debug, Clone)]
pub struct InPlace {
    pub version: String,
    /// When it was applied (RFC 3339).
    pub applied_at: String,
    /// The sha256 of its package.
    pub package: Sha256Digest,
}

#[derive(Debug, Clone)]
pub struct Condition {
    pub reason: String,
    pub message: String,
    pub since: String,
}

/// The package a work's upgrade installs for the add-on it moves: the one the rollout pinned,
/// or for a rollback the one the node ran before.
#[derive(Debug, Clone)]
pub struct Pin<'a> {
    pub addon: &'a str,
    pub version: &'a str,
    pub sha256: Sha256Digest,
}

/// An upgrade the agent asks the node to run.
#[derive(Debug)]
pub struct Upgrade<'a> {
    pub spec: &'a Path,
    /// The lock it runs with ([`Host::lock`]): no package byte comes from the dist's word.
    pub lock: &'a Path,
    pub dist: &'a str,
    pub allow_downgrade: bool,
    /// The first node's join parameters, for a node that joined: secrets, so never on a
    /// command line.
    pub params: &'a [(String, String)],
    /// Where the run's output goes.
    pub log: File,
}

/// What the fleet needs of the node it runs on.
pub trait Host: Sync {
    /// The node's add-ons, each with its health and the node's own fields
    /// (`/etc/berth/node.yaml`); the fleet adds the configuration hash it applied. Health is
    /// probed now, but for an add-on whose record was written at or after `recorded_since`
    /// (a run that just probed it), which is taken as it is.
    fn addons(&self, recorded_since: Option<SystemTime>) -> anyhow::Result<Vec<AddonReport>>;
    /// What the node does once the agent has reported its add-ons to the first node (Berth's
    /// primary publishes them in the cluster); nothing unless the host says.
    fn reported(&self) {}
    /// The installer the node ran last, if any.
    fn last_run(&self) -> anyhow::Result<Option<LastRun>>;
    /// One add-on's record, if the node has one.
    fn addon(&self, name: &str) -> Option<AddonFacts>;
    /// Whether a run holds the node now.
    fn busy(&self) -> bool;
    /// A lock for the spec at `spec`: `pin`'s add-on at its package, every other add-on at
    /// the package the node runs (as its last lock or its records have it). Refused when the
    /// spec asks for an add-on the node has no verified package of.
    fn lock(&self, spec: &Path, pin: &Pin<'_>) -> anyhow::Result<Lock>;
    /// Runs the upgrade; `Ok(false)` when it ran and failed (its output is in the log).
    fn upgrade(&self, upgrade: Upgrade<'_>) -> anyhow::Result<bool>;
    /// Collects the node's support bundle (journals and logs of `since` ago at most) into
    /// the archive `into`.
    fn support_bundle(&self, since: Option<Duration>, into: &Path) -> anyhow::Result<()>;
}

/// A join parameter to publish.
#[derive(Debug, Clone)]
pub struct NewParam {
    pub key: &'static str,
    pub value: String,
    /// Kept from logs, and expiring.
    pub secret: bool,
    /// Given only to nodes that join the control plane.
    pub control_plane: bool,
}

/// The node's join parameters, which `berth join-command` prints: the first node publishes
/// its own there, and hands the others to the nodes whose upgrades run join hooks.
pub trait JoinParams: Send + Sync {
    /// Publishes `params` in one write; a secret expires `ttl` from now.
    fn publish(&self, params: &[NewParam], ttl: Duration) -> anyhow::Result<()>;
    /// The value of parameter `key`, if it is published and unexpired.
    fn current(&self, key: &str) -> anyhow::Result<Option<String>>;
    /// The parameters a node joining as a primary (or not) is given.
    fn for_node(&self, primary: bool) -> anyhow::Result<Vec<(String, String)>>;
}

/// An exclusive `flock` of `path` (made if missing): waited for, or taken at once or refused
/// with `wait: false`. The kernel lets go when the process ends, however it ends.
pub(crate) fn lock_file(
    path: &Path,
    wait: bool,
) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent)?;
    }
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?
        .into_parts()
        .0;
    let mode = if wait {
        nix::fcntl::FlockArg::LockExclusive
    } else {
        nix::fcntl::FlockArg::LockExclusiveNonblock
    };
    nix::fcntl::Flock::lock(file, mode)
        .map_err(|(_, errno)| anyhow::anyhow!("failed to lock {}: {errno}", path.display()))
}

/// `bytes` random bytes, as hex: tokens, machine ids, rollout ids.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut buffer = vec![0u8; bytes];
    fs_err::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(hex::encode(buffer))
}
