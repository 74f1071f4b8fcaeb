//! kURL's `yamlutil` (`kurl_util/cmd/yamlutil`), as kotsadm's install hook and kURL's
//! preflights call it:
//! - `-a -yp PARENT_FIELD[[]] -v VALUE` adds a field (or appends to a list, with `[]`) in each
//!   document of `-fp FILE` (rewritten) or `-yc CONTENT` (printed); the value is YAML;
//! - `-r -yp FIELD|PARENT_FIELD` removes one;
//! - `-p -fp FILE -yp PARENT_FIELD` replaces the file with that field's text;
//! - `-j -fp FILE -jf A.B.C` prints the field at that path as JSON.
//!
//! A path's parts are split on `_`, as kURL's are. Each document keeps the order of its keys.

use std::io::Write;

use serde_norway::{Mapping, Value};

use super::Failure;
use super::go_flags::{Flag, FlagSet};

const fn flag(name: &'static str, boolean: bool, usage: &'static str) -> Flag {
    Flag {
        name,
        boolean,
        default: "",
        usage,
    }
}

const FLAGS: FlagSet = FlagSet {
    program: "yamlutil",
    flags: &[
        flag("a", true, "Adds a yaml field and its children."),
        flag("r", true, "Removes a yaml field and its children."),
        flag("p", true, "Parses a yaml tree given a path."),
        flag(
            "j",
            true,
            "Prints the field at a '.'-separated path as JSON.",
        ),
        flag("v", false, "Value to assign to added yaml field."),
        flag("fp", false, "filepath"),
        flag("yc", false, "yamlcontent"),
        flag("yp", false, "yamlpath"),
        flag("jf", false, "path to a field within a yaml object"),
    ],
};

/// The largest file or content read.
const MAX_BYTES: u64 = 16 << 20;

fn error(text: impl Into<String>) -> Failure {
    Failure::Error(text.into())
}

fn read(path: &str) -> Result<String, Failure> {
    Ok(crate::files::read_to_string_at_most(
        std::path::Path::new(path),
        MAX_BYTES,
    )?)
}

pub fn main(arguments: &[String], output: &mut dyn Write) -> Result<(), Failure> {
    let parsed = FLAGS.parse(arguments)?;
    let (file, content, path) = (parsed.get("fp"), parsed.get("yc"), parsed.get("yp"));
    let value = parsed.get("v");
    let edit = |change: &dyn Fn(&str) -> Result<String, Failure>,
                output: &mut dyn Write|
     -> Result<(), Failure> {
        if !file.is_empty() {
            let changed = change(&read(file)?)?;
            fs_err::write(file, changed)?;
        } else if !content.is_empty() {
            writeln!(output, "{}", change(content)?)?;
        }
        Ok(())
    };
    if parsed.on("a") && !path.is_empty() && !value.is_empty() {
        edit(&|text| add_field(text, path, value), output)
    } else if parsed.on("r") && !path.is_empty() {
        edit(&|text| remove_field(text, path), output)
    } else if parsed.on("p") && !file.is_empty() && !path.is_empty() {
        let field = retrieve_field(&read(file)?, path)?;
        fs_err::write(file, field)?;
        Ok(())
    } else if parsed.on("j") && !file.is_empty() && !parsed.get("jf").is_empty() {
        writeln!(output, "{}", json_field(&read(file)?, parsed.get("jf"))?)?;
        Ok(())
    } else {
        Err(error("incorrect binary usage"))
    }
}

/// The documents of `text`, `None` for an empty one.
fn documents(text: &str) -> Result<Vec<Option<Value>>, Failure> {
    use serde::Deserialize as _;
    serde_norway::Deserializer::from_str(text)
        .map(|document| {
            Value::deserialize(document)
                .map(|value| (!value.is_null()).then_some(value))
                .map_err(|problem| error(format!("failed to unmarshal content: {problem}")))
        })
        .collect()
}

/// The documents written back, `---` between them.
fn write_documents(documents: &[Value]) -> Result<String, Failure> {
    let mut text = String::new();
    for (index, document) in documents.iter().enumerate() {
        if index > 0 {
            text.push_str("---\n");
        }
        text.push_str(
            &serde_norway::to_string(document)
                .map_err(|problem| error(format!("failed to marshal: {problem}")))?,
        );
    }
    Ok(text)
}

fn two_parts(path: &str) -> Result<(&str, &str), Failure> {
    match path.split('_').collect::<Vec<_>>()[..] {
        [parent, field] => Ok((parent, field)),
        _ => Err(error("yaml path must be of 2 length")),
    }
}

fn mapping<'a>(value: &'a mut Value, what: &str) -> Result<&'a mut Mapping, Failure> {
    value
        .as_mapping_mut()
        .ok_or_else(|| error(format!("{what} is not a mapping")))
}

fn add_field(text: &str, path: &str, value: &str) -> Result<String, Failure> {
    let value: Value = serde_norway::from_str(value)
        .map_err(|problem| error(format!("failed to unmarshal value: {problem}")))?;
    let (path, append) = match path.strip_suffix("[]") {
        Some(path) => (path, true),
        None => (path, false),
    };
    let (parent, field) = two_parts(path)?;
    let mut changed = Vec::new();
    for mut document in documents(text)?.into_iter().flatten() {
        let top = mapping(&mut document, "the document")?;
        let parent_value = top
            .entry(Value::from(parent))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        let parent_map = mapping(parent_value, parent)?;
        if append {
            let list = parent_map
                .entry(Value::from(field))
                .or_insert_with(|| Value::Sequence(Vec::new()));
            if list.is_null() {
                *list = Value::Sequence(Vec::new());
            }
            list.as_sequence_mut()
                .ok_or_else(|| error(format!("{parent}.{field} is not a list")))?
                .push(value.clone());
        } else {
            parent_map.insert(Value::from(field), value.clone());
        }
        changed.push(document);
    }
    write_documents(&changed)
}

