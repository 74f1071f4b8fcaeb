//! `berth verify DIST|BUNDLE`: checks a whole dist folder or airgap bundle offline, as a node
//! checks what it installs, and says what it checked, file by file.
//!
//! A dist: `versions.json` and every package's `.sha256` against their signatures, and every
//! package against its `.sha256`. A bundle: see [`bundle`]. Where bills of materials and
//! provenance statements travel with the packages, each must be signed (with a key) and name
//! its package's digest.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use berth::dist::Dist;
use berth::dist::trust::Trust;
use berth::node::layout::Layout;
use berth_formats::Sha256Digest;
use berth_formats::lock::LOCK_FILE;
use berth_formats::release::{BOM_SUFFIX, PROVENANCE_SUFFIX};
use berth_formats::signature::SIGNATURE_SUFFIX;
use berth_formats::versions::VERSIONS_FILE;

use crate::commands::RootArgs;

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// A dist folder, an airgap bundle (`.tar.gz`) or the folder it extracts to.
    target: PathBuf,
    /// A vendor's public key (PEM) to check signatures with, besides those kept in
    /// /etc/berth/trusted-keys/ (repeatable). With none, digests alone are checked.
    #[arg(long = "trust-key", value_name = "FILE", visible_alias = "key")]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    root: RootArgs,
}

mod bundle;

/// What was checked, and how each went.
pub(super) struct Checks {
    failed: usize,
    passed: usize,
}

impl Checks {
    pub(super) fn record(&mut self, what: &str, result: anyhow::Result<String>) {
        match result {
            Ok(how) => {
                self.passed += 1;
                show!("ok    {what}: {how}");
            }
            Err(error) => {
                self.failed += 1;
                let said = berth_formats::report::chain(error.as_ref()).replace('\n', "; ");
                show!("FAIL  {what}: {said}");
            }
        }
    }
}

pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(&args.root.root);
    let trust = Trust::load(&layout, &args.trust_keys, None)?.read_only();
    say!("berth: {}", trust.describe());
    let mut checks = Checks {
        failed: 0,
        passed: 0,
    };
    // A bundle: its archive read as a stream, or its folder; a dist has no lock.
    let is_bundle_folder = args.target.join(LOCK_FILE).is_file();
    if args.target.is_file() || is_bundle_folder {
        let contents = if is_bundle_folder {
            bundle::Contents::read_folder(&args.target)
        } else {
            bundle::Contents::read_archive(&args.target)
        }
        .with_context(|| format!("{} is not a bundle Berth can read", args.target.display()))?;
        bundle::check(&contents, &trust, &mut checks);
    } else {
        check_dist(&args.target, &trust, &mut checks)?;
    }
    say!(
        "berth: {} checked, {} failed",
        checks.passed + checks.failed,
        checks.failed
    );
    Ok(if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A dist: `versions.json` and each package's `.sha256` against their signatures, each
/// package against its `.sha256`, and each bill of materials and provenance beside it.
fn check_dist(folder: &Path, trust: &Trust, checks: &mut Checks) -> anyhow::Result<()> {
    let dist = Dist::Local(folder.to_path_buf());
    let signed = |file: &str, bytes: &[u8]| -> anyhow::Result<String> {
        let signature = format!("{file}{SIGNATURE_SUFFIX}");
        if trust.is_empty() && folder.join(&signature).exists() {
            return Err(unchecked_signature(&signature));
        }
        trust.check_dist_file(&dist, file, bytes)?;
        Ok(if trust.is_empty() {
            "read (no key to check its signature with)".to_string()
        } else {
            "signed by a trusted key".to_string()
        })
    };
    let versions = fs_err::read(folder.join(VERSIONS_FILE))
        .with_context(|| format!("{} is neither a dist nor a bundle", folder.display()))?;
    checks.record(VERSIONS_FILE, signed(VERSIONS_FILE, &versions));
    for checksum in checksum_files(folder)? {
        let name = checksum
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let package = name
            .trim_end_matches(berth_formats::release::CHECKSUM_SUFFIX)
            .to_string();
        let bytes = fs_err::read(&checksum);
        let digest = bytes.as_ref().ok().and_then(|bytes| {
            berth_formats::package_index::parse_checksum_file(
                &String::from_utf8_lossy(bytes),
                &package,
            )
            .ok()
        });
        let result = (|| {
            let bytes = bytes.map_err(anyhow::Error::from)?;
            let how = signed(&name, &bytes)?;
            let expected = berth_formats::package_index::parse_checksum_file(
                &String::from_utf8_lossy(&bytes),
                &package,
            )
            .with_context(|| format!("{name} is refused"))?;
            let actual = Sha256Digest::of_file(&folder.join(&package))?;
            if actual != expected {
                anyhow::bail!("{package} has sha256 {actual}, its .sha256 says {expected}");
            }
            Ok(format!("its .sha256 {how}, and the package matches it"))
        })();
        checks.record(&package, result);
        let Some(digest) = digest else {
            continue;
        };
        let bom_name = format!("{package}{BOM_SUFFIX}");
        if folder.join(&bom_name).is_file() {
            let result = fs_err::read(folder.join(&bom_name))
                .map_err(anyhow::Error::from)
                .and_then(|bytes| {
                    signed(&bom_name, &bytes)?;
                    check_bom(&bytes, &digest, trust)
                });
            checks.record(&bom_name, result);
        }
        let provenance = format!("{package}{PROVENANCE_SUFFIX}");
        if folder.join(&provenance).is_file() {
            let result = check_provenance(&folder.join(&provenance), &digest, trust);
            checks.record(&provenance, result);
        }
    }
    Ok(())
}

/// A bill of materials (its signature already checked) names the package's digest.
fn check_bom(bytes: &[u8], package: &Sha256Digest, trust: &Trust) -> anyhow::Result<String> {
    let bom: serde_json::Value =
        serde_json::from_slice(bytes).context("it is not CycloneDX JSON")?;
    let named = bom["metadata"]["component"]["hashes"][0]["content"]
        .as_str()
        .unwrap_or_default();
    if named != package.hex() {
        anyhow::bail!("it describes a package with sha256 {named:?}, not this one ({package})");
    }
    Ok(if trust.is_empty() {
        "names the package's digest (no key to check its signature with)".into()
    } else {
        "signed by a trusted key, and names the package's digest".into()
    })
}

/// A provenance envelope opens with a trusted key and its subject is the package.
fn check_provenance(path: &Path, package: &Sha256Digest, trust: &Trust) -> anyhow::Result<String> {
    let at = path.display().to_string();
    let text = berth_formats::files::read_to_string_at_most(path, 64 << 20)?;
    let envelope: serde_json::Value =
        serde_json::from_str(&text).context("it is not a DSSE envelope")?;
    let statement = if trust.is_empty() {
        // An envelope is nothing but its signatures over the statement.
        return Err(unchecked_signature(&at));
    } else {
        berth_formats::dsse::open(&at, &envelope, &trust.keys)?
    };
    let subject = statement["subject"][0]["digest"]["sha256"]
        .as_str()
        .unwrap_or_default();
    if subject != package.hex() {
        anyhow::bail!("its subject has sha256 {subject:?}, not this package's ({package})");
    }
    Ok("signed by a trusted key, and its subject is this package".into())
}

/// A signature is there and no key is given to check it with: what it vouches for is not
/// known to be the vendor's, so the check fails rather than pass on digests alone.
pub(super) fn unchecked_signature(signature: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{signature} is there, and no trusted key checks it: nothing is known to be the signer's\nhint: give the vendor's public key with --trust-key FILE, or keep it in /etc/berth/trusted-keys/"
    )
}

fn checksum_files(folder: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(folder)?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.to_string_lossy();
            name.strip_suffix(".sha256")
                .and_then(berth_formats::compression::Compression::of_file_name)
                .is_some()
        })
        .collect();
    files.sort();
    Ok(files)
}
