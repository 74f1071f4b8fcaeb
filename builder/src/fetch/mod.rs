//! The second stage: everything a Manifest names that is not in the add-on folder, verified
//! into the content-addressed [`cache`].
//!
//! [`image`] resolves `image` directives through the [`registry`] client, or reads local image
//! archives with [`archive_image`]; [`asset`] fetches `asset` files; [`dockerout`] runs
//! `dockerout` builds; [`mirrors`] reads where a vendor fetches them from instead. Every transfer goes through [`download`], which owns the retry policy.

pub mod archive_image;
pub mod asset;
pub mod cache;
pub mod dockerout;
pub mod download;
pub mod image;
pub mod mirrors;
pub mod registry;
