//! `berth backup`: the cluster's state on a control-plane node in one archive, kept in a file
//! or sent to S3; `--verify` checks an archive without restoring it.

use std::path::PathBuf;
use std::process::ExitCode;

use berth::backup::store::{Place, S3Settings};
use berth::backup::{self, BackupRequest, Signature, seal};
use berth::node::layout::Layout;
use berth_formats::backup::Part;

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct BackupArgs {
    /// Where to keep the archive: a new file (made 0600), or s3://BUCKET/KEY (a KEY ending in
    /// `/` names a folder). Default: /var/backups/berth/backup-<time>.tar.zst (kept by `berth
    /// reset`).
    #[arg(long, short = 'o', value_name = "FILE|S3", conflicts_with = "verify")]
    output: Option<String>,
    /// After the backup, keep only the newest N of the backups named `backup-<time>.tar.zst`
    /// in its folder (other files are left alone).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000), conflicts_with = "verify")]
    keep: Option<u64>,
    /// Sign the archive's manifest with this key (PKCS#8 PEM, as `berth-build keygen` writes).
    #[arg(long, value_name = "FILE", conflicts_with = "verify")]
    signing_key: Option<PathBuf>,
    /// Encrypt the archive (age) to this recipient's public key (`age1…`; repeatable): only
    /// its identity opens it.
    #[arg(long = "encrypt-to", value_name = "RECIPIENT", conflicts_with_all = ["verify", "passphrase_file"])]
    encrypt_to: Vec<String>,
    /// Where etcd answers its clients.
    #[arg(long, value_name = "URL", default_value = backup::etcd::DEFAULT_ENDPOINT)]
    etcd_endpoint: String,
    /// Check this archive (a file, or s3://BUCKET/KEY) through, every file against its
    /// manifest, and change nothing.
    #[arg(long, value_name = "FILE|S3")]
    verify: Option<String>,
    /// With --verify: the archive must be signed by one of these keys (public, PEM).
    #[arg(long = "trust-key", value_name = "FILE", requires = "verify")]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    unlock: UnlockArgs,
    #[command(flatten)]
    s3: S3Args,
    #[command(flatten)]
    hook_timeout: crate::commands::HookTimeout,
    #[command(flatten)]
    root: RootArgs,
}

/// What encrypts a backup with a passphrase, or opens an encrypted one.
#[derive(clap::Args)]
pub struct UnlockArgs {
    /// An age identity file (`AGE-SECRET-KEY-…`, as age-keygen writes it; repeatable) that
    /// opens a backup encrypted to its recipient.
    #[arg(long = "identity", value_name = "FILE")]
    identities: Vec<PathBuf>,
    /// A file whose first line is the passphrase a backup is encrypted with (age's scrypt):
    /// given to `berth backup`, it encrypts; to --verify or `berth restore`, it opens.
    #[arg(long = "passphrase-file", value_name = "FILE")]
    passphrase_file: Option<PathBuf>,
}

impl UnlockArgs {
    pub(crate) fn keys(&self) -> anyhow::Result<seal::Keys> {
        let passphrase = self
            .passphrase_file
            .as_deref()
            .map(seal::passphrase)
            .transpose()?;
        Ok(seal::Keys::new(&self.identities, passphrase)?)
    }
}

/// How S3 is reached; the credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
/// (and AWS_SESSION_TOKEN).
#[derive(clap::Args)]
pub struct S3Args {
    /// An S3 endpoint other than AWS's (MinIO, SeaweedFS, Ceph), addressed path-style.
    #[arg(long = "s3-endpoint", value_name = "URL", env = "AWS_ENDPOINT_URL")]
    endpoint: Option<String>,
    /// The bucket's region.
    #[arg(
        long = "s3-region",
        value_name = "REGION",
        env = "AWS_REGION",
        default_value = "us-east-1"
    )]
    region: String,
}

impl S3Args {
    fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
        }
    }
}

