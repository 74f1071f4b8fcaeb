//! Loading a package's images into the node's container runtime: containerd through
//! `ctr -n k8s.io images import` (the namespace the kubelet uses), or docker through
//! `docker load`. Images whose manifest digest the runtime already holds under the same
//! name are not imported again.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_formats::oci;
use berth_formats::package_index::ImageRecord;

/// The containerd namespace Kubernetes uses (and health.yaml's container probes look in).
pub const NAMESPACE: &str = berth_formats::health::CONTAINERD_NAMESPACE;

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
    #[error("the background import ended without a result")]
    Lost,
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
            answers(&ctr, &["--connect-timeout", "3s", "version"])
                .then_some(Runtime::Containerd { ctr })
        };
        let docker = || {
            let docker = which::which("docker").ok()?;
            if !Path::new("/var/run/docker.sock").exists()
                && std::env::var_os("DOCKER_HOST").is_none()
            {
                return None;
            }
            answers(&docker, &["info", "--format", "{{.ID}}"]).then_some(Runtime::Docker { docker })
        };
        match choice.as_str() {
            "containerd" => containerd(),
            "docker" => docker(),
            _ => containerd().or_else(docker),
        }
    }

    /// `(reference, digest)` of every image the runtime holds: containerd lists manifest
    /// digests; docker lists image IDs (config digests) under short names (`berth/app:1`).
    fn present(&self) -> Result<HashSet<(String, String)>, ImageError> {
        let (listing, header) = match self {
            Runtime::Containerd { ctr } => (
                output(Command::new(ctr).args(["--namespace", NAMESPACE, "images", "ls"]))?,
                1,
            ),
            Runtime::Docker { docker } => (
                output(Command::new(docker).args([
                    "images",
                    "--no-trunc",
                    "--format",
                    "{{.Repository}}:{{.Tag}} - {{.ID}}",
                ]))?,
                0,
            ),
        };
        Ok(listing
            .lines()
            .skip(header)
            .filter_map(|line| {
                let mut columns = line.split_whitespace();
                let reference = columns.next()?;
                let digest = columns.nth(1)?;
                Some((reference.to_string(), digest.to_string()))
            })
            .collect())
    }

    /// How `present` names the image of `record`.
    /// The image references the runtime's containers run (stopped ones too).
    fn used_by_containers(&self) -> Result<HashSet<String>, ImageError> {
        let listing = match self {
            Runtime::Containerd { ctr } => {
                output(Command::new(ctr).args(["--namespace", NAMESPACE, "containers", "ls"]))?
                    .lines()
                    .skip(1)
                    .filter_map(|line| line.split_whitespace().nth(1).map(str::to_string))
                    .collect()
            }
            Runtime::Docker { docker } => {
                output(Command::new(docker).args(["ps", "--all", "--format", "{{.Image}}"]))?
                    .lines()
                    .map(str::to_string)
                    .collect()
            }
        };
        Ok(listing)
    }

    fn key(&self, layout: &Path, record: &ImageRecord) -> std::io::Result<(String, String)> {
        match self {
            Runtime::Containerd { .. } => {
                Ok((record.reference.clone(), record.manifest_digest.to_string()))
            }
            Runtime::Docker { .. } => {
                let short = record
                    .reference
                    .strip_prefix("docker.io/")
                    .unwrap_or(&record.reference);
                let short = short.strip_prefix("library/").unwrap_or(short);
                Ok((
                    short.to_string(),
                    read_manifest(layout, record)?.config.digest.to_string(),
                ))
            }
        }
    }

    /// Removes the images named in `records` from the runtime, with the `sha256:<id>`
    /// references containerd's CRI plugin adds for them; those it does not hold, and those a
    /// container still uses (another node's, on a shared runtime), are passed over. Returns the
    /// references removed.
    pub fn remove(&self, records: &[ImageRecord]) -> Result<Vec<String>, ImageError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let short = |reference: &str| {
            let short = reference.strip_prefix("docker.io/").unwrap_or(reference);
            short.strip_prefix("library/").unwrap_or(short).to_string()
        };
        let in_use = self.used_by_containers()?;
        let records: Vec<&ImageRecord> = records
            .iter()
            .filter(|record| {
                !in_use.contains(&record.reference) && !in_use.contains(&short(&record.reference))
            })
            .collect();
        let present = self.present()?;
        let references: Vec<String> = match self {
            Runtime::Containerd { .. } => present
                .into_iter()
                .filter(|(name, digest)| {
                    records.iter().any(|record| {
                        record.manifest_digest.to_string() == *digest
                            && (*name == record.reference || name.starts_with("sha256:"))
                    })
                })
                .map(|(name, _)| name)
                .collect(),
            Runtime::Docker { .. } => records
                .iter()
                .map(|record| short(&record.reference))
                .filter(|reference| present.iter().any(|(name, _)| name == reference))
                .collect(),
        };
        if references.is_empty() {
            return Ok(references);
        }
        let mut command = match self {
            Runtime::Containerd { ctr } => {
                let mut command = Command::new(ctr);
                command.args(["--namespace", NAMESPACE, "images", "rm"]);
                command
            }
            Runtime::Docker { docker } => {
                let mut command = Command::new(docker);
                command.arg("rmi");
                command
            }
        };
        output(command.args(&references))?;
        Ok(references)
    }

    /// Imports the OCI layout at `layout` unless every image in `records` is present.
    /// Returns the references that were missing: the images Berth brought to the node, and
    /// the only ones its reset removes.
    pub fn load(&self, layout: &Path, records: &[ImageRecord]) -> Result<Vec<String>, ImageError> {
        let missing = self.missing(layout, records)?;
        self.load_missing(layout, records, missing)
    }

    /// [`Runtime::load`] once `missing` (what [`Runtime::missing`] found) is known.
    pub fn load_missing(
        &self,
        layout: &Path,
        records: &[ImageRecord],
        missing: Vec<String>,
    ) -> Result<Vec<String>, ImageError> {
        if missing.is_empty() {
            return Ok(missing);
        }
        // containerd reads a blob it already holds from its own store: only the others are
        // streamed (a layer shared by several add-ons' images goes in once). Should it collect
        // one of those meanwhile, the import fails and is done again with every blob.
        if let Runtime::Containerd { ctr } = self
            && let Ok(held) = output(Command::new(ctr).args([
                "--namespace",
                NAMESPACE,
                "content",
                "ls",
                "--quiet",
            ]))
        {
            let held: HashSet<&str> = held.lines().map(str::trim).collect();
            if !held.is_empty() && self.stream(layout, records, &held).is_ok() {
                return Ok(missing);
            }
        }
        self.stream(layout, records, &HashSet::new())?;
        Ok(missing)
    }

    /// The references of `records` the runtime does not hold.
    pub fn missing(
        &self,
        layout: &Path,
        records: &[ImageRecord],
    ) -> Result<Vec<String>, ImageError> {
        let present = self.present()?;
        let mut missing = Vec::new();
        for record in records {
            let key = self
                .key(layout, record)
                .map_err(|source| ImageError::Stream {
                    path: layout.to_path_buf(),
                    source,
                })?;
            if !present.contains(&key) {
                missing.push(record.reference.clone());
            }
        }
        Ok(missing)
    }

    /// Streams the OCI layout at `layout` into the runtime, less the blobs in `held`.
    fn stream(
        &self,
        layout: &Path,
        records: &[ImageRecord],
        held: &HashSet<&str>,
    ) -> Result<(), ImageError> {
        let stream_error = |source| ImageError::Stream {
            path: layout.to_path_buf(),
            source,
        };
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
        // docker before 25 reads only docker-archives: a manifest.json naming the same blobs
        // makes the layout one as well.
        let docker_manifest = match self {
            Runtime::Docker { .. } => {
                Some(docker_archive_manifest(layout, records).map_err(stream_error)?)
            }
            Runtime::Containerd { .. } => None,
        };
        // Whatever happens, stdin is closed when this returns: the runtime then sees the end.
        let streamed = (move || -> std::io::Result<()> {
            let mut builder = tar::Builder::new(std::io::BufWriter::with_capacity(1 << 20, stdin));
            builder.follow_symlinks(false);
            if let Some(manifest) = docker_manifest {
                let mut header = tar::Header::new_gnu();
                header.set_size(manifest.len() as u64);
                header.set_mode(0o644);
                builder.append_data(&mut header, "manifest.json", manifest.as_slice())?;
            }
            append_layout(&mut builder, layout, held)?;
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
        streamed.map_err(stream_error)?;
        Ok(())
    }
}

/// An OCI layout's files into `builder`, less the blobs in `held` (`sha256:<hex>`).
fn append_layout<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    layout: &Path,
    held: &HashSet<&str>,
) -> std::io::Result<()> {
    let blobs = layout.join("blobs/sha256");
    for file in ["oci-layout", "index.json"] {
        let path = layout.join(file);
        if path.exists() {
            builder.append_path_with_name(&path, file)?;
        }
    }
    if blobs.is_dir() {
        let mut names: Vec<String> = fs_err::read_dir(&blobs)?
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for hex in names {
            if !held.contains(format!("sha256:{hex}").as_str()) {
                builder.append_path_with_name(blobs.join(&hex), format!("blobs/sha256/{hex}"))?;
            }
        }
    }
    Ok(())
}

