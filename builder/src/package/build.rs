//! Every add-on version of a repository, packaged in parallel within a bound; an add-on whose
//! package already records the same inputs digest is kept as it is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;

use berth_formats::versions::{OrderRule, VERSIONS_FILE, VersionsError, VersionsFile};

use crate::package::{self, BuildContext, PackageError, PackageOutcome, PackageSettings};
use crate::source::repository;

/// One add-on's result.
#[derive(Debug)]
pub struct BuildResult {
    pub directory: PathBuf,
    pub elapsed: Duration,
    pub outcome: Result<PackageOutcome, PackageError>,
}

/// The `addons/` folder, given it or the repository holding it.
fn addons_root(addons: &Path) -> PathBuf {
    if addons.join("addons").is_dir() {
        addons.join("addons")
    } else {
        addons.to_path_buf()
    }
}

/// The repository holding `addons/`, where its versions.json and kURL's lists are (empty for
/// a relative `addons`: the current folder).
fn repository_root(addons: &Path) -> Option<PathBuf> {
    addons_root(addons).parent().map(Path::to_path_buf)
}

/// Writes `<out_dir>/versions.json` for the packages built, in the install order (and with the
/// `kubernetesVersion` ranges) of the repository's own `versions.json` when it has one.
pub fn write_versions(
    addons: &Path,
    out_dir: &Path,
    results: &[BuildResult],
) -> Result<PathBuf, WriteVersionsError> {
    let repository_file = repository_root(addons)
        .map(|repository| repository.join(VERSIONS_FILE))
        .filter(|path| path.is_file());
    let existing = repository_file
        .as_deref()
        .map(VersionsFile::load)
        .transpose()?;
    let built: Vec<&PackageOutcome> = results
        .iter()
        .filter_map(|result| result.outcome.as_ref().ok())
        .filter(|outcome| outcome.kind.is_addon())
        .collect();
    let found: Vec<(String, String)> = built
        .iter()
        .map(|outcome| (outcome.name.clone(), outcome.version.clone()))
        .collect();
    let path = out_dir.join(VERSIONS_FILE);
    let lists = kurl_lists(addons)?;
    let (mut versions, _) = VersionsFile::generate_ordered(existing.as_ref(), &found, &lists);
    for outcome in built {
        if let Some(entry) = versions.entry_mut(&outcome.name, &outcome.version) {
            entry.fields.clone_from(&outcome.fields);
            entry.compression = outcome.compression;
        }
    }
    let bytes = versions.to_bytes();
    fs_err::write(&path, bytes).map_err(|source| WriteVersionsError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The repository's `versions.json` (its path, and what it holds now, if it exists) and the
/// one its add-on folders call for: every `<name>/<version>/` with a Manifest, newest first,
/// in the install order and with the `kubernetesVersion` ranges the file already gives.
pub fn repository_versions(addons: &Path) -> Result<RepositoryVersions, WriteVersionsError> {
    let root = addons_root(addons);
    let path = repository_root(addons).map_or_else(
        || PathBuf::from(VERSIONS_FILE),
        |repository| repository.join(VERSIONS_FILE),
    );
    let existing = if path.is_file() {
        Some(VersionsFile::load(&path)?)
    } else {
        None
    };
    let folders = repository::discover(addons).map_err(|source| WriteVersionsError::Discover {
        path: root.clone(),
        source,
    })?;
    let found: Vec<(String, String)> = folders
        .iter()
        .filter_map(|folder| repository::locate(folder).ok())
        .filter(|location| location.kind.is_addon())
        .map(|location| (location.name, location.version))
        .collect();
    let (generated, rules) =
        VersionsFile::generate_ordered(existing.as_ref(), &found, &kurl_lists(addons)?);
    Ok(RepositoryVersions {
        path,
        existing,
        generated,
        rules,
    })
}

/// What [`repository_versions`] finds.
pub struct RepositoryVersions {
    /// Where the repository keeps its versions.json.
    pub path: PathBuf,
    /// What it holds now, if it exists.
    pub existing: Option<VersionsFile>,
    /// What its add-on folders call for.
    pub generated: VersionsFile,
    /// How each add-on's versions were ordered, which says what `latest` is.
    pub rules: Vec<(String, OrderRule)>,
}

/// kURL's version lists of the repository holding `addons` (`web/src/installers/versions.js`),
/// by add-on folder: kURL keys some by spec key (`certManager`).
fn kurl_lists(
    addons: &Path,
) -> Result<std::collections::BTreeMap<String, Vec<String>>, WriteVersionsError> {
    let Some(repository) = repository_root(addons) else {
        return Ok(Default::default());
    };
    Ok(crate::source::kurl_version_lists::read(&repository)?
        .into_iter()
        .map(|(key, list)| (berth_formats::spec::addon_folder(&key).to_string(), list))
        .collect())
}

/// Puts what each add-on folder declares in its `fields.yaml` on its version's entry, for a
/// `versions.json` made without [`write_versions`] (which takes them from the build).
pub fn attach_fields(
    versions: &mut VersionsFile,
    folders: &[&Path],
) -> Result<(), WriteVersionsError> {
    for folder in folders {
        let Ok(location) = repository::locate(folder) else {
            continue;
        };
        let Some(declared) = crate::source::addon::read_fields(folder)? else {
            continue;
        };
        if let Some(entry) = versions.entry_mut(&location.name, &location.version) {
            entry.fields = Some(declared);
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum WriteVersionsError {
    #[error(transparent)]
    Fields(#[from] crate::source::error::AddonError),
    #[error("failed to list the add-ons in {path}")]
    Discover {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the repository's versions.json is refused")]
    Read(#[from] VersionsError),
    #[error(transparent)]
    KurlLists(#[from] crate::source::kurl_version_lists::ListsError),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
