//! One module per verb: turn parsed arguments into settings, call the library, report.

pub mod build;
pub mod bundle;
pub mod check;
pub mod inspect;
pub mod node_binary;
pub mod package;
pub mod provenance;
pub mod release;
pub mod resolve;
pub mod script;
pub mod serve;
pub mod sign;
pub mod upload;
pub mod versions;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use berth_build::fetch::cache::BlobCache;
use berth_build::fetch::download::RetryPolicy;
use berth_build::fetch::mirrors::{MirrorsFile, by_longest_prefix};
use berth_build::fetch::registry::{RegistryClient, RegistrySettings};
use berth_build::host_packages::distros::{Distro, DistrosFile};
use berth_build::package::{BuildContext, PackageSettings};
use clap::Args;

use crate::progress::Bars;

/// Settings shared by the commands that fetch and write packages.
#[derive(Args, Clone)]
pub struct FetchArgs {
    /// Where packages are written.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    no_format: berth_formats::output::NoOutputFormat,
    /// Architecture whose images are packaged (`amd64`, `arm64`, `arm/v7`).
    #[arg(long, default_value = "amd64")]
    arch: String,
    /// Blob cache shared across builds [default: ~/.cache/berth].
    #[arg(long, value_name = "DIR", env = "BERTH_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Blob downloads in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Registry (`host` or `host:port`) to reach over plain HTTP; loopback ones always are.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "BERTH_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    insecure_registries: Vec<String>,
    /// Fetch a registry's images from a mirror instead: `REGISTRY=HOST[:PORT]`
    /// (`registry.k8s.io=mirror.internal:5000`); the images keep their own names.
    #[arg(long = "registry-mirror", value_name = "REGISTRY=HOST")]
    registry_mirrors: Vec<String>,
    /// Fetch assets whose URL starts with a prefix from another: `PREFIX=REPLACEMENT`
    /// (`https://github.com/=http://mirror.internal/github/`); pins still apply.
    #[arg(long = "asset-mirror", value_name = "PREFIX=REPLACEMENT")]
    asset_mirrors: Vec<String>,
    /// A mirrors file: `registries:` (REGISTRY: HOST[:PORT]) and `assets:` (URL PREFIX:
    /// REPLACEMENT); --registry-mirror and --asset-mirror add to it.
    #[arg(long = "mirrors", value_name = "FILE", env = "BERTH_MIRRORS")]
    mirrors_file: Option<PathBuf>,
    /// How packages are compressed: gzip (what kURL-format consumers read) or zstd (several
    /// times faster to write and unpack); a node reads both.
    #[arg(long, default_value = "gzip", value_name = "gzip|zstd")]
    compression: berth_formats::compression::Compression,
    /// The compression level: gzip 0-9 (default 6), zstd 1-19 (default 3).
    #[arg(long, value_name = "LEVEL")]
    compression_level: Option<u32>,
    /// Leave the bill of materials out: no `sbom.cdx.json` inside the packages, no
    /// `<package>.cdx.json` beside them.
    #[arg(long)]
    no_sbom: bool,
    /// Build host packages for this target distro only (repeatable) [default: every target].
    #[arg(long = "distro", value_name = "NAME")]
    distros: Vec<String>,
    /// Target distros file [default: the built-in builder/distros.yaml].
    #[arg(long = "distros", value_name = "FILE")]
    distros_file: Option<PathBuf>,
    /// Replace a target's mirrors for this run: `NAME=URL` (repeat for an rpm target's
    /// several repositories).
    #[arg(long = "mirror", value_name = "NAME=URL")]
    mirrors: Vec<String>,
}

/// The shared context and package settings that `package` and `build` both need.
pub fn prepare(
    args: &FetchArgs,
    skip_unchanged: bool,
) -> anyhow::Result<(BuildContext, PackageSettings)> {
    let cache_root = args
        .cache_dir
        .clone()
        .unwrap_or_else(BlobCache::default_root);
    let cache = BlobCache::open(&cache_root)
        .with_context(|| format!("failed to open the blob cache at {}", cache_root.display()))?;
    let retry = RetryPolicy::default();
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .build()
        .context("failed to set up the HTTP client")?;
    let mut registry_mirrors = pairs("--registry-mirror", &args.registry_mirrors)?;
    let mut asset_mirrors = pairs("--asset-mirror", &args.asset_mirrors)?;
    if let Some(path) = &args.mirrors_file {
        let file = MirrorsFile::load(path)?;
        registry_mirrors.extend(file.registries);
        asset_mirrors.extend(file.assets);
    }
    let context = BuildContext {
        registry: RegistryClient::new(RegistrySettings {
            insecure: args.insecure_registries.clone(),
            retry,
            mirrors: registry_mirrors,
        }),
        http,
        cache,
        retry,
        reporter: Arc::new(Bars::new()),
        asset_mirrors: by_longest_prefix(asset_mirrors),
    };
    let distros = target_distros(args.distros_file.as_deref(), &args.distros, &args.mirrors)?;
    let settings = PackageSettings {
        out_dir: args.out.clone(),
        arch: args.arch.clone(),
        concurrency: args.concurrency,
        compression: berth_formats::compression::Setting::new(
            args.compression,
            args.compression_level,
        )
        .map_err(|message| anyhow::anyhow!("--compression-level: {message}"))?,
        mtime: berth_formats::archive::source_date_epoch(),
        skip_unchanged,
        distros,
        selected_distros: (!args.distros.is_empty()).then(|| args.distros.clone()),
        sbom: !args.no_sbom,
    };
    Ok((context, settings))
}

/// `FROM=TO` arguments of `option`, split.
fn pairs(option: &str, arguments: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    arguments
        .iter()
        .map(|argument| match argument.split_once('=') {
            Some((from, to)) if !from.is_empty() && !to.is_empty() => {
                Ok((from.to_string(), to.to_string()))
            }
            _ => anyhow::bail!("{option} {argument}: expected FROM=TO"),
        })
        .collect()
}

/// The target distros selected from the distros file (or the built-in one).
pub fn target_distros(
    file: Option<&std::path::Path>,
    names: &[String],
    mirrors: &[String],
) -> anyhow::Result<Vec<Distro>> {
    let origin = file.map_or_else(
        || "builder/distros.yaml (built in)".to_string(),
        |path| path.display().to_string(),
    );
    Ok(DistrosFile::load(file)?.select(&origin, names, mirrors)?)
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}

/// `12.3 MiB`.
pub fn human_size(bytes: u64) -> String {
    indicatif::HumanBytes(bytes).to_string()
}
