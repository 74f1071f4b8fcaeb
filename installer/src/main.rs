//! `berth`, the node installer. For now it verifies and unpacks add-on packages; the install
//! engine (plan, images, hooks, state) builds on this.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use berth_formats::Sha256Digest;
use berth_formats::package_index::{checksum_path, parse_checksum_file};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "berth", version, about = "The Berth node installer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Verify a package against its `.sha256` file and unpack it, refusing unsafe paths.
    Unpack {
        /// A `<name>-<version>.tar.gz` package with its `.sha256` beside it.
        package: PathBuf,
        /// Folder to unpack into.
        #[arg(long)]
        to: PathBuf,
    },
}

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Unpack { package, to } => unpack(&package, &to),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn unpack(package: &PathBuf, to: &PathBuf) -> anyhow::Result<()> {
    let checksum_path = checksum_path(package);
    let text = fs_err::read_to_string(&checksum_path)?;
    let expected = parse_checksum_file(&text)
        .with_context(|| format!("{} is not a sha256sum line", checksum_path.display()))?;
    let actual = Sha256Digest::of_reader(fs_err::File::open(package)?)?;
    if actual != expected {
        bail!(
            "{} does not match its checksum: expected {expected}, found {actual}",
            package.display()
        );
    }
    fs_err::create_dir_all(to)?;
    let written = berth_formats::archive::extract(fs_err::File::open(package)?, to)
        .with_context(|| format!("failed to unpack {}", package.display()))?;
    println!("unpacked {} entries into {}", written.len(), to.display());
    Ok(())
}
