//! The fleet: the first node moves an add-on across every node by a rollout. [`strategy`]
//! decides which nodes start next; [`channel`] is how the first node and the others talk,
//! each known by its pinned key; [`first_node`] serves the others and keeps the [`registry`]
//! of them and the [`rollouts`], deciding on every report and handing out work; [`node`] is
//! a node's side, registering and reporting its add-ons, and [`agent`] runs the work it is
//! given.

pub mod agent;
pub mod channel;
pub mod first_node;
pub mod log;
pub mod node;
pub mod registry;
pub mod rollouts;
pub mod strategy;

/// `bytes` random bytes, as hex: tokens, machine ids, rollout ids.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut buffer = vec![0u8; bytes];
    fs_err::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(hex::encode(buffer))
}
