//! The JSON Schemas of the documents the commands print, written from their types: the files
//! in `docs/schemas/` are these, and a test fails when they drift apart (run it with
//! `BERTH_WRITE_SCHEMAS=1` to write them again after a change to a document).

use super::{
    AddonHealth, NodeList, NodeStatus, PlanDocument, PreflightReport, ResetReport, RolloutList,
};

/// Each document's schema, by file name.
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        (
            "node-status.v1.json",
            schemars::schema_for!(NodeStatus).to_value(),
        ),
        (
            "plan.v1.json",
            schemars::schema_for!(PlanDocument).to_value(),
        ),
        (
            "addon-health.v1.json",
            schemars::schema_for!(AddonHealth).to_value(),
        ),
        (
            "preflight-report.v1.json",
            schemars::schema_for!(PreflightReport).to_value(),
        ),
        (
            "reset-report.v1.json",
            schemars::schema_for!(ResetReport).to_value(),
        ),
        (
            "node-list.v1.json",
            schemars::schema_for!(NodeList).to_value(),
        ),
        (
            "rollout-list.v1.json",
            schemars::schema_for!(RolloutList).to_value(),
        ),
        // A package's own index (`package.json`), as `berth-build inspect -o json` prints it.
        (
            "package-index.v1.json",
            schemars::schema_for!(crate::package_index::PackageIndex).to_value(),
        ),
    ]
}

/// The schema file's text: indented, ending in a line break.
pub fn text(schema: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_files_are_the_documents_own() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas");
        let write = std::env::var_os("BERTH_WRITE_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for (name, schema) in all() {
            let path = folder.join(name);
            let wanted = text(&schema);
            if write {
                fs_err::create_dir_all(&folder).unwrap();
                fs_err::write(&path, &wanted).unwrap();
            } else if fs_err::read_to_string(&path).ok().as_deref() != Some(wanted.as_str()) {
                stale.push(name);
            }
        }
        assert!(
            stale.is_empty(),
            "docs/schemas/ differs from the documents' types for {stale:?}: if the change is \
             meant, write them again with BERTH_WRITE_SCHEMAS=1 cargo test -p berth-formats schema"
        );
    }
}
