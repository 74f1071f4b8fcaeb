//! Every add-on version of a repository, packaged in parallel within a bound; an add-on whose
//! package already records the same inputs digest is kept as it is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::package::{self, BuildContext, PackageError, PackageOutcome, PackageSettings};

/// One add-on's result.
#[derive(Debug)]
pub struct BuildResult {
    pub directory: PathBuf,
    pub elapsed: Duration,
    pub outcome: Result<PackageOutcome, PackageError>,
}

/// The add-on folders (`<name>/<version>/` holding a `Manifest`) under `addons`, sorted.
/// `addons` may be the `addons/` folder itself or the repository holding it.
pub fn discover(addons: &Path) -> std::io::Result<Vec<PathBuf>> {
    let root = if addons.join("addons").is_dir() {
        addons.join("addons")
    } else {
        addons.to_path_buf()
    };
    let mut found = Vec::new();
    for name in fs_err::read_dir(&root)? {
        let name = name?.path();
        if !name.is_dir() {
            continue;
        }
        for version in fs_err::read_dir(&name)? {
            let version = version?.path();
            if version.join("Manifest").is_file() {
                found.push(version);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Packages every folder, `jobs` at a time, and returns the results in folder order.
pub async fn build_all(
    context: &BuildContext,
    directories: Vec<PathBuf>,
    settings: &PackageSettings,
    jobs: usize,
) -> Vec<BuildResult> {
    futures::stream::iter(directories)
        .map(|directory| async move {
            let started = Instant::now();
            let outcome = package::package(context, &directory, settings).await;
            BuildResult {
                directory,
                elapsed: started.elapsed(),
                outcome,
            }
        })
        .buffered(jobs.max(1))
        .collect()
        .await
}
