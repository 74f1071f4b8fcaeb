//! Host preflights through the real `berth`: checks flipped by real conditions (a port bound,
//! a disk filled, an HTTP status served, an OS excluded), kURL's ignore and enforce settings,
//! and a failing preflight that stops an install before any hook, leaving the node as it was.

use crate::support;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};

use support::*;

/// An add-on whose hooks write to a trace, with `host_preflight` as its host-preflight.yaml.
fn dist_with_preflight(host_preflight: &str) -> (TestDist, PathBuf) {
    let mut dist = TestDist::new();
    let folder = dist.addon(
        "traced",
        "1.0.0",
        "function traced_pre_init() { echo pre_init >> \"$TRACE\"; }\nfunction traced() { echo install >> \"$TRACE\"; }\n",
    );
    fs_err::write(folder.join("host-preflight.yaml"), host_preflight).unwrap();
    dist.package(&folder);
    dist.write_versions();
    let trace = dist.dist.path().join("trace");
    (dist, trace)
}

/// A HostPreflight with one collector and one analyzer.
fn document(collector: &str, analyzer: &str) -> String {
    format!(
        "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nmetadata:\n  name: test\nspec:\n  collectors:\n{collector}  analyzers:\n{analyzer}"
    )
}

fn port_check(port: u16, in_use: &str) -> String {
    document(
        &format!("    - tcpPortStatus:\n        collectorName: p\n        port: {port}\n"),
        &format!(
            "    - tcpPortStatus:\n        checkName: Port {port}\n        collectorName: p\n        outcomes:\n          - {in_use}:\n              when: address-in-use\n              message: port {port} is taken\n          - pass:\n              when: connected\n              message: port {port} is free\n"
        ),
    )
}

/// Every file under `root` but Berth's own folder, with its contents.
fn node_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        // Berth's own folder, and the folders above it that hold it.
        .filter_entry(|entry| !entry.path().ends_with("var/lib/berth"))
        .filter(|entry| {
            let path = entry.as_ref().map(|entry| entry.path().to_path_buf());
            path.map_or(true, |path| {
                path != root.join("var") && path != root.join("var/lib")
            })
        })
        .filter_map(Result::ok)
        .map(|entry| {
            let contents = if entry.file_type().is_file() {
                fs_err::read(entry.path()).unwrap()
            } else {
                Vec::new()
            };
            (entry.path().to_path_buf(), contents)
        })
        .collect()
}

#[test]
fn a_failing_preflight_stops_the_install_before_any_hook_and_a_rerun_continues() {
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (dist, trace_file) = dist_with_preflight(&port_check(port, "fail"));
    let spec = dist.spec("installer.yaml", &[("traced", "version: 1.0.0")]);
    let node = Node::new().env("TRACE", &trace_file);
    fs_err::create_dir_all(node.root.path().join("etc")).unwrap();
    fs_err::write(node.root.path().join("etc/hostname"), "node\n").unwrap();
    let before = node_files(node.root.path());

    let stopped = node.install(&spec, &dist.url(), &[]);
    let error = failed(&stopped);
    assert!(error.contains("host preflights"), "{error}");
    assert!(error.contains(&format!("port {port} is taken")), "{error}");
    assert!(
        trace(&trace_file).is_empty(),
        "a hook ran: {:?}",
        trace(&trace_file)
    );
    assert_eq!(node_files(node.root.path()), before, "the node changed");
    let status = printed(&node.berth(&["status"]));
    assert!(status.contains(&format!("FAIL Port {port}")), "{status}");

    drop(taken);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(trace(&trace_file), ["pre_init", "install"]);
    let status = printed(&node.berth(&["status"]));
    assert!(status.contains("passed"), "{status}");
}

