//! `berth health NAME -o json|yaml`: one add-on's components, probed once, and the
//! conditions they make.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApiVersion, Component, Condition};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AddonHealthKind {
    AddonHealth,
}

/// One probe of an add-on's components.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddonHealth {
    pub api_version: ApiVersion,
    pub kind: AddonHealthKind,
    pub name: String,
    /// The version whose components were probed.
    pub version: String,
    /// When (RFC 3339).
    pub checked_at: String,
    /// Available and Degraded.
    pub conditions: Vec<Condition>,
    pub components: Vec<Component>,
}
