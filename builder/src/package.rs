//! Turns one add-on folder into `<name>-<version>.tar.gz` (+ `.sha256`).
//!
//! Order of work: read the add-on and compute its inputs digest; fetch images, assets and
//! dockerout output (all verified into the cache or a temporary folder); lay the images out as
//! one OCI layout with each blob once; write `package.json` first and every other file sorted;
//! write the archive to a temporary file in `--out` and rename it into place only when complete,
//! so a failure never leaves a partial package behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_formats::Sha256Digest;
use berth_formats::archive::{self, ReproducibleArchive, Source, WriteError};
use berth_formats::digest::HashingWriter;
use berth_formats::manifest::{Directive, ImageSource};
use berth_formats::oci::{self, Descriptor, ImageIndex};
use berth_formats::package_index::{
    self, FileRecord, ImageRecord, PACKAGE_INDEX_FILE, PackageIndex, SCHEMA_VERSION,
};

use crate::addon::{self, AddonError, AddonSource};
use crate::asset::{self, AssetError};
use crate::cache::BlobCache;
use crate::dockerout::{DockerOutError, Engine};
use crate::download::RetryPolicy;
use crate::host_packages::distros::Distro;
use crate::host_packages::fetch::Fetcher;
use crate::host_packages::{self, HostPackageError};
use crate::image::{ImageError, ImageFetcher, ImageOrigin, ImageRequest, PackagedImage};
use crate::registry::RegistryClient;
use crate::reporter::Reporter;

/// What every package build shares: network clients and the blob cache.
pub struct BuildContext {
    pub registry: RegistryClient,
    pub http: reqwest::Client,
    pub cache: BlobCache,
    pub retry: RetryPolicy,
    pub reporter: Arc<dyn Reporter>,
}

/// How to build a package.
#[derive(Debug, Clone)]
pub struct PackageSettings {
    pub out_dir: PathBuf,
    /// Target architecture for images (`amd64`, `arm64`, `arm/v7`).
    pub arch: String,
    /// Blob downloads in flight at once.
    pub concurrency: usize,
    /// gzip level, 0–9.
    pub compression: u32,
    /// mtime of every entry (`SOURCE_DATE_EPOCH`).
    pub mtime: u64,
    /// Keep an existing package whose inputs digest matches instead of rebuilding it.
    pub skip_unchanged: bool,
    /// Target distros of the Manifest's host package directives.
    pub distros: Vec<Distro>,
}

/// What happened to one add-on.
#[derive(Debug, Clone)]
pub struct PackageOutcome {
    pub name: String,
    pub version: String,
    pub path: PathBuf,
    pub sha256: Sha256Digest,
    pub size: u64,
    pub images: usize,
    pub files: usize,
    /// The package was already there with the same inputs digest.
    pub unchanged: bool,
}

