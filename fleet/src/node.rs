//! A node's side of the fleet: it registers with the first node its join command names,
//! trusting that node's key alone, keeps where the first node is, and reports its add-ons.
//! It is known by a machine id made once per Berth root, its name only a label.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context as _, bail};
use berth_formats::fleet::{AddonReport, NodeInfo, Request, Response};
use serde::{Deserialize, Serialize};

use crate::channel::{self, Identity, Pin};
use crate::{FleetPaths, Host};

/// The first node, as the join command gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstNode {
    pub address: String,
    pub pin: Pin,
}

/// Registers this node with the first node at `address`, whose key must be `pin`, with the
/// join token; keeps where the first node is for the reports that follow.
pub fn register(
    paths: &FleetPaths,
    first_node: FirstNode,
    token: &str,
    node: NodeInfo,
) -> anyhow::Result<String> {
    let response = exchange(
        paths,
        &first_node,
        &Request::Register {
            token: token.to_string(),
            node,
        },
    )?;
    let Response::Registered { name } = response else {
        if let Response::Refused { reason } = &response
            && reason.contains("registered as machine")
        {
            bail!(
                "the first node at {} refused the registration: {reason}\nhint: this node's fleet key belongs to another machine id; remove {} and join again",
                first_node.address,
                paths.dir.display()
            );
        }
        bail!(
            "the first node at {} refused the registration: {}",
            first_node.address,
            refusal(&response)
        );
    };
    keep_first_node(paths, &first_node)?;
    Ok(name)
}

/// This node's machine id: made once (128 random bits) and kept in the fleet folder, so it
/// stays across re-joins and differs between nodes that share a host, or a cloned image's
/// `/etc/machine-id`.
pub fn machine_id(paths: &FleetPaths) -> anyhow::Result<String> {
    let path = paths.dir.join("machine-id");
    match fs_err::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim().to_string();
            berth_formats::name::check_plain("machine id", &id)
                .with_context(|| format!("{} is damaged; remove it", path.display()))?;
            Ok(id)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = crate::random_hex(16)?;
            fs_err::create_dir_all(&paths.dir)?;
            berth_formats::files::write_atomically_with_mode(
                &path,
                format!("{id}\n").as_bytes(),
                0o644,
            )
            .with_context(|| format!("failed to write {}", path.display()))?;
            Ok(id)
        }
        Err(error) => Err(error.into()),
    }
}

/// The first node this node registered with.
pub fn first_node(paths: &FleetPaths) -> anyhow::Result<FirstNode> {
    let path = paths.dir.join("first-node.json");
    let text = fs_err::read(&path).with_context(|| {
        format!(
            "this node has not registered with a first node ({} is missing)\nhint: join it with a join command printed after `berth fleet serve` started on the first node",
            path.display()
        )
    })?;
    serde_json::from_slice(&text)
        .with_context(|| format!("{} is damaged; register again", path.display()))
}

/// Keeps where the first node is and the key it must show.
pub fn keep_first_node(paths: &FleetPaths, first_node: &FirstNode) -> anyhow::Result<()> {
    let path = paths.dir.join("first-node.json");
    let text = serde_json::to_vec_pretty(first_node).expect("serializes");
    berth_formats::files::write_atomically(&path, &text)
        .with_context(|| format!("failed to write {}", path.display()))
}

/// Sends this node's add-ons to the first node it registered with.
pub fn report(paths: &FleetPaths, host: &dyn Host) -> anyhow::Result<usize> {
    let first_node = first_node(paths)?;
    let addons = local_addons(paths, host, None)?;
    let count = addons.len();
    let response = exchange(paths, &first_node, &Request::Report { addons })?;
    match response {
        Response::Accepted => Ok(count),
        Response::NotRegistered { reason } => Err(NotRegistered(reason).into()),
        other => bail!(
            "the first node at {} refused the report: {}",
            first_node.address,
            refusal(&other)
        ),
    }
}

/// The first node does not know this node's key: asking again cannot help.
#[derive(Debug, thiserror::Error)]
#[error(
    "the first node does not know this node: {0}\nhint: it was removed (`berth fleet remove`) or never registered; run the join command again"
)]
pub struct NotRegistered(pub String);

