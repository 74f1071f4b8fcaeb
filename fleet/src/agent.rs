//! A node's side of a rollout: it asks the first node for work, runs it, and says how it
//! went. Work is an upgrade of one add-on on the spec this node ran last, to the version and
//! configuration the rollout gives it, or (a rollback) to the add-on's section of the spec it
//! ran before an earlier work. Each work id runs once: its folder under `fleet/work/` keeps the spec it started from,
//! the run's output and its outcome, so a restarted agent (or first node) never runs it again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use berth_formats::Sha256Digest;
use berth_formats::fleet::{
    Action, MAX_MESSAGE, MAX_POLL_WAIT_MS, Outcome, Request, Response, Work,
};
use berth_formats::spec::spec_key;
use berth_formats::time::now;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::node::{
    NotRegistered, applied_hashes, exchange, first_node, local_addons, refusal, set_applied_hash,
};
use crate::{FleetPaths, Host, Pin, Upgrade};

/// `berth fleet agent`: reports this node's add-ons every `interval`, and between reports
/// holds a poll open with the first node, so work starts the moment a rollout hands it out
/// whatever the interval. Runs until the first node says it does not know this node (an
/// error: asking again cannot help); any other failure is said through `say` and tried again
/// at the next interval.
pub fn run(
    paths: &FleetPaths,
    host: &dyn Host,
    interval: Duration,
    say: impl Fn(&str),
) -> anyhow::Result<()> {
    first_node(paths)?;
    let mut next_report = Instant::now();
    loop {
        let mut failed = false;
        if Instant::now() >= next_report {
            next_report = Instant::now() + interval;
            match crate::node::report(paths, host) {
                Ok(_) => host.reported(),
                Err(error) => {
                    stop_if_unregistered(error, &say)?;
                    failed = true;
                }
            }
        }
        if !failed {
            let wait = next_report
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(MAX_POLL_WAIT_MS));
            let asked = Instant::now();
            match round(paths, host, wait) {
                Ok(Some((work, outcome))) => say(&format!("{work}: {outcome:?}")),
                Ok(None) => {
                    // A first node that answers at once (it holds too many polls) is asked
                    // again only when the wait is over.
                    std::thread::sleep((asked + wait).saturating_duration_since(Instant::now()));
                }
                Err(error) => {
                    stop_if_unregistered(error, &say)?;
                    failed = true;
                }
            }
        }
        if failed {
            std::thread::sleep(next_report.saturating_duration_since(Instant::now()));
        }
    }
}

/// `Err` when `error` says the first node does not know this node; else says it.
fn stop_if_unregistered(error: anyhow::Error, say: &impl Fn(&str)) -> anyhow::Result<()> {
    if error.downcast_ref::<NotRegistered>().is_some() {
        return Err(error);
    }
    say(&berth_formats::report::chain(error.as_ref()));
    Ok(())
}

/// Asks the first node for work, holding the poll up to `wait`, and runs the work given.
/// Returns the outcome of work it ran or re-sent, if any.
pub fn round(
    paths: &FleetPaths,
    host: &dyn Host,
    wait: Duration,
) -> anyhow::Result<Option<(String, Outcome)>> {
    let first_node = first_node(paths)?;
    let poll = Request::Poll {
        wait_ms: u64::try_from(wait.as_millis()).unwrap_or(MAX_POLL_WAIT_MS),
    };
    let work = match exchange(paths, &first_node, &poll)? {
        Response::Idle => return Ok(None),
        Response::Work { work } => work,
        Response::Bundle { id, since_seconds } => {
            crate::node::send_bundle(paths, host, &first_node, &id, since_seconds)?;
            return Ok(Some((format!("support bundle {id}"), Outcome::Succeeded)));
        }
        Response::NotRegistered { reason } => return Err(NotRegistered(reason).into()),
        other => bail!(
            "the first node at {} answered a poll with: {}",
            first_node.address,
            refusal(&other)
        ),
    };
    let folder = work_folder(paths, &work.id);
    let (outcome, message) = match Recorded::load(&folder) {
        // Done before: the first node did not hear of it (it restarted, or the link was cut).
        Some(recorded) => (recorded.outcome, recorded.message),
        None => {
            if folder.join(STARTED).exists() {
                // An earlier agent started it and stopped: its run may still go on.
                if host.busy() {
                    return Ok(None);
                }
                if already_done(paths, host, &work, &folder) {
                    finish(paths, &work, &folder, Outcome::Succeeded, String::new())?;
                    return send(paths, host, &work, Outcome::Succeeded, String::new(), None);
                }
            }
            let started = SystemTime::now();
            // That the work was taken is said while it starts, not before: a rollout's serial
            // steps wait on nothing but the runs.
            let (outcome, message) = std::thread::scope(|scope| {
                scope.spawn(|| send(paths, host, &work, Outcome::Running, String::new(), None));
                match execute(paths, host, &work, &folder) {
                    Ok(true) => (Outcome::Succeeded, String::new()),
                    Ok(false) => (Outcome::Failed, failure(host, &work, &folder)),
                    Err(error) => (
                        Outcome::Failed,
                        berth_formats::report::chain(error.as_ref()),
                    ),
                }
            });
            finish(paths, &work, &folder, outcome, message.clone())?;
            // The run probed the add-on's health as it ended: its record stands for now.
            return send(paths, host, &work, outcome, message, Some(started));
        }
    };
    send(paths, host, &work, outcome, message, None)
}

