//! `berth-build inspect`: what a package holds, read from its `package.json` (the first file in
//! the archive) without unpacking it.

use std::path::{Path, PathBuf};

use berth_formats::package_index::{self, IndexReadError, PackageIndex};

/// Why a package could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("failed to open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the index of {path}")]
    Index {
        path: PathBuf,
        #[source]
        source: IndexReadError,
    },
}

/// Reads the package index of the package at `path`.
pub fn read_index(path: &Path) -> Result<PackageIndex, InspectError> {
    let file = fs_err::File::open(path).map_err(|source| InspectError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    package_index::read_from_archive(file, None)
        .map(|archived| archived.index)
        .map_err(|source| InspectError::Index {
            path: path.to_path_buf(),
            source,
        })
}
