//! The install run: resolve the spec against versions.json, decide per add-on, then fetch,
//! verify, load images and run the hooks phase by phase, recording state as it goes.
//!
//! Phases follow kURL's order, each over every add-on in versions.json order:
//! `fetch → preflight → pre_init → install | already_applied → post_init → outro`. Every
//! package is fetched and verified before any hook runs; an add-on's images load just before
//! its install hook, so a runtime that an earlier add-on installs (containerd) can take them.
//! An add-on whose decision is AlreadyApplied runs only `<name>_already_applied`. An add-on
//! is recorded as applied once its last defined hook has succeeded, so a run that stops at one
//! add-on's hook does not repeat the add-ons that finished before it.
//!
//! A joining node runs `preflight` and then `<name>_join` in place of pre_init, install and
//! post_init. A rollback is an install whose plan comes from the records (see [`rollback_plan`]).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_formats::Sha256Digest;
use berth_formats::lock::Lock;
use berth_formats::package_index::{PackageIndex, package_file_name};
use berth_formats::spec::{InstallerSpec, SpecError, config_environment, upper_snake};
use berth_formats::versions::{VERSIONS_FILE, VersionsError, VersionsFile, compare_versions};
use serde_json::{Map, Value};

use crate::dist::{Dist, FetchError};
use crate::images::{ImageError, Runtime};
use crate::layout::Layout;
use crate::plan::{Decision, Permissions, decide};
use crate::session::{HookError, Session};
use crate::state::{
    AddonState, Applied, Attempt, NodeLock, Outcome, StateError, StateStore, Target,
};
use crate::unpack::{UnpackError, bundled_package, unpack, unpack_bundled};

/// Bumped when the engine applies add-ons differently enough that every add-on must reapply.
pub const ENGINE_GENERATION: u32 = 1;

/// The hook phases after `load`, in order.
pub const HOOK_PHASES: [Phase; 5] = [
    Phase::Preflight,
    Phase::PreInit,
    Phase::Install,
    Phase::PostInit,
    Phase::Outro,
];

/// The hook phases of a joining node.
pub const JOIN_PHASES: [Phase; 2] = [Phase::Preflight, Phase::Join];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Preflight,
    PreInit,
    Install,
    Join,
    PostInit,
    Outro,
}

/// What kind of run: the first node (or an update of it), or a node joining it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Install,
    Join,
}

impl Mode {
    pub fn phases(self) -> &'static [Phase] {
        match self {
            Mode::Install => &HOOK_PHASES,
            Mode::Join => &JOIN_PHASES,
        }
    }
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::PreInit => "pre_init",
            Phase::Install => "install",
            Phase::Join => "join",
            Phase::PostInit => "post_init",
            Phase::Outro => "outro",
        }
    }

    /// The bash function of this phase for an add-on whose functions start with `prefix`.
    fn hook(self, prefix: &str, decision: &Decision) -> String {
        match self {
            Phase::Install | Phase::Join if !decision.applies() => {
                format!("{prefix}_already_applied")
            }
            Phase::Install => prefix.to_string(),
            other => format!("{prefix}_{}", other.name()),
        }
    }

    /// The phase an already-applied add-on runs its one hook in.
    fn main(self) -> bool {
        matches!(self, Phase::Install | Phase::Join)
    }
}

/// What a run is asked to do.
#[derive(Debug, Clone)]
pub struct InstallSettings {
    pub layout: Layout,
    pub spec_path: PathBuf,
    pub dist: Dist,
    /// The installer's lock: versions and package digests pinned when its scripts were
    /// rendered.
    pub lock: Option<Lock>,
    /// `--set addon.field=value`, in order.
    pub overrides: Vec<(String, String, Value)>,
    /// kURL's `key=value` script arguments (`--param`): each reaches the hooks as an
    /// environment variable, `public-address` as `PUBLIC_ADDRESS`.
    pub params: Vec<(String, String)>,
    pub permissions: Permissions,
    pub hook_timeout: Duration,
    pub mode: Mode,
    /// How long a join secret a hook publishes lives.
    pub join_ttl: Duration,
    /// Where this installer's scripts are served, recorded for `berth join-command`.
    pub scripts_url: Option<String>,
    /// A package missing from the dist may be taken from its folder unpacked on this node
    /// (a rollback to a version installed from an airgap bundle, which leaves no archive).
    pub reuse_unpacked: bool,
}

