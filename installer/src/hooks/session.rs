//! The one bash session that runs every hook of a run, as kURL's single install script does:
//! a global set by one hook is seen by the next.
//!
//! The engine drives bash over a FIFO of commands and learns how each command ended over a
//! second FIFO, so hook output (stdout and stderr, streamed line by line to the terminal and
//! the run log) never mixes with the protocol, and a hook that reads stdin reads nothing. Each
//! command runs under `set -e`, as kURL's scripts do: a failing command (or `bail`) ends the
//! session, and the engine reports the hook, its exit status and the tail of its output. A
//! hook past its timeout has its whole process group killed.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_formats::shell::quote_line;
use berth_formats::spec::is_variable_name;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The file in a session's folder that holds its bash's pid (its process group).
const PID_FILE: &str = "session.pid";

/// The longest command a frame's 8 digits carry.
const MAX_COMMAND_BYTES: usize = 99_999_999;

/// Lines of output kept for an error message.
const TAIL_LINES: usize = 20;

const BOOTSTRAP: &str = r#"# The Berth hook session: commands arrive on fd 3, their outcome leaves on fd 4.
# Each command is its length in 8 digits, then its text (ASCII): two reads, where a line read
# from a pipe takes one read per byte.
exec 3<"$1" 4>"$2"
__berth_status() { printf '%s\n' "$*" >&4; }
__berth_hook() {
    if ! declare -F "$1" >/dev/null; then __berth_status "skipped $1"; return 0; fi
    set -e
    "$1"
    set +e
    __berth_status "done $1"
}
__berth_source() {
    __berth_names=("${@:2}")
    set -- "$1"
    set -e
    . "$1"
    set +e
    __berth_defined "${__berth_names[@]}"
}
__berth_defined() {
    local defined=() name
    for name in "$@"; do
        if declare -F "$name"; then defined+=("$name"); fi
    done >/dev/null
    __berth_status "defined ${defined[*]}"
}
while read -r -N 8 -u 3 __berth_length && read -r -N "$((10#$__berth_length))" -u 3 __berth_command; do
    eval "$__berth_command"
done
"#;

