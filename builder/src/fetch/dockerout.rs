//! `dockerout` directives: build a Dockerfile with no context and run the image with a folder
//! mounted at `/out`, as kURL does. Docker is used where a daemon answers, buildah otherwise;
//! buildah honours its usual environment (`STORAGE_DRIVER`, `BUILDAH_ISOLATION`, …).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::arguments;
use crate::process::{self, ProcessError};

/// The tool that builds and runs dockerout images.
#[derive(Debug, Clone)]
pub enum Engine {
    Docker(PathBuf),
    Buildah(PathBuf),
}

/// Why a dockerout step failed.
#[derive(Debug, thiserror::Error)]
pub enum DockerOutError {
    #[error(
        "no container engine: no docker daemon answers and buildah is not installed; install buildah (Debian package `buildah`)"
    )]
    NoEngine,
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("the image built from {dockerfile} has no ENTRYPOINT or CMD to run")]
    NothingToRun { dockerfile: PathBuf },
    #[error("failed to read `buildah inspect` output: {0}")]
    Inspect(String),
    #[error("failed to prepare a build folder")]
    Io(#[from] std::io::Error),
}

impl Engine {
    /// Docker if its daemon answers, else buildah.
    pub fn detect() -> Result<Engine, DockerOutError> {
        if let Ok(docker) = which::which("docker")
            && process::run(&docker, arguments!["info", "--format", "{{.ID}}"]).is_ok()
        {
            return Ok(Engine::Docker(docker));
        }
        which::which("buildah")
            .map(Engine::Buildah)
            .map_err(|_| DockerOutError::NoEngine)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Engine::Docker(_) => "docker",
            Engine::Buildah(_) => "buildah",
        }
    }

    /// Builds `dockerfile` as `tag` and runs it with `out` mounted at `/out`.
    pub fn build_and_run(
        &self,
        dockerfile: &Path,
        version: Option<&str>,
        tag: &str,
        out: &Path,
    ) -> Result<(), DockerOutError> {
        let context = tempfile::tempdir()?;
        let mut build: Vec<OsString> = match self {
            Engine::Docker(_) => arguments!["build", "--quiet", "--tag", tag],
            Engine::Buildah(_) => arguments!["bud", "--quiet", "--tag", tag],
        };
        if let Some(version) = version {
            build.extend(arguments!["--build-arg", format!("VERSION={version}")]);
        }
        build.extend(arguments!["--file", dockerfile, context.path()]);
        let volume = format!("{}:/out", out.display());
        match self {
            Engine::Docker(docker) => {
                process::run(docker, &build)?;
                let result =
                    process::run(docker, arguments!["run", "--rm", "--volume", &volume, tag]);
                let _ = process::run(docker, arguments!["rmi", tag]);
                result?;
            }
            Engine::Buildah(buildah) => {
                process::run(buildah, &build)?;
                let result = self.buildah_run(buildah, dockerfile, tag, &volume);
                let _ = process::run(buildah, arguments!["rmi", tag]);
                result?;
            }
        }
        Ok(())
    }

    /// `buildah run` needs the command spelled out: take ENTRYPOINT + CMD from the image.
    fn buildah_run(
        &self,
        buildah: &Path,
        dockerfile: &Path,
        tag: &str,
        volume: &str,
    ) -> Result<(), DockerOutError> {
        let inspect = process::run(buildah, arguments!["inspect", "--type", "image", tag])?;
        let json: serde_json::Value = serde_json::from_slice(&inspect)
            .map_err(|error| DockerOutError::Inspect(error.to_string()))?;
        let config = &json["OCIv1"]["config"];
        let words = |key: &str| -> Vec<OsString> {
            config[key]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(OsString::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let command: Vec<OsString> = words("Entrypoint")
            .into_iter()
            .chain(words("Cmd"))
            .collect();
        if command.is_empty() {
            return Err(DockerOutError::NothingToRun {
                dockerfile: dockerfile.to_path_buf(),
            });
        }
        let container = process::run(buildah, arguments!["from", "--quiet", "--pull-never", tag])?;
        let container = String::from_utf8_lossy(&container).trim().to_string();
        let mut run = arguments!["run", "--volume", volume, &container, "--"];
        run.extend(command);
        let result = process::run(buildah, &run);
        let _ = process::run(buildah, arguments!["rm", &container]);
        result?;
        Ok(())
    }
}
