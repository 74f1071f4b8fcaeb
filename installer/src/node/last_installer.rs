//! The installer this node ran last, kept so that `berth plan` needs no arguments on an
//! installed node and `berth status` can say what the node runs: its spec and lock, copied
//! under the node's state, and the dist they were installed from.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dist::Dist;
use crate::files::{self, write_atomically};
use crate::node::layout::Layout;

/// `installer.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastInstaller {
    /// The installer id (a prefix of the spec's digest).
    pub id: String,
    pub spec: PathBuf,
    pub lock: Option<PathBuf>,
    /// A folder or an http(s):// URL, as `--dist` takes it.
    pub dist: String,
    /// The node joined a cluster (`berth join`) rather than installing its first node: an
    /// upgrade runs its join hooks, as kURL's upgrade does on such a node. Once set, it stays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joined: bool,
    /// The node joined the control plane (`control-plane`): its hooks see `MASTER=1` on every
    /// later run too. Once set, it stays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control_plane: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LastInstallerError {
    #[error("failed to keep the installer {id} in {path}")]
    Write {
        id: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is damaged: {message}\nhint: run the installer's script (or `berth install --spec … --dist …`) again; it writes the file anew"
    )]
    Damaged { path: PathBuf, message: String },
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LastInstaller {
    /// Keeps `spec` (and `lock`) under the node's state as installer `id`'s, from `dist`, and
    /// makes it the node's last installer. A file already in place is not copied onto itself.
    pub fn record(
        layout: &Layout,
        id: &str,
        spec: &Path,
        lock: Option<&Path>,
        dist: &Dist,
        joined: bool,
        control_plane: bool,
    ) -> Result<Self, LastInstallerError> {
        // A node's role outlives the command that ran last: a stray `berth install` on a
        // worker does not make it the first node.
        let previous = Self::load(layout).ok().flatten();
        let joined = joined || previous.as_ref().is_some_and(|last| last.joined);
        let control_plane = control_plane || previous.is_some_and(|last| last.control_plane);
        let folder = layout.installer_dir(id);
        let write_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LastInstallerError::Write {
                id: id.to_string(),
                path,
                source,
            }
        };
        // The spec may hold secrets (an add-on's password, one a rollout set): the folder and
        // its files are root's alone, and those an earlier run left wider are narrowed.
        files::private_dir(&folder).map_err(write_error(&folder))?;
        let keep = |from: &Path, name: &str| -> Result<PathBuf, LastInstallerError> {
            let to = folder.join(name);
            let same = std::path::absolute(from).ok() == std::path::absolute(&to).ok();
            if same {
                fs_err::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                    .map_err(write_error(&to))?;
            } else {
                let bytes = fs_err::read(from).map_err(write_error(from))?;
                files::write_atomically_with_mode(&to, &bytes, 0o600).map_err(write_error(&to))?;
            }
            Ok(to)
        };
        let record = Self {
            id: id.to_string(),
            spec: keep(spec, berth_formats::bundle::SPEC_FILE)?,
            lock: lock
                .map(|lock| {
                    // Its signature goes with it, so a later run checks it again.
                    let signature = PathBuf::from(format!("{}.sig", lock.display()));
                    if signature.is_file() {
                        keep(
                            &signature,
                            &format!("{}.sig", berth_formats::lock::LOCK_FILE),
                        )?;
                    }
                    keep(lock, berth_formats::lock::LOCK_FILE)
                })
                .transpose()?,
            dist: dist.argument(),
            joined,
            control_plane,
        };
        let mut bytes = serde_json::to_vec_pretty(&record).expect("the record serializes");
        bytes.push(b'\n');
        let path = layout.last_installer_file();
        write_atomically(&path, &bytes).map_err(write_error(&path))?;
        Ok(record)
    }

    /// The node's last installer, or `None` on a node that has run none.
    pub fn load(layout: &Layout) -> Result<Option<Self>, LastInstallerError> {
        let path = layout.last_installer_file();
        let bytes = match fs_err::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(LastInstallerError::Read { path, source }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| LastInstallerError::Damaged {
                path,
                message: error.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs_err::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// A spec may hold secrets: the installer's folder and the files kept in it are root's
    /// alone, whether copied there or written in place (as the served scripts write them),
    /// and those an earlier run left wider are narrowed.
    #[test]
    fn the_kept_spec_and_its_folder_are_root_s_alone() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path().join("root"));
        let dist = Dist::Local(dir.path().join("dist"));
        let spec = dir.path().join("installer.yaml");
        fs_err::write(&spec, "spec: {demo: {password: hunter2}}\n").unwrap();
        fs_err::set_permissions(&spec, std::fs::Permissions::from_mode(0o644)).unwrap();
        let lock = dir.path().join("installer.lock");
        fs_err::write(&lock, "lock\n").unwrap();
        let record =
            LastInstaller::record(&layout, "a1", &spec, Some(&lock), &dist, false, false).unwrap();
        let folder = layout.installer_dir("a1");
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(&record.spec), 0o600);
        assert_eq!(mode(record.lock.as_deref().unwrap()), 0o600);
        // Rewritten over a file an earlier run left 0644, in a 0755 folder.
        fs_err::set_permissions(&record.spec, std::fs::Permissions::from_mode(0o644)).unwrap();
        fs_err::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        fs_err::write(&spec, "spec: {demo: {password: changed}}\n").unwrap();
        LastInstaller::record(&layout, "a1", &spec, None, &dist, false, false).unwrap();
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(&record.spec), 0o600);
        // Written in place by the script, as the umask left it.
        let in_place = layout.installer_dir("b2").join("installer.yaml");
        fs_err::create_dir_all(in_place.parent().unwrap()).unwrap();
        fs_err::write(&in_place, "spec: {}\n").unwrap();
        fs_err::set_permissions(&in_place, std::fs::Permissions::from_mode(0o644)).unwrap();
        LastInstaller::record(&layout, "b2", &in_place, None, &dist, false, false).unwrap();
        assert_eq!(mode(&in_place), 0o600);
        assert_eq!(mode(in_place.parent().unwrap()), 0o700);
    }
}
