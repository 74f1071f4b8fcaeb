//! Fetching a distro's apt indices and packages into the blob cache, each checked on the way:
//! `InRelease` against the distro's keyring where the build host has it, every `Packages`
//! index against the digest and size `InRelease` gives it, every `.deb` against its index.

use std::io::Read as _;
use std::path::PathBuf;

use berth_formats::Sha256Digest;

use super::apt::{AptError, AptIndex, AptPackage, AptSource, release_digests};
use crate::cache::BlobCache;
use crate::download::{self, DownloadError, Expected, RetryPolicy};
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
        if let Some(keyring) = source.keyring.as_ref().filter(|keyring| keyring.exists()) {
            let output = std::process::Command::new("gpgv")
                .arg("--keyring")
                .arg(keyring)
                .arg(&release_path)
                .output()
                .map_err(read_error(&release_path))?;
            if !output.status.success() {
                return Err(FetchError::Signature {
                    distro: distro.to_string(),
                    url: release_url,
                    keyring: keyring.clone(),
                    message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
                });
            }
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
