//! Writing: entries sorted by path, every parent folder listed, owners 0 with no user or group
//! names, modes 0755 (folders and executables) or 0644, mtimes from `SOURCE_DATE_EPOCH`
//! (default 0), and a gzip header with no name and no time. The same inputs give the same
//! bytes on any machine.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::compression::{Encoder, Setting, all_cores};

use super::clean_archive_path;
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
    compression: Setting,
}

impl ReproducibleArchive {
    /// An empty archive whose entries get `mtime`, compressed as `compression` says.
    pub fn new(mtime: u64, compression: Setting) -> Self {
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

    /// Every entry, by path, in path order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Source)> {
        self.entries
            .iter()
            .map(|(path, source)| (path.as_str(), source))
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

    /// Writes the compressed tar to `out`; `progress` is called with the bytes of content
    /// copied. zstd compresses on every core (its output does not depend on how many).
    pub fn write<W: Write>(&self, out: W, progress: &mut dyn FnMut(u64)) -> Result<W, WriteError> {
        let encoder =
            Encoder::new(out, self.compression, all_cores()).map_err(|source| WriteError::Io {
                path: "(start of the compressed stream)".into(),
                source,
            })?;
        let mut writer = TarWriter::over(encoder, self.mtime);
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

/// A compressed tar written one entry at a time, every entry as reproducible archives have it:
/// owner 0, one mtime, mode 0644 or 0755, nothing taken from the host. [`ReproducibleArchive`]
/// writes through it in its sorted order; an airgap bundle writes through it as it streams.
pub struct TarWriter<W: Write> {
    builder: tar::Builder<Encoder<W>>,
    mtime: u64,
}

impl<W: Write> TarWriter<W> {
    /// A tar written through `encoder`.
    pub fn over(encoder: Encoder<W>, mtime: u64) -> Self {
        let mut builder = tar::Builder::new(encoder);
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

    /// Ends the tar and the compressed stream, and hands the output back.
    pub fn finish(self) -> Result<W, WriteError> {
        let encoder = self.builder.into_inner().map_err(|source| WriteError::Io {
            path: "(end of archive)".into(),
            source,
        })?;
        encoder.finish().map_err(|source| WriteError::Io {
            path: "(end of the compressed stream)".into(),
            source,
        })
    }
}

pub(super) fn mode(executable: bool) -> u32 {
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
