//! The run's log file, and the record of its hooks.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use fs_err::os::unix::fs::OpenOptionsExt as _;

/// The run's log, created once the host preflights have passed (or at the first line the
/// session prints, if that comes first), so that a run they stop leaves neither a log nor a
/// log folder behind. Its name waits for the plan (an install or an upgrade); what the session
/// prints before then is kept until it has one. Hook output may show secrets: the log is
/// root's alone.
#[derive(Clone)]
pub(super) struct RunLog(Arc<Mutex<RunLogState>>);

/// What the log keeps before it has a name, at most.
const PENDING_BYTES: usize = 1 << 20;

struct RunLogState {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
    /// What was written before the log had a name.
    pending: Vec<u8>,
    /// Whether this run made the log folder, which [`RunLog::discard`] then removes.
    made_folder: bool,
    /// Discarded: what the session still prints (a killed bash's last lines) goes nowhere.
    discarded: bool,
}

impl RunLog {
    /// A log to be named later.
    pub(super) fn unnamed() -> Self {
        RunLog(Arc::new(Mutex::new(RunLogState {
            path: None,
            file: None,
            pending: Vec::new(),
            made_folder: false,
            discarded: false,
        })))
    }

    pub(super) fn name(&self, path: PathBuf) {
        self.0.lock().expect("log lock").path = Some(path);
    }

    /// Creates the log, once it has a name; what was written before goes in first.
    pub(super) fn open(&self) -> std::io::Result<()> {
        let mut state = self.0.lock().expect("log lock");
        if state.file.is_none()
            && !state.discarded
            && let Some(path) = state.path.clone()
        {
            let folder = path.parent().expect("a log has a folder").to_path_buf();
            state.made_folder = !folder.exists();
            crate::files::private_dir(&folder)?;
            let file = fs_err::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)?;
            let mut file = file.into_parts().0;
            file.write_all(&std::mem::take(&mut state.pending))?;
            state.file = Some(file);
        }
        Ok(())
    }

    /// Removes what the log wrote, and its folder if this run made it.
    pub(super) fn discard(&self) {
        let mut state = self.0.lock().expect("log lock");
        state.discarded = true;
        state.pending.clear();
        if state.file.take().is_some()
            && let Some(path) = state.path.clone()
        {
            let _ = fs_err::remove_file(&path);
            if state.made_folder
                && let Some(folder) = path.parent()
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
        let discarded = state.discarded;
        match state.file.as_mut() {
            Some(file) => file.write(bytes),
            None if discarded => Ok(bytes.len()),
            None => {
                let room = PENDING_BYTES.saturating_sub(state.pending.len());
                state
                    .pending
                    .extend_from_slice(&bytes[..bytes.len().min(room)]);
                Ok(bytes.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.0.lock().expect("log lock").file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// `hooks.log`, beside the run logs: one line per hook run, when it started and ended, to the
/// nanosecond, whatever it printed. Opened once for the run; a line that cannot be written is
/// skipped: the record must not stop an install.
pub(super) struct HooksLog {
    file: Option<std::fs::File>,
}

impl HooksLog {
    pub(super) fn open(path: &std::path::Path) -> Self {
        // Private like the run logs beside it.
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .ok()
            .map(|file| file.into_parts().0);
        HooksLog { file }
    }

    pub(super) fn record(&mut self, hook: &HookRun) {
        let line = serde_json::json!({
            "run": hook.run,
            "addon": hook.addon,
            "version": hook.version,
            "hook": hook.hook,
            "started": humantime::format_rfc3339_nanos(hook.started).to_string(),
            "ended": humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string(),
            "succeeded": hook.succeeded,
        });
        if let Some(file) = self.file.as_mut() {
            let _ = file.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// A hook that has just ended.
pub(super) struct HookRun<'a> {
    pub run: &'a str,
    pub addon: &'a str,
    pub version: &'a str,
    pub hook: &'a str,
    pub started: std::time::SystemTime,
    pub succeeded: bool,
}