/// Why a package could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error(transparent)]
    Addon(#[from] AddonError),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Asset(#[from] AssetError),
    #[error("{manifest}:{line}: dockerout `{destination}`")]
    DockerOut {
        manifest: PathBuf,
        line: usize,
        destination: String,
        #[source]
        source: DockerOutError,
    },
    #[error(transparent)]
    HostPackages(#[from] HostPackageError),
    #[error("{path} comes from two places (the add-on folder and the Manifest); rename one")]
    Collision { path: String },
    #[error("failed to write the package")]
    Write(#[source] WriteError),
    #[error("failed to write {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Builds the package for the add-on folder `directory`.
pub async fn package(
    context: &BuildContext,
    directory: &Path,
    settings: &PackageSettings,
) -> Result<PackageOutcome, PackageError> {
    let source = {
        let directory = directory.to_path_buf();
        tokio::task::spawn_blocking(move || AddonSource::load(&directory))
            .await
            .expect("add-on load does not panic")?
    };
    let inputs_digest = source.inputs_digest(&settings.arch);
    let file_name = package_index::package_file_name(&source.name, &source.version);
    let out_path = settings.out_dir.join(&file_name);
    fs_err::create_dir_all(&settings.out_dir).map_err(io_error(&settings.out_dir))?;
    if settings.skip_unchanged
        && let Some(outcome) = unchanged(&source, &out_path, &inputs_digest)
    {
        return Ok(outcome);
    }

    let images = fetch_images(context, &source, settings).await?;
    let mut assets = Vec::new();
    for entry in &source.manifest.entries {
        if let Directive::Asset(directive) = &entry.directive {
            assets.push(
                asset::fetch(
                    &context.http,
                    &context.cache,
                    context.retry,
                    context.reporter.as_ref(),
                    directive,
                    source.local_input(entry.line),
                )
                .await?,
            );
        }
    }
    let fetcher = Fetcher {
        http: &context.http,
        cache: &context.cache,
        retry: context.retry,
    };
    let host_archives = host_packages::gather(
        &fetcher,
        &source.manifest,
        &settings.distros,
        settings.mtime,
    )
    .await?;
    let work = context
        .cache
        .temp_dir()
        .map_err(io_error(context.cache.root()))?;
    let dockerout = run_dockerout(&source, work.path()).await?;

    // Every file except the index goes into the archive as it is recorded; the archive refuses
    // a path added twice, which here means two sources for one file.
    let root = package_index::package_root(&source.name, &source.version);
    let mut archive = ReproducibleArchive::new(settings.mtime, settings.compression);
    let mut files: Vec<FileRecord> = Vec::new();
    let mut add =
        |relative: String, source: Source, digest: Sha256Digest, size: u64, executable: bool| {
            archive
                .insert(&format!("{root}/{relative}"), source)
                .map_err(|error| match error {
                    WriteError::Duplicate { .. } => PackageError::Collision {
                        path: relative.clone(),
                    },
                    other => PackageError::Write(other),
                })?;
            files.push(FileRecord {
                path: relative,
                size,
                sha256: digest,
                executable,
            });
            Ok::<(), PackageError>(())
        };
    for file in source.files.iter().cloned().chain(dockerout) {
        add(
            file.relative,
            Source::File {
                path: file.path,
                executable: file.executable,
                expected: Some(file.digest),
            },
            file.digest,
            file.size,
            file.executable,
        )?;
    }
    for fetched in &assets {
        add(
            format!("assets/{}", fetched.file),
            Source::File {
                path: fetched.path.clone(),
                executable: false,
                expected: Some(fetched.digest),
            },
            fetched.digest,
            fetched.size,
            false,
        )?;
    }
    if !images.is_empty() {
        for (relative, data) in [
            (oci::LAYOUT_FILE, oci::LAYOUT_CONTENT.as_bytes().to_vec()),
            (oci::INDEX_FILE, layout_index(&images)),
        ] {
            let digest = Sha256Digest::of(&data);
            let size = data.len() as u64;
            add(
                format!("{}/{relative}", oci::IMAGES_DIR),
                Source::Bytes {
                    data,
                    executable: false,
                },
                digest,
                size,
                false,
            )?;
        }
        let mut blobs = BTreeMap::new();
        for image in &images {
            for blob in std::iter::once(&image.manifest).chain(&image.blobs) {
                blobs.insert(blob.digest, blob.size);
            }
        }
        for (digest, size) in blobs {
            add(
                format!("{}/{}/{}", oci::IMAGES_DIR, oci::BLOBS_DIR, digest.hex()),
                Source::File {
                    path: context.cache.path(&digest),
                    executable: false,
                    expected: Some(digest),
                },
                digest,
                size,
                false,
            )?;
        }
    }
    let mut host_package_files = BTreeMap::new();
    for archives in host_archives {
        if !archives.deps.is_empty() {
            let data = format!("{}\n", archives.deps.join("\n")).into_bytes();
            let digest = Sha256Digest::of(&data);
            let size = data.len() as u64;
            add(
                format!("{}/Deps", archives.distro),
                Source::Bytes {
                    data,
                    executable: false,
                },
                digest,
                size,
                false,
            )?;
        }
        if archives.files.is_empty() {
            continue;
        }
        let folder = format!("{}/archives", archives.distro);
        for file in &archives.files {
            add(
                format!("{folder}/{}", file.file_name),
                Source::File {
                    path: file.path.clone(),
                    executable: false,
                    expected: Some(file.digest),
                },
                file.digest,
                file.size,
                false,
            )?;
        }
        for (relative, data) in archives.metadata {
            let digest = Sha256Digest::of(&data);
            let size = data.len() as u64;
            add(
                format!("{folder}/{relative}"),
                Source::Bytes {
                    data,
                    executable: false,
                },
                digest,
                size,
                false,
            )?;
        }
        host_package_files.insert(
            archives.distro,
            archives
                .files
                .into_iter()
                .map(|file| file.file_name)
                .collect(),
        );
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let total: u64 = files.iter().map(|file| file.size).sum();
    let file_count = files.len();
    let index = PackageIndex {
        schema_version: SCHEMA_VERSION,
        name: source.name.clone(),
        version: source.version.clone(),
        arch: settings.arch.clone(),
        inputs_digest,
        files,
        images: images
            .iter()
            .map(|image| ImageRecord {
                name: image.name.clone(),
                reference: image.reference.clone(),
                manifest_digest: image.manifest.digest,
                media_type: image.manifest.media_type.clone(),
                size: image.size(),
                no_remote_load: image.no_remote_load,
            })
            .collect(),
        host_packages: host_package_files,
    };
    archive
        .insert_lead(
            &format!("{root}/{PACKAGE_INDEX_FILE}"),
            Source::Bytes {
                data: index.to_bytes(),
                executable: false,
            },
        )
        .map_err(|error| match error {
            WriteError::Duplicate { .. } => PackageError::Collision {
                path: PACKAGE_INDEX_FILE.to_string(),
            },
            other => PackageError::Write(other),
        })?;

    let label = format!("write {file_name}");
    let cache = context.cache.clone();
    let reporter = context.reporter.clone();
    let out_dir = settings.out_dir.clone();
    let (sha256, size) = tokio::task::spawn_blocking(move || {
        write_atomically(
            &archive,
            &out_dir,
            &file_name,
            &cache,
            reporter.as_ref(),
            &label,
            total,
        )
    })
    .await
    .expect("package write does not panic")?;
    drop(work);
    Ok(PackageOutcome {
        name: source.name,
        version: source.version,
        path: out_path,
        sha256,
        size,
        images: images.len(),
        files: file_count,
        unchanged: false,
    })
}

/// The existing package, if its index records the same inputs digest and its checksum file
/// names it.
fn unchanged(
    source: &AddonSource,
    path: &Path,
    inputs_digest: &Sha256Digest,
) -> Option<PackageOutcome> {
    let checksum = fs_err::read_to_string(package_index::checksum_path(path)).ok()?;
    let sha256 = package_index::parse_checksum_file(&checksum).ok()?;
    let size = fs_err::metadata(path).ok()?.len();
    let (_, bytes) = archive::read_entry(fs_err::File::open(path).ok()?, |entry| {
        entry.ends_with(&format!("/{PACKAGE_INDEX_FILE}"))
    })
    .ok()??;
    let index = PackageIndex::from_bytes(&bytes).ok()?;
    (index.schema_version == SCHEMA_VERSION && index.inputs_digest == *inputs_digest).then(|| {
        PackageOutcome {
            name: source.name.clone(),
            version: source.version.clone(),
            path: path.to_path_buf(),
            sha256,
            size,
            images: index.images.len(),
            files: index.files.len(),
            unchanged: true,
        }
    })
}

async fn fetch_images(
    context: &BuildContext,
    source: &AddonSource,
    settings: &PackageSettings,
) -> Result<Vec<PackagedImage>, PackageError> {
    let requests: Vec<ImageRequest> = source
        .manifest
        .entries
        .iter()
        .filter_map(|entry| match &entry.directive {
            Directive::Image(image) => Some(ImageRequest {
                name: image.name.clone(),
                source: match &image.source {
                    ImageSource::Registry(reference) => ImageOrigin::Registry(reference.clone()),
                    ImageSource::Archive(_) => ImageOrigin::Archive(
                        source
                            .local_input(entry.line)
                            .expect("archive paths are resolved on load")
                            .path
                            .clone(),
                    ),
                },
                no_remote_load: image.no_remote_load,
            }),
            _ => None,
        })
        .collect();
    let fetcher = ImageFetcher {
        client: &context.registry,
        cache: &context.cache,
        arch: &settings.arch,
        concurrency: settings.concurrency,
        reporter: context.reporter.as_ref(),
    };
    Ok(fetcher.fetch(&requests).await?)
}

/// Runs each `dockerout` directive into `work/<n>` and lists the files it produced, placed
/// under the directive's destination.
async fn run_dockerout(
    source: &AddonSource,
    work: &Path,
) -> Result<Vec<addon::AddonFile>, PackageError> {
    let builds: Vec<_> = source
        .manifest
        .entries
        .iter()
        .filter_map(|entry| match &entry.directive {
            Directive::DockerOut(build) => Some((entry.line, build.clone())),
            _ => None,
        })
        .collect();
    if builds.is_empty() {
        return Ok(Vec::new());
    }
    let manifest_path = source.manifest.path.clone();
    let failure = |line: usize, destination: &str, error: DockerOutError| PackageError::DockerOut {
        manifest: manifest_path.clone(),
        line,
        destination: destination.to_string(),
        source: error,
    };
    let engine =
        Engine::detect().map_err(|error| failure(builds[0].0, &builds[0].1.destination, error))?;
    let mut files = Vec::new();
    for (number, (line, build)) in builds.into_iter().enumerate() {
        let out = work.join(number.to_string());
        fs_err::create_dir_all(&out).map_err(io_error(&out))?;
        let dockerfile = source
            .local_input(line)
            .expect("Dockerfile paths are resolved on load")
            .clone();
        let tag = format!(
            "localhost/berth-dockerout-{}:{}",
            sanitize(&format!(
                "{}-{}-{}",
                source.name, source.version, build.destination
            )),
            &dockerfile.digest.hex()[..16]
        );
        tracing::info!("dockerout {} with {}", build.destination, engine.name());
        let engine = engine.clone();
        let version = build.version.clone();
        let out_dir = out.clone();
        tokio::task::spawn_blocking(move || {
            engine.build_and_run(&dockerfile.path, version.as_deref(), &tag, &out_dir)
        })
        .await
        .expect("dockerout does not panic")
        .map_err(|error| failure(line, &build.destination, error))?;
        for entry in walkdir::WalkDir::new(&out).sort_by_file_name() {
            let entry = entry.map_err(|error| PackageError::Io {
                path: out.clone(),
                source: error.into(),
            })?;
            if entry.file_type().is_file() {
                let relative = entry
                    .path()
                    .strip_prefix(&out)
                    .expect("below out")
                    .to_string_lossy();
                let destination = build.destination.trim_end_matches('/');
                files.push(addon::hash_file(
                    entry.path(),
                    format!("{destination}/{relative}"),
                )?);
            }
        }
    }
    Ok(files)
}

fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// The layout's `index.json`: one entry per distinct image, in Manifest order, named by the
/// two annotations containerd and OCI tools read.
fn layout_index(images: &[PackagedImage]) -> Vec<u8> {
    let mut manifests: Vec<Descriptor> = Vec::new();
    for image in images {
        let descriptor = Descriptor {
            annotations: BTreeMap::from([
                (
                    oci::CONTAINERD_NAME_ANNOTATION.to_string(),
                    image.reference.clone(),
                ),
                (
                    oci::REF_NAME_ANNOTATION.to_string(),
                    image.reference.clone(),
                ),
            ]),
            ..image.manifest.clone()
        };
        if !manifests.contains(&descriptor) {
            manifests.push(descriptor);
        }
    }
    let index = ImageIndex {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX_MEDIA_TYPE.to_string()),
        manifests,
    };
    let mut bytes = serde_json::to_vec_pretty(&index).expect("index serializes");
    bytes.push(b'\n');
    bytes
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
fn write_atomically(
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
