//! The decision for each add-on: a value computed from its record and what the run asks for,
//! printed by `berth plan` and carried out by the engine.
//!
//! The rule (kops channels, sharpened by kURL's history): no record → Install; the last run
//! failed on this same version → Retry; desired version newer → Upgrade; older → refused
//! unless allowed; same version with another id, package digest, configuration or engine
//! generation → Reapply; otherwise AlreadyApplied. `--force-reapply` turns AlreadyApplied and
//! Reapply into a forced Reapply.

use std::cmp::Ordering;
use std::fmt;

use berth_formats::versions::compare_versions;

use crate::node::state::{AddonState, Outcome, Reason, Target};
use crate::phase::Step;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Install,
    Upgrade {
        from: String,
    },
    /// An older version, allowed by `--allow-downgrade` or asked for by a rollback.
    Downgrade {
        from: String,
    },
    Reapply {
        because: String,
    },
    Retry {
        because: String,
    },
    AlreadyApplied,
    /// Applied as asked, but its components are not healthy now: the install hooks run
    /// again, as a re-run of kURL's installer would.
    Repair {
        because: String,
    },
    /// An older version without permission: the run stops before touching anything.
    DowngradeRefused {
        from: String,
    },
    /// `berth rollback`: back to a version applied before, with the configuration it had.
    Rollback {
        from: String,
    },
}

impl Decision {
    /// Whether the add-on's install hooks run.
    pub fn applies(&self) -> bool {
        !matches!(
            self,
            Decision::AlreadyApplied | Decision::DowngradeRefused { .. }
        )
    }

    /// The decision's word, as the plan's table and documents print it.
    pub fn kind(&self) -> berth_formats::output::Decision {
        use berth_formats::output::Decision as Kind;
        match self {
            Decision::Install => Kind::Install,
            Decision::Upgrade { .. } => Kind::Upgrade,
            Decision::Downgrade { .. } => Kind::Downgrade,
            Decision::Reapply { .. } => Kind::Reapply,
            Decision::Retry { .. } => Kind::Retry,
            Decision::AlreadyApplied => Kind::AlreadyApplied,
            Decision::Repair { .. } => Kind::Repair,
            Decision::DowngradeRefused { .. } => Kind::DowngradeRefused,
            Decision::Rollback { .. } => Kind::Rollback,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The version in place the decision replaces.
    pub fn from(&self) -> Option<&str> {
        match self {
            Decision::Upgrade { from }
            | Decision::Downgrade { from }
            | Decision::DowngradeRefused { from }
            | Decision::Rollback { from } => Some(from),
            _ => None,
        }
    }

    /// The `Progressing` reason while it is carried out.
    pub fn progressing_reason(&self) -> Reason {
        match self {
            Decision::Upgrade { .. } => Reason::Upgrading,
            Decision::Downgrade { .. } | Decision::Rollback { .. } => Reason::RollingBack,
            _ => Reason::Installing,
        }
    }
}

impl fmt::Display for Decision {
    /// The reason, in words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Install => write!(f, "not installed on this node"),
            Decision::Upgrade { from } => {
                write!(f, "{from} is installed; a newer version is asked for")
            }
            Decision::Downgrade { from } => {
                write!(f, "{from} is installed; going back to an older version")
            }
            Decision::Reapply { because } | Decision::Retry { because } => write!(f, "{because}"),
            Decision::Repair { because } => {
                write!(f, "applied as asked, but {because}")
            }
            Decision::AlreadyApplied => write!(
                f,
                "applied with the same version, id, package and configuration"
            ),
            Decision::Rollback { from } => write!(f, "rolling back from {from}, as asked"),
            Decision::DowngradeRefused { from } => write!(
                f,
                "{from} is installed and the spec asks for an older version; pass --allow-downgrade (or use berth rollback) to go back"
            ),
        }
    }
}

/// What the run is allowed to do beyond the rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct Permissions {
    pub allow_downgrade: bool,
    pub force_reapply: bool,
}

/// Decides what to do for one add-on.
pub fn decide(record: &AddonState, target: &Target, permissions: Permissions) -> Decision {
    let failed_here = record.attempt.as_ref().filter(|attempt| {
        attempt.outcome != Outcome::Succeeded && attempt.target.version == target.version
    });
    let Some(current) = &record.current else {
        return match failed_here {
            Some(attempt) => Decision::Retry {
                because: failure_words(attempt.outcome, attempt.phase),
            },
            None => Decision::Install,
        };
    };
    let installed = &current.target;
    match compare_versions(&target.version, &installed.version) {
        Ordering::Greater => {
            return Decision::Upgrade {
                from: installed.version.clone(),
            };
        }
        Ordering::Less if permissions.allow_downgrade => {
            return Decision::Downgrade {
                from: installed.version.clone(),
            };
        }
        Ordering::Less => {
            return Decision::DowngradeRefused {
                from: installed.version.clone(),
            };
        }
        Ordering::Equal => {}
    }
    if let Some(attempt) = failed_here {
        return Decision::Retry {
            because: failure_words(attempt.outcome, attempt.phase),
        };
    }
    let mut changes = Vec::new();
    if installed.id != target.id {
        changes.push(format!("installer id {} → {}", installed.id, target.id));
    }
    if installed.package_digest != target.package_digest {
        changes.push("the package changed".to_string());
    }
    if installed.config_hash != target.config_hash {
        changes.push("its configuration changed".to_string());
    }
    if installed.generation != target.generation {
        changes.push(format!(
            "the engine generation changed ({} → {})",
            installed.generation, target.generation
        ));
    }
    if permissions.force_reapply {
        changes.insert(0, "--force-reapply".to_string());
    }
    if changes.is_empty() {
        Decision::AlreadyApplied
    } else {
        Decision::Reapply {
            because: changes.join("; "),
        }
    }
}

fn failure_words(outcome: Outcome, phase: Step) -> String {
    match outcome {
        Outcome::Running => format!("the last run was interrupted during {phase}"),
        _ => format!("the last run failed during {phase}"),
    }
}

#[cfg(test)]
mod tests;
