//! Why an add-on folder could not be read: the one error every part of [`crate::source`]
//! gives.

use std::path::PathBuf;

use berth_formats::manifest::ManifestErrors;

/// Why an add-on folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AddonError {
    #[error(
        "{path} is not a package folder: expected `<repository>/addons/<name>/<version>/`, `packages/kubernetes/<version>/` or `packages/host/<name>/`"
    )]
    NotAnAddon { path: PathBuf },
    #[error("{path} has no Manifest")]
    NoManifest { path: PathBuf },
    #[error("{0}")]
    Manifest(#[from] ManifestErrors),
    #[error("{0}")]
    Fields(String),
    #[error("{0}")]
    Health(#[from] berth_formats::health::HealthError),
    #[error("failed to read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
