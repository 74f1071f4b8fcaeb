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
    /// Seconds a hook may run before its process group is killed.
    #[arg(long = "hook-timeout", value_name = "SECONDS", default_value_t = HookTimeout::DEFAULT_SECONDS)]
    seconds: u64,
}

impl Default for HookTimeout {
    fn default() -> Self {
        Self {
            seconds: Self::DEFAULT_SECONDS,
        }
    }
}

impl HookTimeout {
    const DEFAULT_SECONDS: u64 = 1800;

    pub fn duration(self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}

/// How long a run waits for an applied add-on's components to be healthy: one definition for
/// every command that applies add-ons.
#[derive(clap::Args, Clone, Copy)]
pub struct HealthTimeout {
    /// Seconds to wait, after an add-on's hooks, for the components its health.yaml lists to
    /// be healthy before it is recorded Succeeded (0: do not wait; it is recorded at once).
    #[arg(long = "health-timeout", value_name = "SECONDS", default_value_t = HealthTimeout::DEFAULT_SECONDS)]
    health_seconds: u64,
}

impl Default for HealthTimeout {
    fn default() -> Self {
        Self {
            health_seconds: Self::DEFAULT_SECONDS,
        }
    }
}

impl HealthTimeout {
    const DEFAULT_SECONDS: u64 = 300;

    pub fn duration(self) -> Duration {
        Duration::from_secs(self.health_seconds)
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
