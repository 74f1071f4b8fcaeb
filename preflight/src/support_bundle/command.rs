//! A program run for a collector: its output kept up to a bound (the rest read and dropped,
//! so it never blocks on a full pipe), killed with everything it started at its deadline.

use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a program did.
pub struct Ran {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// troubleshoot's `exitCode`: `0`, the code, or `signal: killed`.
    pub exit_code: String,
    pub timed_out: bool,
    /// Bytes of output beyond the bound, left out.
    pub dropped: u64,
}

/// The process groups of the programs running now: each runs in a group of its own, which a
/// terminal's Ctrl-C never reaches, so [`stop_all`] ends them.
static RUNNING: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());
/// Set by [`stop_all`]: no program starts from then on.
static STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Kills every program running for a collector, with what it started, and refuses to start
/// more (Ctrl-C during a support bundle or host preflights).
pub fn stop_all() {
    STOPPED.store(true, std::sync::atomic::Ordering::SeqCst);
    let running = RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for group in running.iter() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(*group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Whether [`stop_all`] was called.
pub fn stopped() -> bool {
    STOPPED.load(std::sync::atomic::Ordering::SeqCst)
}

fn running(group: i32, now: bool) {
    let mut running = RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if now {
        running.insert(group);
    } else {
        running.remove(&group);
    }
}

/// Runs `command` with nothing on its input, for at most `timeout`, keeping at most `bound`
/// bytes of each output stream (the first ones).
pub fn run(command: &mut Command, timeout: Duration, bound: u64) -> std::io::Result<Ran> {
    if stopped() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "not run: the collection was interrupted",
        ));
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: the deadline kills what it started too.
        .process_group(0)
        .spawn()?;
    running(child.id() as i32, true);
    // A stop between the start and the line above.
    if stopped() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    // Each pipe is read on a thread of its own, which says what it read on a channel: one
    // that a program outside the group keeps open is given up on, never waited for.
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut dropped = 0u64;
            if let Some(mut pipe) = pipe {
                let _ = (&mut pipe).take(bound).read_to_end(&mut kept);
                dropped = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0);
            }
            if dropped > 0 {
                // The last line, cut, could hold part of a secret the redactors would not know.
                let whole = kept
                    .iter()
                    .rposition(|byte| *byte == b'\n')
                    .map_or(0, |at| at + 1);
                dropped += (kept.len() - whole) as u64;
                kept.truncate(whole);
            }
            let _ = sender.send((kept, dropped));
        });
        receiver
    };
    let stdout = read(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = read(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    let deadline = Instant::now() + timeout;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (status, timed_out) = loop {
        match child.try_wait()? {
            Some(status) => break (Some(status), false),
            None if Instant::now() >= deadline => {
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                break (None, true);
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    // What it started may hold the pipes open after it ended: they go with its group, and
    // a pipe still open a moment later (held by a program that left the group) is given up.
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    running(pid.as_raw(), false);
    let grace = Duration::from_secs(2);
    let (stdout, dropped_out) = stdout.recv_timeout(grace).unwrap_or_default();
    let (stderr, dropped_err) = stderr.recv_timeout(grace).unwrap_or_default();
    use std::os::unix::process::ExitStatusExt as _;
    let exit_code = match status {
        None => "signal: killed".to_string(),
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => code.to_string(),
            (None, Some(signal)) => format!("signal: {}", signal_name(signal)),
            (None, None) => "-1".to_string(),
        },
    };
    Ok(Ran {
        stdout,
        stderr,
        exit_code,
        timed_out,
        dropped: dropped_out + dropped_err,
    })
}

/// A signal as Go's `os.ProcessState` names it in `signal: …`.
fn signal_name(signal: i32) -> String {
    match signal {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        6 => "aborted",
        9 => "killed",
        11 => "segmentation fault",
        13 => "broken pipe",
        15 => "terminated",
        other => return other.to_string(),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_bounded_and_a_program_past_its_deadline_is_killed_with_its_children() {
        let ran = run(
            Command::new("sh").args([
                "-c",
                "yes 0123456789 | head -c 100001; echo err >&2; exit 3",
            ]),
            Duration::from_secs(20),
            1000,
        )
        .unwrap();
        // Whole lines of 11 bytes within the 1000 kept; the rest read and dropped.
        assert_eq!((ran.stdout.len(), ran.exit_code.as_str()), (990, "3"));
        assert_eq!(ran.stderr, b"err\n");
        assert_eq!(ran.dropped, 100_001 - 990);
        // A cut keeps whole lines.
        let ran = run(
            Command::new("sh").args(["-c", "echo one; echo two-is-longer"]),
            Duration::from_secs(20),
            10,
        )
        .unwrap();
        assert_eq!((ran.stdout.as_slice(), ran.dropped), (&b"one\n"[..], 14));
        // A program outside the group holding the pipe does not hold the run.
        let started = Instant::now();
        let ran = run(
            Command::new("sh").args(["-c", "setsid sleep 30 & echo started"]),
            Duration::from_secs(20),
            1000,
        )
        .unwrap();
        assert_eq!(ran.exit_code, "0");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let started = Instant::now();
        // A child that keeps the pipe open would hold the reader without the group kill.
        let ran = run(
            Command::new("sh").args(["-c", "sleep 60 & sleep 60"]),
            Duration::from_millis(300),
            1000,
        )
        .unwrap();
        assert!(ran.timed_out);
        assert_eq!(ran.exit_code, "signal: killed");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
