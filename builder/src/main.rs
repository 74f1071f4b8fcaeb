//! `berth-build`: packages add-ons (`package`, `build`, `check`, `inspect`, `resolve`,
//! `versions`), publishes them (`upload`), and delivers them to nodes (`script`, `bundle`,
//! `serve`). Each command is a module of `commands/`; the work is in the library.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Package(commands::package::PackageArgs),
    /// Package every add-on version under a folder, skipping those whose inputs are unchanged.
    #[command(
        after_help = "Output: a row per add-on version (built, unchanged or FAILED) and each failure's reason.\nExit status: 0 when every add-on packaged; 1 when one failed (the others are written)."
    )]
    Build(commands::build::BuildArgs),
    /// Check every Manifest and install.sh under the paths; exit non-zero on any problem.
    #[command(
        after_help = "Exit status: 0 when every file is sound; 1 when one has a problem (each is named, with its line)."
    )]
    Check(commands::check::CheckArgs),
    /// Show what a package holds: images, files, host packages.
    #[command(
        after_help = "Output: the package's images, files and host packages (-o json|yaml prints its package.json, the index the package carries)."
    )]
    Inspect(commands::inspect::InspectArgs),
    /// Resolve the closure of host packages (apt or rpm) on one target distro and print it.
    Resolve(commands::resolve::ResolveArgs),
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
        let missing = berth_testkit::undocumented(&Cli::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }

    /// docs/cli/ holds this program's reference as its definitions say it.
    #[test]
    fn the_reference_is_the_command_lines_own() {
        berth_testkit::cli_docs::assert_reference(&Cli::command(), env!("CARGO_MANIFEST_DIR"));
    }
}
