//! An airgap bundle read as a stream (a file, a pipe, a mounted disk), never extracted whole.
//!
//! It comes in two steps. Its head first ([`receive_head`]): what its packages take on disk
//! (`contents.json`, refused up front when it would not fit), its lock (checked against its
//! signature when keys are trusted), versions and spec, which is all a plan reads; the bytes
//! read so far are kept in an unnamed file. The run then reads the rest
//! ([`ArrivingBundle::receive`]) once it knows which packages it needs: each package's
//! `package.json` must have the digest the lock pins; each of its files must be one the index
//! lists, with its size and digest, and each image blob is written once. A package the run
//! needs not (the node has it unpacked and applied as asked, as on a second run of the same
//! bundle) is checked as it passes but not written. What is written is only what an install
//! keeps: the run then moves each file into place (an image blob shared by several packages
//! is linked), so the disk holds the installed content once, never the bundle too. Scripts,
//! the `berth` binary, bills of materials and the list of files are passed over.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::bundle::{self, CONTENTS_FILE, Contents, SPEC_FILE};
use berth_formats::digest::HashingReader;
use berth_formats::lock::{LOCK_FILE, Lock, LockedAddon};
use berth_formats::package_index::{MAX_INDEX_BYTES, PACKAGE_INDEX_FILE, PackageIndex};
use berth_formats::signature::SIGNATURE_SUFFIX;
use berth_formats::versions::VERSIONS_FILE;

use crate::dist::trust::{Trust, TrustError};
// What is left free beyond the packages' own size (the records, logs and the hook session's
// files) is the reserve every unpack keeps.
use crate::dist::unpack::{DISK_RESERVE, free_space};

/// Why a package file before `contents.json` is refused.
const OLDER_BUNDLE: &str = "a package file before contents.json; this bundle was made by an older berth-build: extract it and run its install.sh";

/// The most bytes of one of the small files the stream keeps (lock, versions, spec); an
/// index may be as large as the format allows.
const MAX_SMALL: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("the bundle is not a compressed tar Berth can read (gzip or zstd)")]
    Archive(#[source] std::io::Error),
    /// Past its first bytes: cut short, damaged, or not to be written here.
    #[error("the bundle could not be read to its end")]
    Broken(#[source] std::io::Error),
    #[error("the bundle's `{path}` is refused: {why}")]
    Refused { path: String, why: String },
    #[error(
        "the bundle's packages need {needed} MiB on {folder} and {available} MiB is free\nhint: free some space there (or mount more), then run the install again"
    )]
    NoRoom {
        folder: PathBuf,
        needed: u64,
        available: u64,
    },
    #[error("the bundle ended before {what}")]
    Incomplete { what: String },
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The most compressed bytes of a bundle before its first package (what it holds, its lock,
/// versions, spec, scripts and the `berth` binary), kept on disk until the run reads the rest.
const MAX_HEAD: u64 = 1 << 30;

/// A bundle whose head (what its packages take, its lock, versions and spec) is received and
/// checked, and whose packages are still to come: a plan reads the head alone, and the run
/// then receives only the packages it needs.
pub struct ArrivingBundle {
    folder: PathBuf,
    /// The compressed bytes read so far (an unnamed file in `folder`), then the rest.
    head: std::fs::File,
    rest: Box<dyn Read + Send>,
}

impl std::fmt::Debug for ArrivingBundle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ArrivingBundle")
            .field("folder", &self.folder)
            .finish_non_exhaustive()
    }
}

/// An [`ArrivingBundle`] in a run's settings (which are shared and cloned): the run that
/// receives its packages takes it.
#[derive(Debug, Clone)]
pub struct BundleArrival(std::sync::Arc<std::sync::Mutex<Option<ArrivingBundle>>>);

impl BundleArrival {
    pub fn new(bundle: ArrivingBundle) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(Some(bundle))))
    }

    /// The bundle, to the first who asks; `None` after.
    pub fn take(&self) -> Option<ArrivingBundle> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// What the rest of a bundle brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Packages written into the bundle's folder.
    pub written: usize,
    /// Packages passed over: the node has them unpacked and the run needs them no more.
    pub in_place: usize,
}

