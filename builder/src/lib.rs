//! `berth-build`: turns kURL-style add-on folders into reproducible Berth packages, publishes
//! them, and delivers them to nodes.
//!
//! The modules follow the data, stage by stage:
//!
//! ```text
//! source          add-on folders and their Manifests; `check` lints them
//!   -> fetch      images (registry, archives), assets, dockerout, each verified into the cache
//!   -> host_packages  apt and yum directives resolved into repositories
//!   -> package    one add-on laid out and written as a reproducible archive; `build` does all
//!   -> publish    the dist folder put in a store; releases read back from it
//!   -> deliver    scripts rendered for an installer, airgap bundles, the `serve` HTTP server
//! ```
//!
//! [`process`] runs other programs and [`reporter`] carries progress; both serve every stage.

// Errors carry the file, line, image and cause by design; they are built on cold paths only.
#![allow(clippy::result_large_err)]

pub mod deliver;
pub mod fetch;
pub mod host_packages;
pub mod package;
pub mod process;
pub mod publish;
pub mod reporter;
pub mod source;
