//! The installer's side of the fleet (`berth_fleet`): where the fleet's files are under this
//! node's root, and what only the installer knows of the node — its add-ons and their
//! health, the installer it ran last, its join parameters, and how to run an upgrade.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use berth_fleet::{
    AddonFacts, Condition, FleetPaths, Host, InPlace, JoinParams, LastRun, NewParam, Pin, Upgrade,
};
use berth_formats::fleet::AddonReport;
use berth_formats::lock::{LOCK_SCHEMA_VERSION, Lock, LockedAddon};
use berth_formats::spec::InstallerSpec;

use crate::kubernetes::join::JoinStore;
use crate::node::last_installer::LastInstaller;
use crate::node::layout::Layout;
use crate::node::lock::NodeLock;
use crate::node::state::{AddonState, StateStore};

/// Where the fleet keeps its files under `layout`'s root.
pub fn paths(layout: &Layout) -> FleetPaths {
    FleetPaths {
        dir: layout.fleet_dir(),
        log_dir: layout.log_dir(),
    }
}

/// This node, as the fleet sees it.
pub struct Node {
    layout: Layout,
}

impl Node {
    pub fn new(layout: &Layout) -> Self {
        Self {
            layout: layout.clone(),
        }
    }
}

impl Host for Node {
    fn addons(&self, recorded_since: Option<SystemTime>) -> anyhow::Result<Vec<AddonReport>> {
        let layout = &self.layout;
        let (states, _damaged) = StateStore::new(layout.state_dir()).load_all()?;
        // A record the run just wrote stands for the add-on's health now; the rest is probed.
        let recorded = |state: &AddonState| {
            let since = recorded_since?;
            let record = crate::health::HealthRecord::load(layout, &state.name)?;
            let checked = humantime::parse_rfc3339_weak(&record.checked_at).ok()?;
            let current = state.current.as_ref()?;
            (checked >= since && record.version == current.target.version).then_some(record)
        };
        let (fresh, stale): (Vec<&AddonState>, Vec<&AddonState>) =
            states.iter().partition(|state| recorded(state).is_some());
        let stale: Vec<AddonState> = stale.into_iter().cloned().collect();
        let mut health =
            crate::health::check_all(layout, &stale, &crate::health::RuntimeOnce::new());
        for state in fresh {
            if let Some(record) = recorded(state) {
                health.insert(state.name.clone(), record);
            }
        }
        // A node.yaml that cannot be read stops the node's runs with a clear error; the
        // report goes on without its fields.
        let own = crate::engine::node_overrides(&layout.node_config()).unwrap_or_default();
        Ok(states
            .iter()
            .map(|state| {
                let mut report = addon_report(state, health.get(&state.name));
                if let Some((_, fields)) = own.iter().find(|(name, _)| *name == state.name) {
                    report.node_config = fields.clone();
                }
                report
            })
            .collect())
    }

    /// On the cluster's primary, the Addon resources follow what the agent reports.
    fn reported(&self) {
        if let Err(error) = crate::kubernetes::addon_resource::publish_from_agent(&self.layout) {
            eprintln!("berth: warning: the add-ons were not published as Addon resources: {error}");
        }
    }

    fn last_run(&self) -> anyhow::Result<Option<LastRun>> {
        Ok(LastInstaller::load(&self.layout)?.map(|last| LastRun {
            spec: last.spec,
            dist: last.dist,
            joined: last.joined,
        }))
    }

    fn addon(&self, name: &str) -> Option<AddonFacts> {
        let state = StateStore::new(self.layout.state_dir()).load(name).ok()?;
        Some(AddonFacts {
            current: state.current.map(|applied| InPlace {
                version: applied.target.version,
                applied_at: applied.applied_at,
                package: applied.target.package_digest,
            }),
            progressing: state.progressing.map(|condition| Condition {
                reason: condition.reason.to_string(),
                message: condition.message,
                since: condition.last_transition_time,
            }),
        })
    }

    fn busy(&self) -> bool {
        NodeLock::is_held(&self.layout.lock_file())
    }

    fn lock(&self, spec: &Path, pin: &Pin<'_>) -> anyhow::Result<Lock> {
        let spec = InstallerSpec::load(spec)?;
        // The last installer's lock pinned what the node runs for the sections a work leaves
        // alone; a node installed without one has the digests it verified in its records.
        let last = LastInstaller::load(&self.layout)?;
        let last_lock = match last.as_ref().and_then(|last| last.lock.clone()) {
            Some(path) => Some(Lock::parse(
                &path.display().to_string(),
                &fs_err::read(&path)?,
            )?),
            None => None,
        };
        let store = StateStore::new(self.layout.state_dir());
        let mut addons = Vec::with_capacity(spec.addons.len());
        for name in spec.addons.keys() {
            let locked = if *name == pin.addon {
                LockedAddon {
                    name: name.clone(),
                    version: pin.version.to_string(),
                    sha256: pin.sha256,
                    compression: dist_compression(last.as_ref(), pin.addon, pin.version),
                    index_sha256: None,
                }
            } else if let Some(locked) = last_lock.as_ref().and_then(|lock| lock.addon(name)) {
                locked.clone()
            } else {
                let current = store.load(name).ok().and_then(|state| state.current);
                let Some(current) = current else {
                    anyhow::bail!(
                        "this node's spec has {name}, which it has not installed, so it has no verified package of it to keep; run the node's installer again, then the rollout"
                    );
                };
                let compression = crate::engine::kept_compression(
                    &self.layout,
                    name,
                    &current.target.version,
                    &current.target.package_digest,
                )
                .unwrap_or_default();
                LockedAddon {
                    name: name.clone(),
                    version: current.target.version,
                    sha256: current.target.package_digest,
                    compression,
                    index_sha256: None,
                }
            };
            addons.push(locked);
        }
        Ok(Lock {
            schema_version: LOCK_SCHEMA_VERSION,
            id: spec.id(),
            addons,
        })
    }

