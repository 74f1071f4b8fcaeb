//! Turns one add-on folder into `<name>-<version>.tar.gz` (+ `.sha256`).
//!
//! Order of work: read the add-on and compute its inputs digest; fetch images, assets and
//! dockerout output (all verified into the cache or a temporary folder); lay the images out as
//! one OCI layout with each blob once; write `package.json` first and every other file sorted;
//! write the archive to a temporary file in `--out` and rename it into place only when complete,
//! so a failure never leaves a partial package behind.

pub mod beside;
pub mod build;
mod contents;
mod image_layout;
mod inputs;
pub mod inspect;
pub mod provenance;
pub mod sbom;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_formats::Sha256Digest;
use berth_formats::archive::WriteError;
use berth_formats::package_index::{self, FileRecord, ImageRecord, PackageIndex, SCHEMA_VERSION};

use contents::Contents;

use crate::fetch::asset::AssetError;
use crate::fetch::cache::BlobCache;
use crate::fetch::dockerout::DockerOutError;
use crate::fetch::download::RetryPolicy;
use crate::fetch::image::ImageError;
use crate::fetch::registry::RegistryClient;
use crate::host_packages::HostPackageError;
use crate::host_packages::distros::Distro;
use crate::reporter::Reporter;
use crate::source::addon::AddonSource;
use crate::source::error::AddonError;

/// What every package build shares: network clients and the blob cache.
pub struct BuildContext {
    pub registry: RegistryClient,
    pub http: reqwest::Client,
    pub cache: BlobCache,
    pub retry: RetryPolicy,
    pub reporter: Arc<dyn Reporter>,
    /// URL prefixes of assets fetched from elsewhere (`https://github.com/` →
    /// `http://mirror.internal/github/`), as restricted CI reaches them; the pin and the
    /// package stay those of the Manifest's URL.
    pub asset_mirrors: Vec<(String, String)>,
}

/// How to build a package.
#[derive(Debug, Clone)]
pub struct PackageSettings {
    pub out_dir: PathBuf,
    /// Target architecture for images (`amd64`, `arm64`, `arm/v7`).
    pub arch: String,
    /// Blob downloads in flight at once.
    pub concurrency: usize,
    /// How the package is compressed (its format names its file) and at what level.
    pub compression: berth_formats::compression::Setting,
    /// mtime of every entry (`SOURCE_DATE_EPOCH`).
    pub mtime: u64,
    /// Keep an existing package whose inputs digest matches instead of rebuilding it.
    pub skip_unchanged: bool,
    /// Target distros of the Manifest's host package directives.
    pub distros: Vec<Distro>,
    /// The distros `--distro` selected, when it did: a `dockerout` whose destination is
    /// another distro's folder (`ubuntu-22.04`, `rhel-7-force`) is not built.
    pub selected_distros: Option<Vec<String>>,
    /// Put the bill of materials inside the package.
    pub sbom: bool,
}

/// What happened to one add-on.
#[derive(Debug, Clone)]
pub struct PackageOutcome {
    pub name: String,
    pub version: String,
    pub kind: crate::source::repository::PackageKind,
    /// What the folder's `fields.yaml` declares, for its `versions.json` entry.
    pub fields: Option<Vec<berth_formats::fields::FieldDeclaration>>,
    pub path: PathBuf,
    /// How it is compressed, which its `versions.json` entry records.
    pub compression: berth_formats::compression::Compression,
    pub sha256: Sha256Digest,
    pub size: u64,
    pub images: usize,
    pub files: usize,
    /// The package was already there with the same inputs digest.
    pub unchanged: bool,
    /// For a package written now: its bill of materials and what its provenance is made of.
    pub described: Option<Box<sbom::Described>>,
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
    #[error("the Manifest's images and assets could not all be fetched:{}", listed(.0))]
    Inputs(Vec<PackageError>),
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
    let inputs_digest = source.inputs_digest(&settings.arch, settings.sbom, settings.compression);
    let file_name = package_index::package_file_name(
        &source.name,
        &source.version,
        settings.compression.format,
    );
    let out_path = settings.out_dir.join(&file_name);
    fs_err::create_dir_all(&settings.out_dir).map_err(io_error(&settings.out_dir))?;
    if settings.skip_unchanged
        && let Some(outcome) = write::unchanged(
            &source,
            &out_path,
            settings.compression.format,
            &inputs_digest,
        )
    {
        return Ok(outcome);
    }

    let inputs = inputs::gather(context, &source, settings).await?;
    let root = package_index::package_root(&source.name, &source.version);
    let mut contents = Contents::new(root, settings.mtime, settings.compression);
    contents.add_addon_files(source.files.iter().cloned().chain(inputs.dockerout))?;
    if let Some(hooks) = source.builtin_hooks {
        contents.add_builtin_hooks(hooks)?;
    }
    if let Some(health) = source.builtin_health {
        contents.add_builtin_health(health)?;
    }
    contents.add_assets(&inputs.assets)?;
    contents.add_images(&inputs.images, &context.cache)?;
    let host_packages = contents.add_host_archives(inputs.host_archives)?;
    let index_of = |files: Vec<FileRecord>| PackageIndex {
        schema_version: SCHEMA_VERSION,
        name: source.name.clone(),
        version: source.version.clone(),
        arch: settings.arch.clone(),
        inputs_digest,
        files,
        images: inputs
            .images
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
        host_packages: host_packages.clone(),
    };
    // The bill of materials describes every other file, read from the sources before the
    // package is written, and goes inside it.
    let mut described = None;
    if settings.sbom {
        let before = index_of(contents.files());
        let (returned, scanned) = tokio::task::spawn_blocking(move || {
            let scanned = contents.scan(before)?;
            Ok::<_, PackageError>((contents, scanned))
        })
        .await
        .expect("a package's scan does not panic")?;
        contents = returned;
        let bom = sbom::bom(&scanned);
        contents.add_sbom(&bom)?;
        described = Some((bom, scanned));
    }
    let files = contents.files();
    let total: u64 = files.iter().map(|file| file.size).sum();
    let file_count = files.len();
    let index = index_of(files);
    let archive = contents.finish(&index)?;

    let label = format!("write {file_name}");
    let cache = context.cache.clone();
    let reporter = context.reporter.clone();
    let out_dir = settings.out_dir.clone();
    let (sha256, size) = tokio::task::spawn_blocking(move || {
        write::write_atomically(
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
    // The dockerout output is read while the archive is written; only now can it go.
    drop(inputs.work);
    Ok(PackageOutcome {
        name: source.name,
        version: source.version,
        kind: source.kind,
        fields: source.fields,
        path: out_path,
        compression: settings.compression.format,
        sha256,
        size,
        images: index.images.len(),
        files: file_count,
        unchanged: false,
        described: described.map(|(bom, mut scanned)| {
            scanned.lighten();
            scanned.index = index;
            scanned.digest = Some(sha256);
            Box::new(sbom::Described { bom, scanned })
        }),
    })
}

/// Each error with its causes, one per line.
fn listed(errors: &[PackageError]) -> String {
    errors
        .iter()
        .map(|error| format!("\n  - {}", berth_formats::report::chain(error)))
        .collect()
}
