//! The install run: resolve the spec against versions.json, decide per add-on, then fetch,
//! verify, load images and run the hooks phase by phase, recording state as it goes.
//!
//! Phases follow kURL's order, each over every add-on in versions.json order:
//! `fetch → preflight → pre_init → install | already_applied → post_init → outro`. Every
//! package is fetched and verified before any hook runs; an add-on's images load just before
//! its install hook, so a runtime that an earlier add-on installs (containerd) can take them.
//! As in kURL, every add-on's preflight, pre_init, post_init and outro hooks run on every run,
//! so globals one of them sets reach the hooks after it; only the main hook follows the
//! decision: an add-on whose decision is AlreadyApplied runs `<name>_already_applied` in its
//! place. An add-on that applies must define its main hook. An add-on is recorded as applied
//! once its last defined hook has succeeded, so a run that stops at one add-on's hook does not
//! repeat the add-ons that finished before it.
//!
//! A joining node runs `preflight`, the runtime's install hook (`containerd_install`, as
//! kURL's join.sh runs it), and then `<name>_join` in place of pre_init, install and
//! post_init: on every join run, as kURL's join.sh, even for an add-on already applied there
//! (never its `_already_applied`, which is the primary's). The runtime's add-on loads its
//! images after its install hook, once there is a runtime to take them. A rollback runs the
//! install phases with a plan that comes from the records (see [`rollback_plan`]).
//!
//! [`resolve`] turns a spec (or a rollback) into a plan; [`run`] carries a plan out; [`reset`]
//! takes the node back to before the install.

mod flag_inputs;
pub(crate) mod node_hooks;
pub mod remove_node;
pub mod reset;
mod resolve;
mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_formats::compression::Compression;
use berth_formats::package_index::package_file_name;
use berth_formats::spec::SpecError;
use berth_formats::versions::{VERSIONS_FILE, VersionsError};
use serde_json::{Map, Value};

use crate::dist::unpack::UnpackError;
use crate::dist::{Dist, FetchError};
use crate::hooks::session::HookError;
use crate::images::ImageError;
use crate::node::layout::Layout;
use crate::node::state::{AddonState, StateError, Target};
use crate::phase::{HOOK_PHASES, JOIN_PHASES, Phase};
use crate::plan::{Decision, Permissions};

pub use resolve::{node_overrides, plan, record_refusal, rollback_plan, script_flags};
pub use run::{PreflightRecord, SessionStart, apply, file_documents, preflight};

/// Bumped when the engine applies add-ons differently enough that every add-on must reapply.
pub const ENGINE_GENERATION: u32 = 1;

/// What kind of run: the first node (or an update of it), a node joining it, or one add-on
/// going back to a version this node kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Install,
    Join,
    Rollback,
}

impl Mode {
    pub fn phases(self) -> &'static [Phase] {
        match self {
            Mode::Install | Mode::Rollback => &HOOK_PHASES,
            Mode::Join => &JOIN_PHASES,
        }
    }

    /// The command that runs this mode (`berth install`, `berth join`, `berth rollback`).
    pub fn command(self) -> &'static str {
        match self {
            Mode::Install => "install",
            Mode::Join => "join",
            Mode::Rollback => "rollback",
        }
    }

    /// What a run of this mode does to the node, named in its log: an install run on a node
    /// that already has add-ons is an upgrade.
    pub fn run_name(self, plan: &Plan) -> &'static str {
        match self {
            Mode::Install if plan.upgrades_node() => "upgrade",
            other => other.command(),
        }
    }
    /// What the hook an add-on runs in `phase` adds to its name (nothing for the main hook,
    /// `_already_applied` for an add-on already applied as asked, `_<phase>` otherwise), or
    /// `None` when it runs none there. On a joining node only the runtime's add-on has an
    /// install phase, and the runtime's `_join` runs only when it applies; every other
    /// add-on's `_join` runs on every join, applied or not.
    fn hook_suffix(self, phase: Phase, decision: &Decision, runtime: bool) -> Option<String> {
        let applies = decision.applies();
        match (self, phase) {
            (Mode::Join, Phase::Install) if !runtime => None,
            (Mode::Join, Phase::Join) if runtime && !applies => None,
            // As kURL's join.sh: every join runs each add-on's `_join`, applied or not; its
            // `_already_applied` belongs to the primary's install (kURL's reads the cluster
            // with the admin's kubeconfig, which a joined node has not).
            (Mode::Join, Phase::Join) => Some("_join".into()),
            (_, phase) if phase == self.main_phase(runtime) && !applies => {
                Some("_already_applied".into())
            }
            (_, Phase::Install) => Some(String::new()),
            (_, other) => Some(format!("_{}", other.name())),
        }
    }

    /// The phase in which an add-on's images load and its main hook (or `_already_applied`)
    /// runs: install, or `_join` on a joining node but for the runtime's add-on.
    fn main_phase(self, runtime: bool) -> Phase {
        match self {
            Mode::Join if !runtime => Phase::Join,
            _ => Phase::Install,
        }
    }
}

