//! `berth-build`: packages add-ons (`package`, `build`, `check`, `inspect`, `resolve`,
//! `versions`), publishes them (`upload`), and delivers them to nodes (`script`, `bundle`,
//! `serve`). Each command is a module of `commands/`; the work is in the library.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Prints to standard output; a reader that went away (`berth-build inspect … | head`) is not
/// an error.
macro_rules! show {
    ($($argument:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($argument)*);
    }};
}

/// As [`show!`], without a line break of its own.
macro_rules! show_text {
    ($($argument:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($argument)*);
    }};
}

mod commands;
mod progress;

/// Builds reproducible add-on packages from kURL-style add-on folders, publishes them, and
/// serves their installers.
#[derive(Parser)]
#[command(name = "berth-build", version, about)]
struct Cli {
    /// Show debug logs (`-vv` for everything).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Package one add-on folder (`addons/<name>/<version>`) into `<name>-<version>.tar.gz`.
    Package(PackageArgs),
    /// Package every add-on version under a folder, skipping those whose inputs are unchanged.
    #[command(
        after_help = "Output: a row per add-on version (built, unchanged or FAILED) and each failure's reason.\nExit status: 0 when every add-on packaged; 1 when one failed (the others are written)."
    )]
    Build(BuildArgs),
    /// Check every Manifest and install.sh under the paths; exit non-zero on any problem.
    #[command(
        after_help = "Exit status: 0 when every file is sound; 1 when one has a problem (each is named, with its line)."
    )]
    Check(CheckArgs),
    /// Show what a package holds: images, files, host packages.
    #[command(
        after_help = "Output: the package's images, files and host packages (-o json|yaml prints its package.json, the index the package carries)."
    )]
    Inspect(InspectArgs),
    /// Resolve the closure of host packages (apt or rpm) on one target distro and print it.
    Resolve(ResolveArgs),
    /// Publish a built dist folder to a store (a folder or S3) under `dist/<release>/`.
    Upload(commands::upload::UploadArgs),
    /// Write the repository's versions.json from its add-on folders, or check it is current.
    #[command(
        after_help = "Exit status: 0 when versions.json was written, or with --check is current; 1 when --check finds it stale (what differs is said)."
    )]
    Versions(commands::versions::VersionsArgs),
    /// Render an installer's install, join, upgrade and tasks scripts, with its lock.
    Script(commands::script::ScriptArgs),
    /// Write an installer's airgap bundle: scripts, berth, spec, lock and packages.
    Bundle(commands::bundle::BundleArgs),
    /// Serve installers over HTTP, as kurl.sh does: scripts, bundles and the release's files.
    Serve(commands::serve::ServeArgs),
    /// Make a vendor's signing key: PREFIX.key (private) and PREFIX.pub (for nodes).
    Keygen(commands::sign::KeygenArgs),
    /// Sign a dist: a `.sig` beside versions.json, every package's .sha256 and its bill of
    /// materials.
    Sign(commands::sign::SignArgs),
    /// Check a package's signed provenance, build its add-on again, and compare the bytes.
    #[command(
        after_help = "Exit status: 0 when the package built again is the same bytes; 1 when it differs or the statement's signature does not hold."
    )]
    VerifyProvenance(commands::provenance::VerifyProvenanceArgs),
}

