//! Every host-preflight file of kURL (its add-ons' and its built-in set, read in place from
//! the shared fixtures) run by the real `berth preflight` in a machine whose facts the test
//! sets, for each role kURL's scripts pass; each result is checked against those facts:
//! - ports the test binds (TCP and UDP) are in use, the others free;
//! - `replicated.app` resolves (the machine's `/etc/hosts`) to an HTTPS server of the test,
//!   with a certificate from a CA the machine's store trusts, up or down;
//! - a TCP load balancer forwards to the API server port, and the API server answers
//!   `/healthz` over HTTPS;
//! - the disks kURL checks are tmpfs mounts of the test, tiny or huge;
//! - the block devices are this machine's (kURL's files count disks and partitions alone; a
//!   loop device of the test counts where a document adds its type);
//! - `/etc/os-release` says Debian 12, as this machine, or CentOS 7;
//! - the control plane's key pairs in `/etc/kubernetes/pki` match, or not.
//!
//! For a check of a state (a port, a connection, an HTTP status, a key pair) the expected
//! outcome is the file's first one whose `when` names the state the test set up; for a disk,
//! a block device or the OS, the outcome the file gives such a host. And no check is dropped:
//! each analyzer a file leaves in (not excluded) has its result.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use berth::engine::file_documents;
use berth_formats::spec::InstallerSpec;
use berth_preflight::document::Item;
use berth_preflight::{Document, Role};
use serde_json::Value;
use support::machine::Machine;
use support::network::Network;
use support::*;

/// The test's servers: HTTPS with a status, a TCP forwarder (a load balancer), a bound port.
const SERVERS: &str = r#"
import http.server, socket, ssl, sys, threading
kind, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if kind == "https":
    status, certificate, key = int(sys.argv[4]), sys.argv[5], sys.argv[6]
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        def log_message(self, *arguments):
            pass
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    open(ready, "w").close()
    server.serve_forever()
elif kind == "forward":
    target = int(sys.argv[4])
    listener = socket.create_server(("0.0.0.0", port))
    open(ready, "w").close()
    def pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target))
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
else:
    # No SO_REUSEADDR, as some services bind: the port checks of a run before must leave no
    # TIME_WAIT on the port they checked.
    family = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    bound = socket.socket(socket.AF_INET, family)
    bound.bind(("0.0.0.0", port))
    if kind == "tcp":
        bound.listen()
    open(ready, "w").close()
    threading.Event().wait()
"#;

/// Key pairs and certificates made with openssl, in a folder of the test.
struct Certificates {
    dir: tempfile::TempDir,
}

impl Certificates {
    fn new() -> Self {
        require("openssl", "openssl");
        let certificates = Certificates {
            dir: tempfile::tempdir().unwrap(),
        };
        certificates.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=Berth test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ]);
        // The HTTPS servers: replicated.app, and the API server (localhost, 127.0.0.1).
        certificates.signed("server", "DNS:replicated.app,DNS:localhost,IP:127.0.0.1");
        // The control plane's pairs, in kubeadm's form (RSA, PKCS#1).
        certificates.signed("apiserver", "DNS:kubernetes");
        certificates.signed("etcd", "DNS:etcd");
        certificates
    }

    fn openssl(&self, arguments: &[&str]) {
        run(std::process::Command::new("openssl")
            .args(arguments)
            .current_dir(self.dir.path()));
    }

    /// `name.crt` and `name.key`, signed by the test's CA for `names`.
    fn signed(&self, name: &str, names: &str) {
        let key = format!("{name}.key");
        let request = format!("{name}.csr");
        let extensions = format!("{name}.ext");
        self.openssl(&["genrsa", "-traditional", "-out", &key, "2048"]);
        self.openssl(&[
            "req",
            "-new",
            "-key",
            &key,
            "-subj",
            &format!("/CN={name}"),
            "-out",
            &request,
        ]);
        fs_err::write(
            self.path(&extensions),
            format!("subjectAltName={names}\nextendedKeyUsage=serverAuth\n"),
        )
        .unwrap();
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &request,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &extensions,
            "-out",
            &format!("{name}.crt"),
        ]);
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn read(&self, file: &str) -> Vec<u8> {
        fs_err::read(self.path(file)).unwrap()
    }
}

