//! A content-addressed blob cache shared by every build on the machine.
//!
//! Image blobs and downloaded assets are stored once under `blobs/sha256/<hex>`, named by the
//! digest of their content, which is checked before anything is stored. A rebuild of unchanged
//! images therefore reads the cache instead of the network, and two add-ons that share a layer
//! download it once.

use std::io;
use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::digest::HashingWriter;
use tempfile::NamedTempFile;

/// The cache root and its layout.
#[derive(Debug, Clone)]
pub struct BlobCache {
    root: PathBuf,
}

impl BlobCache {
    /// Opens (and creates) a cache at `root`.
    pub fn open(root: &Path) -> io::Result<Self> {
        fs_err::create_dir_all(root.join("blobs/sha256"))?;
        fs_err::create_dir_all(root.join("tmp"))?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// `$XDG_CACHE_HOME/berth` (or `~/.cache/berth`), else a folder under the system temp dir.
    pub fn default_root() -> PathBuf {
        dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("berth")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the blob with `digest` lives (whether or not it is there yet).
    pub fn path(&self, digest: &Sha256Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    pub fn contains(&self, digest: &Sha256Digest) -> bool {
        self.path(digest).is_file()
    }

    /// A temporary file on the cache's file system, removed unless committed.
    pub fn temp_file(&self) -> io::Result<NamedTempFile> {
        NamedTempFile::new_in(self.root.join("tmp"))
    }

    /// A temporary folder on the cache's file system, removed when dropped.
    pub fn temp_dir(&self) -> io::Result<tempfile::TempDir> {
        tempfile::TempDir::new_in(self.root.join("tmp"))
    }

    /// Moves a fully written and verified temporary file into place under `digest`.
    pub fn commit(&self, file: NamedTempFile, digest: &Sha256Digest) -> io::Result<PathBuf> {
        let path = self.path(digest);
        file.persist(&path).map_err(|error| error.error)?;
        Ok(path)
    }

    /// Stores `bytes` and returns their digest.
    pub fn insert_bytes(&self, bytes: &[u8]) -> io::Result<Sha256Digest> {
        let digest = Sha256Digest::of(bytes);
        if !self.contains(&digest) {
            let mut file = self.temp_file()?;
            io::Write::write_all(&mut file, bytes)?;
            self.commit(file, &digest)?;
        }
        Ok(digest)
    }

    /// Stores everything `reader` yields and returns its digest and size.
    pub fn insert_reader(&self, reader: &mut impl io::Read) -> io::Result<(Sha256Digest, u64)> {
        let file = self.temp_file()?;
        let mut hashing = HashingWriter::new(file);
        io::copy(reader, &mut hashing)?;
        let (digest, size, file) = hashing.finish();
        if !self.contains(&digest) {
            self.commit(file, &digest)?;
        }
        Ok((digest, size))
    }

    /// Reads a cached blob whole (for small blobs such as manifests and configs).
    pub fn read(&self, digest: &Sha256Digest) -> io::Result<Vec<u8>> {
        fs_err::read(self.path(digest))
    }

    /// Drops a blob found corrupt, so the next build fetches it again.
    pub fn evict(&self, digest: &Sha256Digest) {
        let _ = fs_err::remove_file(self.path(digest));
    }
}