#[derive(Args)]
struct ResolveArgs {
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

/// Settings shared by the commands that fetch and write packages.
#[derive(Args, Clone)]
pub struct FetchArgs {
    /// Where packages are written.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    no_format: berth_formats::output::NoOutputFormat,
    /// Architecture whose images are packaged (`amd64`, `arm64`, `arm/v7`).
    #[arg(long, default_value = "amd64")]
    arch: String,
    /// Blob cache shared across builds [default: ~/.cache/berth].
    #[arg(long, value_name = "DIR", env = "BERTH_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Blob downloads in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Registry (`host` or `host:port`) to reach over plain HTTP; loopback ones always are.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "BERTH_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    insecure_registries: Vec<String>,
    /// Fetch a registry's images from a mirror instead: `REGISTRY=HOST[:PORT]`
    /// (`registry.k8s.io=mirror.internal:5000`); the images keep their own names.
    #[arg(long = "registry-mirror", value_name = "REGISTRY=HOST")]
    registry_mirrors: Vec<String>,
    /// Fetch assets whose URL starts with a prefix from another: `PREFIX=REPLACEMENT`
    /// (`https://github.com/=http://mirror.internal/github/`); pins still apply.
    #[arg(long = "asset-mirror", value_name = "PREFIX=REPLACEMENT")]
    asset_mirrors: Vec<String>,
    /// A mirrors file: `registries:` (REGISTRY: HOST[:PORT]) and `assets:` (URL PREFIX:
    /// REPLACEMENT); --registry-mirror and --asset-mirror add to it.
    #[arg(long = "mirrors", value_name = "FILE", env = "BERTH_MIRRORS")]
    mirrors_file: Option<PathBuf>,
    /// How packages are compressed: gzip (what kURL-format consumers read) or zstd (several
    /// times faster to write and unpack); a node reads both.
    #[arg(long, default_value = "gzip", value_name = "gzip|zstd")]
    compression: berth_formats::compression::Compression,
    /// The compression level: gzip 0-9 (default 6), zstd 1-19 (default 3).
    #[arg(long, value_name = "LEVEL")]
    compression_level: Option<u32>,
    /// Leave the bill of materials out: no `sbom.cdx.json` inside the packages, no
    /// `<package>.cdx.json` beside them.
    #[arg(long)]
    no_sbom: bool,
    /// Build host packages for this target distro only (repeatable) [default: every target].
    #[arg(long = "distro", value_name = "NAME")]
    distros: Vec<String>,
    /// Target distros file [default: the built-in builder/distros.yaml].
    #[arg(long = "distros", value_name = "FILE")]
    distros_file: Option<PathBuf>,
    /// Replace a target's mirrors for this run: `NAME=URL` (repeat for an rpm target's
    /// several repositories).
    #[arg(long = "mirror", value_name = "NAME=URL")]
    mirrors: Vec<String>,
}

#[derive(Args)]
struct PackageArgs {
    /// The add-on folder, `addons/<name>/<version>`.
    addon: PathBuf,
    #[command(flatten)]
    fetch: FetchArgs,
}

#[derive(Args)]
struct BuildArgs {
    /// The `addons` folder, or the repository holding it.
    #[arg(default_value = "addons")]
    addons: PathBuf,
    #[command(flatten)]
    fetch: FetchArgs,
    /// Add-ons packaged at once [default: number of CPUs].
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Rebuild packages whose inputs are unchanged too.
    #[arg(long)]
    force: bool,
    /// Sign the dist with this private key (PEM) once built [default: the PEM text of
    /// $BERTH_SIGNING_KEY, if set; else unsigned].
    #[arg(long, value_name = "FILE", visible_alias = "key")]
    signing_key: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    /// Files or folders to check.
    #[arg(default_value = "addons")]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
struct InspectArgs {
    /// A `<name>-<version>.tar.gz` package.
    package: PathBuf,
    // `-o json|yaml`: the package index (`package.json`) as the package holds it.
    #[command(flatten)]
    output: berth_formats::output::OutputArgs,
    /// Print the package's software bill of materials (CycloneDX 1.5 JSON).
    #[arg(long, conflicts_with_all = ["output", "json"])]
    sbom: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match cli.verbose {
        0 => "warn,berth_build=info",
        1 => "info,berth_build=debug,berth::process=debug",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
    let result = match cli.command {
        Command::Package(args) => commands::package::run(args),
        Command::Build(args) => commands::build::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Resolve(args) => commands::resolve::run(args),
        Command::Upload(args) => commands::upload::run(args),
        Command::Versions(args) => commands::versions::run(args),
        Command::Keygen(args) => commands::sign::keygen(args),
        Command::Sign(args) => commands::sign::run(args),
        Command::VerifyProvenance(args) => commands::provenance::run(args),
        Command::Script(args) => commands::script::run(args),
        Command::Bundle(args) => commands::bundle::run(args),
        Command::Serve(args) => commands::serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // A closed standard error must not turn a failure into a panic.
            let _ = writeln!(
                std::io::stderr(),
                "{}",
                berth_formats::report::render(error.as_ref())
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory as _;

    use super::*;

    /// Every argument of every command, to the deepest subcommand, says what it is.
    #[test]
    fn every_argument_has_help() {
        let missing = berth_testgrid::undocumented(&Cli::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }

    /// docs/cli/ holds this program's reference as its definitions say it.
    #[test]
    fn the_reference_is_the_command_lines_own() {
        berth_testgrid::cli_docs::assert_reference(&Cli::command(), env!("CARGO_MANIFEST_DIR"));
    }
}
