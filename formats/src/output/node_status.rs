//! `berth status -o json|yaml`: the node's installer, its last host preflights, and each
//! add-on's versions and conditions (the Addon API's Available, Degraded and Progressing),
//! its components as last probed. `berth install`, `join` and `upgrade` print it when they end.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiVersion;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NodeStatusKind {
    NodeStatus,
}

/// What Berth has applied on one node, and how healthy it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeStatus {
    pub api_version: ApiVersion,
    pub kind: NodeStatusKind,
    /// The installer the node ran last; null before its first run.
    pub installer: Option<InstallerRef>,
    /// The last host preflights' results; null when none ran.
    pub host_preflights: Option<HostPreflights>,
    /// Every add-on with a record on the node, by name.
    pub addons: Vec<AddonStatus>,
    /// Records that could not be read, each a message that names its file. The exit status
    /// is non-zero while there is one.
    pub damaged_records: Vec<String>,
}

/// An installer: the id its scripts are served under, and where its packages come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstallerRef {
    pub id: String,
    /// A folder or an http(s) URL.
    pub dist: String,
}

/// One run of host preflights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostPreflights {
    /// The command that ran them: install, join or upgrade.
    pub run: String,
    /// primary or secondary.
    pub role: String,
    /// How many checks passed, warned and failed.
    pub summary: String,
    /// What the run did with the results.
    pub decision: String,
    /// Every check, in the order they ran.
    pub checks: Vec<PreflightCheck>,
}

/// One host preflight check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreflightCheck {
    pub title: String,
    /// PASS, WARN, FAIL, or NONE for a check no outcome matched.
    pub outcome: String,
    pub message: String,
    /// The analyzer's kind (`cpu`, `tcpPortStatus`…).
    pub analyzer: String,
    /// The document and line the check comes from.
    pub origin: String,
    /// Where to read more, when the outcome gives it.
    pub uri: Option<String>,
    /// True when hostPreflightIgnore kept this failure or warning from stopping the run.
    pub ignored: bool,
}

/// One add-on on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddonStatus {
    pub name: String,
    /// The version the latest run asked for.
    pub desired_version: Option<String>,
    /// The version applied in full and in place now.
    pub current_version: Option<String>,
    /// The version the current one replaced (what `berth rollback` goes back to).
    pub last_version: Option<String>,
    /// When the current version was applied (RFC 3339).
    pub applied_at: Option<String>,
    /// Available, Degraded and Progressing: always these three, in this order.
    pub conditions: Vec<Condition>,
    /// The components the add-on's health.yaml lists, as probed now; empty when it lists none.
    pub components: Vec<Component>,
    /// Every change of Progressing's reason, oldest first (the newest 50 are kept).
    pub history: Vec<Transition>,
}

/// One change of Progressing: what the add-on went through, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transition {
    /// When (RFC 3339).
    pub time: String,
    /// Installing, Upgrading, RollingBack, Succeeded or Failed.
    pub reason: String,
    pub message: String,
}

impl AddonStatus {
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions
            .iter()
            .find(|condition| condition.kind == kind)
    }
}

/// A condition as Kubernetes objects and OCM's add-ons carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: ConditionType,
    pub status: ConditionStatus,
    /// One word (`Applied`, `ComponentsHealthy`, `Succeeded`, `Interrupted`…).
    pub reason: String,
    pub message: String,
    /// When status or reason last changed (RFC 3339); null when never recorded.
    pub last_transition_time: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionType {
    /// True while the add-on serves: every required component healthy, or, for an add-on
    /// that lists no components, a version in place.
    Available,
    /// True while any component is unhealthy; Unknown for an add-on that lists none.
    Degraded,
    /// True while a run applies the add-on; False with the last run's outcome as reason.
    Progressing,
}

impl ConditionType {
    /// The word the documents and the tables use.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Available => "Available",
            ConditionType::Degraded => "Degraded",
            ConditionType::Progressing => "Progressing",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn from_bool(value: bool) -> Self {
        if value {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }

    /// The word the tables print.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// One component of an add-on, as its probe found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub name: String,
    /// The probe's kind: container, systemd, process, tcp, http, command or kubernetes.
    pub probe: String,
    /// Whether the add-on is Available only while this component is healthy.
    pub required: bool,
    pub healthy: ConditionStatus,
    pub reason: String,
    pub message: String,
    /// The objects the probe looked at (containers, units, Deployments…).
    pub objects: Vec<ComponentObject>,
}

/// An object a probe looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentObject {
    pub kind: String,
    pub name: String,
    pub healthy: ConditionStatus,
}
