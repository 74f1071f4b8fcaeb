//! The test harness shared by every crate's tests (and by the grid's runner): real servers and
//! tools on loopback, each started per test with its own ports and folders, and stopped when
//! dropped; the dists the tests and the grid install; hosts as network namespaces.

pub mod apt;
pub mod cli_docs;
mod dist_build;
mod file_server;
pub mod images;
pub mod kubelet_host;
mod kubernetes_api;
pub mod kubernetes_cluster;
pub mod kubernetes_dist;
pub mod kurl_dist;
pub mod machine;
pub mod network;
pub mod rpm;
mod runtimes;
pub mod s3;

pub use cli_docs::{conforms, undocumented};
pub use file_server::{Fault, FileServer};
pub use kubernetes_api::{KubernetesApi, kubeconfig};
pub use runtimes::{Containerd, Docker};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Waits until `condition` holds, polling; panics with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Another binary of the workspace, built beside `binary` (a test's own `CARGO_BIN_EXE_…`)
/// when the whole workspace is built.
pub fn built_beside(binary: &str, name: &str) -> PathBuf {
    let path = Path::new(binary).with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: build the whole workspace (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The shared fixtures of real kURL inputs (`kurl-addons`, `kurl-manifests`, `kurl-specs`, …),
/// read in place beside the checkout. A test that needs them fails, naming the folder, when
/// they are missing: it never passes without its inputs.
pub fn kurl_fixtures(part: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures")
        .join(part);
    assert!(
        path.exists(),
        "the kURL fixtures are missing: {} (they sit beside the checkout, in shared/fixtures)",
        path.display()
    );
    path
}

/// Standard output, then standard error.
pub fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Fails the test with a clear message when a tool the test needs is missing.
pub fn require(program: &str, package: &str) -> PathBuf {
    which::which(program).unwrap_or_else(|_| {
        panic!("`{program}` is not installed: run scripts/test.sh, or apt-get install {package}")
    })
}

/// The bytes of every file below `dir` (0 when it does not exist).
pub fn size_below(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.metadata().ok())
        .filter(|metadata| metadata.is_file())
        .map(|metadata| metadata.len())
        .sum()
}

/// A process killed when dropped.
pub struct Server {
    child: Child,
}

impl Server {
    /// Starts `command` with its error output in `log`.
    pub fn spawn(command: &mut Command, log: &Path) -> Server {
        let log = fs_err::File::create(log).unwrap();
        let child = command
            .stdout(Stdio::null())
            .stderr(log.into_parts().0)
            .spawn()
            .unwrap_or_else(|error| panic!("{command:?}: {error}"));
        Server { child }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Debian `docker-registry` (distribution v2) on loopback with storage in a temp dir.
pub struct Registry {
    pub address: String,
    pub storage: PathBuf,
    /// `user:password` when started with basic auth.
    pub credentials: Option<String>,
    _server: Server,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        Self::start_with(None)
    }

    pub fn start_with_basic_auth(user: &str, password: &str) -> Registry {
        Self::start_with(Some((user, password)))
    }

    fn start_with(auth: Option<(&str, &str)>) -> Registry {
        let binary = require("docker-registry", "docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog: {{ level: error }}\nstorage: {{ filesystem: {{ rootdirectory: {} }}, delete: {{ enabled: true }} }}\nhttp: {{ addr: 127.0.0.1:{port} }}\n",
            storage.display()
        );
        if let Some((user, password)) = auth {
            require("htpasswd", "apache2-utils");
            let output = run(Command::new("htpasswd").args(["-Bbn", user, password]));
            let htpasswd = dir.path().join("htpasswd");
            fs_err::write(&htpasswd, output.stdout).unwrap();
            config.push_str(&format!(
                "auth: {{ htpasswd: {{ realm: test, path: {} }} }}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        fs_err::write(&config_path, config).unwrap();
        let server = Server::spawn(
            Command::new(binary).arg("serve").arg(&config_path),
            &dir.path().join("registry.log"),
        );
        let address = format!("127.0.0.1:{port}");
        let probe = format!("http://{address}/v2/");
        wait_until("the registry to answer", Duration::from_secs(20), || {
            ureq_status(&probe).is_some()
        });
        Registry {
            address,
            storage,
            credentials: auth.map(|(user, password)| format!("{user}:{password}")),
            _server: server,
            _dir: dir,
        }
    }

    /// Where the registry keeps the data of blob `hex`.
    pub fn blob_data(&self, hex: &str) -> PathBuf {
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

/// HTTP status of a GET, or None if nothing answers (a raw HTTP/1.0 request over TCP).
pub fn ureq_status(url: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Runs a command and panics with its output if it fails.
pub fn run(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A scratch add-ons repository: `<root>/addons/<name>/<version>/…`.
pub struct AddonRepository {
    pub dir: tempfile::TempDir,
}

impl Default for AddonRepository {
    fn default() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl AddonRepository {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an add-on folder with this Manifest and a small install.sh; returns the folder.
    pub fn addon(&self, name: &str, version: &str, manifest: &str) -> PathBuf {
        let folder = self.root().join("addons").join(name).join(version);
        fs_err::create_dir_all(&folder).unwrap();
        fs_err::write(folder.join("Manifest"), manifest).unwrap();
        fs_err::write(
            folder.join("install.sh"),
            format!("function {name}() {{\n    echo installing {name}\n}}\n"),
        )
        .unwrap();
        folder
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root().join(relative);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(&path, content).unwrap();
        path
    }
}

/// Every file below `dir`, relative, sorted.
pub fn files_below(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_type().is_dir())
        .map(|entry| {
            entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    files.sort();
    files
}
