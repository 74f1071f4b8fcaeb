//! `berth reset`: takes a node back to before its install. Each installed add-on's
//! `<name>_reset` hook runs (the add-on applied last goes first), in one hook session with the
//! configuration the add-on was applied with, and the images Berth imported for it are removed
//! right after (while the runtime, which an earlier add-on may have installed, still runs). An
//! add-on whose first install failed part-way is reset too, with the configuration that
//! install used. Images the runtime held before Berth, or that a container still uses, stay.
//! Then Berth removes its folders (`var/lib/berth`, `var/log/berth`) and the `berth` link
//! install.sh made. `etc/berth/node.yaml`, which the user writes, stays.

use std::path::PathBuf;
use std::time::Duration;

use berth_formats::package_index::PackageIndex;
use serde_json::{Map, Value};

use crate::engine::{EngineError, Reporter, first_line};
use crate::hook_environment::HookEnvironment;
use crate::images::Runtime;
use crate::layout::Layout;
use crate::phase::hook_functions;
use crate::session::Session;
use crate::state::{AddonState, StateStore};
use crate::unpack::read_unpacked;

/// What `reset` did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetReport {
    /// The `<name>_reset` hooks that ran.
    pub hooks: Vec<String>,
    /// Image references removed from the container runtime.
    pub images: Vec<String>,
    /// Paths removed.
    pub removed: Vec<PathBuf>,
}

