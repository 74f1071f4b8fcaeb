//! Verifying and unpacking a package: its digest is checked first, then it is extracted into a
//! staging folder (bounded by the room on the disk) and moved into place. A package that fails
//! leaves nothing behind, and nothing is ever written outside the staging folder (the reader
//! refuses absolute paths, `..` and links that point out).
//!
//! A package from an airgap bundle comes unpacked (`packages/<name>-<version>/`, image blobs
//! in the bundle's shared `blobs/sha256/`): its `package.json` is checked against the lock,
//! and every file against `package.json` as it is copied into the staging folder.

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::archive::{self, ExtractError};
use berth_formats::digest::HashingReader;
use berth_formats::package_index::{PACKAGE_INDEX_FILE, PackageIndex, package_root};

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error(
        "{package} does not match its expected digest: expected {expected}, found {actual}\nhint: the package changed after its digest was published; fetch it again or rebuild it"
    )]
    Mismatch {
        package: PathBuf,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("{package} is refused")]
    Extract {
        package: PathBuf,
        #[source]
        source: ExtractError,
    },
    #[error("{package} holds no {PACKAGE_INDEX_FILE} for {name} {version}")]
    NoIndex {
        package: PathBuf,
        name: String,
        version: String,
    },
    #[error("{package}: {message}")]
    BadIndex { package: PathBuf, message: String },
    #[error("failed to unpack into {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks `package` against `expected`, extracts it (checking the bytes extracted against
/// `expected` again), then moves the add-on folder `addons/<name>/<version>` into
/// `install_dir`. Returns the package's index.
pub fn unpack(
    package: &Path,
    expected: &Sha256Digest,
    (name, version): (&str, &str),
    staging: &Path,
    install_dir: &Path,
) -> Result<PackageIndex, UnpackError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UnpackError::Io { path, source }
    };
    let _ = fs_err::remove_dir_all(staging);
    fs_err::create_dir_all(staging).map_err(io(staging))?;
    let result = extract_checked(package, expected, staging)
        .and_then(|()| move_into_place(package, (name, version), staging, install_dir));
    let _ = fs_err::remove_dir_all(staging);
    result
}

/// Reads the staged add-on folder's index, checks it names the add-on, and moves the folder
/// into `install_dir`.
fn move_into_place(
    package: &Path,
    (name, version): (&str, &str),
    staging: &Path,
    install_dir: &Path,
) -> Result<PackageIndex, UnpackError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UnpackError::Io { path, source }
    };
    {
        let root = package_root(name, version);
        let folder = staging.join(&root);
        let index_path = folder.join(PACKAGE_INDEX_FILE);
        let bytes = fs_err::read(&index_path).map_err(|_| UnpackError::NoIndex {
            package: package.to_path_buf(),
            name: name.to_string(),
            version: version.to_string(),
        })?;
        let index = PackageIndex::from_bytes(&bytes).map_err(|error| UnpackError::BadIndex {
            package: package.to_path_buf(),
            message: error.to_string(),
        })?;
        if index.name != name || index.version != version {
            return Err(UnpackError::BadIndex {
                package: package.to_path_buf(),
                message: format!(
                    "it holds {} {}, not {name} {version}",
                    index.name, index.version
                ),
            });
        }
        index
            .check_arch()
            .map_err(|message| UnpackError::BadIndex {
                package: package.to_path_buf(),
                message,
            })?;
        let target = install_dir.join(&root);
        if target.exists() {
            fs_err::remove_dir_all(&target).map_err(io(&target))?;
        }
        fs_err::create_dir_all(target.parent().expect("add-on folders have parents"))
            .map_err(io(&target))?;
        fs_err::rename(&folder, &target).map_err(io(&target))?;
        Ok(index)
    }
}

/// The index of a package already unpacked on this node into `folder` (checked when it was
/// unpacked).
pub fn read_unpacked(folder: &Path) -> Result<PackageIndex, UnpackError> {
    let path = folder.join(PACKAGE_INDEX_FILE);
    let bytes = fs_err::read(&path).map_err(|source| UnpackError::Io {
        path: path.clone(),
        source,
    })?;
    PackageIndex::from_bytes(&bytes).map_err(|error| UnpackError::BadIndex {
        package: path,
        message: error.to_string(),
    })
}

