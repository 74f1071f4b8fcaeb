//! `berth`, the node installer.
//!
//! A run: [`plan`] decides per add-on from its [`state`] record; [`engine`] fetches packages
//! from the [`dist`], checks and unpacks them ([`unpack`]), loads their [`images`], and runs
//! their bash hooks in one [`session`] with the [`helpers`] library and the variables of the
//! [`hook_environment`], recording state as it goes; `engine::reset` takes a node back to
//! before the install. [`layout`] says where everything lives; [`files`] writes them
//! atomically; [`node_lock`] lets one run at a time change the node; [`interrupt`] stops a run
//! cleanly on a signal; [`kustomization`] does the YAML edits the `insert_*` helpers ask for;
//! [`join`] keeps what a new node needs and builds its command; [`last_installer`] remembers
//! the installer the node ran last; [`network_interfaces`] answers kURL's `kurl netutil`;
//! [`health`] probes each add-on's components and sums them up as Available and Degraded;
//! [`status`] makes the node's status document from the records and a probe;
//! [`fleet`] moves an add-on across the nodes by a rollout.

// Errors carry the add-on, version, hook and cause by design; they are built on cold paths only.
#![allow(clippy::result_large_err)]

pub mod bundle_stream;
pub mod dist;
pub mod engine;
pub use berth_formats::files;
pub mod fleet;
pub mod health;
pub mod helpers;
pub mod hook_environment;
pub mod images;
pub mod interrupt;
pub mod join;
pub mod kubeadm_config;
pub mod kurl_programs;
pub mod kustomization;
pub mod last_installer;
pub mod layout;
pub mod network_interfaces;
pub mod node_lock;
pub mod phase;
pub mod plan;
pub mod session;
pub mod state;
pub mod status;
pub mod support_bundle;
pub mod terminal;
pub mod trust;
pub mod unpack;
