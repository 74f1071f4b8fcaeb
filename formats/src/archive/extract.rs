//! Reading: an entry with an absolute path or `..`, a link that points outside the
//! destination, a path through a link, or a device node is refused before anything is written
//! for it; see the module above for how links are judged.

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use std::collections::HashSet;

use super::clean_archive_path;
use super::read::{finish, open, unsafe_entry};
use super::write::mode;

/// Why an archive could not be read or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("refused archive entry `{entry}`: {reason}")]
    Unsafe { entry: String, reason: &'static str },
    #[error("failed to read the archive")]
    Read(#[source] io::Error),
    #[error("the archive expands past {limit} bytes, all the room there is for it")]
    TooLarge { limit: u64 },
    #[error("archive entry `{entry}` is larger than the {limit} bytes it may be")]
    EntryTooLarge { entry: String, limit: u64 },
    #[error("the archive has more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// How much an archive may unpack to.
#[derive(Debug, Clone, Copy)]
pub struct ExtractLimits {
    /// Bytes of file content, all entries together.
    pub max_bytes: u64,
    pub max_entries: usize,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_bytes: u64::MAX,
            max_entries: 1_000_000,
        }
    }
}

/// Unpacks a compressed tar (gzip or zstd, told by its first bytes) into `destination`, refusing anything that would land outside it.
/// Returns the paths written, in archive order.
pub fn extract(reader: impl Read, destination: &Path) -> Result<Vec<String>, ExtractError> {
    extract_within(reader, destination, ExtractLimits::default())
}

