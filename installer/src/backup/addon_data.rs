//! Add-ons' own data in a backup, for what lives outside etcd (a registry's images on the
//! host, a database's files). An add-on opts in with a hook pair in its `install.sh`, as it
//! does for `<name>_reset`:
//! - `<name>_backup` runs during `berth backup` with `BERTH_BACKUP_DIR`, an empty folder of its
//!   own (root's alone); what it leaves there is backed up as `addons/<name>/…`, each file
//!   with its digest and mode. None is required: an add-on without the hook has no data.
//! - `<name>_restore` runs at the end of `berth restore`, once the installer is installed
//!   again, with `BERTH_RESTORE_DIR` holding what its backup hook wrote, every file checked.
//!
//! Both run with the configuration the add-on was applied with, in one hook session, as reset's
//! hooks do; a failing hook stops the backup (nothing is written) or the restore (run it again
//! to continue: the hook must be safe to run twice).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_formats::backup::{ADDONS_DIR, BackedUpFile, Part};

use crate::engine::node_hooks::{installed_addons, run_node_hooks};
use crate::engine::{EngineError, Reporter};
use crate::node::layout::Layout;

pub const BACKUP_DIR_VARIABLE: &str = "BERTH_BACKUP_DIR";
pub const RESTORE_DIR_VARIABLE: &str = "BERTH_RESTORE_DIR";

/// Runs each installed add-on's backup hook into a folder of its own under `scratch` (private,
/// on the backup's disk), and returns the files they wrote, named `addons/<name>/…`.
pub fn back_up(
    layout: &Layout,
    scratch: &Path,
    hook_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<Vec<(BackedUpFile, PathBuf)>, super::BackupError> {
    let installed = installed_addons(layout).map_err(hook_failed)?;
    let folders = scratch.join(ADDONS_DIR);
    let folder_of = |name: &str| folders.join(name);
    for (state, _, _) in &installed {
        let folder = folder_of(&state.name);
        berth_formats::files::private_dir(&folder).map_err(|source| super::BackupError::Write {
            path: folder.clone(),
            source,
        })?;
    }
    let variables = |name: &str| {
        vec![(
            BACKUP_DIR_VARIABLE.to_string(),
            folder_of(name).display().to_string(),
        )]
    };
    run_node_hooks(
        layout,
        &installed,
        "_backup",
        &variables,
        hook_timeout,
        reporter,
        &mut |_| Ok(()),
    )
    .map_err(hook_failed)?;
    super::collect(scratch, &[(Part::Addon, ADDONS_DIR)])
}

fn hook_failed(error: EngineError) -> super::BackupError {
    super::BackupError::AddonData(error.to_string())
}

/// The folder a restore keeps `name`'s data in until its restore hook has run.
pub fn restore_folder(layout: &Layout, name: &str) -> PathBuf {
    super::restore::restore_dir(layout)
        .join(ADDONS_DIR)
        .join(name)
}

/// Runs the restore hook of each add-on whose data `with_data` names, now installed again;
/// says which data nothing restores (the add-on is not installed, or defines no hook).
pub fn restore(
    layout: &Layout,
    with_data: &BTreeSet<&str>,
    hook_timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<Vec<String>, EngineError> {
    let installed: Vec<_> = installed_addons(layout)?
        .into_iter()
        .filter(|(state, _, _)| with_data.contains(state.name.as_str()))
        .collect();
    for name in with_data {
        if !installed.iter().any(|(state, _, _)| state.name == *name) {
            reporter.step(&format!(
                "warning: the backup holds data of {name}, which the installer does not install here; it is not restored"
            ));
        }
    }
    let variables = |name: &str| {
        vec![(
            RESTORE_DIR_VARIABLE.to_string(),
            restore_folder(layout, name).display().to_string(),
        )]
    };
    let ran = run_node_hooks(
        layout,
        &installed,
        "_restore",
        &variables,
        hook_timeout,
        reporter,
        &mut |_| Ok(()),
    )?;
    for (state, _, _) in &installed {
        let hooks = crate::phase::hook_functions(&state.name, "_restore");
        if !hooks.iter().any(|hook| ran.contains(hook)) {
            reporter.step(&format!(
                "warning: the backup holds data of {}, whose script defines no {}; it is not restored",
                state.name, hooks[0]
            ));
        }
    }
    Ok(ran)
}
