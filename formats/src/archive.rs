//! Gzipped tar archives: written reproducibly, read safely.
//!
//! Writing: entries are sorted by path, every parent folder is listed, owners are 0 with no
//! user or group names, modes are 0755 (folders and executables) or 0644, mtimes come from
//! `SOURCE_DATE_EPOCH` (default 0), and the gzip header carries no name and no time. The same
//! inputs therefore give the same bytes on any machine.
//!
//! Reading: an entry with an absolute path or `..`, a link that points outside the destination,
//! a path through a link, or a device node is refused before anything is written for it.
//!
//! A symbolic link's target is judged by what it resolves to, not by its text alone: a target
//! may climb (`../`) only at its start, and no higher than the link's own folder is deep, and
//! then only descend. Folders in the destination are real folders (an entry never passes
//! through a link, and a folder is never replaced), so a link climbs through real folders and
//! descends into the destination; a link it descends through obeys the same rule, so no chain of
//! links leads out (`x -> ../../..`, then `z -> d1/d2/x/../../..`, is refused at `z`). A hard
//! link's source must be a file reached through real folders alone.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;

use crate::digest::{HashingWriter, Sha256Digest};

/// Folder and executable mode.
const MODE_EXECUTABLE: u32 = 0o755;
/// Regular file mode.
const MODE_REGULAR: u32 = 0o644;

/// `SOURCE_DATE_EPOCH` if set to a number, else 0: the mtime of every archive entry.
pub fn source_date_epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Where an archive entry's content comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Directory,
    /// A file on disk; when `expected` is set its content is checked while it is copied.
    File {
        path: PathBuf,
        executable: bool,
        expected: Option<Sha256Digest>,
    },
    Bytes {
        data: Vec<u8>,
        executable: bool,
    },
    Symlink {
        target: String,
    },
}

