//! What a cell did, as `result.json` in its folder: written by `cell`, read by `report` and
//! `merge`.

use serde::{Deserialize, Serialize};

use super::specs::cell_folder_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Passed,
    Failed,
}

/// What one step did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    pub name: String,
    pub node: Option<String>,
    pub status: StepStatus,
    pub message: String,
    pub seconds: f64,
}

/// What a cell did: written as `result.json` in its folder, which the report reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellResult {
    pub test: String,
    pub os_id: String,
    pub os_title: String,
    pub provider: String,
    pub passed: bool,
    /// The first failure: its step, node and message.
    pub failure: Option<String>,
    pub seconds: f64,
    pub steps: Vec<StepResult>,
    /// The cell's folder, relative to the report.
    pub folder: String,
    /// Files in its folder worth a link (logs, consoles, collected state).
    pub files: Vec<String>,
}

/// A cell's folder in a report: `cells/<test>/<os>`, the test's part one of its own for each
/// name (`specs::cell_folder_name`).
pub fn cell_folder(test: &str, os: &str) -> String {
    format!("cells/{}/{}", cell_folder_name(test), os)
}
