//! What the first node's own command line does besides serving: making it a first node
//! (its key, tokens and join parameters), telling whether it is one and serves, listing the
//! nodes it knows, and forgetting one.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use berth_formats::fleet::{
    ADDRESS_PARAM, NodeInfo, NodeRecord, PIN_PARAM, PRIMARY_TOKEN_PARAM, Request, Response, Role,
    TOKEN_PARAM,
};
use berth_formats::rollout::RolloutRecord;
use berth_formats::time::now;

use super::ITSELF;
use crate::channel::{Identity, Pin};
use crate::registry::Registry;
use crate::rollouts::{self, Rollouts};
use crate::{FleetPaths, Host, JoinParams, NewParam};

/// Makes (or keeps) the first node's key and join tokens, and publishes them as join
/// parameters with `address`, where the other nodes reach this one.
pub fn prepare(
    paths: &FleetPaths,
    join: &dyn JoinParams,
    name: &str,
    address: &str,
    token_ttl: Duration,
) -> anyhow::Result<Pin> {
    let identity = Identity::load_or_create(&paths.dir)?;
    // The first node is in its own registry, as the primary it is.
    let mut registry = Registry::load(&paths.registry())?;
    // Its address as the others' are listed: the host, not the fleet's port.
    let host = match address.parse::<std::net::SocketAddr>() {
        Ok(socket) => socket.ip().to_string(),
        Err(_) => address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host)
            .to_string(),
    };
    let own = NodeInfo {
        name: name.to_string(),
        machine_id: crate::node::machine_id(paths)?,
        role: Role::Primary,
        labels: Default::default(),
        address: host,
    };
    registry
        .register(&identity.pin(), own, ITSELF, &now())
        .map_err(anyhow::Error::msg)?;
    registry.save()?;
    let mut params = vec![
        NewParam {
            key: ADDRESS_PARAM,
            value: address.to_string(),
            secret: false,
            control_plane: false,
        },
        NewParam {
            key: PIN_PARAM,
            value: identity.pin().0,
            secret: false,
            control_plane: false,
        },
    ];
    // Tokens still valid are kept: join commands already handed out go on working.
    for (key, control_plane) in [(TOKEN_PARAM, false), (PRIMARY_TOKEN_PARAM, true)] {
        if join.current(key)?.is_none() {
            params.push(NewParam {
                key,
                value: crate::random_hex(16)?,
                secret: true,
                control_plane,
            });
        }
    }
    join.publish(&params, token_ttl)?;
    // The first node is a node of the fleet too: its `berth fleet agent` reports to itself.
    crate::node::keep_first_node(
        paths,
        &crate::node::FirstNode {
            address: address.to_string(),
            pin: identity.pin(),
        },
    )?;
    Ok(identity.pin())
}

/// Whether this node was made a first node (`berth fleet serve` ran here), and whether it
/// serves now. Commands that only a first node can answer say so where it is not one.
pub fn check_first_node(paths: &FleetPaths) -> anyhow::Result<Serving> {
    let registry = Registry::load(&paths.registry())?;
    if !registry.nodes().any(|record| record.seen_from == ITSELF) {
        anyhow::bail!(
            "this node is not a fleet's first node: `berth fleet serve` never ran here ({} lists no first node)\nhint: run this on the first node, or start `berth fleet serve` here to make it one",
            paths.registry().display()
        );
    }
    Ok(if serves(paths) {
        Serving::Yes
    } else {
        Serving::Stopped
    })
}

/// Whether the first node's `berth fleet serve` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    Yes,
    /// It ran here once and is not running now: nothing moves until it is started again.
    Stopped,
}

/// Whether `berth fleet serve` runs on this node now.
pub fn serves(paths: &FleetPaths) -> bool {
    is_locked(&serve_lock(paths))
}

/// Whether a process holds the flock of `path` now (a shared lock is tried).
fn is_locked(path: &std::path::Path) -> bool {
    let Ok(file) = fs_err::File::open(path).map(|file| file.into_parts().0) else {
        return false;
    };
    matches!(
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock),
        Err((_, nix::errno::Errno::EWOULDBLOCK))
    )
}

/// Held by `berth fleet serve` while it runs.
pub(super) fn serve_lock(paths: &FleetPaths) -> PathBuf {
    paths.dir.join("serve.lock")
}

/// Every registered node as the first node knows it, its own record with its add-ons as
/// they are now.
pub fn nodes(paths: &FleetPaths, host: &dyn Host) -> anyhow::Result<Vec<NodeRecord>> {
    let registry = Registry::load(&paths.registry())?;
    let mut own = None;
    let mut records: Vec<NodeRecord> = registry.nodes().cloned().collect();
    for record in &mut records {
        if record.seen_from == ITSELF {
            if own.is_none() {
                own = Some(crate::node::local_addons(paths, host, None)?);
            }
            record.addons = own.clone().unwrap_or_default();
            record.last_contact = now();
        }
    }
    Ok(records)
}

/// Forgets a node (by machine id, or by a name no other node has) and its place in every
/// rollout that has not finished. The serving first node does it itself (its registry is in
/// its memory); where it does not run, the files are changed here.
pub fn remove(paths: &FleetPaths, node: &str) -> anyhow::Result<(String, String)> {
    if check_first_node(paths)? == Serving::Yes {
        let first_node = crate::node::first_node(paths)?;
        let request = Request::Remove {
            node: node.to_string(),
        };
        return match crate::node::exchange(paths, &first_node, &request)? {
            Response::Removed { name, machine_id } => Ok((name, machine_id)),
            other => anyhow::bail!("{}", crate::node::refusal(&other)),
        };
    }
    let mut registry = Registry::load(&paths.registry())?;
    forget(&mut registry, &Rollouts::new(paths), node, |_| {})
}

/// Removes `node` from the registry and from every unfinished rollout; its name and machine id.
pub(super) fn forget(
    registry: &mut Registry,
    rollouts: &Rollouts,
    node: &str,
    publish: impl FnOnce(&[RolloutRecord]),
) -> anyhow::Result<(String, String)> {
    let own = registry
        .nodes()
        .find(|record| record.seen_from == ITSELF)
        .map(|record| record.info.machine_id.clone());
    let record = registry.remove(node).map_err(anyhow::Error::msg)?;
    if Some(&record.info.machine_id) == own.as_ref() {
        anyhow::bail!("{node} is the first node itself; it cannot be removed from its own fleet");
    }
    rollouts.update(|records| {
        rollouts::forget(records, &record.info.machine_id);
        publish(records);
        Ok(())
    })?;
    registry.save()?;
    Ok((record.info.name, record.info.machine_id))
}

/// How long ago an RFC 3339 time was, for `berth nodes`.
pub fn age(time: &str) -> Option<Duration> {
    let then = humantime::parse_rfc3339_weak(time).ok()?;
    SystemTime::now().duration_since(then).ok()
}
