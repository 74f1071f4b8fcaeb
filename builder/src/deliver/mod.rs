//! The last stage on the builder's side: what reaches a node. [`scripts`] renders the
//! install, join, upgrade and tasks scripts for one installer; [`bundle`] streams an airgap
//! bundle; [`serve`] answers nodes over HTTP, keeping posted specs in [`installers`].

pub mod bundle;
pub mod installers;
pub mod scripts;
pub mod serve;