#[test]
fn ignore_and_enforce_warnings_change_the_result_as_kurl_does() {
    // A warning: the port is taken, and the add-on's file says warn.
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (dist, trace) = dist_with_preflight(&port_check(port, "warn"));
    let spec = dist.spec("installer.yaml", &[("traced", "version: 1.0.0")]);

    // Warnings go on by default (no terminal to ask on).
    let node = Node::new().env("TRACE", &trace);
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert!(output.contains("WARN"), "{output}");
    assert!(
        output.contains("to silence them: spec.kurl.excludeBuiltinHostPreflights: true"),
        "{output}"
    );
    assert_eq!(take_trace(&trace), ["pre_init", "install"]);

    // Enforced, as a script word or a spec field, they stop the run.
    let node = Node::new().env("TRACE", &trace);
    let error = failed(&node.install(
        &spec,
        &dist.url(),
        &["--param", "host-preflight-enforce-warnings=1"],
    ));
    assert!(error.contains("hostPreflightEnforceWarnings"), "{error}");
    assert!(take_trace(&trace).is_empty());
    let enforcing = dist.spec(
        "enforcing.yaml",
        &[
            ("traced", "version: 1.0.0"),
            ("kurl", "hostPreflightEnforceWarnings: true"),
        ],
    );
    failed(&node.install(&enforcing, &dist.url(), &[]));
    assert!(take_trace(&trace).is_empty());

    // A failure from the spec's own kurl.hostPreflights stops the run, unless ignored.
    let embedded: String = port_check(port, "fail")
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    let failing = dist.spec(
        "failing.yaml",
        &[
            ("traced", "version: 1.0.0"),
            ("kurl", "hostPreflights: PLACEHOLDER"),
        ],
    );
    let text = fs_err::read_to_string(&failing).unwrap().replace(
        "{hostPreflights: PLACEHOLDER}",
        &format!("\n    hostPreflights:\n{embedded}"),
    );
    fs_err::write(&failing, &text).unwrap();
    let node = Node::new().env("TRACE", &trace);
    let error = failed(&node.install(&failing, &dist.url(), &[]));
    assert!(error.contains("spec kurl.hostPreflights"), "{error}");
    assert!(take_trace(&trace).is_empty());
    let output = succeeded(&node.install(
        &failing,
        &dist.url(),
        &["--param", "host-preflight-ignore=1"],
    ));
    assert!(output.contains("FAIL*"), "{output}");
    assert_eq!(take_trace(&trace), ["pre_init", "install"]);

    // excludeBuiltinHostPreflights leaves out the built-in set and the add-ons' files.
    let node = Node::new().env("TRACE", &trace);
    let output = succeeded(&node.install(
        &enforcing,
        &dist.url(),
        &["--param", "exclude-builtin-host-preflights=1"],
    ));
    assert!(!output.contains("WARN"), "{output}");
    assert!(output.contains("0 documents"), "{output}");
    drop(taken);
}

/// `berth preflight FILE`: its exit code and the one check's outcome.
fn preflight_file(text: &str, extra: &[&str]) -> (i32, String) {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("host-preflight.yaml");
    fs_err::write(&file, text).unwrap();
    let node = Node::new();
    let output = node
        .command(&["preflight", "--json", file.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", printed(&output)));
    if output.status.code() != Some(2) {
        conforms("preflight-report.v1.json", &report);
    }
    let outcome = report["checks"][0]["outcome"]
        .as_str()
        .unwrap_or("")
        .to_lowercase();
    (output.status.code().unwrap_or(-1), outcome)
}

#[test]
fn ports_flip_with_a_listener_bound() {
    let port = free_port();
    assert_eq!(
        preflight_file(&port_check(port, "fail"), &[]),
        (0, "pass".into())
    );
    let taken = TcpListener::bind(("0.0.0.0", port)).unwrap();
    assert_eq!(
        preflight_file(&port_check(port, "fail"), &[]),
        (3, "fail".into())
    );
    assert_eq!(
        preflight_file(&port_check(port, "warn"), &[]),
        (4, "warn".into())
    );
    drop(taken);

    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    let udp = socket.local_addr().unwrap().port();
    let check = document(
        &format!("    - udpPortStatus:\n        port: {udp}\n"),
        "    - udpPortStatus:\n        outcomes:\n          - fail:\n              when: address-in-use\n          - pass:\n              when: connected\n",
    );
    assert_eq!(preflight_file(&check, &[]), (3, "fail".into()));
    drop(socket);
    assert_eq!(preflight_file(&check, &[]), (0, "pass".into()));
}

/// A one-request-at-a-time HTTP server answering every request with `status`.
fn serve_status(status: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
            );
        }
    });
    port
}

#[test]
fn http_passes_or_fails_on_the_status_a_real_server_gives() {
    let check = |port: u16| {
        document(
            &format!("    - http:\n        get:\n          url: http://127.0.0.1:{port}/healthz\n"),
            "    - http:\n        outcomes:\n          - fail:\n              when: error\n          - pass:\n              when: statusCode == 200\n          - fail:\n              message: unexpected status\n",
        )
    };
    assert_eq!(
        preflight_file(&check(serve_status(200)), &[]),
        (0, "pass".into())
    );
    assert_eq!(
        preflight_file(&check(serve_status(503)), &[]),
        (3, "fail".into())
    );
    assert_eq!(preflight_file(&check(free_port()), &[]), (3, "fail".into()));
}

