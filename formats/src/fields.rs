//! An add-on's declaration of the spec fields it takes (`fields.yaml` in its folder), for the
//! add-ons kURL's Installer type does not know (Berth's own, a vendor's): each field's name,
//! type, default and one line of help. The builder carries the declarations into
//! `versions.json`; the node's plan and the server's `POST /installer` check a spec against
//! them (an unknown field or a value of the wrong type is refused, naming the nearest field)
//! and fill in the defaults the spec leaves out, so that they count in the configuration hash.
//!
//! ```yaml
//! fields:
//!   - name: port
//!     type: integer
//!     default: 8080
//!     help: the port the demo answers on
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The declaration's file name in an add-on folder.
pub const FIELDS_FILE: &str = "fields.yaml";
/// The largest declaration read: a few fields fit in a few KiB.
pub const MAX_FIELDS_BYTES: usize = 64 * 1024;
/// The most fields one add-on declares.
pub const MAX_FIELDS: usize = 256;

/// A field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Boolean,
    Integer,
    List,
    Mapping,
}

impl FieldType {
    fn fits(self, value: &Value) -> bool {
        match self {
            FieldType::String => value.is_string() || value.is_number(),
            FieldType::Boolean => value.is_boolean(),
            FieldType::Integer => value.is_i64() || value.is_u64(),
            FieldType::List => value.is_array(),
            FieldType::Mapping => value.is_object(),
        }
    }

    fn words(self) -> &'static str {
        match self {
            FieldType::String => "a string",
            FieldType::Boolean => "true or false",
            FieldType::Integer => "a whole number",
            FieldType::List => "a list",
            FieldType::Mapping => "a mapping",
        }
    }
}

/// One declared field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldDeclaration {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    pub help: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldsFile {
    fields: Vec<FieldDeclaration>,
}

/// Reads a declaration (`what` names it in errors) and checks it: plain names, each once,
/// defaults of their field's type, one line of help.
pub fn parse(what: &str, text: &str) -> Result<Vec<FieldDeclaration>, String> {
    if text.len() > MAX_FIELDS_BYTES {
        return Err(format!(
            "{what} is {} bytes, more than the {MAX_FIELDS_BYTES} Berth reads",
            text.len()
        ));
    }
    let file: FieldsFile =
        serde_norway::from_str(text).map_err(|error| format!("{what}: {error}"))?;
    check(what, &file.fields)?;
    Ok(file.fields)
}

/// Checks declarations read from anywhere (`versions.json` too).
pub fn check(what: &str, fields: &[FieldDeclaration]) -> Result<(), String> {
    if fields.len() > MAX_FIELDS {
        return Err(format!(
            "{what} declares {} fields, more than {MAX_FIELDS}",
            fields.len()
        ));
    }
    for (index, field) in fields.iter().enumerate() {
        let plain = !field.name.is_empty()
            && field.name.len() <= 64
            && field.name.starts_with(|c: char| c.is_ascii_alphabetic())
            && field
                .name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'));
        if !plain {
            return Err(format!(
                "{what}: field `{}` is not a plain name (a letter, then letters, digits, `-` and `_`)",
                field.name
            ));
        }
        if matches!(field.name.as_str(), "version" | "s3Override") {
            return Err(format!(
                "{what}: `{}` is every add-on's own field; do not declare it",
                field.name
            ));
        }
        if fields[..index].iter().any(|other| other.name == field.name) {
            return Err(format!("{what}: field `{}` is declared twice", field.name));
        }
        if let Some(default) = &field.default
            && !field.kind.fits(default)
        {
            return Err(format!(
                "{what}: the default of `{}` is not {}",
                field.name,
                field.kind.words()
            ));
        }
        if field.help.trim().is_empty() || field.help.contains(['\n', '\r']) {
            return Err(format!(
                "{what}: field `{}` needs one line of help",
                field.name
            ));
        }
    }
    Ok(())
}

/// A field of a spec its add-on refuses: which, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldRefused {
    /// The add-on (its folder name).
    pub addon: String,
    pub field: String,
    pub message: String,
}

