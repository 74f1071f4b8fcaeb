//! `berth trust list|remove`: the signing keys this node keeps, for every dist (the
//! operator's, `/etc/berth/trusted-keys/*.pub`) and for one dist's origin (kept by an install
//! given `--trust-key`, or by a served script), and taking one away.

use std::process::ExitCode;

use berth::dist::trust::Trust;
use berth::node::layout::Layout;

use crate::commands::RootArgs;

#[derive(clap::Subcommand)]
pub enum TrustCommand {
    /// List the kept keys: fingerprint, the dist origin each is kept for, its file.
    List(ListArgs),
    /// Stop trusting a key: remove it wherever it is kept, or for one origin only.
    Remove(RemoveArgs),
}

#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    root: RootArgs,
}

#[derive(clap::Args)]
pub struct RemoveArgs {
    /// The key's fingerprint, as `berth trust list` shows it (`sha256:…`).
    fingerprint: String,
    /// Only the key kept for this origin (`https://host:port`, as the list shows it).
    #[arg(long)]
    origin: Option<String>,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(command: TrustCommand) -> anyhow::Result<ExitCode> {
    match command {
        TrustCommand::List(args) => {
            let kept = Trust::kept(&Layout::new(&args.root.root))?;
            if kept.is_empty() {
                say!(
                    "berth: no key is kept on this node: installs check digests alone unless given --trust-key"
                );
            }
            for key in kept {
                show!(
                    "{}  {}  {}",
                    key.fingerprint,
                    key.origin.as_deref().unwrap_or("every dist"),
                    key.path.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        TrustCommand::Remove(args) => {
            let kept = Trust::kept(&Layout::new(&args.root.root))?;
            let matching: Vec<_> = kept
                .iter()
                .filter(|key| key.fingerprint == args.fingerprint)
                .filter(|key| {
                    args.origin
                        .as_ref()
                        .is_none_or(|origin| key.origin.as_deref() == Some(origin.as_str()))
                })
                .collect();
            if matching.is_empty() {
                anyhow::bail!(
                    "no kept key has the fingerprint {}{}\nhint: `berth trust list` shows the kept keys",
                    args.fingerprint,
                    args.origin
                        .as_ref()
                        .map_or(String::new(), |origin| format!(" for {origin}"))
                );
            }
            for key in matching {
                fs_err::remove_file(&key.path)?;
                say!(
                    "berth: removed {} ({})",
                    key.path.display(),
                    key.origin.as_deref().unwrap_or("every dist")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
