//! The run's log file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use fs_err::os::unix::fs::OpenOptionsExt as _;

/// The run's log, created once the host preflights have passed (or at the first line the
/// session prints, if that comes first), so that a run they stop leaves neither a log nor a
/// log folder behind. Hook output may show secrets: the log is root's alone.
#[derive(Clone)]
pub(super) struct RunLog(Arc<Mutex<RunLogState>>);

struct RunLogState {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Whether this run made the log folder, which [`RunLog::discard`] then removes.
    made_folder: bool,
}

impl RunLog {
    pub(super) fn new(path: PathBuf) -> Self {
        RunLog(Arc::new(Mutex::new(RunLogState {
            path,
            file: None,
            made_folder: false,
        })))
    }

    pub(super) fn open(&self) -> std::io::Result<()> {
        let mut state = self.0.lock().expect("log lock");
        if state.file.is_none() {
            let folder = state
                .path
                .parent()
                .expect("a log has a folder")
                .to_path_buf();
            state.made_folder = !folder.exists();
            crate::files::private_dir(&folder)?;
            let file = fs_err::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&state.path)?;
            state.file = Some(file.into_parts().0);
        }
        Ok(())
    }

    /// Removes what the log wrote, and its folder if this run made it.
    pub(super) fn discard(&self) {
        let mut state = self.0.lock().expect("log lock");
        if state.file.take().is_some() {
            let _ = fs_err::remove_file(&state.path);
            if state.made_folder
                && let Some(folder) = state.path.parent()
            {
                let _ = fs_err::remove_dir(folder);
            }
        }
    }
}

impl Write for RunLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.open()?;
        let mut state = self.0.lock().expect("log lock");
        state.file.as_mut().expect("opened").write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.0.lock().expect("log lock").file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}
