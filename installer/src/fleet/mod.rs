//! The fleet: the first node moves an add-on across every node by a rollout. [`strategy`]
//! decides which nodes start next; [`channel`] is how the first node and the others talk,
//! each known by its pinned key.

pub mod channel;
pub mod strategy;
