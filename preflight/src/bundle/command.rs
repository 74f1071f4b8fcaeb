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

/// Runs `command` with nothing on its input, for at most `timeout`, keeping at most `bound`
/// bytes of each output stream (the first ones).
pub fn run(command: &mut Command, timeout: Duration, bound: u64) -> std::io::Result<Ran> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: the deadline kills what it started too.
        .process_group(0)
        .spawn()?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut dropped = 0u64;
            if let Some(mut pipe) = pipe {
                let _ = (&mut pipe).take(bound).read_to_end(&mut kept);
                dropped = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0);
            }
            (kept, dropped)
        })
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
    // What it started may hold the pipes open after it ended: they go with its group.
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    let (stdout, dropped_out) = stdout.join().unwrap_or_default();
    let (stderr, dropped_err) = stderr.join().unwrap_or_default();
    use std::os::unix::process::ExitStatusExt as _;
    let exit_code = match status {
        None => "signal: killed".to_string(),
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => code.to_string(),
            (None, Some(9)) => "signal: killed".to_string(),
            (None, Some(signal)) => format!("signal: {signal}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_bounded_and_a_program_past_its_deadline_is_killed_with_its_children() {
        let ran = run(
            Command::new("sh").args(["-c", "head -c 100000 /dev/zero; echo err >&2; exit 3"]),
            Duration::from_secs(20),
            1000,
        )
        .unwrap();
        assert_eq!((ran.stdout.len(), ran.exit_code.as_str()), (1000, "3"));
        assert_eq!(ran.stderr, b"err\n");
        assert_eq!(ran.dropped, 99_000);
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
