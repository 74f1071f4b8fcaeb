//! `berth restore`, its first half: a backup checked through, then put on a fresh node so that
//! the installer it records can run there as on the first node: the cluster's certificate
//! authorities and service-account keys (kubeadm makes every other certificate again, for this
//! node's address), Berth's installers, settings, trusted keys and fleet records, and the etcd
//! snapshot where the Kubernetes hook makes etcd's data from it before `kubeadm init`.
//! Add-on state is not put back: the install records it afresh. Add-ons' own data waits in
//! `$DIR/restore/addons/<name>/` for their restore hooks (see [`super::addon_data`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use berth_formats::backup::{BackedUpFile, BackupManifest, ETCD_SNAPSHOT, Part};
use berth_formats::signature::PublicKey;

use super::archive::{Verified, VerifyError, verify};
use super::seal::Keys;
use crate::node::last_installer::LastInstaller;
use crate::node::layout::Layout;

/// The PKI files put back: the authorities and the service-account key pair. The others are
/// leaves kubeadm signs again for this node.
const KEPT_PKI: &[&str] = &[
    "ca.crt",
    "ca.key",
    "sa.key",
    "sa.pub",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "etcd/ca.crt",
    "etcd/ca.key",
];

/// Berth's records put back (relative to the root): what is not listed (add-on state, health,
/// join parameters) the install writes again.
const KEPT_RECORDS: &[&str] = &[
    "etc/berth/",
    "var/lib/berth/installers/",
    "var/lib/berth/installer.json",
    "var/lib/berth/fleet/",
];

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(
        "this node already runs a cluster ({found} is there); nothing was changed\nhint: restore onto a fresh node, or `berth reset` this one first"
    )]
    Running { found: PathBuf },
    #[error(
        "this node holds another cluster's CA ({path}: {found}; the backup's cluster has {expected}); nothing was changed"
    )]
    OtherCluster {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(
        "the backup records no installer (var/lib/berth/installer.json): it cannot be installed again here"
    )]
    NoInstaller,
    #[error(
        "{path}: a link (or a file) where a folder should be; nothing is written through links"
    )]
    Link { path: PathBuf },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Record(String),
}

/// What the restore installs: the backup's installer, as the first node last ran it.
pub struct Prepared {
    pub verified: Verified,
    pub installer: LastInstaller,
    /// Where the installer's scripts were served, for the online join command (the backup's
    /// join parameters are stale, but not this).
    pub scripts_url: Option<String>,
    /// The address the backed-up cluster's nodes reached its API on: the other nodes still
    /// name it.
    pub api_address: Option<String>,
}

/// Where the backup's join parameters are kept aside, in the restore's folder, for their
/// scripts URL.
fn kept_join_file(layout: &Layout) -> PathBuf {
    restore_dir(layout).join("join.json")
}

/// The folder a restore under way keeps its snapshot in (`$DIR/restore` to the hooks).
pub fn restore_dir(layout: &Layout) -> PathBuf {
    layout.install_dir().join("restore")
}

/// Checks the backup through, refuses a node that runs a cluster, and puts the backup's
/// files in place. A restore stopped midway (its snapshot still waiting) is continued.
pub fn prepare(
    layout: &Layout,
    archive: &Path,
    keys: &[PublicKey],
    unlock: &Keys,
) -> Result<Prepared, RestoreError> {
    let verified = verify(archive, keys, unlock)?;
    let root = layout.root();
    let snapshot = restore_dir(layout).join("etcd-snapshot.db");
    let continuing = snapshot.is_file();
    if !continuing {
        for found in [
            root.join("etc/kubernetes/admin.conf"),
            root.join("etc/kubernetes/kubelet.conf"),
            root.join("var/lib/etcd/member"),
            layout.state_dir(),
        ] {
            if found.exists() {
                return Err(RestoreError::Running { found });
            }
        }
    }
    let ca = root.join("etc/kubernetes/pki/ca.crt");
    if ca.is_file() {
        let found =
            berth_formats::Sha256Digest::of_file(&ca).map_err(|source| RestoreError::Write {
                path: ca.clone(),
                source,
            })?;
        if found != verified.manifest.cluster.ca_sha256 {
            return Err(RestoreError::OtherCluster {
                path: ca,
                found: found.to_string(),
                expected: verified.manifest.cluster.ca_sha256.to_string(),
            });
        }
    }
    // Which installer to run again is read from the backup: one that records none is refused
    // before anything is written.
    if !verified
        .manifest
        .files
        .iter()
        .any(|file| file.path == "var/lib/berth/installer.json")
    {
        return Err(RestoreError::NoInstaller);
    }
    put_back(layout, archive, &verified.manifest, unlock)?;
    let installer = LastInstaller::load(layout)
        .map_err(|error| RestoreError::Record(error.to_string()))?
        .ok_or(RestoreError::NoInstaller)?;
    let kept_joins = crate::kubernetes::join::JoinStore::new(kept_join_file(layout))
        .load()
        .ok();
    Ok(Prepared {
        verified,
        installer,
        scripts_url: kept_joins
            .as_ref()
            .and_then(|joins| joins.scripts_url.clone()),
        api_address: kept_joins
            .as_ref()
            .and_then(super::other_nodes::api_address),
    })
}