/// How a command in the session failed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("failed to start bash")]
    Spawn(#[source] std::io::Error),
    #[error("`{command}` exited with status {code}")]
    NonZeroExit {
        command: String,
        code: i32,
        tail: Vec<String>,
    },
    #[error("`{command}` was killed by signal {signal}")]
    Killed {
        command: String,
        signal: String,
        tail: Vec<String>,
    },
    #[error("`{command}` ran past its timeout of {}s; its process group was killed", timeout.as_secs())]
    Timeout {
        command: String,
        timeout: Duration,
        tail: Vec<String>,
    },
    #[error("`{command}` was stopped: Berth received {signal}")]
    Interrupted {
        command: String,
        signal: String,
        tail: Vec<String>,
    },
    #[error("the hook session is gone")]
    Gone,
    #[error("`{0}` is not a name bash can give a variable")]
    BadVariable(String),
    #[error("failed to talk to the hook session through {path}")]
    Channel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HookError {
    /// The last lines the command printed, when it failed.
    pub fn tail(&self) -> &[String] {
        match self {
            HookError::NonZeroExit { tail, .. }
            | HookError::Killed { tail, .. }
            | HookError::Interrupted { tail, .. }
            | HookError::Timeout { tail, .. } => tail,
            _ => &[],
        }
    }
}

/// What the engine hears from bash next.
enum Heard {
    Status(String),
    Exited(ExitStatus),
    TimedOut,
}

/// How the engine hears from bash: its status lines, read by the engine itself as they come
/// (no thread between them: a hook's round trip is the time bash takes), and its exit, which
/// a waiting thread tells through a pipe the same poll watches.
struct StatusChannel {
    path: PathBuf,
    status: std::fs::File,
    pending: Vec<u8>,
    exit_signal: std::os::fd::OwnedFd,
    exit_status: Receiver<ExitStatus>,
}

impl StatusChannel {
    /// The next status line, bash's exit, or nothing within `timeout`.
    fn next(&mut self, timeout: Duration) -> Result<Heard, HookError> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd as _;
        // A timeout past what the clock holds is no deadline at all.
        let deadline = Instant::now().checked_add(timeout);
        let mut buffer = [0u8; 4096];
        loop {
            if let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                return Ok(Heard::Status(line));
            }
            let remaining =
                deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if remaining.is_some_and(|remaining| remaining.is_zero()) {
                return Ok(Heard::TimedOut);
            }
            // Whole milliseconds, rounded up: a wait cut short would spin.
            let milliseconds = remaining.map_or(-1, |remaining| {
                remaining.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            });
            let mut watched = [
                PollFd::new(self.status.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.exit_signal.as_fd(), PollFlags::POLLIN),
            ];
            match poll(
                &mut watched,
                if milliseconds < 0 {
                    PollTimeout::NONE
                } else {
                    PollTimeout::try_from(milliseconds).unwrap_or(PollTimeout::MAX)
                },
            ) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(errno) => return Err(self.error(errno.into())),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|events| !events.is_empty());
            // A status line written before bash exited is heard first.
            if ready(&watched[0]) {
                let read = std::io::Read::read(&mut self.status, &mut buffer)
                    .map_err(|source| self.error(source))?;
                self.pending.extend_from_slice(&buffer[..read]);
            } else if ready(&watched[1]) {
                return match self.exit_status.recv() {
                    Ok(status) => Ok(Heard::Exited(status)),
                    Err(_) => Err(HookError::Gone),
                };
            }
        }
    }

    fn error(&self, source: std::io::Error) -> HookError {
        HookError::Channel {
            path: self.path.clone(),
            source,
        }
    }
}

/// Where hook output goes: the terminal, the run log, and a tail for error messages.
struct Sink {
    log: Box<dyn Write + Send>,
    tail: VecDeque<String>,
}

impl Sink {
    fn line(&mut self, line: &[u8], to_stderr: bool) {
        // Best effort: output that cannot be shown must not stop the install.
        let _ = self.log.write_all(line);
        let _ = self.log.flush();
        let _ = if to_stderr {
            std::io::stderr().write_all(line)
        } else {
            std::io::stdout().write_all(line)
        };
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail
            .push_back(String::from_utf8_lossy(line).trim_end().to_string());
    }
}

/// A running bash session.
pub struct Session {
    pid: Pid,
    commands: std::fs::File,
    commands_path: PathBuf,
    status: StatusChannel,
    sink: Arc<Mutex<Sink>>,
    readers: Receiver<()>,
    exited: bool,
}

impl Session {
    /// Starts bash in `work` (a folder of its own) with `environment` added to this process's.
    pub fn start(
        work: &Path,
        environment: &[(String, String)],
        log: Box<dyn Write + Send>,
    ) -> Result<Session, HookError> {
        let channel = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HookError::Channel { path, source }
        };
        fs_err::create_dir_all(work).map_err(channel(work))?;
        let bootstrap = work.join("session.sh");
        fs_err::write(&bootstrap, BOOTSTRAP).map_err(channel(&bootstrap))?;
        let commands_path = work.join("commands");
        let status_path = work.join("status");
        for fifo in [&commands_path, &status_path] {
            let _ = fs_err::remove_file(fifo);
            nix::unistd::mkfifo(fifo.as_path(), nix::sys::stat::Mode::S_IRWXU)
                .map_err(|errno| channel(fifo)(errno.into()))?;
        }
        // Opened read-write, so neither open waits for bash to open its end.
        let open = |path: &Path| {
            fs_err::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map(|file| file.into_parts().0)
                .map_err(channel(path))
        };
        let commands = open(&commands_path)?;
        // Written without blocking: see `write_command`.
        nix::fcntl::fcntl(
            &commands,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|errno| channel(&commands_path)(errno.into()))?;
        let status = open(&status_path)?;

