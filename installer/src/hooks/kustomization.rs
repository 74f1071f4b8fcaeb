//! Edits to `kustomization.yaml` files for the `insert_*` helpers, through a YAML library
//! rather than sed: the file stays valid YAML whatever its indentation or quoting.
//!
//! An item is appended to its list (created when missing); an item already in the list is not
//! added again, so a hook that runs twice leaves the same file. Comments are not kept.

use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};

#[derive(Debug, thiserror::Error)]
pub enum KustomizationError {
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: `{field}` is not a list, so `{item}` cannot be added to it")]
    NotAList {
        path: PathBuf,
        field: String,
        item: String,
    },
    #[error("{path}: the file is not a mapping")]
    NotAMapping { path: PathBuf },
    #[error("{path}: the edited file cannot be written back as YAML: {message}")]
    Serialize { path: PathBuf, message: String },
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Appends `item` to the list `field` of the kustomization at `path`.
pub fn insert(path: &Path, field: &str, item: Value) -> Result<(), KustomizationError> {
    let mut document = read(path)?;
    let shown = match &item {
        Value::String(text) => text.clone(),
        other => serde_norway::to_string(other).unwrap_or_default(),
    };
    let mapping = document
        .as_mapping_mut()
        .ok_or_else(|| KustomizationError::NotAMapping {
            path: path.to_path_buf(),
        })?;
    let key = Value::String(field.to_string());
    if matches!(mapping.get(&key), None | Some(Value::Null)) {
        mapping.insert(key.clone(), Value::Sequence(Vec::new()));
    }
    let Some(Value::Sequence(list)) = mapping.get_mut(&key) else {
        return Err(KustomizationError::NotAList {
            path: path.to_path_buf(),
            field: field.to_string(),
            item: shown,
        });
    };
    if !list.contains(&item) {
        list.push(item);
    }
    write(path, &document)
}

/// The `patchesJson6902` entry kURL's `insert_patches_json_6902` writes.
pub fn json6902_entry(
    patch: &str,
    group: &str,
    version: &str,
    kind: &str,
    name: &str,
    namespace: &str,
) -> Value {
    let mut target = Mapping::new();
    for (key, value) in [
        ("group", group),
        ("version", version),
        ("kind", kind),
        ("name", name),
        ("namespace", namespace),
    ] {
        // kURL writes every field; an empty one (the core group "") is kept as kustomize reads it.
        if !value.is_empty() || key == "group" {
            target.insert(key.into(), value.into());
        }
    }
    let mut entry = Mapping::new();
    entry.insert("target".into(), Value::Mapping(target));
    entry.insert("path".into(), patch.into());
    Value::Mapping(entry)
}

fn read(path: &Path) -> Result<Value, KustomizationError> {
    let text = match fs_err::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(KustomizationError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if text.trim().is_empty() {
        let mut mapping = Mapping::new();
        mapping.insert(
            "apiVersion".into(),
            "kustomize.config.k8s.io/v1beta1".into(),
        );
        mapping.insert("kind".into(), "Kustomization".into());
        return Ok(Value::Mapping(mapping));
    }
    serde_norway::from_str(&text).map_err(|error| KustomizationError::Parse {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}

fn write(path: &Path, document: &Value) -> Result<(), KustomizationError> {
    // Not every document that parses writes back: a tag such as `!-` does not.
    let text =
        serde_norway::to_string(document).map_err(|error| KustomizationError::Serialize {
            path: path.to_path_buf(),
            message: error.to_string(),
        })?;
    crate::files::write_atomically(path, text.as_bytes()).map_err(|source| {
        KustomizationError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `bench/fuzz.sh` (the kustomization target): a tag that parses but does not
    /// serialize made the editor panic.
    #[test]
    fn a_document_that_cannot_be_written_back_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kustomization.yaml");
        let found = b"a:\n  - se~rvice.ersUsZp kustoon\namsources:\n !- se~rces:\n  - se~rvibe.uss:\n  - sl~~vice.yaml\n";
        fs_err::write(&path, found).unwrap();
        let result = insert(
            &path,
            "patchesStrategicMerge",
            Value::String("patch.yaml".into()),
        );
        let error = result.unwrap_err();
        assert!(
            matches!(error, KustomizationError::Serialize { .. }),
            "{error}"
        );
        assert_eq!(
            fs_err::read(&path).unwrap(),
            found,
            "the file is left as it was"
        );
    }
}