    /// `berth upgrade` in a process of its own, so a first node's coordinator killed never
    /// kills a run.
    fn upgrade(&self, upgrade: Upgrade<'_>) -> anyhow::Result<bool> {
        let mut command = Command::new(crate::own_program()?);
        command
            .arg("upgrade")
            .arg("--root")
            .arg(self.layout.root())
            .arg("--spec")
            .arg(upgrade.spec)
            .arg("--lock")
            .arg(upgrade.lock)
            .arg("--dist")
            .arg(upgrade.dist)
            .stdout(upgrade.log.try_clone()?)
            .stderr(upgrade.log);
        if upgrade.allow_downgrade {
            command.arg("--allow-downgrade");
        }
        // Join parameters hold secrets, and a command line is everyone's to read: they go on
        // standard input.
        if upgrade.params.is_empty() {
            command.stdin(Stdio::null());
        } else {
            command.arg("--params-from-stdin").stdin(Stdio::piped());
        }
        let mut child = command.spawn().context("failed to start berth upgrade")?;
        if let Some(mut stdin) = child.stdin.take() {
            for (key, value) in upgrade.params {
                stdin.write_all(format!("{key}={value}\0").as_bytes())?;
            }
        }
        Ok(child.wait()?.success())
    }

    /// Collected in this process, as `berth support-bundle` collects it.
    fn support_bundle(&self, since: Option<Duration>, into: &Path) -> anyhow::Result<()> {
        let options = crate::support_bundle::Options {
            since,
            ..Default::default()
        };
        let collected = crate::support_bundle::collect(&self.layout, &options, &|_| {})?;
        crate::support_bundle::write(&collected, into)
    }
}

/// An add-on as the first node sees it: versions, the Progressing reason, and the health
/// conditions when its components were probed.
fn addon_report(state: &AddonState, health: Option<&crate::health::HealthRecord>) -> AddonReport {
    AddonReport {
        name: state.name.clone(),
        desired: state.desired.clone(),
        current: state
            .current
            .as_ref()
            .map(|applied| applied.target.version.clone()),
        last: state
            .last
            .as_ref()
            .map(|applied| applied.target.version.clone()),
        progressing: state.progressing.as_ref().map_or_else(
            || "Unknown".to_string(),
            |condition| condition.reason.to_string(),
        ),
        available: health.map(|health| health.available()),
        degraded: health.map(|health| health.degraded()),
        config_hash: None,
        node_config: Default::default(),
    }
}

/// The node's join parameters file, as the fleet uses it.
pub struct JoinFile {
    store: JoinStore,
}

impl JoinFile {
    pub fn new(layout: &Layout) -> Self {
        Self {
            store: JoinStore::new(layout.join_file()),
        }
    }
}

impl JoinParams for JoinFile {
    fn publish(&self, params: &[NewParam], ttl: Duration) -> anyhow::Result<()> {
        let params: Vec<crate::kubernetes::join::NewParam<'_>> = params
            .iter()
            .map(|param| crate::kubernetes::join::NewParam {
                key: param.key,
                value: param.value.clone(),
                secret: param.secret,
                control_plane: param.control_plane,
            })
            .collect();
        Ok(self.store.set_all(&params, ttl)?)
    }

    fn current(&self, key: &str) -> anyhow::Result<Option<String>> {
        let file = self.store.load()?;
        let Some(param) = file.params.get(key) else {
            return Ok(None);
        };
        let live = param
            .expiry()?
            .is_none_or(|expires| expires > SystemTime::now());
        Ok(live.then(|| param.value.clone()))
    }

    fn for_node(&self, primary: bool) -> anyhow::Result<Vec<(String, String)>> {
        Ok(crate::kubernetes::join::join_params(
            &self.store.load()?,
            primary,
        )?)
    }
}

/// How the node's dist compresses `name` `version`, as its `versions.json` says; gzip where it
/// cannot be read (the fetch then names the file it missed; the pinned digest holds either way).
fn dist_compression(
    last: Option<&LastInstaller>,
    name: &str,
    version: &str,
) -> berth_formats::compression::Compression {
    let versions = last
        .and_then(|last| crate::dist::Dist::parse(&last.dist).ok())
        .and_then(|dist| dist.read(berth_formats::versions::VERSIONS_FILE).ok())
        .and_then(|bytes| berth_formats::versions::VersionsFile::parse("", &bytes).ok());
    versions
        .and_then(|versions| versions.entry(name, version).map(|entry| entry.compression))
        .unwrap_or_default()
}
