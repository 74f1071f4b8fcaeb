//! A bundle checked whole: its archive read as a stream (never extracted, so a crafted one
//! cannot fill the disk), or the folder it extracts to walked. Every regular file is hashed;
//! the few that say what the bundle holds are kept (lock, versions, indexes, bills of
//! materials, the list of files, their signatures). Then: `versions.json`, `lock.json` and
//! `bundle.sha256` against their signatures; every package file against the package's index,
//! whose digest the lock pins; every file of the bundle (scripts and `berth` among them)
//! against `bundle.sha256`, with none unlisted.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path};

use anyhow::Context as _;
use berth::dist::trust::Trust;
use berth_formats::Sha256Digest;
use berth_formats::archive;
use berth_formats::bundle::{self, FILES_LIST};
use berth_formats::digest::HashingReader;
use berth_formats::lock::{LOCK_FILE, Lock};
use berth_formats::package_index::{PACKAGE_INDEX_FILE, PackageIndex};
use berth_formats::signature::SIGNATURE_SUFFIX;
use berth_formats::versions::VERSIONS_FILE;

use berth_formats::release::BOM_SUFFIX;

use super::{Checks, check_bom};

/// The most bytes of one kept file, of all kept files, and the most files of a bundle.
const MAX_KEPT_FILE: u64 = 16 << 20;
const MAX_KEPT_TOTAL: u64 = 256 << 20;
const MAX_FILES: usize = 1_000_000;

/// What a bundle holds: every regular file's digest, and the bytes of those kept.
#[derive(Default)]
pub(super) struct Contents {
    digests: BTreeMap<String, Sha256Digest>,
    /// Whether each regular file is executable, as the archive or the folder has it.
    modes: BTreeMap<String, bool>,
    kept: BTreeMap<String, Vec<u8>>,
    kept_bytes: u64,
}

/// Who may own an extracted bundle's files: root, and the user who extracted it and runs this
/// check (directly or through sudo).
struct FolderOwners {
    users: Vec<u32>,
}

impl FolderOwners {
    fn of_this_run() -> Self {
        let mut users = vec![0, nix::unistd::getuid().as_raw()];
        users.extend(
            std::env::var("SUDO_UID")
                .ok()
                .and_then(|uid| uid.parse::<u32>().ok()),
        );
        Self { users }
    }

    /// Refuses a file or folder another user owns, or whose mode is setuid, setgid or sticky,
    /// or lets group or others write it: such a file could be changed, or run with another's
    /// rights, after it was checked.
    fn check(&self, path: &Path, metadata: &std::fs::Metadata) -> anyhow::Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        let mode = metadata.mode();
        let why = if !self.users.contains(&metadata.uid()) {
            Some(format!("is owned by user {}", metadata.uid()))
        } else if mode & 0o7000 != 0 {
            Some(format!(
                "has a setuid, setgid or sticky mode ({:o})",
                mode & 0o7777
            ))
        } else if mode & 0o022 != 0 {
            Some(format!(
                "lets group or others write it (mode {:o})",
                mode & 0o7777
            ))
        } else {
            None
        };
        match why {
            Some(why) => anyhow::bail!(
                "{} {why}; extract bundles with `tar --no-same-owner --no-same-permissions`",
                path.display()
            ),
            None => Ok(()),
        }
    }
}

/// Whether the check needs a file's bytes, not only its digest.
fn kept(path: &str) -> bool {
    let root = path.strip_suffix(SIGNATURE_SUFFIX).unwrap_or(path);
    [LOCK_FILE, VERSIONS_FILE, FILES_LIST].contains(&root)
        || (path.starts_with(&format!("{}/", bundle::PACKAGES_DIR))
            && (root.ends_with(BOM_SUFFIX) || path.ends_with(&format!("/{PACKAGE_INDEX_FILE}"))))
}

impl Contents {
    /// Hashes one file of the bundle (keeping it if the check reads it).
    fn add(&mut self, path: &str, reader: impl Read) -> anyhow::Result<()> {
        if !Path::new(path)
            .components()
            .all(|component| matches!(component, Component::Normal(_)))
        {
            anyhow::bail!("`{path}` is not a path inside the bundle");
        }
        if self.digests.len() >= MAX_FILES {
            anyhow::bail!("it holds more than {MAX_FILES} files");
        }
        let mut hashing = HashingReader::new(reader);
        if kept(path) {
            // An index may be as large as the format allows; the other kept files are small.
            let most = if path.ends_with(&format!("/{PACKAGE_INDEX_FILE}")) {
                berth_formats::package_index::MAX_INDEX_BYTES
            } else {
                MAX_KEPT_FILE
            };
            let mut bytes = Vec::new();
            (&mut hashing)
                .take(most + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("failed to read {path}"))?;
            self.kept_bytes += bytes.len() as u64;
            if bytes.len() as u64 > most || self.kept_bytes > MAX_KEPT_TOTAL {
                anyhow::bail!("{path} is larger than any bundle's");
            }
            self.kept.insert(path.to_string(), bytes);
        }
        let (digest, _) = hashing
            .finish()
            .with_context(|| format!("failed to read {path}"))?;
        if self.digests.insert(path.to_string(), digest).is_some() {
            anyhow::bail!("`{path}` is in the bundle twice");
        }
        Ok(())
    }