/// Reads the head of the bundle from `reader` into `folder` (laid out as an extracted bundle),
/// checking the lock (with trusted keys, its signature) before any package: what a plan
/// needs. The packages come with [`ArrivingBundle::receive`].
pub fn receive_head(
    mut reader: Box<dyn Read + Send>,
    folder: &Path,
    trust: &Trust,
) -> Result<ArrivingBundle, StreamError> {
    // What an earlier run left is not counted on: the bundle is read whole again, and the
    // room it takes is checked on an empty folder. (Files already moved into place are the
    // add-ons', linked or renamed away from here.)
    fs_err::create_dir_all(folder).map_err(write_error(folder))?;
    clear(folder).map_err(write_error(folder))?;
    let mut head = tempfile::tempfile_in(folder).map_err(write_error(folder))?;
    walk(
        Spooling {
            inner: &mut reader,
            spool: &mut head,
            spooled: 0,
        },
        folder,
        trust,
        None,
    )?;
    std::io::Seek::rewind(&mut head).map_err(write_error(folder))?;
    Ok(ArrivingBundle {
        folder: folder.to_path_buf(),
        head,
        rest: reader,
    })
}

impl ArrivingBundle {
    /// Receives the whole bundle, checking each file as it is written. `in_place` gives, for
    /// an add-on the run needs no package of, its unpacked folder on this node: its package
    /// is passed over, and an image blob it shares with a package that is written is linked
    /// from there (once its digest is checked) rather than written again.
    pub fn receive(self, trust: &Trust, in_place: InPlace<'_>) -> Result<Received, StreamError> {
        walk(
            self.head.chain(self.rest),
            &self.folder,
            trust,
            Some(in_place),
        )
    }
}

/// For an add-on the run needs no package of, its unpacked folder on this node.
pub type InPlace<'a> = &'a dyn Fn(&LockedAddon) -> Option<PathBuf>;

/// Records what is read from `inner` into `spool`, at most [`MAX_HEAD`] bytes.
struct Spooling<'a> {
    inner: &'a mut dyn Read,
    spool: &'a mut std::fs::File,
    spooled: u64,
}

impl Read for Spooling<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.spooled += count as u64;
        if self.spooled > MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("more than {} MiB before its first package", MAX_HEAD >> 20),
            ));
        }
        std::io::Write::write_all(self.spool, &buffer[..count])?;
        Ok(count)
    }
}

