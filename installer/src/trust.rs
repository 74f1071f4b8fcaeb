//! The signing keys a node trusts, and the checks they make: with any configured (given with
//! `--trust-key`, or kept in `/etc/berth/trusted-keys/*.pub`), `versions.json`, each
//! package's `.sha256` and the installer's lock must carry a signature of one of them
//! (`<file>.sig`) before anything of the run is read from them; a package's bytes are then
//! bound by the digest its signed `.sha256` or lock gives, checked as it is unpacked. With
//! none, Berth says once that it checks digests alone.

use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;
use berth_formats::signature::{
    MAX_KEY_FILE_BYTES, PublicKey, SIGNATURE_SUFFIX, SignatureError, fingerprints, verify,
};

use crate::dist::{Dist, FetchError};
use crate::layout::Layout;

/// The keys a run trusts; none: digests alone are checked.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pub keys: Vec<PublicKey>,
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("failed to read the trusted key {path}")]
    Read {
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
}

impl Trust {
    /// The keys given, and those kept in the node's `/etc/berth/trusted-keys/`.
    pub fn load(layout: &Layout, given: &[PathBuf]) -> Result<Self, TrustError> {
        let mut files: Vec<PathBuf> = given.to_vec();
        // Only a folder that is not there means no kept keys: one that cannot be read fails
        // the run, never leaves it checking digests alone.
        let dir = layout.trusted_keys_dir();
        match fs_err::read_dir(&dir) {
            Ok(entries) => {
                let mut kept = Vec::new();
                for entry in entries {
                    let path = entry
                        .map_err(|source| TrustError::Read {
                            path: dir.clone(),
                            source,
                        })?
                        .path();
                    if path.extension().is_some_and(|extension| extension == "pub") {
                        kept.push(path);
                    }
                }
                kept.sort();
                files.extend(kept);
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(TrustError::Read { path: dir, source }),
        }
        let mut keys = Vec::new();
        for path in files {
            let text = berth_formats::files::read_to_string_at_most(&path, MAX_KEY_FILE_BYTES)
                .map_err(|source| TrustError::Read {
                    path: path.clone(),
                    source,
                })?;
            let key = PublicKey::from_pem(&path.display().to_string(), &text)?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        Ok(Self { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// What a run says once of how it checks what it reads.
    pub fn describe(&self) -> String {
        if self.keys.is_empty() {
            "no signing key is trusted on this node: packages are checked by their digests alone (give --trust-key, or keep the vendor's key in /etc/berth/trusted-keys/)".into()
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
        berth_formats::package_index::parse_checksum_file(&String::from_utf8_lossy(&bytes)).map_err(
            |_| {
                fetch(FetchError::BadChecksum {
                    location: dist.location(&checksum),
                })
            },
        )
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
        verify(&self.keys, file, bytes, signature, &text)
            .map(|_| ())
            .map_err(TrustError::Signature)
    }
}
