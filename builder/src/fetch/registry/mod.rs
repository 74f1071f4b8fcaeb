//! A client for the OCI distribution API (what `docker pull` speaks), with no daemon.
//!
//! It fetches manifests and blobs from any registry, retrying as the build's policy says, and
//! gets in as [`authentication`] learns each repository asks. Plain HTTP is used for loopback
//! registries and for those named as insecure; HTTPS otherwise.

mod authentication;

use authentication::Authorizations;

use std::net::IpAddr;
use std::time::Duration;

use berth_formats::Sha256Digest;
use berth_formats::oci;
use oci_spec::distribution::Reference;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Client, RequestBuilder, Response, StatusCode};

use crate::fetch::cache::BlobCache;
use crate::fetch::download::{self, DownloadError, Downloaded, Expected, RetryPolicy};
use crate::reporter::Progress;

/// Every manifest kind this client understands, in the Accept header of manifest requests.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// Registry client settings.
#[derive(Debug, Clone, Default)]
pub struct RegistrySettings {
    /// Registries (`host` or `host:port`) reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    pub retry: RetryPolicy,
    /// Registries reached through another (`registry.k8s.io` → `mirror.internal:5000`), as
    /// restricted CI reaches them: the same repositories and tags, fetched from the mirror,
    /// the images still named by their own references.
    pub mirrors: Vec<(String, String)>,
}

/// Why talking to a registry failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot reach registry {registry} (after {attempts} attempts)")]
    Unreachable {
        registry: String,
        attempts: u32,
        #[source]
        source: reqwest::Error,
    },
    #[error(
        "registry {registry} refused access to {repository}: {reason}\nhint: log in with `docker login {registry}` or add credentials for it to ~/.docker/config.json"
    )]
    Unauthorized {
        registry: String,
        repository: String,
        reason: String,
    },
    #[error("{reference} was not found: registry {registry} has no such repository or tag")]
    NotFound { registry: String, reference: String },
    #[error("registry {registry} answered {status} for {url}")]
    Status {
        registry: String,
        url: String,
        status: StatusCode,
    },
    #[error(
        "the manifest of {reference} does not match its digest: expected {expected}, received {actual}"
    )]
    ManifestDigest {
        reference: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("failed to read the response of registry {registry}")]
    Body {
        registry: String,
        #[source]
        source: reqwest::Error,
    },
    #[error(transparent)]
    Download(#[from] DownloadError),
}

/// A manifest or index as the registry sent it.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    pub bytes: Vec<u8>,
    pub media_type: String,
    pub digest: Sha256Digest,
}

/// A registry client; one per build, shared by every image fetch.
pub struct RegistryClient {
    http: Client,
    settings: RegistrySettings,
    authorizations: Authorizations,
}

impl RegistryClient {
    pub fn new(settings: RegistrySettings) -> Self {
        let http = Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("berth-build/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("HTTP client builds");
        Self {
            http,
            settings,
            authorizations: Authorizations::default(),
        }
    }

    /// Fetches the manifest or index that `target` (a tag or digest) names in `reference`'s
    /// repository; a digest target is verified against the bytes received.
    pub async fn fetch_manifest(
        &self,
        reference: &Reference,
        target: &str,
    ) -> Result<FetchedManifest, RegistryError> {
        let registry = reference.registry();
        let url = format!(
            "{}/v2/{}/manifests/{target}",
            self.base_url(registry),
            reference.repository()
        );
        let response = self
            .send(reference, || {
                self.http.get(&url).header(ACCEPT, MANIFEST_ACCEPT)
            })
            .await?;
        match response.status() {
            status if status.is_success() => {}
            StatusCode::NOT_FOUND => {
                // Through a mirror, the mirror is the registry that lacks it.
                let registry = match self.mirror(registry) {
                    Some(mirror) => format!("{mirror} (the mirror of {registry})"),
                    None => registry.to_string(),
                };
                return Err(RegistryError::NotFound {
                    registry,
                    reference: reference.whole(),
                });
            }
            status => {
                return Err(RegistryError::Status {
                    registry: registry.to_string(),
                    url,
                    status,
                });
            }
        }
        let header_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or(value).trim().to_string());
        let bytes = response
            .bytes()
            .await
            .map_err(|source| RegistryError::Body {
                registry: registry.to_string(),
                source,
            })?
            .to_vec();
        let digest = Sha256Digest::of(&bytes);
        if let Ok(expected) = target.parse::<Sha256Digest>()
            && expected != digest
        {
            return Err(RegistryError::ManifestDigest {
                reference: reference.whole(),
                expected,
                actual: digest,
            });
        }
        let media_type = oci::sniff_media_type(&bytes)
            .or(header_type)
            .unwrap_or_else(|| oci::OCI_MANIFEST_MEDIA_TYPE.to_string());
        Ok(FetchedManifest {
            bytes,
            media_type,
            digest,
        })
    }

