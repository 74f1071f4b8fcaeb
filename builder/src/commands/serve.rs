use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use berth_build::deliver::installers::InstallerStore;
use berth_build::deliver::serve::{ConnectionLimits, DEFAULT_BUNDLES, Server, router, serve};
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
    /// Where posted installers are kept (`<id>.yaml` each), so their URLs outlive a restart
    /// [default: `$XDG_STATE_HOME/berth/installers`, `~/.local/state/berth/installers`].
    #[arg(long, value_name = "DIR")]
    installers: Option<PathBuf>,
    /// The most installers kept; a post past it is refused (507).
    #[arg(long, default_value_t = 10_000)]
    max_installers: usize,
    /// Connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = ConnectionLimits::default().max_connections)]
    max_connections: usize,
    /// Seconds a client may take to send a request's head before it is cut off.
    #[arg(long, default_value_t = ConnectionLimits::default().header_timeout.as_secs())]
    header_timeout: u64,
    /// Bundles streamed at once; one more is answered 503 with Retry-After.
    #[arg(long, default_value_t = DEFAULT_BUNDLES)]
    max_bundles: usize,
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
    let installers_dir = match &args.installers {
        Some(dir) => dir.clone(),
        None => dirs::state_dir()
            .context("no state folder for posted installers; give --installers DIR")?
            .join("berth/installers"),
    };
    let installers = InstallerStore::open(&installers_dir, args.max_installers)
        .with_context(|| format!("failed to open {}", installers_dir.display()))?;
    let limits = ConnectionLimits {
        max_connections: args.max_connections.max(1),
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
    };
    super::runtime()?.block_on(async {
        let release = args.release.open().await?;
        // Each spec given is kept with its lock, as a posted one is.
        for path in &args.specs {
            let spec = InstallerSpec::load(path)?;
            let id = spec.id();
            let lock = release
                .lock(&spec)
                .await
                .with_context(|| format!("failed to resolve {}", path.display()))?;
            installers
                .insert(fs_err::read_to_string(path)?, spec, lock)
                .with_context(|| format!("failed to keep {}", path.display()))?;
            eprintln!("{public_url}/{id}  ({})", path.display());
        }
        let server = Arc::new(Server::new(
            Arc::new(release),
            public_url.clone(),
            args.arch.clone(),
            installers,
            args.max_bundles.max(1),
        ));
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("failed to listen on {}", args.listen))?;
        eprintln!(
            "serving {} at {public_url} ({} installers kept in {})",
            args.release.from,
            server.installers.len(),
            installers_dir.display()
        );
        serve(listener, router(server), limits)
            .await
            .context("the server stopped")
    })?;
    Ok(ExitCode::SUCCESS)
}