        let mut child = Command::new("bash")
            .arg("--noprofile")
            .arg("--norc")
            .arg(&bootstrap)
            .arg(&commands_path)
            .arg(&status_path)
            .envs(environment.iter().map(|(k, v)| (k, v)))
            .current_dir(work)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(HookError::Spawn)?;
        let pid = Pid::from_raw(child.id() as i32);
        crate::interrupt::set_session_group(pid.as_raw());
        // Lets the next run end this session if the process driving it dies (see end_orphans).
        let pid_file = work.join(PID_FILE);
        fs_err::write(&pid_file, pid.to_string()).map_err(channel(&pid_file))?;
        let sink = Arc::new(Mutex::new(Sink {
            log,
            tail: VecDeque::new(),
        }));
        let (readers_sender, readers) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        spawn_reader(stdout, false, sink.clone(), readers_sender.clone());
        spawn_reader(stderr, true, sink.clone(), readers_sender);
        let (exit_signal, exit_sender) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|errno| channel(&status_path)(errno.into()))?;
        let (status_sender, exit_status) = mpsc::channel();
        spawn_waiter(child, status_sender, exit_sender);
        Ok(Session {
            pid,
            commands,
            commands_path,
            status: StatusChannel {
                path: status_path,
                status,
                pending: Vec::new(),
                exit_signal,
                exit_status,
            },
            sink,
            readers,
            exited: false,
        })
    }

    /// Sources `file` into the session (defining its hooks).
    pub fn source(&mut self, file: &Path, timeout: Duration) -> Result<(), HookError> {
        self.source_each(&[(Some(file), Vec::new())], timeout)
            .map(drop)
            .map_err(|(_, error)| error)
    }

    /// Sources each file in turn into the session, in one exchange with bash, and answers,
    /// after each, which of its names are defined functions then (a file of `None`: the names
    /// alone). A failure names the place of the file that failed; those before it are sourced.
    pub fn source_each(
        &mut self,
        files: &[(Option<&Path>, Vec<String>)],
        timeout: Duration,
    ) -> Result<Vec<HashSet<String>>, (usize, HookError)> {
        let mut commands = Vec::new();
        let mut whats = Vec::new();
        for (file, names) in files {
            let quoted: Vec<String> = names.iter().map(|name| quote_line(name)).collect();
            match file {
                Some(file) => {
                    let path = file.display().to_string();
                    commands.push(format!(
                        "__berth_source {} {}",
                        quote_line(&path),
                        quoted.join(" ")
                    ));
                    whats.push(path);
                }
                None => {
                    commands.push(format!("__berth_defined {}", quoted.join(" ")));
                    whats.push("defined".to_string());
                }
            }
        }
        let lines = self.request_each(&commands.join("; "), &whats, timeout)?;
        Ok(lines.iter().map(|line| defined_in(line)).collect())
    }

    /// Exports `variables` into the session, then runs the bash function `name` as a hook
    /// runs: what a session started before its variables were known takes once they are.
    pub fn export_then(
        &mut self,
        variables: &[(String, String)],
        name: &str,
        timeout: Duration,
    ) -> Result<(), HookError> {
        let mut command = String::new();
        if !variables.is_empty() {
            command.push_str("export");
            for (variable, value) in variables {
                if !is_variable_name(variable) {
                    return Err(HookError::BadVariable(variable.clone()));
                }
                command.push_str(&format!(" {variable}={}", quote_line(value)));
            }
            command.push_str("; ");
        }
        command.push_str(&format!("__berth_hook {}", quote_line(name)));
        self.request(&command, name, timeout).map(drop)
    }

    /// Runs the bash function `name` (nothing, if it is not defined).
    pub fn hook(&mut self, name: &str, timeout: Duration) -> Result<(), HookError> {
        self.request(&format!("__berth_hook {}", quote_line(name)), name, timeout)
            .map(drop)
    }

    /// Ends the session and waits for bash to exit.
    pub fn finish(mut self) -> Result<(), HookError> {
        self.send("exit 0")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self
                .status
                .next(deadline.saturating_duration_since(Instant::now()))?
            {
                Heard::Exited(_) => {
                    self.exited = true;
                    self.drain_readers();
                    return Ok(());
                }
                Heard::Status(_) => {}
                Heard::TimedOut => return Err(HookError::Gone),
            }
        }
    }

    fn send(&mut self, command: &str) -> Result<(), HookError> {
        if self.exited {
            return Err(HookError::Gone);
        }
        debug_assert!(
            !command.contains('\n'),
            "commands are one line: use quote_line()"
        );
        let command = ascii(command);
        if command.len() > MAX_COMMAND_BYTES {
            return Err(HookError::Channel {
                path: self.commands_path.clone(),
                source: std::io::Error::other(format!(
                    "a command of {} bytes, more than the {MAX_COMMAND_BYTES} a frame carries",
                    command.len()
                )),
            });
        }
        let framed = format!("{:08}{command}", command.len());
        self.write_command(framed.as_bytes())
            .map_err(|source| HookError::Channel {
                path: self.commands_path.clone(),
                source,
            })
    }

    /// Writes to the command FIFO, waiting for room while bash is there to make it: the FIFO
    /// is open here for reading too (so opening it never waited for bash), so a write to a
    /// bash that has gone would otherwise wait for ever once the pipe is full.
    fn write_command(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd as _;
        while !bytes.is_empty() {
            match self.commands.write(bytes) {
                Ok(written) => bytes = &bytes[written..],
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    let mut watched = [
                        PollFd::new(self.commands.as_fd(), PollFlags::POLLOUT),
                        PollFd::new(self.status.exit_signal.as_fd(), PollFlags::POLLIN),
                    ];
                    match poll(&mut watched, PollTimeout::NONE) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(errno) => return Err(errno.into()),
                    }
                    if watched[1]
                        .revents()
                        .is_some_and(|events| !events.is_empty())
                    {
                        return Err(std::io::Error::other("bash exited"));
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Sends `command` and waits for its status line.
    fn request(
        &mut self,
        command: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<String, HookError> {
        let mut lines = self
            .request_each(command, &[what.to_string()], timeout)
            .map_err(|(_, error)| error)?;
        Ok(lines.remove(0))
    }

    /// Sends `command` and waits for a status line for each of `whats`, each within `timeout`
    /// of the one before. A failure names the place of the one whose line did not come.
    fn request_each(
        &mut self,
        command: &str,
        whats: &[String],
        timeout: Duration,
    ) -> Result<Vec<String>, (usize, HookError)> {
        self.sink.lock().expect("sink lock").tail.clear();
        self.send(command).map_err(|error| (0, error))?;
        let mut lines = Vec::new();
        for what in whats {
            let line = self
                .status_line(what, timeout)
                .map_err(|error| (lines.len(), error))?;
            lines.push(line);
            // A failure's tail is the output of its own part alone.
            self.sink.lock().expect("sink lock").tail.clear();
        }
        Ok(lines)
    }

    /// The next status line, or how the command `what` failed.
    fn status_line(&mut self, what: &str, timeout: Duration) -> Result<String, HookError> {
        match self.status.next(timeout)? {
            Heard::Status(line) => Ok(line),
            Heard::Exited(status) => {
                self.exited = true;
                self.drain_readers();
                let tail = self.tail();
                let command = what.to_string();
                if let Some(signal) = crate::interrupt::received() {
                    return Err(HookError::Interrupted {
                        command,
                        signal: signal.as_str().to_string(),
                        tail,
                    });
                }
                Err(match (status.code(), status.signal()) {
                    (Some(code), _) => HookError::NonZeroExit {
                        command,
                        code,
                        tail,
                    },
                    (None, signal) => HookError::Killed {
                        command,
                        signal: signal
                            .and_then(|s| Signal::try_from(s).ok())
                            .map_or_else(|| "?".into(), |s| s.as_str().to_string()),
                        tail,
                    },
                })
            }
            Heard::TimedOut => {
                self.kill();
                // Reap bash, so its output is complete before the tail is taken.
                let _ = self.status.exit_status.recv_timeout(Duration::from_secs(5));
                self.exited = true;
                self.drain_readers();
                Err(HookError::Timeout {
                    command: what.to_string(),
                    timeout,
                    tail: self.tail(),
                })
            }
        }
    }

    fn tail(&self) -> Vec<String> {
        self.sink
            .lock()
            .expect("sink lock")
            .tail
            .iter()
            .cloned()
            .collect()
    }

    /// Waits briefly for the output readers; a daemon a hook left behind may hold the pipes.
    fn drain_readers(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        for _ in 0..2 {
            if self
                .readers
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_err()
            {
                return;
            }
        }
    }

    fn kill(&self) {
        let _ = killpg(self.pid, Signal::SIGKILL);
    }
}

/// `command` in ASCII alone, so bash's `read -N` counts its bytes whatever the session's
/// locale: where it holds other bytes (a path in UTF-8, say), an `eval` of it in `$'…'`
/// quoting with those bytes escaped.
fn ascii(command: &str) -> std::borrow::Cow<'_, str> {
    if command.is_ascii() {
        return command.into();
    }
    let mut quoted = String::from("eval $'");
    for byte in command.bytes() {
        match byte {
            b'\\' => quoted.push_str(r"\\"),
            b'\'' => quoted.push_str(r"\'"),
            byte if byte.is_ascii() => quoted.push(char::from(byte)),
            byte => quoted.push_str(&format!("\\x{byte:02x}")),
        }
    }
    quoted.push('\'');
    quoted.into()
}

/// The functions a `defined …` status line names.
fn defined_in(status: &str) -> HashSet<String> {
    status
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

impl Drop for Session {
    fn drop(&mut self) {
        crate::interrupt::set_session_group(0);
        if !self.exited {
            self.kill();
        }
        if crate::interrupt::received().is_some() {
            crate::interrupt::end_group(self.pid);
        }
    }
}

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};

fn spawn_reader(
    stream: impl Read + Send + 'static,
    to_stderr: bool,
    sink: Arc<Mutex<Sink>>,
    done: Sender<()>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            sink.lock().expect("sink lock").line(&line, to_stderr);
            line.clear();
        }
        let _ = done.send(());
    });
}

fn spawn_waiter(mut child: Child, status: Sender<ExitStatus>, signal: std::os::fd::OwnedFd) {
    std::thread::spawn(move || {
        if let Ok(exited) = child.wait() {
            let _ = status.send(exited);
        }
        // Written, or closed as the thread ends: either wakes the engine's poll.
        let _ = nix::unistd::write(&signal, &[1]);
    });
}

/// Ends the sessions of earlier runs under `work_root` whose engine died (killed with
/// `kill -9`, say) and removes their folders. Only call it while holding the node lock: then
/// no live run owns any of them.
pub fn end_orphans(work_root: &Path) {
    let Ok(entries) = fs_err::read_dir(work_root) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let folder = entry.path();
        let pid = fs_err::read_to_string(folder.join(PID_FILE))
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        // Only a bash still running this folder's session: a pid may have been reused.
        let running_here = |pid: &i32| {
            fs_err::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline).contains(&*folder.to_string_lossy())
            })
        };
        if let Some(pid) = pid.filter(running_here) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = fs_err::remove_dir_all(&folder);
    }
}
