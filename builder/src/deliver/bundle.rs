//! Airgap bundles: one `.tar.gz` (or `.tar.zst`) holding everything a node needs with no network, written as
//! a stream (memory stays flat however large the bundle), laid out as `berth_formats::bundle`
//! says, which is where the node looks.
//!
//! A package's `images/blobs/sha256/` entries go to the shared `blobs/` folder, so a layer
//! several add-ons share is stored once. Every package read from the store is checked against
//! the lock as it streams. The bundle's lock, the one its scripts carry too, adds each
//! package's `package.json` digest, through which the node checks the unpacked files.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use berth_formats::Sha256Digest;
use berth_formats::archive::{self, TarWriter, WriteError};
use berth_formats::bundle;
use berth_formats::compression::{Compression, Encoder, Setting};
use berth_formats::digest::HashingReader;
use berth_formats::lock::{LOCK_FILE, Lock, LockedAddon};
use berth_formats::package_index::{
    self, IndexReadError, PACKAGE_INDEX_FILE, package_file_name, package_root,
};
use berth_formats::release::{berth_binary_file, checksum_file};
use berth_formats::signature::{SIGNATURE_SUFFIX, SigningKey};
use berth_formats::spec::InstallerSpec;
use berth_formats::versions::{AddonVersions, VERSIONS_FILE, VersionEntry, VersionsFile};
use tokio_util::io::SyncIoBridge;

