//! Fetching a distro's package indices and packages into the blob cache, each checked on the
//! way. apt: `InRelease` against the distro's keyring where the build host has it, every
//! `Packages` index against the digest and size `InRelease` gives it, every `.deb` against
//! its index. rpm: `repomd.xml` against its detached signature where the target names a
//! keyring the build host has, the primary metadata against the checksum `repomd.xml` gives
//! it, every rpm against its metadata.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use berth_formats::Sha256Digest;

use super::apt::{AptError, AptIndex, AptPackage, AptSource, release_digests};
use super::repodata;
use super::rpm::{RpmError, RpmIndex, RpmPackage, RpmSource};
use crate::fetch::cache::BlobCache;
use crate::fetch::download::{self, DownloadError, Expected, RetryPolicy};
use crate::reporter::Progress;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{distro}: failed to fetch {url}")]
    Download {
        distro: String,
        url: String,
        #[source]
        source: DownloadError,
    },
    #[error("{distro}: the signature of {url} does not check against {keyring}: {message}")]
    Signature {
        distro: String,
        url: String,
        keyring: PathBuf,
        message: String,
    },
    #[error("{distro}: {url} lists no Packages index for {component}/binary-{architecture}")]
    NoIndex {
        distro: String,
        url: String,
        component: String,
        architecture: String,
    },
    #[error(transparent)]
    Apt(#[from] AptError),
    #[error(transparent)]
    Rpm(#[from] RpmError),
    #[error("{distro}: failed to read {path}")]
    Read {
        distro: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

struct Silent;

impl Progress for Silent {
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// What fetching needs: the HTTP client, the cache and the retry policy.
pub struct Fetcher<'a> {
    pub http: &'a reqwest::Client,
    pub cache: &'a BlobCache,
    pub retry: RetryPolicy,
}

impl Fetcher<'_> {
    async fn get(
        &self,
        distro: &str,
        url: &str,
        expected: Expected,
    ) -> Result<PathBuf, FetchError> {
        download::download_to_cache(url, self.cache, expected, self.retry, &Silent, || {
            self.http.get(url)
        })
        .await
        .map(|downloaded| downloaded.path)
        .map_err(|source| FetchError::Download {
            distro: distro.to_string(),
            url: url.to_string(),
            source,
        })
    }

    /// Checks a signed file with `gpgv` against `keyring` (`files`: the signed file, or a
    /// detached signature and the file it signs).
    fn check_signature(
        &self,
        distro: &str,
        url: &str,
        keyring: &Path,
        files: &[&Path],
    ) -> Result<(), FetchError> {
        let output = std::process::Command::new("gpgv")
            .env_remove(crate::process::SIGNING_KEY_VARIABLE)
            .arg("--keyring")
            .arg(keyring)
            .args(files)
            .output()
            .map_err(|source| FetchError::Read {
                distro: distro.to_string(),
                path: PathBuf::from("gpgv"),
                source,
            })?;
        if !output.status.success() {
            return Err(FetchError::Signature {
                distro: distro.to_string(),
                url: url.to_string(),
                keyring: keyring.to_path_buf(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// Reads the suite's indices for `source` into one index.
    pub async fn index(&self, distro: &str, source: &AptSource) -> Result<AptIndex, FetchError> {
        let base = format!(
            "{}/dists/{}",
            source.mirror.trim_end_matches('/'),
            source.suite
        );
        let release_url = format!("{base}/InRelease");
        let release_path = self.get(distro, &release_url, Expected::default()).await?;
        let read_error = |path: &PathBuf| {
            let path = path.clone();
            let distro = distro.to_string();
            move |source| FetchError::Read {
                distro,
                path,
                source,
            }
        };
        if let Some(keyring) = usable_keyring(distro, &release_url, source.keyring.as_deref()) {
            self.check_signature(distro, &release_url, keyring, &[&release_path])?;
        }
        let release_text =
            fs_err::read_to_string(&release_path).map_err(read_error(&release_path))?;
        let digests = release_digests(&release_url, &release_text)?;
        let mut index = AptIndex::default();
        for component in &source.components {
            let stem = format!("{component}/binary-{}/Packages", source.architecture);
            let (path, (size, digest)) = ["gz", ""]
                .iter()
                .map(|suffix| {
                    if suffix.is_empty() {
                        stem.clone()
                    } else {
                        format!("{stem}.{suffix}")
                    }
                })
                .find_map(|path| digests.get(&path).map(|entry| (path, entry.clone())))
                .ok_or_else(|| FetchError::NoIndex {
                    distro: distro.to_string(),
                    url: release_url.clone(),
                    component: component.clone(),
                    architecture: source.architecture.clone(),
                })?;
            let url = format!("{base}/{path}");
            let expected = Expected {
                digest: Sha256Digest::from_hex(&digest).ok(),
                size: Some(size),
            };
            let file = self.get(distro, &url, expected).await?;
            let mut text = String::new();
            let opened = fs_err::File::open(&file).map_err(read_error(&file))?;
            if path.ends_with(".gz") {
                flate2::read::GzDecoder::new(opened).read_to_string(&mut text)
            } else {
                std::io::BufReader::new(opened).read_to_string(&mut text)
            }
            .map_err(read_error(&file))?;
            index.add_packages(&url, &text, &source.architecture)?;
        }
        Ok(index)
    }

    /// Downloads a package's .deb, checked against the sha256 and size its index gives.
    pub async fn deb(
        &self,
        distro: &str,
        source: &AptSource,
        package: &AptPackage,
    ) -> Result<PathBuf, FetchError> {
        let url = format!(
            "{}/{}",
            source.mirror.trim_end_matches('/'),
            package.filename
        );
        let expected = Expected {
            digest: Some(Sha256Digest::from_hex(&package.sha256).map_err(|_| {
                AptError::BadPackage {
                    origin: url.clone(),
                    package: package.name.clone(),
                    problem: format!("SHA256 `{}` is not a sha256 digest", package.sha256),
                }
            })?),
            size: Some(package.size),
        };
        self.get(distro, &url, expected).await
    }
}

impl Fetcher<'_> {
    /// Reads the primary metadata of every repository of `source` into one index.
    pub async fn rpm_index(
        &self,
        distro: &str,
        source: &RpmSource,
    ) -> Result<RpmIndex, FetchError> {
        let mut index = RpmIndex::default();
        for repository in &source.repositories {
            let root = self.repository_root(distro, repository).await?;
            let repomd_url = format!("{root}/repodata/repomd.xml");
            let repomd_path = self.get(distro, &repomd_url, Expected::default()).await?;
            if let Some(keyring) = usable_keyring(distro, &repomd_url, source.keyring.as_deref()) {
                let signature_url = format!("{repomd_url}.asc");
                let signature = self
                    .get(distro, &signature_url, Expected::default())
                    .await?;
                self.check_signature(distro, &repomd_url, keyring, &[&signature, &repomd_path])?;
            }
            let read = |path: &Path| {
                let path = path.to_path_buf();
                let distro = distro.to_string();
                move |source| FetchError::Read {
                    distro,
                    path,
                    source,
                }
            };
            let repomd = fs_err::read_to_string(&repomd_path).map_err(read(&repomd_path))?;
            let primary = repodata::read_repomd(&repomd_url, &repomd)?
                .into_iter()
                .find(|file| file.kind == "primary")
                .ok_or_else(|| RpmError::Metadata {
                    origin: repomd_url.clone(),
                    problem: "lists no primary metadata".into(),
                })?;
            if primary.checksum_type != "sha256" {
                return Err(RpmError::Metadata {
                    origin: repomd_url.clone(),
                    problem: format!(
                        "the primary metadata's checksum is {}; Berth checks metadata by sha256 only",
                        primary.checksum_type
                    ),
                }
                .into());
            }
            let url = format!("{root}/{}", primary.href);
            let expected = Expected {
                digest: Sha256Digest::from_hex(&primary.checksum).ok(),
                size: primary.size,
            };
            let path = self.get(distro, &url, expected).await?;
            let text = repodata::decompress(
                &primary.href,
                fs_err::File::open(&path).map_err(read(&path))?,
            )
            .map_err(read(&path))?;
            index.add(
                repodata::read_primary(&url, &root, &text)?,
                &source.architecture,
            );
        }
        Ok(index)
    }

    /// A repository's root: the URL itself, or for a `mirror.list` URL the first mirror it
    /// names.
    async fn repository_root(&self, distro: &str, repository: &str) -> Result<String, FetchError> {
        let repository = repository.trim_end_matches('/');
        if !repository.ends_with("/mirror.list") {
            return Ok(repository.to_string());
        }
        let path = self.get(distro, repository, Expected::default()).await?;
        let list = fs_err::read_to_string(&path).map_err(|source| FetchError::Read {
            distro: distro.to_string(),
            path: path.clone(),
            source,
        })?;
        list.lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| line.trim_end_matches('/').to_string())
            .ok_or_else(|| {
                RpmError::Metadata {
                    origin: repository.to_string(),
                    problem: "names no mirror".into(),
                }
                .into()
            })
    }

    /// Downloads a package's rpm, checked against the sha256 and size its metadata gives.
    pub async fn rpm(&self, distro: &str, package: &RpmPackage) -> Result<PathBuf, FetchError> {
        let expected = Expected {
            digest: Some(Sha256Digest::from_hex(&package.sha256).map_err(|_| {
                RpmError::Metadata {
                    origin: package.url.clone(),
                    problem: format!(
                        "package `{}`: checksum `{}` is not a sha256 digest",
                        package.name, package.sha256
                    ),
                }
            })?),
            size: Some(package.size),
        };
        self.get(distro, &package.url, expected).await
    }
}

/// The keyring to check `url`'s signature with, if the target names one the build host has.
/// Otherwise the file is trusted as the transport delivered it, and the build says so once per
/// file: the package digests still come from it, so its origin matters.
fn usable_keyring<'a>(distro: &str, url: &str, keyring: Option<&'a Path>) -> Option<&'a Path> {
    static WARNED: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let why = match keyring {
        Some(keyring) if keyring.exists() => return Some(keyring),
        Some(keyring) => format!(
            "its keyring {} is not on this build host",
            keyring.display()
        ),
        None => "the target names no keyring (distros.yaml `keyring`)".to_string(),
    };
    let first = WARNED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(url.to_string());
    if first {
        tracing::warn!("{distro}: the signature of {url} is not checked: {why}");
    }
    None
}
