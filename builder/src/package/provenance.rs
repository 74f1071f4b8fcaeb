//! Provenance: for each package, an in-toto statement (SLSA provenance v1) naming the builder,
//! the settings that decide the package's bytes, the Manifest and every input by digest (each
//! image's manifest, each asset with its URL, each host package file), in a DSSE envelope
//! signed with the vendor's key. Packages are reproducible, so `berth-build verify-provenance`
//! checks the envelope's signature, builds the add-on again with the statement's settings and
//! compares the package's digest with the statement's subject.

use serde_json::{Value, json};

use super::sbom::{Scanned, scan_package};

pub use berth_formats::release::PROVENANCE_SUFFIX;
/// What kind of build made the package: Berth's packaging of one add-on folder.
pub const BUILD_TYPE: &str = "urn:berth:build-type:package:v1";

/// The settings of a build that decide a package's bytes, as a statement records them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildParameters {
    /// The add-on folder, relative to the repository (`addons/<name>/<version>`).
    pub addon: String,
    pub arch: String,
    /// gzip (the default, left out) or zstd.
    #[serde(
        default,
        skip_serializing_if = "berth_formats::compression::Compression::is_gzip"
    )]
    pub compression_format: berth_formats::compression::Compression,
    /// The level (`compression` in statements made before zstd).
    #[serde(alias = "compression")]
    pub compression_level: u32,
    pub mtime: u64,
    /// The distros whose host packages were built (`--distro`); all the Manifest names when
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distros: Option<Vec<String>>,
    /// Whether the package carries its bill of materials (not with `--no-sbom`).
    #[serde(default = "carries_sbom")]
    pub sbom: bool,
}

fn carries_sbom() -> bool {
    true
}

/// The statement for the package at `path`, built with `parameters`.
pub fn statement(path: &std::path::Path, parameters: &BuildParameters) -> anyhow::Result<Value> {
    Ok(statement_of(path, &scan_package(path, None)?, parameters))
}

/// The statement for a package already scanned.
pub fn statement_of(
    path: &std::path::Path,
    opened: &Scanned,
    parameters: &BuildParameters,
) -> Value {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut dependencies = Vec::new();
    let urls = opened.asset_urls();
    let host: std::collections::BTreeSet<&str> = opened
        .index
        .host_packages
        .values()
        .flatten()
        .map(String::as_str)
        .collect();
    for file in &opened.index.files {
        let name = file.path.rsplit('/').next().unwrap_or(&file.path);
        let digest = json!({"sha256": file.sha256.hex()});
        if file.path == "Manifest" {
            dependencies.push(json!({"name": "Manifest", "uri": format!("file:{}/Manifest", parameters.addon), "digest": digest}));
        } else if let Some(asset) = file.path.strip_prefix("assets/") {
            let uri = urls
                .get(asset)
                .cloned()
                .unwrap_or_else(|| format!("file:{}/{}", parameters.addon, file.path));
            dependencies.push(json!({"name": asset, "uri": uri, "digest": digest}));
        } else if host.contains(name) {
            dependencies.push(json!({"name": name, "digest": digest}));
        }
    }
    for image in &opened.index.images {
        dependencies.push(json!({
            "name": image.name,
            "uri": format!("oci://{}", image.reference),
            "digest": {"sha256": image.manifest_digest.hex()},
        }));
    }
    json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": file_name, "digest": {"sha256": opened.digest.map(|digest| digest.hex()).unwrap_or_default()}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": parameters,
                "internalParameters": {"inputsDigest": opened.index.inputs_digest.to_string()},
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": format!("urn:berth:berth-build:{}", env!("CARGO_PKG_VERSION"))},
            },
        },
    })
}
