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
    /// Add-ons by name.
    pub addons: BTreeMap<String, AddonSpec>,
    /// `spec.kurl`: the installer's own settings (airgap, privateAddress, …).
    pub settings: Map<String, Value>,
}

/// One add-on as the spec asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct AddonSpec {
    /// `latest`, `X.Y.x` or an exact version.
    pub version: String,
    pub s3_override: Option<String>,
    /// Every other field, as written.
    pub config: Map<String, Value>,
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
        for (name, value) in spec {
            if name == INSTALLER_SETTINGS_KEY {
                settings = match value {
                    Value::Object(map) => map,
                    Value::Null => Map::new(),
                    other => {
                        return Err(error(
                            line_of(text, &name),
                            format!("spec.{name} is {}, expected a mapping", kind_of(&other)),
                            None,
                        ));
                    }
                };
                continue;
            }
            crate::name::check_plain("add-on name", &name)
                .map_err(|problem| error(line_of(text, &name), problem.to_string(), None))?;
            let addon = AddonSpec::from_value(&name, value)
                .map_err(|problem| error(line_of(text, &name), problem, None))?;
            if let Err(problem) = config_environment(&name, &addon.config) {
                let field = match &problem {
                    FieldError::BadName { field, .. }
                    | FieldError::Reserved { field, .. }
                    | FieldError::Collision { second: field, .. } => field.clone(),
                };
                return Err(error(line_of(text, &field), problem.to_string(), None));
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
            .collect();
        serde_json::json!({"apiVersion": API_VERSIONS[0], "kind": KIND, "spec": spec}).to_string()
    }

    /// The installer id: a prefix of the canonical spec's sha256. Two specs that say the same
    /// thing (whatever their layout, comments or key order) have the same id.
    pub fn id(&self) -> String {
        Sha256Digest::of(self.canonical_json().as_bytes()).hex()[..ID_LENGTH].to_string()
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
        })
    }

    fn to_map(&self) -> Map<String, Value> {
        let mut map = self.config.clone();
        map.insert("version".into(), Value::String(self.version.clone()));
        if let Some(url) = &self.s3_override {
            map.insert("s3Override".into(), Value::String(url.clone()));
        }
        map
    }
}

/// Why an add-on's fields cannot become its hooks' variables.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    #[error(
        "field `{field}` of {addon} is not a name a variable can carry; use letters, digits, `-` and `_`"
    )]
    BadName { addon: String, field: String },
    #[error("fields `{first}` and `{second}` of {addon} both become ${variable}; keep one")]
    Collision {
        addon: String,
        first: String,
        second: String,
        variable: String,
    },
    #[error("field `{field}` of {addon} would become ${variable}, which Berth sets itself")]
    Reserved {
        addon: String,
        field: String,
        variable: String,
    },
}

/// Whether `name` is a shell variable name: a letter or `_`, then letters, digits and `_`.
pub fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// The environment an add-on's hooks see for its configuration: `<ADDON>_<FIELD>` in upper
/// snake case. `true` becomes `1` and `false` the empty string, as kURL's hooks test them
/// (`[ "$X" = "1" ]`, `[ -n "$X" ]`); lists and mappings are passed as JSON. A field whose name
/// cannot be a variable, two fields that become one variable (`fooBar`, `foo-bar`), and a field
/// that would become `<ADDON>_VERSION` or `<ADDON>_S3_OVERRIDE` are refused.
pub fn config_environment(
    addon: &str,
    config: &Map<String, Value>,
) -> Result<Vec<(String, String)>, FieldError> {
    let prefix = upper_snake(addon);
    let reserved = [format!("{prefix}_VERSION"), format!("{prefix}_S3_OVERRIDE")];
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut environment = Vec::with_capacity(config.len());
    for (field, value) in config {
        let plain = !field.is_empty()
            && field
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
        let variable = format!("{prefix}_{}", upper_snake(field));
        if !plain || !is_variable_name(&variable) {
            return Err(FieldError::BadName {
                addon: addon.to_string(),
                field: field.clone(),
            });
        }
        if reserved.contains(&variable) {
            return Err(FieldError::Reserved {
                addon: addon.to_string(),
                field: field.clone(),
                variable,
            });
        }
        if let Some(first) = seen.insert(variable.clone(), field) {
            return Err(FieldError::Collision {
                addon: addon.to_string(),
                first: first.to_string(),
                second: field.clone(),
                variable,
            });
        }
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Bool(true) => "1".into(),
            Value::Bool(false) | Value::Null => String::new(),
            Value::Number(number) => number.to_string(),
            other => other.to_string(),
        };
        environment.push((variable, text));
    }
    Ok(environment)
}

/// `tomlConfig` → `TOML_CONFIG`, `s3Override` → `S3_OVERRIDE`, `cert-manager` → `CERT_MANAGER`.
pub fn upper_snake(name: &str) -> String {
    let characters: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (index, &character) in characters.iter().enumerate() {
        if character == '-' || character == '.' || character == ' ' {
            out.push('_');
            continue;
        }
        if character.is_ascii_uppercase() && index > 0 {
            let previous = characters[index - 1];
            let next_is_lower = characters
                .get(index + 1)
                .is_some_and(|c| c.is_ascii_lowercase());
            if previous.is_ascii_lowercase()
                || previous.is_ascii_digit()
                || (previous.is_ascii_uppercase() && next_is_lower)
            {
                out.push('_');
            }
        }
        out.push(character.to_ascii_uppercase());
    }
    out
}

/// A YAML scalar as `--set addon.field=value` gives it: `true`, `3` and `text` keep their types.
pub fn parse_scalar(text: &str) -> Value {
    serde_norway::from_str::<Value>(text)
        .ok()
        .filter(|value| !value.is_object() && !value.is_array() && !value.is_null())
        .unwrap_or_else(|| Value::String(text.to_string()))
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

/// Control characters a spec may not hold (tabs and line ends are text).
fn is_forbidden(character: char) -> bool {
    character.is_control() && !matches!(character, '\t' | '\n' | '\r')
}

/// The 1-based line where `text` first nests deeper than `limit`, counting open block
/// indentation levels, `- ` items opened on the line, and open flow brackets. It errs on the
/// side of counting (brackets inside quotes count too): a real spec is far from the limit.
fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow: usize = 0;
    for (index, line) in text.lines().enumerate() {
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        if flow == 0 {
            while indents.last().is_some_and(|&open| open >= indent) {
                indents.pop();
            }
            indents.push(indent);
        }
        let mut items = 0;
        let mut rest = content;
        // `- ` items and `? ` complex keys each open a level on the line.
        while let Some(after) = ["- ", "-\t", "? ", "?\t"]
            .iter()
            .find_map(|marker| rest.strip_prefix(marker))
        {
            items += 1;
            rest = after.trim_start();
        }
        let mut deepest = flow;
        for character in content.chars() {
            match character {
                '[' | '{' => {
                    flow += 1;
                    deepest = deepest.max(flow);
                }
                ']' | '}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if indents.len() + items + deepest > limit {
            return Some(index + 1);
        }
    }
    None
}

/// The 1-based line where `key:` first appears, for errors the YAML parser does not locate.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.strip_prefix(key)
                .or_else(|| {
                    line.strip_prefix('"')
                        .and_then(|l| l.strip_prefix(key))
                        .and_then(|l| l.strip_prefix('"'))
                })
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|index| index + 1)
}

#[cfg(test)]
mod tests;