/// Where the add-ons of a run come from, and what may be made of them: what [`plan`] reads
/// besides the node's records.
#[derive(Debug, Clone)]
pub struct SpecSource {
    pub spec_path: PathBuf,
    /// The installer's lock: versions and package digests pinned when its scripts were
    /// rendered. [`plan`] reads it, and takes it only as the run's trust allows.
    pub lock_path: Option<PathBuf>,
    /// `--set addon.field=value`, in order.
    pub overrides: Vec<(String, String, Value)>,
    pub permissions: Permissions,
}

/// How a run does its work: what [`apply`] reads (and [`plan`] for the layout and dist).
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub layout: Layout,
    pub dist: Dist,
    /// kURL's `key=value` script arguments (`--param`): each reaches the hooks as an
    /// environment variable, `public-address` as `PUBLIC_ADDRESS`.
    pub params: Vec<(String, String)>,
    pub hook_timeout: Duration,
    /// How long an applied add-on's components may take to be healthy (zero: not waited for).
    pub health_timeout: Duration,
    pub mode: Mode,
    /// How long a join secret a hook publishes lives.
    pub join_ttl: Duration,
    /// A package missing from the dist may be taken from its folder unpacked on this node
    /// (a rollback to a version installed from an airgap bundle, which leaves no archive).
    pub reuse_unpacked: bool,
    /// The dist is a bundle Berth receives as a stream into a folder of its own (its head is
    /// there for the plan): the run receives the packages it needs and moves their files into
    /// place, not copying them.
    pub bundle: Option<crate::dist::bundle_stream::BundleArrival>,
    /// The signing keys the run trusts: with any, versions.json, each `.sha256` and the lock
    /// must be signed by one.
    pub trust: crate::dist::trust::Trust,
}

impl RunSettings {
    /// Whether the run's arguments join the control plane (kURL's `control-plane` flag, which
    /// kURL takes with any value or none).
    pub fn joins_control_plane(&self) -> bool {
        self.params.iter().any(|(key, _)| key == "control-plane")
    }
}

/// One add-on of the plan.
#[derive(Debug, Clone)]
pub struct PlannedAddon {
    pub name: String,
    pub version: String,
    pub decision: Decision,
    pub reason: String,
    pub target: Target,
    pub config: Map<String, Value>,
    /// The record the decision was made from.
    pub record: AddonState,
    /// The add-on's record on the node is damaged (`record` is blank): the run moves it aside.
    pub record_damaged: bool,
    /// The lock's digest of the package's `package.json`, which checks the package when an
    /// airgap bundle carries it unpacked.
    pub bundled_index: Option<berth_formats::Sha256Digest>,
    /// The spec's `s3Override`: hooks see it as kURL's `<ADDON>_S3_OVERRIDE`; the package
    /// itself still comes from the dist, checked by its digest.
    pub s3_override: Option<String>,
    /// How its package is compressed (from the lock or `versions.json`), which names its file.
    pub compression: Compression,
    /// What script flags set that hooks see (by variable, each value's digest), as recorded
    /// once it is applied: those in place before, with this run's over them.
    pub flag_inputs: std::collections::BTreeMap<String, String>,
}

impl PlannedAddon {
    /// `<name>-<version>.tar.gz` (or `.tar.zst`): its package's file in the dist and the cache.
    pub fn package_file(&self) -> String {
        package_file_name(&self.name, &self.version, self.compression)
    }
}

/// Every add-on of the spec, in install order, with what the run will do to it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub addons: Vec<PlannedAddon>,
    /// `spec.kurl.airgap`.
    pub airgap: bool,
    /// `spec.kurl` and kURL's other settings sections, by spec key, for the hooks' variables.
    pub settings: BTreeMap<String, Map<String, Value>>,
}

impl Plan {
    /// Whether the node already runs some add-on of the plan (kURL's upgrade).
    pub fn upgrades_node(&self) -> bool {
        self.addons
            .iter()
            .any(|addon| addon.record.current.is_some())
    }