/// Errors while assembling or writing an archive.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("`{path}` would be added to the archive twice")]
    Duplicate { path: String },
    #[error("`{folder}` is a file, but `{path}` needs it to be a folder")]
    FileInTheWay { folder: String, path: String },
    #[error("`{path}` is not a relative path inside the archive")]
    BadPath { path: String },
    #[error("{source_path} changed while it was archived: expected {expected}, read {actual}")]
    DigestMismatch {
        source_path: PathBuf,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("failed to write archive entry `{path}`")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// An archive described as a sorted set of entries, written in one pass.
#[derive(Debug, Clone)]
pub struct ReproducibleArchive {
    entries: BTreeMap<String, Source>,
    /// Written right after its parent folders, before everything else (an index read first).
    lead: Option<String>,
    mtime: u64,
    compression: u32,
}

impl ReproducibleArchive {
    /// An empty archive whose entries get `mtime` and whose gzip stream uses `compression` (0–9).
    pub fn new(mtime: u64, compression: u32) -> Self {
        Self {
            entries: BTreeMap::new(),
            lead: None,
            mtime,
            compression,
        }
    }

    /// Adds an entry and every parent folder it needs; a path added twice is an error
    /// (folders excepted), since two sources for one path means a packaging mistake.
    pub fn insert(&mut self, path: &str, source: Source) -> Result<(), WriteError> {
        let path = clean_archive_path(path).ok_or_else(|| WriteError::BadPath {
            path: path.to_string(),
        })?;
        let mut parent = Path::new(&path).parent();
        while let Some(folder) = parent.filter(|p| !p.as_os_str().is_empty()) {
            let folder_path = folder.to_string_lossy().into_owned();
            match self.entries.get(&folder_path) {
                Some(Source::Directory) => {}
                Some(_) => {
                    return Err(WriteError::FileInTheWay {
                        folder: folder_path,
                        path,
                    });
                }
                None => {
                    self.entries.insert(folder_path, Source::Directory);
                }
            }
            parent = folder.parent();
        }
        match self.entries.get(&path) {
            Some(Source::Directory) if source == Source::Directory => Ok(()),
            Some(_) => Err(WriteError::Duplicate { path }),
            None => {
                self.entries.insert(path, source);
                Ok(())
            }
        }
    }

    /// Adds an entry that is written first (after its parent folders), so a reader can find
    /// it without reading the rest.
    pub fn insert_lead(&mut self, path: &str, source: Source) -> Result<(), WriteError> {
        self.insert(path, source)?;
        self.lead = clean_archive_path(path);
        Ok(())
    }

    /// Paths in write order: the lead entry's folders and the lead entry, then all others sorted.
    fn order(&self) -> Vec<&String> {
        let mut first: Vec<&String> = Vec::new();
        if let Some(lead) = &self.lead {
            first.extend(self.entries.keys().filter(|path| {
                Path::new(lead.as_str()).starts_with(path.as_str()) && *path != lead
            }));
            first.extend(self.entries.get_key_value(lead).map(|(key, _)| key));
        }
        let rest = self.entries.keys().filter(|path| !first.contains(path));
        first.iter().copied().chain(rest).collect()
    }

    /// Writes the gzipped tar to `out`; `progress` is called with the bytes of content copied.
    pub fn write<W: Write>(&self, out: W, progress: &mut dyn FnMut(u64)) -> Result<W, WriteError> {
        let mut writer = TarGzWriter::new(out, self.mtime, self.compression);
        for path in self.order() {
            let io_error = |source| WriteError::Io {
                path: path.clone(),
                source,
            };
            match &self.entries[path] {
                Source::Directory => writer.append_dir(path).map_err(io_error)?,
                Source::Symlink { target } => {
                    writer.append_symlink(path, target).map_err(io_error)?;
                }
                Source::Bytes { data, executable } => {
                    writer
                        .append_file(path, data.len() as u64, *executable, data.as_slice())
                        .map_err(io_error)?;
                    progress(data.len() as u64);
                }
                Source::File {
                    path: source_path,
                    executable,
                    expected,
                } => {
                    let file = fs_err::File::open(source_path).map_err(io_error)?;
                    let size = file.metadata().map_err(io_error)?.len();
                    let mut reader = CheckingReader::new(file, progress);
                    writer
                        .append_file(path, size, *executable, &mut reader)
                        .map_err(io_error)?;
                    let actual = reader.finish();
                    if let Some(expected) = expected.filter(|expected| *expected != actual) {
                        return Err(WriteError::DigestMismatch {
                            source_path: source_path.clone(),
                            expected,
                            actual,
                        });
                    }
                }
            }
        }
        writer.finish()
    }
}

/// A gzipped tar written one entry at a time, every entry as reproducible archives have it:
/// owner 0, one mtime, mode 0644 or 0755, nothing taken from the host. [`ReproducibleArchive`]
/// writes through it in its sorted order; an airgap bundle writes through it as it streams.
pub struct TarGzWriter<W: Write> {
    builder: tar::Builder<flate2::write::GzEncoder<W>>,
    mtime: u64,
}

impl<W: Write> TarGzWriter<W> {
    pub fn new(out: W, mtime: u64, compression: u32) -> Self {
        let gzip = flate2::GzBuilder::new().write(out, Compression::new(compression));
        let mut builder = tar::Builder::new(gzip);
        builder.mode(tar::HeaderMode::Deterministic);
        Self { builder, mtime }
    }

    fn header(&self, kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(self.mtime);
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header
    }

    /// A regular file of `size` bytes read from `data`.
    pub fn append_file(
        &mut self,
        path: &str,
        size: u64,
        executable: bool,
        data: impl Read,
    ) -> io::Result<()> {
        let mut header = self.header(tar::EntryType::Regular, mode(executable), size);
        self.builder.append_data(&mut header, path, data)
    }

    pub fn append_dir(&mut self, path: &str) -> io::Result<()> {
        let mut header = self.header(tar::EntryType::Directory, MODE_EXECUTABLE, 0);
        self.builder
            .append_data(&mut header, format!("{path}/"), io::empty())
    }

    pub fn append_symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        let mut header = self.header(tar::EntryType::Symlink, 0o777, 0);
        self.builder.append_link(&mut header, path, target)
    }

    /// Ends the tar and the gzip stream, and hands the output back.
    pub fn finish(self) -> Result<W, WriteError> {
        let gzip = self.builder.into_inner().map_err(|source| WriteError::Io {
            path: "(end of archive)".into(),
            source,
        })?;
        gzip.finish().map_err(|source| WriteError::Io {
            path: "(end of gzip stream)".into(),
            source,
        })
    }
}

