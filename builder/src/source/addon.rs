//! An add-on folder (`<repository>/addons/<name>/<version>/`) as the builder reads it: its
//! Manifest, its files, the local files the Manifest points to, and the digest of all of it.

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::manifest::{Manifest, ManifestErrors, ReadError};
use berth_formats::package_index::SCHEMA_VERSION;
use serde::Serialize;

use crate::source::error::AddonError;
use crate::source::repository::{AddonLocation, PackageKind};

/// One file of the add-on folder.
#[derive(Debug, Clone, Serialize)]
pub struct AddonFile {
    /// `/`-separated path relative to the add-on folder.
    pub relative: String,
    #[serde(skip)]
    pub path: PathBuf,
    pub digest: Sha256Digest,
    pub size: u64,
    pub executable: bool,
}

/// A local file the Manifest reads (asset path, image archive, Dockerfile), by line.
#[derive(Debug, Clone, Serialize)]
pub struct LocalInput {
    pub line: usize,
    #[serde(skip)]
    pub path: PathBuf,
    pub digest: Sha256Digest,
    #[serde(skip)]
    pub size: u64,
}

/// Everything the builder reads from the add-ons repository for one add-on.
#[derive(Debug, Clone)]
pub struct AddonSource {
    pub name: String,
    pub version: String,
    /// An add-on, or one of kURL's `packages/` folders (which `versions.json` does not list).
    pub kind: PackageKind,
    /// What its `fields.yaml` declares, when it has one.
    pub fields: Option<Vec<berth_formats::fields::FieldDeclaration>>,
    pub directory: PathBuf,
    /// The folder holding `addons/`: image archives and Dockerfiles resolve against it.
    pub repository_root: PathBuf,
    pub manifest: Manifest,
    pub files: Vec<AddonFile>,
    pub local_inputs: Vec<LocalInput>,
    /// Berth's own hooks, packaged as the folder's `install.sh` where kURL's folder has none
    /// (`packages/kubernetes/<version>/`, which kURL's own scripts install).
    pub builtin_hooks: Option<&'static str>,
    /// Berth's own health file, packaged as the folder's `health.yaml` where it has none.
    pub builtin_health: Option<&'static str>,
}

/// Berth's hooks for Kubernetes from kURL's `packages/kubernetes/<version>/`.
pub const KUBERNETES_HOOKS: &str = include_str!("../../hooks/kubernetes.sh");

/// What Berth probes of Kubernetes from kURL's `packages/kubernetes/<version>/`.
pub const KUBERNETES_HEALTH: &str = include_str!("../../hooks/kubernetes-health.yaml");

impl AddonSource {
    /// Reads the add-on folder at `directory`: names from its path, the Manifest (every local
    /// path checked), and a digest of every file.
    pub fn load(directory: &Path) -> Result<AddonSource, AddonError> {
        let AddonLocation {
            kind,
            name,
            version,
            directory,
            repository_root,
        } = crate::source::repository::locate(directory)?;
        let manifest_path = directory.join("Manifest");
        if !manifest_path.is_file() {
            return Err(AddonError::NoManifest { path: directory });
        }
        let manifest = Manifest::read(&manifest_path).map_err(|error| match error {
            ReadError::Io(source) => AddonError::Io {
                path: manifest_path.clone(),
                source,
            },
            ReadError::Invalid(errors) => AddonError::Manifest(errors),
        })?;
        manifest.check_paths(&repository_root)?;
        // A declaration or a health file that does not read is refused here, not on the nodes.
        let fields = read_fields(&directory)?;
        check_health(&directory)?;

        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(&directory).sort_by_file_name() {
            let entry = entry.map_err(|error| AddonError::Io {
                path: error.path().unwrap_or(&directory).to_path_buf(),
                source: error.into(),
            })?;
            if !entry.file_type().is_file() {
                continue;
            }
            let path = entry.path().to_path_buf();
            let relative = path
                .strip_prefix(&directory)
                .expect("walked below the add-on folder")
                .to_string_lossy()
                .replace('\\', "/");
            files.push(hash_file(&path, relative)?);
        }

        let mut local_inputs = Vec::new();
        for entry in &manifest.entries {
            if let Some(resolved) = manifest.local_path(entry, &repository_root) {
                let path = resolved.map_err(|error| ManifestErrors(vec![error]))?;
                let file = hash_file(&path, String::new())?;
                local_inputs.push(LocalInput {
                    line: entry.line,
                    path,
                    digest: file.digest,
                    size: file.size,
                });
            }
        }
        let builtin_hooks = (kind == PackageKind::Kubernetes
            && !files.iter().any(|file| file.relative == "install.sh"))
        .then_some(KUBERNETES_HOOKS);
        let builtin_health = (kind == PackageKind::Kubernetes
            && !files
                .iter()
                .any(|file| file.relative == berth_formats::health::HEALTH_FILE))
        .then_some(KUBERNETES_HEALTH);
        Ok(AddonSource {
            builtin_hooks,
            builtin_health,
            name,
            version,
            kind,
            fields,
            repository_root,
            manifest,
            files,
            local_inputs,
            directory,
        })
    }