/// A loop device over a sparse file, detached when dropped.
struct LoopDevice {
    device: String,
    _file: tempfile::NamedTempFile,
}

impl LoopDevice {
    fn attach(size: u64) -> Self {
        require("losetup", "mount");
        let file = tempfile::NamedTempFile::new_in("/tmp").unwrap();
        file.as_file().set_len(size).unwrap();
        let output = run(std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file.path()));
        LoopDevice {
            device: text(&output.stdout).trim().to_string(),
            _file: file,
        }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.device])
            .status();
    }
}

/// The machine and what the test has set up in it.
struct Setup {
    machine: Machine,
    /// The machine's network; dropped after it.
    _network: Network,
    dir: tempfile::TempDir,
    certificates: Certificates,
    servers: BTreeMap<String, Server>,
    /// TCP ports something listens on, and UDP ports bound.
    tcp: BTreeSet<u16>,
    udp: BTreeSet<u16>,
    /// Each HTTPS server's `host:port` and the status it answers.
    https: BTreeMap<String, u16>,
}

impl Setup {
    fn start() -> Self {
        let mut network = Network::new();
        let machine = Machine::start(network.host(), "preflight");
        let certificates = Certificates::new();
        let hosts = machine.read("/etc/hosts").unwrap_or_default();
        machine.write("/etc/hosts", format!("{hosts}\n127.0.0.1 replicated.app\n"));
        let store = "/etc/ssl/certs/ca-certificates.crt";
        let mut trusted = machine.read(store).unwrap_or_default().into_bytes();
        trusted.extend(certificates.read("ca.crt"));
        machine.write(store, trusted);
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        fs_err::write(dir.path().join("servers.py"), SERVERS).unwrap();
        Setup {
            machine,
            _network: network,
            dir,
            certificates,
            servers: BTreeMap::new(),
            tcp: BTreeSet::new(),
            udp: BTreeSet::new(),
            https: BTreeMap::new(),
        }
    }

    /// Starts one of the test's servers in the machine, and waits until it is bound.
    fn serve(&mut self, name: &str, kind: &str, port: u16, arguments: &[&str]) {
        let ready = self.dir.path().join(format!("{name}.ready"));
        let _ = fs_err::remove_file(&ready);
        let server = Server::spawn(
            self.machine
                .command("python3")
                .arg(self.dir.path().join("servers.py"))
                .args([kind, &port.to_string()])
                .arg(&ready)
                .args(arguments),
            &self.dir.path().join(format!("{name}.log")),
        );
        let log = self.dir.path().join(format!("{name}.log"));
        let started = std::time::Instant::now();
        while !ready.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the {name} server was not bound within 20 s: {}",
                fs_err::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.servers.insert(name.to_string(), server);
        if kind == "udp" {
            self.udp.insert(port);
        } else {
            self.tcp.insert(port);
        }
    }

    fn serve_https(&mut self, name: &str, address: &str, port: u16, status: u16) {
        let certificate = self.certificates.path("server.crt");
        let key = self.certificates.path("server.key");
        self.serve(
            name,
            "https",
            port,
            &[
                &status.to_string(),
                certificate.to_str().unwrap(),
                key.to_str().unwrap(),
            ],
        );
        self.https.insert(format!("{address}:{port}"), status);
    }

