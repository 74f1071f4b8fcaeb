//! A backup of a control-plane node: one zstd tar, `manifest.json` first (what it holds: each
//! file's node path, size, sha256 and mode, and the cluster it came from),
//! `manifest.json.sig` when it is signed, then each file under `files/`, in the manifest's
//! order. An add-on's own data (what its `<name>_backup` hook wrote) is under
//! `files/addons/<name>/`. `berth backup` writes it; `berth backup --verify` (and a restore, before it changes
//! anything) reads it through and checks every byte against the manifest.

use serde::{Deserialize, Serialize};

use crate::Sha256Digest;

/// The manifest's schema; a backup of a higher one was made by a newer Berth. 2: add-on
/// data (`Part::Addon`).
pub const SCHEMA_VERSION: u32 = 2;
pub const MANIFEST_FILE: &str = "manifest.json";
pub const SIGNATURE_FILE: &str = "manifest.json.sig";
/// The folder of the archive the files are under.
pub const FILES_DIR: &str = "files";
/// The etcd snapshot's place in the archive (it has no place on a node).
pub const ETCD_SNAPSHOT: &str = "etcd/snapshot.db";
/// The folder of the archive's add-on data, one folder an add-on (it has no place on a node
/// either: each add-on's restore hook puts it where it belongs).
pub const ADDONS_DIR: &str = "addons";
/// The largest manifest read: a few hundred bytes a file.
pub const MAX_MANIFEST_BYTES: u64 = 8 * 1024 * 1024;
/// The most files one backup holds.
pub const MAX_FILES: usize = 50_000;
/// The longest path in a manifest.
pub const MAX_PATH_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupManifest {
    pub schema_version: u32,
    /// The `berth` that made it.
    pub berth_version: String,
    /// RFC 3339, UTC.
    pub created: String,
    /// The node's host name.
    pub node: String,
    pub cluster: ClusterIdentity,
    pub files: Vec<BackedUpFile>,
}

/// Which cluster a backup is of: a restore is refused onto a node of another one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterIdentity {
    /// sha256 of the cluster's CA certificate (`/etc/kubernetes/pki/ca.crt`), which every
    /// node of the cluster holds and no other cluster's does.
    pub ca_sha256: Sha256Digest,
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackedUpFile {
    /// Under `files/` in the archive: the node path relative to `/` (`etc/kubernetes/pki/ca.crt`),
    /// [`ETCD_SNAPSHOT`], or `addons/<name>/…` for an add-on's data.
    pub path: String,
    pub part: Part,
    pub size: u64,
    pub sha256: Sha256Digest,
    /// Its permission bits on the node (a private key's 0600), put back on restore.
    pub mode: u32,
}

/// What a file is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// The etcd snapshot: every Kubernetes object.
    Etcd,
    /// The cluster's certificates and keys (`/etc/kubernetes/pki`).
    Pki,
    /// kubeadm's kubeconfigs, configuration and static pod manifests (`/etc/kubernetes`).
    Kubernetes,
    /// Berth's own records: installers and their locks, add-on state, join parameters, the
    /// fleet's registry and rollouts, the node's settings and trusted keys.
    Berth,
    /// An add-on's own data, as its `<name>_backup` hook wrote it.
    Addon,
}

impl Part {
    pub fn describe(self) -> &'static str {
        match self {
            Part::Etcd => "the etcd snapshot",
            Part::Pki => "certificates and keys",
            Part::Kubernetes => "kubeadm's configuration",
            Part::Berth => "Berth's records",
            Part::Addon => "add-on data",
        }
    }
}

/// Why a manifest is not one this Berth reads.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{MANIFEST_FILE} is not a backup manifest: {0}")]
    Malformed(String),
    #[error(
        "the backup was made by a newer Berth (manifest schema {found}; this berth reads {SCHEMA_VERSION})\nhint: restore or verify it with the berth that made it ({made_by}) or a newer one"
    )]
    Newer { found: u32, made_by: String },
    #[error("{MANIFEST_FILE}: {0}")]
    Invalid(String),
}

