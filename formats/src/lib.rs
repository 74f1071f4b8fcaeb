//! Formats shared by the Berth builder (`berth-build`) and installer (`berth`).
//!
//! Everything that crosses from CI to a node is defined here, so that both sides agree on it:
//! the add-on [`manifest`], the [`package_index`] (`package.json`) inside every package and its
//! one reader, the [`digest`] type used for every content check, the [`oci`] layout names, the
//! [`archive`] writer (reproducible) and reader (refuses to write outside its destination), the
//! airgap [`bundle`]'s layout and the [`release`]'s file names, an add-on's declared spec
//! [`fields`] and its components' [`health`] probes. Both sides read the Installer
//! [`spec`] and resolve its add-on [`versions`] against `versions.json` (the builder to write
//! an installer's [`lock`], the node when it has none). Both quote values for bash with
//! [`shell`], read durations with [`duration`], print errors with [`report`], tables with
//! [`table`] and documents with [`output`]; [`name`] checks every add-on name and version
//! that becomes a path. A control-plane node's [`backup`] is one archive with a manifest.
//! Between nodes, a [`rollout`] says how an add-on moves across the
//! fleet, and [`fleet`] holds what the nodes say to the first node.

pub mod archive;
pub mod backup;
pub mod bundle;
pub mod compression;
pub mod digest;
pub mod dsse;
pub mod duration;
pub mod fields;
pub mod files;
pub mod fleet;
pub mod health;
pub mod lock;
pub mod manifest;
pub mod name;
pub mod oci;
pub mod output;
pub mod package_index;
pub mod release;
pub mod report;
pub mod rollout;
pub mod shell;
pub mod signature;
pub mod spec;
pub mod table;
pub mod time;
pub mod versions;

pub use digest::Sha256Digest;