    /// A bundle's archive, read once as it streams by.
    pub fn read_archive(path: &Path) -> anyhow::Result<Self> {
        let file = std::io::BufReader::with_capacity(1 << 20, fs_err::File::open(path)?);
        let mut archive = archive::open(file)?;
        let mut contents = Self::default();
        for entry in archive.entries()? {
            let mut entry = entry?;
            let name = entry.path()?.to_string_lossy().into_owned();
            let name = name
                .trim_start_matches("./")
                .trim_end_matches('/')
                .to_string();
            if let Some(reason) = archive::unsafe_entry(&mut entry) {
                anyhow::bail!("`{name}` is refused: {reason}");
            }
            if entry.header().entry_type() == tar::EntryType::Regular {
                let executable = entry.header().mode()? & 0o111 != 0;
                contents.modes.insert(name.clone(), executable);
            }
            match entry.header().entry_type() {
                tar::EntryType::Directory => {}
                tar::EntryType::Regular => contents.add(&name, entry)?,
                other => anyhow::bail!(
                    "`{name}` is a {other:?} entry; a bundle holds regular files and folders only"
                ),
            }
        }
        archive::finish(archive)?;
        Ok(contents)
    }

    /// The folder a bundle was extracted to.
    pub fn read_folder(folder: &Path) -> anyhow::Result<Self> {
        let mut contents = Self::default();
        let owners = FolderOwners::of_this_run();
        owners.check(folder, &fs_err::metadata(folder)?)?;
        let mut pending = vec![folder.to_path_buf()];
        while let Some(directory) = pending.pop() {
            for entry in fs_err::read_dir(&directory)? {
                let path = entry?.path();
                let metadata = fs_err::symlink_metadata(&path)?;
                let kind = metadata.file_type();
                let relative = path
                    .strip_prefix(folder)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                if kind.is_dir() || kind.is_file() {
                    owners.check(&path, &metadata)?;
                }
                if kind.is_dir() {
                    pending.push(path);
                } else if kind.is_file() {
                    use std::os::unix::fs::PermissionsExt as _;
                    let executable = metadata.permissions().mode() & 0o111 != 0;
                    contents.modes.insert(relative.clone(), executable);
                    contents.add(&relative, fs_err::File::open(&path)?)?;
                } else {
                    anyhow::bail!(
                        "`{relative}` is not a regular file; a bundle holds regular files and folders only"
                    );
                }
            }
        }
        Ok(contents)
    }

    fn bytes(&self, path: &str) -> Option<&[u8]> {
        self.kept.get(path).map(Vec::as_slice)
    }

    /// Checks a kept file against its signature (when keys are trusted).
    fn signed(&self, trust: &Trust, path: &str) -> anyhow::Result<&[u8]> {
        let bytes = self
            .bytes(path)
            .with_context(|| format!("the bundle has no {path}"))?;
        let signature = format!("{path}{SIGNATURE_SUFFIX}");
        if trust.is_empty() && self.bytes(&signature).is_some() {
            return Err(super::unchecked_signature(&signature));
        }
        trust.check_signature(path, bytes, &signature, self.bytes(&signature))?;
        Ok(bytes)
    }
}

/// Every check of a bundle's contents.
pub(super) fn check(contents: &Contents, trust: &Trust, checks: &mut Checks) {
    let how = |trust: &Trust| {
        if trust.is_empty() {
            "read (no key to check its signature with)"
        } else {
            "signed by a trusted key"
        }
    };
    checks.record(
        VERSIONS_FILE,
        contents
            .signed(trust, VERSIONS_FILE)
            .map(|_| how(trust).to_string()),
    );
    let lock = contents
        .signed(trust, LOCK_FILE)
        .and_then(|bytes| Lock::parse(LOCK_FILE, bytes).map_err(anyhow::Error::from));
    let lock = match lock {
        Ok(lock) => {
            checks.record(LOCK_FILE, Ok(how(trust).to_string()));
            lock
        }
        Err(error) => {
            // Nothing else can be checked against a lock that is not the vendor's.
            checks.record(LOCK_FILE, Err(error));
            return;
        }
    };
    for addon in &lock.addons {
        let what = format!("{} {}", addon.name, addon.version);
        let target = bundle::package_dir(&addon.name, &addon.version);
        let bom = format!("{target}{BOM_SUFFIX}");
        if contents.digests.contains_key(&bom) {
            let result = contents
                .signed(trust, &bom)
                .and_then(|bytes| check_bom(bytes, &addon.sha256, trust));
            checks.record(&format!("{what} bill of materials"), result);
        }
        let result = match &addon.index_sha256 {
            Some(index) => check_package(contents, &target, index).map(|count| {
                format!("its {count} files match the package's index, which the lock pins")
            }),
            None => Err(anyhow::anyhow!(
                "the lock pins no index for it; a bundle's lock does"
            )),
        };
        checks.record(&what, result);
    }
    checks.record(FILES_LIST, check_list(contents, trust));
}

