//! Hooks that run on a node outside an install, for every add-on installed on it (`berth
//! reset`'s `<name>_reset`, `berth remove-node`'s `<name>_remove_node`): the add-ons in the
//! order they go back (the one applied last first), each with the configuration it was
//! applied with, in one hook session.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::engine::{EngineError, Reporter, first_line};
use crate::hooks::environment::HookEnvironment;
use crate::hooks::session::Session;
use crate::node::layout::Layout;
use crate::node::state::{AddonState, StateStore};
use crate::phase::hook_functions;

/// An add-on Berth installed on this node: its record, version and configuration.
pub(crate) type Installed = (AddonState, String, Map<String, Value>);

/// The add-ons installed on this node, and those whose first install failed part-way (its
/// hooks may have started something), the one applied last first. A damaged record stops
/// it: its add-on's version and configuration are unknown.
pub(crate) fn installed_addons(layout: &Layout) -> Result<Vec<Installed>, EngineError> {
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
    let mut installed: Vec<Installed> = records
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
    Ok(installed)
}

/// Runs each add-on's `<name>SUFFIX` hook where its script defines one, in `installed`'s
/// order, in one hook session with the configuration each was applied with, and
/// `variables_of(name)` exported before each add-on's hook; `after_each` follows each add-on,
/// hook or not. Returns the hooks that ran.
pub(crate) fn run_node_hooks(
    layout: &Layout,
    installed: &[Installed],
    suffix: &str,
    variables_of: &dyn Fn(&str) -> Vec<(String, String)>,
    hook_timeout: Duration,
    reporter: &dyn Reporter,
    after_each: &mut dyn FnMut(&AddonState) -> Result<(), EngineError>,
) -> Result<Vec<String>, EngineError> {
    let mut ran = Vec::new();
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
        crate::hooks::helpers::install(layout).map_err(|source| EngineError::Io {
            path: layout.helpers_dir(),
            source,
        })?;
        let work = layout.work_dir().join(suffix.trim_start_matches('_'));
        let mut started = Session::start(&work, &environment, Box::new(std::io::sink()))
            .map_err(hook_error("berth", "", "bash"))?;
        started
            .source(&crate::hooks::helpers::entry_point(layout), hook_timeout)
            .map_err(hook_error("berth", "", "the helper library"))?;
        session = Some(started);
    }
    for (state, version, script) in &scripts {
        let name = &state.name;
        if let (Some(script), Some(session)) = (script, session.as_mut()) {
            let functions = hook_functions(name, suffix);
            let defined = session
                .source_each(&[(Some(script.as_path()), functions.clone())], hook_timeout)
                .map_err(|(_, error)| error)
                .map_err(hook_error(name, version, "install.sh"))?
                .remove(0);
            if let Some(hook) = functions.into_iter().find(|f| defined.contains(f)) {
                reporter.step(&format!("{name} {version}: {hook}"));
                session
                    .export_then(&variables_of(name), &hook, hook_timeout)
                    .map_err(hook_error(name, version, &hook))?;
                ran.push(hook);
            }
        }
        after_each(state)?;
    }
    if let Some(session) = session {
        session
            .finish()
            .map_err(hook_error("berth", "", "the hook session"))?;
    }
    Ok(ran)
}
