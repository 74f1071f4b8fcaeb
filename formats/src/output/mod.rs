//! What the reporting commands print: kubectl's `-o`. `table` (the default) and `wide` (the
//! table with more columns) are for people; `json` and `yaml` print one document per result,
//! for scripts. Each document names its [`ApiVersion`] and kind; its JSON Schema is written
//! from the types here into `docs/schemas/` ([`schemas`]), and a document only changes within
//! a version by gaining fields.

mod addon_health;
mod fleet_lists;
mod node_status;
mod plan;
mod preflight_report;
mod reset;
pub mod schemas;

use std::fmt;
use std::str::FromStr;

pub use addon_health::{AddonHealth, AddonHealthKind};
pub use fleet_lists::{
    AddonRollout, FleetAddon, FleetNode, NodeList, NodeListKind, RolloutList, RolloutListKind,
};
pub use node_status::{
    AddonStatus, Component, ComponentObject, Condition, ConditionStatus, ConditionType,
    HostPreflights, InstallerRef, NodeStatus, NodeStatusKind, PreflightCheck, Transition,
};
pub use plan::{Decision, PlanDocument, PlanKind, PlannedAddon};
pub use preflight_report::{PreflightReport, PreflightReportKind};
pub use reset::{ResetReport, ResetReportKind};

/// The version every document of this crate carries as `apiVersion`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum ApiVersion {
    #[serde(rename = "berth/v1")]
    V1,
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    Json,
    Yaml,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Table, Format::Wide, Format::Json, Format::Yaml];

    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Wide => "wide",
            Format::Json => "json",
            Format::Yaml => "yaml",
        }
    }

    /// Whether the result is printed as a document (JSON or YAML) rather than a table.
    pub fn is_document(self) -> bool {
        matches!(self, Format::Json | Format::Yaml)
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|format| format.name()).collect();
                format!(
                    "`{text}` is not an output format: give {} (a file or folder is --out)",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Writes `document` as JSON (indented, one line break after) or YAML. A table format is the
/// caller's to print; given one, this writes JSON.
pub fn write_document<T: serde::Serialize>(
    format: Format,
    document: &T,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let text = match format {
        Format::Yaml => serde_norway::to_string(document).map_err(std::io::Error::other)?,
        _ => {
            let mut text = serde_json::to_string_pretty(document)?;
            text.push('\n');
            text
        }
    };
    out.write_all(text.as_bytes())
}

/// `-o FORMAT` and its alias `--json`, for a command's arguments.
#[cfg(feature = "cli")]
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// How to print the result: table, wide (more columns), json or yaml (one document, its
    /// schema in docs/schemas/).
    #[arg(
        long = "output",
        short = 'o',
        value_name = "FORMAT",
        default_value = "table",
        value_enum
    )]
    output: Format,
    /// The same as `-o json`.
    #[arg(long, conflicts_with = "output")]
    json: bool,
}

/// `-o` on a command that writes files rather than printing a document (`build`, `bundle`,
/// `support-bundle`…): refused with the flag that names the path, where clap alone would
/// suggest passing `-o` as a value.
#[cfg(feature = "cli")]
#[derive(clap::Args, Debug, Clone)]
pub struct NoOutputFormat {
    /// Refused: `-o` is an output format; a path is --out.
    #[arg(short = 'o', hide = true, value_name = "PATH", value_parser = refuse_o)]
    misplaced: Option<String>,
}

#[cfg(feature = "cli")]
fn refuse_o(_: &str) -> Result<String, String> {
    Err(
        "-o is an output format in Berth's commands (table, wide, json, yaml) and this command \
         prints no document: give the file or folder with --out"
            .into(),
    )
}

#[cfg(feature = "cli")]
impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &Format::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

#[cfg(feature = "cli")]
impl OutputArgs {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_read_by_name_and_others_refused_with_the_list() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>().unwrap(), format);
        }
        let error = "out.tar.gz".parse::<Format>().unwrap_err();
        assert!(error.contains("table, wide, json, yaml"), "{error}");
        assert!(error.contains("--out"), "{error}");
    }

    #[test]
    fn yaml_and_json_hold_the_same_document() {
        let document = serde_json::json!({"apiVersion": "berth/v1", "kind": "X", "list": [1, "a"]});
        let (mut json, mut yaml) = (Vec::new(), Vec::new());
        write_document(Format::Json, &document, &mut json).unwrap();
        write_document(Format::Yaml, &document, &mut yaml).unwrap();
        assert!(json.ends_with(b"}\n"));
        let from_yaml: serde_json::Value = serde_norway::from_slice(&yaml).unwrap();
        let from_json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(from_yaml, from_json);
        assert_eq!(from_json, document);
    }
}
