//! `berth-build`: turns kURL-style add-on folders into reproducible Berth packages.
//!
//! The flow for one add-on: [`addon`] reads the folder and its Manifest; [`image`] resolves and
//! fetches images through [`registry`] (or reads local archives with [`archive_image`]);
//! [`asset`] fetches files; [`dockerout`] runs builds; everything passes through [`download`]
//! into the content-addressed [`cache`]; [`package`] lays it all out and writes the archive.
//! [`build`] does that for a whole repository, [`check`] lints it, [`inspect`] reads a package.

// Errors carry the file, line, image and cause by design; they are built on cold paths only.
#![allow(clippy::result_large_err)]

pub mod addon;
pub mod archive_image;
pub mod asset;
pub mod build;
pub mod bundle;
pub mod cache;
pub mod check;
pub mod dockerout;
pub mod download;
pub mod host_packages;
pub mod image;
pub mod inspect;
pub mod installers;
pub mod package;
pub mod process;
pub mod registry;
pub mod release;
pub mod reporter;
pub mod scripts;
pub mod serve;
pub mod store;
pub mod upload;