/// Checks `config` (an add-on's fields in a spec) against the add-on's declaration and fills
/// in the defaults it leaves out. The error names the field and, for an unknown one, the
/// nearest declared field.
pub fn apply(
    addon: &str,
    declared: &[FieldDeclaration],
    config: &mut Map<String, Value>,
) -> Result<(), FieldRefused> {
    for (name, value) in config.iter() {
        let refused = |message| FieldRefused {
            addon: addon.to_string(),
            field: name.clone(),
            message,
        };
        let Some(field) = declared.iter().find(|field| &field.name == name) else {
            let known: Vec<&str> = declared.iter().map(|field| field.name.as_str()).collect();
            let hint = unknown_field_hint(name, &known);
            return Err(refused(format!(
                "spec.{addon}.{name} is not a field of {addon}{hint}"
            )));
        };
        if !value.is_null() && !field.kind.fits(value) {
            return Err(refused(format!(
                "spec.{addon}.{name} is {value}, expected {} ({})",
                field.kind.words(),
                field.help
            )));
        }
    }
    for field in declared {
        if let Some(default) = &field.default
            && !config.contains_key(&field.name)
        {
            config.insert(field.name.clone(), default.clone());
        }
    }
    Ok(())
}

/// What to tell a spec that names `name`, which is not among `known`: the nearest known field
/// when one is near, else all of them (`; did you mean `port`?`).
pub fn unknown_field_hint(name: &str, known: &[&str]) -> String {
    if known.is_empty() {
        return "; it takes no fields but `version`".to_string();
    }
    match crate::name::nearest(name, known.iter().copied()) {
        Some(nearest) => format!("; did you mean `{nearest}`?"),
        None => format!(
            "; its fields are {}",
            known
                .iter()
                .map(|field| format!("`{field}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = "fields:\n  - name: port\n    type: integer\n    default: 8080\n    help: the port it answers on\n  - name: greeting\n    type: string\n    help: what it says\n";

    #[test]
    fn a_declaration_fills_defaults_and_refuses_unknown_or_mistyped_fields() {
        let declared = parse("demo/fields.yaml", DEMO).unwrap();
        let mut config = Map::new();
        apply("demo", &declared, &mut config).unwrap();
        assert_eq!(config["port"], 8080);
        assert!(!config.contains_key("greeting"));

        let mut config = Map::from_iter([("prot".to_string(), Value::from(9090))]);
        let error = apply("demo", &declared, &mut config).unwrap_err();
        assert_eq!(error.field, "prot");
        assert_eq!(
            error.message,
            "spec.demo.prot is not a field of demo; did you mean `port`?"
        );
        let mut config = Map::from_iter([("port".to_string(), Value::from("high"))]);
        let error = apply("demo", &declared, &mut config).unwrap_err().message;
        assert!(
            error.contains("expected a whole number (the port it answers on)"),
            "{error}"
        );
        let mut config = Map::from_iter([("x".to_string(), Value::from(1))]);
        let error = apply("none", &[], &mut config).unwrap_err().message;
        assert!(
            error.ends_with("it takes no fields but `version`"),
            "{error}"
        );
    }

    #[test]
    fn bad_declarations_are_refused() {
        for (text, expected) in [
            (
                "fields:\n  - {name: 'a b', type: string, help: x}\n",
                "not a plain name",
            ),
            (
                "fields:\n  - {name: version, type: string, help: x}\n",
                "every add-on's own field",
            ),
            (
                "fields:\n  - {name: a, type: string, help: x}\n  - {name: a, type: string, help: y}\n",
                "declared twice",
            ),
            (
                "fields:\n  - {name: a, type: integer, default: x, help: y}\n",
                "is not a whole number",
            ),
            (
                "fields:\n  - {name: a, type: string, help: ''}\n",
                "one line of help",
            ),
            (
                "fields:\n  - {name: a, type: float, help: x}\n",
                "unknown variant",
            ),
            (
                "fields:\n  - {name: a, type: string, help: x, extra: 1}\n",
                "unknown field",
            ),
        ] {
            let error = parse("f", text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
