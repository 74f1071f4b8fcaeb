use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth_build::deliver::scripts::{self, SCRIPTS, ScriptContext};
use berth_formats::spec::InstallerSpec;

use super::release::ReleaseArgs;

#[derive(clap::Args)]
pub struct ScriptArgs {
    /// The Installer spec.
    #[arg(long, value_name = "FILE")]
    spec: PathBuf,
    /// The URL nodes download packages and the berth binary from (the release's folder).
    #[arg(long, value_name = "URL")]
    dist_url: String,
    /// Where the scripts are written.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    no_format: berth_formats::output::NoOutputFormat,
    /// Sign the scripts' lock with this private key (PEM), and have them name its public key
    /// as the one the node checks the dist with [default: the PEM text of
    /// $BERTH_SIGNING_KEY, if set; else unsigned].
    #[arg(long, value_name = "FILE", visible_alias = "key")]
    signing_key: Option<PathBuf>,
    #[command(flatten)]
    release: ReleaseArgs,
}

pub fn run(args: ScriptArgs) -> anyhow::Result<ExitCode> {
    let spec = InstallerSpec::load(&args.spec)?;
    let spec_text = fs_err::read_to_string(&args.spec)?;
    let signing_key =
        berth_build::publish::sign::load_key(args.signing_key.as_deref())?.map(std::sync::Arc::new);
    let runtime = super::runtime()?;
    let (lock, berth_digests) = runtime.block_on(async {
        let release = args.release.open().await?;
        let lock = release.lock(&spec).await?;
        anyhow::Ok((lock, release.berth_digests().await?))
    })?;
    if let Some(key) = &signing_key {
        let release = runtime.block_on(args.release.open())?;
        runtime.block_on(berth_build::publish::sign::check_store(
            &release, &lock, key, None,
        ))?;
    }
    let id = spec.id();
    let context = ScriptContext {
        scripts_url: format!("<server>/{id}"),
        id,
        dist_url: args.dist_url.clone(),
        spec: spec_text,
        lock,
        berth_digests,
        signing_key,
    };
    fs_err::create_dir_all(&args.out)?;
    for script in SCRIPTS {
        let text = scripts::render(script, &context)?;
        let path = args.out.join(script);
        fs_err::write(&path, text)
            .with_context(|| format!("failed to write {}", path.display()))?;
        show!("{}", path.display());
    }
    for addon in &context.lock.addons {
        eprintln!("{} {}  {}", addon.name, addon.version, addon.sha256);
    }
    Ok(ExitCode::SUCCESS)
}