/// One add-on of the plan.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedAddon {
    pub name: String,
    pub version: String,
    pub decision: Decision,
    pub reason: String,
    #[serde(skip)]
    pub target: Target,
    #[serde(skip)]
    pub config: Map<String, Value>,
    /// The record the decision was made from.
    #[serde(skip)]
    pub record: AddonState,
}

/// Every add-on of the spec, in install order, with what the run will do to it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub id: String,
    pub addons: Vec<PlannedAddon>,
    /// `spec.kurl.airgap`.
    #[serde(skip)]
    pub airgap: bool,
}

impl Plan {
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
    #[error("{location}")]
    Versions {
        location: String,
        #[source]
        source: VersionsError,
    },
    #[error("failed to read {VERSIONS_FILE} from the dist")]
    VersionsFetch(#[source] FetchError),
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
    #[error("{name} {version}: {hook} failed")]
    Hook {
        name: String,
        version: String,
        hook: String,
        #[source]
        source: HookError,
    },
    #[error("the plan refuses to go on:\n{}", lines.join("\n"))]
    Refused { lines: Vec<String> },
    #[error("{name}: {problem}")]
    Rollback { name: String, problem: String },
    #[error(transparent)]
    State(#[from] StateError),
    #[error("failed to prepare {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Resolves the spec and decides for each add-on. Reads state; changes nothing.
pub fn plan(settings: &InstallSettings) -> Result<Plan, EngineError> {
    let spec = InstallerSpec::load(&settings.spec_path)?;
    let versions_bytes = settings
        .dist
        .read(VERSIONS_FILE)
        .map_err(EngineError::VersionsFetch)?;
    let versions_location = settings.dist.location(VERSIONS_FILE);
    let versions = VersionsFile::parse(&versions_location, &versions_bytes).map_err(|source| {
        EngineError::Versions {
            location: versions_location.clone(),
            source,
        }
    })?;
    let versions_error = |source| EngineError::Versions {
        location: settings.spec_path.display().to_string(),
        source,
    };

    let mut requested: BTreeMap<String, (String, Map<String, Value>)> = spec
        .addons
        .iter()
        .map(|(name, addon)| (name.clone(), (addon.version.clone(), addon.config.clone())))
        .collect();
    for (name, fields) in node_overrides(&settings.layout.node_config())? {
        if let Some((version, config)) = requested.get_mut(&name) {
            apply_fields(version, config, fields);
        }
    }
    for (addon, field, value) in &settings.overrides {
        let Some((version, config)) = requested.get_mut(addon) else {
            return Err(EngineError::BadOverride {
                text: format!("{addon}.{field}"),
                problem: format!("the spec has no add-on `{addon}`"),
            });
        };
        apply_fields(
            version,
            config,
            Map::from_iter([(field.clone(), value.clone())]),
        );
    }

    // Kubernetes is an add-on too; its resolved version filters the others' ranges.
    let kubernetes = match requested.get("kubernetes") {
        Some((version, _)) => Some(
            versions
                .resolve("kubernetes", version, None)
                .map_err(versions_error)?,
        ),
        None => None,
    };
    let mut ordered: Vec<(usize, PlannedAddon)> = Vec::new();
    let store = StateStore::new(settings.layout.state_dir());
    let id = spec.id();
    if let Some(lock) = &settings.lock
        && lock.id != id
    {
        return Err(EngineError::LockMismatch {
            lock: lock.id.clone(),
            spec: id,
        });
    }
    for (name, (version, config)) in requested {
        let position = versions.position(&name).ok_or_else(|| {
            versions_error(VersionsError::UnknownAddon {
                name: name.clone(),
                offered: versions.addons.iter().map(|a| a.name.clone()).collect(),
            })
        })?;
        // A lock pins each add-on's version and package digest as they were when the
        // installer's scripts were rendered; without one, versions.json and the dist's
        // `.sha256` files decide.
        let (version, package_digest) = match &settings.lock {
            Some(lock) => {
                let locked = lock.addon(&name).ok_or_else(|| EngineError::NotLocked {
                    name: name.clone(),
                    id: lock.id.clone(),
                })?;
                (locked.version.clone(), locked.sha256)
            }
            None => {
                let version = versions
                    .resolve(&name, &version, kubernetes.as_deref())
                    .map_err(versions_error)?;
                let file = package_file_name(&name, &version);
                let digest =
                    settings
                        .dist
                        .checksum(&file)
                        .map_err(|source| EngineError::Fetch {
                            name: name.clone(),
                            version: version.clone(),
                            source,
                        })?;
                (version, digest)
            }
        };
        let config_hash =
            Sha256Digest::of(&serde_json::to_vec(&Value::Object(config.clone())).expect("JSON"));
        let target = Target {
            version: version.clone(),
            id: id.clone(),
            package_digest: package_digest.to_string(),
            config_hash: config_hash.to_string(),
            generation: ENGINE_GENERATION,
        };
        let record = store.load(&name)?;
        let decision = decide(&record, &target, settings.permissions);
        ordered.push((
            position,
            PlannedAddon {
                reason: decision.to_string(),
                name,
                version,
                decision,
                target,
                config,
                record,
            },
        ));
    }
    ordered.sort_by_key(|(position, _)| *position);
    Ok(Plan {
        id,
        addons: ordered.into_iter().map(|(_, addon)| addon).collect(),
        airgap: spec.airgap(),
    })
}

/// The plan of `berth rollback`: `name` back to the version it had before (or to `to`, a
/// version whose package this node keeps), with the configuration that version was applied
/// with. The packages come from this node's cache; nothing is fetched.
pub fn rollback_plan(layout: &Layout, name: &str, to: Option<&str>) -> Result<Plan, EngineError> {
    let problem = |problem: String| EngineError::Rollback {
        name: name.to_string(),
        problem,
    };
    let record = StateStore::new(layout.state_dir()).load(name)?;
    let Some(current) = &record.current else {
        return Err(problem(
            "is not installed on this node; `berth status` lists what is".into(),
        ));
    };
    let from = current.target.version.clone();
    let applied = match (to, &record.last) {
        (None, Some(last)) => last.clone(),
        (None, None) => {
            return Err(problem(format!(
                "{from} is the only version applied on this node; there is nothing to roll back to"
            )));
        }
        (Some(version), _) if version == from => {
            return Err(problem(format!("{version} is already in place")));
        }
        (Some(version), Some(last)) if last.target.version == version => last.clone(),
        (Some(version), _) => {
            // Another version whose package this node keeps, applied with today's settings.
            let file = package_file_name(name, version);
            let checksum =
                fs_err::read_to_string(layout.package_cache().join(format!("{file}.sha256")))
                    .ok()
                    .and_then(|text| berth_formats::package_index::parse_checksum_file(&text).ok());
            let Some(digest) = checksum.filter(|_| layout.package_cache().join(&file).exists())
            else {
                return Err(problem(format!(
                    "no package of version {version} is kept on this node; kept: {}",
                    kept_versions(layout, name).join(", ")
                )));
            };
            Applied {
                target: Target {
                    version: version.to_string(),
                    package_digest: digest.to_string(),
                    ..current.target.clone()
                },
                applied_at: String::new(),
                config: current.config.clone(),
            }
        }
    };
    Ok(Plan {
        id: applied.target.id.clone(),
        addons: vec![PlannedAddon {
            name: name.to_string(),
            version: applied.target.version.clone(),
            decision: Decision::Rollback { from: from.clone() },
            reason: Decision::Rollback { from }.to_string(),
            target: applied.target,
            config: applied.config,
            record,
        }],
        airgap: false,
    })
}

/// The versions of `name` whose packages this node keeps, newest first.
fn kept_versions(layout: &Layout, name: &str) -> Vec<String> {
    let prefix = format!("{name}-");
    let mut versions: Vec<String> = fs_err::read_dir(layout.package_cache())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().into_owned();
            let version = file.strip_prefix(&prefix)?.strip_suffix(".tar.gz")?;
            Some(version.to_string())
        })
        .collect();
    versions.sort_by(|a, b| compare_versions(b, a));
    versions
}

/// Records on an installed add-on that the run asking for `version` stopped before touching
/// it (an unknown version, say): `Progressing` turns Failed with the reason; what is in place
/// stays in place and Available.
pub fn record_refusal(
    layout: &Layout,
    name: &str,
    version: &str,
    message: &str,
) -> Result<(), EngineError> {
    let store = StateStore::new(layout.state_dir());
    let mut record = store.load(name)?;
    if record.current.is_none() && record.attempt.is_none() {
        return Ok(());
    }
    record.desired = Some(version.to_string());
    record.set_progressing(false, "Failed", message.to_string());
    store.save(&record)?;
    Ok(())
}

fn apply_fields(version: &mut String, config: &mut Map<String, Value>, fields: Map<String, Value>) {
    for (field, value) in fields {
        if field == "version" {
            *version = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
        } else {
            config.insert(field, value);
        }
    }
}

/// An add-on's name and some of its fields.
type FieldsOfAddon = (String, Map<String, Value>);

/// `/etc/berth/node.yaml`: per-node fields by add-on, e.g. `containerd: {tomlConfig: …}`.
fn node_overrides(path: &Path) -> Result<Vec<FieldsOfAddon>, EngineError> {
    let Ok(text) = fs_err::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let problem = |problem: String| EngineError::NodeConfig {
        path: path.to_path_buf(),
        problem,
    };
    let value: Value = serde_norway::from_str(&text).map_err(|e| problem(e.to_string()))?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(addons) => addons
            .into_iter()
            .map(|(name, fields)| match fields {
                Value::Object(fields) => Ok((name, fields)),
                _ => Err(problem(format!("`{name}` is not a mapping of fields"))),
            })
            .collect(),
        _ => Err(problem(
            "expected a mapping of add-on names to their fields".into(),
        )),
    }
}