use crate::deliver::scripts::{self, SCRIPTS, ScriptContext, ScriptError};
use crate::publish::release::{Release, ReleaseError};

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(transparent)]
    Release(#[from] ReleaseError),
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("the release has no berth binary for {arch}; it has: {}", offered.join(", "))]
    NoBinary { arch: String, offered: Vec<String> },
    #[error(
        "{name} {version}: the store's package has sha256 {actual}, the lock {expected}\nhint: the store changed while the bundle was made; make it again"
    )]
    Mismatch {
        name: String,
        version: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("{name} {version}: `{path}` is not inside the package's folder")]
    Stray {
        name: String,
        version: String,
        path: String,
    },
    #[error("{name} {version}: the package has no {PACKAGE_INDEX_FILE}")]
    NoIndex { name: String, version: String },
    #[error(
        "{name} {version}: the package's {PACKAGE_INDEX_FILE} has sha256 {actual}, the lock {expected}\nhint: the store changed while the bundle was made; make it again"
    )]
    IndexMismatch {
        name: String,
        version: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("failed to write the bundle")]
    Write(#[source] std::io::Error),
    #[error("failed to read {what}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// What a bundle holds, resolved before a byte is written.
#[derive(Debug, Clone)]
pub struct BundlePlan {
    pub lock: Lock,
    /// What the packages take on a node's disk, written first in the bundle.
    pub contents: bundle::Contents,
    pub spec: String,
    /// The rendered scripts, by file name.
    pub scripts: Vec<(String, String)>,
    pub versions: VersionsFile,
    /// Where the node binary comes from: a key of the store, or the local file.
    pub berth: BerthSource,
    /// The vendor's key: the bundle's versions.json and lock (which pins every file of every
    /// package) are signed with it, their `.sig` beside them.
    pub signing_key: Option<Arc<SigningKey>>,
    /// How the bundle's stream is compressed (gzip unless told otherwise).
    pub compression: Compression,
}

#[derive(Debug, Clone)]
pub enum BerthSource {
    Store(String),
    Local(PathBuf),
}

/// Renders the spec's scripts for a node of `arch` with `lock` (an installer's, fixed when it
/// was created), or a lock resolved against the release now when there is none.
pub async fn prepare(
    release: &Release,
    spec: &InstallerSpec,
    lock: Option<Lock>,
    spec_text: &str,
    arch: &str,
    dist_url: &str,
    scripts_url: &str,
) -> Result<BundlePlan, BundleError> {
    let offered = release.versions().await?;
    let mut lock = match lock {
        Some(lock) => lock,
        None => release.lock_with(&offered, spec).await?,
    };
    // package.json leads every package: its digest costs the first few KiB of each, and its
    // files' sizes say what the packages take on disk (a shared blob once).
    let mut installed_bytes = 0;
    let mut blobs = std::collections::BTreeSet::new();
    for addon in &mut lock.addons {
        let (digest, index) = index_digest(release, addon).await?;
        addon.index_sha256 = Some(digest);
        for file in &index.files {
            match bundle::shared_blob(&file.path) {
                Some(hex) if !blobs.insert(hex.to_string()) => {}
                _ => installed_bytes += file.size,
            }
        }
    }
    let digests = release.berth_digests().await?;
    let Some(digest) = digests.get(arch).copied() else {
        return Err(BundleError::NoBinary {
            arch: arch.to_string(),
            offered: digests.keys().cloned().collect(),
        });
    };
    // The release's own binary where it has one for this arch; else the local one.
    let binary = berth_binary_file(arch);
    let in_store = release
        .store
        .read(&release.key(&checksum_file(&binary)))
        .await
        .map_err(ReleaseError::from)?
        .is_some();
    let berth = match &release.local_berth {
        Some((local_arch, path)) if local_arch == arch && !in_store => {
            BerthSource::Local(path.clone())
        }
        _ => BerthSource::Store(release.key(&binary)),
    };
    let context = ScriptContext {
        id: lock.id.clone(),
        dist_url: dist_url.to_string(),
        scripts_url: scripts_url.to_string(),
        spec: spec_text.to_string(),
        lock: lock.clone(),
        berth_digests: BTreeMap::from([(arch.to_string(), digest)]),
        // A bundle's scripts name no key: the node trusts the keys it keeps.
        signing_key: None,
    };
    let scripts = SCRIPTS
        .iter()
        .map(|script| Ok((script.to_string(), scripts::render(script, &context)?)))
        .collect::<Result<_, ScriptError>>()?;
    // The versions the lock pins, in its (install) order, with what each declares: the
    // bundle is a dist of its own.
    let versions = VersionsFile {
        // The release the bundle was made from: a node that has seen it refuses an older one.
        release: offered.release.clone(),
        addons: lock
            .addons
            .iter()
            .map(|addon| AddonVersions {
                name: addon.name.clone(),
                versions: vec![VersionEntry {
                    version: addon.version.clone(),
                    kubernetes_version: None,
                    fields: offered
                        .entry(&addon.name, &addon.version)
                        .and_then(|entry| entry.fields.clone()),
                    compression: addon.compression,
                }],
                order: Default::default(),
            })
            .collect(),
    };
    Ok(BundlePlan {
        lock,
        contents: bundle::Contents { installed_bytes },
        spec: spec_text.to_string(),
        scripts,
        versions,
        berth,
        signing_key: None,
        compression: Compression::Gzip,
    })
}

/// The sha256 of a package's `package.json`, and the index, read from the head of the package
/// in the store.
async fn index_digest(
    release: &Release,
    addon: &LockedAddon,
) -> Result<(Sha256Digest, package_index::PackageIndex), BundleError> {
    let (name, version) = (addon.name.as_str(), addon.version.as_str());
    let file = package_file_name(name, version, addon.compression);
    let reader = release
        .store
        .reader(&release.key(&file))
        .await
        .map_err(ReleaseError::from)?;
    let handle = tokio::runtime::Handle::current();
    let (name_owned, version_owned) = (name.to_string(), version.to_string());
    let found = tokio::task::spawn_blocking(move || {
        package_index::read_from_archive(
            SyncIoBridge::new_with_handle(reader, handle),
            Some((&name_owned, &version_owned)),
        )
    })
    .await
    .expect("reading an index does not panic");
    match found {
        Ok(archived) => Ok((Sha256Digest::of(&archived.bytes), archived.index)),
        Err(IndexReadError::Missing) => Err(BundleError::NoIndex {
            name: name.to_string(),
            version: version.to_string(),
        }),
        Err(source) => Err(BundleError::Read {
            what: file.clone(),
            source: std::io::Error::other(source),
        }),
    }
}

/// The bundle's archive, recording each file's sha256 as it is written for the bundle's list
/// of its files.
struct BundleWriter<W: Write + Send + 'static> {
    builder: TarWriter<W>,
    listed: Vec<(String, Sha256Digest)>,
}

impl<W: Write + Send + 'static> BundleWriter<W> {
    fn append(
        &mut self,
        path: &str,
        size: u64,
        executable: bool,
        data: impl Read,
    ) -> Result<(), BundleError> {
        let mut hashing = HashingReader::new(data.take(size));
        self.builder
            .append_file(path, size, executable, &mut hashing)
            .map_err(BundleError::Write)?;
        let (digest, _) = hashing.finish().map_err(BundleError::Write)?;
        self.listed.push((path.to_string(), digest));
        Ok(())
    }

    /// Writes the list of every file (signed when the plan signs) and finishes the archive.
    fn finish(mut self, plan: &BundlePlan) -> Result<W, BundleError> {
        let text: String = self
            .listed
            .iter()
            .map(|(path, digest)| package_index::checksum_file_text(digest, path))
            .collect();
        let list = bundle::FILES_LIST;
        self.builder
            .append_file(list, text.len() as u64, false, text.as_bytes())
            .map_err(BundleError::Write)?;
        if let Some(signature) = signature_of(plan, list, text.as_bytes())? {
            let name = format!("{list}{SIGNATURE_SUFFIX}");
            self.builder
                .append_file(&name, signature.len() as u64, false, signature.as_bytes())
                .map_err(BundleError::Write)?;
        }
        self.builder
            .finish()
            .map_err(|error| BundleError::Write(io_error_of(error)))
    }
}

