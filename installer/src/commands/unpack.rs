use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth::dist::unpack::unpack;
use berth_formats::package_index::{checksum_path, parse_checksum_file, read_from_archive};

#[derive(clap::Args)]
pub struct UnpackArgs {
    /// A `<name>-<version>.tar.gz` package with its `.sha256` beside it.
    package: PathBuf,
    /// Folder to unpack into; the add-on lands in `addons/<name>/<version>/` below it.
    #[arg(long)]
    to: PathBuf,
    /// A vendor's public key (PEM) the `.sha256` must be signed with (its `.sig` beside it),
    /// besides those kept in /etc/berth/trusted-keys/ (repeatable).
    #[arg(long = "trust-key", value_name = "FILE", visible_alias = "key")]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    root: crate::commands::RootArgs,
}

pub fn run(args: UnpackArgs) -> anyhow::Result<ExitCode> {
    let trust = berth::dist::trust::Trust::load(
        &berth::node::layout::Layout::new(&args.root.root),
        &args.trust_keys,
        None,
    )?;
    say!("berth: {}", trust.describe());
    let checksum_path = checksum_path(&args.package);
    let text = berth_formats::files::read_to_string_at_most(&checksum_path, 64 << 10)
        .with_context(|| format!("failed to read {}", checksum_path.display()))?;
    trust.check_file(&checksum_path, text.as_bytes())?;
    let file_name = args
        .package
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let expected = parse_checksum_file(&text, &file_name)
        .with_context(|| format!("{} is refused", checksum_path.display()))?;
    let index = read_from_archive(fs_err::File::open(&args.package)?, None)
        .with_context(|| format!("{}", args.package.display()))?
        .index;
    let staging = args.to.join(format!(".unpack-{}", std::process::id()));
    unpack(
        &args.package,
        &expected,
        (&index.name, &index.version),
        &staging,
        &args.to,
    )?;
    show!(
        "unpacked {} {} into {}",
        index.name,
        index.version,
        args.to
            .join("addons")
            .join(&index.name)
            .join(&index.version)
            .display()
    );
    Ok(ExitCode::SUCCESS)
}