    fn stop(&mut self, name: &str, port: u16) {
        drop(self.servers.remove(name));
        self.tcp.remove(&port);
        self.udp.remove(&port);
        self.https
            .retain(|address, _| !address.ends_with(&format!(":{port}")));
        // Closed once a connection is refused.
        wait_until(
            &format!("port {port} to close"),
            Duration::from_secs(10),
            || {
                self.machine
                    .command("bash")
                    .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")])
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|status| !status.success())
            },
        );
    }

    /// The real `berth` with `arguments`, run in the machine with a Berth root of the test's.
    fn berth(&self, arguments: &[&str]) -> std::process::Command {
        let mut command = self.machine.command(env!("CARGO_BIN_EXE_berth"));
        command
            .args(arguments)
            .env("BERTH_ROOT", self.dir.path().join("berth"));
        command
    }

    fn mount_tmpfs(&self, path: &str, size: &str) {
        self.machine.shell(&format!(
            "mkdir -p {path} && mount -t tmpfs -o size={size} tmpfs {path}"
        ));
    }

    fn install_pair(&self, name: &str, certificate: &str, key: &str) {
        self.machine.write(
            &format!("/etc/kubernetes/pki/{name}.crt"),
            self.certificates.read(certificate),
        );
        self.machine.write(
            &format!("/etc/kubernetes/pki/{name}.key"),
            self.certificates.read(key),
        );
    }
}

/// kURL's fixture files.
fn fixture_files() -> Vec<PathBuf> {
    let folder = kurl_fixtures("kurl-host-preflights");
    let mut files: Vec<PathBuf> = fs_err::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 90, "kURL's 92 files, found {}", files.len());
    files
}

/// An Installer with every add-on whose file is among the fixtures, so every file's
/// templates take their add-on's branch.
const SPEC: &str = "apiVersion: cluster.kurl.sh/v1beta1
kind: Installer
metadata:
  name: every-file
spec:
  kubernetes:
    version: 1.29.3
    loadBalancerAddress: 127.0.0.1:7443
    masterAddress: 127.0.0.1:6443
  containerd:
    version: 1.6.33
  weave:
    version: 2.8.1
  flannel:
    version: 0.27.3
  rook:
    version: 1.12.0
    minimumNodeCount: 1
  kotsadm:
    version: 1.100.0
  longhorn:
    version: 1.3.1
  prometheus:
    version: 0.60.1-41.7.3
";

/// One run of every file, as `berth preflight --json` gives it, with the documents as the
/// same templating renders them.
struct Run {
    role: Role,
    documents: Vec<Document>,
    results: Vec<Value>,
}

impl Run {
    fn new(host: &Setup, role: Role, params: &[(&str, &str)]) -> Self {
        let spec_path = host.dir.path().join("spec.yaml");
        fs_err::write(&spec_path, SPEC).unwrap();
        let spec = InstallerSpec::load(&spec_path).unwrap();
        let params: Vec<(String, String)> = params
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let files = fixture_files();
        // The documents as `berth preflight FILE…` renders them, to judge its results by.
        let documents = file_documents(Some(&spec), role, &params, &files).unwrap();
        let mut command = host.berth(&[
            "preflight",
            "--json",
            "--skip-filesystem-performance",
            "--spec",
        ]);
        command.arg(&spec_path);
        if role.join {
            command.arg("--join");
        }
        if role.join && role.primary {
            command.arg("--primary");
        }
        if role.upgrade {
            command.arg("--upgrade");
        }
        for (key, value) in &params {
            command.arg("--param").arg(format!("{key}={value}"));
        }
        command.args(&files);
        let output = command.output().unwrap();
        // 0, 3 or 4: passed, failed, warned; 2 would be a file Berth could not read.
        assert!(
            matches!(output.status.code(), Some(0 | 3 | 4)),
            "{}",
            printed(&output)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        conforms("preflight-report.v1.json", &report);
        // The outcomes as the HostPreflight files spell them, to judge them by.
        let results: Vec<Value> = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|check| {
                let mut check = check.clone();
                check["outcome"] = check["outcome"].as_str().unwrap().to_lowercase().into();
                check
            })
            .collect();
        let run = Run {
            role,
            documents,
            results,
        };
        run.assert_nothing_dropped();
        run
    }

