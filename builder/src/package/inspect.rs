//! `berth-build inspect`: what a package holds, read from its `package.json` (the first file in
//! the archive) without unpacking it.

use std::path::{Path, PathBuf};

use berth_formats::archive::{self, ExtractError};
use berth_formats::package_index::{PACKAGE_INDEX_FILE, PackageIndex};

/// Why a package could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("failed to open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable package")]
    Archive {
        path: PathBuf,
        #[source]
        source: ExtractError,
    },
    #[error("{path} holds no {PACKAGE_INDEX_FILE}; is it a Berth package?")]
    NoIndex { path: PathBuf },
    #[error("{path}: {PACKAGE_INDEX_FILE} is not valid: {reason}")]
    BadIndex { path: PathBuf, reason: String },
}

/// Reads the package index of the package at `path`.
pub fn read_index(path: &Path) -> Result<PackageIndex, InspectError> {
    let file = fs_err::File::open(path).map_err(|source| InspectError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let found = archive::read_entry(file, |entry| {
        let parts: Vec<&str> = entry.split('/').collect();
        parts.len() == 4 && parts[0] == "addons" && parts[3] == PACKAGE_INDEX_FILE
    })
    .map_err(|source| InspectError::Archive {
        path: path.to_path_buf(),
        source,
    })?;
    let (_, bytes) = found.ok_or_else(|| InspectError::NoIndex {
        path: path.to_path_buf(),
    })?;
    PackageIndex::from_bytes(&bytes).map_err(|error| InspectError::BadIndex {
        path: path.to_path_buf(),
        reason: error.to_string(),
    })
}
