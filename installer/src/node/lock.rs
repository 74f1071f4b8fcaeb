//! The lock that lets one run at a time change the node: an exclusive `flock` on one file,
//! which says who holds it.

use std::path::{Path, PathBuf};

use berth_formats::time::now;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another berth run holds {path}: {holder}\nhint: wait for it to finish; the lock is freed when that process ends"
    )]
    Locked { path: PathBuf, holder: String },
    #[error("failed to lock {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An exclusive lock on the node, held until dropped or until the process ends (even by
/// `kill -9`: the kernel releases it). A run that leaves nothing on the node (it failed
/// before anything was written) takes its lock file and the folder it made away with it.
pub struct NodeLock {
    lock: Option<nix::fcntl::Flock<std::fs::File>>,
    path: PathBuf,
    /// The folders the lock made, deepest first.
    made: Vec<PathBuf>,
}

impl Drop for NodeLock {
    fn drop(&mut self) {
        let Some(folder) = self.path.parent() else {
            return;
        };
        let only_the_lock = fs_err::read_dir(folder).is_ok_and(|mut entries| {
            entries.all(|entry| entry.is_ok_and(|entry| entry.path() == self.path))
        });
        // Unlinked while still held: a run that opened it meanwhile sees it is no longer the
        // node's lock file, and opens the new one (see `acquire`).
        if only_the_lock && fs_err::remove_file(&self.path).is_ok() {
            for made in &self.made {
                if fs_err::remove_dir(made).is_err() {
                    break;
                }
            }
        }
        drop(self.lock.take());
    }
}

impl NodeLock {
    /// Takes the lock at once or fails, naming who holds it. From then on SIGINT, SIGTERM and
    /// SIGHUP stop the run cleanly (see [`crate::interrupt`]).
    pub fn acquire(path: &Path, holder: &str) -> Result<Self, LockError> {
        let lock_error = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        crate::interrupt::install().map_err(lock_error)?;
        let made: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .take_while(|folder| !folder.as_os_str().is_empty() && !folder.exists())
            .map(Path::to_path_buf)
            .collect();
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).map_err(lock_error)?;
        }
        // A lock taken on a file another run unlinked meanwhile (see `Drop`) guards nothing:
        // the file at the path is opened again.
        for _ in 0..10 {
            let lock = Self::lock_file(path, &lock_error)?;
            let same = match (lock.metadata(), fs_err::metadata(path)) {
                (Ok(held), Ok(now)) => {
                    use std::os::unix::fs::MetadataExt as _;
                    (held.dev(), held.ino()) == (now.dev(), now.ino())
                }
                _ => false,
            };
            if same {
                let mut lock = lock;
                let record = format!("pid {} ({holder}) since {}\n", std::process::id(), now());
                lock.set_len(0).map_err(lock_error)?;
                std::io::Write::write_all(&mut *lock, record.as_bytes()).map_err(lock_error)?;
                return Ok(Self {
                    lock: Some(lock),
                    path: path.to_path_buf(),
                    made,
                });
            }
        }
        Err(lock_error(std::io::Error::other(
            "the lock file kept being replaced while it was taken",
        )))
    }

    /// An exclusive flock of the file at `path`, waited for a moment.
    fn lock_file(
        path: &Path,
        lock_error: &dyn Fn(std::io::Error) -> LockError,
    ) -> Result<nix::fcntl::Flock<std::fs::File>, LockError> {
        let mut file = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(lock_error)?
            .into_parts()
            .0;
        // `berth status` takes the lock shared for an instant (`is_held`): a run starting
        // then tries again for a moment before it says another run holds it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        loop {
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(lock),
                Err((returned, nix::errno::Errno::EWOULDBLOCK))
                    if std::time::Instant::now() < deadline =>
                {
                    file = returned;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    let holder = fs_err::read_to_string(path).unwrap_or_default();
                    return Err(LockError::Locked {
                        path: path.to_path_buf(),
                        holder: holder.trim().to_string(),
                    });
                }
                Err((_, errno)) => return Err(lock_error(errno.into())),
            }
        }
    }

    /// Whether a run holds the lock at `path` now (reads only: a shared lock is tried).
    pub fn is_held(path: &Path) -> bool {
        let Ok(file) = fs_err::File::open(path).map(|file| file.into_parts().0) else {
            return false;
        };
        matches!(
            nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock),
            Err((_, nix::errno::Errno::EWOULDBLOCK))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_that_guarded_nothing_leaves_nothing_and_a_second_run_is_refused_meanwhile() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("var/lib/berth/lock");
        let held = NodeLock::acquire(&path, "first").unwrap();
        let error = NodeLock::acquire(&path, "second").err().unwrap();
        assert!(error.to_string().contains("(first)"), "{error}");
        drop(held);
        assert!(!root.path().join("var").exists());

        // Beside state, the file stays.
        let held = NodeLock::acquire(&path, "first").unwrap();
        fs_err::write(root.path().join("var/lib/berth/installer.json"), "{}").unwrap();
        drop(held);
        assert!(path.exists());
        let again = NodeLock::acquire(&path, "again").unwrap();
        assert!(NodeLock::is_held(&path));
        drop(again);
    }
}