/// A docker-archive `manifest.json` for the images of an OCI layout: each image's config and
/// layers by their paths in `blobs/sha256/`, tagged with its reference.
fn docker_archive_manifest(layout: &Path, records: &[ImageRecord]) -> std::io::Result<Vec<u8>> {
    let mut entries = Vec::new();
    for record in records {
        let manifest = read_manifest(layout, record)?;
        // A reference by digest alone has no tag for docker to show.
        let tags: Vec<&str> = Some(record.reference.as_str())
            .filter(|reference| !reference.contains('@'))
            .into_iter()
            .collect();
        entries.push(serde_json::json!({
            "Config": blob(&manifest.config.digest),
            "RepoTags": tags,
            "Layers": manifest.layers.iter().map(|layer| blob(&layer.digest)).collect::<Vec<_>>(),
        }));
    }
    Ok(serde_json::to_vec(&entries).expect("JSON"))
}

/// Whether `program arguments` succeeds (its daemon answers).
fn answers(program: &Path, arguments: &[&str]) -> bool {
    Command::new(program)
        .args(arguments)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Where a blob is in an OCI layout, relative to it.
fn blob(digest: &berth_formats::Sha256Digest) -> String {
    format!("{}/{}", oci::BLOBS_DIR, digest.hex())
}

fn read_manifest(layout: &Path, record: &ImageRecord) -> std::io::Result<oci::ImageManifest> {
    let bytes = fs_err::read(layout.join(blob(&record.manifest_digest)))?;
    serde_json::from_slice(&bytes)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
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
