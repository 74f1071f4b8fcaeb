//! The lock that lets one run at a time change the node: an exclusive `flock` on one file,
//! which says who holds it.

use std::path::{Path, PathBuf};

use crate::state::now;

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
/// `kill -9`: the kernel releases it).
pub struct NodeLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
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
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).map_err(lock_error)?;
        }
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
        let mut lock = loop {
            match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(lock) => break lock,
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
        };
        let record = format!("pid {} ({holder}) since {}\n", std::process::id(), now());
        lock.set_len(0).map_err(lock_error)?;
        std::io::Write::write_all(&mut *lock, record.as_bytes()).map_err(lock_error)?;
        Ok(Self { _lock: lock })
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
