use std::path::PathBuf;

use berth_build::publish::release::Release;
use berth_build::publish::store::{Store, StoreLocation, release_key};
use berth_formats::release::{berth_binary_file, checksum_file};

use super::upload::{StoreArgs, default_arch};

/// Which release of which store a command reads.
#[derive(clap::Args, Clone)]
pub struct ReleaseArgs {
    /// The dist to read: the folder `berth-build build --out` wrote; or, with --release, the
    /// store `upload` wrote to (a folder, or `s3://bucket/prefix`). `--from` is its older name.
    #[arg(
        long = "dist",
        alias = "from",
        value_name = "DIR|s3://BUCKET/PREFIX",
        default_value = "dist"
    )]
    pub dist: String,
    /// The release within the store (`dist/<release>/`); without it the store is one dist.
    #[arg(long)]
    pub release: Option<String>,
    /// Read `staging/<release>/` instead of `dist/<release>/`.
    #[arg(long, requires = "release")]
    pub staging: bool,
    /// The node binary to offer where the release has none [default: the portable build
    /// (scripts/portable.sh) when there is one, else `berth` beside this program].
    #[arg(long, value_name = "FILE")]
    pub berth: Option<PathBuf>,
    /// Offer a default node binary (the one beside this program) even if it needs a newer
    /// glibc than the oldest target distro has (2.17), rather than refusing it; a --berth FILE
    /// that does is only warned of.
    #[arg(long)]
    pub allow_new_glibc: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

impl ReleaseArgs {
    pub async fn open(&self) -> anyhow::Result<Release> {
        let location = StoreLocation::parse(&self.dist)?;
        let store = Store::open(&location, &self.store.settings()).await?;
        let prefix = match &self.release {
            Some(release) => release_key(self.staging, release, ""),
            None => String::new(),
        };
        let mut release = Release::new(store, prefix, None);
        // The local binary stands in only where the release has none for this arch: one it
        // would never ship is neither looked for nor checked.
        let arch = default_arch();
        let own = release
            .store
            .read(&release.key(&checksum_file(&berth_binary_file(arch))))
            .await?;
        if own.is_none() {
            release.local_berth =
                super::node_binary::choose(self.berth.clone(), self.allow_new_glibc)?
                    .map(|path| (arch.to_string(), path));
        }
        Ok(release)
    }
}