/// Where a bundle keeps the unpacked package of `name` `version`, and its shared blobs.
pub fn bundled_package(bundle: &Path, name: &str, version: &str) -> PathBuf {
    bundle.join(berth_formats::bundle::package_dir(name, version))
}

/// Checks a bundled package's index against `expected` (the lock's), copies every file it
/// lists into the staging folder checking each against the index, then moves the add-on
/// folder into `install_dir`. Returns the package's index.
/// With `consume` (a bundle Berth received as a stream, in a folder of its own), each file is
/// moved rather than copied, and an image blob linked: the disk holds the content once. The
/// stream checked each file as it arrived, so none is read again.
pub fn unpack_bundled(
    bundle: &Path,
    expected: &Sha256Digest,
    (name, version): (&str, &str),
    staging: &Path,
    install_dir: &Path,
    consume: bool,
) -> Result<PackageIndex, UnpackError> {
    let source = bundled_package(bundle, name, version);
    let _ = fs_err::remove_dir_all(staging);
    let folder = staging.join(package_root(name, version));
    fs_err::create_dir_all(&folder).map_err(io_at(&folder))?;
    let result = (|| {
        let into = if consume {
            Placement::Move(&folder)
        } else {
            Placement::Copy(&folder)
        };
        walk_bundled(bundle, expected, (name, version), into)?;
        move_into_place(&source, (name, version), staging, install_dir)
    })();
    let _ = fs_err::remove_dir_all(staging);
    result
}

/// Checks a bundled package as [`unpack_bundled`] does — its index against `expected`, each
/// file against its index — writing nothing.
pub fn check_bundled(
    bundle: &Path,
    expected: &Sha256Digest,
    (name, version): (&str, &str),
) -> Result<(), UnpackError> {
    walk_bundled(bundle, expected, (name, version), Placement::Nowhere).map(|_| ())
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> UnpackError + use<> {
    let path = path.to_path_buf();
    move |source| UnpackError::Io {
        path: path.clone(),
        source,
    }
}

/// Where [`walk_bundled`] puts what it checks.
#[derive(Clone, Copy)]
enum Placement<'a> {
    Nowhere,
    Copy(&'a Path),
    /// Moved (an image blob, which other packages may share, linked): the files of a bundle
    /// received as a stream, each checked against its index as it arrived.
    Move(&'a Path),
}

impl<'a> Placement<'a> {
    fn folder(self) -> Option<&'a Path> {
        match self {
            Placement::Nowhere => None,
            Placement::Copy(folder) | Placement::Move(folder) => Some(folder),
        }
    }
}

/// Reads a bundled package's index (checked against `expected`) and every file it lists
/// (each checked against it), putting them `into` a folder.
fn walk_bundled(
    bundle: &Path,
    expected: &Sha256Digest,
    (name, version): (&str, &str),
    into: Placement<'_>,
) -> Result<PackageIndex, UnpackError> {
    let source = bundled_package(bundle, name, version);
    let index_path = source.join(PACKAGE_INDEX_FILE);
    let bytes = fs_err::read(&index_path).map_err(|_| UnpackError::NoIndex {
        package: source.clone(),
        name: name.to_string(),
        version: version.to_string(),
    })?;
    let actual = Sha256Digest::of(&bytes);
    if &actual != expected {
        return Err(UnpackError::Mismatch {
            package: index_path.clone(),
            expected: *expected,
            actual,
        });
    }
    let index = PackageIndex::from_bytes(&bytes).map_err(|error| UnpackError::BadIndex {
        package: index_path.clone(),
        message: error.to_string(),
    })?;
    index
        .check_arch()
        .map_err(|message| UnpackError::BadIndex {
            package: index_path.clone(),
            message,
        })?;
    if let Some(folder) = into.folder() {
        fs_err::write(folder.join(PACKAGE_INDEX_FILE), &bytes).map_err(io_at(folder))?;
    }
    for file in &index.files {
        let relative = Path::new(&file.path);
        if !relative
            .components()
            .all(|component| matches!(component, std::path::Component::Normal(_)))
        {
            return Err(UnpackError::BadIndex {
                package: index_path.clone(),
                message: format!("`{}` is not a path inside the package", file.path),
            });
        }
        let from = match berth_formats::bundle::shared_blob(&file.path) {
            Some(hex) => bundle.join(berth_formats::bundle::blob_path(hex)),
            None => source.join(relative),
        };
        let to = into.folder().map(|folder| folder.join(relative));
        if let Some(to) = &to {
            fs_err::create_dir_all(to.parent().expect("inside the folder")).map_err(io_at(to))?;
        }
        if let (Some(to), Placement::Move(_)) = (&to, into) {
            // Checked as it arrived, against this index (a blob against its name, which every
            // index listing it shares): not read a second time.
            let shared = berth_formats::bundle::shared_blob(&file.path).is_some();
            let placed = if shared {
                fs_err::hard_link(&from, to)
            } else {
                fs_err::rename(&from, to)
            };
            // Another filesystem: copied after all.
            if placed.is_err() {
                fs_err::copy(&from, to).map_err(io_at(to))?;
            }
        } else {
            // No more than the index says: a longer file fails its digest without filling the
            // disk.
            let mut reader = HashingReader::new(std::io::Read::take(
                fs_err::File::open(&from).map_err(io_at(&from))?,
                file.size + 1,
            ));
            match &to {
                Some(to) => {
                    let mut writer = fs_err::File::create(to).map_err(io_at(to))?;
                    std::io::copy(&mut reader, &mut writer).map_err(io_at(&from))?;
                }
                None => {
                    std::io::copy(&mut reader, &mut std::io::sink()).map_err(io_at(&from))?;
                }
            }
            let (actual, _) = reader.finish().map_err(io_at(&from))?;
            if actual != file.sha256 {
                return Err(UnpackError::Mismatch {
                    package: from,
                    expected: file.sha256,
                    actual,
                });
            }
        }
        if let Some(to) = &to {
            place_as_indexed(to, file.executable).map_err(io_at(to))?;
        }
    }
    Ok(index)
}

/// Gives a placed file the mode its index says (0755 or 0644) and, when the node runs as root,
/// root as its owner: a file moved out of a bundle someone extracted keeps that user and the
/// mode `tar` gave it, and is not the index's until both are set.
fn place_as_indexed(path: &Path, executable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(0)),
            Some(nix::unistd::Gid::from_raw(0)),
        )
        .map_err(std::io::Error::from)?;
    }
    let mode = if executable { 0o755 } else { 0o644 };
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Room kept free on the node's disk when a package is downloaded or unpacked, and the room
/// there is (shared with the fleet, which receives nodes' bundles).
pub use berth_formats::files::{DISK_RESERVE, free_space};

