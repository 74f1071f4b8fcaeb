//! What the first node and the other nodes say to each other over the fleet channel, and the
//! first node's record of each node. A node registers once, with the join token, and reports
//! its add-ons afterwards; the first node answers each message with a [`Response`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::name::{plain_name, plain_version};
pub use crate::rollout::Role;

/// The most labels one node carries.
pub const MAX_LABELS: usize = 64;
/// The most add-ons one report lists.
pub const MAX_ADDONS: usize = 256;
/// The longest text in a message field (a label, an address, a version, a reason).
pub const MAX_TEXT: usize = 1024;
/// The longest failure message a node sends with its progress.
pub const MAX_MESSAGE: usize = 16 * 1024;
/// The most bytes (as JSON) of a node's own fields for one add-on.
pub const MAX_NODE_CONFIG: usize = 4 * 1024;
/// The most bytes (as JSON) of one report's add-ons: what the first node keeps of a node.
pub const MAX_REPORT: usize = 128 * 1024;

/// The most bytes of one node's support bundle the first node takes.
pub const MAX_NODE_BUNDLE: u64 = 2 << 30;
/// The most bytes of a bundle one part carries: as base64 in JSON, well under a frame.
pub const BUNDLE_PART_BYTES: usize = 512 * 1024;
/// The most nodes one bundle request names.
pub const MAX_BUNDLE_NODES: usize = 10_000;

