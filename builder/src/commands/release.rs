use std::path::PathBuf;

use berth_build::publish::release::Release;
use berth_build::publish::store::{Store, StoreLocation, release_key};

use super::upload::{StoreArgs, default_arch, sibling_berth};

/// Which release of which store a command reads.
#[derive(clap::Args, Clone)]
pub struct ReleaseArgs {
    /// The store: a folder (a dist folder `berth-build build` wrote, or one `upload` wrote
    /// to), or `s3://bucket/prefix`.
    #[arg(long, default_value = "dist")]
    pub from: String,
    /// The release within the store (`dist/<release>/`); without it the store is one dist.
    #[arg(long)]
    pub release: Option<String>,
    /// Read `staging/<release>/` instead of `dist/<release>/`.
    #[arg(long, requires = "release")]
    pub staging: bool,
    /// The node binary to offer where the release has none [default: `berth` beside this
    /// program, when there is one].
    #[arg(long, value_name = "FILE")]
    pub berth: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

impl ReleaseArgs {
    pub async fn open(&self) -> anyhow::Result<Release> {
        let location = StoreLocation::parse(&self.from)?;
        let store = Store::open(&location, &self.store.settings()).await?;
        let prefix = match &self.release {
            Some(release) => release_key(self.staging, release, ""),
            None => String::new(),
        };
        Ok(Release::new(
            store,
            prefix,
            self.berth
                .clone()
                .or_else(sibling_berth)
                .map(|path| (default_arch().to_string(), path)),
        ))
    }
}