fn mode(executable: bool) -> u32 {
    if executable {
        MODE_EXECUTABLE
    } else {
        MODE_REGULAR
    }
}

/// Hashes what passes through and reports progress.
struct CheckingReader<'a, R> {
    inner: R,
    hashing: HashingWriter<io::Sink>,
    progress: &'a mut dyn FnMut(u64),
}

impl<'a, R: Read> CheckingReader<'a, R> {
    fn new(inner: R, progress: &'a mut dyn FnMut(u64)) -> Self {
        Self {
            inner,
            hashing: HashingWriter::new(io::sink()),
            progress,
        }
    }

    fn finish(self) -> Sha256Digest {
        self.hashing.finish().0
    }
}

impl<R: Read> Read for CheckingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buf)?;
        self.hashing.write_all(&buf[..count])?;
        (self.progress)(count as u64);
        Ok(count)
    }
}

/// Normalises an archive path: `/`-separated, relative, no `.` or `..`, no trailing `/`.
fn clean_archive_path(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Why an archive could not be read or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("refused archive entry `{entry}`: {reason}")]
    Unsafe { entry: String, reason: &'static str },
    #[error("failed to read the archive")]
    Read(#[source] io::Error),
    #[error("the archive expands past {limit} bytes, all the room there is for it")]
    TooLarge { limit: u64 },
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

/// Unpacks a gzipped tar into `destination`, refusing anything that would land outside it.
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
    let mut archive = tar::Archive::new(GzDecoder::new(reader));
    let mut written = Vec::new();
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
        let unsafe_entry = |reason| ExtractError::Unsafe {
            entry: raw.clone(),
            reason,
        };
        let Some(relative) = clean_archive_path(&raw).filter(|_| !raw.starts_with('/')) else {
            return Err(unsafe_entry("absolute path, `..`, or an empty name"));
        };
        let target = destination.join(&relative);
        let write_error = |source| ExtractError::Write {
            path: target.clone(),
            source,
        };
        prepare_parents(destination, &relative).map_err(|error| match error {
            Prepare::ThroughLink => unsafe_entry("its path passes through a link"),
            Prepare::Io(source) => ExtractError::Write {
                path: target.clone(),
                source,
            },
        })?;
        let entry_type = entry.header().entry_type();
        match entry_type {
            tar::EntryType::Directory => {
                if fs_err::symlink_metadata(&target).is_ok_and(|m| !m.is_dir()) {
                    return Err(unsafe_entry("a folder would replace a file or link"));
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
                    .ok_or_else(|| unsafe_entry("a link without a target"))?;
                let depth = Path::new(&relative).components().count() - 1;
                if !link_stays_inside(&link, depth) {
                    return Err(unsafe_entry(
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
                    .ok_or_else(|| {
                        unsafe_entry("a hard link that points outside the destination")
                    })?;
                let source = destination.join(&link);
                if passes_through_link(destination, &link)
                    || !fs_err::symlink_metadata(&source).is_ok_and(|m| m.is_file())
                {
                    return Err(unsafe_entry(
                        "a hard link to a file not yet unpacked, or reached through a link",
                    ));
                }
                remove_existing_file(&target).map_err(write_error)?;
                fs_err::hard_link(&source, &target).map_err(write_error)?;
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => continue,
            _ => return Err(unsafe_entry("a device, fifo or other special file")),
        }
        written.push(relative);
    }
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
    let mut archive = tar::Archive::new(GzDecoder::new(reader));
    for entry in archive.entries().map_err(ExtractError::Read)? {
        let mut entry = entry.map_err(ExtractError::Read)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if let Some(path) = clean_archive_path(&path).filter(|path| wanted(path)) {
            if entry.size() > max_bytes {
                return Err(ExtractError::TooLarge { limit: max_bytes });
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

#[cfg(test)]
mod tests;
