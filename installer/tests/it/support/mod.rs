//! What the installer's tests share: a node (a temporary root) driven through the real `berth`
//! binary, and a dist of packages built from scratch add-on folders by the real builder.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

pub use berth_testkit::*;

pub mod certificates;
pub mod fleet;
pub mod kurl_specs;

/// A node: Berth's root is a temporary folder, so state, packages and logs stay in it.
pub struct Node {
    pub root: tempfile::TempDir,
    pub envs: Vec<(String, String)>,
}

/// The items of a list document (`berth nodes -o json`: `NodeList`; `berth rollout status -o
/// json`: `RolloutList`).
pub fn items(bytes: &[u8], kind: &str) -> Vec<serde_json::Value> {
    let document: serde_json::Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(bytes)));
    assert_eq!(document["apiVersion"], "berth/v1", "{document:#}");
    assert_eq!(document["kind"], kind, "{document:#}");
    let schema = match kind {
        "NodeList" => "node-list.v1.json",
        "RolloutList" => "rollout-list.v1.json",
        other => panic!("no schema for {other}"),
    };
    conforms(schema, &document);
    document["items"].as_array().unwrap().clone()
}

impl Node {
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().unwrap(),
            envs: Vec::new(),
        }
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.envs.push((
            key.to_string(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    pub fn command(&self, arguments: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_berth"));
        command
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .env_remove("BERTH_DIST")
            .env_remove("BERTH_CONTAINER_RUNTIME");
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        command
    }

    pub fn berth(&self, arguments: &[&str]) -> Output {
        self.command(arguments).output().unwrap()
    }

    /// The `berth install` command for the spec and dist, to run as the test needs.
    pub fn install_command(&self, spec: &Path, dist: &str) -> Command {
        self.command(&["install", "--spec", spec.to_str().unwrap(), "--dist", dist])
    }

    /// Runs `berth install` with the spec and dist, plus `extra` arguments.
    pub fn install(&self, spec: &Path, dist: &str, extra: &[&str]) -> Output {
        self.run("install", spec, dist, extra)
    }

    /// Runs `berth COMMAND` (`install`, `join`, `upgrade`) with the spec and dist, plus
    /// `extra` arguments.
    pub fn run(&self, command: &str, spec: &Path, dist: &str, extra: &[&str]) -> Output {
        self.command(&[command, "--spec", spec.to_str().unwrap(), "--dist", dist])
            .args(extra)
            .output()
            .unwrap()
    }

    /// `berth plan -o json`: each add-on's decision, by name.
    pub fn decisions(&self, spec: &Path, dist: &str, extra: &[&str]) -> Vec<(String, String)> {
        let mut arguments = vec![
            "plan",
            "-o",
            "json",
            "--spec",
            spec.to_str().unwrap(),
            "--dist",
            dist,
        ];
        arguments.extend(extra);
        let output = self.berth(&arguments);
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("plan printed no JSON: {}", text(&output.stderr)));
        conforms("plan.v1.json", &plan);
        plan["addons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|addon| {
                (
                    addon["name"].as_str().unwrap().to_string(),
                    addon["decision"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// `berth status -o json` (checked against its schema), by add-on name: each add-on's
    /// record as the node keeps it, its `progressing` as the command saw it (a run that
    /// stopped reads Interrupted) and `health` as the command's probe left it.
    pub fn status(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        let output = self.berth(&["status", "-o", "json"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        conforms("node-status.v1.json", &document);
        let read = |path: PathBuf| {
            fs_err::read(&path)
                .ok()
                .map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).unwrap())
        };
        document["addons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|addon| {
                let name = addon["name"].as_str().unwrap().to_string();
                let mut record = read(self.install_dir().join(format!("state/{name}.json")))
                    .unwrap_or_else(|| panic!("{name} has no record"));
                let progressing = &addon["conditions"][2];
                assert_eq!(progressing["type"], "Progressing");
                record["progressing"]["reason"] = progressing["reason"].clone();
                record["progressing"]["message"] = progressing["message"].clone();
                if let Some(health) = read(self.install_dir().join(format!("health/{name}.json"))) {
                    record["health"] = health;
                }
                (name, record)
            })
            .collect()
    }

    pub fn install_dir(&self) -> PathBuf {
        self.root.path().join("var/lib/berth")
    }

    /// Each installed file's sha256, by path under the node's add-on folder.
    pub fn installed_files(&self) -> std::collections::BTreeMap<String, String> {
        let root = self.install_dir().join("addons");
        let mut files = std::collections::BTreeMap::new();
        for entry in walkdir::WalkDir::new(&root) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                files.insert(
                    entry
                        .path()
                        .strip_prefix(&root)
                        .unwrap()
                        .display()
                        .to_string(),
                    berth_formats::Sha256Digest::of_file(entry.path())
                        .unwrap()
                        .hex(),
                );
            }
        }
        files
    }

    /// What each add-on's record says was applied: name, version and package digest.
    pub fn applied(&self) -> Vec<(String, String, String)> {
        self.status()
            .iter()
            .map(|(name, record)| {
                (
                    name.clone(),
                    record["current"]["version"].to_string(),
                    record["current"]["packageDigest"].to_string(),
                )
            })
            .collect()
    }
}

/// Starts `command` with its output discarded, for a run the test stops or waits on itself.
pub fn spawn_quietly(command: &mut Command) -> std::process::Child {
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The first node's airgap join command (what `join_command` prints), once its `berth fleet
/// serve` has published the fleet's parameters in it.
pub fn fleet_join_command(join_command: impl Fn() -> Output) -> String {
    let mut command = String::new();
    wait_until(
        "the fleet's join parameters",
        std::time::Duration::from_secs(30),
        || {
            command = text(&join_command().stdout);
            command.contains("fleet-token=")
        },
    );
    command
}

/// The value of `key` among the `key=value` words of a join command.
pub fn join_param(command: &str, key: &str) -> String {
    command
        .split_whitespace()
        .find_map(|word| word.trim_matches('\'').strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {command}"))
        .to_string()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts success and returns stdout + stderr.
pub fn succeeded(output: &Output) -> String {
    let all = printed(output);
    assert!(output.status.success(), "berth failed:\n{all}");
    all
}

/// Asserts failure and returns stdout + stderr.
pub fn failed(output: &Output) -> String {
    let all = printed(output);
    assert!(
        !output.status.success(),
        "berth succeeded but should not have:\n{all}"
    );
    all
}

/// Scratch add-ons packaged into a dist folder by the real builder.
pub struct TestDist {
    pub addons: AddonRepository,
    pub dist: tempfile::TempDir,
    /// Target distros for the Manifests' host package directives.
    pub distros: Vec<berth_build::host_packages::distros::Distro>,
    cache: tempfile::TempDir,
    /// Install order.
    names: Vec<String>,
    /// The repository's own add-on versions packaged by `examples`, read in place.
    examples: Vec<(String, String, PathBuf)>,
    /// The architecture packages are built for (`amd64` unless a test says otherwise).
    pub arch: String,
    /// How packages are compressed (gzip unless a test says otherwise).
    pub compression: berth_formats::compression::Compression,
}

struct Silent;

impl berth_build::reporter::Reporter for Silent {
    fn start(&self, _: &str, _: Option<u64>) -> Box<dyn berth_build::reporter::Progress> {
        Box::new(Silent)
    }
}

impl berth_build::reporter::Progress for Silent {
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

impl TestDist {
    pub fn new() -> Self {
        Self {
            addons: AddonRepository::new(),
            dist: tempfile::tempdir().unwrap(),
            distros: Vec::new(),
            cache: tempfile::tempdir().unwrap(),
            names: Vec::new(),
            examples: Vec::new(),
            arch: "amd64".into(),
            compression: Default::default(),
        }
    }

    /// A dist of some of the repository's own add-ons (all their versions), and the
    /// repository's example spec.
    pub fn examples(names: &[&str]) -> (PathBuf, Self) {
        Self::examples_for(names, Vec::new())
    }

    /// The same, with host packages for `distros`.
    pub fn examples_for(
        names: &[&str],
        distros: Vec<berth_build::host_packages::distros::Distro>,
    ) -> (PathBuf, Self) {
        let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut dist = Self::new();
        dist.distros = distros;
        let folders: Vec<PathBuf> =
            berth_build::source::repository::discover(&repository.join("addons"))
                .unwrap()
                .into_iter()
                .filter(|folder| {
                    let name = folder.parent().unwrap().file_name().unwrap();
                    names.iter().any(|wanted| name == *wanted)
                })
                .collect();
        for folder in &folders {
            dist.package(folder);
        }
        let found: Vec<(String, String)> = folders
            .iter()
            .map(|folder| {
                let version = folder.file_name().unwrap().to_string_lossy().into_owned();
                let name = folder.parent().unwrap().file_name().unwrap();
                (name.to_string_lossy().into_owned(), version)
            })
            .collect();
        for ((name, version), folder) in found.iter().zip(&folders) {
            if !dist.names.contains(name) {
                dist.names.push(name.clone());
            }
            dist.examples
                .push((name.clone(), version.clone(), folder.clone()));
        }
        let existing =
            berth_formats::versions::VersionsFile::load(&repository.join("versions.json")).unwrap();
        let mut versions = berth_formats::versions::VersionsFile::generate(Some(&existing), &found);
        let folders: Vec<&Path> = folders.iter().map(PathBuf::as_path).collect();
        berth_build::package::build::attach_fields(&mut versions, &folders).unwrap();
        fs_err::write(dist.dist.path().join("versions.json"), versions.to_bytes()).unwrap();
        (repository.join("examples/installer.yaml"), dist)
    }

    pub fn url(&self) -> String {
        self.dist.path().display().to_string()
    }

    /// Writes add-on `name` `version` with this install.sh (and an empty Manifest) and packages it.
    pub fn addon(&mut self, name: &str, version: &str, install_sh: &str) -> PathBuf {
        self.addon_with_manifest(name, version, "# no images or assets\n", install_sh)
    }

    /// Writes add-on `name` `version` with this Manifest and install.sh, and packages it.
    pub fn addon_with_manifest(
        &mut self,
        name: &str,
        version: &str,
        manifest: &str,
        install_sh: &str,
    ) -> PathBuf {
        let folder = self.addons.root().join("addons").join(name).join(version);
        fs_err::create_dir_all(&folder).unwrap();
        fs_err::write(folder.join("Manifest"), manifest).unwrap();
        fs_err::write(folder.join("install.sh"), install_sh).unwrap();
        self.package(&folder);
        if !self.names.iter().any(|known| known == name) {
            self.names.push(name.to_string());
        }
        self.write_versions();
        folder
    }

    /// Writes add-on `name` 1.0.0 whose one image, `docker.io/local/<name>:1`, is busybox's
    /// layer (which every such add-on shares) and a layer holding `/greeting` (`<name>\n`),
    /// with this install.sh, and packages it.
    pub fn addon_with_greeting_image(&mut self, name: &str, install_sh: &str) -> PathBuf {
        images::write_oci_archive(
            &self.addons.root().join(format!("{name}.tar")),
            &format!("local/{name}:1"),
            &[images::PlatformImage {
                arch: "amd64",
                layers: vec![
                    images::busybox_layer(),
                    images::layer(&[images::Entry::File(
                        "greeting",
                        format!("{name}\n").as_bytes(),
                        0o644,
                    )]),
                ],
            }],
        );
        self.addon_with_manifest(
            name,
            "1.0.0",
            &format!("image {name} {name}.tar\n"),
            install_sh,
        )
    }

    /// Packages an add-on folder into the dist.
    pub fn package(&self, folder: &Path) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let retry = berth_build::fetch::download::RetryPolicy::default();
        let context = berth_build::package::BuildContext {
            registry: berth_build::fetch::registry::RegistryClient::new(
                berth_build::fetch::registry::RegistrySettings {
                    insecure: Vec::new(),
                    retry,
                    mirrors: Vec::new(),
                },
            ),
            http: reqwest::Client::new(),
            cache: berth_build::fetch::cache::BlobCache::open(self.cache.path()).unwrap(),
            retry,
            reporter: Arc::new(Silent),
            asset_mirrors: Vec::new(),
        };
        let settings = berth_build::package::PackageSettings {
            out_dir: self.dist.path().to_path_buf(),
            arch: self.arch.clone(),
            concurrency: 2,
            compression: berth_formats::compression::Setting::new(self.compression, Some(1))
                .unwrap(),
            mtime: 0,
            skip_unchanged: false,
            distros: self.distros.clone(),
            selected_distros: None,
            sbom: true,
        };
        runtime
            .block_on(berth_build::package::package(&context, folder, &settings))
            .unwrap_or_else(|error| panic!("packaging {} failed: {error}", folder.display()));
    }

    /// versions.json: the add-ons in the order they were first added, versions newest first.
    pub fn write_versions(&self) {
        let mut found = Vec::new();
        let mut folders = Vec::new();
        for (name, version, folder) in &self.examples {
            found.push((name.clone(), version.clone()));
            folders.push(folder.clone());
        }
        for name in &self.names {
            let Ok(entries) = fs_err::read_dir(self.addons.root().join("addons").join(name)) else {
                continue;
            };
            for entry in entries {
                let version = entry.unwrap().file_name().to_string_lossy().into_owned();
                folders.push(self.addons.root().join("addons").join(name).join(&version));
                found.push((name.clone(), version));
            }
        }
        let order = berth_formats::versions::VersionsFile {
            release: None,
            addons: self
                .names
                .iter()
                .map(|name| berth_formats::versions::AddonVersions {
                    name: name.clone(),
                    versions: Vec::new(),
                    order: Default::default(),
                })
                .collect(),
        };
        let mut versions = berth_formats::versions::VersionsFile::generate(Some(&order), &found);
        let folders: Vec<&Path> = folders.iter().map(PathBuf::as_path).collect();
        berth_build::package::build::attach_fields(&mut versions, &folders).unwrap();
        for entry in versions
            .addons
            .iter_mut()
            .flat_map(|addon| addon.versions.iter_mut())
        {
            entry.compression = self.compression;
        }
        fs_err::write(self.dist.path().join("versions.json"), versions.to_bytes()).unwrap();
    }

    /// Writes an Installer spec asking for these add-ons; returns its path.
    pub fn spec(&self, file: &str, addons: &[(&str, &str)]) -> PathBuf {
        let mut text =
            String::from("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n");
        for (name, fields) in addons {
            text.push_str(&format!("  {name}: {{{fields}}}\n"));
        }
        let path = self.addons.root().join(file);
        fs_err::write(&path, text).unwrap();
        path
    }
}

/// What the image of an add-on [`TestDist::addon_with_greeting_image`] wrote prints when it
/// runs in `containerd`: its `/greeting` (`<name>\n`), read by a container of the image.
pub fn run_greeting(containerd: &Containerd, name: &str) -> String {
    let ran = containerd.ctr(&[
        "run",
        "--rm",
        &format!("docker.io/local/{name}:1"),
        &format!("read-{name}"),
        "/bin/busybox",
        "cat",
        "/greeting",
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    text(&ran.stdout)
}

/// The lines hooks appended to a trace file, in order (none when there is no file).
pub fn trace(path: &Path) -> Vec<String> {
    fs_err::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// [`trace`], and the file removed for the next run.
pub fn take_trace(path: &Path) -> Vec<String> {
    let lines = trace(path);
    let _ = fs_err::remove_file(path);
    lines
}