#[test]
fn a_host_os_outcome_that_names_this_os_decides() {
    let release = fs_err::read_to_string("/etc/os-release").unwrap();
    let value = |key: &str| {
        release
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .unwrap()
            .trim_matches('"')
            .to_string()
    };
    let (id, version) = (value("ID"), value("VERSION_ID"));
    let check = |when: &str| {
        document(
            "    - hostOS: {}\n",
            &format!(
                "    - hostOS:\n        outcomes:\n          - fail:\n              when: \"{when}\"\n              message: not supported\n          - pass:\n              message: supported\n"
            ),
        )
    };
    assert_eq!(
        preflight_file(&check(&format!("{id} = {version}")), &[]),
        (3, "fail".into())
    );
    assert_eq!(
        preflight_file(&check(&format!("{id} < {version}")), &[]),
        (0, "pass".into())
    );
    assert_eq!(
        preflight_file(&check("nosuchos = 1"), &[]),
        (0, "pass".into())
    );
}

#[test]
fn a_disk_filled_past_its_threshold_fails() {
    // A small tmpfs of its own, in a mount namespace of its own.
    if which::which("unshare").is_err() {
        panic!("unshare (util-linux) is needed: scripts/test.sh installs it");
    }
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("disk.yaml");
    let mount = folder.path().join("disk");
    fs_err::create_dir_all(&mount).unwrap();
    let check = document(
        &format!(
            "    - diskUsage:\n        collectorName: d\n        path: {}/not-made-yet\n",
            mount.display()
        ),
        "    - diskUsage:\n        collectorName: d\n        outcomes:\n          - fail:\n              when: used/total > 80%\n              message: full\n          - pass:\n              message: room\n",
    );
    fs_err::write(&file, check).unwrap();
    let berth = env!("CARGO_BIN_EXE_berth");
    let script = format!(
        "mount -t tmpfs -o size=8m tmpfs '{mount}' && {berth} preflight '{file}' >/dev/null; echo \"empty=$?\"; head -c 7500000 /dev/zero > '{mount}/fill'; {berth} preflight '{file}' >/dev/null; echo \"full=$?\"",
        mount = mount.display(),
        file = file.display(),
    );
    let output = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = printed(&output);
    assert!(text.contains("empty=0"), "{text}");
    assert!(text.contains("full=3"), "{text}");
}

