//! What Berth has applied on this node, one JSON record per add-on. One run at a time touches
//! them, under the [`crate::node::lock`].
//!
//! Records are written atomically (temp file, fsync, rename, fsync of the folder) after every
//! phase, so a run killed at any point leaves records a re-run can read and continue from.

use std::path::PathBuf;

use crate::files::{private_dir, write_atomically_with_mode};

use berth_formats::Sha256Digest;
use berth_formats::health::{HooksRan, NodeRole};

use crate::phase::Step;
use serde::{Deserialize, Serialize};

/// What a run asks to be applied for one add-on. Two targets with the same fields need no work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(deserialize_with = "berth_formats::name::plain_version")]
    pub version: String,
    /// The installer id (a prefix of the spec's digest).
    pub id: String,
    pub package_digest: Sha256Digest,
    /// sha256 of the add-on's effective configuration (canonical JSON).
    pub config_hash: String,
    /// Bumped when the engine changes how it applies add-ons, so every add-on reapplies.
    pub generation: u32,
}

/// A target that was applied in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    #[serde(flatten)]
    pub target: Target,
    pub applied_at: String,
    /// The effective configuration it was applied with, so a rollback can apply it again.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// The node's part in the cluster when it was applied, and which of the add-on's hooks
    /// ran here: together they say which of its components live on this node. Absent from
    /// records older than them: every component is judged then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<NodeRole>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_ran: Option<HooksRan>,
    /// What script flags had set that hooks see (`NODE_LABELS`, `PUBLIC_ADDRESS`), by
    /// variable, each value's digest: a run whose flags set one the add-on reads otherwise
    /// applies it again.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub flag_inputs: std::collections::BTreeMap<String, String>,
}

/// The latest run that worked on the add-on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub target: Target,
    /// The effective configuration the run applies, so a reset after a failed first install
    /// runs the reset hook with it.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub config: serde_json::Map<String, serde_json::Value>,
    pub outcome: Outcome,
    /// The last step that started.
    pub phase: Step,
    pub run: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Under way, or the run that started it was killed.
    Running,
    Failed,
    Succeeded,
}

/// Why a condition is what it is: one CamelCase word, as Kubernetes reasons are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// Progressing: a first install is under way.
    Installing,
    /// Progressing: another version is going in.
    Upgrading,
    /// Progressing: an earlier version is going back in.
    RollingBack,
    /// Progressing (false): the last run applied the add-on.
    Succeeded,
    /// Progressing (false): the last run failed, or was refused.
    Failed,
    /// Progressing (false): a run stopped part-way: recorded when a signal (Ctrl-C, SIGTERM,
    /// SIGHUP) stopped it, and shown by `berth status` for a run that was killed (its records
    /// still say Installing…) once no run holds the node's lock.
    Interrupted,
    /// Available: a version is in place.
    Applied,
    /// Available (false): no version is in place.
    NotApplied,
    /// Available (false): a version is in place, but its components are not healthy.
    Unhealthy,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Installing => "Installing",
            Reason::Upgrading => "Upgrading",
            Reason::RollingBack => "RollingBack",
            Reason::Succeeded => "Succeeded",
            Reason::Failed => "Failed",
            Reason::Interrupted => "Interrupted",
            Reason::Applied => "Applied",
            Reason::NotApplied => "NotApplied",
            Reason::Unhealthy => "Unhealthy",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A status condition, as Kubernetes objects carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    pub status: bool,
    pub reason: Reason,
    pub message: String,
    pub last_transition_time: String,
}

/// Everything recorded about one add-on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonState {
    #[serde(deserialize_with = "berth_formats::name::plain_name")]
    pub name: String,
    /// The version the latest run asked for.
    #[serde(
        deserialize_with = "berth_formats::name::plain_version_option",
        default
    )]
    pub desired: Option<String>,
    /// Applied in full and in place now.
    pub current: Option<Applied>,
    /// What `current` replaced.
    pub last: Option<Applied>,
    pub attempt: Option<Attempt>,
    pub progressing: Option<Condition>,
    pub available: Option<Condition>,
    /// Every change of `Progressing`'s reason, oldest first (the newest are kept).
    #[serde(default)]
    pub history: Vec<Transition>,
    /// The image references Berth imported for the add-on (those the runtime lacked): the
    /// only images its reset removes.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub imported_images: std::collections::BTreeSet<String>,
}

/// One change of `Progressing`: what the add-on went through, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub time: String,
    pub reason: Reason,
    pub message: String,
}

/// How many transitions a record keeps (run state and health alike).
pub(crate) const HISTORY_LENGTH: usize = 50;

impl AddonState {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            desired: None,
            current: None,
            last: None,
            attempt: None,
            progressing: None,
            available: None,
            history: Vec::new(),
            imported_images: Default::default(),
        }
    }

    /// Sets `Progressing`, keeping its transition time when neither status nor reason changes.
    /// The history gains an entry when the reason changes, and when a finished state (status
    /// false) comes again with another message: a second failure, for another cause.
    pub fn set_progressing(&mut self, status: bool, reason: Reason, message: String) {
        let condition = transition(self.progressing.take(), status, reason, message);
        let recorded = self.history.last().is_some_and(|last| {
            last.reason == reason && (status || last.message == condition.message)
        });
        if !recorded {
            self.history.push(Transition {
                time: condition.last_transition_time.clone(),
                reason,
                message: condition.message.clone(),
            });
            let excess = self.history.len().saturating_sub(HISTORY_LENGTH);
            self.history.drain(..excess);
        }
        self.progressing = Some(condition);
    }

    pub fn set_available(&mut self, status: bool, reason: Reason, message: String) {
        self.available = Some(transition(self.available.take(), status, reason, message));
    }
}

