use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use berth_build::publish::store::{Put, S3Settings, Store, StoreLocation};
use berth_build::publish::upload::{UploadSettings, upload};

/// Where and how to reach a store; shared by the commands that read or write one.
#[derive(clap::Args, Clone)]
pub struct StoreArgs {
    /// S3 endpoint other than AWS's, e.g. `http://127.0.0.1:8333`.
    #[arg(long, env = "BERTH_S3_ENDPOINT")]
    pub endpoint: Option<String>,
    /// S3 region [default: the standard AWS chain's, else us-east-1].
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Address buckets as `endpoint/bucket` (MinIO, SeaweedFS, Ceph).
    #[arg(long)]
    pub path_style: bool,
}

impl StoreArgs {
    pub fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            path_style: self.path_style,
            ..S3Settings::default()
        }
    }
}

#[derive(clap::Args)]
pub struct UploadArgs {
    /// The built dist folder (`berth-build build --out DIR`).
    dir: PathBuf,
    /// The store: `s3://bucket/prefix`, or a folder.
    #[arg(long)]
    to: String,
    /// The release the files belong to (`dist/<release>/…`).
    #[arg(long)]
    release: String,
    /// Publish under `staging/<release>/` instead of `dist/<release>/`.
    #[arg(long)]
    staging: bool,
    /// The node binary to publish as `bin/berth-linux-<arch>` [default: the portable build
    /// (scripts/portable.sh) when there is one, else `berth` beside this program].
    #[arg(long, value_name = "FILE")]
    berth: Option<PathBuf>,
    /// Publish a default node binary (the one beside this program) even if it needs a newer
    /// glibc than the oldest target distro has (2.17), rather than refusing it; a --berth FILE
    /// that does is only warned of.
    #[arg(long)]
    allow_new_glibc: bool,
    /// The architecture of the node binary.
    #[arg(long, default_value = default_arch())]
    berth_arch: String,
    /// Files larger than this many MiB go up in parts of this size (at least 5).
    #[arg(long, default_value_t = 16)]
    part_size: u64,
    /// Files (and parts of one file) put at once.
    #[arg(long, short = 'j', default_value_t = 4)]
    jobs: usize,
    /// Give up after this long in all (`1h`, `90m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = berth_formats::duration::a_second_to_a_day)]
    timeout: Duration,
    #[command(flatten)]
    store: StoreArgs,
}

/// This machine's architecture as images and binaries name it.
pub const fn default_arch() -> &'static str {
    match std::env::consts::ARCH.as_bytes() {
        b"aarch64" => "arm64",
        _ => "amd64",
    }
}

pub fn run(args: UploadArgs) -> anyhow::Result<ExitCode> {
    if !args.dir.is_dir() {
        bail!(
            "{} is not a folder; build one with `berth-build build addons --out {}`",
            args.dir.display(),
            args.dir.display()
        );
    }
    let location = StoreLocation::parse(&args.to)?;
    let settings = S3Settings {
        part_size: args.part_size * 1024 * 1024,
        concurrency: args.jobs,
        ..args.store.settings()
    };
    let berth = super::node_binary::choose(args.berth.clone(), args.allow_new_glibc)?;
    let upload_settings = UploadSettings {
        release: args.release.clone(),
        staging: args.staging,
        berth: berth.map(|path| (path, args.berth_arch.clone())),
        jobs: args.jobs,
    };
    let started = Instant::now();
    let limit = args.timeout;
    let uploaded = super::runtime()?.block_on(async {
        let store = Store::open(&location, &settings).await?;
        tokio::time::timeout(limit, upload(&store, &args.dir, &upload_settings))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the upload to {} did not finish within {} (--timeout)",
                    args.to,
                    humantime::format_duration(args.timeout)
                )
            })?
            .with_context(|| format!("failed to upload {} to {}", args.dir.display(), args.to))
    })?;
    let mut written = 0;
    let mut bytes = 0;
    for file in &uploaded {
        let what = match file.put {
            Put::Unchanged => "unchanged".to_string(),
            Put::Written => "written".to_string(),
            Put::WrittenInParts(parts) => format!("written in {parts} parts"),
        };
        if file.put != Put::Unchanged {
            written += 1;
            bytes += file.size;
        }
        show!(
            "{:<60}  {:>10}  {what}",
            file.key,
            super::human_size(file.size)
        );
    }
    eprintln!(
        "{} files, {written} written ({}), {} unchanged, in {:.1}s",
        uploaded.len(),
        super::human_size(bytes),
        uploaded.len() - written,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
