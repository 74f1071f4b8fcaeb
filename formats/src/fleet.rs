//! What the first node and the other nodes say to each other over the fleet channel, and the
//! first node's record of each node. A node registers once, with the join token, and reports
//! its add-ons afterwards; the first node answers each message with a [`Response`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::name::plain_name;
pub use crate::rollout::Role;

/// The most labels one node carries.
pub const MAX_LABELS: usize = 64;
/// The most add-ons one report lists.
pub const MAX_ADDONS: usize = 256;
/// The longest text in a message field (a label, an address, a version, a reason).
pub const MAX_TEXT: usize = 1024;

/// The join parameters that lead a new node to the first node.
pub const ADDRESS_PARAM: &str = "fleet-address";
pub const PIN_PARAM: &str = "fleet-pin";
pub const TOKEN_PARAM: &str = "fleet-token";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Request {
    /// A node introduces itself with the join token; its key is the channel's.
    Register { token: String, node: NodeInfo },
    /// A registered node says where its add-ons stand.
    Report { addons: Vec<AddonReport> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Response {
    Registered { name: String },
    Accepted,
    Refused { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeInfo {
    #[serde(deserialize_with = "plain_name")]
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where the node can be reached, as it sees itself.
    #[serde(default)]
    pub address: String,
}

/// One add-on on a node: its versions and conditions, as `berth status` shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddonReport {
    #[serde(deserialize_with = "plain_name")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    /// The Progressing reason: Succeeded, Failed, Interrupted…
    pub progressing: String,
    /// From its components, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<bool>,
}

/// What the first node knows of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    #[serde(flatten)]
    pub info: NodeInfo,
    /// The node's key: its channel certificate's hash.
    pub pin: String,
    /// Where its last message came from.
    pub seen_from: String,
    pub registered_at: String,
    pub last_contact: String,
    #[serde(default)]
    pub addons: Vec<AddonReport>,
}

impl Request {
    /// Checks the sizes a crafted message could blow up.
    pub fn check(&self) -> Result<(), String> {
        let long = |text: &str| text.len() > MAX_TEXT;
        match self {
            Request::Register { token, node } => {
                if long(token) || long(&node.address) {
                    return Err(format!("a field is longer than {MAX_TEXT} bytes"));
                }
                if node.labels.len() > MAX_LABELS {
                    return Err(format!("more than {MAX_LABELS} labels"));
                }
                if node
                    .labels
                    .iter()
                    .any(|(key, value)| long(key) || long(value))
                {
                    return Err(format!("a label is longer than {MAX_TEXT} bytes"));
                }
            }
            Request::Report { addons } => {
                if addons.len() > MAX_ADDONS {
                    return Err(format!("more than {MAX_ADDONS} add-ons"));
                }
                for addon in addons {
                    let texts = [&addon.desired, &addon.current, &addon.last];
                    if long(&addon.progressing)
                        || texts.iter().any(|text| text.as_deref().is_some_and(long))
                    {
                        return Err(format!(
                            "add-on {}: a field is longer than {MAX_TEXT} bytes",
                            addon.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_back_and_crafted_ones_are_refused() {
        let register = Request::Register {
            token: "t".into(),
            node: NodeInfo {
                name: "node-2".into(),
                role: Role::Secondary,
                labels: BTreeMap::from([("canary".into(), "true".into())]),
                address: "10.0.0.2".into(),
            },
        };
        let text = serde_json::to_string(&register).unwrap();
        assert!(text.starts_with(r#"{"type":"register""#), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), register);
        assert_eq!(register.check(), Ok(()));

        let climbing = text.replace("node-2", "../node-2");
        assert!(serde_json::from_str::<Request>(&climbing).is_err());
        let Request::Register { token, mut node } = register else {
            unreachable!()
        };
        node.labels = (0..=MAX_LABELS)
            .map(|index| (format!("l{index}"), String::new()))
            .collect();
        let crowded = Request::Register { token, node };
        assert!(crowded.check().unwrap_err().contains("labels"));
        let report = Request::Report {
            addons: vec![AddonReport {
                name: "demo".into(),
                desired: Some("x".repeat(MAX_TEXT + 1)),
                current: None,
                last: None,
                progressing: "Succeeded".into(),
                available: Some(true),
                degraded: None,
            }],
        };
        assert!(report.check().unwrap_err().contains("demo"));
    }
}