/// Checks the package's digest, and only then unpacks it: a package the lock does not pin is
/// never expanded (a small archive can expand a thousandfold). The bytes unpacked are hashed
/// too, so a file changed between the two reads (a dist hard-linked into the cache) is refused
/// before anything is moved into place. The unpacked bytes are bounded by the room left on the
/// staging folder's filesystem.
fn extract_checked(
    package: &Path,
    expected: &Sha256Digest,
    staging: &Path,
) -> Result<(), UnpackError> {
    let io = |source| UnpackError::Io {
        path: package.to_path_buf(),
        source,
    };
    let open = || {
        fs_err::File::open(package)
            .map(|file| std::io::BufReader::with_capacity(1 << 20, file))
            .map_err(io)
    };
    let actual = Sha256Digest::of_reader(open()?).map_err(io)?;
    if &actual != expected {
        return Err(UnpackError::Mismatch {
            package: package.to_path_buf(),
            expected: *expected,
            actual,
        });
    }
    let limits = archive::ExtractLimits {
        max_bytes: free_space(staging).saturating_sub(DISK_RESERVE),
        ..Default::default()
    };
    let mut reader = HashingReader::new(open()?);
    let extracted = archive::extract_within(&mut reader, staging, limits);
    // The rest of the stream (the tar's end blocks, the gzip trailer) counts too.
    std::io::copy(&mut reader, &mut std::io::sink()).map_err(io)?;
    let (again, _) = reader.finish().map_err(io)?;
    if &again != expected {
        return Err(UnpackError::Mismatch {
            package: package.to_path_buf(),
            expected: *expected,
            actual: again,
        });
    }
    extracted
        .map(|_| ())
        .map_err(|source| UnpackError::Extract {
            package: package.to_path_buf(),
            source,
        })
}
