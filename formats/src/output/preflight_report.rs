//! `berth preflight -o json|yaml`: each host preflight check's result.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApiVersion, PreflightCheck};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PreflightReportKind {
    PreflightReport,
}

/// One run of host preflights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreflightReport {
    pub api_version: ApiVersion,
    pub kind: PreflightReportKind,
    /// How many checks passed, warned and failed.
    pub summary: String,
    /// Every check, in the order they ran.
    pub checks: Vec<PreflightCheck>,
    /// How long collecting and analyzing took, in milliseconds.
    pub milliseconds: u64,
}