/// The join parameters that lead a new node to the first node.
pub const ADDRESS_PARAM: &str = "fleet-address";
pub const PIN_PARAM: &str = "fleet-pin";
pub const TOKEN_PARAM: &str = "fleet-token";
/// The token a node that joins the control plane registers with: only control-plane join
/// commands carry it, so a node's role is what the first node issued, never its own claim.
pub const PRIMARY_TOKEN_PARAM: &str = "fleet-primary-token";
/// Every join parameter of the fleet's own.
pub const FLEET_PARAMS: [&str; 4] = [ADDRESS_PARAM, PIN_PARAM, TOKEN_PARAM, PRIMARY_TOKEN_PARAM];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Request {
    /// A node introduces itself with the join token; its key is the channel's.
    Register { token: String, node: NodeInfo },
    /// A registered node says where its add-ons stand.
    Report { addons: Vec<AddonReport> },
    /// A registered node asks whether a rollout has work for it. With `waitMs`, the first
    /// node holds the answer until work appears or that long has passed (a long poll), so a
    /// node learns of its work at once whatever its report interval.
    #[serde(rename_all = "camelCase")]
    Poll {
        #[serde(default)]
        wait_ms: u64,
    },
    /// The first node's own command line asks it to forget a node (by machine id, or by a
    /// name no other node has), and its place in unfinished rollouts.
    Remove {
        #[serde(deserialize_with = "plain_name")]
        node: String,
    },
    /// A node says where the work it was given stands, and its add-ons with it (none with
    /// `Running`, which says only that the work was taken).
    Progress {
        #[serde(deserialize_with = "plain_name")]
        work: String,
        outcome: Outcome,
        /// Why it failed, in a line or a few.
        #[serde(default)]
        message: String,
        #[serde(default)]
        addons: Vec<AddonReport>,
    },
    /// The first node's own command line asks nodes (by machine id) for their support
    /// bundles: each is handed the request at its next poll, until `waitMs` has passed.
    #[serde(rename_all = "camelCase")]
    BundleAsk {
        #[serde(deserialize_with = "plain_name")]
        id: String,
        nodes: Vec<String>,
        #[serde(default)]
        since_seconds: Option<u64>,
        wait_ms: u64,
    },
    /// A node sends its bundle, in order, a part at a time: `data` is base64, `offset` where
    /// it starts. The last part carries the whole bundle's sha256, or `error` when the node
    /// could not collect one.
    #[serde(rename_all = "camelCase")]
    BundlePart {
        #[serde(deserialize_with = "plain_name")]
        id: String,
        offset: u64,
        #[serde(default)]
        data: String,
        #[serde(default)]
        last: bool,
        #[serde(default)]
        sha256: Option<String>,
        #[serde(default)]
        error: Option<String>,
    },
    /// The first node's own command line is done with a request: later parts are refused.
    BundleClose {
        #[serde(deserialize_with = "plain_name")]
        id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Response {
    Registered {
        name: String,
    },
    Accepted,
    Refused {
        reason: String,
    },
    /// The answer to a poll when a rollout has started this node.
    Work {
        work: Work,
    },
    /// The answer to a poll when it has not.
    Idle,
    /// The answer to a poll when the first node asks for the node's support bundle.
    #[serde(rename_all = "camelCase")]
    Bundle {
        #[serde(deserialize_with = "plain_name")]
        id: String,
        #[serde(default)]
        since_seconds: Option<u64>,
    },
    /// The answer to a removal.
    #[serde(rename_all = "camelCase")]
    Removed {
        name: String,
        machine_id: String,
    },
    /// The node's key is not (or no longer) registered: its agent stops, since asking again
    /// cannot help; joining the node again registers it.
    NotRegistered {
        reason: String,
    },
}

/// The longest a poll is held: under the channel's read timeout on either side.
pub const MAX_POLL_WAIT_MS: u64 = 20_000;

/// What a rollout asks of one node: change one add-on, then say how it went. The same work
/// (by `id`) is handed out until the node reports its outcome; a node runs each id once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Work {
    /// `<rollout>.<generation>`: new for every apply and every rollback.
    #[serde(deserialize_with = "plain_name")]
    pub id: String,
    #[serde(deserialize_with = "plain_name")]
    pub addon: String,
    pub action: Action,
    /// The first node's join parameters (and `join-expires`), for a node that joined: its
    /// upgrade runs the add-ons' join hooks with them, as kURL's does.
    #[serde(default)]
    pub params: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Action {
    /// Upgrade the add-on to `version` with `config` over the fields the node's spec has.
    #[serde(rename_all = "camelCase")]
    Apply {
        #[serde(deserialize_with = "plain_version")]
        version: String,
        #[serde(default)]
        config: serde_json::Map<String, serde_json::Value>,
        /// The hash of the version and configuration: the node reports it once applied.
        config_hash: String,
        /// The sha256 of the version's package as the rollout pinned it: the node's upgrade
        /// runs with a lock holding it, so the node's dist cannot hand it other bytes.
        package_sha256: crate::Sha256Digest,
        /// The rollout allows a version older than the node runs.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_downgrade: bool,
    },
    /// Put the add-on back as the node ran it before work `work` (a rollback): its version and
    /// fields from the spec kept then; the rest of the node's spec stays as it is now.
    Restore {
        #[serde(deserialize_with = "plain_name")]
        work: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Running,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeInfo {
    /// The node's name: a label for people, which nodes on one host or cloned machines may
    /// share.
    #[serde(deserialize_with = "plain_name")]
    pub name: String,
    /// Who the node is: an id made once per Berth root (`fleet/machine-id`), so it stays
    /// across re-joins and differs between nodes that share a host name.
    #[serde(default, deserialize_with = "plain_name")]
    pub machine_id: String,
    pub role: Role,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where the node can be reached, as it sees itself.
    #[serde(default)]
    pub address: String,
}

/// One add-on on a node: its versions and conditions, as `berth status` shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The configuration hash of the rollout work this node last applied to the add-on (OCM's
    /// last-applied config hash); none before any rollout changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The node's own fields for the add-on (`/etc/berth/node.yaml`): the last layer of a
    /// rollout's configuration.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub node_config: serde_json::Map<String, serde_json::Value>,
}

/// What the first node knows of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
            Request::Poll { .. } | Request::Remove { .. } | Request::BundleClose { .. } => {}
            Request::BundleAsk { nodes, .. } => {
                if nodes.len() > MAX_BUNDLE_NODES {
                    return Err(format!("more than {MAX_BUNDLE_NODES} nodes"));
                }
                if nodes.iter().any(|node| long(node)) {
                    return Err(format!("a node is longer than {MAX_TEXT} bytes"));
                }
            }
            Request::BundlePart {
                data,
                sha256,
                error,
                ..
            } => {
                // base64 is 4 bytes for every 3.
                if data.len() > BUNDLE_PART_BYTES.div_ceil(3) * 4 {
                    return Err(format!(
                        "a bundle part is over the {BUNDLE_PART_BYTES} bytes allowed"
                    ));
                }
                if sha256.as_deref().is_some_and(long) {
                    return Err(format!("a field is longer than {MAX_TEXT} bytes"));
                }
                if error
                    .as_ref()
                    .is_some_and(|error| error.len() > MAX_MESSAGE)
                {
                    return Err(format!("a message is longer than {MAX_MESSAGE} bytes"));
                }
            }
            Request::Progress {
                message, addons, ..
            } => {
                if message.len() > MAX_MESSAGE {
                    return Err(format!("a message is longer than {MAX_MESSAGE} bytes"));
                }
                return Request::Report {
                    addons: addons.clone(),
                }
                .check();
            }
            Request::Report { addons } => {
                if addons.len() > MAX_ADDONS {
                    return Err(format!("more than {MAX_ADDONS} add-ons"));
                }
                for addon in addons {
                    let texts = [
                        &addon.desired,
                        &addon.current,
                        &addon.last,
                        &addon.config_hash,
                    ];
                    if long(&addon.progressing)
                        || texts.iter().any(|text| text.as_deref().is_some_and(long))
                    {
                        return Err(format!(
                            "add-on {}: a field is longer than {MAX_TEXT} bytes",
                            addon.name
                        ));
                    }
                    let fields =
                        serde_json::to_vec(&addon.node_config).map_or(0, |json| json.len());
                    if fields > MAX_NODE_CONFIG {
                        return Err(format!(
                            "add-on {}: the node's own fields are {fields} bytes, over the {MAX_NODE_CONFIG} allowed",
                            addon.name
                        ));
                    }
                }
                let size = serde_json::to_vec(addons).map_or(0, |json| json.len());
                if size > MAX_REPORT {
                    return Err(format!(
                        "the report is {size} bytes, over the {MAX_REPORT} allowed"
                    ));
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
                machine_id: "0123abcd".into(),
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
        let climbing = text.replace("0123abcd", "../etc");
        assert!(serde_json::from_str::<Request>(&climbing).is_err());
        // A poll says how long it may be held; one from before long polls reads too.
        let poll: Request = serde_json::from_str(r#"{"type":"poll"}"#).unwrap();
        assert_eq!(poll, Request::Poll { wait_ms: 0 });
        let poll = serde_json::to_string(&Request::Poll { wait_ms: 500 }).unwrap();
        assert_eq!(poll, r#"{"type":"poll","waitMs":500}"#);
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
                config_hash: None,
                node_config: Default::default(),
            }],
        };
        assert!(report.check().unwrap_err().contains("demo"));
        // A node's own fields are bounded, and so is a whole report.
        let Request::Report { mut addons } = report else {
            unreachable!()
        };
        addons[0].desired = None;
        addons[0].node_config =
            serde_json::Map::from_iter([("huge".to_string(), "x".repeat(MAX_NODE_CONFIG).into())]);
        let error = Request::Report {
            addons: addons.clone(),
        }
        .check()
        .unwrap_err();
        assert!(error.contains("own fields are"), "{error}");
        addons[0].node_config = serde_json::Map::from_iter([(
            "large".to_string(),
            "x".repeat(MAX_NODE_CONFIG - 64).into(),
        )]);
        let many = Request::Report {
            addons: vec![addons[0].clone(); MAX_REPORT / MAX_NODE_CONFIG + 2],
        };
        assert!(many.check().unwrap_err().contains("the report is"));
    }
}