/// Reads the bundle into `folder`: without `in_place`, its head alone (up to the first
/// package, the room checked, its files written, its lock checked); with it (see
/// [`ArrivingBundle::receive`]), the whole bundle again from the same bytes, the head's files
/// read for their checks but neither written nor the room checked a second time.
fn walk(
    reader: impl Read,
    folder: &Path,
    trust: &Trust,
    in_place: Option<InPlace<'_>>,
) -> Result<Received, StreamError> {
    let head_only = in_place.is_none();
    let mut archive =
        berth_formats::archive::open(std::io::BufReader::with_capacity(1 << 20, reader))
            .map_err(StreamError::Archive)?;
    let mut lock: Option<Lock> = None;
    let mut small: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // Each package's files still to come but its image blobs (by its folder, then by path in
    // the package), once its index is checked against the lock; the image blobs the indexes
    // seen so far list, and those written.
    let mut packages: BTreeMap<String, BTreeMap<String, (Sha256Digest, u64)>> = BTreeMap::new();
    let mut blobs_listed: BTreeMap<String, (Sha256Digest, u64)> = BTreeMap::new();
    let mut blobs_written: BTreeSet<String> = BTreeSet::new();
    // The packages passed over (by folder), and where the node already has each image blob
    // they list.
    let mut passed_over: BTreeSet<String> = BTreeSet::new();
    let mut blobs_in_place: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut room_checked = false;
    for entry in archive.entries().map_err(StreamError::Broken)? {
        let mut entry = entry.map_err(StreamError::Broken)?;
        let path = entry
            .path()
            .map_err(StreamError::Broken)?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        let refused = |why: &str| StreamError::Refused {
            path: path.clone(),
            why: why.to_string(),
        };
        if let Some(why) = berth_formats::archive::unsafe_entry(&mut entry) {
            return Err(refused(why));
        }
        match entry.header().entry_type() {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular => {}
            other => return Err(refused(&format!("a {other:?} entry; a bundle holds files"))),
        }
        if path.is_empty()
            || !Path::new(&path)
                .components()
                .all(|component| matches!(component, Component::Normal(_)))
        {
            return Err(refused("not a path inside the bundle"));
        }
        let size = entry.size();
        let root = path.strip_suffix(SIGNATURE_SUFFIX).unwrap_or(&path);
        if path == CONTENTS_FILE {
            if room_checked {
                return Err(refused("a bundle has one"));
            }
            let bytes = read_small(&mut entry, &path, MAX_SMALL)?;
            let contents: Contents = serde_json::from_slice(&bytes)
                .map_err(|error| refused(&format!("not what Berth writes there: {error}")))?;
            if head_only {
                check_room(folder, contents.installed_bytes)?;
            }
            room_checked = true;
            continue;
        }
        if [LOCK_FILE, VERSIONS_FILE, SPEC_FILE].contains(&root) {
            if small.contains_key(&path) || !packages.is_empty() {
                return Err(refused("a bundle has one, before its packages"));
            }
            let bytes = read_small(&mut entry, &path, MAX_SMALL)?;
            if head_only {
                write_file(&folder.join(&path), &bytes)?;
            }
            small.insert(path.clone(), bytes);
            continue;
        }
        if path.starts_with("addons/") {
            return Err(refused(
                "this is a package, not a bundle: give a package's dist with --dist, or make a bundle with `berth-build bundle`",
            ));
        }
        // The head ends where the packages begin.
        if head_only
            && [bundle::PACKAGES_DIR, bundle::BLOBS_DIR]
                .iter()
                .any(|top| path.starts_with(&format!("{top}/")))
        {
            if !room_checked {
                return Err(refused(OLDER_BUNDLE));
            }
            checked_lock(&small, folder, trust)?;
            return Ok(Received::default());
        }
        let Some(rest) = path.strip_prefix(&format!("{}/", bundle::PACKAGES_DIR)) else {
            if !path.contains('/') {
                // The scripts, the binary, the list of files: not what an install reads.
                if !(path.ends_with(".sh") || [bundle::BINARY, bundle::FILES_LIST].contains(&root))
                {
                    return Err(refused("not part of a bundle's layout"));
                }
                continue;
            }
            let Some(hex) = path.strip_prefix(&format!("{}/", bundle::BLOBS_DIR)) else {
                return Err(refused("not part of a bundle's layout"));
            };
            let Some(&(digest, expected_size)) = blobs_listed.get(hex) else {
                return Err(refused("no package's index before it lists this blob"));
            };
            if size != expected_size {
                return Err(refused("its size is not the one its package's index gives"));
            }
            if !blobs_written.insert(hex.to_string()) {
                return Err(refused("a bundle holds each image blob once"));
            }
            let to = folder.join(&path);
            if !blobs_in_place
                .get(hex)
                .is_some_and(|from| link_checked(from, &to, &digest))
            {
                copy_checked(&mut entry, &to, &digest, &path)?;
            }
            continue;
        };
        let Some((folder_name, relative)) = rest.split_once('/') else {
            // A bill of materials beside a package's folder.
            continue;
        };
        if !room_checked {
            return Err(refused(OLDER_BUNDLE));
        }
        if relative == PACKAGE_INDEX_FILE {
            let lock = match &lock {
                Some(lock) => lock,
                None => lock.insert(checked_lock(&small, folder, trust)?),
            };
            let addon = lock
                .addons
                .iter()
                .find(|addon| {
                    bundle::package_dir(&addon.name, &addon.version)
                        == format!("{}/{folder_name}", bundle::PACKAGES_DIR)
                })
                .ok_or_else(|| refused("its package is not one the lock pins"))?;
            if packages.contains_key(folder_name) {
                return Err(refused("its package's index comes twice"));
            }
            let bytes = read_small(&mut entry, &path, MAX_INDEX_BYTES)?;
            let actual = Sha256Digest::of(&bytes);
            if Some(actual) != addon.index_sha256 {
                return Err(refused(&format!(
                    "its sha256 is {actual}, the lock pins {}",
                    addon
                        .index_sha256
                        .map_or_else(|| "none".to_string(), |digest| digest.to_string())
                )));
            }
            let index =
                PackageIndex::from_bytes(&bytes).map_err(|error| refused(&error.to_string()))?;
            // A package the run needs not is checked as it passes, but not written.
            let unpacked = in_place.and_then(|in_place| in_place(addon));
            match &unpacked {
                Some(_) => {
                    passed_over.insert(folder_name.to_string());
                }
                None => write_file(&folder.join(&path), &bytes)?,
            }
            // A blob is named by its digest, so every index that lists it agrees on its bytes:
            // the one copy checked as it arrives is each package's.
            for file in &index.files {
                if let Some(hex) = bundle::shared_blob(&file.path) {
                    let listed = blobs_listed
                        .entry(hex.to_string())
                        .or_insert((file.sha256, file.size));
                    if file.sha256.hex() != hex || *listed != (file.sha256, file.size) {
                        return Err(refused(&format!(
                            "it lists the image blob {hex} with sha256 {} and {} bytes, not what its name or another index says",
                            file.sha256, file.size
                        )));
                    }
                    if let Some(unpacked) = &unpacked {
                        blobs_in_place
                            .entry(hex.to_string())
                            .or_insert_with(|| unpacked.join(&file.path));
                    }
                }
            }
            // Image blobs are awaited once, in `blobs_listed`, whichever packages list them.
            let pending = index
                .files
                .into_iter()
                .filter(|file| bundle::shared_blob(&file.path).is_none())
                .map(|file| (file.path, (file.sha256, file.size)))
                .collect();
            packages.insert(folder_name.to_string(), pending);
            continue;
        }
        if bundle::shared_blob(relative).is_some() {
            return Err(refused(&format!(
                "a bundle keeps image blobs in {}/, not in a package's folder",
                bundle::BLOBS_DIR
            )));
        }
        let pending = packages
            .get_mut(folder_name)
            .ok_or_else(|| refused("it comes before its package's package.json"))?;
        let Some((digest, expected_size)) = pending.remove(relative) else {
            return Err(refused(
                "its package's index does not list it (or lists it once)",
            ));
        };
        if size != expected_size {
            return Err(refused("its size is not the one its package's index gives"));
        }
        if !passed_over.contains(folder_name) {
            copy_checked(&mut entry, &folder.join(&path), &digest, &path)?;
        }
    }
    berth_formats::archive::finish(archive).map_err(StreamError::Broken)?;
    let lock = match lock {
        Some(lock) => lock,
        None => checked_lock(&small, folder, trust)?,
    };
    for addon in &lock.addons {
        let name = bundle::package_dir(&addon.name, &addon.version);
        let folder_name = name.trim_start_matches(&format!("{}/", bundle::PACKAGES_DIR));
        let Some(pending) = packages.get(folder_name) else {
            return Err(StreamError::Incomplete {
                what: format!("{} {}", addon.name, addon.version),
            });
        };
        if let Some(missing) = pending.keys().next() {
            return Err(StreamError::Incomplete {
                what: format!("{name}/{missing}"),
            });
        }
    }
    if let Some(missing) = blobs_listed
        .keys()
        .find(|hex| !blobs_written.contains(hex.as_str()))
    {
        return Err(StreamError::Incomplete {
            what: bundle::blob_path(missing),
        });
    }
    Ok(Received {
        written: packages.len() - passed_over.len(),
        in_place: passed_over.len(),
    })
}