    pub fn refused(&self) -> Vec<&PlannedAddon> {
        self.addons
            .iter()
            .filter(|addon| matches!(addon.decision, Decision::DowngradeRefused { .. }))
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A field of the spec the add-on's declaration refuses (named by the spec's line).
    #[error("{refused}")]
    Field {
        addon: String,
        /// The version the spec asks for.
        requested: String,
        refused: SpecError,
    },
    #[error(transparent)]
    Flag(#[from] berth_formats::spec::flags::FlagError),
    #[error("{location}")]
    Versions {
        location: String,
        #[source]
        source: VersionsError,
    },
    #[error("failed to read {VERSIONS_FILE} from the dist")]
    VersionsFetch(#[source] FetchError),
    #[error(transparent)]
    Trust(#[from] crate::dist::trust::TrustError),
    #[error(transparent)]
    Bundle(#[from] crate::dist::bundle_stream::StreamError),
    #[error("--set {text}: {problem}")]
    BadOverride { text: String, problem: String },
    #[error(
        "the lock is for installer {lock}, the spec is installer {spec}\nhint: use the spec and lock the scripts were rendered with"
    )]
    LockMismatch { lock: String, spec: String },
    #[error("the lock of installer {id} has no add-on `{name}`")]
    NotLocked { name: String, id: String },
    #[error("{path}: {problem}")]
    NodeConfig { path: PathBuf, problem: String },
    #[error("the hooks' environment cannot be made")]
    Environment(#[from] crate::hooks::environment::EnvironmentError),
    #[error("failed to fetch {name} {version}")]
    Fetch {
        name: String,
        version: String,
        #[source]
        source: FetchError,
    },
    #[error("{name} {version}: the package is refused")]
    Unpack {
        name: String,
        version: String,
        #[source]
        source: UnpackError,
    },
    #[error("{name} {version}: failed to load its images")]
    Images {
        name: String,
        version: String,
        #[source]
        source: ImageError,
    },
    #[error(
        "{name} {version}: {} defines no install hook; looked for {}\nhint: define one of these functions in it, as kURL's add-ons do",
        script.display(),
        looked_for.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
    )]
    NoMainHook {
        name: String,
        version: String,
        script: PathBuf,
        looked_for: Vec<String>,
    },
    #[error(
        "{name} {version}: not healthy within {seconds}s after its hooks: {message}\nhint: `berth health {name}` probes it again; `berth rollback {name}` goes back to the version before; on a slow machine, run again with a longer wait (the scripts' `health-timeout=20m`, berth's `--health-timeout 20m`)"
    )]
    Unhealthy {
        name: String,
        version: String,
        seconds: u64,
        message: String,
    },
    #[error("{name} {version}: {hook} failed")]
    Hook {
        name: String,
        version: String,
        hook: String,
        #[source]
        source: HookError,
    },
    #[error(
        "{}\nhint: their add-ons cannot be reset; fix each record, or move it out of the state folder to leave its add-on as it is, then run berth reset again",
        records.join("\n")
    )]
    DamagedRecords { records: Vec<String> },
    #[error("interrupted by {signal}")]
    Interrupted { signal: String },
    #[error(
        "the plan refuses to go on:\n{}\nhint: through the installer's script, the word allow-downgrade does what --allow-downgrade does: `curl -fsSL <installer URL> | sudo bash -s allow-downgrade`",
        lines.join("\n")
    )]
    Refused { lines: Vec<String> },
    #[error("{name}: {problem}")]
    Rollback { name: String, problem: String },
    #[error("host preflights: {summary}\nhint: {}", if *warnings_only { "warnings stop the run because hostPreflightEnforceWarnings is set; fix what they name, or leave out host-preflight-enforce-warnings" } else { "fix what the failed checks name and run the same command again; kurl.hostPreflightIgnore (the script word host-preflight-ignore) goes on regardless" })]
    HostPreflights {
        summary: String,
        warnings_only: bool,
    },
    #[error("host preflights cannot run")]
    HostPreflightSpec {
        #[source]
        source: berth_preflight::PreflightError,
    },
    #[error(transparent)]
    State(#[from] StateError),
    #[error("failed to prepare {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The packages of `name` `version` this node keeps (one per compression it has), each with
/// the digest it was checked at.
fn kept_packages<'a>(
    layout: &'a Layout,
    name: &'a str,
    version: &'a str,
) -> impl Iterator<Item = (Compression, berth_formats::Sha256Digest)> + 'a {
    Compression::ALL.into_iter().filter_map(move |compression| {
        cached_digest(layout, &package_file_name(name, version, compression))
            .map(|digest| (compression, digest))
    })
}

/// How the package of `name` `version` this node keeps with `digest` is compressed.
pub(crate) fn kept_compression(
    layout: &Layout,
    name: &str,
    version: &str,
    digest: &berth_formats::Sha256Digest,
) -> Option<Compression> {
    kept_packages(layout, name, version)
        .find(|(_, kept)| kept == digest)
        .map(|(compression, _)| compression)
}

/// The digest of a package kept in this node's cache: its `.sha256`, when the package is
/// there too. A rollback reads it; a fetch skips the download when it is the expected one.
fn cached_digest(layout: &Layout, file: &str) -> Option<berth_formats::Sha256Digest> {
    let cache = layout.package_cache();
    let text =
        fs_err::read_to_string(cache.join(berth_formats::release::checksum_file(file))).ok()?;
    let digest = berth_formats::package_index::parse_checksum_file(&text, file).ok()?;
    cache.join(file).exists().then_some(digest)
}

/// The first line of a message (its hints and causes follow on other lines).
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Stops the run at a step boundary once Berth has been asked to stop.
fn check_interrupt() -> Result<(), EngineError> {
    match crate::interrupt::received() {
        Some(signal) => Err(EngineError::Interrupted {
            signal: signal.as_str().to_string(),
        }),
        None => Ok(()),
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the run reports as it goes (the CLI prints it).
pub trait Reporter {
    fn step(&self, message: &str);
}