    /// Downloads a blob of `reference`'s repository into the cache, verifying size and digest.
    pub async fn fetch_blob(
        &self,
        reference: &Reference,
        descriptor: &oci::Descriptor,
        cache: &BlobCache,
        progress: &dyn Progress,
    ) -> Result<Downloaded, RegistryError> {
        let url = format!(
            "{}/v2/{}/blobs/{}",
            self.base_url(reference.registry()),
            reference.repository(),
            descriptor.digest
        );
        let expected = Expected {
            digest: Some(descriptor.digest),
            size: Some(descriptor.size),
        };
        if !cache.contains(&descriptor.digest) && !self.authorizations.known(reference) {
            // Learn the repository's authorization once, before the body streams.
            self.send(reference, || self.http.head(&url)).await?;
        }
        let authorization = self.authorizations.get(reference);
        let downloaded = download::download_to_cache(
            &format!("{} ({})", url, reference.whole()),
            cache,
            expected,
            self.settings.retry,
            progress,
            || {
                let request = self.http.get(&url);
                match &authorization {
                    Some(value) => request.header(AUTHORIZATION, value.clone()),
                    None => request,
                }
            },
        )
        .await?;
        Ok(downloaded)
    }

    /// Sends a request with retries, answering one authentication challenge if the registry asks.
    async fn send(
        &self,
        reference: &Reference,
        request: impl Fn() -> RequestBuilder,
    ) -> Result<Response, RegistryError> {
        let mut response = self.send_with_retries(reference, &request).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_string();
            // A mirror's credentials are the mirror's; otherwise the registry's own.
            let credentials_host = self
                .mirror(reference.registry())
                .unwrap_or(reference.registry())
                .to_string();
            let authorization =
                authentication::answer(&self.http, reference, &credentials_host, &challenge)
                    .await?;
            self.authorizations.learned(reference, authorization);
            response = self.send_with_retries(reference, &request).await?;
            if response.status() == StatusCode::UNAUTHORIZED {
                return Err(authentication::unauthorized(
                    reference,
                    "the credentials were not accepted",
                ));
            }
        } else {
            self.authorizations.anonymous(reference);
        }
        Ok(response)
    }

    async fn send_with_retries(
        &self,
        reference: &Reference,
        request: &impl Fn() -> RequestBuilder,
    ) -> Result<Response, RegistryError> {
        let retry = self.settings.retry;
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                tokio::time::sleep(retry.delay(attempt)).await;
            }
            let mut builder = request();
            if let Some(value) = self.authorizations.get(reference) {
                builder = builder.header(AUTHORIZATION, value);
            }
            match builder.send().await {
                Ok(response)
                    if (response.status().is_server_error()
                        || response.status() == StatusCode::TOO_MANY_REQUESTS)
                        && attempt < retry.attempts => {}
                Ok(response) => return Ok(response),
                Err(error) if attempt < retry.attempts => {
                    tracing::debug!("retrying {}: {error}", reference.registry());
                }
                Err(source) => {
                    return Err(RegistryError::Unreachable {
                        registry: reference.registry().to_string(),
                        attempts: attempt,
                        source,
                    });
                }
            }
        }
    }

    /// The registry a reference's registry is reached as: its mirror, when one is given, else
    /// itself (as docker.io's API host for docker.io).
    fn host<'a>(&'a self, registry: &'a str) -> &'a str {
        match (self.mirror(registry), registry) {
            (Some(mirror), _) => mirror,
            (None, "docker.io" | "index.docker.io") => "registry-1.docker.io",
            (None, other) => other,
        }
    }

    /// The mirror `--registry-mirror` names for `registry` (docker.io by either name).
    fn mirror(&self, registry: &str) -> Option<&str> {
        let canonical = match registry {
            "index.docker.io" => "docker.io",
            other => other,
        };
        self.settings
            .mirrors
            .iter()
            .find(|(from, _)| from == canonical)
            .map(|(_, to)| to.as_str())
    }

    fn base_url(&self, registry: &str) -> String {
        let host = self.host(registry);
        let scheme = if self.is_insecure(host) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{host}")
    }

    fn is_insecure(&self, host: &str) -> bool {
        let name = host
            .rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
            .trim_start_matches('[')
            .trim_end_matches(']');
        name == "localhost"
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || self
                .settings
                .insecure
                .iter()
                .any(|insecure| insecure == host || insecure == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_named_registries_use_plain_http() {
        let client = RegistryClient::new(RegistrySettings {
            insecure: vec!["registry.lan:5000".into()],
            ..Default::default()
        });
        assert_eq!(client.base_url("127.0.0.1:5000"), "http://127.0.0.1:5000");
        assert_eq!(client.base_url("localhost:5000"), "http://localhost:5000");
        assert_eq!(client.base_url("[::1]:5000"), "http://[::1]:5000");
        assert_eq!(
            client.base_url("registry.lan:5000"),
            "http://registry.lan:5000"
        );
        assert_eq!(client.base_url("docker.io"), "https://registry-1.docker.io");
        assert_eq!(client.base_url("quay.io"), "https://quay.io");
    }
}
