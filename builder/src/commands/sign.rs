//! `berth-build keygen` makes a vendor's signing key; `berth-build sign DIST` signs a dist.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use berth_build::publish::sign;
use berth_formats::signature::SigningKey;

#[derive(clap::Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (the private key, PKCS#8 PEM, readable by its owner alone) and
    /// PREFIX.pub (the public key nodes trust); refused where either exists.
    #[arg(value_name = "PREFIX", default_value = "berth")]
    prefix: PathBuf,
}

#[derive(clap::Args)]
pub struct SignArgs {
    /// The dist folder: versions.json and every package's .sha256 are signed.
    dist: PathBuf,
    /// The private key (PEM) [default: the PEM text of $BERTH_SIGNING_KEY].
    #[arg(long = "signing-key", value_name = "FILE", visible_alias = "key")]
    key: Option<PathBuf>,
    /// How long the signed release stays current: nodes refuse it after that (`30d`, `1y`).
    /// Each signing stamps versions.json as a newer release than the one before; sign again
    /// to renew.
    #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = berth_formats::duration::a_second_to_ten_years)]
    expires_in: std::time::Duration,
}

pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let private = PathBuf::from(format!("{}.key", args.prefix.display()));
    let public = PathBuf::from(format!("{}.pub", args.prefix.display()));
    // A folder that is not there is most likely a typo: a key is not left in a tree of
    // folders made for it.
    if let Some(folder) = args.prefix.parent()
        && !folder.as_os_str().is_empty()
        && !folder.is_dir()
    {
        anyhow::bail!(
            "{} is not a folder; create it first, or give a PREFIX in a folder that exists",
            folder.display()
        );
    }
    for path in [&private, &public] {
        if path.exists() {
            anyhow::bail!(
                "{} exists; give another PREFIX, or remove it",
                path.display()
            );
        }
    }
    let key = SigningKey::generate()?;
    berth_formats::files::write_atomically_with_mode(&private, key.to_pem().as_bytes(), 0o600)
        .with_context(|| format!("failed to write {}", private.display()))?;
    berth_formats::files::write_atomically(&public, key.public().to_pem().as_bytes())
        .with_context(|| format!("failed to write {}", public.display()))?;
    show!("{}", key.public().fingerprint());
    eprintln!(
        "wrote {} (keep it secret: CI signs with it) and {} (nodes trust it: --trust-key, or /etc/berth/trusted-keys/)",
        private.display(),
        public.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = sign::load_key(args.key.as_deref())?.with_context(|| {
        format!(
            "no signing key: give --key FILE, or the key's PEM text in ${}",
            berth_build::process::SIGNING_KEY_VARIABLE
        )
    })?;
    let files = sign::sign_dist(&key, &args.dist, args.expires_in)?;
    for file in &files {
        show!("signed {}", file.display());
    }
    eprintln!(
        "{} files signed with {}",
        files.len(),
        key.public().fingerprint()
    );
    Ok(ExitCode::SUCCESS)
}
