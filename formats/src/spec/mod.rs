//! The Installer spec: kURL's `apiVersion: cluster.kurl.sh/v1beta1`, `kind: Installer`.
//!
//! Each key under `spec` names an add-on; `spec.kurl` holds the installer's own settings. An
//! add-on keeps every field the spec gives it (beyond `version` and `s3Override`) as its
//! configuration, which reaches its hooks as `<ADDON>_<FIELD>` environment variables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Sha256Digest;

/// The API versions kURL has used for its Installer kind.
pub const API_VERSIONS: [&str; 2] = ["cluster.kurl.sh/v1beta1", "kurl.sh/v1beta1"];
pub const KIND: &str = "Installer";
/// The key under `spec` that holds the installer's own settings, not an add-on.
pub const INSTALLER_SETTINGS_KEY: &str = "kurl";
/// The other keys of kURL's Installer type that hold settings of the host or the cluster, not
/// an add-on with a version: kept, as written, for the hooks that read them.
pub const SETTINGS_SECTIONS: [&str; 5] = [
    "selinuxConfig",
    "iptablesConfig",
    "firewalldConfig",
    "ufwConfig",
    "helm",
];
/// Spec keys whose add-on folder kURL names otherwise: `certManager` is `addons/cert-manager/`.
pub const ADDON_FOLDERS: [(&str, &str); 2] = [
    ("certManager", "cert-manager"),
    ("metricsServer", "metrics-server"),
];

/// The add-on folder a spec key names.
pub fn addon_folder(key: &str) -> &str {
    ADDON_FOLDERS
        .iter()
        .find(|(spec_key, _)| *spec_key == key)
        .map_or(key, |(_, folder)| folder)
}
/// The spec key that names an add-on folder: `certManager` for `cert-manager`.
pub fn spec_key(folder: &str) -> &str {
    ADDON_FOLDERS
        .iter()
        .find(|(_, name)| *name == folder)
        .map_or(folder, |(spec_key, _)| spec_key)
}

/// Hex digits of the spec digest that make an installer id: 128 bits, so that no one can
/// craft another spec with the id of a spec someone else posted (kURL's 7 digits take seconds).
pub const ID_LENGTH: usize = 32;
/// The largest spec read, in bytes: kURL's specs are a few KiB.
pub const MAX_SPEC_BYTES: usize = 512 * 1024;
/// The deepest nesting a spec may have (block indentation, `- ` items and flow brackets
/// together): the YAML parser's time grows with the square of the depth.
pub const MAX_SPEC_DEPTH: usize = 64;

/// A parsed Installer spec.
#[derive(Debug, Clone, PartialEq)]
pub struct InstallerSpec {
    pub api_version: String,
    pub name: Option<String>,
    /// Add-ons by folder name (`cert-manager` for the spec's `certManager`).
    pub addons: BTreeMap<String, AddonSpec>,
    /// `spec.kurl`: the installer's own settings (airgap, privateAddress, …).
    pub settings: Map<String, Value>,
    /// kURL's other settings sections ([`SETTINGS_SECTIONS`]), by their spec key.
    pub sections: BTreeMap<String, Map<String, Value>>,
}

/// One add-on as the spec asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct AddonSpec {
    /// `latest`, `X.Y.x` or an exact version.
    pub version: String,
    pub s3_override: Option<String>,
    /// Every other field, as written.
    pub config: Map<String, Value>,
    /// The line (from 1) each field (and `version`) is on in the spec's text, for errors that
    /// name one.
    pub lines: BTreeMap<String, usize>,
}

/// Why a spec was refused.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {problem}{}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), hint.as_ref().map(|h| format!("\nhint: {h}")).unwrap_or_default())]
pub struct SpecError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub problem: String,
    pub hint: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
    spec: Option<Map<String, Value>>,
}

