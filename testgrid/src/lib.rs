//! The test harness shared by every crate's tests: real servers and tools on loopback, each
//! started per test with its own ports and folders, and stopped when dropped.

pub mod apt;
pub mod images;
pub mod network;
pub mod rpm;
pub mod s3;

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

/// A private containerd with its own root, state and socket.
pub struct Containerd {
    pub socket: PathBuf,
    _server: Server,
    _dir: tempfile::TempDir,
}

impl Containerd {
    pub fn start() -> Containerd {
        Self::start_with(None)
    }

    /// A containerd inside `host`'s network namespace: containers it runs with the host
    /// network share that host's addresses.
    pub fn start_in(host: &network::Host) -> Containerd {
        Self::start_with(Some(host))
    }

    fn start_with(host: Option<&network::Host>) -> Containerd {
        let binary = require("containerd", "containerd");
        require("runc", "runc");
        let dir = tempfile::Builder::new()
            .prefix("ctd")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("containerd.sock");
        let config = dir.path().join("config.toml");
        fs_err::write(
            &config,
            format!(
                "version = 2\nroot = \"{root}/root\"\nstate = \"{root}/state\"\n[grpc]\n  address = \"{socket}\"\n[debug]\n  level = \"error\"\n",
                root = dir.path().display(),
                socket = socket.display()
            ),
        )
        .unwrap();
        // runc keeps container state in /run/containerd/runc whatever containerd's own state
        // folder: each containerd gets a private one (a mount namespace with a tmpfs there; ctr
        // makes its FIFOs in /run/containerd/fifo, which stays shared),
        // so two of them can run containers of the same name.
        let mut command = match host {
            Some(host) => host.command("unshare"),
            None => Command::new("unshare"),
        };
        fs_err::create_dir_all("/run/containerd/runc").unwrap();
        let server = Server::spawn(
            command
                .args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg("mount -t tmpfs tmpfs /run/containerd/runc && exec \"$0\" --config \"$1\"")
                .arg(&binary)
                .arg(&config),
            &dir.path().join("containerd.log"),
        );
        let containerd = Containerd {
            socket,
            _server: server,
            _dir: dir,
        };
        wait_until("containerd to answer", Duration::from_secs(30), || {
            containerd.ctr(&["version"]).status.success()
        });
        containerd
    }

    /// Every container task ends with containerd: shims outlive it otherwise.
    fn end_tasks(&self) {
        let tasks = self.ctr(&["tasks", "ls", "-q"]);
        for task in String::from_utf8_lossy(&tasks.stdout).split_whitespace() {
            let _ = self.ctr(&["tasks", "delete", "--force", task]);
        }
    }

    pub fn ctr(&self, arguments: &[&str]) -> Output {
        Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(arguments)
            .output()
            .unwrap()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.end_tasks();
    }
}

/// A private docker daemon (Debian's docker.io) with its own data, exec root and socket; no
/// iptables or bridge, so it can run beside anything else.
pub struct Docker {
    pub host: String,
    _server: Server,
    _dir: tempfile::TempDir,
}

impl Docker {
    pub fn start() -> Docker {
        let binary = require("dockerd", "docker.io");
        let dir = tempfile::Builder::new()
            .prefix("dkr")
            .tempdir_in("/tmp")
            .unwrap();
        let host = format!("unix://{}/docker.sock", dir.path().display());
        let server = Server::spawn(
            Command::new(binary)
                .arg("--data-root")
                .arg(dir.path().join("data"))
                .arg("--exec-root")
                .arg(dir.path().join("exec"))
                .arg("--pidfile")
                .arg(dir.path().join("docker.pid"))
                .args(["-H", &host])
                .args(["--iptables=false", "--ip6tables=false", "--bridge=none"]),
            &dir.path().join("dockerd.log"),
        );
        let docker = Docker {
            host,
            _server: server,
            _dir: dir,
        };
        wait_until("dockerd to answer", Duration::from_secs(60), || {
            docker.docker(&["info"]).status.success()
        });
        docker
    }

    pub fn docker(&self, arguments: &[&str]) -> Output {
        Command::new("docker")
            .env("DOCKER_HOST", &self.host)
            .args(arguments)
            .output()
            .unwrap()
    }
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

/// A static file server on loopback for a folder, answering `Range` requests (as a dist
/// mirror does), with a fault on one path if asked.
pub struct FileServer {
    pub url: String,
    /// Every request line received, in order, with its `Range` header when present.
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// What a [`FileServer`] does wrong, and to which path.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    None,
    /// The first answer for the path stops halfway through.
    DropFirst(String),
    /// Every answer for the path stops halfway through.
    DropAlways(String),
    /// The path's answer sends its head and part of its body, then nothing, for ever.
    Stall(String),
    /// The path's answer never ends (no length, zeros for ever).
    Endless(String),
}

impl FileServer {
    pub fn serve(dir: &Path, drop_first: Option<&str>) -> FileServer {
        Self::serve_with(
            dir,
            drop_first.map_or(Fault::None, |path| Fault::DropFirst(path.to_string())),
        )
    }

    pub fn serve_with(dir: &Path, fault: Fault) -> FileServer {
        use std::io::{BufRead, BufReader, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = requests.clone();
        let dir = dir.to_path_buf();
        let fault = std::sync::Arc::new(std::sync::Mutex::new(fault));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (seen, dir, fault) = (seen.clone(), dir.clone(), fault.clone());
                // A connection of its own thread: a stalled answer holds no other up.
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    let _ = reader.read_line(&mut request);
                    let mut range = None;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=")
                        {
                            range = Some(value.trim().to_string());
                        }
                    }
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    seen.lock().unwrap().push(match &range {
                        Some(range) => format!("GET {path} bytes={range}"),
                        None => format!("GET {path}"),
                    });
                    let fault = {
                        let mut fault = fault.lock().unwrap();
                        let now = fault.clone();
                        if now == Fault::DropFirst(path.clone()) {
                            *fault = Fault::None;
                        }
                        now
                    };
                    if fault == Fault::Endless(path.clone()) {
                        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
                        let zeros = vec![0u8; 1 << 16];
                        while stream.write_all(&zeros).is_ok() {}
                        return;
                    }
                    let Ok(body) = fs_err::read(dir.join(path.trim_start_matches('/'))) else {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    };
                    let length = body.len();
                    let start = range
                        .as_deref()
                        .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
                        .unwrap_or(0)
                        .min(length);
                    let head = if range.is_some() {
                        format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{length}\r\nConnection: close\r\n\r\n",
                            length - start,
                            length.saturating_sub(1)
                        )
                    } else {
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
                        )
                    };
                    let _ = stream.write_all(head.as_bytes());
                    let half = start + (length - start) / 2;
                    match fault {
                        Fault::DropFirst(faulty) | Fault::DropAlways(faulty) if faulty == path => {
                            let _ = stream.write_all(&body[start..half]);
                        }
                        Fault::Stall(faulty) if faulty == path => {
                            let _ = stream.write_all(&body[start..half]);
                            let _ = stream.flush();
                            // Holds the connection open, sending nothing, until the client goes.
                            let mut buffer = [0u8; 1];
                            let _ = std::io::Read::read(&mut stream, &mut buffer);
                        }
                        _ => {
                            let _ = stream.write_all(&body[start..]);
                        }
                    }
                    let _ = stream.flush();
                });
            }
        });
        FileServer { url, requests }
    }
}
