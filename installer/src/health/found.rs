//! What a probe found about each object it looked at, as health and the Addon resource
//! report it.

/// What a probe found about one object (a container, a unit, an address, a Kubernetes
/// object…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The object's kind and name, as the Addon API's `refs` name them.
    pub kind: String,
    pub name: String,
    pub healthy: bool,
    /// One CamelCase word: `Running`, `Exited`, `Active`, `Refused`, `Status503`…
    pub reason: String,
    pub message: String,
    /// A Kubernetes object's namespace, API version and own status conditions, as read.
    pub object: Option<ObjectFacts>,
}

/// What a Kubernetes object says of itself, kept for the Addon resource's `refs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub api_version: String,
    /// Its `status.conditions`, as the server gave them (at most [`MAX_OBJECT_CONDITIONS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<serde_json::Value>,
}

/// The most conditions of one object kept.
pub const MAX_OBJECT_CONDITIONS: usize = 16;

impl Found {
    pub(crate) fn new(
        kind: &str,
        name: &str,
        healthy: bool,
        reason: &str,
        message: String,
    ) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
            healthy,
            reason: reason.into(),
            message,
            object: None,
        }
    }
}

/// What a probe looks for, in its messages: the name, or the labels as `key=value,…`.
pub(crate) fn wanted(
    name: Option<&str>,
    labels: &std::collections::BTreeMap<String, String>,
) -> String {
    name.map(str::to_string).unwrap_or_else(|| {
        labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}
