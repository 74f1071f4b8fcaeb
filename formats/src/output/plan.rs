//! `berth plan -o json|yaml` (and `install --dry-run`): what a run would do with each add-on
//! of the installer, and why.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiVersion;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PlanKind {
    Plan,
}

/// A run's decisions, add-on by add-on, in the order the run applies them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanDocument {
    pub api_version: ApiVersion,
    pub kind: PlanKind,
    /// The installer's id.
    pub installer: String,
    pub addons: Vec<PlannedAddon>,
}

/// One add-on's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlannedAddon {
    pub name: String,
    /// The version the run applies.
    pub version: String,
    pub decision: Decision,
    /// The version in place that the run replaces, for an upgrade, downgrade or rollback.
    pub from: Option<String>,
    /// Why, in words.
    pub reason: String,
}

/// What a run does with an add-on: the words of the DECISION column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Decision {
    /// Not on the node yet.
    Install,
    /// A newer version than the one in place.
    Upgrade,
    /// An older version, allowed by --allow-downgrade.
    Downgrade,
    /// The version in place, again: its configuration changed, or --force-reapply.
    Reapply,
    /// The version an earlier run left unfinished.
    Retry,
    /// Applied as asked and healthy: its already-applied hook runs, nothing else.
    AlreadyApplied,
    /// Applied as asked but unhealthy now: its install hooks run again.
    Repair,
    /// An older version without --allow-downgrade: the run stops before touching anything.
    DowngradeRefused,
    /// `berth rollback`: back to the version in place before.
    Rollback,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Install => "Install",
            Decision::Upgrade => "Upgrade",
            Decision::Downgrade => "Downgrade",
            Decision::Reapply => "Reapply",
            Decision::Retry => "Retry",
            Decision::AlreadyApplied => "AlreadyApplied",
            Decision::Repair => "Repair",
            Decision::DowngradeRefused => "DowngradeRefused",
            Decision::Rollback => "Rollback",
        }
    }
}
