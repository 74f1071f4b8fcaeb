//! `berth backup`: a control-plane node's cluster state in one archive (see
//! [`berth_formats::backup`]): an etcd snapshot taken with etcd's client API, the cluster's
//! PKI and kubeadm's files, Berth's own records, and the data of each add-on with a backup hook
//! (see [`addon_data`]), each file with its digest; signed with a key the operator gives;
//! written 0600. `--verify` reads an archive through and checks every byte against its
//! manifest, and its signature against the keys the node trusts.

pub mod addon_data;
mod archive;
pub mod etcd;
pub mod other_nodes;
pub mod restore;
pub mod seal;
pub mod store;

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::backup::{BackedUpFile, BackupManifest, ClusterIdentity, ETCD_SNAPSHOT, Part};

pub use archive::{Signature, Verified, VerifyError, verify};

use crate::node::layout::Layout;

/// What a backup is asked to be.
pub struct BackupRequest {
    pub layout: Layout,
    pub output: PathBuf,
    pub etcd_endpoint: String,
    pub signing_key: Option<berth_formats::signature::SigningKey>,
    pub protection: seal::Protection,
    /// The longest one add-on's backup hook may take.
    pub hook_timeout: std::time::Duration,
}

/// A backup written.
pub struct Taken {
    pub path: PathBuf,
    pub manifest: BackupManifest,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "this node is not a control-plane node of a cluster Berth installed: {missing} is missing\nhint: run berth backup on the first node (or another control-plane node)"
    )]
    NotControlPlane { missing: PathBuf },
    #[error(transparent)]
    Snapshot(#[from] etcd::SnapshotError),
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} already exists; nothing was written\nhint: give another --output, or move it away"
    )]
    Exists { path: PathBuf },
    #[error("more than {max} files to back up under {folder}", max = berth_formats::backup::MAX_FILES)]
    TooMany { folder: PathBuf },
    #[error("{0}")]
    Archive(String),
    #[error("{0}\nnothing was written; once what is named is fixed, back up again")]
    AddonData(String),
}

/// Where each part's files are on a node, relative to its root; what is left out is rebuilt
/// from the dist (packages, extracted add-ons, the hook library) or is scratch.
const PARTS: &[(Part, &str)] = &[
    (Part::Pki, "etc/kubernetes/pki"),
    (Part::Kubernetes, "etc/kubernetes"),
    (Part::Berth, "etc/berth"),
    (Part::Berth, "var/lib/berth/installers"),
    (Part::Berth, "var/lib/berth/state"),
    (Part::Berth, "var/lib/berth/health"),
    (Part::Berth, "var/lib/berth/fleet"),
    (Part::Berth, "var/lib/berth/join.json"),
    (Part::Berth, "var/lib/berth/installer.json"),
];

/// Takes the backup: the snapshot first (into the output's folder, so that it is on the
/// disk the archive goes to), then every file, then the archive, renamed into place whole.
pub fn take(
    request: &BackupRequest,
    reporter: &dyn crate::engine::Reporter,
) -> Result<Taken, BackupError> {
    let root = request.layout.root();
    let credentials = etcd::Credentials::kubeadm(root);
    let ca = root.join("etc/kubernetes/pki/ca.crt");
    for needed in [
        &ca,
        &credentials.ca,
        &credentials.certificate,
        &credentials.key,
    ] {
        if !needed.is_file() {
            return Err(BackupError::NotControlPlane {
                missing: needed.clone(),
            });
        }
    }
    if request.output.exists() {
        return Err(BackupError::Exists {
            path: request.output.clone(),
        });
    }
    let folder = request
        .output
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let write_error = |source| BackupError::Write {
        path: folder.to_path_buf(),
        source,
    };
    made_private(folder).map_err(write_error)?;
    sweep_leftovers(folder);
    // Root's alone while it is written: it holds the cluster's keys and secrets.
    let snapshot = tempfile::Builder::new()
        .prefix(&temporary_prefix("etcd"))
        .tempfile_in(folder)
        .map_err(write_error)?;
    let (size, sha256) = etcd::snapshot(&request.etcd_endpoint, &credentials, snapshot.as_file())?;
    let mut sources = vec![(
        BackedUpFile {
            path: ETCD_SNAPSHOT.to_string(),
            part: Part::Etcd,
            size,
            sha256,
            mode: 0o600,
        },
        snapshot.path().to_path_buf(),
    )];
    sources.extend(collect(root, PARTS)?);
    let addon_scratch = tempfile::Builder::new()
        .prefix(&temporary_prefix("scratch"))
        .tempdir_in(folder)
        .map_err(write_error)?;
    sources.extend(addon_data::back_up(
        &request.layout,
        addon_scratch.path(),
        request.hook_timeout,
        reporter,
    )?);
    let ca_sha256 = Sha256Digest::of_file(&ca).map_err(|source| BackupError::Read {
        path: ca.clone(),
        source,
    })?;
    let manifest = BackupManifest {
        schema_version: berth_formats::backup::SCHEMA_VERSION,
        berth_version: env!("CARGO_PKG_VERSION").to_string(),
        created: berth_formats::time::now(),
        node: nix::unistd::gethostname()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cluster: ClusterIdentity { ca_sha256 },
        files: sources.iter().map(|(file, _)| file.clone()).collect(),
    };
    manifest
        .check()
        .map_err(|error| BackupError::Archive(error.to_string()))?;
    let bytes = archive::write(
        &request.output,
        &manifest,
        &sources,
        request.signing_key.as_ref(),
        &request.protection,
    )?;
    Ok(Taken {
        path: request.output.clone(),
        manifest,
        bytes,
    })
}

