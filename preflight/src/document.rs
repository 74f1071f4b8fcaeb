//! A troubleshoot.sh/v1beta2 document Berth runs on the host: a `HostPreflight`, or for a
//! support bundle a `SupportBundle` (its `hostCollectors` and `hostAnalyzers`, and the
//! in-cluster `collectors` and `analyzers` kept apart) or a `HostCollector`. Each entry is
//! kept as its kind, the line it starts on, and its fields, read by its kind when it runs.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::PreflightError;

/// A host-preflight file Berth reads at most (kURL's largest is under 30 KiB).
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Collectors or analyzers one document may list.
pub const MAX_ITEMS: usize = 1_000;

/// Where a document came from, for every message about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// What it belongs to: `built-in`, `containerd 1.6.20`, `spec kurl.hostPreflights`, a file.
    pub name: String,
    /// The file it was read from, where it is one.
    pub path: Option<PathBuf>,
}

impl Origin {
    pub fn new(name: impl Into<String>, path: Option<PathBuf>) -> Self {
        Self {
            name: name.into(),
            path,
        }
    }

    /// `containerd 1.6.20 (…/host-preflight.yaml:12)`, or the name alone.
    pub fn at(&self, line: Option<usize>) -> String {
        match (&self.path, line) {
            // A file given by its path needs no second name.
            (Some(path), line) if path.display().to_string() == self.name => match line {
                Some(line) => format!("{}:{line}", self.name),
                None => self.name.clone(),
            },
            (Some(path), Some(line)) => format!("{} ({}:{line})", self.name, path.display()),
            (Some(path), None) => format!("{} ({})", self.name, path.display()),
            (None, Some(line)) => format!("{} (line {line})", self.name),
            (None, None) => self.name.clone(),
        }
    }
}

/// One collector or analyzer.
#[derive(Debug, Clone)]
pub struct Item {
    /// `diskUsage`, `tcpPortStatus`, …
    pub kind: String,
    /// The line its entry starts on in the rendered document, where found.
    pub line: Option<usize>,
    pub fields: Map<String, Value>,
}

impl Item {
    /// The name that links an analyzer to its collector's result.
    pub fn collector_name(&self) -> Option<&str> {
        self.fields.get("collectorName").and_then(Value::as_str)
    }

    /// The analyzer's title: `checkName`, else troubleshoot's title for the kind.
    pub fn check_name(&self) -> Option<&str> {
        self.fields
            .get("checkName")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
    }

    /// `exclude`, as troubleshoot reads it: a bool, or text that is one (`'{{kurl … }}'`
    /// renders to `true` or `false`); empty or absent is false.
    pub fn excluded(&self, origin: &Origin) -> Result<bool, PreflightError> {
        match self.fields.get("exclude") {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(Value::String(text)) => match text.trim() {
                "" | "false" | "False" | "FALSE" | "0" | "f" | "F" => Ok(false),
                "true" | "True" | "TRUE" | "1" | "t" | "T" => Ok(true),
                other => Err(PreflightError::Invalid {
                    at: origin.at(self.line),
                    message: format!(
                        "{}: `exclude` is `{other}`, not true or false; write a bool, or a \
                         template that renders to one",
                        self.kind
                    ),
                }),
            },
            Some(other) => Err(PreflightError::Invalid {
                at: origin.at(self.line),
                message: format!("{}: `exclude` is {other}, not true or false", self.kind),
            }),
        }
    }
}

/// The document kinds Berth reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    HostPreflight,
    SupportBundle,
    HostCollector,
}

impl DocumentKind {
    pub fn name(self) -> &'static str {
        match self {
            DocumentKind::HostPreflight => "HostPreflight",
            DocumentKind::SupportBundle => "SupportBundle",
            DocumentKind::HostCollector => "HostCollector",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            DocumentKind::HostPreflight,
            DocumentKind::SupportBundle,
            DocumentKind::HostCollector,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }

