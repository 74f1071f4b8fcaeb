//! The signing keys a node trusts, and the checks they make: with any configured (given with
//! `--trust-key`, which means exactly those keys; else kept for the dist's origin in
//! `/etc/berth/trusted-keys/<origin>/`, or by the operator for every dist in
//! `/etc/berth/trusted-keys/*.pub`), `versions.json`, each
//! package's `.sha256` and the installer's lock must carry a signature of one of them
//! (`<file>.sig`) before anything of the run is read from them; a package's bytes are then
//! bound by the digest its signed `.sha256` or lock gives, checked as it is unpacked. With
//! none, Berth says plainly that nothing is checked against a key.
//!
//! A signed `versions.json` carries its release's counter and expiry
//! ([`berth_formats::versions::ReleaseStamp`]): the node keeps the highest counter it has seen
//! of each key, and refuses an older release or an expired one.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use berth_formats::Sha256Digest;
use berth_formats::lock::{Lock, LockError, MAX_LOCK_BYTES};
use berth_formats::signature::{
    MAX_KEY_FILE_BYTES, PublicKey, SIGNATURE_SUFFIX, SignatureError, fingerprints, verify,
};
use berth_formats::versions::{FreshnessError, ReleaseStamp, VERSIONS_FILE};

use crate::dist::{Dist, FetchError};
use crate::node::layout::Layout;

/// The keys a run trusts; none: digests alone are checked.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pub keys: Vec<PublicKey>,
    /// Where the highest release counter seen of each key is kept; none: not kept (a trust
    /// made in a test). `record`: whether this run may raise it (`verify` only reads it).
    releases: Option<(PathBuf, bool)>,
    /// The packages were checked against their signed digests as they came in (an airgap
    /// bundle received as a stream): a run need not fetch and check them again before it
    /// unpacks any.
    checked_on_arrival: bool,
}

/// The `*.pub` files of a folder of kept keys, by name; none when it is not there. One that
/// cannot be read fails the run, never leaves it checking digests alone.
fn kept_keys(folder: &Path) -> Result<Vec<PathBuf>, TrustError> {
    let read_error = |source| TrustError::Read {
        path: folder.to_path_buf(),
        source,
    };
    let entries = match fs_err::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(read_error(source)),
    };
    let mut kept = Vec::new();
    for entry in entries {
        let path = entry.map_err(read_error)?.path();
        if path.extension().is_some_and(|extension| extension == "pub") && path.is_file() {
            kept.push(path);
        }
    }
    kept.sort();
    Ok(kept)
}

/// A public key read from its PEM file.
pub fn read_key(path: &Path) -> Result<PublicKey, TrustError> {
    let text = berth_formats::files::read_to_string_at_most(path, MAX_KEY_FILE_BYTES).map_err(
        |source| TrustError::Read {
            path: path.to_path_buf(),
            source,
        },
    )?;
    Ok(PublicKey::from_pem(&path.display().to_string(), &text)?)
}

/// The folders of keys kept per origin, by name.
fn origin_folders(dir: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = fs_err::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| fs_err::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir()))
        .collect();
    folders.sort();
    folders
}