/// What the run reports as it goes (the CLI prints it).
pub trait Reporter {
    fn step(&self, message: &str);
}

/// Carries out `plan` on the node. The caller holds the node lock.
pub fn apply(
    settings: &InstallSettings,
    plan: &Plan,
    _lock: &NodeLock,
    reporter: &dyn Reporter,
) -> Result<(), EngineError> {
    let refused = plan.refused();
    if !refused.is_empty() {
        return Err(EngineError::Refused {
            lines: refused
                .iter()
                .map(|addon| format!("{} {}: {}", addon.name, addon.version, addon.reason))
                .collect(),
        });
    }
    let layout = &settings.layout;
    let run_id = run_id(settings.mode);
    let mut run = Run::new(settings, plan, &run_id)?;
    let result = run.execute(reporter);
    if let Err(error) = &result {
        run.fail_unfinished(error)?;
    }
    // A run that stopped before any hook ran has no log.
    let log = layout.log_dir().join(format!("{run_id}.log"));
    if log.exists() {
        reporter.step(&format!("log: {}", log.display()));
    }
    result
}

fn run_id(mode: Mode) -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace([':', '-'], "");
    format!(
        "{}-{}-{}",
        match mode {
            Mode::Install => "install",
            Mode::Join => "join",
        },
        stamp.trim_end_matches('Z'),
        std::process::id()
    )
}

