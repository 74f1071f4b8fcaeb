//! Loading a package's images into the node's container runtime: containerd through
//! `ctr -n k8s.io images import` (the namespace the kubelet uses), or docker through
//! `docker load`. Images whose manifest digest the runtime already holds under the same
//! name are not imported again.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_formats::package_index::ImageRecord;

/// The containerd namespace Kubernetes uses.
pub const NAMESPACE: &str = "k8s.io";

#[derive(Debug, Clone)]
pub enum Runtime {
    Containerd { ctr: PathBuf },
    Docker { docker: PathBuf },
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "{addon} has images but no container runtime answers\nhint: start containerd (ctr must reach it, CONTAINERD_ADDRESS if not at its default socket) or docker, or install the runtime's add-on before this one"
    )]
    NoRuntime { addon: String },
    #[error("failed to run {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("failed to stream {path} to the runtime")]
    Stream {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Runtime {
    /// The runtime this node runs: `BERTH_CONTAINER_RUNTIME` (containerd or docker) if set,
    /// else containerd when `ctr` reaches it, else docker when its daemon answers.
    pub fn detect() -> Option<Runtime> {
        let choice = std::env::var("BERTH_CONTAINER_RUNTIME").unwrap_or_default();
        let containerd = || {
            let ctr = which::which("ctr").ok()?;
            let socket = std::env::var_os("CONTAINERD_ADDRESS")
                .unwrap_or_else(|| "/run/containerd/containerd.sock".into());
            if !Path::new(&socket).exists() {
                return None;
            }
            let answers = Command::new(&ctr)
                .args(["--connect-timeout", "3s", "version"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            answers.then_some(Runtime::Containerd { ctr })
        };
        let docker = || {
            let docker = which::which("docker").ok()?;
            if !Path::new("/var/run/docker.sock").exists()
                && std::env::var_os("DOCKER_HOST").is_none()
            {
                return None;
            }
            let answers = Command::new(&docker)
                .args(["info", "--format", "{{.ID}}"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            answers.then_some(Runtime::Docker { docker })
        };
        match choice.as_str() {
            "containerd" => containerd(),
            "docker" => docker(),
            _ => containerd().or_else(docker),
        }
    }

    /// `(reference, manifest digest)` of every image the runtime holds.
    fn present(&self) -> Result<HashSet<(String, String)>, ImageError> {
        let output = match self {
            Runtime::Containerd { ctr } => {
                output(Command::new(ctr).args(["--namespace", NAMESPACE, "images", "ls"]))?
            }
            Runtime::Docker { docker } => output(Command::new(docker).args([
                "images",
                "--digests",
                "--format",
                "{{.Repository}}:{{.Tag}} x {{.Digest}}",
            ]))?,
        };
        Ok(output
            .lines()
            .skip(usize::from(matches!(self, Runtime::Containerd { .. })))
            .filter_map(|line| {
                let mut columns = line.split_whitespace();
                let reference = columns.next()?;
                let digest = columns.nth(1)?;
                Some((reference.to_string(), digest.to_string()))
            })
            .collect())
    }

    /// Imports the OCI layout at `layout` unless every image in `records` is present.
    /// Returns whether it imported.
    pub fn load(&self, layout: &Path, records: &[ImageRecord]) -> Result<bool, ImageError> {
        let present = self.present()?;
        let missing = records.iter().any(|record| {
            !present.contains(&(record.reference.clone(), record.manifest_digest.to_string()))
        });
        if !missing {
            return Ok(false);
        }
        let mut command = match self {
            Runtime::Containerd { ctr } => {
                let mut command = Command::new(ctr);
                command.args(["--namespace", NAMESPACE, "images", "import", "-"]);
                command
            }
            Runtime::Docker { docker } => {
                let mut command = Command::new(docker);
                command.args(["load"]);
                command
            }
        };
        let shown = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ImageError::Spawn {
                program: shown.clone(),
                source,
            })?;
        let stdin = child.stdin.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        // Whatever happens, stdin is closed when this returns: the runtime then sees the end.
        let streamed = (move || -> std::io::Result<()> {
            let mut builder = tar::Builder::new(std::io::BufWriter::with_capacity(1 << 20, stdin));
            builder.follow_symlinks(false);
            builder.append_dir_all(".", layout)?;
            builder
                .into_inner()?
                .into_inner()
                .map_err(|e| e.into_error())?;
            Ok(())
        })();
        let status = child.wait().map_err(|source| ImageError::Spawn {
            program: shown.clone(),
            source,
        })?;
        let stderr = errors.join().unwrap_or_default();
        if !status.success() {
            return Err(ImageError::Failed {
                command: shown,
                status: status.to_string(),
                stderr: stderr.trim().to_string(),
            });
        }
        streamed.map_err(|source| ImageError::Stream {
            path: layout.to_path_buf(),
            source,
        })?;
        Ok(true)
    }
}

fn output(command: &mut Command) -> Result<String, ImageError> {
    let shown = format!("{command:?}");
    let output = command.output().map_err(|source| ImageError::Spawn {
        program: shown.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(ImageError::Failed {
            command: shown,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
