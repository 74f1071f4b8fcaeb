//! `berth verify DIST|BUNDLE`: checks a whole dist folder or airgap bundle offline, as a node
//! checks what it installs, and says what it checked, file by file.
//!
//! A dist: `versions.json` and every package's `.sha256` against their signatures, and every
//! package against its `.sha256`. A bundle (its `.tar.gz`, or the folder it extracts to):
//! `versions.json` and `lock.json` against their signatures, and every file of every package
//! against the package's index, whose digest the lock pins.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use berth::dist::Dist;
use berth::layout::Layout;
use berth::trust::Trust;
use berth_formats::Sha256Digest;
use berth_formats::lock::{LOCK_FILE, Lock};
use berth_formats::versions::VERSIONS_FILE;

use crate::RootArgs;

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// A dist folder, an airgap bundle (`.tar.gz`) or the folder it extracts to.
    target: PathBuf,
    /// A vendor's public key (PEM) to check signatures with, besides those kept in
    /// /etc/berth/trusted-keys/ (repeatable). With none, digests alone are checked.
    #[arg(long = "trust-key", value_name = "FILE")]
    trust_keys: Vec<PathBuf>,
    #[command(flatten)]
    root: RootArgs,
}

/// What was checked, and how each went.
struct Checks {
    failed: usize,
    passed: usize,
}

impl Checks {
    fn record(&mut self, what: &str, result: anyhow::Result<String>) {
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
    let trust = Trust::load(&layout, &args.trust_keys)?;
    say!("berth: {}", trust.describe());
    // A bundle's archive is extracted into a folder that goes when the check is done.
    let extracted;
    let folder = if args.target.is_file() {
        extracted = tempfile::Builder::new()
            .prefix("berth-verify-")
            .tempdir()
            .context("failed to make a folder to extract the bundle into")?;
        let file = fs_err::File::open(&args.target)?;
        berth_formats::archive::extract(file, extracted.path())
            .with_context(|| format!("{} is not a bundle Berth can read", args.target.display()))?;
        extracted.path().to_path_buf()
    } else {
        args.target.clone()
    };
    let mut checks = Checks {
        failed: 0,
        passed: 0,
    };
    let dist = Dist::Local(folder.clone());
    let signed = |file: &str, bytes: &[u8]| -> anyhow::Result<String> {
        trust.check_dist_file(&dist, file, bytes)?;
        Ok(if trust.is_empty() {
            "read (no key to check its signature with)".to_string()
        } else {
            "signed by a trusted key".to_string()
        })
    };
    let versions = fs_err::read(folder.join(VERSIONS_FILE))
        .with_context(|| format!("{} is neither a dist nor a bundle", args.target.display()))?;
    checks.record(VERSIONS_FILE, signed(VERSIONS_FILE, &versions));
    let lock_path = folder.join(LOCK_FILE);
    if lock_path.is_file() {
        let bytes = fs_err::read(&lock_path)?;
        checks.record(LOCK_FILE, signed(LOCK_FILE, &bytes));
        let lock = Lock::parse(&lock_path.display().to_string(), &bytes)?;
        for addon in &lock.addons {
            let what = format!("{} {}", addon.name, addon.version);
            let result = match addon.index_sha256 {
                Some(index) => {
                    berth::unpack::check_bundled(&folder, &index, (&addon.name, &addon.version))
                        .map(|()| {
                            "every file matches the package's index, which the lock pins"
                                .to_string()
                        })
                        .map_err(anyhow::Error::from)
                }
                None => Err(anyhow::anyhow!(
                    "the lock pins no index for it; a bundle's lock does"
                )),
            };
            checks.record(&what, result);
        }
    } else {
        for checksum in checksum_files(&folder)? {
            let name = checksum
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let package = name.trim_end_matches(".sha256").to_string();
            let result = (|| {
                let bytes = fs_err::read(&checksum)?;
                let how = signed(&name, &bytes)?;
                let expected = berth_formats::package_index::parse_checksum_file(
                    &String::from_utf8_lossy(&bytes),
                )
                .map_err(|_| anyhow::anyhow!("{name} is not a sha256sum line"))?;
                let actual = Sha256Digest::of_file(&folder.join(&package))?;
                if actual != expected {
                    anyhow::bail!("{package} has sha256 {actual}, its .sha256 says {expected}");
                }
                Ok(format!("its .sha256 {how}, and the package matches it"))
            })();
            checks.record(&package, result);
        }
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

fn checksum_files(folder: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(folder)?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".tar.gz.sha256"))
        .collect();
    files.sort();
    Ok(files)
}