/// One add-on as the run carries it.
struct Member<'a> {
    planned: &'a PlannedAddon,
    prefix: String,
    state: AddonState,
    /// Hook functions the add-on defines, known once its install.sh is sourced.
    defined: HashSet<String>,
    index: Option<PackageIndex>,
    finished: bool,
}

struct Run<'a> {
    settings: &'a InstallSettings,
    plan: &'a Plan,
    run_id: String,
    store: StateStore,
    members: Vec<Member<'a>>,
}

impl<'a> Run<'a> {
    fn new(
        settings: &'a InstallSettings,
        plan: &'a Plan,
        run_id: &str,
    ) -> Result<Self, EngineError> {
        let store = StateStore::new(settings.layout.state_dir());
        let mut members = Vec::new();
        for planned in &plan.addons {
            let mut state = planned.record.clone();
            state.desired = Some(planned.version.clone());
            if planned.decision.applies() {
                state.attempt = Some(Attempt {
                    target: planned.target.clone(),
                    outcome: Outcome::Running,
                    phase: "fetch".into(),
                    run: run_id.to_string(),
                });
                state.set_progressing(
                    true,
                    planned.decision.progressing_reason(),
                    format!(
                        "{} {}: {}",
                        planned.decision.name(),
                        planned.version,
                        planned.reason
                    ),
                );
            }
            if state != planned.record {
                store.save(&state)?;
            }
            members.push(Member {
                planned,
                prefix: planned.name.replace('-', "_"),
                state,
                defined: HashSet::new(),
                index: None,
                finished: !planned.decision.applies(),
            });
        }
        Ok(Self {
            settings,
            plan,
            run_id: run_id.to_string(),
            store,
            members,
        })
    }

