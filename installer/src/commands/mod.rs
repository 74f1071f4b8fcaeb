//! One module per command (`install` also serves `plan` and `join`, which share its
//! settings): parse arguments into settings, call the library, report.

pub mod install;
pub mod join_command;
pub mod kustomization;
pub mod reset;
pub mod rollback;
pub mod status;
pub mod unpack;

use std::time::Duration;

/// How long a hook may run: one definition for every command that runs hooks.
#[derive(clap::Args, Clone, Copy)]
pub struct HookTimeout {
    /// Seconds a hook may run before its process group is killed.
    #[arg(long = "hook-timeout", value_name = "SECONDS", default_value_t = 1800)]
    seconds: u64,
}

impl HookTimeout {
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}

/// Reports a run's steps on standard error, as `berth: …` lines.
pub struct Stderr;

impl berth::engine::Reporter for Stderr {
    fn step(&self, message: &str) {
        say!("berth: {message}");
    }
}

/// Prints an error with every cause; a cause's `hint:` lines stay at the end.
pub fn print_error(error: &anyhow::Error) {
    let mut hints = Vec::new();
    let mut text = String::new();
    for (depth, cause) in error.chain().enumerate() {
        let message = cause.to_string();
        let (body, hint) = match message.split_once("\nhint: ") {
            Some((body, hint)) => (body.to_string(), Some(hint.to_string())),
            None => (message, None),
        };
        if depth == 0 {
            text.push_str(&format!("error: {body}"));
        } else {
            text.push_str(&format!("\n  caused by: {body}"));
        }
        hints.extend(hint);
    }
    say!("{text}");
    for hint in hints {
        say!("hint: {hint}");
    }
}
