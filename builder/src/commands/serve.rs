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
    /// Address to listen on (`:8800` is every address, as `0.0.0.0:8800`; with either, give
    /// --public-url).
    #[arg(long, default_value = "127.0.0.1:8800")]
    listen: String,
    /// Sign each bundle's versions.json and lock with this private key (PEM) [default: the
    /// PEM text of $BERTH_SIGNING_KEY, if set; else unsigned].
    #[arg(long, value_name = "FILE", visible_alias = "key")]
    signing_key: Option<PathBuf>,
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
    /// The most installers kept. When they are all kept, the one unused longest gives way to a
    /// new one if it has gone unused for --installer-idle; else a post is refused (507).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    max_installers: u64,
    /// How long an installer must go unused (no script, bundle or post of it) before a full
    /// store lets a new one take its place (`30d`, `12h`).
    #[arg(long, default_value = "30d", value_name = "DURATION", value_parser = berth_formats::duration::a_second_to_ten_years)]
    installer_idle: Duration,
    /// New installers one client address may create in an hour; more are answered 429 with
    /// Retry-After.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    installers_per_client: u64,
    /// Connections served at once; more wait to be accepted (1 to 65,536).
    #[arg(long, default_value_t = ConnectionLimits::default().max_connections as u64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_connections: u64,
    /// Seconds a client may take to send a request's head before it is cut off (1 to 3,600).
    #[arg(long, default_value_t = ConnectionLimits::default().header_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// Bundles streamed at once; one more is answered 503 with Retry-After (1 to 1,024).
    #[arg(long, default_value_t = DEFAULT_BUNDLES as u64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    max_bundles: u64,
    /// The node architecture bundles are made for.
    #[arg(long, default_value = default_arch())]
    arch: String,
    #[command(flatten)]
    release: ReleaseArgs,
}

/// `--listen` as it is bound: `:PORT` is every IPv4 address, as Go's servers read it.
fn listen_address(listen: &str) -> String {
    match listen.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => listen.to_string(),
    }
}

/// Whether `listen` binds every address (`0.0.0.0:PORT`, `[::]:PORT`), so it names no host a
/// node could reach.
fn is_every_address(listen: &str) -> bool {
    listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|address| address.ip().is_unspecified())
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let signing_key = berth_build::publish::sign::load_key(args.signing_key.as_deref())?;
    let listen = listen_address(&args.listen);
    let public_url = match &args.public_url {
        Some(url) => url.clone(),
        None if is_every_address(&listen) => anyhow::bail!(
            "--listen {} takes every address, so the URL nodes reach this server at cannot be told\nhint: give it, as --public-url http://HOST:{}",
            args.listen,
            listen.rsplit(':').next().unwrap_or("PORT")
        ),
        None => format!("http://{listen}"),
    }
    .trim_end_matches('/')
    .to_string();
    let installers_dir = match &args.installers {
        Some(dir) => dir.clone(),
        None => dirs::state_dir()
            .context("no state folder for posted installers; give --installers DIR")?
            .join("berth/installers"),
    };
    let installers = InstallerStore::open(&installers_dir, args.max_installers as usize)
        .with_context(|| format!("failed to open {}", installers_dir.display()))?
        .with_share(args.installers_per_client as usize)
        .with_idle(args.installer_idle);
    let limits = ConnectionLimits {
        max_connections: args.max_connections as usize,
        header_timeout: Duration::from_secs(args.header_timeout),
    };
    super::runtime()?.block_on(async {
        let release = args.release.open().await?;
        // A --dist that names no dist (a typo, an empty folder) is refused now, not answered
        // 404 request after request.
        release.versions().await.with_context(|| {
            format!(
                "{} holds no dist to serve\nhint: give --dist the folder `berth-build build --out` wrote, or s3://BUCKET/PREFIX (with --release)",
                args.release.dist
            )
        })?;
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
        let mut server = Server::new(
            Arc::new(release),
            public_url.clone(),
            args.arch.clone(),
            installers,
            args.max_bundles as usize,
        );
        server.signing_key = signing_key.map(Arc::new);
        let server = Arc::new(server);
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("failed to listen on {listen}"))?;
        eprintln!(
            "serving {} at {public_url} ({} installers kept in {})",
            args.release.dist,
            server.installers.len(),
            installers_dir.display()
        );
        serve(listener, router(server), limits)
            .await
            .context("the server stopped")
    })?;
    Ok(ExitCode::SUCCESS)
}
