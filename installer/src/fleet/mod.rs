//! The fleet: the first node moves an add-on across every node by a rollout. [`strategy`]
//! decides which nodes start next.

pub mod strategy;