impl InstallerSpec {
    /// Reads and parses the spec at `path`.
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = fs_err::read_to_string(path).map_err(|error| SpecError {
            path: path.to_path_buf(),
            line: None,
            problem: error.to_string(),
            hint: None,
        })?;
        Self::parse(path, &text)
    }

    /// Parses `text`, the contents of `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, SpecError> {
        let error = |line: Option<usize>, problem: String, hint: Option<&str>| SpecError {
            path: path.to_path_buf(),
            line,
            problem,
            hint: hint.map(str::to_string),
        };
        // kURL's own keys take kURL's fields, of kURL's types.
        let check_kurl_fields = |key: &str, fields: &Map<String, Value>| {
            if !kurl_type::is_kurl_key(key) {
                return Ok(());
            }
            fields.iter().try_for_each(|(field, value)| {
                kurl_type::check_field(key, field, value).map_err(|problem| {
                    error(line_of_path(text, &["spec", key, field]), problem, None)
                })
            })
        };
        if text.len() > MAX_SPEC_BYTES {
            return Err(error(
                None,
                format!(
                    "the spec is {} bytes, more than the {MAX_SPEC_BYTES} Berth reads",
                    text.len()
                ),
                Some("an Installer spec is a few KiB; move large values into the add-on's files"),
            ));
        }
        if let Some((line, character)) = text.lines().enumerate().find_map(|(index, line)| {
            line.chars()
                .find(|c| is_forbidden(*c))
                .map(|c| (index + 1, c))
        }) {
            return Err(error(
                Some(line),
                format!("the spec holds the control character {:?}", character),
                Some("a spec is text: remove the character"),
            ));
        }
        if let Some(line) = too_deep(text, MAX_SPEC_DEPTH) {
            return Err(error(
                Some(line),
                format!("the spec nests deeper than {MAX_SPEC_DEPTH} levels"),
                Some("an Installer spec nests a few levels: add-on, field, value"),
            ));
        }
        let raw: RawSpec = serde_norway::from_str(text).map_err(|e| {
            error(
                e.location().map(|l| l.line()),
                format!("not a valid Installer spec: {e}"),
                Some("the spec is YAML with apiVersion, kind: Installer and spec"),
            )
        })?;
        let api_version = raw.api_version.unwrap_or_default();
        if !API_VERSIONS.contains(&api_version.as_str()) {
            return Err(error(
                line_of(text, "apiVersion"),
                format!("apiVersion is `{api_version}`, not one Berth reads"),
                Some("use `apiVersion: cluster.kurl.sh/v1beta1`"),
            ));
        }
        let kind = raw.kind.unwrap_or_default();
        if kind != KIND {
            return Err(error(
                line_of(text, "kind"),
                format!("kind is `{kind}`, expected `{KIND}`"),
                Some("use `kind: Installer`"),
            ));
        }
        let Some(spec) = raw.spec else {
            return Err(error(
                None,
                "there is no `spec`".into(),
                Some("list the add-ons under `spec`, e.g. `spec: {containerd: {version: latest}}`"),
            ));
        };
        let mut addons = BTreeMap::new();
        let mut settings = Map::new();
        let mut sections = BTreeMap::new();
        for (key, value) in spec {
            let is_settings = key == INSTALLER_SETTINGS_KEY;
            if is_settings || SETTINGS_SECTIONS.contains(&key.as_str()) {
                let map = match value {
                    Value::Object(map) => map,
                    Value::Null => Map::new(),
                    other => {
                        return Err(error(
                            line_of(text, &key),
                            format!("spec.{key} is {}, expected a mapping", kind_of(&other)),
                            None,
                        ));
                    }
                };
                check_kurl_fields(&key, &map)?;
                if is_settings {
                    settings = map;
                } else {
                    sections.insert(key, map);
                }
                continue;
            }
            let name = addon_folder(&key).to_string();
            crate::name::check_plain("add-on name", &name)
                .map_err(|problem| error(line_of(text, &name), problem.to_string(), None))?;
            let mut addon = AddonSpec::from_value(&name, value)
                .map_err(|problem| error(line_of_path(text, &["spec", &key]), problem, None))?;
            addon.lines = addon
                .config
                .keys()
                .map(String::as_str)
                .chain(["version"])
                .filter_map(|field| {
                    let line = line_of_path(text, &["spec", &key, field])?;
                    Some((field.to_string(), line))
                })
                .collect();
            check_kurl_fields(&key, &addon.config)?;
            if let Err(problem) = config_environment(&name, &addon.config) {
                let field = match &problem {
                    FieldError::BadName { field, .. }
                    | FieldError::Reserved { field, .. }
                    | FieldError::Collision { second: field, .. } => field.clone(),
                };
                return Err(error(
                    addon.lines.get(&field).copied(),
                    problem.to_string(),
                    None,
                ));
            }
            addons.insert(name, addon);
        }
        let name = raw
            .metadata
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(InstallerSpec {
            api_version,
            name,
            addons,
            settings,
            sections,
        })
    }

    /// The spec as canonical JSON: keys sorted, no insignificant whitespace.
    pub fn canonical_json(&self) -> String {
        let spec: Map<String, Value> = self
            .addons
            .iter()
            .map(|(name, addon)| (name.clone(), Value::Object(addon.to_map())))
            .chain((!self.settings.is_empty()).then(|| {
                (
                    INSTALLER_SETTINGS_KEY.to_string(),
                    Value::Object(self.settings.clone()),
                )
            }))
            .chain(
                self.sections
                    .iter()
                    .map(|(key, section)| (key.clone(), Value::Object(section.clone()))),
            )
            .collect();
        serde_json::json!({"apiVersion": API_VERSIONS[0], "kind": KIND, "spec": spec}).to_string()
    }

    /// The installer id: a prefix of the canonical spec's sha256. Two specs that say the same
    /// thing (whatever their layout, comments or key order) have the same id.
    pub fn id(&self) -> String {
        Sha256Digest::of(self.canonical_json().as_bytes()).hex()[..ID_LENGTH].to_string()
    }

    /// `spec.kurl` and kURL's other settings sections, by spec key.
    pub fn settings_sections(&self) -> BTreeMap<String, Map<String, Value>> {
        self.sections
            .clone()
            .into_iter()
            .chain([(INSTALLER_SETTINGS_KEY.to_string(), self.settings.clone())])
            .collect()
    }

    /// Whether the installer settings ask for an airgap install.
    pub fn airgap(&self) -> bool {
        self.settings.get("airgap").is_some_and(is_true)
    }
}