/// Empties `folder`, which stays (it may be a mount point of its own).
pub fn clear(folder: &Path) -> std::io::Result<()> {
    for entry in fs_err::read_dir(folder)? {
        let path = entry?.path();
        if fs_err::symlink_metadata(&path)?.is_dir() {
            fs_err::remove_dir_all(&path)?;
        } else {
            fs_err::remove_file(&path)?;
        }
    }
    Ok(())
}

/// The bundle's lock, checked against its signature (with trusted keys) before any package
/// file is written.
fn checked_lock(
    small: &BTreeMap<String, Vec<u8>>,
    folder: &Path,
    trust: &Trust,
) -> Result<Lock, StreamError> {
    let bytes = small
        .get(LOCK_FILE)
        .ok_or_else(|| StreamError::Incomplete {
            what: format!("its {LOCK_FILE}, which comes before the packages"),
        })?;
    let signature = format!("{LOCK_FILE}{SIGNATURE_SUFFIX}");
    trust.check_signature(
        &folder.join(LOCK_FILE).display().to_string(),
        bytes,
        &folder.join(&signature).display().to_string(),
        small.get(&signature).map(Vec::as_slice),
    )?;
    Lock::parse(LOCK_FILE, bytes).map_err(|error| StreamError::Refused {
        path: LOCK_FILE.into(),
        why: error.to_string(),
    })
}