#[test]
fn bad_documents_are_clear_errors_naming_the_file_and_line() {
    let folder = tempfile::tempdir().unwrap();
    let cases = [
        (
            "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nspec:\n  collectors: [\n",
            "host-preflight.yaml:",
        ),
        (
            "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nspec:\n  collectors:\n    - cpu: {}\n  analyzers:\n    - cpu:\n        exclude: '{{kurl .NoSuchField }}'\n",
            "NoSuchField",
        ),
    ];
    for (text, expected) in cases {
        let file = folder.path().join("host-preflight.yaml");
        fs_err::write(&file, text).unwrap();
        let output = Node::new().berth(&["preflight", file.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{}", printed(&output));
        assert!(printed(&output).contains(expected), "{}", printed(&output));
    }
    // An analyzer Berth does not know is a warning naming it; a `when` it cannot read fails
    // the analyzer, naming the line.
    let text = "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nspec:\n  collectors:\n    - memory: {}\n  analyzers:\n    - clusterVersion: {}\n    - memory:\n        outcomes:\n          - fail:\n              when: total < 4Gi\n";
    let (code, outcome) = preflight_file(text, &[]);
    assert_eq!((code, outcome.as_str()), (3, "warn"));
    let file = folder.path().join("x.yaml");
    fs_err::write(&file, text).unwrap();
    let shown = printed(&Node::new().berth(&["preflight", file.to_str().unwrap()]));
    assert!(shown.contains("Unknown analyzer clusterVersion"), "{shown}");
    assert!(shown.contains("Analyzer Failed"), "{shown}");
    assert!(shown.contains("x.yaml:8"), "{shown}");
}

#[test]
fn preflight_for_a_spec_fetches_checks_and_records_only_its_results() {
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (dist, trace_file) = dist_with_preflight(&port_check(port, "warn"));
    let spec = dist.spec("installer.yaml", &[("traced", "version: 1.0.0")]);
    let node = Node::new().env("TRACE", &trace_file);
    let output = node.run("preflight", &spec, &dist.url(), &[]);
    assert_eq!(output.status.code(), Some(4), "{}", printed(&output));
    let shown = text(&output.stdout);
    assert!(shown.contains(&format!("WARN    Port {port}")), "{shown}");
    assert!(trace(&trace_file).is_empty(), "a hook ran");
    assert!(node.status().is_empty(), "an add-on record changed");
    let status = printed(&node.berth(&["status"]));
    assert!(status.contains("no add-on is installed"), "{status}");
    assert!(
        status.contains(&format!("WARN Port {port}: port {port} is taken")),
        "{status}"
    );
    drop(taken);
}

/// What containerd holds: images, containers, and the content and snapshots under them.
fn containerd_state(containerd: &Containerd) -> Vec<String> {
    [
        &["images", "ls", "-q"][..],
        &["containers", "ls", "-q"],
        &["content", "ls", "-q"],
        &["snapshots", "ls"],
    ]
    .iter()
    .map(|arguments| text(&containerd.ctr(arguments).stdout))
    .collect()
}

#[test]
fn a_failing_preflight_leaves_containerd_and_the_files_as_they_were() {
    let containerd = Containerd::start();
    let (_, dist) = TestDist::examples(&["demo"]);
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let demo_port = free_port();
    // The spec's own host preflight (kurl.hostPreflights) fails while the port is taken.
    let check = port_check(port, "fail");
    let indented: String = check
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    let specs = tempfile::tempdir().unwrap();
    let spec = specs.path().join("demo.yaml");
    fs_err::write(
        &spec,
        format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: demo\nspec:\n  demo:\n    version: 1.0.0\n    port: {demo_port}\n  kurl:\n    hostPreflights:\n{indented}"
        ),
    )
    .unwrap();
    let node = Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);
    let files_before = node_files(node.root.path());
    let containerd_before = containerd_state(&containerd);

    let error = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(error.contains(&format!("port {port} is taken")), "{error}");
    assert_eq!(
        node_files(node.root.path()),
        files_before,
        "the node's files changed"
    );
    assert_eq!(
        containerd_state(&containerd),
        containerd_before,
        "containerd changed"
    );

    // The port freed, the same command installs: the demo's image is loaded and it answers.
    drop(taken);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let images = text(&containerd.ctr(&["images", "ls", "-q"]).stdout);
    assert!(images.contains("docker.io/berth/demo:1.0.0"), "{images}");
    assert_ne!(containerd_state(&containerd), containerd_before);
    succeeded(&node.berth(&["reset"]));
}

/// Ctrl-C at the question host preflight warnings ask on a terminal ends the run at once
/// (130, as a shell reports it), with no hook run, rather than once the question is answered.
#[test]
fn ctrl_c_at_the_warnings_question_ends_the_run_at_once() {
    support::require("script", "bsdutils");
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (dist, trace) = dist_with_preflight(&port_check(port, "warn"));
    let spec = dist.spec("installer.yaml", &[("traced", "version: 1.0.0")]);
    let node = Node::new();
    // `script` gives berth a terminal; what is written to its input is typed there.
    let mut child = std::process::Command::new("script")
        .args([
            "-qec",
            &format!(
                "{} install --spec {} --dist {}",
                env!("CARGO_BIN_EXE_berth"),
                spec.display(),
                dist.url()
            ),
            "/dev/null",
        ])
        .env("BERTH_ROOT", node.root.path())
        .env("TRACE", &trace)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut typing = child.stdin.take().unwrap();
    let mut screen = child.stdout.take().unwrap();
    // Read the terminal until the question shows, then press Ctrl-C; the input stays open.
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(count) = std::io::Read::read(&mut screen, &mut buffer) {
            if count == 0 {
                break;
            }
            shown.extend_from_slice(&buffer[..count]);
            let _ = lines.send(String::from_utf8_lossy(&shown).into_owned());
        }
    });
    let mut shown = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !shown.contains("Continue? (Y/n)") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        shown = seen
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no question within a minute: {shown}"));
    }
    std::io::Write::write_all(&mut typing, b"\x03").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let ended = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            // The run waits on: stop it, so that the failure leaves nothing behind.
            let _ = child.kill();
            let _ = child.wait();
            panic!("berth did not end within 5 s of one Ctrl-C: {shown}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    while let Ok(more) = seen.try_recv() {
        shown = more;
    }
    assert_eq!(ended.code(), Some(130), "{shown}");
    assert!(shown.contains("interrupted at the question"), "{shown}");
    assert!(take_trace(&trace).is_empty(), "a hook ran: {shown}");
    drop(typing);
}
