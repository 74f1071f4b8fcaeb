use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use berth_build::serve::{Server, router};
use berth_formats::spec::InstallerSpec;

use super::release::ReleaseArgs;
use super::upload::default_arch;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8800")]
    listen: String,
    /// The URL clients reach this server at [default: http://<listen>].
    #[arg(long)]
    public_url: Option<String>,
    /// Specs to serve from the start, as if posted (repeatable).
    #[arg(long = "spec", value_name = "FILE")]
    specs: Vec<PathBuf>,
    /// The node architecture bundles are made for.
    #[arg(long, default_value = default_arch())]
    arch: String,
    #[command(flatten)]
    release: ReleaseArgs,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.listen))
        .trim_end_matches('/')
        .to_string();
    let mut installers = HashMap::new();
    for path in &args.specs {
        let spec = InstallerSpec::load(path)?;
        installers.insert(spec.id(), fs_err::read_to_string(path)?);
        eprintln!("{public_url}/{}  ({})", spec.id(), path.display());
    }
    super::runtime()?.block_on(async {
        let server = Arc::new(Server {
            release: Arc::new(args.release.open().await?),
            public_url: public_url.clone(),
            bundle_arch: args.arch.clone(),
            installers: Mutex::new(installers),
        });
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("failed to listen on {}", args.listen))?;
        eprintln!("serving {} at {public_url}", args.release.from);
        axum::serve(listener, router(server))
            .await
            .context("the server stopped")
    })?;
    Ok(ExitCode::SUCCESS)
}
