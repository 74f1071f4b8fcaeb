//! Running a program the way probes and kubectl calls need: its output bounded, its run
//! killed at a timeout, and a pipe never left full.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most of a response body, a command's output or a pid file a probe reads.
pub(crate) const MAX_READ: u64 = 1 << 20;

/// A program's exit status and output, killed at `timeout`.
pub(crate) struct Ran {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// Whether standard output went past the bound (its start is kept, the rest read and
    /// dropped, so the program is never left blocked on a full pipe).
    pub stdout_cut: bool,
}

/// Why a program gave no exit status.
pub(crate) enum RunError {
    /// Killed at its timeout.
    TimedOut(String),
    /// Not started.
    NotRun(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::TimedOut(message) | RunError::NotRun(message) => f.write_str(message),
        }
    }
}

pub(crate) fn run_program(command: &mut Command, timeout: Duration) -> Result<Ran, RunError> {
    run_program_bounded(command, timeout, MAX_READ)
}

/// [`run_program`], keeping at most `bound` bytes of each output stream.
pub(crate) fn run_program_bounded(
    command: &mut Command,
    timeout: Duration,
    bound: u64,
) -> Result<Ran, RunError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| RunError::NotRun(error.to_string()))?;
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let mut cut = false;
            if let Some(mut pipe) = pipe {
                let _ = (&mut pipe).take(bound).read_to_string(&mut text);
                cut = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0) > 0;
            }
            (text, cut)
        })
    };
    let stdout = read(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = read(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::TimedOut(format!(
                    "no answer within {}",
                    seconds(timeout)
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(error) => return Err(RunError::NotRun(error.to_string())),
        }
    };
    let (stdout, stdout_cut) = stdout.join().unwrap_or_default();
    Ok(Ran {
        success: status.success(),
        stdout,
        stderr: stderr.join().unwrap_or_default().0,
        stdout_cut,
    })
}

pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}
