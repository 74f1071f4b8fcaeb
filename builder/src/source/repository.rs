//! A repository laid out as kURL's is: add-ons under `addons/<name>/<version>/`, and the
//! packages kURL's own scripts install under `packages/`: `packages/kubernetes/<version>/`
//! (with its `conformance/` images), and `packages/host/<name>/`. Each folder with a Manifest
//! is one package, named as kURL's CI names it (`flannel-0.28.7.tar.gz`,
//! `kubernetes-1.30.8.tar.gz`, `kubernetes-conformance-1.30.8.tar.gz`, `host-openssl.tar.gz`).
//! `addons/<name>/template/` holds kURL's generators of new versions, not a package.

use std::path::{Path, PathBuf};

use crate::source::error::AddonError;

/// kURL's folder of version generators inside an add-on's folder.
pub const TEMPLATE_FOLDER: &str = "template";

/// What a package folder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageKind {
    /// `addons/<name>/<version>/`: an add-on a spec can ask for.
    Addon,
    /// `packages/kubernetes/<version>/`.
    Kubernetes,
    /// `packages/kubernetes/<version>/conformance/`.
    KubernetesConformance,
    /// `packages/host/<name>/`: host packages kURL installs for itself (openssl, fio).
    Host,
}

impl PackageKind {
    /// Whether a spec can ask for it, so that versions.json lists it: an add-on, or
    /// Kubernetes, which every kURL spec names (its package carries Berth's hooks).
    pub fn is_addon(self) -> bool {
        matches!(self, PackageKind::Addon | PackageKind::Kubernetes)
    }
}

/// Where a package folder sits, and the name and version its package takes.
#[derive(Debug, Clone)]
pub struct AddonLocation {
    pub kind: PackageKind,
    /// `flannel`, `kubernetes`, `kubernetes-conformance`, or `host` for a host package.
    pub name: String,
    /// The add-on's or Kubernetes' version, or the host package's name, so that the package
    /// file is named `host-<name>.tar.gz` as kURL names it.
    pub version: String,
    /// The folder itself, made absolute.
    pub directory: PathBuf,
    /// The folder holding `addons/` or `packages/`: the Manifest's local paths resolve
    /// against it.
    pub repository_root: PathBuf,
}

/// Reads a package folder's kind, name, version and repository root from its path.
pub fn locate(directory: &Path) -> Result<AddonLocation, AddonError> {
    let directory = std::path::absolute(directory).map_err(|source| AddonError::Io {
        path: directory.to_path_buf(),
        source,
    })?;
    let not_an_addon = || AddonError::NotAnAddon {
        path: directory.clone(),
    };
    // The folder's own name first, then each folder above it.
    let names: Vec<&str> = directory
        .ancestors()
        .take(4)
        .map(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("")
        })
        .collect();
    let at = |index: usize| names.get(index).copied().unwrap_or("");
    let root_above = |levels: usize| {
        directory
            .ancestors()
            .nth(levels)
            .map(Path::to_path_buf)
            .ok_or_else(not_an_addon)
    };
    let (kind, name, version, levels) = match (at(0), at(1), at(2), at(3)) {
        ("conformance", version, "kubernetes", "packages") if !version.is_empty() => (
            PackageKind::KubernetesConformance,
            "kubernetes-conformance",
            version,
            4,
        ),
        (version, "kubernetes", "packages", _) if !version.is_empty() => {
            (PackageKind::Kubernetes, "kubernetes", version, 3)
        }
        (name, "host", "packages", _) if !name.is_empty() => (PackageKind::Host, "host", name, 3),
        (version, name, "addons", _)
            if !version.is_empty() && !name.is_empty() && version != TEMPLATE_FOLDER =>
        {
            (PackageKind::Addon, name, version, 3)
        }
        _ => return Err(not_an_addon()),
    };
    Ok(AddonLocation {
        kind,
        name: name.to_string(),
        version: version.to_string(),
        repository_root: root_above(levels)?,
        directory: directory.clone(),
    })
}

/// Whether `path` is a folder no package lives below: an add-on's `template/`.
pub fn is_template(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == TEMPLATE_FOLDER)
        && path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|name| name == "addons")
}

/// Where packages are looked for under `path`: a repository's `addons/` and `packages/`
/// folders (what else it holds, kURL's `scripts/` among them, is not packages), or `path`
/// itself.
pub fn package_roots(path: &Path) -> Vec<PathBuf> {
    let roots: Vec<PathBuf> = ["addons", "packages"]
        .iter()
        .map(|folder| path.join(folder))
        .filter(|folder| folder.is_dir())
        .collect();
    if roots.is_empty() {
        vec![path.to_path_buf()]
    } else {
        roots
    }
}

/// The package folders (a `Manifest` in a place [`locate`] knows) under `path`, sorted: the
/// repository (holding `addons/` and `packages/`), its `addons/` or `packages/` folder, or one
/// add-on's folder of versions.
pub fn discover(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for root in package_roots(path) {
        let mut walk = walkdir::WalkDir::new(&root)
            .max_depth(4)
            .sort_by_file_name()
            .into_iter();
        while let Some(entry) = walk.next() {
            let entry = entry?;
            if !entry.file_type().is_dir() {
                continue;
            }
            if is_template(entry.path()) {
                walk.skip_current_dir();
                continue;
            }
            if entry.path().join("Manifest").is_file() && locate(entry.path()).is_ok() {
                found.push(entry.path().to_path_buf());
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kurl_folder_names_its_package_as_kurl_does() {
        for (path, kind, name, version, root) in [
            (
                "/r/addons/flannel/0.28.7",
                PackageKind::Addon,
                "flannel",
                "0.28.7",
                "/r",
            ),
            (
                "/r/packages/kubernetes/1.30.8",
                PackageKind::Kubernetes,
                "kubernetes",
                "1.30.8",
                "/r",
            ),
            (
                "/r/packages/kubernetes/1.30.8/conformance",
                PackageKind::KubernetesConformance,
                "kubernetes-conformance",
                "1.30.8",
                "/r",
            ),
            (
                "/r/packages/host/openssl",
                PackageKind::Host,
                "host",
                "openssl",
                "/r",
            ),
        ] {
            let location = locate(Path::new(path)).unwrap();
            assert_eq!(location.kind, kind, "{path}");
            assert_eq!(location.name, name, "{path}");
            assert_eq!(location.version, version, "{path}");
            assert_eq!(location.repository_root, Path::new(root), "{path}");
        }
        for path in [
            "/r/addons/containerd/template",
            "/r/addons/containerd",
            "/r/scripts",
            "/r/packages/kubernetes",
            "/",
        ] {
            assert!(locate(Path::new(path)).is_err(), "{path}");
        }
        assert!(is_template(Path::new("/r/addons/containerd/template")));
        assert!(!is_template(Path::new("/r/addons/template")));
    }
}