/// Writes the bundle of `plan` to `out`, reading packages from the release as it goes.
pub async fn write<W>(release: Arc<Release>, plan: &BundlePlan, out: W) -> Result<(), BundleError>
where
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // The store's own signatures first: the key signs nothing a store writer made.
    if let Some(key) = &plan.signing_key {
        crate::publish::sign::check_store(&release, &plan.lock, key, None)
            .await
            .map_err(|error| {
                BundleError::Write(std::io::Error::other(format!(
                    "the store is not signed with the bundle's key: {}",
                    berth_formats::report::chain(error.as_ref())
                )))
            })?;
    }
    let plan = plan.clone();
    let handle = tokio::runtime::Handle::current();
    let writer = SyncIoBridge::new(out);
    tokio::task::spawn_blocking(move || write_blocking(&handle, &release, plan, writer))
        .await
        .expect("writing a bundle does not panic")
}

fn write_blocking<W: Write + Send + 'static>(
    handle: &tokio::runtime::Handle,
    release: &Release,
    plan: BundlePlan,
    out: W,
) -> Result<(), BundleError> {
    // Entries carry mtime 0, as the packages inside do.
    let mut builder = BundleWriter {
        builder: TarWriter::over(
            Encoder::on_every_core(
                out,
                Setting::new(plan.compression, None).expect("its default level"),
            )
            .map_err(BundleError::Write)?,
            0,
        ),
        listed: Vec::new(),
    };
    // What says what the bundle holds comes first, so a reader of the stream knows what to
    // expect of every package before it arrives: the room the packages take, the lock, the
    // versions and the spec.
    let contents = serde_json::to_vec(&plan.contents).expect("contents serialize");
    builder.append(
        bundle::CONTENTS_FILE,
        contents.len() as u64,
        false,
        contents.as_slice(),
    )?;
    let lock = plan.lock.to_bytes();
    builder.append(LOCK_FILE, lock.len() as u64, false, lock.as_slice())?;
    append_signature(&mut builder, &plan, LOCK_FILE, &lock)?;
    let versions = plan.versions.to_bytes();
    builder.append(
        VERSIONS_FILE,
        versions.len() as u64,
        false,
        versions.as_slice(),
    )?;
    append_signature(&mut builder, &plan, VERSIONS_FILE, &versions)?;
    builder.append(
        bundle::SPEC_FILE,
        plan.spec.len() as u64,
        false,
        plan.spec.as_bytes(),
    )?;
    for (name, text) in &plan.scripts {
        builder.append(name, text.len() as u64, true, text.as_bytes())?;
    }
    let berth: Box<dyn Read> = match &plan.berth {
        BerthSource::Local(path) => {
            Box::new(
                fs_err::File::open(path).map_err(|source| BundleError::Read {
                    what: path.display().to_string(),
                    source,
                })?,
            )
        }
        BerthSource::Store(key) => Box::new(SyncIoBridge::new_with_handle(
            handle
                .block_on(release.store.reader(key))
                .map_err(ReleaseError::from)?,
            handle.clone(),
        )),
    };
    // The binary's size is needed before its bytes: spool it (a few MiB) to a temporary file.
    let mut spooled = tempfile::tempfile().map_err(BundleError::Write)?;
    let size = std::io::copy(&mut { berth }, &mut spooled).map_err(|source| BundleError::Read {
        what: "the berth binary".into(),
        source,
    })?;
    std::io::Seek::rewind(&mut spooled).map_err(BundleError::Write)?;
    builder.append(bundle::BINARY, size, true, spooled)?;

    let mut blobs_written: HashSet<String> = HashSet::new();
    for addon in &plan.lock.addons {
        let file = package_file_name(&addon.name, &addon.version, addon.compression);
        let reader = handle
            .block_on(release.store.reader(&release.key(&file)))
            .map_err(ReleaseError::from)?;
        let mut hashing = HashingReader::new(SyncIoBridge::new_with_handle(reader, handle.clone()));
        let root = format!("{}/", package_root(&addon.name, &addon.version));
        let target = bundle::package_dir(&addon.name, &addon.version);
        let read_error = |source| BundleError::Read {
            what: file.clone(),
            source,
        };
        let mut index_seen = None;
        {
            let mut archive = archive::open(&mut hashing).map_err(read_error)?;
            for entry in archive.entries().map_err(read_error)? {
                let mut entry = entry.map_err(read_error)?;
                if let Some(why) = archive::unsafe_entry(&mut entry) {
                    return Err(read_error(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "`{}` is refused: {why}",
                            String::from_utf8_lossy(&entry.path_bytes())
                        ),
                    )));
                }
                if entry.header().entry_type() != tar::EntryType::Regular {
                    continue;
                }
                let path = entry
                    .path()
                    .map_err(read_error)?
                    .to_string_lossy()
                    .into_owned();
                let Some(relative) = path.strip_prefix(&root) else {
                    return Err(BundleError::Stray {
                        name: addon.name.clone(),
                        version: addon.version.clone(),
                        path,
                    });
                };
                let size = entry.size();
                let executable = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
                if relative == PACKAGE_INDEX_FILE {
                    let mut index = Vec::new();
                    entry.read_to_end(&mut index).map_err(read_error)?;
                    index_seen = Some(Sha256Digest::of(&index));
                    builder.append(
                        &format!("{target}/{relative}"),
                        size,
                        false,
                        index.as_slice(),
                    )?;
                } else if let Some(hex) = bundle::shared_blob(relative) {
                    if blobs_written.insert(hex.to_string()) {
                        builder.append(&bundle::blob_path(hex), size, false, &mut entry)?;
                    }
                } else {
                    builder.append(
                        &format!("{target}/{relative}"),
                        size,
                        executable,
                        &mut entry,
                    )?;
                }
            }
            archive::finish(archive).map_err(read_error)?;
        }
        // Whatever follows the archive (tar padding, the compressed stream's end) counts
        // toward the digest too.
        let (actual, _) = hashing.finish().map_err(read_error)?;
        if actual != addon.sha256 {
            return Err(BundleError::Mismatch {
                name: addon.name.clone(),
                version: addon.version.clone(),
                expected: addon.sha256,
                actual,
            });
        }
        // Same package bytes, same index: the digest the lock pins holds.
        match (index_seen, addon.index_sha256) {
            (None, _) => {
                return Err(BundleError::NoIndex {
                    name: addon.name.clone(),
                    version: addon.version.clone(),
                });
            }
            (Some(seen), Some(pinned)) if seen != pinned => {
                return Err(BundleError::IndexMismatch {
                    name: addon.name.clone(),
                    version: addon.version.clone(),
                    expected: pinned,
                    actual: seen,
                });
            }
            _ => {}
        }
        // The package's bill of materials, where the release has one, beside its folder (and
        // signed when the bundle is).
        let bom_file = format!("{file}{}", berth_formats::release::BOM_SUFFIX);
        if let Some(bom) = handle
            .block_on(release.store.read(&release.key(&bom_file)))
            .map_err(ReleaseError::from)?
        {
            let name = format!("{target}{}", berth_formats::release::BOM_SUFFIX);
            builder.append(&name, bom.len() as u64, false, bom.as_slice())?;
            append_signature(&mut builder, &plan, &name, &bom)?;
        }
    }
    let mut out = builder.finish(&plan)?;
    out.flush().map_err(BundleError::Write)?;
    Ok(())
}

/// `<name>.sig` for `bytes`, when the plan signs.
fn append_signature<W: Write + Send + 'static>(
    builder: &mut BundleWriter<W>,
    plan: &BundlePlan,
    name: &str,
    bytes: &[u8],
) -> Result<(), BundleError> {
    match signature_of(plan, name, bytes)? {
        Some(signature) => builder.append(
            &format!("{name}{SIGNATURE_SUFFIX}"),
            signature.len() as u64,
            false,
            signature.as_bytes(),
        ),
        None => Ok(()),
    }
}

/// The text of `<name>.sig` for `bytes`, when the plan signs.
fn signature_of(
    plan: &BundlePlan,
    name: &str,
    bytes: &[u8],
) -> Result<Option<String>, BundleError> {
    let Some(key) = &plan.signing_key else {
        return Ok(None);
    };
    let signature = key
        .sign(name, bytes)
        .map_err(|error| BundleError::Write(std::io::Error::other(error)))?;
    Ok(Some(format!("{signature}\n")))
}

/// The I/O error inside a finishing archive's error, which has nothing else to say.
fn io_error_of(error: WriteError) -> std::io::Error {
    match error {
        WriteError::Io { source, .. } => source,
        other => std::io::Error::other(other),
    }
}