    fn execute(&mut self, reporter: &dyn Reporter) -> Result<(), EngineError> {
        let layout = self.settings.layout.clone();
        crate::session::end_orphans(&layout.work_dir());
        crate::helpers::install(&layout.helpers_dir()).map_err(io_error(&layout.helpers_dir()))?;

        // fetch: every package is verified and in place before any hook runs.
        for index in 0..self.members.len() {
            let member = &self.members[index];
            let addon_dir = layout.addon_dir(&member.planned.name, &member.planned.version);
            if member.planned.decision.applies() || !addon_dir.join("install.sh").exists() {
                let started = Instant::now();
                let package_index = self.fetch(index)?;
                let member = &mut self.members[index];
                reporter.step(&format!(
                    "{} {}: fetched and verified ({:.1}s)",
                    member.planned.name,
                    member.planned.version,
                    started.elapsed().as_secs_f64()
                ));
                member.index = Some(package_index);
            }
        }

        let log_path = layout.log_dir().join(format!("{}.log", self.run_id));
        fs_err::create_dir_all(layout.log_dir()).map_err(io_error(&layout.log_dir()))?;
        let log = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_error(&log_path))?
            .into_parts()
            .0;
        let work = layout.work_dir().join(&self.run_id);
        let mut session = Session::start(&work, &self.environment(), Box::new(log))
            .map_err(|source| self.hook_error(None, "bash", source))?;
        let helpers = crate::helpers::entry_point(&layout.helpers_dir());
        session
            .source(&helpers, self.settings.hook_timeout)
            .map_err(|source| self.hook_error(None, "the helper library", source))?;

        let phases = self.settings.mode.phases();
        // Each add-on's hooks into the session. Its images load later, just before its main
        // hook: an add-on earlier in the order may be the one that installs the runtime.
        let mut runtime: Option<Runtime> = None;
        for index in 0..self.members.len() {
            let member = &self.members[index];
            let script = layout
                .addon_dir(&member.planned.name, &member.planned.version)
                .join("install.sh");
            if script.exists() {
                session
                    .source(&script, self.settings.hook_timeout)
                    .map_err(|source| self.hook_error(Some(index), "install.sh", source))?;
            }
            let names: Vec<String> = phases
                .iter()
                .map(|phase| phase.hook(&member.prefix, &member.planned.decision))
                .collect();
            let defined = session
                .defined(&names)
                .map_err(|source| self.hook_error(Some(index), "install.sh", source))?;
            self.members[index].defined = defined;
        }