    /// Where each list of the kind's spec goes: its key, and whether it lists collectors
    /// (else analyzers) on the host (else in the cluster).
    fn sections(self) -> &'static [(&'static str, Section)] {
        match self {
            DocumentKind::HostPreflight => &[
                ("collectors", Section::HostCollectors),
                ("analyzers", Section::HostAnalyzers),
            ],
            DocumentKind::SupportBundle => &[
                ("hostCollectors", Section::HostCollectors),
                ("hostAnalyzers", Section::HostAnalyzers),
                ("collectors", Section::ClusterCollectors),
                ("analyzers", Section::ClusterAnalyzers),
            ],
            DocumentKind::HostCollector => &[("collectors", Section::HostCollectors)],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    HostCollectors,
    HostAnalyzers,
    ClusterCollectors,
    ClusterAnalyzers,
}

/// A parsed document.
#[derive(Debug, Clone)]
pub struct Document {
    pub origin: Origin,
    pub kind: DocumentKind,
    /// The collectors and analyzers that run on the host.
    pub collectors: Vec<Item>,
    pub analyzers: Vec<Item>,
    /// A SupportBundle's in-cluster collectors and analyzers, run through `kubectl`.
    pub cluster_collectors: Vec<Item>,
    pub cluster_analyzers: Vec<Item>,
}

impl Document {
    /// Reads the rendered text of a HostPreflight.
    pub fn parse(origin: Origin, text: &str) -> Result<Self, PreflightError> {
        Self::parse_as(origin, text, &[DocumentKind::HostPreflight])
    }

    /// Reads the rendered text of a document of one of `kinds`.
    pub fn parse_as(
        origin: Origin,
        text: &str,
        kinds: &[DocumentKind],
    ) -> Result<Self, PreflightError> {
        let invalid = |line: Option<usize>, message: String| PreflightError::Invalid {
            at: origin.at(line),
            message,
        };
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(invalid(
                None,
                format!(
                    "{} bytes, more than the {MAX_DOCUMENT_BYTES} a host preflight may be",
                    text.len()
                ),
            ));
        }
        let value: Value = serde_norway::from_str(text).map_err(|error| {
            let line = error.location().map(|location| location.line());
            invalid(
                line,
                format!("not YAML Berth can read: {error}; fix the file's YAML"),
            )
        })?;
        Self::from_value_as(origin, text, value, kinds)
    }

    /// A HostPreflight already read as a value (`spec.kurl.hostPreflights`); `text` is where
    /// its lines are looked up, empty when it has none.
    pub fn from_value(origin: Origin, text: &str, value: Value) -> Result<Self, PreflightError> {
        Self::from_value_as(origin, text, value, &[DocumentKind::HostPreflight])
    }

    fn from_value_as(
        origin: Origin,
        text: &str,
        value: Value,
        kinds: &[DocumentKind],
    ) -> Result<Self, PreflightError> {
        let invalid = |line: Option<usize>, message: String| PreflightError::Invalid {
            at: origin.at(line),
            message,
        };
        let names: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
        let Value::Object(mut top) = value else {
            return Err(invalid(
                None,
                format!(
                    "not a {}: expected a mapping with apiVersion, kind and spec",
                    names.join(" or ")
                ),
            ));
        };
        let api_version = top.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind_name = top.get("kind").and_then(Value::as_str).unwrap_or("");
        let kind = DocumentKind::from_name(kind_name).filter(|kind| kinds.contains(kind));
        let Some(kind) = kind.filter(|_| api_version.starts_with("troubleshoot.sh/")) else {
            return Err(invalid(
                Some(1),
                format!(
                    "apiVersion `{api_version}`, kind `{kind_name}`: Berth runs \
                     `apiVersion: troubleshoot.sh/v1beta2`, `kind: {}` here",
                    names.join("` or `")
                ),
            ));
        };
        let mut spec = match top.remove("spec") {
            Some(Value::Object(spec)) => spec,
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(invalid(None, "`spec` is not a mapping".into())),
        };
        let section_names: Vec<&str> = kind.sections().iter().map(|(name, _)| *name).collect();
        let lines = ItemLines::find(text, &section_names);
        let mut document = Self {
            origin: origin.clone(),
            kind,
            collectors: Vec::new(),
            analyzers: Vec::new(),
            cluster_collectors: Vec::new(),
            cluster_analyzers: Vec::new(),
        };
        for &(section, goes_to) in kind.sections() {
            let entries = match spec.remove(section) {
                Some(Value::Array(entries)) => entries,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => {
                    return Err(invalid(
                        lines.section(section),
                        format!("`spec.{section}` is not a list"),
                    ));
                }
            };
            if entries.len() > MAX_ITEMS {
                return Err(invalid(
                    lines.section(section),
                    format!(
                        "{} {section}, more than the {MAX_ITEMS} Berth runs",
                        entries.len()
                    ),
                ));
            }
            let mut items = Vec::new();
            for (index, entry) in entries.into_iter().enumerate() {
                let line = lines.item(section, index);
                let Value::Object(entry) = entry else {
                    return Err(invalid(
                        line,
                        format!("spec.{section}[{index}] is not a mapping of one kind"),
                    ));
                };
                if entry.len() != 1 {
                    let keys: Vec<&String> = entry.keys().collect();
                    return Err(invalid(
                        line,
                        format!(
                            "spec.{section}[{index}] names {} kinds ({keys:?}); each entry is \
                             one kind, such as `- diskUsage: {{…}}`",
                            entry.len()
                        ),
                    ));
                }
                let Some((kind, fields)) = entry.into_iter().next() else {
                    continue;
                };
                let fields = match fields {
                    Value::Object(fields) => fields,
                    Value::Null => Map::new(),
                    _ => {
                        return Err(invalid(
                            line,
                            format!("spec.{section}[{index}] `{kind}` is not a mapping"),
                        ));
                    }
                };
                items.push(Item { kind, line, fields });
            }
            *match goes_to {
                Section::HostCollectors => &mut document.collectors,
                Section::HostAnalyzers => &mut document.analyzers,
                Section::ClusterCollectors => &mut document.cluster_collectors,
                Section::ClusterAnalyzers => &mut document.cluster_analyzers,
            } = items;
        }
        Ok(document)
    }
}