impl BackupManifest {
    /// Reads a manifest and checks it: schema, paths, one entry per path, the etcd snapshot.
    pub fn parse(bytes: &[u8]) -> Result<Self, ManifestError> {
        // The version first: a newer manifest may have fields this Berth does not know.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Head {
            schema_version: u32,
            #[serde(default)]
            berth_version: String,
        }
        let head: Head = serde_json::from_slice(bytes)
            .map_err(|error| ManifestError::Malformed(error.to_string()))?;
        if head.schema_version > SCHEMA_VERSION {
            return Err(ManifestError::Newer {
                found: head.schema_version,
                made_by: head.berth_version,
            });
        }
        let manifest: BackupManifest = serde_json::from_slice(bytes)
            .map_err(|error| ManifestError::Malformed(error.to_string()))?;
        manifest.check()?;
        Ok(manifest)
    }

    pub fn check(&self) -> Result<(), ManifestError> {
        let invalid = |problem: String| Err(ManifestError::Invalid(problem));
        if self.files.len() > MAX_FILES {
            return invalid(format!(
                "it lists {} files, more than {MAX_FILES}",
                self.files.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for file in &self.files {
            if let Err(problem) = check_path(&file.path) {
                return invalid(format!("`{}`: {problem}", file.path.escape_debug()));
            }
            if (file.part == Part::Etcd) != (file.path == ETCD_SNAPSHOT) {
                return invalid(format!(
                    "`{}` is listed as {}",
                    file.path,
                    file.part.describe()
                ));
            }
            if (file.part == Part::Addon) != addon_of(&file.path).is_some() {
                return invalid(format!(
                    "`{}` is listed as {}",
                    file.path,
                    file.part.describe()
                ));
            }
            if file.mode > 0o7777 {
                return invalid(format!("`{}` has mode {:o}", file.path, file.mode));
            }
            if !seen.insert(file.path.as_str()) {
                return invalid(format!("`{}` is listed twice", file.path));
            }
        }
        if !seen.contains(ETCD_SNAPSHOT) {
            return invalid(format!("it lists no {ETCD_SNAPSHOT}"));
        }
        Ok(())
    }

    /// The add-ons whose data the backup holds.
    pub fn addons_with_data(&self) -> std::collections::BTreeSet<&str> {
        self.files
            .iter()
            .filter(|file| file.part == Part::Addon)
            .filter_map(|file| addon_of(&file.path).map(|(name, _)| name))
            .collect()
    }

    /// The archive's name of a file the manifest lists.
    pub fn archive_path(file: &BackedUpFile) -> String {
        format!("{FILES_DIR}/{}", file.path)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest is plain data");
        bytes.push(b'\n');
        bytes
    }
}

/// The add-on and the path within its data of `addons/<name>/<path>`, the name a plain one.
pub fn addon_of(path: &str) -> Option<(&str, &str)> {
    let (name, inside) = path
        .strip_prefix(ADDONS_DIR)?
        .strip_prefix('/')?
        .split_once('/')?;
    crate::name::check_plain("add-on name", name).ok()?;
    Some((name, inside))
}

/// A path a backup may hold: relative, plain segments, no `.` or `..`, no control characters.
fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() || path.len() > MAX_PATH_BYTES {
        return Err("not a path of 1 to 1024 bytes");
    }
    if path.chars().any(char::is_control) {
        return Err("holds a control character");
    }
    if path
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return Err("not a relative path of plain folder and file names");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(files: &[(&str, Part)]) -> BackupManifest {
        BackupManifest {
            schema_version: SCHEMA_VERSION,
            berth_version: "0.1.0".into(),
            created: "2026-11-29T12:00:00Z".into(),
            node: "node-1".into(),
            cluster: ClusterIdentity {
                ca_sha256: Sha256Digest::of(b"ca"),
            },
            files: files
                .iter()
                .map(|(path, part)| BackedUpFile {
                    path: path.to_string(),
                    part: *part,
                    size: 2,
                    sha256: Sha256Digest::of(b"xx"),
                    mode: 0o600,
                })
                .collect(),
        }
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let written = manifest(&[
            (ETCD_SNAPSHOT, Part::Etcd),
            ("etc/kubernetes/pki/ca.key", Part::Pki),
            ("addons/registry/images.tar", Part::Addon),
        ]);
        assert_eq!(BackupManifest::parse(&written.to_bytes()).unwrap(), written);
    }

    #[test]
    fn bad_manifests_are_refused_with_the_reason() {
        for (files, expected) in [
            (vec![("etc/x", Part::Berth)], "lists no etcd/snapshot.db"),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), ("../etc/passwd", Part::Berth)],
                "not a relative path",
            ),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), ("/etc/passwd", Part::Berth)],
                "not a relative path",
            ),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), ("etc/a\nb", Part::Berth)],
                "control character",
            ),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), ("etc/a", Part::Etcd)],
                "is listed as the etcd snapshot",
            ),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), (ETCD_SNAPSHOT, Part::Etcd)],
                "listed twice",
            ),
            (
                vec![(ETCD_SNAPSHOT, Part::Etcd), ("etc/registry/x", Part::Addon)],
                "is listed as add-on data",
            ),
            (
                vec![
                    (ETCD_SNAPSHOT, Part::Etcd),
                    ("addons/registry/x", Part::Berth),
                ],
                "is listed as Berth's records",
            ),
            (
                vec![
                    (ETCD_SNAPSHOT, Part::Etcd),
                    ("addons/Bad$name/x", Part::Addon),
                ],
                "is listed as add-on data",
            ),
        ] {
            let error = BackupManifest::parse(&manifest(&files).to_bytes())
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{files:?}: {error}");
        }
        let mut newer = serde_json::to_value(manifest(&[(ETCD_SNAPSHOT, Part::Etcd)])).unwrap();
        newer["schemaVersion"] = (SCHEMA_VERSION + 1).into();
        newer["berthVersion"] = "9.0.0".into();
        newer["somethingNew"] = true.into();
        let error = BackupManifest::parse(newer.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "the backup was made by a newer Berth (manifest schema 3; this berth reads 2)"
            ),
            "{error}"
        );
        assert!(error.contains("(9.0.0)"), "{error}");
        let error = BackupManifest::parse(b"{\"schemaVersion\": 1}")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("manifest.json is not a backup manifest"),
            "{error}"
        );
    }
}