    /// Every analyzer a document leaves in has a result, and every result an analyzer.
    fn assert_nothing_dropped(&self) {
        let mut expected = BTreeSet::new();
        for document in &self.documents {
            for item in &document.analyzers {
                if !item.excluded(&document.origin).unwrap() {
                    expected.insert(document.origin.at(item.line));
                }
            }
        }
        let seen: BTreeSet<String> = self
            .results
            .iter()
            .map(|result| result["origin"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            expected,
            seen,
            "{}: analyzers left in and results differ",
            self.role.describe()
        );
        assert!(self.results.len() > 20, "{}", self.role.describe());
    }

    /// Each result with the analyzer and collector it comes from.
    fn checks(&self) -> Vec<Check<'_>> {
        let mut checks = Vec::new();
        for result in &self.results {
            let origin = result["origin"].as_str().unwrap();
            let (document, analyzer) = self
                .documents
                .iter()
                .flat_map(|document| document.analyzers.iter().map(move |item| (document, item)))
                .find(|(document, item)| document.origin.at(item.line) == origin)
                .unwrap();
            let collector = document.collectors.iter().find(|collector| {
                collector.kind == analyzer.kind
                    && collector.collector_name() == analyzer.collector_name()
                    && !collector.excluded(&document.origin).unwrap()
            });
            checks.push(Check {
                result,
                file: document.origin.name.rsplit('/').next().unwrap().to_string(),
                analyzer,
                collector,
            });
        }
        checks
    }
}

struct Check<'a> {
    result: &'a Value,
    /// The fixture's file name (`rook__1.12.0.yaml`), or the generated document's name.
    file: String,
    analyzer: &'a Item,
    collector: Option<&'a Item>,
}

impl Check<'_> {
    fn outcome(&self) -> &str {
        self.result["outcome"].as_str().unwrap()
    }

    fn message(&self) -> &str {
        self.result["message"].as_str().unwrap()
    }

    fn field(&self, name: &str) -> &str {
        self.collector
            .and_then(|collector| collector.fields.get(name))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{}: its collector has no {name}", self.describe()))
    }

    fn port(&self) -> u16 {
        match self
            .collector
            .and_then(|collector| collector.fields.get("port"))
        {
            Some(Value::Number(port)) => port.as_u64().unwrap() as u16,
            Some(Value::String(port)) => port.parse().unwrap(),
            other => panic!("{}: port {other:?}", self.describe()),
        }
    }

    /// The outcome the file gives when its state is `state`: the first whose `when` is
    /// `state`, or that has no `when`.
    fn expected_for(&self, state: &str) -> (String, Option<String>) {
        for entry in self.analyzer.fields["outcomes"].as_array().unwrap() {
            let (outcome, fields) = entry.as_object().unwrap().iter().next().unwrap();
            let when = fields.get("when").and_then(Value::as_str).unwrap_or("");
            if when.is_empty() || when.trim() == state {
                let message = fields
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|message| !message.contains("{{"))
                    .map(str::to_string);
                return (outcome.clone(), message);
            }
        }
        panic!("{}: no outcome for {state}", self.describe())
    }

    fn assert_state(&self, state: &str) {
        let (outcome, message) = self.expected_for(state);
        assert_eq!(self.outcome(), outcome, "{}, for {state}", self.describe());
        if let Some(message) = message {
            assert_eq!(self.message(), message, "{}, for {state}", self.describe());
        }
    }

    fn describe(&self) -> String {
        format!("{} ({}): {}", self.file, self.analyzer.kind, self.result)
    }
}

/// The disks the test mounts: 1 MiB tmpfs, and empty 64 TiB ones.
const TINY_DISKS: [&str; 2] = ["/var/lib/kubelet", "/var/lib/longhorn"];
const HUGE_DISKS: [&str; 3] = [
    "/var/lib/containerd",
    "/var/lib/rook",
    "/opt/replicated/rook",
];