/// Refuses a bundle whose packages would not fit beside `folder`.
fn check_room(folder: &Path, needed: u64) -> Result<(), StreamError> {
    let needed = needed.saturating_add(DISK_RESERVE);
    let available = free_space(folder);
    if needed > available {
        return Err(StreamError::NoRoom {
            folder: folder.to_path_buf(),
            needed: needed.div_ceil(1 << 20),
            available: available / (1 << 20),
        });
    }
    Ok(())
}

fn read_small(entry: &mut impl Read, path: &str, most: u64) -> Result<Vec<u8>, StreamError> {
    let mut bytes = Vec::new();
    entry
        .take(most + 1)
        .read_to_end(&mut bytes)
        .map_err(StreamError::Broken)?;
    if bytes.len() as u64 > most {
        return Err(StreamError::Refused {
            path: path.to_string(),
            why: "larger than any such file".into(),
        });
    }
    Ok(bytes)
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> StreamError + '_ {
    move |source| StreamError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StreamError> {
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(write_error(parent))?;
    }
    fs_err::write(path, bytes).map_err(write_error(path))
}

/// Links the node's copy `from` of an image blob to `to` when it still has `digest`; false
/// when it does not (or cannot be linked), and the blob is then written from the bundle.
fn link_checked(from: &Path, to: &Path, digest: &Sha256Digest) -> bool {
    Sha256Digest::of_file(from).is_ok_and(|actual| actual == *digest)
        && to
            .parent()
            .is_some_and(|parent| fs_err::create_dir_all(parent).is_ok())
        && fs_err::hard_link(from, to).is_ok()
}

