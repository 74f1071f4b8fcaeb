//! kURL's utility programs (`kurl_util/cmd/*`) as hooks call them: `$DIR/bin/bcrypt`,
//! `htpasswd`, `toml` and `yamlutil` are links to `berth`, which answers under each name with
//! the program's command line (Go's `flag` syntax), output and exit codes. `pvmigrate` moves
//! volumes between storage classes inside a cluster; Berth answers it with the reason it
//! cannot, never with a migration it did not do.

mod bcrypt;
mod go_flags;
pub mod longhorn;
pub mod rook;
mod toml;
mod yamlutil;

use std::ffi::OsString;
use std::process::ExitCode;

pub use go_flags::{FlagSet, Parsed};

/// The programs answered here, by the name `berth` is called under.
pub const PROGRAMS: [&str; 5] = ["bcrypt", "htpasswd", "toml", "yamlutil", "pvmigrate"];

/// The program `arguments[0]` names, if it is one of [`PROGRAMS`].
pub fn called_as(arguments: &[OsString]) -> Option<&'static str> {
    let name = std::path::Path::new(arguments.first()?).file_name()?;
    PROGRAMS.iter().copied().find(|program| name == *program)
}

/// Runs `program` with its arguments (without the program's name), as kURL's would:
/// its output on standard output, errors on standard error prefixed as Go's `log.Fatal`
/// prints them, exit 1 on an error and 2 on a command line Go's `flag` refuses.
pub fn run(program: &str, arguments: &[String]) -> ExitCode {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let outcome = match program {
        "bcrypt" => bcrypt::bcrypt(arguments, &mut stdin.lock(), &mut stdout.lock()),
        "htpasswd" => bcrypt::htpasswd(arguments),
        "toml" => toml::main(arguments),
        "yamlutil" => yamlutil::main(arguments, &mut stdout.lock()),
        "pvmigrate" => Err(Failure::Error(
            "pvmigrate moves persistent volumes between storage classes inside a running \
             cluster; Berth does not do that migration, so no volume was moved"
                .to_string(),
        )),
        other => Err(Failure::Error(format!(
            "{other} is not one of kURL's programs"
        ))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(text)) => {
            eprint!("{text}");
            ExitCode::from(2)
        }
        Err(Failure::Help(text)) => {
            eprint!("{text}");
            ExitCode::SUCCESS
        }
        Err(Failure::UsageExit1(text)) => {
            eprint!("{text}");
            ExitCode::FAILURE
        }
        Err(Failure::Error(text)) => {
            eprintln!("{program}: {text}");
            ExitCode::FAILURE
        }
    }
}

/// Why a program stopped.
#[derive(Debug)]
pub enum Failure {
    /// A command line Go's `flag` refuses: the reason and the usage (exit 2).
    Usage(String),
    /// `-h`: the usage (exit 0).
    Help(String),
    /// kURL's own check of its arguments failed: the usage (exit 1, as `os.Exit(1)`).
    UsageExit1(String),
    /// The work failed (exit 1, as `log.Fatal`).
    Error(String),
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Error(error.to_string())
    }
}