fn remove_field(text: &str, path: &str) -> Result<String, Failure> {
    let parts: Vec<&str> = path.split('_').collect();
    if parts.len() > 2 {
        return Err(error(
            "yaml path parts length must be less than or equal to 2",
        ));
    }
    let mut changed = Vec::new();
    for mut document in documents(text)?.into_iter().flatten() {
        let top = mapping(&mut document, "the document")?;
        match parts[..] {
            [field] => {
                top.remove(field);
            }
            [parent, field] => {
                if let Some(parent_value) = top.get_mut(parent) {
                    mapping(parent_value, parent)?.remove(field);
                }
            }
            _ => unreachable!("split gives one part at least"),
        }
        changed.push(document);
    }
    write_documents(&changed)
}

fn retrieve_field(text: &str, path: &str) -> Result<String, Failure> {
    let (parent, field) = two_parts(path)?;
    let document: Value = serde_norway::from_str(text)
        .map_err(|problem| error(format!("failed to unmarshal content: {problem}")))?;
    document
        .get(parent)
        .and_then(|parent| parent.get(field))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| error(format!("{parent}.{field} is not a string in the document")))
}

fn json_field(text: &str, path: &str) -> Result<String, Failure> {
    let mut value: Value = serde_norway::from_str(text)
        .map_err(|problem| error(format!("unmarshal interface: {problem}")))?;
    for field in path.split('.') {
        let Value::Mapping(mut map) = value else {
            return Err(error(format!(
                "error: struct is not a map[interface]interface when looking for field {field}"
            )));
        };
        value = map
            .remove(field)
            .ok_or_else(|| error(format!("error: field {field} is not present")))?;
    }
    let json = serde_json::to_value(&value)
        .map_err(|problem| error(format!("the field cannot be written as JSON: {problem}")))?;
    Ok(json.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(arguments: &[&str]) -> Result<String, Failure> {
        let mut output = Vec::new();
        let arguments: Vec<String> = arguments.iter().map(|word| word.to_string()).collect();
        main(&arguments, &mut output)?;
        Ok(String::from_utf8(output).unwrap())
    }

    fn parse(text: &str) -> Vec<serde_json::Value> {
        use serde::Deserialize as _;
        serde_norway::Deserializer::from_str(text)
            .map(|document| serde_json::Value::deserialize(document).unwrap())
            .collect()
    }

    /// kotsadm's install hook: the app version label added to, then removed from, its
    /// ConfigMap file.
    #[test]
    fn kotsadms_label_is_added_and_removed_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kotsadm-confg.yaml");
        let file_text = file.to_str().unwrap();
        fs_err::write(
            &file,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kotsadm-confg\ndata:\n  kotsadm-route: x\n",
        )
        .unwrap();
        run(&[
            "-a",
            "-fp",
            file_text,
            "-yp",
            "data_app-version-label",
            "-v",
            "1.2.3",
        ])
        .unwrap();
        let added = parse(&fs_err::read_to_string(&file).unwrap());
        assert_eq!(added[0]["data"]["app-version-label"], "1.2.3");
        assert_eq!(added[0]["data"]["kotsadm-route"], "x");
        run(&["-r", "-fp", file_text, "-yp", "data_app-version-label"]).unwrap();
        let removed = parse(&fs_err::read_to_string(&file).unwrap());
        assert!(removed[0]["data"].get("app-version-label").is_none());
        assert_eq!(removed[0]["metadata"]["name"], "kotsadm-confg");
    }

    /// kURL's preflights: list items appended to content, printed.
    #[test]
    fn items_are_appended_to_content_and_printed() {
        let printed = run(&[
            "-a",
            "-yc",
            "systemPackages:\n  collectorName: host-packages\n",
            "-yp",
            "systemPackages_ubuntu[]",
            "-v",
            "curl",
        ])
        .unwrap();
        let again = run(&[
            "-a",
            "-yc",
            &printed,
            "-yp",
            "systemPackages_ubuntu[]",
            "-v",
            "socat",
        ])
        .unwrap();
        let document = &parse(&again)[0];
        assert_eq!(
            document["systemPackages"]["ubuntu"],
            serde_json::json!(["curl", "socat"])
        );
        assert_eq!(document["systemPackages"]["collectorName"], "host-packages");
    }

    #[test]
    fn fields_are_read_as_json_or_text_and_misuse_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("spec.yaml");
        let file_text = file.to_str().unwrap();
        fs_err::write(
            &file,
            "spec:\n  kotsadm:\n    version: 1.86.0\n    disableS3: true\n",
        )
        .unwrap();
        let json = run(&["-j", "-fp", file_text, "-jf", "spec.kotsadm"]).unwrap();
        assert_eq!(json, "{\"disableS3\":true,\"version\":\"1.86.0\"}\n");
        let missing = run(&["-j", "-fp", file_text, "-jf", "spec.velero"]).unwrap_err();
        assert!(
            matches!(missing, Failure::Error(text) if text.contains("field velero is not present"))
        );
        assert!(
            matches!(run(&["-a"]).unwrap_err(), Failure::Error(text) if text == "incorrect binary usage")
        );
        fs_err::write(&file, "data:\n  htpasswd: user:hash\n").unwrap();
        run(&["-p", "-fp", file_text, "-yp", "data_htpasswd"]).unwrap();
        assert_eq!(fs_err::read_to_string(&file).unwrap(), "user:hash");
        let bad = run(&["-a", "-yc", "a: 1", "-yp", "a_b_c", "-v", "x"]).unwrap_err();
        assert!(matches!(bad, Failure::Error(text) if text.contains("2 length")));
    }
}