/// The lines entries of each section (`collectors:`, `analyzers:`, …) start on, found in the
/// text: the YAML reader keeps no positions for values.
struct ItemLines {
    sections: Vec<(String, usize, Vec<usize>)>,
}

impl ItemLines {
    fn find(text: &str, names: &[&str]) -> Self {
        let mut sections: Vec<(String, usize, Vec<usize>)> = Vec::new();
        // The open section: its name, its key's indentation, its entries' dash indentation.
        let mut open: Option<(usize, Option<usize>)> = None;
        for (number, line) in text.lines().enumerate() {
            let number = number + 1;
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if let Some((key_indent, dash_indent)) = &mut open {
                if trimmed.starts_with("- ") && indent >= *key_indent {
                    let dash = dash_indent.get_or_insert(indent);
                    if indent == *dash
                        && let Some(section) = sections.last_mut()
                    {
                        section.2.push(number);
                    }
                    continue;
                }
                if indent > *key_indent {
                    continue;
                }
                open = None;
            }
            for name in names {
                if let Some(rest) = trimmed.strip_prefix(name)
                    && rest.trim_start().starts_with(':')
                {
                    sections.push((name.to_string(), number, Vec::new()));
                    open = Some((indent, None));
                }
            }
        }
        Self { sections }
    }

    fn section(&self, name: &str) -> Option<usize> {
        self.sections
            .iter()
            .find(|(section, ..)| section == name)
            .map(|(_, line, _)| *line)
    }

    fn item(&self, name: &str, index: usize) -> Option<usize> {
        self.sections
            .iter()
            .find(|(section, ..)| section == name)
            .and_then(|(_, _, items)| items.get(index).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_kind_fields_and_line() {
        let text = "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nmetadata:\n  name: x\nspec:\n  collectors:\n    - cpu: {}\n    # a comment\n    - diskUsage:\n        collectorName: d\n        path: /\n  analyzers:\n  - cpu:\n      outcomes:\n      - pass:\n          message: ok\n";
        let document = Document::parse(Origin::new("test", None), text).unwrap();
        let kinds: Vec<(&str, Option<usize>)> = document
            .collectors
            .iter()
            .chain(&document.analyzers)
            .map(|item| (item.kind.as_str(), item.line))
            .collect();
        assert_eq!(
            kinds,
            [("cpu", Some(7)), ("diskUsage", Some(9)), ("cpu", Some(13))]
        );
        assert_eq!(document.collectors[1].collector_name(), Some("d"));
    }

    #[test]
    fn bad_documents_name_the_place_and_the_fix() {
        let origin = Origin::new("test", Some("/x/host-preflight.yaml".into()));
        let cases = [
            ("kind: HostPreflight\nspec: [\n", "host-preflight.yaml:"),
            ("apiVersion: v1\nkind: Pod\n", "kind: HostPreflight"),
            (
                "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nspec:\n  collectors:\n    - cpu: {}\n      memory: {}\n",
                "host-preflight.yaml:5",
            ),
            (
                "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nspec:\n  analyzers: 3\n",
                "is not a list",
            ),
        ];
        for (text, expected) in cases {
            let error = Document::parse(origin.clone(), text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn exclude_reads_bools_and_rendered_text() {
        let origin = Origin::new("test", None);
        let item = |value: Value| Item {
            kind: "cpu".into(),
            line: None,
            fields: [("exclude".to_string(), value)].into_iter().collect(),
        };
        assert!(item(Value::Bool(true)).excluded(&origin).unwrap());
        assert!(item("true".into()).excluded(&origin).unwrap());
        assert!(!item("false".into()).excluded(&origin).unwrap());
        assert!(!item("".into()).excluded(&origin).unwrap());
        assert!(item("<no value>".into()).excluded(&origin).is_err());
    }
}
