//! `berth backup`: the cluster's state on a control-plane node in one archive; `--verify`
//! checks an archive without restoring it.

use std::path::PathBuf;
use std::process::ExitCode;

use berth::backup::{self, BackupRequest, Signature};
use berth::node::layout::Layout;
use berth_formats::backup::Part;

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct BackupArgs {
    /// Where to write the archive (a new file; made 0600). Default:
    /// /var/backups/berth/backup-<time>.tar.zst (kept by `berth reset`).
    #[arg(long, short = 'o', value_name = "FILE", conflicts_with = "verify")]
    output: Option<PathBuf>,
    /// Sign the archive's manifest with this key (PKCS#8 PEM, as `berth-build keygen` writes).
    #[arg(long, value_name = "FILE", conflicts_with = "verify")]
    signing_key: Option<PathBuf>,
    /// Where etcd answers its clients.
    #[arg(long, value_name = "URL", default_value = backup::etcd::DEFAULT_ENDPOINT)]
    etcd_endpoint: String,
    /// Check this archive through (every file against its manifest) and change nothing.
    #[arg(long, value_name = "FILE")]
    verify: Option<PathBuf>,
    /// With --verify: the archive must be signed by one of these keys (public, PEM).
    #[arg(long = "trust-key", value_name = "FILE", requires = "verify")]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(args: BackupArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.verify {
        return verify(path, &args.trust_keys);
    }
    let layout = Layout::new(args.root.existing()?);
    let signing_key = match &args.signing_key {
        Some(path) => {
            let text = berth_formats::files::read_to_string_at_most(path, 64 * 1024)
                .map_err(|error| anyhow::anyhow!("failed to read {}: {error}", path.display()))?;
            Some(berth_formats::signature::SigningKey::from_pem(
                &path.display().to_string(),
                &text,
            )?)
        }
        None => None,
    };
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| backup::default_output(&layout));
    let taken = backup::take(&BackupRequest {
        layout,
        output,
        etcd_endpoint: args.etcd_endpoint.clone(),
        signing_key,
    })?;
    say!("berth: backed up {}", summary(&taken.manifest));
    say!(
        "berth: {} ({} bytes, readable by root alone){}",
        taken.path.display(),
        taken.bytes,
        if args.signing_key.is_some() {
            ", its manifest signed"
        } else {
            ""
        }
    );
    show!("{}", taken.path.display());
    Ok(ExitCode::SUCCESS)
}

fn verify(path: &std::path::Path, trust_keys: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut keys = Vec::new();
    for key in trust_keys {
        let text = berth_formats::files::read_to_string_at_most(key, 64 * 1024)
            .map_err(|error| anyhow::anyhow!("failed to read {}: {error}", key.display()))?;
        keys.push(berth_formats::signature::PublicKey::from_pem(
            &key.display().to_string(),
            &text,
        )?);
    }
    let verified = backup::verify(path, &keys)?;
    let manifest = &verified.manifest;
    show!(
        "{}: whole: {}; made by berth {} on {} at {}",
        path.display(),
        summary(manifest),
        manifest.berth_version,
        manifest.node,
        manifest.created
    );
    show!(
        "{}",
        match verified.signature {
            Signature::Trusted(fingerprint) => format!("signed by {fingerprint}"),
            Signature::NotChecked =>
                "signed; not checked (give --trust-key FILE to check who signed it)".to_string(),
            Signature::Unsigned =>
                "not signed: its digests show it is whole, not who made it".to_string(),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `312 files, 4.1 MiB: the etcd snapshot (2.0 MiB), certificates and keys (22 files), …`
fn summary(manifest: &berth_formats::backup::BackupManifest) -> String {
    let mut parts: std::collections::BTreeMap<Part, (usize, u64)> = Default::default();
    for file in &manifest.files {
        let entry = parts.entry(file.part).or_default();
        entry.0 += 1;
        entry.1 += file.size;
    }
    let total: u64 = manifest.files.iter().map(|file| file.size).sum();
    let described: Vec<String> = parts
        .iter()
        .map(|(part, (count, bytes))| match part {
            Part::Etcd => format!("{} ({bytes} bytes)", part.describe()),
            _ => format!("{} ({count} files)", part.describe()),
        })
        .collect();
    format!(
        "{} files, {total} bytes: {}",
        manifest.files.len(),
        described.join(", ")
    )
}
