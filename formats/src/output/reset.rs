//! `berth reset -o json|yaml`: what a reset did.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiVersion;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ResetReportKind {
    ResetReport,
}

/// The hooks a reset ran and what it removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetReport {
    pub api_version: ApiVersion,
    pub kind: ResetReportKind,
    /// The `<name>_reset` hooks that ran, in order.
    pub hooks: Vec<String>,
    /// Image references removed from the container runtime.
    pub images: Vec<String>,
    /// Paths removed.
    pub removed: Vec<String>,
}
