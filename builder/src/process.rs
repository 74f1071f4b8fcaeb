//! The one way `berth-build` runs other programs (buildah, docker, bash).
//!
//! Each command is logged shell-escaped, gets the caller's environment (less the signing key), and on failure reports
//! the exit status and the tail of its error output, so the user sees why without re-running.

use std::ffi::OsString;
use std::path::Path;

/// Lines of error output kept in a failure message.
const TAIL_LINES: usize = 20;

/// A program failed to start or exited unsuccessfully.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("`{program}` was not found on PATH; {install_hint}")]
    NotFound {
        program: String,
        install_hint: String,
    },
    #[error("failed to start `{command}`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status})\n{tail}")]
    Failed {
        command: String,
        status: String,
        tail: String,
    },
}

/// Finds `program` on PATH, or says which Debian package provides it.
pub fn find_program(program: &str, package: &str) -> Result<std::path::PathBuf, ProcessError> {
    which::which(program).map_err(|_| ProcessError::NotFound {
        program: program.to_string(),
        install_hint: format!("install it (Debian package `{package}`)"),
    })
}

/// The environment variable that may hold the vendor's signing key's PEM text (a CI secret):
/// `publish::sign` reads it, and no program the builder starts inherits it.
pub const SIGNING_KEY_VARIABLE: &str = "BERTH_SIGNING_KEY";

/// Runs a command to completion and returns its standard output.
pub fn run(program: &Path, arguments: impl AsRef<[OsString]>) -> Result<Vec<u8>, ProcessError> {
    let arguments = arguments.as_ref();
    let command = display_command(program, arguments);
    tracing::debug!(target: "berth::process", "running {command}");
    let output = duct::cmd(program, arguments)
        // The vendor's signing key is the builder's alone, never a child's.
        .env_remove(SIGNING_KEY_VARIABLE)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|source| ProcessError::Spawn {
            command: command.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let status = match output.status.code() {
        Some(code) => format!("exit code {code}"),
        None => "killed by a signal".to_string(),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    Err(ProcessError::Failed {
        command,
        status,
        tail,
    })
}

/// The command as a user could paste it into a shell.
fn display_command(program: &Path, arguments: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(arguments.iter().map(OsString::as_os_str))
        .map(|word| berth_formats::shell::word(&word.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Builds an argument list from anything string-like.
#[macro_export]
macro_rules! arguments {
    ($($argument:expr),* $(,)?) => {
        vec![$(std::ffi::OsString::from($argument)),*]
    };
}
