//! Formats shared by the Berth builder (`berth-build`) and installer (`berth`).
//!
//! Everything that crosses from CI to a node is defined here, so that both sides agree on it:
//! the add-on [`manifest`], the [`package_index`] (`package.json`) inside every package, the
//! [`digest`] type used for every content check, the [`oci`] layout names, and the [`archive`]
//! writer (reproducible) and reader (refuses to write outside its destination). The node side
//! reads the Installer [`spec`] and resolves its add-on [`versions`] against `versions.json`, or
//! takes them from the installer's [`lock`].

pub mod archive;
pub mod bundle;
pub mod digest;
pub mod lock;
pub mod manifest;
pub mod name;
pub mod oci;
pub mod package_index;
pub mod release;
pub mod report;
pub mod shell;
pub mod spec;
pub mod table;
pub mod versions;

pub use digest::Sha256Digest;