        for (phase_number, phase) in phases.iter().enumerate() {
            for index in 0..self.members.len() {
                let member = &self.members[index];
                let applies = member.planned.decision.applies();
                // Applied add-ons are done; AlreadyApplied ones run only their install-phase hook.
                if (applies && member.finished) || (!applies && !phase.main()) {
                    continue;
                }
                let hook = phase.hook(&member.prefix, &member.planned.decision);
                let kustomize = layout.kustomize_dir(&member.planned.name);
                if phase.main() && applies {
                    self.enter_phase(index, "load")?;
                    self.load_images(index, &mut runtime, reporter)?;
                    let _ = fs_err::remove_dir_all(&kustomize);
                    fs_err::create_dir_all(&kustomize).map_err(io_error(&kustomize))?;
                }
                let member = &self.members[index];
                if member.defined.contains(&hook) {
                    if applies {
                        self.enter_phase(index, phase.name())?;
                    }
                    let member = &self.members[index];
                    reporter.step(&format!(
                        "{} {}: {hook}",
                        member.planned.name, member.planned.version
                    ));
                    let started = Instant::now();
                    session
                        .hook(&hook, self.settings.hook_timeout)
                        .map_err(|source| self.hook_error(Some(index), &hook, source))?;
                    report_duration(reporter, &hook, started.elapsed());
                }
                // An add-on is done once no later phase defines a hook for it.
                let member = &self.members[index];
                let remaining = phases[phase_number + 1..].iter().any(|later| {
                    member
                        .defined
                        .contains(&later.hook(&member.prefix, &member.planned.decision))
                });
                if applies && !remaining {
                    self.succeed(index, reporter)?;
                }
            }
        }
        session
            .finish()
            .map_err(|source| self.hook_error(None, "the hook session", source))?;
        let _ = fs_err::remove_dir_all(&work);
        Ok(())
    }

    fn environment(&self) -> Vec<(String, String)> {
        let layout = &self.settings.layout;
        let mut environment = vec![
            (
                "DIR".to_string(),
                layout.install_dir().display().to_string(),
            ),
            (
                "BERTH_ROOT".to_string(),
                layout.root().display().to_string(),
            ),
            ("INSTALLER_ID".to_string(), self.plan.id.clone()),
            (
                "BERTH_JOIN_TTL".to_string(),
                self.settings.join_ttl.as_secs().to_string(),
            ),
        ];
        if let Ok(binary) = std::env::current_exe() {
            environment.push(("BERTH_BIN".to_string(), binary.display().to_string()));
        }
        if self.plan.airgap {
            environment.push(("AIRGAP".to_string(), "1".to_string()));
        }
        for (key, value) in &self.settings.params {
            environment.push((upper_snake(key), value.clone()));
        }
        for member in &self.members {
            let prefix = upper_snake(&member.planned.name);
            environment.push((format!("{prefix}_VERSION"), member.planned.version.clone()));
            environment.extend(config_environment(
                &member.planned.name,
                &member.planned.config,
            ));
        }
        environment
    }

    fn fetch(&mut self, index: usize) -> Result<PackageIndex, EngineError> {
        let layout = &self.settings.layout;
        let planned = self.members[index].planned;
        let (name, version) = (planned.name.as_str(), planned.version.as_str());
        let file = package_file_name(name, version);
        let cache = layout.package_cache();
        fs_err::create_dir_all(&cache).map_err(io_error(&cache))?;
        let cached = cache.join(&file);
        let expected: Sha256Digest = planned
            .target
            .package_digest
            .parse()
            .expect("digests in targets are well formed");
        let fetch_error = |source| EngineError::Fetch {
            name: name.to_string(),
            version: version.to_string(),
            source,
        };
        // An airgap bundle carries the package unpacked, checked through the lock's digest of
        // its index.
        if let (Dist::Local(bundle), Some(index_digest)) = (
            &self.settings.dist,
            self.settings
                .lock
                .as_ref()
                .and_then(|lock| lock.addon(name))
                .and_then(|locked| locked.index_sha256),
        ) && bundled_package(bundle, name, version).is_dir()
        {
            let staging = layout.work_dir().join(format!("unpack-{name}-{version}"));
            return unpack_bundled(
                bundle,
                &index_digest,
                (name, version),
                &staging,
                &layout.install_dir(),
            )
            .map_err(|source| EngineError::Unpack {
                name: name.to_string(),
                version: version.to_string(),
                source,
            });
        }
        let unpacked = layout.addon_dir(name, version);
        if self.settings.reuse_unpacked && !cached.exists() {
            return read_unpacked(&unpacked).map_err(|source| EngineError::Unpack {
                name: name.to_string(),
                version: version.to_string(),
                source,
            });
        }
        // A cached package is trusted only as far as its digest; unpack checks it again.
        let cached_digest = fs_err::read_to_string(cache.join(format!("{file}.sha256")))
            .ok()
            .and_then(|text| berth_formats::package_index::parse_checksum_file(&text).ok());
        if cached_digest != Some(expected) || !cached.exists() {
            self.settings
                .dist
                .fetch(&file, &cached)
                .map_err(fetch_error)?;
        }
        let staging = layout.work_dir().join(format!("unpack-{name}-{version}"));
        let result = unpack(
            &cached,
            &expected,
            (name, version),
            &staging,
            &layout.install_dir(),
        );
        match result {
            Ok(index) => {
                let checksum = berth_formats::package_index::checksum_file_text(&expected, &file);
                fs_err::write(cache.join(format!("{file}.sha256")), checksum)
                    .map_err(io_error(&cache))?;
                Ok(index)
            }
            Err(source) => {
                // A package that fails its check is not kept: the next run fetches it again.
                let _ = fs_err::remove_file(&cached);
                let _ = fs_err::remove_file(cache.join(format!("{file}.sha256")));
                Err(EngineError::Unpack {
                    name: name.to_string(),
                    version: version.to_string(),
                    source,
                })
            }
        }
    }

    fn load_images(
        &mut self,
        index: usize,
        runtime: &mut Option<Runtime>,
        reporter: &dyn Reporter,
    ) -> Result<(), EngineError> {
        let member = &self.members[index];
        let Some(package) = &member.index else {
            return Ok(());
        };
        if package.images.is_empty() {
            return Ok(());
        }
        let (name, version) = (member.planned.name.clone(), member.planned.version.clone());
        // Detected once it answers: until then an earlier add-on may still be installing it.
        if runtime.is_none() {
            *runtime = Runtime::detect();
        }
        let images_error = |source| EngineError::Images {
            name: name.clone(),
            version: version.clone(),
            source,
        };
        let Some(runtime) = runtime else {
            return Err(images_error(ImageError::NoRuntime {
                addon: name.clone(),
            }));
        };
        let layout = self
            .settings
            .layout
            .addon_dir(&name, &version)
            .join("images");
        let started = Instant::now();
        let imported = runtime
            .load(&layout, &package.images)
            .map_err(images_error)?;
        reporter.step(&format!(
            "{name} {version}: {} image(s) {} ({:.1}s)",
            package.images.len(),
            if imported {
                "imported"
            } else {
                "already present"
            },
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    fn enter_phase(&mut self, index: usize, phase: &str) -> Result<(), EngineError> {
        let member = &mut self.members[index];
        if let Some(attempt) = &mut member.state.attempt {
            attempt.phase = phase.to_string();
        }
        let reason = member.planned.decision.progressing_reason();
        member.state.set_progressing(
            true,
            reason,
            format!(
                "{} {}: {phase}",
                member.planned.decision.name(),
                member.planned.version
            ),
        );
        self.store.save(&member.state)?;
        Ok(())
    }

    fn succeed(&mut self, index: usize, reporter: &dyn Reporter) -> Result<(), EngineError> {
        let member = &mut self.members[index];
        let target = member.planned.target.clone();
        let state = &mut member.state;
        if state
            .current
            .as_ref()
            .is_some_and(|current| current.target.version != target.version)
        {
            state.last = state.current.take();
        }
        state.current = Some(Applied {
            target: target.clone(),
            // To the microsecond: reset undoes add-ons in the order they were applied.
            applied_at: humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            config: member.planned.config.clone(),
        });
        if let Some(attempt) = &mut state.attempt {
            attempt.outcome = Outcome::Succeeded;
        }
        state.set_progressing(false, "Succeeded", format!("{} applied", target.version));
        state.set_available(true, "Applied", format!("{} is in place", target.version));
        self.store.save(state)?;
        member.finished = true;
        reporter.step(&format!(
            "{} {}: succeeded",
            member.planned.name, target.version
        ));
        Ok(())
    }

    /// A failure in the session: an add-on's (by index) or the engine's own.
    fn hook_error(&self, index: Option<usize>, hook: &str, source: HookError) -> EngineError {
        let planned = index
            .and_then(|index| self.members.get(index))
            .map(|m| m.planned);
        EngineError::Hook {
            name: planned.map_or_else(|| "berth".into(), |p| p.name.clone()),
            version: planned.map_or_else(String::new, |p| p.version.clone()),
            hook: hook.to_string(),
            source,
        }
    }

    /// Marks every add-on the run did not finish as Failed: the culprit with the error and the
    /// tail of its output, the others as stopped by it. An add-on already in place stays
    /// Available.
    fn fail_unfinished(&mut self, error: &EngineError) -> Result<(), EngineError> {
        let culprit = match error {
            EngineError::Fetch { name, .. }
            | EngineError::Unpack { name, .. }
            | EngineError::Images { name, .. }
            | EngineError::Hook { name, .. } => Some(name.clone()),
            _ => None,
        };
        let message = error_message(error);
        for member in &mut self.members {
            if member.finished {
                continue;
            }
            let state = &mut member.state;
            if let Some(attempt) = &mut state.attempt {
                attempt.outcome = Outcome::Failed;
            }
            let text = if culprit.as_deref() == Some(member.planned.name.as_str()) {
                message.clone()
            } else {
                format!(
                    "not finished: the run stopped at {}",
                    culprit.as_deref().unwrap_or("an error")
                )
            };
            state.set_progressing(false, "Failed", text);
            match &state.current {
                Some(current) => {
                    let version = current.target.version.clone();
                    state.set_available(true, "Applied", format!("{version} stays in place"));
                }
                None => state.set_available(false, "NotApplied", "not installed".into()),
            }
            self.store.save(state)?;
        }
        Ok(())
    }
}

/// The index of a package already unpacked on this node (checked when it was unpacked).
fn read_unpacked(folder: &Path) -> Result<PackageIndex, UnpackError> {
    let path = folder.join(berth_formats::package_index::PACKAGE_INDEX_FILE);
    let bytes = fs_err::read(&path).map_err(|source| UnpackError::Io {
        path: path.clone(),
        source,
    })?;
    PackageIndex::from_bytes(&bytes).map_err(|error| UnpackError::BadIndex {
        package: path,
        message: error.to_string(),
    })
}

/// The error, its causes, and the tail of the hook's output.
fn error_message(error: &EngineError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    let mut tail: &[String] = &[];
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        if let Some(hook) = cause.downcast_ref::<HookError>() {
            tail = hook.tail();
        }
        source = cause.source();
    }
    if !tail.is_empty() {
        text.push_str("\noutput:\n");
        text.push_str(&tail.join("\n"));
    }
    text
}

fn report_duration(reporter: &dyn Reporter, hook: &str, elapsed: Duration) {
    if elapsed > Duration::from_secs(1) {
        reporter.step(&format!("{hook} took {:.1}s", elapsed.as_secs_f64()));
    }
}