/// Every regular file of `parts` (each a folder or file under `root`), named by its path
/// below `root`, hashed, with its mode, in path order. Links and other kinds are left out
/// (kubeadm and Berth write none there; an add-on's hook that leaves one gets it left out).
fn collect(
    root: &Path,
    parts: &[(Part, &str)],
) -> Result<Vec<(BackedUpFile, PathBuf)>, BackupError> {
    let mut found: Vec<(BackedUpFile, PathBuf)> = Vec::new();
    for (part, relative) in parts {
        let mut pending = vec![root.join(relative)];
        while let Some(path) = pending.pop() {
            let read = |source| BackupError::Read {
                path: path.clone(),
                source,
            };
            let metadata = match fs_err::symlink_metadata(&path) {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(read(error)),
            };
            let inside = path
                .strip_prefix(root)
                .expect("walked below the root")
                .to_string_lossy()
                .into_owned();
            // /etc/kubernetes holds pki/, which is a part of its own.
            if *part == Part::Kubernetes && inside == "etc/kubernetes/pki" {
                continue;
            }
            if metadata.is_dir() {
                let mut entries: Vec<PathBuf> = fs_err::read_dir(&path)
                    .map_err(read)?
                    .map(|entry| entry.map(|entry| entry.path()))
                    .collect::<Result<_, _>>()
                    .map_err(read)?;
                // Popped from the end: reversed, the walk goes in name order.
                entries.sort_by(|a, b| b.cmp(a));
                pending.extend(entries);
                continue;
            }
            if !metadata.is_file() {
                continue;
            }
            if found.len() >= berth_formats::backup::MAX_FILES {
                return Err(BackupError::TooMany {
                    folder: root.join(relative),
                });
            }
            use std::os::unix::fs::PermissionsExt as _;
            found.push((
                BackedUpFile {
                    sha256: Sha256Digest::of_file(&path).map_err(read)?,
                    path: inside,
                    part: *part,
                    size: metadata.len(),
                    mode: metadata.permissions().mode() & 0o7777,
                },
                path,
            ));
        }
    }
    Ok(found)
}

/// Where backups go by default: `/var/backups/berth`, outside Berth's own folder, which
/// `berth reset` removes.
pub fn default_folder(layout: &Layout) -> PathBuf {
    layout.root().join("var/backups/berth")
}

/// A backup's default name: `backup-<time>.tar.zst` (`.tar.zst.age` encrypted), which sorts
/// by time.
pub fn default_name(encrypted: bool) -> String {
    let stamp = berth_formats::time::now().replace(':', "");
    let age = if encrypted { ".age" } else { "" };
    format!("backup-{stamp}.tar.zst{age}")
}

/// The name a temporary file or folder of this process starts with: `.berth-KIND-PID-`, so
/// that one a killed backup left is told from one a backup running now writes.
fn temporary_prefix(kind: &str) -> String {
    format!(".berth-{kind}-{}-", std::process::id())
}

/// Removes from `folder` what backups killed midway left (their temporary files and folders,
/// by the process that is no longer running), so that a killed backup leaves nothing once
/// the next one runs. What another backup running now writes is left alone.
fn sweep_leftovers(folder: &Path) {
    let Ok(entries) = fs_err::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = ["etcd", "backup", "scratch"]
            .iter()
            .find_map(|kind| name.strip_prefix(&format!(".berth-{kind}-")))
        else {
            continue;
        };
        let Some(pid) = rest
            .split('-')
            .next()
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let running = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        if !running {
            let path = entry.path();
            let _ = if path.is_dir() {
                fs_err::remove_dir_all(&path)
            } else {
                fs_err::remove_file(&path)
            };
        }
    }
}

/// Makes `folder` root's alone when it is not there yet; one the operator has is left as it is.
fn made_private(folder: &Path) -> std::io::Result<()> {
    if folder.exists() {
        return Ok(());
    }
    berth_formats::files::private_dir(folder)
}

/// A private folder for a backup on its way elsewhere (to S3, or fetched from it), on the
/// disk backups go to rather than a /tmp that may be memory. Removed when dropped.
pub fn scratch(layout: &Layout) -> Result<tempfile::TempDir, BackupError> {
    let folder = default_folder(layout);
    let failed = |source| BackupError::Write {
        path: folder.clone(),
        source,
    };
    made_private(&folder).map_err(failed)?;
    sweep_leftovers(&folder);
    tempfile::Builder::new()
        .prefix(&temporary_prefix("scratch"))
        .tempdir_in(&folder)
        .map_err(failed)
}