    /// The resolved local file for the Manifest entry on `line`.
    pub fn local_input(&self, line: usize) -> Option<&LocalInput> {
        self.local_inputs.iter().find(|input| input.line == line)
    }

    /// Digest of everything the package is built from: the package schema, the target
    /// architecture, every file of the add-on folder (the Manifest among them) and every local
    /// file the Manifest reads. Registry images and URL assets count by their Manifest text;
    /// pin them by digest for packages that change only when their text does. A compression
    /// level other than its format's default counts too: the package's bytes follow it, so a
    /// build at another level is not the package already there. (The format names the file.)
    pub fn inputs_digest(
        &self,
        arch: &str,
        sbom: bool,
        compression: berth_formats::compression::Setting,
    ) -> Sha256Digest {
        #[derive(Serialize)]
        struct Inputs<'a> {
            schema: u32,
            /// What the builder adds beyond the inputs: 2 since a package carries its BOM, 1
            /// for one built without.
            layout: u32,
            arch: &'a str,
            files: &'a [AddonFile],
            local_inputs: &'a [LocalInput],
            #[serde(skip_serializing_if = "Option::is_none")]
            builtin_hooks: Option<Sha256Digest>,
            #[serde(skip_serializing_if = "Option::is_none")]
            builtin_health: Option<Sha256Digest>,
            #[serde(skip_serializing_if = "Option::is_none")]
            compression_level: Option<u32>,
        }
        let inputs = Inputs {
            schema: SCHEMA_VERSION,
            layout: if sbom { 2 } else { 1 },
            arch,
            files: &self.files,
            local_inputs: &self.local_inputs,
            builtin_hooks: self
                .builtin_hooks
                .map(|hooks| Sha256Digest::of(hooks.as_bytes())),
            builtin_health: self
                .builtin_health
                .map(|health| Sha256Digest::of(health.as_bytes())),
            compression_level: (compression.level != compression.format.default_level())
                .then_some(compression.level),
        };
        Sha256Digest::of(&serde_json::to_vec(&inputs).expect("inputs serialize"))
    }
}

/// The add-on folder's declaration of its spec fields (`fields.yaml`), checked, if it has one.
pub fn read_fields(
    directory: &Path,
) -> Result<Option<Vec<berth_formats::fields::FieldDeclaration>>, AddonError> {
    let path = directory.join(berth_formats::fields::FIELDS_FILE);
    let Some(text) = read_if_present(&path)? else {
        return Ok(None);
    };
    berth_formats::fields::parse(&path.display().to_string(), &text)
        .map(Some)
        .map_err(AddonError::Fields)
}

/// Checks the add-on folder's components and their probes (`health.yaml`), if it has one.
pub fn check_health(directory: &Path) -> Result<(), AddonError> {
    let path = directory.join(berth_formats::health::HEALTH_FILE);
    if let Some(text) = read_if_present(&path)? {
        berth_formats::health::HealthFile::parse(&path.display().to_string(), &text)?;
    }
    Ok(())
}

/// A file's text, or None when there is no such file.
fn read_if_present(path: &Path) -> Result<Option<String>, AddonError> {
    match fs_err::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AddonError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Hashes one file and records whether any execute bit is set.
pub fn hash_file(path: &Path, relative: String) -> Result<AddonFile, AddonError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| AddonError::Io {
        path: path.to_path_buf(),
        source,
    };
    let metadata = fs_err::metadata(path).map_err(io)?;
    let digest = Sha256Digest::of_reader(fs_err::File::open(path).map_err(io)?).map_err(io)?;
    Ok(AddonFile {
        relative,
        path: path.to_path_buf(),
        digest,
        size: metadata.len(),
        executable: metadata.permissions().mode() & 0o111 != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The health file Berth packages for Kubernetes reads as every add-on's must.
    #[test]
    fn the_builtin_kubernetes_health_file_parses() {
        let health =
            berth_formats::health::HealthFile::parse("kubernetes-health.yaml", KUBERNETES_HEALTH)
                .unwrap();
        let names: Vec<&str> = health.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "kubelet",
                "node-ready",
                "api-server",
                "scheduler",
                "controller-manager",
                "etcd"
            ]
        );
    }
}
