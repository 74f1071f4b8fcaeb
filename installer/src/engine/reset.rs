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

use crate::dist::unpack::read_unpacked;
use crate::engine::node_hooks::{installed_addons, run_node_hooks};
use crate::engine::{EngineError, Reporter};
use crate::images::Runtime;
use crate::node::layout::Layout;
use crate::node::state::AddonState;

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
    let installed = installed_addons(layout)?;
    crate::hooks::session::end_orphans(&layout.work_dir());
    // The Addon resources go while the cluster is there: the add-ons' reset hooks may take it.
    if let Err(error) = crate::kubernetes::addon_resource::remove(layout) {
        reporter.step(&format!(
            "warning: the Addon resources were not removed: {error}"
        ));
    }
    report.hooks = run_node_hooks(
        layout,
        &installed,
        "_reset",
        &|_| Vec::new(),
        hook_timeout,
        reporter,
        // Its images go next, while the runtime still runs: an add-on applied before this
        // one (containerd) may stop it in its own reset hook.
        &mut |state| remove_images(layout, state, &mut report.images),
    )?;

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

/// Removes the images Berth imported for the add-on, of every version unpacked on this node;
/// an image the runtime held before Berth came is left in place.
fn remove_images(
    layout: &Layout,
    state: &AddonState,
    removed_images: &mut Vec<String>,
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
        removed_images.extend(removed);
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