/// What the test set up in the machine for one run, to judge each check by.
struct Facts<'a> {
    host: &'a Setup,
    os: &'a str,
    /// Each key pair's state, by its certificate's path.
    pairs: &'a [(&'a str, &'a str)],
}

fn judge(run: &Run, facts: &Facts) -> BTreeMap<String, usize> {
    let mut judged = BTreeMap::new();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let memory = memory_bytes();
    for check in run.checks() {
        let kind = check.analyzer.kind.as_str();
        match kind {
            "tcpPortStatus" | "udpPortStatus" => {
                let bound = if kind == "tcpPortStatus" {
                    &facts.host.tcp
                } else {
                    &facts.host.udp
                };
                let in_use = bound.contains(&check.port());
                check.assert_state(if in_use {
                    "address-in-use"
                } else {
                    "connected"
                });
            }
            "tcpConnect" => {
                let address = check.field("address");
                let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
                let listening = facts.host.tcp.contains(&port);
                check.assert_state(if listening {
                    "connected"
                } else {
                    "connection-refused"
                });
            }
            "tcpLoadBalancer" => {
                // The forwarder on 7443 reaches the port the check itself listens on.
                let forwarding = facts.host.servers.contains_key("load-balancer");
                check.assert_state(if forwarding {
                    "connected"
                } else {
                    "connection-refused"
                });
            }
            "http" => {
                let url = check
                    .collector
                    .and_then(|collector| collector.fields["get"]["url"].as_str())
                    .unwrap();
                let authority = url
                    .trim_start_matches("https://")
                    .split('/')
                    .next()
                    .unwrap();
                let authority = if authority.contains(':') {
                    authority.to_string()
                } else {
                    format!("{authority}:443")
                };
                match facts.host.https.get(&authority) {
                    Some(status) => check.assert_state(&format!("statusCode == {status}")),
                    None => check.assert_state("error"),
                }
            }
            "certificate" => {
                let path = check.field("certificatePath");
                let (_, state) = facts
                    .pairs
                    .iter()
                    .find(|(certificate, _)| *certificate == path)
                    .unwrap_or_else(|| panic!("{}: no pair set up", check.describe()));
                check.assert_state(state);
            }
            "diskUsage" => {
                let path = check.field("path");
                let outcome = check.outcome();
                if TINY_DISKS.iter().any(|disk| path.starts_with(disk)) {
                    assert!(
                        matches!(outcome, "fail" | "warn"),
                        "a 1 MiB disk: {}",
                        check.describe()
                    );
                } else if HUGE_DISKS.iter().any(|disk| path.starts_with(disk)) {
                    assert_eq!(
                        outcome,
                        "pass",
                        "an empty 64 TiB disk: {}",
                        check.describe()
                    );
                } else {
                    panic!("{path}: no disk set up for {}", check.describe());
                }
            }
            "blockDevices" => {
                // kURL's files ask for one unformatted disk or partition of 10 GiB or more.
                let expected = if eligible_disks(10 << 30) > 0 {
                    "pass"
                } else {
                    "fail"
                };
                assert_eq!(check.outcome(), expected, "{}", check.describe());
            }
            "hostOS" => {
                let expected = match (facts.os, check.file.split("__").next().unwrap()) {
                    // Rook's files support every OS but CentOS, RHEL and Oracle Linux 7.
                    ("debian 12", "rook") => ("pass", "supports this OS"),
                    ("centos 7", "rook") => ("fail", "does not support CentOS 7"),
                    // containerd's template names the OSes it supports; Debian is not one,
                    // so no outcome matches (troubleshoot drops such a check; Berth shows it).
                    ("debian 12", "containerd") => ("none", "no outcome matched"),
                    ("centos 7", "containerd") => ("warn", "only up to containerd 1.6.33"),
                    _ => panic!("no expectation for {}", check.describe()),
                };
                assert_eq!(check.outcome(), expected.0, "{}", check.describe());
                assert!(check.message().contains(expected.1), "{}", check.describe());
            }
            "cpu" => {
                // kURL's built-in: at least 2 (fail), 4 recommended (warn).
                let expected = match cpus {
                    0..2 => "fail",
                    2..4 => "warn",
                    _ => "pass",
                };
                assert_eq!(
                    check.outcome(),
                    expected,
                    "{cpus} CPUs: {}",
                    check.describe()
                );
            }
            "memory" => {
                // kURL's built-in: at least 4G (fail), 8G recommended (warn).
                let expected = match memory {
                    0..4_000_000_000 => "fail",
                    4_000_000_000..8_000_000_000 => "warn",
                    _ => "pass",
                };
                assert_eq!(
                    check.outcome(),
                    expected,
                    "{memory} bytes: {}",
                    check.describe()
                );
            }
            "time" => {
                // The machine runs no NTP daemon, and no systemd to ask.
                check.assert_state("ntp == unsynchronized+inactive");
            }
            "filesystemPerformance" => {
                // --skip-filesystem-performance: nothing is collected.
                check.assert_state("fileNotCollected");
            }
            other => panic!(
                "{other}: a kind this test does not judge: {}",
                check.describe()
            ),
        }
        *judged.entry(kind.to_string()).or_default() += 1;
    }
    judged
}