pub fn run(args: BackupArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(args.root.existing()?);
    if let Some(place) = &args.verify {
        return verify(&layout, &Place::parse(place)?, &args);
    }
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
    if !args.unlock.identities.is_empty() {
        anyhow::bail!(
            "--identity opens a backup (with --verify, or berth restore); to encrypt one, give --encrypt-to RECIPIENT"
        );
    }
    let protection = if !args.encrypt_to.is_empty() {
        seal::Protection::Recipients(seal::recipients(&args.encrypt_to)?)
    } else if let Some(path) = &args.unlock.passphrase_file {
        seal::Protection::Passphrase(seal::passphrase(path)?)
    } else {
        seal::Protection::None
    };
    let encrypted = !matches!(protection, seal::Protection::None);
    let name = backup::default_name(encrypted);
    let place = match &args.output {
        Some(text) => Place::parse(text)?.named(&name),
        None => Place::File(backup::default_folder(&layout).join(&name)),
    };
    if args.keep.is_some() && !matches!(place, Place::File(_)) {
        anyhow::bail!(
            "--keep prunes a folder on this node; an S3 bucket keeps its own lifecycle rules"
        );
    }
    let scratch = match place {
        Place::File(_) => None,
        Place::S3 { .. } => Some(backup::scratch(&layout)?),
    };
    let local = match (&place, &scratch) {
        (Place::File(path), _) => path.clone(),
        (_, Some(scratch)) => scratch.path().join(&name),
        (_, None) => unreachable!("an S3 place has a scratch folder"),
    };
    let taken = backup::take(
        &BackupRequest {
            layout,
            output: local,
            etcd_endpoint: args.etcd_endpoint.clone(),
            signing_key,
            protection,
            hook_timeout: args.hook_timeout.duration(),
        },
        &crate::commands::Stderr,
    )?;
    say!("berth: backed up {}", summary(&taken.manifest));
    if let Place::S3 { bucket, key } = &place {
        args.s3.settings().upload(bucket, key, &taken.path)?;
    }
    say!(
        "berth: {} ({} bytes, readable by root alone{}{})",
        place.describe(),
        taken.bytes,
        if encrypted { ", encrypted" } else { "" },
        if args.signing_key.is_some() {
            ", its manifest signed"
        } else {
            ""
        }
    );
    if let (Some(keep), Some(folder)) = (args.keep, taken.path.parent()) {
        for removed in backup::store::prune(folder, keep as usize)? {
            say!("berth: removed the older backup {}", removed.display());
        }
    }
    show!("{}", place.describe());
    Ok(ExitCode::SUCCESS)
}

/// The public keys in `files` (PEM), read as the node reads its trusted keys.
pub(crate) fn read_public_keys(
    files: &[PathBuf],
) -> anyhow::Result<Vec<berth_formats::signature::PublicKey>> {
    Ok(files
        .iter()
        .map(|file| berth::dist::trust::read_key(file))
        .collect::<Result<_, _>>()?)
}

/// A backup as a file on this node: itself, or fetched from S3 into a scratch folder (which
/// goes when the second value is dropped).
pub(crate) fn fetched(
    layout: &Layout,
    place: &Place,
    s3: &S3Args,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    Ok(match place {
        Place::File(path) => (path.clone(), None),
        Place::S3 { bucket, key } => {
            let scratch = backup::scratch(layout)?;
            let path = scratch.path().join("backup.tar.zst");
            s3.settings().download(bucket, key, &path)?;
            (path, Some(scratch))
        }
    })
}

fn verify(layout: &Layout, place: &Place, args: &BackupArgs) -> anyhow::Result<ExitCode> {
    let keys = read_public_keys(&args.trust_keys)?;
    let (path, _scratch) = fetched(layout, place, &args.s3)?;
    let verified = backup::verify(&path, &keys, &args.unlock.keys()?)?;
    let manifest = &verified.manifest;
    show!(
        "{}: whole: {}; made by berth {} on {} at {}",
        place.describe(),
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

/// `15 files, 23885 bytes: the etcd snapshot (20512 bytes), certificates and keys (9 files), …`
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
