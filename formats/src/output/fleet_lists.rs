//! The fleet's lists, printed on the first node: `berth nodes -o json|yaml` (`NodeList`) and
//! `berth rollout status -o json|yaml` (`RolloutList`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiVersion;
use crate::fleet::{AddonReport, NodeInfo, NodeRecord};
use crate::rollout::{RolloutRecord, TargetState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NodeListKind {
    NodeList,
}

/// Every node that registered with the first node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeList {
    pub api_version: ApiVersion,
    pub kind: NodeListKind,
    pub items: Vec<FleetNode>,
}

/// One node, as the first node knows it: what it said when it registered and reported, and
/// per add-on where the newest rollout of that add-on wants it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetNode {
    #[serde(flatten)]
    pub info: NodeInfo,
    /// The node's key: its channel certificate's hash.
    pub pin: String,
    /// Where its last message came from.
    pub seen_from: String,
    pub registered_at: String,
    pub last_contact: String,
    pub addons: Vec<FleetAddon>,
}

/// One add-on of a node: its report, and the rollout that moves it, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetAddon {
    #[serde(flatten)]
    pub report: AddonReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<AddonRollout>,
}

/// What the newest rollout of an add-on wants of a node: OCM's desired version and config
/// hash, beside the node's own current version and last-applied hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddonRollout {
    pub name: String,
    pub generation: u32,
    pub desired_version: String,
    pub desired_config_hash: String,
    pub state: TargetState,
}

impl FleetNode {
    /// `record`, each add-on with what `rollout` says of it (by the add-on's name).
    pub fn new(record: &NodeRecord, rollout: impl Fn(&str) -> Option<AddonRollout>) -> Self {
        FleetNode {
            info: record.info.clone(),
            pin: record.pin.clone(),
            seen_from: record.seen_from.clone(),
            registered_at: record.registered_at.clone(),
            last_contact: record.last_contact.clone(),
            addons: record
                .addons
                .iter()
                .map(|report| FleetAddon {
                    report: report.clone(),
                    rollout: rollout(&report.name),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutListKind {
    RolloutList,
}

/// Each rollout, or the one named, as the first node keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutList {
    pub api_version: ApiVersion,
    pub kind: RolloutListKind,
    pub items: Vec<RolloutRecord>,
}
