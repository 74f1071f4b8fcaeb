//! The hook session, started as soon as the node lock is held: bash starts and the helper
//! library's definitions load while the plan is made and the packages are checked. What the
//! plan decides (the run's variables, then kURL's globals from them) goes in once known,
//! while the host preflights run.

use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

use super::log::RunLog;
use super::{EngineError, RunSettings, io_error};
use crate::hooks::environment::HookEnvironment;
use crate::hooks::session::{HookError, Session};
use crate::node::lock::NodeLock;

type Started = Result<Session, (&'static str, HookError)>;

/// A hook session on its way up. Dropped unused (the plan failed or refused, or the session
/// could not start), it ends bash and removes its folder and the folders it made.
pub struct SessionStart {
    /// The session's folder: where hooks start, as kURL's start in its install folder.
    work: PathBuf,
    log: RunLog,
    /// The session's and the library's folders that were not there when it began (the
    /// programs' among them, which the run links once it goes ahead), removed when the
    /// session goes unused: a run that stops before its hooks leaves the node as it found it.
    made: Vec<PathBuf>,
    /// Told once the library is written, for bash to source it.
    library: Option<Sender<()>>,
    /// The run's variables, for the session to take once its library is in.
    variables: Option<Sender<Vec<(String, String)>>>,
    starting: Option<JoinHandle<Started>>,
    /// Not yet handed over by [`SessionStart::join`].
    unused: bool,
}

impl SessionStart {
    /// Ends the sessions of runs that died, starts bash, and writes the helper library for it
    /// to source. Only while holding the node lock: the sessions of other runs are ended.
    pub fn begin(settings: &RunSettings, _lock: &NodeLock) -> Result<SessionStart, EngineError> {
        let layout = &settings.layout;
        crate::hooks::session::end_orphans(&layout.work_dir());
        let install = layout.install_dir();
        let made: Vec<PathBuf> = [
            layout.helpers_dir(),
            layout.programs_dir(),
            layout.work_dir(),
        ]
        .iter()
        .filter_map(|folder| {
            folder
                .ancestors()
                .take_while(|ancestor| ancestor.starts_with(&install) && *ancestor != install)
                .filter(|ancestor| !ancestor.exists())
                .last()
                .map(std::path::Path::to_path_buf)
        })
        .collect();
        let (variables, variables_given) = mpsc::channel::<Vec<(String, String)>>();
        let (library, library_written) = mpsc::channel::<()>();
        // Made first: from here on, whatever fails drops it, and its drop undoes the rest.
        let mut start = SessionStart {
            work: layout
                .work_dir()
                .join(format!("session-{}", std::process::id())),
            log: RunLog::unnamed(),
            made,
            library: Some(library),
            variables: Some(variables),
            starting: None,
            unused: true,
        };
        let work = start.work.clone();
        fs_err::create_dir_all(&work).map_err(io_error(&work))?;
        // The registry's hook runs `./bin/htpasswd`.
        let programs = work.join("bin");
        if fs_err::symlink_metadata(&programs).is_err() {
            fs_err::os::unix::fs::symlink(layout.programs_dir(), &programs)
                .map_err(io_error(&programs))?;
        }
        let mut environment = HookEnvironment::for_node(layout).into_vec();
        // The library's address discovery as the session starts reads this in place of
        // starting `ip -o addr`, then unsets it: later discoveries list the host afresh. Given
        // to bash as it starts, not with the run's variables, so it is listed once.
        environment.push((
            "BERTH_HOST_ADDRESSES".to_string(),
            crate::hooks::network_interfaces::address_listing(),
        ));
        let definitions = crate::hooks::helpers::definitions_file(layout);
        let timeout = settings.hook_timeout;
        let log = start.log.clone();
        start.starting = Some(std::thread::spawn(move || {
            let mut session = Session::start(&work, &environment, Box::new(log))
                .map_err(|source| ("bash", source))?;
            // bash starts while the library is written.
            library_written
                .recv()
                .map_err(|_| ("the helper library", HookError::Gone))?;
            session
                .source(&definitions, timeout)
                .map_err(|source| ("the helper library", source))?;
            // None come when the run ends before it has any.
            let variables = variables_given
                .recv()
                .map_err(|_| ("bash", HookError::Gone))?;
            session
                .export_then(&variables, crate::hooks::helpers::GLOBALS_FUNCTION, timeout)
                .map_err(|source| ("the helper library", source))?;
            Ok(session)
        }));
        crate::hooks::helpers::write_library(layout).map_err(io_error(&layout.helpers_dir()))?;
        if let Some(library) = start.library.take() {
            let _ = library.send(());
        }
        Ok(start)
    }

    /// Gives the session the run's variables; it then sets kURL's globals from them.
    pub(super) fn set_variables(&mut self, variables: Vec<(String, String)>) {
        if let Some(sender) = self.variables.take() {
            let _ = sender.send(variables);
        }
    }

    pub(super) fn work(&self) -> &std::path::Path {
        &self.work
    }

    pub(super) fn log(&self) -> &RunLog {
        &self.log
    }

    /// Waits for bash, the library and kURL's globals (after [`Self::set_variables`]); from
    /// here the caller owns the folder and the log.
    pub(super) fn join(mut self) -> Started {
        self.unused = false;
        self.library.take();
        self.variables.take();
        match self.starting.take() {
            Some(starting) => starting.join().unwrap_or(Err(("bash", HookError::Gone))),
            None => Err(("bash", HookError::Gone)),
        }
    }
}

impl Drop for SessionStart {
    fn drop(&mut self) {
        if !self.unused {
            return;
        }
        // The senders go first: the thread may be waiting on either.
        self.library.take();
        self.variables.take();
        if let Some(starting) = self.starting.take() {
            // The session, once up, ends as it is dropped.
            drop(starting.join());
        }
        self.log.discard();
        let _ = fs_err::remove_dir_all(&self.work);
        for folder in &self.made {
            let _ = fs_err::remove_dir_all(folder);
        }
    }
}