/// [`extract`], stopping with an error once the archive passes `limits`.
pub fn extract_within(
    reader: impl Read,
    destination: &Path,
    limits: ExtractLimits,
) -> Result<Vec<String>, ExtractError> {
    let mut archive = open(reader).map_err(ExtractError::Read)?;
    let mut written = Vec::new();
    let mut seen = HashSet::new();
    let mut budget = limits.max_bytes;
    for entry in archive.entries().map_err(ExtractError::Read)? {
        let mut entry = entry.map_err(ExtractError::Read)?;
        if written.len() >= limits.max_entries {
            return Err(ExtractError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let size = entry.header().size().map_err(ExtractError::Read)?;
        budget = budget.checked_sub(size).ok_or(ExtractError::TooLarge {
            limit: limits.max_bytes,
        })?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let refused = |reason| ExtractError::Unsafe {
            entry: raw.clone(),
            reason,
        };
        if let Some(reason) = unsafe_entry(&mut entry) {
            return Err(refused(reason));
        }
        let Some(relative) = clean_archive_path(&raw).filter(|_| !raw.starts_with('/')) else {
            return Err(refused("absolute path, `..`, or an empty name"));
        };
        // `tar` keeps the last of two entries of one path, a reader of the archive may take
        // the first: an archive that has two is not one archive.
        if !seen.insert(relative.clone()) {
            return Err(refused("the archive holds this path twice"));
        }
        let target = destination.join(&relative);
        let write_error = |source| ExtractError::Write {
            path: target.clone(),
            source,
        };
        prepare_parents(destination, &relative).map_err(|error| match error {
            Prepare::ThroughLink => refused("its path passes through a link"),
            Prepare::Io(source) => ExtractError::Write {
                path: target.clone(),
                source,
            },
        })?;
        let entry_type = entry.header().entry_type();
        match entry_type {
            tar::EntryType::Directory => {
                if fs_err::symlink_metadata(&target).is_ok_and(|m| !m.is_dir()) {
                    return Err(refused("a folder would replace a file or link"));
                }
                fs_err::create_dir_all(&target).map_err(write_error)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                remove_existing_file(&target).map_err(write_error)?;
                let executable = entry.header().mode().map_err(ExtractError::Read)? & 0o111 != 0;
                let mut file = fs_err::File::create(&target).map_err(write_error)?;
                io::copy(&mut entry, &mut file).map_err(write_error)?;
                set_mode(&target, mode(executable)).map_err(write_error)?;
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(ExtractError::Read)?
                    .ok_or_else(|| refused("a link without a target"))?;
                let depth = Path::new(&relative).components().count() - 1;
                if !link_stays_inside(&link, depth) {
                    return Err(refused(
                        "a link that points outside the destination, or climbs (`..`) after it descends",
                    ));
                }
                remove_existing_file(&target).map_err(write_error)?;
                fs_err::os::unix::fs::symlink(&link, &target).map_err(write_error)?;
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(ExtractError::Read)?
                    .and_then(|link| clean_archive_path(&link.to_string_lossy()))
                    .ok_or_else(|| refused("a hard link that points outside the destination"))?;
                let source = destination.join(&link);
                if passes_through_link(destination, &link)
                    || !fs_err::symlink_metadata(&source).is_ok_and(|m| m.is_file())
                {
                    return Err(refused(
                        "a hard link to a file not yet unpacked, or reached through a link",
                    ));
                }
                remove_existing_file(&target).map_err(write_error)?;
                fs_err::hard_link(&source, &target).map_err(write_error)?;
            }
            _ => return Err(refused("a device, fifo or other special file")),
        }
        written.push(relative);
    }
    finish(archive).map_err(ExtractError::Read)?;
    Ok(written)
}

/// Reads the first regular file whose cleaned path `wanted` accepts, without unpacking
/// anything; stops reading as soon as it is found.
pub fn read_entry(
    reader: impl Read,
    wanted: impl Fn(&str) -> bool,
) -> Result<Option<(String, Vec<u8>)>, ExtractError> {
    read_entry_within(reader, wanted, u64::MAX)
}

/// [`read_entry`], refusing a file larger than `max_bytes` before reading it.
pub fn read_entry_within(
    reader: impl Read,
    wanted: impl Fn(&str) -> bool,
    max_bytes: u64,
) -> Result<Option<(String, Vec<u8>)>, ExtractError> {
    let mut archive = open(reader).map_err(ExtractError::Read)?;
    for entry in archive.entries().map_err(ExtractError::Read)? {
        let mut entry = entry.map_err(ExtractError::Read)?;
        if let Some(reason) = unsafe_entry(&mut entry) {
            return Err(ExtractError::Unsafe {
                entry: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
                reason,
            });
        }
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if let Some(path) = clean_archive_path(&path).filter(|path| wanted(path)) {
            if entry.size() > max_bytes {
                return Err(ExtractError::EntryTooLarge {
                    entry: path,
                    limit: max_bytes,
                });
            }
            let mut bytes = Vec::new();
            (&mut entry)
                .take(max_bytes)
                .read_to_end(&mut bytes)
                .map_err(ExtractError::Read)?;
            return Ok(Some((path, bytes)));
        }
    }
    Ok(None)
}

/// Whether a link `depth` folders below the destination, pointing at `target`, stays inside
/// it: relative, climbing only at its start and at most `depth` folders, then only descending.
fn link_stays_inside(target: &Path, depth: usize) -> bool {
    let mut climbs = 0;
    let mut descended = false;
    for component in target.components() {
        match component {
            Component::ParentDir if !descended => climbs += 1,
            Component::Normal(_) => descended = true,
            Component::CurDir => {}
            // `..` after a name, or an absolute path.
            _ => return false,
        }
    }
    climbs <= depth
}

/// Whether any folder on the way to `relative` under `root` is a link (or not a folder).
fn passes_through_link(root: &Path, relative: &str) -> bool {
    parent_folders(root, relative)
        .any(|folder| !fs_err::symlink_metadata(folder).is_ok_and(|metadata| metadata.is_dir()))
}

/// The folders on the way from `root` to `relative`, nearest to `root` first.
fn parent_folders(root: &Path, relative: &str) -> impl Iterator<Item = PathBuf> {
    let mut current = root.to_path_buf();
    let parts: Vec<_> = Path::new(relative).components().collect();
    let parents = parts.len().saturating_sub(1);
    parts.into_iter().take(parents).map(move |part| {
        current.push(part.as_os_str());
        current.clone()
    })
}

enum Prepare {
    ThroughLink,
    Io(io::Error),
}

/// Creates the missing folders above `relative` under `root`, refusing a link (or a file)
/// where a folder should be, so that a file then written at `root/relative` stays under
/// `root`: the same rule an extraction keeps, for a caller writing files of its own.
pub fn create_parents_within(root: &Path, relative: &str) -> io::Result<()> {
    prepare_parents(root, relative).map_err(|error| match error {
        Prepare::ThroughLink => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{relative}: its path passes through a link, or a file where a folder should be"
            ),
        ),
        Prepare::Io(error) => error,
    })
}

/// Creates the parent folders of `relative` under `root`, refusing to go through a link.
fn prepare_parents(root: &Path, relative: &str) -> Result<(), Prepare> {
    for current in parent_folders(root, relative) {
        match fs_err::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => return Err(Prepare::ThroughLink),
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => return Err(Prepare::ThroughLink),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                fs_err::create_dir(&current).map_err(Prepare::Io)?;
            }
            Err(error) => return Err(Prepare::Io(error)),
        }
    }
    Ok(())
}

fn remove_existing_file(path: &Path) -> io::Result<()> {
    match fs_err::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a folder is in the way",
        )),
        Ok(_) => fs_err::remove_file(path),
        Err(_) => Ok(()),
    }
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
