//! Provenance: for each package, an in-toto statement (SLSA provenance v1) naming the builder,
//! the settings that decide the package's bytes, the Manifest and every input by digest (each
//! image's manifest, each asset with its URL, each host package file), in a DSSE envelope
//! signed with the vendor's key. Packages are reproducible, so `berth-build verify-provenance`
//! checks the envelope's signature, builds the add-on again with the statement's settings and
//! compares the package's digest with the statement's subject.

use anyhow::Context as _;
use base64::Engine as _;
use berth_formats::signature::{PublicKey, SigningKey, verify};
use serde_json::{Value, json};

use super::sbom::{Scanned, scan_package};

/// The suffix of a package's provenance beside it.
pub const PROVENANCE_SUFFIX: &str = ".intoto.json";
/// DSSE's payload type for in-toto statements.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// What kind of build made the package: Berth's packaging of one add-on folder.
pub const BUILD_TYPE: &str = "urn:berth:build-type:package:v1";

/// The settings of a build that decide a package's bytes, as a statement records them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildParameters {
    /// The add-on folder, relative to the repository (`addons/<name>/<version>`).
    pub addon: String,
    pub arch: String,
    pub compression: u32,
    pub mtime: u64,
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
        "subject": [{"name": file_name, "digest": {"sha256": opened.digest.hex()}}],
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

/// DSSE's pre-authentication encoding: what a signature covers.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// `statement` in a DSSE envelope signed with `key`.
pub fn envelope(statement: &Value, key: &SigningKey) -> anyhow::Result<Value> {
    let payload = serde_json::to_vec(statement)?;
    let signature = key.sign("the provenance statement", &pae(PAYLOAD_TYPE, &payload))?;
    Ok(json!({
        "payloadType": PAYLOAD_TYPE,
        "payload": base64::engine::general_purpose::STANDARD.encode(&payload),
        "signatures": [{"keyid": key.public().fingerprint(), "sig": signature}],
    }))
}

/// The statement of an envelope one of `keys` signed.
pub fn open_envelope(at: &str, envelope: &Value, keys: &[PublicKey]) -> anyhow::Result<Value> {
    if envelope["payloadType"] != PAYLOAD_TYPE {
        anyhow::bail!("{at}: payloadType is not {PAYLOAD_TYPE}");
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap_or_default())
        .with_context(|| format!("{at}: its payload is not base64"))?;
    let message = pae(PAYLOAD_TYPE, &payload);
    let signatures = envelope["signatures"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut last = None;
    for signature in &signatures {
        match verify(
            keys,
            at,
            &message,
            at,
            signature["sig"].as_str().unwrap_or_default(),
        ) {
            Ok(_) => return Ok(serde_json::from_slice(&payload)?),
            Err(error) => last = Some(error),
        }
    }
    Err(last.map_or_else(
        || anyhow::anyhow!("{at} carries no signature"),
        anyhow::Error::from,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_opens_with_its_key_alone_and_not_once_changed() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let statement = json!({"_type": "https://in-toto.io/Statement/v1", "subject": []});
        let sealed = envelope(&statement, &key).unwrap();
        assert_eq!(
            open_envelope("p", &sealed, &[key.public()]).unwrap(),
            statement
        );
        assert!(open_envelope("p", &sealed, &[other.public()]).is_err());
        let mut changed = sealed.clone();
        changed["payload"] =
            json!(base64::engine::general_purpose::STANDARD.encode(br#"{"subject":[1]}"#));
        assert!(open_envelope("p", &changed, &[key.public()]).is_err());
        // DSSE's PAE, as its specification spells it out.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }
}
