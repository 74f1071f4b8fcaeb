use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use berth_build::deliver::bundle;
use berth_formats::spec::InstallerSpec;

use super::release::ReleaseArgs;
use super::upload::default_arch;

#[derive(clap::Args)]
pub struct BundleArgs {
    /// The Installer spec.
    #[arg(long, value_name = "FILE")]
    spec: PathBuf,
    /// The bundle to write (`.tar.gz`; `.tar.zst` with `--compression zstd`).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    no_format: berth_formats::output::NoOutputFormat,
    /// How the bundle is compressed: gzip (`tar xzf` reads it anywhere) or zstd (several times
    /// faster to write and to read; extracting its scripts by hand needs zstd on the node).
    #[arg(long, default_value = "gzip", value_name = "gzip|zstd")]
    compression: berth_formats::compression::Compression,
    /// The node architecture the bundle is for.
    #[arg(long, default_value = default_arch())]
    arch: String,
    /// Sign the bundle's versions.json and lock with this private key (PEM) [default: the
    /// PEM text of $BERTH_SIGNING_KEY, if set; else unsigned].
    #[arg(long, value_name = "FILE", visible_alias = "key")]
    signing_key: Option<PathBuf>,
    #[command(flatten)]
    release: ReleaseArgs,
}

pub fn run(args: BundleArgs) -> anyhow::Result<ExitCode> {
    let named = berth_formats::compression::Compression::of_file_name(&args.out.to_string_lossy());
    if named.is_some_and(|named| named != args.compression) {
        anyhow::bail!(
            "{} names another compression than --compression {}; name it `…{}`",
            args.out.display(),
            args.compression,
            args.compression.tar_suffix()
        );
    }
    let spec = InstallerSpec::load(&args.spec)?;
    let spec_text = fs_err::read_to_string(&args.spec)?;
    let signing_key =
        berth_build::publish::sign::load_key(args.signing_key.as_deref())?.map(Arc::new);
    let started = Instant::now();
    let directory = match args.out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs_err::create_dir_all(&directory)?;
    // Written beside its destination and renamed into place only when whole; readable by all
    // as `tar czf` leaves it (a bundle is shipped, not private).
    let temporary = {
        use std::os::unix::fs::PermissionsExt as _;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o644))
            .tempfile_in(&directory)
            .with_context(|| format!("failed to write in {}", directory.display()))?
    };
    let lock = super::runtime()?.block_on(async {
        let release = Arc::new(args.release.open().await?);
        let mut plan =
            bundle::prepare(&release, &spec, None, &spec_text, &args.arch, "", "").await?;
        plan.signing_key = signing_key;
        plan.compression = args.compression;
        let file = tokio::fs::File::from_std(temporary.reopen()?);
        bundle::write(release, &plan, file)
            .await
            .with_context(|| format!("failed to write {}", args.out.display()))?;
        anyhow::Ok(plan.lock)
    })?;
    temporary
        .persist(&args.out)
        .with_context(|| format!("failed to write {}", args.out.display()))?;
    let size = fs_err::metadata(&args.out)?.len();
    for addon in &lock.addons {
        eprintln!("{} {}", addon.name, addon.version);
    }
    show!("{}", args.out.display());
    eprintln!(
        "{} ({}) in {:.1}s",
        args.out.display(),
        super::human_size(size),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
