//! An add-on's spec fields as its hooks see them: `<ADDON>_<FIELD>` variables, as kURL's
//! yamltobash makes them, each name checked and none colliding with another.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

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