/// Writes `entry` to `to`, refusing (and removing) it unless it has `digest`.
fn copy_checked(
    entry: &mut impl Read,
    to: &Path,
    digest: &Sha256Digest,
    path: &str,
) -> Result<(), StreamError> {
    if let Some(parent) = to.parent() {
        fs_err::create_dir_all(parent).map_err(write_error(parent))?;
    }
    // Written beside, and renamed over only once it has its digest: a name that is linked to
    // an installed file keeps that file whole.
    let partial = PathBuf::from(format!("{}.berth-partial", to.display()));
    let mut reader = HashingReader::new(entry);
    let mut file = fs_err::File::create(&partial).map_err(write_error(&partial))?;
    std::io::copy(&mut reader, &mut file).map_err(StreamError::Broken)?;
    drop(file);
    let (actual, _) = reader.finish().map_err(StreamError::Broken)?;
    if &actual != digest {
        let _ = fs_err::remove_file(&partial);
        return Err(StreamError::Refused {
            path: path.to_string(),
            why: format!("its sha256 is {actual}, its package's index says {digest}"),
        });
    }
    fs_err::rename(&partial, to).map_err(write_error(to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_formats::archive::TarWriter;
    use berth_formats::compression::{Encoder, Setting};
    use berth_formats::lock::LOCK_SCHEMA_VERSION;
    use berth_formats::package_index::{FileRecord, SCHEMA_VERSION};

    /// Two packages sharing one image blob, as `berth-build bundle` lays them out: the
    /// bundle's entries in order, each as (path, bytes).
    fn bundle_entries() -> Vec<(String, Vec<u8>)> {
        let blob = b"a layer both images use".to_vec();
        let hex = Sha256Digest::of(&blob).hex();
        let mut lock = Lock {
            schema_version: LOCK_SCHEMA_VERSION,
            id: "abc1234".into(),
            addons: Vec::new(),
        };
        let mut packages = Vec::new();
        for name in ["first", "second"] {
            let script = format!("echo {name}\n").into_bytes();
            let index = PackageIndex {
                schema_version: SCHEMA_VERSION,
                name: name.into(),
                version: "1.0.0".into(),
                arch: "amd64".into(),
                inputs_digest: Sha256Digest::of(name.as_bytes()),
                files: vec![
                    FileRecord {
                        path: format!("images/blobs/sha256/{hex}"),
                        size: blob.len() as u64,
                        sha256: Sha256Digest::of(&blob),
                        executable: false,
                    },
                    FileRecord {
                        path: "install.sh".into(),
                        size: script.len() as u64,
                        sha256: Sha256Digest::of(&script),
                        executable: true,
                    },
                ],
                images: vec![],
                host_packages: Default::default(),
            }
            .to_bytes();
            lock.addons.push(LockedAddon {
                name: name.into(),
                version: "1.0.0".into(),
                sha256: Sha256Digest::of(b"package"),
                compression: Default::default(),
                index_sha256: Some(Sha256Digest::of(&index)),
            });
            let folder = bundle::package_dir(name, "1.0.0");
            packages.push((format!("{folder}/{PACKAGE_INDEX_FILE}"), index));
            if name == "first" {
                packages.push((bundle::blob_path(&hex), blob.clone()));
            }
            packages.push((format!("{folder}/install.sh"), script));
        }
        let contents = serde_json::to_vec(&Contents {
            installed_bytes: 1 << 10,
        })
        .unwrap();
        [
            (CONTENTS_FILE.to_string(), contents),
            (LOCK_FILE.to_string(), lock.to_bytes()),
        ]
        .into_iter()
        .chain(packages)
        .collect()
    }

    fn receive_entries(entries: &[(String, Vec<u8>)]) -> Result<tempfile::TempDir, StreamError> {
        let mut writer = TarWriter::over(Encoder::new(Vec::new(), Setting::gzip(1), 1).unwrap(), 0);
        for (path, bytes) in entries {
            writer
                .append_file(path, bytes.len() as u64, false, bytes.as_slice())
                .unwrap();
        }
        let archive = writer.finish().unwrap();
        let root = tempfile::tempdir().unwrap();
        let trust = Trust::load(&crate::node::layout::Layout::new(root.path()), &[], None).unwrap();
        let folder = root.path().join("received");
        receive_head(Box::new(std::io::Cursor::new(archive)), &folder, &trust)?
            .receive(&trust, &|_| None)?;
        Ok(root)
    }

    /// What receiving `entries` is refused with.
    fn refusal(entries: &[(String, Vec<u8>)]) -> String {
        receive_entries(entries).unwrap_err().to_string()
    }

    fn is_blob(path: &str) -> bool {
        path.starts_with(&format!("{}/", bundle::BLOBS_DIR))
    }

    #[test]
    fn a_shared_blob_is_written_once_for_every_package_that_lists_it() {
        let entries = bundle_entries();
        let root = receive_entries(&entries).unwrap();
        let (blob, bytes) = entries.iter().find(|(path, _)| is_blob(path)).unwrap();
        assert_eq!(
            &fs_err::read(root.path().join("received").join(blob)).unwrap(),
            bytes
        );
    }

    #[test]
    fn a_listed_blob_the_bundle_lacks_or_repeats_is_refused_naming_it() {
        let entries = bundle_entries();
        let blob = entries.iter().position(|(path, _)| is_blob(path)).unwrap();

        let mut missing = entries.clone();
        let (path, _) = missing.remove(blob);
        let error = receive_entries(&missing).unwrap_err();
        assert!(
            matches!(&error, StreamError::Incomplete { what } if *what == path),
            "{error}"
        );

        let mut twice = entries.clone();
        twice.push(entries[blob].clone());
        let error = refusal(&twice);
        assert!(error.contains("each image blob once"), "{error}");

        // Listed under a name that is not its digest.
        let mut misnamed = entries.clone();
        let other = Sha256Digest::of(b"another layer").hex();
        for (path, bytes) in &mut misnamed {
            if path.ends_with(PACKAGE_INDEX_FILE) {
                let text = String::from_utf8(bytes.clone()).unwrap();
                let hex = Sha256Digest::of(&entries[blob].1).hex();
                *bytes = text
                    .replacen(&format!("sha256/{hex}"), &format!("sha256/{other}"), 1)
                    .into_bytes();
            }
        }
        let lock_at = misnamed
            .iter()
            .position(|(path, _)| path == LOCK_FILE)
            .unwrap();
        let mut lock = Lock::parse(LOCK_FILE, &misnamed[lock_at].1).unwrap();
        for (addon, (_, index)) in lock.addons.iter_mut().zip(
            misnamed
                .iter()
                .filter(|(path, _)| path.ends_with(PACKAGE_INDEX_FILE)),
        ) {
            addon.index_sha256 = Some(Sha256Digest::of(index));
        }
        misnamed[lock_at].1 = lock.to_bytes();
        let error = refusal(&misnamed);
        assert!(
            error.contains("not what its name or another index says"),
            "{error}"
        );

        // Before any index lists it.
        let mut early = entries.clone();
        let moved = early.remove(blob);
        early.insert(2, moved);
        let error = refusal(&early);
        assert!(
            error.contains("no package's index before it lists"),
            "{error}"
        );
    }
}
