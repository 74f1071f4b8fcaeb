//! The fleet: the first node moves an add-on across every node by a rollout. [`strategy`]
//! decides which nodes start next; [`channel`] is how the first node and the others talk,
//! each known by its pinned key; [`first_node`] serves the others and keeps the [`registry`]
//! of them; [`node`] is a node's side, registering and reporting its add-ons.

pub mod channel;
pub mod first_node;
pub mod node;
pub mod registry;
pub mod strategy;