/// Runs the add-ons' reset hooks, then removes Berth's own files. A failing hook stops the
/// reset before anything is removed, so it can run again once the cause is fixed.
pub fn reset(
    layout: &Layout,
    hook_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<ResetReport, EngineError> {
    let mut report = ResetReport::default();
    let (records, damaged) = StateStore::new(layout.state_dir()).load_all()?;
    // A damaged record's add-on cannot be reset (its version and configuration are unknown):
    // stop before anything is removed, so nothing of it is lost.
    if !damaged.is_empty() {
        return Err(EngineError::DamagedRecords {
            records: damaged
                .iter()
                .map(|damage| first_line(&damage.to_string()).to_string())
                .collect(),
        });
    }
    // Installed add-ons, and those whose first install failed part-way: its hooks may have
    // started something.
    let mut installed: Vec<(AddonState, String, Map<String, Value>)> = records
        .into_iter()
        .filter_map(|state| {
            let (version, config) = match (&state.current, &state.attempt) {
                (Some(current), _) => (current.target.version.clone(), current.config.clone()),
                (None, Some(attempt)) => (attempt.target.version.clone(), attempt.config.clone()),
                (None, None) => return None,
            };
            Some((state, version, config))
        })
        .collect();
    // The add-on applied last goes first; one never applied (a failed first install) was the
    // last to be worked on.
    installed.sort_by_key(|(state, _, _)| {
        let applied = state
            .current
            .as_ref()
            .map(|current| current.applied_at.as_str());
        std::cmp::Reverse((
            state.current.is_none(),
            applied.and_then(|time| humantime::parse_rfc3339(time).ok()),
        ))
    });
    crate::session::end_orphans(&layout.work_dir());
    run_reset_hooks(layout, &installed, hook_timeout, reporter, &mut report)?;

    // The link install.sh makes on a real node, only if it still points at Berth's binary.
    let link = layout.root().join("usr/local/bin/berth");
    if fs_err::read_link(&link).is_ok_and(|target| target.starts_with(layout.install_dir())) {
        remove(&link, &mut report)?;
    }
    for dir in [layout.install_dir(), layout.log_dir()] {
        remove(&dir, &mut report)?;
    }
    for step in &report.removed {
        reporter.step(&format!("removed {}", step.display()));
    }
    Ok(report)
}

/// The index of every version of `name` unpacked under `addons/<name>/<version>/` (the current
/// one, the one before, any rolled back from).
fn unpacked_indices(layout: &Layout, name: &str) -> Vec<PackageIndex> {
    let versions = layout.install_dir().join("addons").join(name);
    fs_err::read_dir(&versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|version| read_unpacked(&version.path()).ok())
        .collect()
}

fn run_reset_hooks(
    layout: &Layout,
    installed: &[(AddonState, String, Map<String, Value>)],
    hook_timeout: Duration,
    reporter: &dyn Reporter,
    report: &mut ResetReport,
) -> Result<(), EngineError> {
    let mut environment = HookEnvironment::for_node(layout);
    let mut scripts = Vec::new();
    for (state, version, config) in installed {
        let script = layout.addon_dir(&state.name, version).join("install.sh");
        scripts.push((state, version, script.exists().then_some(script)));
        environment.addon(&state.name, version, config)?;
    }
    let environment = environment.into_vec();
    let hook_error = |name: &str, version: &str, hook: &str| {
        let (name, version, hook) = (name.to_string(), version.to_string(), hook.to_string());
        move |source| EngineError::Hook {
            name,
            version,
            hook,
            source,
        }
    };
    // A session only when some add-on has hooks to run.
    let mut session = None;
    if scripts.iter().any(|(_, _, script)| script.is_some()) {
        crate::helpers::install(layout).map_err(|source| EngineError::Io {
            path: layout.helpers_dir(),
            source,
        })?;
        let work = layout.work_dir().join("reset");
        let mut started = Session::start(&work, &environment, Box::new(std::io::sink()))
            .map_err(hook_error("berth", "", "bash"))?;
        started
            .source(&crate::helpers::entry_point(layout), hook_timeout)
            .map_err(hook_error("berth", "", "the helper library"))?;
        session = Some(started);
    }
    for (state, version, script) in &scripts {
        let name = &state.name;
        if let (Some(script), Some(session)) = (script, session.as_mut()) {
            let functions = hook_functions(name, "_reset");
            let defined = session
                .source_each(&[(Some(script.as_path()), functions.clone())], hook_timeout)
                .map_err(|(_, error)| error)
                .map_err(hook_error(name, version, "install.sh"))?
                .remove(0);
            if let Some(hook) = functions.into_iter().find(|f| defined.contains(f)) {
                reporter.step(&format!("{name} {version}: {hook}"));
                session
                    .hook(&hook, hook_timeout)
                    .map_err(hook_error(name, version, &hook))?;
                report.hooks.push(hook);
            }
        }
        // Its images go next, while the runtime still runs: an add-on applied before this one
        // (containerd) may stop it in its own reset hook.
        remove_images(layout, state, report)?;
    }
    match session {
        Some(session) => session
            .finish()
            .map_err(hook_error("berth", "", "the hook session")),
        None => Ok(()),
    }
}

/// Removes the images Berth imported for the add-on, of every version unpacked on this node;
/// an image the runtime held before Berth came is left in place.
fn remove_images(
    layout: &Layout,
    state: &AddonState,
    report: &mut ResetReport,
) -> Result<(), EngineError> {
    let mut indices = unpacked_indices(layout, &state.name);
    for index in &mut indices {
        index
            .images
            .retain(|image| state.imported_images.contains(&image.reference));
    }
    if indices.iter().all(|index| index.images.is_empty()) {
        return Ok(());
    }
    let Some(runtime) = Runtime::detect() else {
        return Ok(());
    };
    for index in &indices {
        let removed = runtime
            .remove(&index.images)
            .map_err(|source| EngineError::Images {
                name: index.name.clone(),
                version: index.version.clone(),
                source,
            })?;
        report.images.extend(removed);
    }
    Ok(())
}

fn remove(path: &std::path::Path, report: &mut ResetReport) -> Result<(), EngineError> {
    let metadata = match fs_err::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(EngineError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let result = if metadata.is_dir() {
        fs_err::remove_dir_all(path)
    } else {
        fs_err::remove_file(path)
    };
    result.map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    report.removed.push(path.to_path_buf());
    Ok(())
}