impl AddonSpec {
    fn from_value(name: &str, value: Value) -> Result<Self, String> {
        let mut map = match value {
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "spec.{name} is {}, expected a mapping with a `version`",
                    kind_of(&other)
                ));
            }
        };
        let version = match map.remove("version") {
            Some(Value::String(text)) if !text.trim().is_empty() => text.trim().to_string(),
            // YAML reads `version: 1.24` as a number; kURL takes it as the text.
            Some(Value::Number(number)) => number.to_string(),
            Some(other) => {
                return Err(format!(
                    "spec.{name}.version is {}, expected a version such as `latest`, `1.2.x` or `1.2.3`",
                    kind_of(&other)
                ));
            }
            None => {
                return Err(format!(
                    "spec.{name} has no `version`; add `version: latest` or a version from versions.json"
                ));
            }
        };
        crate::name::check_plain("version", &version)
            .map_err(|problem| format!("spec.{name}.version: {problem}"))?;
        let s3_override = match map.remove("s3Override") {
            Some(Value::String(url)) if !url.is_empty() => Some(url),
            _ => None,
        };
        Ok(AddonSpec {
            version,
            s3_override,
            config: map,
            lines: BTreeMap::new(),
        })
    }

    /// The `file:line` (or the file alone) of field `field` of this add-on in spec `path`.
    pub fn locate(&self, path: &Path, field: &str) -> String {
        match self.lines.get(field) {
            Some(line) => format!("{}:{line}", path.display()),
            None => path.display().to_string(),
        }
    }

    /// The add-on's fields as the spec gives them, `version` and `s3Override` among them.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut map = self.config.clone();
        map.insert("version".into(), Value::String(self.version.clone()));
        if let Some(url) = &self.s3_override {
            map.insert("s3Override".into(), Value::String(url.clone()));
        }
        map
    }
}

fn is_true(value: &Value) -> bool {
    match value {
        Value::Bool(flag) => *flag,
        Value::String(text) => matches!(text.as_str(), "true" | "1" | "yes"),
        Value::Number(number) => number.as_u64() == Some(1),
        _ => false,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

mod bounds;
mod environment;
pub mod flags;
pub mod kurl_type;

use bounds::{is_forbidden, line_of, line_of_path, too_deep};
pub use environment::{
    FieldError, config_environment, is_variable_name, parse_scalar, upper_snake,
};

#[cfg(test)]
mod tests;
