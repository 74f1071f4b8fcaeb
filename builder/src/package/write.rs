//! The package on disk: an existing one kept when its inputs are unchanged, a new one written
//! through temporary files renamed into place, so a failure never leaves a partial package.

use std::path::Path;

use berth_formats::Sha256Digest;
use berth_formats::archive::{ReproducibleArchive, WriteError};
use berth_formats::digest::HashingWriter;
use berth_formats::package_index::{self, SCHEMA_VERSION};

use super::{PackageError, PackageOutcome, io_error};
use crate::fetch::cache::BlobCache;
use crate::reporter::Reporter;
use crate::source::addon::AddonSource;

/// The existing package, if its index records the same inputs digest and its checksum file
/// names it.
pub(super) fn unchanged(
    source: &AddonSource,
    path: &Path,
    compression: berth_formats::compression::Compression,
    inputs_digest: &Sha256Digest,
) -> Option<PackageOutcome> {
    let checksum = fs_err::read_to_string(package_index::checksum_path(path)).ok()?;
    let file_name = path.file_name()?.to_string_lossy();
    let sha256 = package_index::parse_checksum_file(&checksum, &file_name).ok()?;
    let size = fs_err::metadata(path).ok()?.len();
    let index = package_index::read_from_archive(
        fs_err::File::open(path).ok()?,
        Some((&source.name, &source.version)),
    )
    .ok()?
    .index;
    (index.schema_version == SCHEMA_VERSION && index.inputs_digest == *inputs_digest).then(|| {
        PackageOutcome {
            name: source.name.clone(),
            version: source.version.clone(),
            kind: source.kind,
            fields: source.fields.clone(),
            path: path.to_path_buf(),
            compression,
            sha256,
            size,
            images: index.images.len(),
            files: index.files.len(),
            unchanged: true,
            described: None,
        }
    })
}

/// A temporary file in `out_dir`, removed unless persisted, readable by all once in place
/// (a package is published, not private).
fn partial_file(out_dir: &Path) -> Result<tempfile::NamedTempFile, PackageError> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(".berth-partial-")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(out_dir)
        .map_err(io_error(out_dir))
}

/// Writes the archive and its `.sha256` beside it through temporary files renamed into place.
pub(super) fn write_atomically(
    archive: &ReproducibleArchive,
    out_dir: &Path,
    file_name: &str,
    cache: &BlobCache,
    reporter: &dyn Reporter,
    label: &str,
    total: u64,
) -> Result<(Sha256Digest, u64), PackageError> {
    let temporary = partial_file(out_dir)?;
    let progress = reporter.start(label, Some(total));
    let writer = HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, temporary));
    let result = archive.write(writer, &mut |bytes| progress.advance(bytes));
    progress.finish();
    let writer = result.map_err(|error| {
        if let WriteError::DigestMismatch { expected, .. } = &error {
            // A cache blob went bad on disk: drop it so the next build fetches it again.
            cache.evict(expected);
        }
        PackageError::Write(error)
    })?;
    let (sha256, size, buffered) = writer.finish();
    let temporary = buffered.into_inner().map_err(|error| PackageError::Io {
        path: out_dir.to_path_buf(),
        source: error.into_error(),
    })?;
    temporary.as_file().sync_all().map_err(io_error(out_dir))?;
    let final_path = out_dir.join(file_name);
    let checksum = partial_file(out_dir)?;
    fs_err::write(
        checksum.path(),
        package_index::checksum_file_text(&sha256, file_name),
    )
    .map_err(io_error(checksum.path()))?;
    temporary
        .persist(&final_path)
        .map_err(|error| PackageError::Io {
            path: final_path.clone(),
            source: error.error,
        })?;
    let checksum_final = package_index::checksum_path(&final_path);
    checksum
        .persist(&checksum_final)
        .map_err(|error| PackageError::Io {
            path: checksum_final,
            source: error.error,
        })?;
    Ok((sha256, size))
}
