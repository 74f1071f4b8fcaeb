//! One module per command (`install` also serves `plan` and `join`, which share its
//! settings): parse arguments into settings, call the library, report.

pub mod backup;
pub mod fleet;
pub mod health;
pub mod install;
pub mod join_command;
pub mod kubeadm_config;
pub mod kurl;
pub mod kustomization;
pub mod preflight;
pub mod remove_node;
pub mod reset;
pub mod restore;
pub mod rollback;
pub mod rollout;
pub mod status;
pub mod support_bundle;
pub mod trust;
pub mod unpack;
pub mod verify;

use std::path::PathBuf;
use std::time::Duration;

// `--root`, which every command that reads or changes the node takes.
#[derive(clap::Args, Clone)]
pub struct RootArgs {
    /// Root of the node's filesystem as Berth sees it (state, packages, logs hang off it).
    #[arg(
        long,
        env = "BERTH_ROOT",
        value_name = "DIR",
        default_value = "/",
        global = true
    )]
    root: PathBuf,
}

impl RootArgs {
    /// The root, for a command that reads what is there: one that is not a folder is a
    /// mistyped --root or BERTH_ROOT, not a node with nothing installed.
    pub fn existing(&self) -> anyhow::Result<&std::path::Path> {
        if !self.root.is_dir() {
            anyhow::bail!(
                "{} is not a folder (--root, or BERTH_ROOT): there is no node's filesystem there",
                self.root.display()
            );
        }
        Ok(&self.root)
    }
}

/// How long a hook may run: one definition for every command that runs hooks.
#[derive(clap::Args, Clone, Copy)]
pub struct HookTimeout {
    /// How long a hook may run before its process group is killed (`30m`, `1h`; a bare
    /// number is seconds).
    #[arg(long = "hook-timeout", value_name = "DURATION", default_value = "30m", value_parser = berth_formats::duration::up_to_a_day)]
    hook: Duration,
}

impl Default for HookTimeout {
    fn default() -> Self {
        Self {
            hook: Duration::from_secs(30 * 60),
        }
    }
}

impl HookTimeout {
    pub fn duration(self) -> Duration {
        self.hook
    }
}

/// How long a run waits for an applied add-on's components to be healthy: one definition for
/// every command that applies add-ons.
#[derive(clap::Args, Clone, Copy)]
pub struct HealthTimeout {
    /// How long to wait, after an add-on's hooks, for the components its health.yaml lists to
    /// be healthy before it is recorded Succeeded (`5m`, `300`; 0: do not wait, it is
    /// recorded at once).
    #[arg(long = "health-timeout", value_name = "DURATION", default_value = "5m", value_parser = berth_formats::duration::up_to_a_day)]
    health: Duration,
}

impl Default for HealthTimeout {
    fn default() -> Self {
        Self {
            health: Duration::from_secs(5 * 60),
        }
    }
}

impl HealthTimeout {
    pub fn duration(self) -> Duration {
        self.health
    }
}

/// Reports a run's steps on standard error, as `berth: …` lines.
pub struct Stderr;

impl berth::engine::Reporter for Stderr {
    fn step(&self, message: &str) {
        say!("berth: {message}");
    }
}

/// Prints an error with every cause, its hints last.
pub fn print_error(error: &anyhow::Error) {
    say!("{}", berth_formats::report::render(error.as_ref()));
}

/// Whether `text` reaches a terminal with nothing that steers it: no control character but a
/// line break, no bidirectional override.
#[cfg(test)]
pub(crate) fn terminal_safe(text: &str) -> bool {
    !text.chars().any(|character| {
        (character.is_control() && character != '\n')
            || matches!(character, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}