/// The most bytes of the file of release counters (a few dozen per key).
const MAX_RELEASES_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("failed to read the trusted key {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to keep the trusted key in {path}")]
    Keep {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] SignatureError),
    #[error(transparent)]
    Signature(SignatureError),
    #[error(
        "{lock} is not signed, and is taken only as far as trusted keys ({keys}) signed what it pins: {message}"
    )]
    UnsignedLock {
        lock: String,
        message: String,
        keys: String,
    },
    #[error("failed to read {file} from the dist")]
    Fetch {
        file: String,
        #[source]
        source: FetchError,
    },
    #[error(transparent)]
    Freshness(#[from] FreshnessError),
    #[error("failed to read the lock {path}")]
    LockRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(
        "the release counters this node keeps ({path}) cannot be read or written\nhint: they stop an older signed release from being installed; restore the file, or remove it to trust the next release seen"
    )]
    Releases {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A key kept on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptKey {
    pub fingerprint: String,
    /// The dist origin it is kept for; none: the operator keeps it for every dist.
    pub origin: Option<String>,
    pub path: PathBuf,
}

/// The folder under `/etc/berth/trusted-keys/` that holds the keys kept for a dist's origin:
/// the origin in plain characters, and a digest of it so two origins never share one.
pub fn origin_folder(origin: &str) -> String {
    let plain: String = origin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let digest = Sha256Digest::of(origin.as_bytes());
    format!("{plain}-{}", &digest.hex()[..12])
}

impl Trust {
    /// The keys a run trusts: exactly those given, when any is; else those the operator keeps
    /// for every dist (`/etc/berth/trusted-keys/*.pub`) and the keys kept for the dist's
    /// origin (`/etc/berth/trusted-keys/<origin>/`). What has no origin (an airgap bundle,
    /// carried by hand, or a file checked by `verify` or `unpack`) is checked with every key
    /// the node keeps: a bundle upgrading a node installed online is the same vendor's.
    pub fn load(
        layout: &Layout,
        given: &[PathBuf],
        dist: Option<&Dist>,
    ) -> Result<Self, TrustError> {
        let mut files: Vec<PathBuf> = given.to_vec();
        let dir = layout.trusted_keys_dir();
        let mut folders = Vec::new();
        if given.is_empty() {
            folders.push(dir.clone());
            match dist {
                Some(dist) => folders.push(dir.join(origin_folder(&dist.origin()))),
                None => folders.extend(origin_folders(&dir)),
            }
        }
        for folder in folders {
            files.extend(kept_keys(&folder)?);
        }
        let mut keys = Vec::new();
        for path in files {
            let key = read_key(&path)?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        Ok(Self {
            keys,
            releases: Some((layout.state_dir().join("trust-releases.json"), true)),
            checked_on_arrival: false,
        })
    }

    /// The keys a run for `dist` trusts ([`Trust::load`]). A run that may change the node
    /// (`keep`: not a plan) first keeps the keys given for the dist's origin
    /// ([`Trust::keep_for`]).
    pub fn for_dist(
        layout: &Layout,
        given: &[PathBuf],
        dist: &Dist,
        keep: bool,
    ) -> Result<Self, TrustError> {
        if keep && !given.is_empty() {
            Self::keep_for(layout, given, dist)?;
        }
        Self::load(layout, given, Some(dist))
    }

    /// The same trust, for the packages of an airgap bundle it checked as they came in.
    pub fn checked_on_arrival(mut self) -> Self {
        self.checked_on_arrival = true;
        self
    }

    /// Whether a run fetches and checks every package against its signed digest before it
    /// unpacks any: with keys, unless they were checked as they came in.
    pub fn checks_before_unpacking(&self) -> bool {
        !self.keys.is_empty() && !self.checked_on_arrival
    }

    /// Keeps the keys given for `dist`'s origin, so later runs for that dist (an upgrade by
    /// hand, a fleet rollout, a rollback) check with them without being given them; the
    /// folder of the origin alone, never every dist's.
    pub fn keep_for(layout: &Layout, given: &[PathBuf], dist: &Dist) -> Result<(), TrustError> {
        let folder = layout
            .trusted_keys_dir()
            .join(origin_folder(&dist.origin()));
        let write = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TrustError::Keep { path, source }
        };
        for path in given {
            let key = read_key(path)?;
            fs_err::create_dir_all(&folder).map_err(write(&folder))?;
            let name = key.fingerprint().replace(':', "-");
            let kept = folder.join(format!("{name}.pub"));
            berth_formats::files::write_atomically(&kept, key.to_pem().as_bytes())
                .map_err(write(&kept))?;
            // Which origin the folder is for, as a person reads it.
            let origin = folder.join("origin");
            berth_formats::files::write_atomically(
                &origin,
                format!("{}\n", dist.origin()).as_bytes(),
            )
            .map_err(write(&origin))?;
        }
        Ok(())
    }

    /// Every key kept on the node: the operator's, for every dist, and those kept per origin.
    pub fn kept(layout: &Layout) -> Result<Vec<KeptKey>, TrustError> {
        let dir = layout.trusted_keys_dir();
        let mut found = Vec::new();
        let mut folders = vec![(dir.clone(), None)];
        for path in origin_folders(&dir) {
            let origin = berth_formats::files::read_to_string_at_most(&path.join("origin"), 4096)
                .map(|text| text.trim().to_string())
                .unwrap_or_else(|_| "(an origin not recorded)".to_string());
            folders.push((path, Some(origin)));
        }
        for (folder, origin) in folders {
            for path in kept_keys(&folder)? {
                let key = read_key(&path)?;
                found.push(KeptKey {
                    fingerprint: key.fingerprint(),
                    origin: origin.clone(),
                    path,
                });
            }
        }
        Ok(found)
    }

    /// The same trust, reading the release counters the node keeps without raising them.
    pub fn read_only(mut self) -> Self {
        if let Some((_, record)) = &mut self.releases {
            *record = false;
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// What a run says once of how it checks what it reads.
    pub fn describe(&self) -> String {
        if self.keys.is_empty() {
            "NOTHING IS CHECKED AGAINST A SIGNING KEY: no key is trusted on this node, so packages are checked only against the digests the dist itself gives, and a dist changed together with its digests installs as it is (give --trust-key FILE, or keep the vendor's key in /etc/berth/trusted-keys/)".into()
        } else {
            format!(
                "the dist's signatures are checked with {}",
                fingerprints(&self.keys)
            )
        }
    }

    /// Checks `bytes`, read from the dist as `file`, against its `<file>.sig` there. Nothing
    /// to check when no key is trusted.
    pub fn check_dist_file(&self, dist: &Dist, file: &str, bytes: &[u8]) -> Result<(), TrustError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let signature = format!("{file}{SIGNATURE_SUFFIX}");
        let text = match dist.read(&signature) {
            Ok(text) => text,
            Err(FetchError::Missing { .. }) => {
                return Err(TrustError::Signature(SignatureError::Unsigned {
                    file: dist.location(file),
                    signature: dist.location(&signature),
                    keys: fingerprints(&self.keys),
                }));
            }
            Err(source) => {
                return Err(TrustError::Fetch {
                    file: dist.location(&signature),
                    source,
                });
            }
        };
        self.check(
            &dist.location(file),
            bytes,
            &dist.location(&signature),
            &text,
        )
    }

    /// The lock at `path`, signed by a trusted key before anything is read from it; one with
    /// no signature (a node made it: a fleet rollout's) only as far as the keys signed what it
    /// pins in `dist` ([`Trust::check_unsigned_lock`]).
    pub fn read_lock(&self, dist: &Dist, path: &Path) -> Result<Lock, TrustError> {
        let bytes = berth_formats::files::read_to_string_at_most(path, MAX_LOCK_BYTES)
            .map_err(|source| TrustError::LockRead {
                path: path.to_path_buf(),
                source,
            })?
            .into_bytes();
        let unsigned = match self.check_file(path, &bytes) {
            Ok(()) => false,
            Err(TrustError::Signature(SignatureError::Unsigned { .. })) => true,
            Err(error) => return Err(error),
        };
        let lock = Lock::parse(&path.display().to_string(), &bytes)?;
        if unsigned {
            self.check_unsigned_lock(dist, path, &lock)?;
        }
        Ok(lock)
    }

    /// Checks a file on this node (a lock) against `<path>.sig` beside it.
    pub fn check_file(&self, path: &Path, bytes: &[u8]) -> Result<(), TrustError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let signature = PathBuf::from(format!("{}{SIGNATURE_SUFFIX}", path.display()));
        let text =
            match berth_formats::files::read_to_string_at_most(&signature, MAX_KEY_FILE_BYTES) {
                Ok(text) => text.into_bytes(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Err(TrustError::Signature(SignatureError::Unsigned {
                        file: path.display().to_string(),
                        signature: signature.display().to_string(),
                        keys: fingerprints(&self.keys),
                    }));
                }
                Err(source) => {
                    return Err(TrustError::Read {
                        path: signature,
                        source,
                    });
                }
            };
        self.check(
            &path.display().to_string(),
            bytes,
            &signature.display().to_string(),
            &text,
        )
    }

    /// The digest `<file>.sha256` in the dist gives, its signature checked first (when keys
    /// are trusted).
    pub fn package_digest(&self, dist: &Dist, file: &str) -> Result<Sha256Digest, TrustError> {
        let checksum = berth_formats::release::checksum_file(file);
        let fetch = |source| TrustError::Fetch {
            file: dist.location(&checksum),
            source,
        };
        let bytes = dist.read(&checksum).map_err(fetch)?;
        self.check_dist_file(dist, &checksum, &bytes)?;
        berth_formats::package_index::parse_checksum_file(&String::from_utf8_lossy(&bytes), file)
            .map_err(|error| {
                fetch(FetchError::BadChecksum {
                    location: dist.location(&checksum),
                    reason: error.to_string(),
                })
            })
    }

    /// A lock with no signature (one a node made: a fleet rollout's) is taken only when every
    /// digest in it is one a trusted key signed in the dist (its `.sha256`). A bundle's lock,
    /// which pins unpacked packages, must be signed itself.
    pub fn check_unsigned_lock(
        &self,
        dist: &Dist,
        lock_path: &Path,
        lock: &berth_formats::lock::Lock,
    ) -> Result<(), TrustError> {
        let unsigned = |message: String| TrustError::UnsignedLock {
            lock: lock_path.display().to_string(),
            message,
            keys: fingerprints(&self.keys),
        };
        for addon in &lock.addons {
            if addon.index_sha256.is_some() {
                return Err(unsigned(format!(
                    "it pins {} {} unpacked, as a bundle's lock does, and such a lock is signed",
                    addon.name, addon.version
                )));
            }
            let file = berth_formats::package_index::package_file_name(
                &addon.name,
                &addon.version,
                addon.compression,
            );
            let signed = self.package_digest(dist, &file)?;
            if signed != addon.sha256 {
                return Err(unsigned(format!(
                    "it pins {} {} at {}, and the trusted keys signed {signed}",
                    addon.name, addon.version, addon.sha256
                )));
            }
        }
        Ok(())
    }

    /// Checks `bytes` (of `file`) against a signature's text read from `signature`, or says
    /// the file is unsigned when there is none. Nothing to check when no key is trusted.
    pub fn check_signature(
        &self,
        file: &str,
        bytes: &[u8],
        signature: &str,
        text: Option<&[u8]>,
    ) -> Result<(), TrustError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        match text {
            Some(text) => self.check(file, bytes, signature, text),
            None => Err(TrustError::Signature(SignatureError::Unsigned {
                file: file.to_string(),
                signature: signature.to_string(),
                keys: fingerprints(&self.keys),
            })),
        }
    }

    fn check(
        &self,
        file: &str,
        bytes: &[u8],
        signature: &str,
        text: &[u8],
    ) -> Result<(), TrustError> {
        let text = String::from_utf8_lossy(text);
        let key =
            verify(&self.keys, file, bytes, signature, &text).map_err(TrustError::Signature)?;
        if file == VERSIONS_FILE || file.ends_with(&format!("/{VERSIONS_FILE}")) {
            self.check_release(file, bytes, &key)?;
        }
        Ok(())
    }

    /// A signed `versions.json` is a release no older than the newest this node has seen of
    /// its key, and not expired; a newer one becomes the newest seen.
    fn check_release(&self, file: &str, bytes: &[u8], key: &PublicKey) -> Result<(), TrustError> {
        #[derive(serde::Deserialize)]
        struct Stamped {
            #[serde(default)]
            release: Option<ReleaseStamp>,
        }
        // What does not parse is refused when the file is read for what it offers.
        let Ok(Stamped { release }) = serde_json::from_slice(bytes) else {
            return Ok(());
        };
        let fingerprint = key.fingerprint();
        let Some((path, record)) = &self.releases else {
            ReleaseStamp::check(release.as_ref(), file, None, std::time::SystemTime::now())?;
            return Ok(());
        };
        let io = |source| TrustError::Releases {
            path: path.clone(),
            source,
        };
        let mut seen: BTreeMap<String, u64> =
            match berth_formats::files::read_to_string_at_most(path, MAX_RELEASES_BYTES) {
                Ok(text) => serde_json::from_str(&text).map_err(|error| {
                    io(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
                })?,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
                Err(error) => return Err(io(error)),
            };
        let highest = seen.get(&fingerprint).copied();
        let counter = ReleaseStamp::check(
            release.as_ref(),
            file,
            highest.map(|highest| (highest, fingerprint.as_str())),
            std::time::SystemTime::now(),
        )?;
        if *record && highest.is_none_or(|highest| counter > highest) {
            seen.insert(fingerprint, counter);
            if let Some(folder) = path.parent() {
                fs_err::create_dir_all(folder).map_err(io)?;
            }
            let text = serde_json::to_vec_pretty(&seen).expect("counters serialize");
            berth_formats::files::write_atomically_with_mode(path, &text, 0o600).map_err(io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_formats::signature::SigningKey;

    fn key_file(dir: &Path, name: &str) -> (PathBuf, PublicKey) {
        let key = SigningKey::generate().unwrap().public();
        let path = dir.join(format!("{name}.pub"));
        fs_err::write(&path, key.to_pem()).unwrap();
        (path, key)
    }

    #[test]
    fn keys_are_kept_per_origin_and_a_given_key_means_exactly_that_key() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path());
        let files = tempfile::tempdir().unwrap();
        let (vendor_a, a) = key_file(files.path(), "a");
        let (vendor_b, b) = key_file(files.path(), "b");
        let dist_a = Dist::parse("https://dist.vendor-a.example/releases").unwrap();
        let dist_b = Dist::parse("https://dist.vendor-b.example:8443/").unwrap();
        assert_eq!(dist_a.origin(), "https://dist.vendor-a.example:443");
        Trust::keep_for(&layout, std::slice::from_ref(&vendor_a), &dist_a).unwrap();
        // Kept for A's origin: trusted for A's dist, not for B's or with no dist.
        assert_eq!(
            Trust::load(&layout, &[], Some(&dist_a)).unwrap().keys,
            std::slice::from_ref(&a)
        );
        assert!(Trust::load(&layout, &[], Some(&dist_b)).unwrap().is_empty());
        // What has no origin (a bundle) is checked with every kept key.
        assert_eq!(
            Trust::load(&layout, &[], None).unwrap().keys,
            std::slice::from_ref(&a)
        );
        // A given key means that key alone, not the kept ones besides.
        assert_eq!(
            Trust::load(&layout, std::slice::from_ref(&vendor_b), Some(&dist_a))
                .unwrap()
                .keys,
            std::slice::from_ref(&b)
        );
        // The operator's own keys, beside the folders, are trusted for every dist.
        fs_err::copy(&vendor_b, layout.trusted_keys_dir().join("operator.pub")).unwrap();
        let trusted = Trust::load(&layout, &[], Some(&dist_a)).unwrap().keys;
        assert!(trusted.contains(&a) && trusted.contains(&b), "{trusted:?}");
        assert_eq!(Trust::load(&layout, &[], Some(&dist_b)).unwrap().keys, [b]);
        // Two origins never share a folder.
        assert_ne!(
            origin_folder("https://a.example:443"),
            origin_folder("https_//a.example:443")
        );
    }
}