fn send(
    paths: &FleetPaths,
    host: &dyn Host,
    work: &Work,
    outcome: Outcome,
    message: String,
    recorded_since: Option<SystemTime>,
) -> anyhow::Result<Option<(String, Outcome)>> {
    let first_node = first_node(paths)?;
    // "Running" says only that the work was taken: no report, so no probe, goes with it.
    let addons = if outcome == Outcome::Running {
        Vec::new()
    } else {
        local_addons(paths, host, recorded_since)?
    };
    let request = Request::Progress {
        work: work.id.clone(),
        outcome,
        message,
        addons,
    };
    match exchange(paths, &first_node, &request)? {
        Response::Accepted => Ok(Some((work.id.clone(), outcome))),
        Response::NotRegistered { reason } => Err(NotRegistered(reason).into()),
        other => bail!(
            "the first node at {} refused the progress of {}: {}",
            first_node.address,
            work.id,
            refusal(&other)
        ),
    }
}

const STARTED: &str = "started";
const RUN_LOG: &str = "run.log";
const BEFORE_SPEC: &str = "before.yaml";
const BEFORE: &str = "before.json";
const OUTCOME: &str = "outcome.json";

fn work_folder(paths: &FleetPaths, id: &str) -> PathBuf {
    paths.dir.join("work").join(id)
}

/// The add-on as it stood before a work: what a rollback of it goes back to.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Before {
    version: Option<String>,
    config_hash: Option<String>,
    /// The sha256 of its package: a rollback installs that package and no other.
    #[serde(default)]
    package_sha256: Option<Sha256Digest>,
}

