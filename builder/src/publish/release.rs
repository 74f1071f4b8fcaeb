//! A release in a store: its `versions.json`, its packages with their `.sha256`, and the node
//! binaries (`bin/berth-linux-<arch>`). Resolving an Installer spec against it gives the
//! installer's lock: each add-on's exact version and package digest, in install order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use berth_formats::Sha256Digest;
use berth_formats::lock::{LOCK_SCHEMA_VERSION, Lock, LockedAddon};
use berth_formats::package_index::{package_file_name, parse_checksum_file};
use berth_formats::spec::InstallerSpec;
use berth_formats::versions::{VERSIONS_FILE, VersionsError, VersionsFile};

use crate::publish::store::{Store, StoreError};
use berth_formats::release::{ARCHES, berth_binary_file, checksum_file};

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{location} does not exist: the release has no {what}")]
    Missing { location: String, what: String },
    #[error(transparent)]
    Versions(#[from] VersionsError),
    #[error("{location} is refused: {reason}")]
    BadChecksum { location: String, reason: String },
    #[error(
        "the release has no berth binary (bin/berth-linux-<arch>)\nhint: publish one with `berth-build upload --berth FILE`, or give --berth FILE"
    )]
    NoBinary,
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One release of a store: every key is `<prefix><file>`.
pub struct Release {
    pub store: Store,
    /// `dist/<release>/`, `staging/<release>/`, or empty for a store that is a dist folder.
    pub prefix: String,
    /// A node binary for this machine's arch, used where the release has none.
    pub local_berth: Option<(String, PathBuf)>,
    /// The local binary's digest, with the size and modification time it was taken at: every
    /// rendered script needs it, and hashing megabytes per request is waste.
    pub local_berth_digest: std::sync::Mutex<Option<(u64, std::time::SystemTime, Sha256Digest)>>,
}

impl Release {
    /// A release of `store` under `prefix`, offering `local_berth` where it has no binary.
    pub fn new(store: Store, prefix: String, local_berth: Option<(String, PathBuf)>) -> Self {
        Self {
            store,
            prefix,
            local_berth,
            local_berth_digest: std::sync::Mutex::new(None),
        }
    }

    /// The local binary's sha256, hashed again only when the file changed.
    fn local_digest(&self, path: &std::path::Path) -> Result<Sha256Digest, ReleaseError> {
        let io = |source| ReleaseError::Io {
            path: path.to_path_buf(),
            source,
        };
        let metadata = fs_err::metadata(path).map_err(io)?;
        let stamp = (metadata.len(), metadata.modified().map_err(io)?);
        let mut cached = self
            .local_berth_digest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((length, modified, digest)) = *cached
            && (length, modified) == stamp
        {
            return Ok(digest);
        }
        let file = fs_err::File::open(path).map_err(io)?;
        let digest = Sha256Digest::of_reader(file).map_err(io)?;
        *cached = Some((stamp.0, stamp.1, digest));
        Ok(digest)
    }

    pub fn key(&self, file: &str) -> String {
        format!("{}{file}", self.prefix)
    }

    async fn read(&self, file: &str, what: &str) -> Result<Vec<u8>, ReleaseError> {
        let key = self.key(file);
        self.store
            .read(&key)
            .await?
            .ok_or_else(|| ReleaseError::Missing {
                location: self.store.describe(&key),
                what: what.to_string(),
            })
    }

    async fn checksum(&self, file: &str, what: &str) -> Result<Sha256Digest, ReleaseError> {
        let checksum_file = checksum_file(file);
        let text = self.read(&checksum_file, what).await?;
        parse_checksum_file(&String::from_utf8_lossy(&text), file).map_err(|error| {
            ReleaseError::BadChecksum {
                location: self.store.describe(&self.key(&checksum_file)),
                reason: error.to_string(),
            }
        })
    }

    pub async fn versions(&self) -> Result<VersionsFile, ReleaseError> {
        let bytes = self.read(VERSIONS_FILE, VERSIONS_FILE).await?;
        Ok(VersionsFile::parse(
            &self.store.describe(&self.key(VERSIONS_FILE)),
            &bytes,
        )?)
    }

    /// The lock of `spec`: versions resolved as the installer resolves them (`latest`,
    /// `X.Y.x`, exact; `kubernetesVersion` ranges against the spec's Kubernetes), digests
    /// from the packages' `.sha256`.
    pub async fn lock(&self, spec: &InstallerSpec) -> Result<Lock, ReleaseError> {
        self.lock_with(&self.versions().await?, spec).await
    }

    /// [`Self::lock`] against a `versions.json` already read from this release.
    pub async fn lock_with(
        &self,
        versions: &VersionsFile,
        spec: &InstallerSpec,
    ) -> Result<Lock, ReleaseError> {
        let resolved = versions.resolve_all(
            spec.addons
                .iter()
                .map(|(name, addon)| (name.as_str(), addon.version.as_str())),
        )?;
        let mut addons = Vec::with_capacity(resolved.len());
        for addon in resolved {
            // A spec is refused here, before anything is rendered, for a field its add-on
            // does not declare or a value of the wrong type.
            if let Some(requested) = spec.addons.get(&addon.name) {
                let mut config = requested.config.clone();
                versions.apply_fields(&addon.name, &addon.version, &mut config)?;
            }
            let file = package_file_name(&addon.name, &addon.version, addon.compression);
            let what = format!("package {} {}", addon.name, addon.version);
            addons.push(LockedAddon {
                sha256: self.checksum(&file, &what).await?,
                name: addon.name,
                version: addon.version,
                compression: addon.compression,
                index_sha256: None,
            });
        }
        Ok(Lock {
            schema_version: LOCK_SCHEMA_VERSION,
            id: spec.id(),
            addons,
        })
    }

    /// The sha256 of the node binary for each arch the release has one for (or the local
    /// binary's, for its arch, where the release has none).
    pub async fn berth_digests(&self) -> Result<BTreeMap<String, Sha256Digest>, ReleaseError> {
        let mut digests = BTreeMap::new();
        for arch in ARCHES {
            let file = berth_binary_file(arch);
            match self.checksum(&file, "berth binary").await {
                Ok(digest) => {
                    digests.insert(arch.to_string(), digest);
                }
                Err(ReleaseError::Missing { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        if let Some((arch, path)) = &self.local_berth
            && !digests.contains_key(arch)
        {
            digests.insert(arch.clone(), self.local_digest(path)?);
        }
        if digests.is_empty() {
            return Err(ReleaseError::NoBinary);
        }
        Ok(digests)
    }
}