fn transition(old: Option<Condition>, status: bool, reason: Reason, message: String) -> Condition {
    let unchanged = old
        .as_ref()
        .is_some_and(|old| old.status == status && old.reason == reason);
    Condition {
        status,
        reason,
        message,
        last_transition_time: match old {
            Some(old) if unchanged => old.last_transition_time,
            _ => berth_formats::time::now(),
        },
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("failed to read the state record {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the state record {path} is damaged: {message}\nhint: move it aside; the add-on will then be installed again"
    )]
    Damaged { path: PathBuf, message: String },
    #[error("failed to write the state record {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    BadName(#[from] berth_formats::name::NameError),
}

/// The records in a state folder.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
}

impl StateStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// The record of `name`, or a blank one when there is none. A record that does not parse,
    /// or names another add-on than its file, is damaged.
    pub fn load(&self, name: &str) -> Result<AddonState, StateError> {
        let path = self.path(name);
        let damaged = |message: String| StateError::Damaged {
            path: path.clone(),
            message,
        };
        berth_formats::name::check_plain("add-on name", name)?;
        match fs_err::read(&path) {
            Ok(bytes) => {
                let state: AddonState =
                    serde_json::from_slice(&bytes).map_err(|error| damaged(error.to_string()))?;
                if state.name != name {
                    return Err(damaged(format!("it names the add-on `{}`", state.name)));
                }
                Ok(state)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(AddonState::new(name)),
            Err(source) => Err(StateError::Read { path, source }),
        }
    }

    /// The record of `name` for a plan: a damaged record reads as a blank one (the add-on is
    /// installed again), with the damage beside it.
    pub fn load_or_blank(
        &self,
        name: &str,
    ) -> Result<(AddonState, Option<StateError>), StateError> {
        match self.load(name) {
            Err(error @ StateError::Damaged { .. }) => Ok((AddonState::new(name), Some(error))),
            other => other.map(|state| (state, None)),
        }
    }

    /// Moves the damaged record of `name` aside, to `<name>.json.damaged`, before a run writes
    /// a new one: nothing of it is lost.
    pub fn set_aside(&self, name: &str) -> Result<PathBuf, StateError> {
        let path = self.path(name);
        let aside = self.dir.join(format!("{name}.json.damaged"));
        fs_err::rename(&path, &aside).map_err(|source| StateError::Write { path, source })?;
        Ok(aside)
    }

    /// Every record, by name, and apart from them the records that are damaged: one damaged
    /// record does not hide the others.
    pub fn load_all(&self) -> Result<(Vec<AddonState>, Vec<StateError>), StateError> {
        let entries = match fs_err::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()));
            }
            Err(source) => {
                return Err(StateError::Read {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json").map(str::to_string)
            })
            .collect();
        names.sort();
        let mut states = Vec::new();
        let mut damaged = Vec::new();
        for name in &names {
            match self.load(name) {
                Ok(state) => states.push(state),
                // A file whose name is no add-on's is as damaged as one that does not parse.
                Err(error @ (StateError::Damaged { .. } | StateError::BadName(_))) => {
                    damaged.push(error)
                }
                Err(error) => return Err(error),
            }
        }
        Ok((states, damaged))
    }

    /// What to add to "`name` is not installed": the installed add-on nearest to it (a typo),
    /// else the installed ones, else that none is.
    pub fn not_installed_hint(&self, name: &str) -> String {
        let installed: Vec<String> = self
            .load_all()
            .map(|(states, _)| states)
            .unwrap_or_default()
            .into_iter()
            .filter(|state| state.current.is_some())
            .map(|state| state.name)
            .collect();
        if installed.is_empty() {
            return format!(
                "no add-on is installed in {}",
                self.dir.parent().unwrap_or(&self.dir).display()
            );
        }
        match berth_formats::name::nearest(name, installed.iter().map(String::as_str)) {
            Some(nearest) => format!("did you mean `{nearest}`?"),
            None => format!("installed here: {}", installed.join(", ")),
        }
    }

    /// Writes the record, readable by root alone: a failure's message holds the tail of a
    /// hook's output, which may show a secret.
    pub fn save(&self, state: &AddonState) -> Result<(), StateError> {
        let path = self.path(&state.name);
        let mut bytes = serde_json::to_vec_pretty(state).expect("state serializes");
        bytes.push(b'\n');
        let write = || {
            private_dir(&self.dir)?;
            write_atomically_with_mode(&path, &bytes, 0o600)
        };
        write().map_err(|source| StateError::Write { path, source })
    }
}

/// Every add-on's record as `berth status` shows it: a run that was killed leaves its add-ons
/// Installing (or Upgrading…), so with no run holding the node's lock they are said to be
/// Interrupted. Damaged records are given apart.
pub fn load_as_seen(
    layout: &crate::node::layout::Layout,
) -> Result<(Vec<AddonState>, Vec<StateError>), StateError> {
    let (mut states, damaged) = StateStore::new(layout.state_dir()).load_all()?;
    if !crate::node::lock::NodeLock::is_held(&layout.lock_file()) {
        for state in &mut states {
            let running = state
                .attempt
                .as_ref()
                .is_some_and(|attempt| attempt.outcome == Outcome::Running);
            if running && state.progressing.as_ref().is_some_and(|p| p.status) {
                let phase = state.attempt.as_ref().map_or("", |a| a.phase.name());
                state.set_progressing(
                    false,
                    Reason::Interrupted,
                    format!("the run stopped during {phase} and no run is under way; run the install again to continue"),
                );
            }
        }
    }
    Ok((states, damaged))
}
