//! What only the builder's tests need; the shared harness is `berth-testgrid`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub use berth_testkit::*;

/// Pushes an image of `layers` to `registry` as `repository:tag`, and writes an add-on
/// `name/version` whose Manifest has the one line `image <image_name> <that reference>`.
/// Returns the add-on repository (keep it alive) and the add-on folder.
pub fn addon_with_image(
    registry: &Registry,
    (name, version, image_name): (&str, &str, &str),
    (repository, tag): (&str, &str),
    layers: Vec<images::Layer>,
) -> (AddonRepository, PathBuf) {
    images::push_image(registry, repository, tag, layers);
    let addons = AddonRepository::new();
    let folder = addons.addon(
        name,
        version,
        &format!(
            "image {image_name} {}/{repository}:{tag}\n",
            registry.address
        ),
    );
    (addons, folder)
}

/// `berth-build` with an isolated cache and docker config.
pub struct BerthBuild {
    pub cache: tempfile::TempDir,
    pub docker_config: tempfile::TempDir,
    pub envs: Vec<(String, String)>,
}

impl BerthBuild {
    pub fn new() -> Self {
        let docker_config = tempfile::tempdir().unwrap();
        // As a docker client leaves it; buildah refuses a DOCKER_CONFIG without one.
        fs_err::write(docker_config.path().join("config.json"), "{}").unwrap();
        Self {
            cache: tempfile::tempdir().unwrap(),
            docker_config,
            envs: Vec::new(),
        }
    }

    pub fn command(&self, arguments: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_berth-build"));
        command
            .args(arguments)
            .env("BERTH_CACHE_DIR", self.cache.path())
            .env("DOCKER_CONFIG", self.docker_config.path())
            .env_remove("BERTH_INSECURE_REGISTRIES");
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        command
    }

    /// Runs and returns (success, stdout, stderr).
    pub fn run(&self, arguments: &[&str]) -> (bool, String, String) {
        let output = self.command(arguments).output().unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Runs `package` and panics unless it succeeds; returns the package's sha256.
    pub fn package(&self, addon: &Path, out: &Path) -> String {
        let (ok, stdout, stderr) = self.run(&[
            "package",
            addon.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(ok, "package failed:\n{stderr}");
        stdout.split_whitespace().next().unwrap().to_string()
    }
}

/// What a host package `Fetcher` borrows: an HTTP client and a blob cache of its own.
pub struct Client {
    http: reqwest::Client,
    cache: berth_build::fetch::cache::BlobCache,
    _cache_dir: tempfile::TempDir,
}

impl Client {
    pub fn new() -> Self {
        let cache_dir = tempfile::tempdir().unwrap();
        Self {
            http: reqwest::Client::new(),
            cache: berth_build::fetch::cache::BlobCache::open(cache_dir.path()).unwrap(),
            _cache_dir: cache_dir,
        }
    }

    pub fn fetcher(&self) -> berth_build::host_packages::fetch::Fetcher<'_> {
        berth_build::host_packages::fetch::Fetcher {
            http: &self.http,
            cache: &self.cache,
            retry: berth_build::fetch::download::RetryPolicy::default(),
        }
    }
}

/// A runtime for the async parts of the library.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Asserts that a host package download was refused for its digest: the error names the URL
/// (ending in `url_end`), the digest the index gives and the digest of the `served` bytes.
pub fn assert_refused_for_its_digest(
    error: &berth_build::host_packages::fetch::FetchError,
    url_end: &str,
    indexed: &str,
    served: &[u8],
) {
    let berth_build::host_packages::fetch::FetchError::Download { url, source, .. } = error else {
        panic!("{error}");
    };
    assert!(url.ends_with(url_end), "{url}");
    let message = format!("{error}: {source}");
    assert!(
        message.contains(indexed)
            && message.contains(&berth_formats::Sha256Digest::of(served).hex()),
        "names both digests: {message}"
    );
}
