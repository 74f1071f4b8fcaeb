//! A store in a local folder: each key is a path below it.

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;

use super::{Put, StoreError};

pub struct LocalStore {
    root: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        location: path.display().to_string(),
        source,
    }
}

impl LocalStore {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    pub fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// Copies through a temporary file renamed into place, so a reader never sees half a file.
    pub async fn put(
        &self,
        key: &str,
        source: &Path,
        digest: Sha256Digest,
    ) -> Result<Put, StoreError> {
        let destination = self.path(key);
        let source = source.to_path_buf();
        tokio::task::spawn_blocking(move || {
            if destination.exists() {
                let file = fs_err::File::open(&destination).map_err(io(&destination))?;
                if Sha256Digest::of_reader(file).map_err(io(&destination))? == digest {
                    return Ok(Put::Unchanged);
                }
            }
            let parent = destination.parent().expect("a key has a folder");
            fs_err::create_dir_all(parent).map_err(io(parent))?;
            let temporary = tempfile::NamedTempFile::new_in(parent).map_err(io(parent))?;
            fs_err::copy(&source, temporary.path()).map_err(io(&source))?;
            temporary
                .persist(&destination)
                .map_err(|error| io(&destination)(error.error))?;
            Ok(Put::Written)
        })
        .await
        .expect("the copy does not panic")
    }

    pub async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key);
        match fs_err::tokio::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io(&path)(error)),
        }
    }

    pub async fn reader(
        &self,
        key: &str,
    ) -> Result<Box<dyn tokio::io::AsyncRead + Send + Unpin>, StoreError> {
        let path = self.path(key);
        match fs_err::tokio::File::open(&path).await {
            Ok(file) => Ok(Box::new(file)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::Missing {
                    location: path.display().to_string(),
                })
            }
            Err(error) => Err(io(&path)(error)),
        }
    }
}