/// Where a listed file goes on this node, or `None` when it is left to the install.
fn destination(layout: &Layout, file: &BackedUpFile) -> Option<PathBuf> {
    match file.part {
        Part::Etcd => Some(restore_dir(layout).join("etcd-snapshot.db")),
        Part::Pki => {
            let inside = file.path.strip_prefix("etc/kubernetes/pki/")?;
            KEPT_PKI
                .contains(&inside)
                .then(|| layout.root().join(&file.path))
        }
        Part::Kubernetes => None,
        Part::Addon => {
            let (name, inside) = berth_formats::backup::addon_of(&file.path)?;
            Some(super::addon_data::restore_folder(layout, name).join(inside))
        }
        Part::Berth if layout.root().join(&file.path) == layout.join_file() => {
            Some(kept_join_file(layout))
        }
        Part::Berth => KEPT_RECORDS
            .iter()
            .any(|kept| match kept.strip_suffix('/') {
                Some(folder) => file.path.starts_with(kept) && file.path.len() > folder.len(),
                None => file.path == *kept,
            })
            .then(|| layout.root().join(&file.path)),
    }
}

/// Reads the archive again (it was checked through a moment ago; each file is checked again
/// as it is written) and writes the files restored, each with its mode, whole or not at all.
fn put_back(
    layout: &Layout,
    archive: &Path,
    manifest: &BackupManifest,
    unlock: &Keys,
) -> Result<(), RestoreError> {
    let damaged = |problem: String| {
        RestoreError::Verify(VerifyError::Damaged {
            path: archive.to_path_buf(),
            problem,
        })
    };
    let file = fs_err::File::open(archive).map_err(|source| VerifyError::Open {
        path: archive.to_path_buf(),
        source,
    })?;
    let mut tar = super::archive::open(archive, file, unlock)?;
    let by_name: std::collections::BTreeMap<String, &BackedUpFile> = manifest
        .files
        .iter()
        .map(|file| (BackupManifest::archive_path(file), file))
        .collect();
    berth_formats::files::private_dir(&restore_dir(layout)).map_err(|source| {
        RestoreError::Write {
            path: restore_dir(layout),
            source,
        }
    })?;
    for entry in tar.entries().map_err(|error| damaged(error.to_string()))? {
        let mut entry = entry.map_err(|error| damaged(error.to_string()))?;
        let name = entry
            .path()
            .map_err(|error| damaged(error.to_string()))?
            .to_string_lossy()
            .into_owned();
        let Some(listed) = by_name.get(&name) else {
            continue;
        };
        let Some(path) = destination(layout, listed) else {
            continue;
        };
        write_checked(layout.root(), &path, listed, &mut entry)?;
    }
    if !restore_dir(layout).join("etcd-snapshot.db").is_file() {
        return Err(damaged(format!("it holds no {ETCD_SNAPSHOT}")));
    }
    Ok(())
}

/// Writes `content` to `path` (under `root`, through no link: a planted link would carry a
/// restored key elsewhere) with the listed mode, checked against the listed sha256 before it
/// is renamed into place.
fn write_checked(
    root: &Path,
    path: &Path,
    listed: &BackedUpFile,
    content: &mut impl Read,
) -> Result<(), RestoreError> {
    use std::os::unix::fs::PermissionsExt as _;
    let failed = |source| RestoreError::Write {
        path: path.to_path_buf(),
        source,
    };
    let relative = path
        .strip_prefix(root)
        .expect("every destination is under the root");
    berth_formats::archive::create_parents_within(root, &relative.to_string_lossy()).map_err(
        |error| {
            if error.kind() == std::io::ErrorKind::InvalidInput {
                RestoreError::Link {
                    path: path.to_path_buf(),
                }
            } else {
                failed(error)
            }
        },
    )?;
    let folder = path.parent().expect("a file under the root");
    let mut staged = tempfile::Builder::new()
        .prefix(".berth-restore-")
        .tempfile_in(folder)
        .map_err(failed)?;
    let mut hashing = berth_formats::digest::HashingWriter::new(staged.as_file_mut());
    std::io::copy(&mut content.take(listed.size), &mut hashing).map_err(failed)?;
    let (digest, size, _) = hashing.finish();
    if digest != listed.sha256 || size != listed.size {
        return Err(RestoreError::Record(format!(
            "{} changed in the backup between its check and its restore; nothing more was written",
            listed.path
        )));
    }
    fs_err::set_permissions(staged.path(), std::fs::Permissions::from_mode(listed.mode))
        .map_err(failed)?;
    staged.persist(path).map_err(|error| failed(error.error))?;
    Ok(())
}

