//! The first node's rollouts: one record per rollout name under `fleet/rollouts/`, every change
//! made under one lock, so `berth rollout` on the command line and the serving first node
//! (which decides on every report and hands out work) never lose each other's writes. A
//! record holds everything a decision needs: the coordinator can be killed at any point and
//! decide again from what it wrote.
//!
//! Which node starts when is [`strategy`](crate::strategy)'s to decide; [`plan`]
//! makes a record, [`decide`] carries it forward: it turns the strategy's decisions into the
//! record, hands out work, and judges what the nodes say of it.

mod decide;
mod plan;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use berth_formats::rollout::{Control, RolloutRecord, RolloutState, TargetState};
use berth_formats::time::rfc3339;

pub use decide::{has_work, is_node, mismatch, next_tick, progress, tick, work_for};
pub use plan::{check_offered, config_hash, plan, rollback, wanted_versions};

use crate::FleetPaths;

/// Every rollout the first node keeps.
pub struct Rollouts {
    dir: PathBuf,
}

/// The most rollouts kept at once.
pub const MAX_ROLLOUTS: usize = 256;

impl Rollouts {
    pub fn new(paths: &FleetPaths) -> Self {
        Self {
            dir: paths.dir.join("rollouts"),
        }
    }

    /// Runs `change` on every record with the lock held, and writes back those it changed.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<RolloutRecord>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let _lock = self.lock()?;
        let before = self.load_all()?;
        let mut records = before.clone();
        let result = change(&mut records)?;
        for record in &records {
            let unchanged = before.iter().any(|old| {
                old.rollout.metadata.name == record.rollout.metadata.name && old == record
            });
            if !unchanged {
                self.save(record)?;
            }
        }
        Ok(result)
    }

    /// Every record that reads, by name; a damaged one is left out (and on disk).
    pub fn load_all(&self) -> anyhow::Result<Vec<RolloutRecord>> {
        Ok(self.load_all_reporting()?.0)
    }

    /// Every record that reads, by name, and what is wrong with each that does not: one
    /// damaged record never stops the others.
    pub fn load_all_reporting(&self) -> anyhow::Result<(Vec<RolloutRecord>, Vec<String>)> {
        let entries = match fs_err::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()));
            }
            Err(error) => return Err(error.into()),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|extension| extension == "json")
            })
            .collect();
        paths.sort();
        if paths.len() > MAX_ROLLOUTS {
            bail!(
                "{} holds {} rollouts, more than {MAX_ROLLOUTS}; remove finished ones with `berth rollout delete`",
                self.dir.display(),
                paths.len()
            );
        }
        let mut records = Vec::new();
        let mut damaged = Vec::new();
        for path in &paths {
            match read_record(path) {
                Ok(record) => records.push(record),
                Err(problem) => damaged.push(format!(
                    "{} is damaged ({problem}); remove it (`berth rollout delete {}`) and apply the rollout again",
                    path.display(),
                    path.file_stem().unwrap_or_default().to_string_lossy()
                )),
            }
        }
        Ok((records, damaged))
    }

    /// Removes a rollout's record; `false` when there was none.
    pub fn delete(&self, name: &str) -> anyhow::Result<bool> {
        berth_formats::name::check_plain("rollout name", name)?;
        let _lock = self.lock()?;
        match fs_err::remove_file(self.path(name)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// When the rollout files last changed (a record written or removed), to notice changes
    /// the command line made.
    pub fn modified(&self) -> Option<SystemTime> {
        fs_err::metadata(&self.dir)
            .and_then(|metadata| metadata.modified())
            .ok()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// Writes a record root's alone (0600, in a 0700 folder): a rollout's configuration may
    /// set an add-on's secret fields. A record written before with a wider mode gets 0600.
    fn save(&self, record: &RolloutRecord) -> anyhow::Result<()> {
        let path = self.path(&record.rollout.metadata.name);
        let mut bytes = serde_json::to_vec_pretty(record).expect("records serialize");
        bytes.push(b'\n');
        berth_formats::files::write_atomically_with_mode(&path, &bytes, 0o600)
            .with_context(|| format!("failed to write {}", path.display()))
    }

    /// An exclusive `flock`, waited for: the holders are short. The folder is made (or made
    /// again) root's alone first.
    fn lock(&self) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
        berth_formats::files::private_dir(&self.dir)?;
        crate::lock_file(&self.dir.join(".lock"), true)
    }
}

/// A record, checked as far as a decision needs: its rollout reads and its generation counts.
fn read_record(path: &std::path::Path) -> Result<RolloutRecord, String> {
    let bytes = fs_err::read(path).map_err(|error| error.to_string())?;
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(format!("larger than {MAX_RECORD_BYTES} bytes"));
    }
    let record: RolloutRecord =
        serde_json::from_slice(&bytes).map_err(|error| error.to_string())?;
    record.rollout.strategy()?;
    if record.generation == 0 {
        return Err("its generation is 0".into());
    }
    Ok(record)
}

/// The largest rollout record read: a rollout and a line per node.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// Seconds since the Unix epoch.
pub fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

pub(crate) fn seconds_of(text: &Option<String>) -> Option<u64> {
    text.as_deref()
        .and_then(|text| humantime::parse_rfc3339_weak(text).ok())
        .map(seconds)
}

/// Whether nodes of the record may still start or are still running.
pub fn unfinished(record: &RolloutRecord) -> bool {
    match record.state {
        RolloutState::Completed | RolloutState::Aborted => false,
        RolloutState::Stopped => active(record),
        RolloutState::Progressing | RolloutState::Paused => true,
    }
}

/// Whether a node of the record runs or soaks.
fn active(record: &RolloutRecord) -> bool {
    record
        .targets
        .iter()
        .any(|target| matches!(target.state, TargetState::Running | TargetState::Soaking))
}

/// Finds a record by name, or says which there are.
pub fn find<'a>(
    records: &'a mut [RolloutRecord],
    name: &str,
) -> anyhow::Result<&'a mut RolloutRecord> {
    let names: Vec<String> = records
        .iter()
        .map(|record| record.rollout.metadata.name.clone())
        .collect();
    records
        .iter_mut()
        .find(|record| record.rollout.metadata.name == name)
        .with_context(|| {
            format!(
                "no rollout named {name}; there are: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
}

/// Pause (no node starts), resume, or abort (no node starts, for good). Nodes already
/// running finish either way: a run cut half-way helps no one.
pub fn control(
    record: &mut RolloutRecord,
    control: Control,
    now: SystemTime,
) -> anyhow::Result<()> {
    if record.control == Control::Aborted {
        bail!(
            "rollout {} was aborted; apply it again to start anew",
            record.rollout.metadata.name
        );
    }
    record.control = control;
    record.state = match control {
        Control::Aborted => RolloutState::Aborted,
        Control::Paused if record.state == RolloutState::Progressing => RolloutState::Paused,
        Control::Running if record.state == RolloutState::Paused => RolloutState::Progressing,
        _ => record.state,
    };
    // Work handed out that no node took yet is taken back.
    if control == Control::Aborted {
        for target in &mut record.targets {
            if target.state == TargetState::Running && target.picked_up_at.is_none() {
                target.state = TargetState::ToApply;
                target.started_at = None;
            }
        }
    }
    record.updated_at = rfc3339(now);
    Ok(())
}

/// Takes the node with machine id `machine` out of every rollout that has not finished.
pub fn forget(records: &mut [RolloutRecord], machine: &str) {
    for record in records.iter_mut().filter(|record| unfinished(record)) {
        record.targets.retain(|target| target.machine_id != machine);
    }
}
