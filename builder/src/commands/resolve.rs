use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use berth_build::fetch::cache::BlobCache;
use berth_build::fetch::download::RetryPolicy;
use berth_build::host_packages::distros::Format;
use berth_build::host_packages::fetch::Fetcher;
use clap::Args;

#[derive(Args)]
pub struct ResolveArgs {
    /// The target distro (a name from the distros file, e.g. `debian-12`).
    #[arg(long)]
    distro: String,
    /// Packages to resolve.
    #[arg(required = true)]
    packages: Vec<String>,
    /// Target distros file [default: the built-in builder/distros.yaml].
    #[arg(long, value_name = "FILE")]
    distros: Option<PathBuf>,
    /// Replace a target's mirrors for this run: `NAME=URL` (repeat for an rpm target's
    /// several repositories).
    #[arg(long = "mirror", value_name = "NAME=URL")]
    mirrors: Vec<String>,
    /// Blob cache shared across builds [default: ~/.cache/berth].
    #[arg(long, value_name = "DIR", env = "BERTH_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Also print, after a `--` line, the packages taken as present on every host.
    #[arg(long)]
    show_base: bool,
}

/// Prints `name version` of each package of the closure (apt or rpm, by the target's format)
/// on stdout, timings on stderr.
pub fn run(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    let distro = super::target_distros(
        args.distros.as_deref(),
        std::slice::from_ref(&args.distro),
        &args.mirrors,
    )?
    .remove(0);
    let cache_root = args.cache_dir.unwrap_or_else(BlobCache::default_root);
    let cache = BlobCache::open(&cache_root)
        .with_context(|| format!("failed to open the blob cache at {}", cache_root.display()))?;
    let http = reqwest::Client::new();
    let fetcher = Fetcher {
        http: &http,
        cache: &cache,
        retry: RetryPolicy::default(),
    };
    let runtime = super::runtime()?;
    let started = Instant::now();
    let (indexed, read, closure, base) = match distro.format {
        Format::Deb => {
            let index = runtime.block_on(fetcher.index(&distro.name, &distro.apt_source()?))?;
            let read = started.elapsed();
            let base = index.base(&distro.base);
            let closure = index.resolve(&distro.name, &args.packages, &base)?;
            let closure: Vec<(String, String)> = closure
                .iter()
                .map(|package| (package.name.clone(), package.version.to_string()))
                .collect();
            (index.len(), read, closure, base)
        }
        Format::Rpm => {
            let index = runtime.block_on(fetcher.rpm_index(&distro.name, &distro.rpm_source()?))?;
            let read = started.elapsed();
            let base = index.base(&distro.base);
            let closure = index.resolve(&distro.name, &args.packages, &base)?;
            let closure: Vec<(String, String)> = closure
                .iter()
                .map(|package| (package.name.clone(), package.evr.to_string()))
                .collect();
            (index.len(), read, closure, base)
        }
    };
    let resolved = started.elapsed() - read;
    for (name, version) in &closure {
        show!("{name} {version}");
    }
    if args.show_base {
        show!("--");
        for name in &base {
            show!("{name}");
        }
    }
    eprintln!(
        "{}: {} packages indexed in {:.2}s, closure of {} resolved in {:.3}s",
        distro.name,
        indexed,
        read.as_secs_f64(),
        closure.len(),
        resolved.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