/// Checks a package's index against the lock's digest and its files against the index;
/// returns how many files it lists.
fn check_package(
    contents: &Contents,
    target: &str,
    expected: &Sha256Digest,
) -> anyhow::Result<usize> {
    let index_path = format!("{target}/{PACKAGE_INDEX_FILE}");
    let bytes = contents
        .bytes(&index_path)
        .with_context(|| format!("the bundle has no {index_path}"))?;
    let actual = Sha256Digest::of(bytes);
    if &actual != expected {
        anyhow::bail!("{index_path} has sha256 {actual}, the lock pins {expected}");
    }
    let index = PackageIndex::from_bytes(bytes)
        .map_err(|error| anyhow::anyhow!("{index_path}: {error}"))?;
    for file in &index.files {
        let (at, executable) = match bundle::shared_blob(&file.path) {
            Some(hex) => (bundle::blob_path(hex), false),
            None => (format!("{target}/{}", file.path), file.executable),
        };
        match contents.digests.get(&at) {
            None => anyhow::bail!("{at} is missing; {index_path} lists it"),
            Some(digest) if digest != &file.sha256 => anyhow::bail!(
                "{at} has sha256 {digest}, {index_path} says {}",
                file.sha256
            ),
            Some(_) => check_mode(contents, &at, executable, &index_path)?,
        }
    }
    Ok(index.files.len())
}

/// Checks that a file is executable exactly when `source` (an index, or the layout) says so.
fn check_mode(
    contents: &Contents,
    path: &str,
    executable: bool,
    source: &str,
) -> anyhow::Result<()> {
    match contents.modes.get(path) {
        Some(actual) if *actual != executable => anyhow::bail!(
            "{path} is {}executable, and {source} says it is {}",
            if *actual { "" } else { "not " },
            if executable {
                "a program"
            } else {
                "not a program"
            }
        ),
        _ => Ok(()),
    }
}

/// Checks every file of the bundle against the signed list of them, and that none is unlisted.
fn check_list(contents: &Contents, trust: &Trust) -> anyhow::Result<String> {
    if contents.bytes(FILES_LIST).is_none() {
        anyhow::bail!(
            "the bundle has no {FILES_LIST}, so its scripts and berth binary cannot be checked (a bundle made by an older berth-build has none)"
        );
    }
    let bytes = contents.signed(trust, FILES_LIST)?;
    let mut listed = BTreeMap::new();
    for line in String::from_utf8_lossy(bytes).lines() {
        let (hex, path) = line
            .split_once("  ")
            .with_context(|| format!("`{line}` is not a sha256sum line"))?;
        let digest = Sha256Digest::from_hex(hex)
            .map_err(|_| anyhow::anyhow!("`{line}` is not a sha256sum line"))?;
        listed.insert(path.to_string(), digest);
    }
    for (path, digest) in &listed {
        match contents.digests.get(path) {
            None => anyhow::bail!("{path} is missing; {FILES_LIST} lists it"),
            Some(actual) if actual != digest => {
                anyhow::bail!("{path} has sha256 {actual}, {FILES_LIST} says {digest}")
            }
            // A package's files have the modes its index gives (checked with the package);
            // of the bundle's own files, the scripts and the binary alone are programs.
            Some(_) if !path.contains('/') => {
                let executable = path.ends_with(".sh") || path == bundle::BINARY;
                check_mode(contents, path, executable, "the bundle's layout")?;
            }
            Some(_) => {}
        }
    }
    let signature = format!("{FILES_LIST}{SIGNATURE_SUFFIX}");
    if let Some(stray) = contents
        .digests
        .keys()
        .find(|path| !listed.contains_key(*path) && **path != FILES_LIST && **path != signature)
    {
        anyhow::bail!("{stray} is in the bundle, and {FILES_LIST} does not list it");
    }
    Ok(format!(
        "every file ({}, the scripts and berth among them) is listed and matches; {}",
        listed.len(),
        if trust.is_empty() {
            "read (no key to check its signature with)"
        } else {
            "signed by a trusted key"
        }
    ))
}
