//! One module per command (`install` also serves `plan` and `join`, which share its
//! settings): parse arguments into settings, call the library, report.

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
pub mod rollback;
pub mod rollout;
pub mod status;
pub mod support_bundle;
pub mod trust;
pub mod unpack;
pub mod verify;

use std::time::Duration;

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