/// Keeps the running `berth` on the node as the served scripts keep theirs
/// (`/var/lib/berth/bin/berth`, linked as `/usr/local/bin/berth` on a real node's root), so
/// that `berth status`, `berth join-command` and the fleet work once the restore is done.
pub fn keep_binary(layout: &Layout) -> Result<(), RestoreError> {
    use std::os::unix::fs::PermissionsExt as _;
    let kept = layout.programs_dir().join("berth");
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RestoreError::Write { path, source }
    };
    let running = std::env::current_exe().map_err(failed(&kept))?;
    if running != kept {
        fs_err::create_dir_all(layout.programs_dir()).map_err(failed(&kept))?;
        let partial = kept.with_extension("partial");
        fs_err::copy(&running, &partial).map_err(failed(&partial))?;
        fs_err::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))
            .map_err(failed(&partial))?;
        fs_err::rename(&partial, &kept).map_err(failed(&kept))?;
    }
    let link = layout.root().join("usr/local/bin/berth");
    if layout.root() == Path::new("/") && link.parent().is_some_and(Path::is_dir) {
        let _ = fs_err::remove_file(&link);
        fs_err::os::unix::fs::symlink(&kept, &link).map_err(failed(&link))?;
    }
    Ok(())
}

/// Ends a restore: its snapshot and folder go.
pub fn finish(layout: &Layout) -> Result<(), RestoreError> {
    let folder = restore_dir(layout);
    fs_err::remove_dir_all(&folder).or_else(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            Ok(())
        } else {
            Err(RestoreError::Write {
                path: folder,
                source: error,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, part: Part) -> BackedUpFile {
        BackedUpFile {
            path: path.into(),
            part,
            size: 0,
            sha256: berth_formats::Sha256Digest::of(b""),
            mode: 0o600,
        }
    }

    #[test]
    fn authorities_and_records_are_put_back_and_leaves_and_state_are_not() {
        let layout = Layout::new("/node");
        let placed = |path: &str, part| destination(&layout, &file(path, part));
        assert_eq!(
            placed("etc/kubernetes/pki/ca.key", Part::Pki),
            Some(PathBuf::from("/node/etc/kubernetes/pki/ca.key"))
        );
        assert_eq!(
            placed("etc/kubernetes/pki/etcd/ca.key", Part::Pki),
            Some(PathBuf::from("/node/etc/kubernetes/pki/etcd/ca.key"))
        );
        assert_eq!(placed("etc/kubernetes/pki/apiserver.crt", Part::Pki), None);
        assert_eq!(placed("etc/kubernetes/admin.conf", Part::Kubernetes), None);
        assert_eq!(
            placed("var/lib/berth/fleet/nodes.json", Part::Berth),
            Some(PathBuf::from("/node/var/lib/berth/fleet/nodes.json"))
        );
        assert_eq!(placed("var/lib/berth/state/demo.json", Part::Berth), None);
        assert_eq!(placed("var/lib/berth/installers", Part::Berth), None);
        assert_eq!(
            placed(ETCD_SNAPSHOT, Part::Etcd),
            Some(PathBuf::from(
                "/node/var/lib/berth/restore/etcd-snapshot.db"
            ))
        );
        // Kept aside: the install publishes join parameters anew, from the URL it had.
        assert_eq!(
            placed("var/lib/berth/join.json", Part::Berth),
            Some(PathBuf::from("/node/var/lib/berth/restore/join.json"))
        );
        assert_eq!(
            placed("addons/registry/images/a.tar", Part::Addon),
            Some(PathBuf::from(
                "/node/var/lib/berth/restore/addons/registry/images/a.tar"
            ))
        );
    }
}
