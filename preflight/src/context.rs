//! What kURL's `{{kurl …}}` actions see: the Installer (every key of kURL's type present, a
//! key the spec leaves out a zero value, as kURL zeroes its nil sections), the node's role in
//! the run, and the cluster's other hosts.

use std::collections::BTreeMap;
use std::sync::Arc;

use berth_formats::spec::kurl_type::{FieldKind, KURL_FIELDS};
use gotmpl::Value;
use serde_json::{Map, Value as Json};

/// The node's part in the run, as kURL's scripts pass it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Role {
    /// The first node, or a node joining as a control plane (`.IsPrimary`).
    pub primary: bool,
    /// A node joining a cluster, or a joined node upgrading (`.IsJoin`).
    pub join: bool,
    /// The node already runs what the spec asks to change (`.IsUpgrade`).
    pub upgrade: bool,
}

impl Role {
    /// kURL's install on the first node.
    pub const INSTALL: Role = Role {
        primary: true,
        join: false,
        upgrade: false,
    };

    /// `primary, join, upgrade`, as `berth status` shows it.
    pub fn describe(&self) -> String {
        let mut words = vec![if self.primary { "primary" } else { "secondary" }];
        if self.join {
            words.push("join");
        }
        words.push(if self.upgrade { "upgrade" } else { "install" });
        words.join(", ")
    }
}

/// The template data for one run.
#[derive(Debug, Clone, Default)]
pub struct TemplateContext {
    pub role: Role,
    /// `.PrimaryHosts`: the control-plane nodes' addresses.
    pub primary_hosts: Vec<String>,
    /// `.SecondaryHosts`: the other nodes' addresses.
    pub secondary_hosts: Vec<String>,
    /// `metadata.name` of the Installer.
    pub installer_name: String,
    /// What the spec holds under each of kURL's keys, versions resolved.
    pub sections: BTreeMap<String, Map<String, Json>>,
    /// Free space an airgap install needs under Berth's folder (`.Berth.AirgapBytesNeeded`);
    /// 0 online.
    pub airgap_bytes_needed: u64,
    /// The folder Berth's paths hang off (`.Berth.Root`): empty on a real node (`/`), so a
    /// path is written `{{kurl .Berth.Root}}/var/lib/berth`.
    pub root: String,
}

impl TemplateContext {
    /// The value the templates run against.
    pub fn data(&self) -> Value {
        let remote: Vec<String> = self
            .primary_hosts
            .iter()
            .chain(&self.secondary_hosts)
            .cloned()
            .collect();
        let mut spec: BTreeMap<Arc<str>, BTreeMap<Arc<str>, Value>> = BTreeMap::new();
        for field in KURL_FIELDS {
            let given = self
                .sections
                .get(field.key)
                .and_then(|section| section.get(field.field));
            spec.entry(go_name(field.key).into())
                .or_default()
                .insert(go_name(field.field).into(), field_value(field.kind, given));
        }
        let spec = spec
            .into_iter()
            .map(|(key, fields)| (key, Value::Map(Arc::new(fields))))
            .collect();
        let installer = map([
            ("APIVersion", string(berth_formats::spec::API_VERSIONS[0])),
            ("Kind", string(berth_formats::spec::KIND)),
            ("Name", string(&self.installer_name)),
            ("Spec", Value::Map(Arc::new(spec))),
        ]);
        map([
            ("Installer", installer),
            ("IsPrimary", Value::Bool(self.role.primary)),
            ("IsJoin", Value::Bool(self.role.join)),
            ("IsUpgrade", Value::Bool(self.role.upgrade)),
            ("PrimaryHosts", strings(&self.primary_hosts)),
            ("SecondaryHosts", strings(&self.secondary_hosts)),
            ("RemoteHosts", strings(&remote)),
            (
                "Berth",
                map([
                    ("AirgapBytesNeeded", Value::Uint(self.airgap_bytes_needed)),
                    ("Root", string(&self.root)),
                ]),
            ),
        ])
    }
}