pub(crate) fn refusal(response: &Response) -> String {
    match response {
        Response::Refused { reason } | Response::NotRegistered { reason } => reason.clone(),
        other => format!("it answered {other:?}"),
    }
}

/// One request to the first node, one answer; the connection is pinned to its key.
pub fn exchange(
    paths: &FleetPaths,
    first_node: &FirstNode,
    request: &Request,
) -> anyhow::Result<Response> {
    let mut connection = connect(paths, first_node)?;
    connection.send(request)?;
    Ok(connection.receive()?)
}

/// A connection to the first node, pinned to its key.
fn connect(
    paths: &FleetPaths,
    first_node: &FirstNode,
) -> anyhow::Result<channel::Connection<rustls::ClientConnection>> {
    let identity = Identity::load_or_create(&paths.dir)?;
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
    // A first node that refuses for load, or is not listening yet, is tried again after a
    // wait that doubles, each wait drawn at random from its half to its whole: nodes that
    // boot together (behind one NAT address) spread out instead of knocking again together.
    let mut wait = FIRST_WAIT;
    let mut attempt = 1;
    loop {
        match channel::connect(config.clone(), address) {
            Ok(connection) => return Ok(connection),
            Err(error) if error.is_transient() && attempt < ATTEMPTS => {
                std::thread::sleep(jittered(wait));
                wait = (wait * 2).min(LONGEST_WAIT);
                attempt += 1;
            }
            Err(error) if error.is_transient() => {
                return Err(
                    anyhow::Error::new(error).context(format!("gave up after {ATTEMPTS} attempts"))
                );
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Connection attempts before a node gives up, and the waits between them: one to two
/// minutes in all, time for a fleet booting at once behind one address to take its turns.
const ATTEMPTS: u32 = 16;
const FIRST_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A wait between half of `wait` and all of it, drawn from the clock's nanoseconds and the
/// process id (enough to spread nodes apart; nothing depends on it being unpredictable).
fn jittered(wait: std::time::Duration) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let mut state =
        u64::from(nanos) ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    state ^= state >> 33;
    state = state.wrapping_mul(0xff51_afd7_ed55_8ccd);
    state ^= state >> 33;
    let fraction = (state % 1_000) as f64 / 1_000.0;
    wait.mul_f64(0.5 + fraction / 2.0)
}

/// Collects this node's support bundle and sends it to the first node for request `id`, in
/// parts, on one connection; a bundle that cannot be collected is said instead.
pub fn send_bundle(
    paths: &FleetPaths,
    host: &dyn Host,
    first_node: &FirstNode,
    id: &str,
    since_seconds: Option<u64>,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    use berth_formats::fleet::BUNDLE_PART_BYTES;
    use sha2::Digest as _;
    use std::io::Read as _;
    let folder = paths.dir.join("work");
    fs_err::create_dir_all(&folder)?;
    let archive = folder.join(format!("bundle-{id}.tar.gz"));
    let collected =
        host.support_bundle(since_seconds.map(std::time::Duration::from_secs), &archive);
    let mut connection = connect(paths, first_node)?;
    let mut say = |request: Request| -> anyhow::Result<()> {
        connection.send(&request)?;
        match connection.receive()? {
            Response::Accepted => Ok(()),
            other => bail!("the first node refused the bundle: {}", refusal(&other)),
        }
    };
    let result = (|| -> anyhow::Result<()> {
        if let Err(error) = collected {
            let mut message = berth_formats::report::chain(error.as_ref());
            let mut end = message.len().min(berth_formats::fleet::MAX_MESSAGE);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            return say(Request::BundlePart {
                id: id.to_string(),
                offset: 0,
                data: String::new(),
                last: true,
                sha256: None,
                error: Some(message),
            });
        }
        let mut file = fs_err::File::open(&archive)?;
        let length = file.metadata()?.len();
        let mut hasher = sha2::Sha256::new();
        let mut offset = 0u64;
        let mut buffer = vec![0u8; BUNDLE_PART_BYTES];
        loop {
            let mut filled = 0;
            while filled < buffer.len() {
                let read = file.read(&mut buffer[filled..])?;
                if read == 0 {
                    break;
                }
                filled += read;
            }
            let part = &buffer[..filled];
            hasher.update(part);
            let last = offset + filled as u64 >= length;
            say(Request::BundlePart {
                id: id.to_string(),
                offset,
                data: base64::engine::general_purpose::STANDARD.encode(part),
                last,
                sha256: last.then(|| format!("sha256:{}", hex::encode(hasher.clone().finalize()))),
                error: None,
            })?;
            offset += filled as u64;
            if last {
                return Ok(());
            }
        }
    })();
    let _ = fs_err::remove_file(&archive);
    result
}

/// Where the node keeps the rollout configuration hash it last applied, by add-on.
const APPLIED: &str = "applied.json";

/// The rollout configuration hash this node last applied, by add-on (OCM's last-applied
/// config hash, which its reports carry).
pub fn applied_hashes(paths: &FleetPaths) -> BTreeMap<String, String> {
    fs_err::read(paths.dir.join(APPLIED))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Records the rollout configuration hash now applied to `addon` (none: it runs as its spec
/// alone has it).
pub fn set_applied_hash(
    paths: &FleetPaths,
    addon: &str,
    hash: Option<String>,
) -> anyhow::Result<()> {
    let mut hashes = applied_hashes(paths);
    match hash {
        Some(hash) => hashes.insert(addon.to_string(), hash),
        None => hashes.remove(addon),
    };
    let path = paths.dir.join(APPLIED);
    berth_formats::files::write_atomically_with_mode(
        &path,
        &serde_json::to_vec_pretty(&hashes)?,
        0o600,
    )
    .with_context(|| format!("failed to write {}", path.display()))
}

/// This node's add-ons as the first node sees them, their components probed now, each with
/// the rollout configuration hash this node last applied to it.
pub fn local_addons(
    paths: &FleetPaths,
    host: &dyn Host,
    recorded_since: Option<std::time::SystemTime>,
) -> anyhow::Result<Vec<AddonReport>> {
    let applied = applied_hashes(paths);
    let mut addons = host.addons(recorded_since)?;
    for report in &mut addons {
        report.config_hash = applied.get(&report.name).cloned();
    }
    Ok(addons)
}

/// After a join, the registration its command asks for: when the parameters carry the
/// first node's `fleet-address`, `fleet-pin` and `fleet-token`, this node registers under
/// `node-name` (its host name unless given), as a primary when it joined the control plane,
/// with kURL's `labels=key=value,…` and `private-address`. `None` when they do not.
pub fn register_after_join(
    paths: &FleetPaths,
    params: &[(String, String)],
) -> anyhow::Result<Option<String>> {
    use berth_formats::fleet::{ADDRESS_PARAM, PIN_PARAM, PRIMARY_TOKEN_PARAM, Role, TOKEN_PARAM};
    let param = |key: &str| {
        params
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    };
    let (Some(address), Some(pin), Some(token)) =
        (param(ADDRESS_PARAM), param(PIN_PARAM), param(TOKEN_PARAM))
    else {
        return Ok(None);
    };
    let name = match param("node-name") {
        Some(name) => name.to_string(),
        None => host_name()?,
    };
    berth_formats::name::check_plain("node name", &name)?;
    let pairs: Vec<String> = param("labels")
        .unwrap_or("")
        .split(',')
        .filter(|pair| !pair.is_empty())
        .map(str::to_string)
        .collect();
    // A control-plane join command alone carries the primary token: the role is what the
    // first node issued.
    let (role, token) = match param(PRIMARY_TOKEN_PARAM) {
        Some(primary) if param("control-plane").is_some() => (Role::Primary, primary),
        _ => (Role::Secondary, token),
    };
    let node = NodeInfo {
        name,
        machine_id: machine_id(paths)?,
        role,
        labels: labels(&pairs)?,
        address: param("private-address").unwrap_or("").to_string(),
    };
    let first_node = FirstNode {
        address: address.to_string(),
        pin: Pin(pin.to_string()),
    };
    register(paths, first_node, token, node).map(Some)
}

/// The node's host name, as its fleet name when none is given.
pub fn host_name() -> anyhow::Result<String> {
    let name = nix::unistd::gethostname().context("failed to read the host name")?;
    Ok(name.to_string_lossy().into_owned())
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