impl Before {
    /// What the node ran before work `id`, as kept when it started.
    fn load(paths: &FleetPaths, id: &str) -> Option<Self> {
        let bytes = fs_err::read(work_folder(paths, id).join(BEFORE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// How a work ended on this node.
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    outcome: Outcome,
    message: String,
    at: String,
}

impl Recorded {
    fn load(folder: &Path) -> Option<Self> {
        let bytes = fs_err::read(folder.join(OUTCOME)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// Runs `berth upgrade` for the work; `Ok(false)` when the run failed (its output is in the
/// work's run log).
fn execute(
    paths: &FleetPaths,
    host: &dyn Host,
    work: &Work,
    folder: &Path,
) -> anyhow::Result<bool> {
    let last = host
        .last_run()?
        .context("this node has run no installer; install or join it before a rollout moves it")?;
    berth_formats::files::private_dir(folder)
        .with_context(|| format!("failed to create {}", folder.display()))?;
    // What the node ran before the work, kept once: a second start must not take the
    // work's own spec for it.
    let before_spec = folder.join(BEFORE_SPEC);
    if !before_spec.exists() {
        let facts = host.addon(&work.addon).unwrap_or_default();
        let before = Before {
            version: facts
                .current
                .as_ref()
                .map(|current| current.version.clone()),
            config_hash: applied_hashes(paths).get(&work.addon).cloned(),
            package_sha256: facts.current.map(|current| current.package),
        };
        write(&folder.join(BEFORE), &serde_json::to_vec_pretty(&before)?)?;
        let spec = fs_err::read(&last.spec)?;
        write(&before_spec, &spec)?;
    }
    write(&folder.join(STARTED), now().as_bytes())?;
    let path = folder.join("spec.yaml");
    let before_text = fs_err::read_to_string(&before_spec)?;
    let earlier;
    let (spec, pin, downgrade) = match &work.action {
        Action::Apply {
            version,
            config,
            package_sha256,
            allow_downgrade,
            ..
        } => {
            let pin = Pin {
                addon: &work.addon,
                version,
                sha256: *package_sha256,
            };
            let spec = with_addon(&before_text, &work.addon, version, config)?;
            (spec, pin, *allow_downgrade)
        }
        Action::Restore { work: earlier_work } => {
            berth_formats::name::check_plain("work id", earlier_work)?;
            let earlier_spec = work_folder(paths, earlier_work).join(BEFORE_SPEC);
            if !earlier_spec.exists() {
                bail!("this node has no record of work {earlier_work}, so nothing to go back to");
            }
            earlier = Before::load(paths, earlier_work).unwrap_or_default();
            let (Some(version), Some(sha256)) = (&earlier.version, earlier.package_sha256) else {
                bail!(
                    "this node ran no verified package of {} before work {earlier_work}, so there is nothing to go back to",
                    work.addon
                );
            };
            let pin = Pin {
                addon: &work.addon,
                version,
                sha256,
            };
            let spec = with_addon_as_in(
                &before_text,
                &fs_err::read_to_string(&earlier_spec)?,
                &work.addon,
            )?;
            (spec, pin, true)
        }
    };
    write(&path, spec.as_bytes())?;
    // The run installs the pinned package, and the packages the node runs for the rest.
    let lock_path = folder.join(berth_formats::lock::LOCK_FILE);
    let lock = host
        .lock(&path, &pin)
        .context("failed to pin the packages of the upgrade")?;
    write(&lock_path, &lock.to_bytes())?;
    let log = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(folder.join(RUN_LOG))?
        .into_parts()
        .0;
    // A node that joined runs its add-ons' join hooks, with the first node's parameters.
    let params = if last.joined {
        work.params.clone()
    } else {
        Vec::new()
    };
    host.upgrade(Upgrade {
        spec: &path,
        lock: &lock_path,
        dist: &last.dist,
        allow_downgrade: downgrade,
        params: &params,
        log,
    })
}

/// The spec `text` with `addon` at `version`, `config` over its fields.
fn with_addon(
    text: &str,
    addon: &str,
    version: &str,
    config: &Map<String, Value>,
) -> anyhow::Result<String> {
    let key = spec_key(addon);
    edit_spec(text, |spec| {
        // A rollout moves an add-on the node runs; it never adds one the node did not agree to.
        let fields = spec
            .get_mut(key)
            .with_context(|| {
                format!("this node's spec has no {addon} (spec.{key}); a rollout moves the add-ons a node runs and adds none")
            })?
            .as_object_mut()
            .with_context(|| format!("spec.{key} in the node's spec is not a mapping"))?;
        fields.extend(config.clone());
        fields.insert("version".into(), version.into());
        Ok(())
    })
}

/// The spec `text` with `addon`'s section as it is in `earlier`: only the add-on goes back,
/// whatever else changed on the node since stays.
fn with_addon_as_in(text: &str, earlier: &str, addon: &str) -> anyhow::Result<String> {
    let key = spec_key(addon);
    let mut section = None;
    edit_spec(earlier, |spec| {
        section = spec.get(key).cloned();
        Ok(())
    })?;
    edit_spec(text, |spec| {
        match section {
            Some(section) => spec.insert(key.to_string(), section),
            None => spec.remove(key),
        };
        Ok(())
    })
}

/// An Installer spec's text with its `spec` mapping changed by `edit`.
fn edit_spec(
    text: &str,
    edit: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    let mut value: Value = serde_norway::from_str(text).context("the node's spec does not read")?;
    let spec = value
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .context("the node's spec has no `spec` mapping")?;
    edit(spec)?;
    Ok(serde_norway::to_string(&value)?)
}

/// Whether a run of the work that an earlier agent started went through: the add-on is at the
/// version the work asked for, applied since the work started.
fn already_done(paths: &FleetPaths, host: &dyn Host, work: &Work, folder: &Path) -> bool {
    let wanted = match &work.action {
        Action::Apply { version, .. } => Some(version.clone()),
        Action::Restore { work: earlier } => {
            Before::load(paths, earlier).and_then(|before| before.version)
        }
    };
    let started = fs_err::read_to_string(folder.join(STARTED)).unwrap_or_default();
    let Some(facts) = host.addon(&work.addon) else {
        return false;
    };
    let succeeded = facts
        .progressing
        .as_ref()
        .is_some_and(|condition| condition.reason == "Succeeded");
    let since = |applied_at: &str| {
        let time = |text: &str| humantime::parse_rfc3339_weak(text.trim()).ok();
        matches!((time(applied_at), time(&started)), (Some(applied), Some(started)) if applied >= started)
    };
    succeeded
        && facts.current.is_some_and(|current| {
            Some(&current.version) == wanted.as_ref() && since(&current.applied_at)
        })
}

/// Records the outcome, and on success the configuration hash now applied.
fn finish(
    paths: &FleetPaths,
    work: &Work,
    folder: &Path,
    outcome: Outcome,
    message: String,
) -> anyhow::Result<()> {
    if outcome == Outcome::Succeeded {
        let hash = match &work.action {
            Action::Apply { config_hash, .. } => Some(config_hash.clone()),
            Action::Restore { work: earlier } => {
                Before::load(paths, earlier).and_then(|before| before.config_hash)
            }
        };
        set_applied_hash(paths, &work.addon, hash)?;
    }
    berth_formats::files::private_dir(folder)?;
    let recorded = Recorded {
        outcome,
        message,
        at: now(),
    };
    write(
        &folder.join(OUTCOME),
        &serde_json::to_vec_pretty(&recorded)?,
    )
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    berth_formats::files::write_atomically_with_mode(path, bytes, 0o600)
        .with_context(|| format!("failed to write {}", path.display()))
}

/// Why a run failed: the add-on's own record of it (the error, its causes and the end of the
/// hook's output) when the run got as far as the add-on, else the end of the run's output.
fn failure(host: &dyn Host, work: &Work, folder: &Path) -> String {
    let started = fs_err::read_to_string(folder.join(STARTED)).unwrap_or_default();
    let recorded = host
        .addon(&work.addon)
        .and_then(|facts| facts.progressing)
        .filter(|condition| {
            matches!(condition.reason.as_str(), "Failed" | "Interrupted")
                && condition.since.as_str() >= started.trim()
        });
    let message = match recorded {
        Some(condition) => condition.message,
        None => tail(&folder.join(RUN_LOG)),
    };
    let start = message.len().saturating_sub(MAX_MESSAGE);
    let start = (start..message.len())
        .find(|index| message.is_char_boundary(*index))
        .unwrap_or(message.len());
    message[start..].to_string()
}

/// The end of a run's output.
fn tail(path: &Path) -> String {
    let text = fs_err::read(path).unwrap_or_default();
    let start = text.len().saturating_sub(MAX_MESSAGE / 4);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_changes_one_addon_of_the_spec_and_keeps_the_rest() {
        let text = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: 1.0.0\n    port: 8080\n  hello:\n    version: 1.0.0\n";
        let config = Map::from_iter([("port".to_string(), Value::from(8081))]);
        let changed = with_addon(text, "demo", "2.0.0", &config).unwrap();
        let value: Value = serde_norway::from_str(&changed).unwrap();
        assert_eq!(value["spec"]["demo"]["version"], "2.0.0");
        assert_eq!(value["spec"]["demo"]["port"], 8081);
        assert_eq!(value["spec"]["hello"]["version"], "1.0.0");
        assert_eq!(value["kind"], "Installer");
        // A rollout never adds an add-on the node does not run.
        let error = with_addon(text, "banner", "1.0.0", &Map::new()).unwrap_err();
        assert!(
            error.to_string().contains("this node's spec has no banner"),
            "{error}"
        );
        // An add-on whose folder and spec key differ is found by its key.
        let manager = "spec:\n  certManager:\n    version: 1.0.0\n";
        let moved = with_addon(manager, "cert-manager", "1.9.1", &Map::new()).unwrap();
        let value: Value = serde_norway::from_str(&moved).unwrap();
        assert_eq!(value["spec"]["certManager"]["version"], "1.9.1");
        assert!(with_addon("spec: [1]\n", "demo", "1.0.0", &Map::new()).is_err());

        // A rollback puts demo back as it was, and keeps hello's later change.
        let later = with_addon(&changed, "hello", "2.0.0", &Map::new()).unwrap();
        let back: Value =
            serde_norway::from_str(&with_addon_as_in(&later, text, "demo").unwrap()).unwrap();
        assert_eq!(back["spec"]["demo"]["version"], "1.0.0");
        assert_eq!(back["spec"]["demo"]["port"], 8080);
        assert_eq!(back["spec"]["hello"]["version"], "2.0.0");
    }
}