/// Unmounted, unformatted, writable disks and partitions of `minimum` bytes or more that no
/// partition is cut from, as lsblk's tree shows them.
fn eligible_disks(minimum: u64) -> usize {
    fn count(devices: &[Value], minimum: u64) -> usize {
        devices
            .iter()
            .map(|device| {
                let children = device["children"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let eligible = matches!(device["type"].as_str(), Some("disk" | "part"))
                    && children.is_empty()
                    && device["size"].as_u64().unwrap_or(0) >= minimum
                    && device["fstype"].is_null()
                    && device["mountpoint"].is_null()
                    && device["ro"] == Value::Bool(false)
                    && device["rm"] == Value::Bool(false);
                usize::from(eligible) + count(children, minimum)
            })
            .sum()
    }
    let output = run(std::process::Command::new("lsblk").args([
        "--json",
        "--bytes",
        "-o",
        "NAME,TYPE,SIZE,FSTYPE,MOUNTPOINT,RO,RM",
    ]));
    let tree: Value = serde_json::from_slice(&output.stdout).unwrap();
    count(tree["blockdevices"].as_array().unwrap(), minimum)
}

fn memory_bytes() -> u64 {
    let meminfo = fs_err::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo
        .lines()
        .find(|line| line.starts_with("MemTotal:"))
        .unwrap();
    let kibibytes: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kibibytes * 1024
}

const DEBIAN: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n";
const CENTOS: &str = "NAME=\"CentOS Linux\"\nVERSION=\"7 (Core)\"\nID=\"centos\"\nID_LIKE=\"rhel fedora\"\nVERSION_ID=\"7\"\nPRETTY_NAME=\"CentOS Linux 7 (Core)\"\n";

#[test]
fn every_kurl_file_judged_against_the_host_it_runs_on() {
    let mut host = Setup::start();
    host.machine.write("/etc/os-release", DEBIAN);
    // The ports weave's and flannel's files check, taken.
    host.serve("weave-control", "tcp", 6783, &[]);
    host.serve("flannel-vxlan", "udp", 8472, &[]);
    host.serve_https("replicated", "replicated.app", 443, 200);
    // The load balancer in front of the API server's port.
    host.serve("load-balancer", "forward", 7443, &["6443"]);
    for disk in TINY_DISKS {
        host.mount_tmpfs(disk, "1m");
    }
    for disk in HUGE_DISKS {
        host.mount_tmpfs(disk, "64t");
    }

    // The first node's install.
    let install = Run::new(&host, Role::INSTALL, &[]);
    let judged = judge(
        &install,
        &Facts {
            host: &host,
            os: "debian 12",
            pairs: &[],
        },
    );
    for kind in [
        "tcpPortStatus",
        "udpPortStatus",
        "tcpLoadBalancer",
        "http",
        "diskUsage",
        "blockDevices",
        "hostOS",
        "cpu",
        "memory",
        "time",
        "filesystemPerformance",
    ] {
        assert!(
            judged.contains_key(kind),
            "install judged no {kind}: {judged:?}"
        );
    }
    let outcomes = |run: &Run, kind: &str| -> BTreeSet<String> {
        run.checks()
            .iter()
            .filter(|check| check.analyzer.kind == kind)
            .map(|check| check.outcome().to_string())
            .collect()
    };
    // Both sides of the ports: some taken, most free.
    assert_eq!(outcomes(&install, "tcpPortStatus").len(), 2, "{judged:?}");

    // A node joining the control plane: the API server answers on 6443
    // and the kubelet's port is taken; etcd's ports are free (nothing answers there).
    host.serve_https("api-server", "127.0.0.1", 6443, 200);
    host.serve("kubelet", "tcp", 10250, &[]);
    host.stop("load-balancer", 7443);
    let address = host.machine.host.address().to_string();
    let hosts = [
        ("primary-host", "127.0.0.1"),
        ("secondary-host", address.as_str()),
    ];
    let control_plane = Role {
        primary: true,
        join: true,
        upgrade: false,
    };
    let join = Run::new(&host, control_plane, &hosts);
    let judged = judge(
        &join,
        &Facts {
            host: &host,
            os: "debian 12",
            pairs: &[],
        },
    );
    assert!(judged["tcpConnect"] >= 4, "{judged:?}");
    let generated: Vec<&str> = join
        .results
        .iter()
        .filter(|result| {
            result["origin"]
                .as_str()
                .unwrap()
                .starts_with("built-in remote hosts")
        })
        .map(|result| result["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        generated,
        [
            "kubelet 127.0.0.1:10250 TCP connection status".to_string(),
            format!("kubelet {address}:10250 TCP connection status"),
            "etcd peer 127.0.0.1:2379 TCP connection status".into(),
            "etcd peer 127.0.0.1:2380 TCP connection status".into(),
            "api-server 127.0.0.1:6443 TCP connection status".into(),
        ]
    );
    assert_eq!(
        outcomes(&join, "tcpConnect"),
        ["pass".into(), "warn".into()].into()
    );
    // A secondary joining: the API server of the primary, and no control-plane checks.
    let secondary = Role {
        primary: false,
        join: true,
        upgrade: false,
    };
    let join = Run::new(&host, secondary, &hosts);
    let judged = judge(
        &join,
        &Facts {
            host: &host,
            os: "debian 12",
            pairs: &[],
        },
    );
    assert_eq!(
        outcomes(&join, "tcpConnect"),
        ["pass".into()].into(),
        "{judged:?}"
    );
    assert!(!judged.contains_key("filesystemPerformance"), "{judged:?}");

    // An upgrade of the first node on CentOS 7: the API server's pair matches, etcd's
    // certificate is the API server's with etcd's key; replicated.app is down; the load
    // balancer forwards again (its health check goes through it to the API server).
    host.machine.write("/etc/os-release", CENTOS);
    host.install_pair("apiserver", "apiserver.crt", "apiserver.key");
    host.install_pair("etcd/server", "apiserver.crt", "etcd.key");
    host.stop("replicated", 443);
    host.serve("load-balancer", "forward", 7443, &["6443"]);
    host.https.insert("127.0.0.1:7443".into(), 200);
    host.https.insert("localhost:6443".into(), 200);
    let upgrade = Run::new(
        &host,
        Role {
            primary: true,
            join: false,
            upgrade: true,
        },
        &[],
    );
    let judged = judge(
        &upgrade,
        &Facts {
            host: &host,
            os: "centos 7",
            pairs: &[
                ("/etc/kubernetes/pki/apiserver.crt", "key-pair-valid"),
                ("/etc/kubernetes/pki/etcd/server.crt", "key-pair-mismatch"),
            ],
        },
    );
    assert_eq!(judged["certificate"], 2, "{judged:?}");
    assert_eq!(
        outcomes(&upgrade, "http"),
        ["pass".into(), "warn".into()].into(),
        "the API server and its load balancer answer, replicated.app does not"
    );
    assert_eq!(
        outcomes(&upgrade, "hostOS"),
        ["fail".into(), "warn".into()].into()
    );
}

/// The generated checks alone, for a secondary joining: the API server on every primary,
/// nothing else.
#[test]
fn a_secondary_checks_the_api_server_of_every_primary_it_is_given() {
    let mut host = Setup::start();
    host.serve("api-server", "tcp", 6443, &[]);
    let empty = host.dir.path().join("empty.yaml");
    fs_err::write(
        &empty,
        "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nmetadata:\n  name: empty\nspec: {}\n",
    )
    .unwrap();
    let output = host
        .berth(&["preflight", "--json", "--join"])
        .args(["--param", "primary-host=127.0.0.1,127.0.0.2"])
        .arg(&empty)
        .output()
        .unwrap();
    // 127.0.0.2 is loopback too, and 6443 listens on every address: both connect.
    assert_eq!(output.status.code(), Some(0), "{}", printed(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let titles: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "api-server 127.0.0.1:6443 TCP connection status",
            "api-server 127.0.0.2:6443 TCP connection status"
        ]
    );
    host.stop("api-server", 6443);
    let output = host
        .berth(&["preflight", "--join", "--param", "primary-host=127.0.0.1"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", printed(&output));
    assert!(
        text(&output.stdout).contains("Connection to api-server 127.0.0.1:6443 was refused"),
        "{}",
        printed(&output)
    );
}

/// A loop device counts only where a document adds its type (troubleshoot's
/// `additionalDeviceTypes`): unformatted and large enough, it passes; formatted, or smaller
/// than the minimum, it does not.
#[test]
fn a_loop_device_counts_where_a_document_adds_its_type() {
    let dir = tempfile::tempdir().unwrap();
    let document = |name: &str, minimum: u64| {
        let path = dir.path().join(format!("{name}.yaml"));
        fs_err::write(
            &path,
            format!(
                "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nmetadata:\n  name: disks\nspec:\n  collectors:\n  - blockDevices: {{}}\n  analyzers:\n  - blockDevices:\n      minimumAcceptableSize: {minimum}\n      additionalDeviceTypes: [loop]\n      outcomes:\n      - pass:\n          when: \"loop.* >= 1\"\n          message: a loop device\n      - fail:\n          message: no loop device\n"
            ),
        )
        .unwrap();
        path
    };
    let outcome = |path: &std::path::Path| -> String {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(["preflight", "--json"])
            .arg(path)
            .env("BERTH_ROOT", dir.path().join("berth"))
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{}", printed(&output)));
        report["checks"][0]["outcome"]
            .as_str()
            .unwrap()
            .to_lowercase()
    };
    let twenty = document("twenty", 20 << 30);
    let thirty = document("thirty", 30 << 30);
    let before = outcome(&twenty);
    let disk = LoopDevice::attach(20 << 30);
    assert_eq!(outcome(&twenty), "pass", "before it was attached: {before}");
    assert_eq!(
        outcome(&thirty),
        "fail",
        "a 20 GiB device, 30 GiB asked for"
    );
    // Formatted and mounted, it is in use.
    require("mkfs.ext4", "e2fsprogs");
    run(std::process::Command::new("mkfs.ext4").args(["-q", "-F", &disk.device]));
    let mountpoint = tempfile::tempdir().unwrap();
    run(std::process::Command::new("mount")
        .arg(&disk.device)
        .arg(mountpoint.path()));
    let mounted = outcome(&twenty);
    run(std::process::Command::new("umount").arg(mountpoint.path()));
    assert_eq!(mounted, "fail", "a mounted loop device");
}
