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
//!     minimum: 1
//!     maximum: 65535
//!     help: the port the demo answers on
//! ```
//!
//! An integer field may bound its values (`minimum`, `maximum`); a string field may list the
//! values it takes (`values`).

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
    /// The least an integer field takes (a port's 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<i64>,
    /// The most an integer field takes (a port's 65535).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<i64>,
    /// The values a string field takes, when it takes only some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// The most values a string field lists.
pub const MAX_VALUES: usize = 64;

impl FieldDeclaration {
    /// Why `value` (of the field's type) is out of what the field takes, if it is.
    fn out_of_bounds(&self, value: &Value) -> Option<String> {
        // A whole number beyond i64 is beyond any maximum a declaration can give.
        if let Some(number) = value.as_i64().or_else(|| value.as_u64().map(|_| i64::MAX)) {
            if let Some(minimum) = self.minimum
                && number < minimum
            {
                return Some(format!("less than {minimum}"));
            }
            if let Some(maximum) = self.maximum
                && number > maximum
            {
                return Some(format!("more than {maximum}"));
            }
        }
        if let (Some(values), Some(text)) = (&self.values, value.as_str())
            && !values.iter().any(|allowed| allowed == text)
        {
            return Some(format!("not one of {}", quoted_list(values)));
        }
        None
    }
}

fn quoted_list(values: &[String]) -> String {
    values
        .iter()
        .map(|value| format!("`{value}`"))
        .collect::<Vec<_>>()
        .join(", ")
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
        let bounded = field.minimum.is_some() || field.maximum.is_some();
        if bounded && field.kind != FieldType::Integer {
            return Err(format!(
                "{what}: `{}` has a minimum or maximum, which only an integer field takes",
                field.name
            ));
        }
        if let (Some(minimum), Some(maximum)) = (field.minimum, field.maximum)
            && minimum > maximum
        {
            return Err(format!(
                "{what}: `{}`'s minimum {minimum} is more than its maximum {maximum}",
                field.name
            ));
        }
        if let Some(values) = &field.values {
            if field.kind != FieldType::String {
                return Err(format!(
                    "{what}: `{}` lists values, which only a string field takes",
                    field.name
                ));
            }
            if values.is_empty() || values.len() > MAX_VALUES {
                return Err(format!(
                    "{what}: `{}` lists {} values; list from 1 to {MAX_VALUES}",
                    field.name,
                    values.len()
                ));
            }
        }
        if let Some(default) = &field.default
            && let Some(problem) = field.out_of_bounds(default)
        {
            return Err(format!(
                "{what}: the default of `{}` is {problem}",
                field.name
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
        if let Some(problem) = field.out_of_bounds(value) {
            return Err(refused(format!(
                "spec.{addon}.{name} is {value}, {problem} ({})",
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
    fn bounds_and_values_are_held_to() {
        let declared = parse(
            "demo/fields.yaml",
            "fields:\n  - {name: port, type: integer, default: 8080, minimum: 1, maximum: 65535, help: the port}\n  - {name: mode, type: string, values: [fast, safe], help: how}\n",
        )
        .unwrap();
        let refused = |field: &str, value: Value| {
            let mut config = Map::from_iter([(field.to_string(), value)]);
            apply("demo", &declared, &mut config)
                .err()
                .map(|error| error.message)
        };
        assert_eq!(refused("port", Value::from(65535)), None);
        assert_eq!(refused("port", Value::from(1)), None);
        assert_eq!(
            refused("port", Value::from(70000)).as_deref(),
            Some("spec.demo.port is 70000, more than 65535 (the port)")
        );
        assert_eq!(
            refused("port", Value::from(0)).as_deref(),
            Some("spec.demo.port is 0, less than 1 (the port)")
        );
        assert_eq!(
            refused("port", Value::from(u64::MAX)).as_deref(),
            Some("spec.demo.port is 18446744073709551615, more than 65535 (the port)")
        );
        assert_eq!(refused("mode", Value::from("safe")), None);
        assert_eq!(
            refused("mode", Value::from("quick")).as_deref(),
            Some("spec.demo.mode is \"quick\", not one of `fast`, `safe` (how)")
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
            (
                "fields:\n  - {name: a, type: string, minimum: 1, help: x}\n",
                "only an integer field takes",
            ),
            (
                "fields:\n  - {name: a, type: integer, minimum: 2, maximum: 1, help: x}\n",
                "minimum 2 is more than its maximum 1",
            ),
            (
                "fields:\n  - {name: a, type: integer, default: 0, minimum: 1, help: x}\n",
                "the default of `a` is less than 1",
            ),
            (
                "fields:\n  - {name: a, type: integer, values: [x], help: x}\n",
                "only a string field takes",
            ),
            (
                "fields:\n  - {name: a, type: string, values: [], help: x}\n",
                "lists 0 values",
            ),
            (
                "fields:\n  - {name: a, type: string, default: z, values: [x], help: x}\n",
                "the default of `a` is not one of `x`",
            ),
        ] {
            let error = parse("f", text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