/// The Go field name kurlkinds gives a spec name: its first letter upper-cased, but for the
/// names whose Go spelling differs further.
pub fn go_name(name: &str) -> String {
    let exceptions = [
        ("rke2", "RKE2"),
        ("k3s", "K3S"),
        ("openebs", "OpenEBS"),
        ("ufwConfig", "UFWConfig"),
        ("aws", "AWS"),
        ("tlsMinimumProtocolVersion", "TLSMinimumProtocolVersion"),
        ("httpPort", "HTTPPort"),
        ("httpsPort", "HTTPSPort"),
        ("ipv6", "IPv6"),
    ];
    if let Some((_, go)) = exceptions.iter().find(|(spec, _)| *spec == name) {
        return (*go).to_string();
    }
    upper_first(name)
}

/// `name` with its first letter upper-cased: a Go field's spelling of a JSON name.
pub fn upper_first(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A field's value as the Go struct holds it: the spec's value, or the type's zero.
fn field_value(kind: FieldKind, given: Option<&Json>) -> Value {
    let given = given.filter(|value| !value.is_null());
    match kind {
        FieldKind::Text | FieldKind::CidrRange => string(&match given {
            Some(Json::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }),
        FieldKind::Bool | FieldKind::BoolDefaultTrue | FieldKind::BoolOneOrZero => {
            Value::Bool(given == Some(&Json::Bool(true)))
        }
        FieldKind::Integer => Value::Int(given.and_then(Json::as_i64).unwrap_or(0)),
        FieldKind::List | FieldKind::Commands | FieldKind::Document => {
            given.map_or(Value::Nil, json_value)
        }
    }
}

/// A JSON value as template data.
pub fn json_value(value: &Json) -> Value {
    match value {
        Json::Null => Value::Nil,
        Json::Bool(flag) => Value::Bool(*flag),
        Json::Number(number) => number
            .as_i64()
            .map(Value::Int)
            .or_else(|| number.as_u64().map(Value::Uint))
            .unwrap_or_else(|| Value::Float(number.as_f64().unwrap_or(0.0))),
        Json::String(text) => string(text),
        Json::Array(items) => Value::List(items.iter().map(json_value).collect()),
        Json::Object(fields) => Value::Map(Arc::new(
            fields
                .iter()
                .map(|(key, value)| (Arc::from(key.as_str()), json_value(value)))
                .collect(),
        )),
    }
}

fn string(text: &str) -> Value {
    Value::String(text.into())
}

fn strings(items: &[String]) -> Value {
    Value::List(items.iter().map(|item| string(item)).collect())
}

fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Map(Arc::new(
        entries
            .into_iter()
            .map(|(key, value)| (Arc::from(key), value))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::render_kurl;

    #[test]
    fn every_key_is_there_with_go_names_and_zero_values() {
        let mut context = TemplateContext {
            role: Role {
                primary: true,
                join: true,
                upgrade: false,
            },
            primary_hosts: vec!["10.0.0.1".into()],
            secondary_hosts: vec!["10.0.0.2".into()],
            ..TemplateContext::default()
        };
        context.sections.insert(
            "rook".into(),
            serde_json::from_str(r#"{"version":"1.12.0","minimumNodeCount":3}"#).unwrap(),
        );
        context.sections.insert(
            "kurl".into(),
            serde_json::from_str(r#"{"airgap":true}"#).unwrap(),
        );
        let cases = [
            ("{{kurl .Installer.Spec.Rook.Version }}", "1.12.0"),
            (
                "{{kurl gt .Installer.Spec.Rook.MinimumNodeCount 2 }}",
                "true",
            ),
            ("{{kurl .Installer.Spec.Kurl.Airgap }}", "true"),
            ("{{kurl not .Installer.Spec.OpenEBS.Version }}", "true"),
            (
                "{{kurl .Installer.Spec.Ekco.EnableInternalLoadBalancer }}",
                "false",
            ),
            ("{{kurl .IsJoin }} {{kurl .IsUpgrade }}", "true false"),
            (
                "{{kurl range .RemoteHosts }}{{kurl . }} {{kurl end }}",
                "10.0.0.1 10.0.0.2 ",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                render_kurl("t", text, &context.data()).unwrap(),
                expected,
                "{text}"
            );
        }
        assert!(render_kurl("t", "{{kurl .Installer.Spec.Rook.Nope }}", &context.data()).is_err());
    }
}
