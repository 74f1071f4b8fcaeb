//! Reading a collector's or analyzer's fields, as troubleshoot's Go types read them: absent,
//! null and empty text are the same.

use serde_json::{Map, Value};

/// A text field, where it is given and not empty.
pub fn text<'a>(fields: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    fields
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

/// A bool field; false unless given.
pub fn flag(fields: &Map<String, Value>, key: &str) -> bool {
    fields.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// A list of text (numbers and bools taken as their text).
pub fn strings(fields: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Number(number) => Ok(number.to_string()),
                Value::Bool(flag) => Ok(flag.to_string()),
                other => Err(format!("`{key}` holds {other}, not text")),
            })
            .collect(),
        Some(other) => Err(format!("`{key}` is {other}, not a list")),
    }
}
