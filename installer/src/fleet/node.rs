//! A node's side of the fleet: it registers with the first node its join command names,
//! trusting that node's key alone, keeps where the first node is, and reports its add-ons.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context as _, bail};
use berth_formats::fleet::{AddonReport, NodeInfo, Request, Response};
use serde::{Deserialize, Serialize};

use crate::fleet::channel::{self, Identity, Pin};
use crate::layout::Layout;
use crate::state::{AddonState, StateStore};

/// The first node, as the join command gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstNode {
    pub address: String,
    pub pin: Pin,
}

/// Registers this node with the first node at `address`, whose key must be `pin`, with the
/// join token; keeps where the first node is for the reports that follow.
pub fn register(
    layout: &Layout,
    first_node: FirstNode,
    token: &str,
    node: NodeInfo,
) -> anyhow::Result<String> {
    let response = exchange(
        layout,
        &first_node,
        &Request::Register {
            token: token.to_string(),
            node,
        },
    )?;
    let Response::Registered { name } = response else {
        bail!(
            "the first node at {} refused the registration: {}",
            first_node.address,
            refusal(&response)
        );
    };
    let path = layout.fleet_dir().join("first-node.json");
    let text = serde_json::to_vec_pretty(&first_node).expect("serializes");
    crate::files::write_atomically(&path, &text)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(name)
}

/// Sends this node's add-ons to the first node it registered with.
pub fn report(layout: &Layout) -> anyhow::Result<usize> {
    let path = layout.fleet_dir().join("first-node.json");
    let text = fs_err::read(&path).context("this node has not registered with a first node")?;
    let first_node: FirstNode = serde_json::from_slice(&text)
        .with_context(|| format!("{} is damaged; register again", path.display()))?;
    let (states, _damaged) = StateStore::new(layout.state_dir()).load_all()?;
    let addons: Vec<AddonReport> = states
        .iter()
        .map(|state| addon_report(layout, state))
        .collect();
    let count = addons.len();
    let response = exchange(layout, &first_node, &Request::Report { addons })?;
    match response {
        Response::Accepted => Ok(count),
        other => bail!(
            "the first node at {} refused the report: {}",
            first_node.address,
            refusal(&other)
        ),
    }
}

fn refusal(response: &Response) -> String {
    match response {
        Response::Refused { reason } => reason.clone(),
        other => format!("it answered {other:?}"),
    }
}

fn exchange(
    layout: &Layout,
    first_node: &FirstNode,
    request: &Request,
) -> anyhow::Result<Response> {
    let identity = Identity::load_or_create(&layout.fleet_dir())?;
    let address: SocketAddr = first_node
        .address
        .to_socket_addrs()
        .with_context(|| {
            format!(
                "the first node's address {} does not resolve",
                first_node.address
            )
        })?
        .next()
        .with_context(|| {
            format!(
                "the first node's address {} has no address",
                first_node.address
            )
        })?;
    let config = channel::client_config(&identity, &first_node.pin)?;
    let mut connection = channel::connect(config, address)?;
    connection.send(request)?;
    Ok(connection.receive()?)
}

/// An add-on as the first node sees it: versions, the Progressing reason, and the health
/// conditions when its components were probed.
fn addon_report(layout: &Layout, state: &AddonState) -> AddonReport {
    let health = crate::health::HealthRecord::load(layout, &state.name);
    AddonReport {
        name: state.name.clone(),
        desired: state.desired.clone(),
        current: state
            .current
            .as_ref()
            .map(|applied| applied.target.version.clone()),
        last: state
            .last
            .as_ref()
            .map(|applied| applied.target.version.clone()),
        progressing: state.progressing.as_ref().map_or_else(
            || "Unknown".to_string(),
            |condition| condition.reason.to_string(),
        ),
        available: health.as_ref().map(|health| health.available()),
        degraded: health.as_ref().map(|health| health.degraded()),
    }
}

/// `key=value` labels, as the join command's parameters and `--label` give them.
pub fn labels(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .with_context(|| format!("label `{pair}`: give it as key=value"))
        })
        .collect()
}
