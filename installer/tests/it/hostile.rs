//! Crafted packages, records, arguments and servers, each named after what it broke before
//! Berth refused it: the node refuses them with a clear error, writes nothing outside its
//! folders, and leaves state a re-run continues from.

use crate::support;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_formats::Sha256Digest;
use support::{
    Fault, FileServer, Node, TestDist, failed, files_below, spawn_quietly, succeeded, wait_until,
};

/// A gzipped tar written entry by entry, so names the `tar` crate would refuse get through.
fn crafted_package(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        // Root's, as Berth writes entries: what else is crafted is what is tried.
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

fn index_json(name: &str, version: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 1,
        "name": name,
        "version": version,
        "arch": "amd64",
        "inputsDigest": Sha256Digest::of(b"inputs").to_string(),
        "files": [],
        "images": [],
    }))
    .unwrap()
}

/// Writes `bytes` as `<folder>/<file>` with its `.sha256` beside it (of `digest_of`).
fn write_package(folder: &Path, file: &str, bytes: &[u8], digest_of: &[u8]) -> PathBuf {
    let path = folder.join(file);
    fs_err::write(&path, bytes).unwrap();
    fs_err::write(
        folder.join(format!("{file}.sha256")),
        format!("{}  {file}\n", Sha256Digest::of(digest_of).hex()),
    )
    .unwrap();
    path
}

/// `berth unpack PACKAGE --to DESTINATION`.
fn unpack(package: &Path, destination: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("unpack")
        .arg(package)
        .arg("--to")
        .arg(destination)
        .output()
        .unwrap()
}

#[test]
fn unpack_refuses_a_package_whose_index_names_a_path() {
    let outer = tempfile::tempdir().unwrap();
    let destination = outer.path().join("node/var/lib/berth");
    fs_err::create_dir_all(&destination).unwrap();
    for (name, version) in [("l/../..", "1"), ("demo", "../../../escaped"), ("..", "1")] {
        let index = index_json(name, version);
        let bytes = crafted_package(&[("addons/x/1/package.json", &index)]);
        let package = write_package(outer.path(), "x-1.tar.gz", &bytes, &bytes);
        let output = unpack(&package, &destination);
        let all = failed(&output);
        assert!(all.contains("not a plain name"), "{name} {version}: {all}");
        assert!(!all.contains("panicked"), "{all}");
    }
    // Nothing was written anywhere: not in the destination, not beside it.
    assert!(files_below(&outer.path().join("node")).is_empty());
}

/// A package of `size` zero bytes in one file: it gzips to about a thousandth of that.
fn bomb(size: usize) -> Vec<u8> {
    let zeros = vec![0u8; size];
    let index = index_json("bomb", "1.0.0");
    crafted_package(&[
        ("addons/bomb/1.0.0/package.json", &index),
        ("addons/bomb/1.0.0/zeros", &zeros),
    ])
}

/// A tmpfs of `megabytes` mounted at a new temporary folder, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mounting a tmpfs needs root");
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn grow(&self, megabytes: u32) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={megabytes}m")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn free(&self) -> u64 {
        berth::dist::unpack::free_space(self.dir.path())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_package_that_expands_past_the_disk_is_stopped_before_it_fills_it() {
    let disk = SmallDisk::mount(96);
    let outer = tempfile::tempdir().unwrap();
    let bytes = bomb(256 << 20);
    let package = write_package(outer.path(), "bomb-1.0.0.tar.gz", &bytes, &bytes);
    let output = unpack(&package, disk.path());
    let all = failed(&output);
    assert!(all.contains("expands past"), "{all}");
    assert!(
        files_below(disk.path()).is_empty(),
        "the staging folder is gone"
    );
    assert!(disk.free() > 90 << 20, "the disk was filled");
}

#[test]
fn a_package_that_is_not_the_one_pinned_is_never_expanded() {
    let disk = SmallDisk::mount(96);
    let outer = tempfile::tempdir().unwrap();
    let bytes = bomb(256 << 20);
    // The `.sha256` pins other bytes: the package is judged before it is expanded.
    let package = write_package(outer.path(), "bomb-1.0.0.tar.gz", &bytes, b"other");
    let started = Instant::now();
    let output = unpack(&package, disk.path());
    let all = failed(&output);
    assert!(all.contains("does not match its expected digest"), "{all}");
    assert!(!all.contains("expands past"), "{all}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(files_below(disk.path()).is_empty());
}

/// What the hooks appended to `$TRACE` in `scratch`.
fn trace(scratch: &tempfile::TempDir) -> String {
    fs_err::read_to_string(scratch.path().join("trace")).unwrap()
}

fn dist_with(name: &str, install_sh: &str) -> (TestDist, PathBuf) {
    let mut dist = TestDist::new();
    dist.addon(name, "1.0.0", install_sh);
    let spec = dist.spec("spec.yaml", &[(name, "version: latest")]);
    (dist, spec)
}

fn lock_is_free(node: &Node) -> bool {
    !berth::node::lock::NodeLock::is_held(&node.install_dir().join("lock"))
}

#[test]
fn a_stalled_server_is_given_up_and_the_lock_released() {
    let (dist, spec) = dist_with("demo", "function demo() { echo demo >> \"$TRACE\"; }\n");
    let server =
        FileServer::serve_with(dist.dist.path(), Fault::Stall("/demo-1.0.0.tar.gz".into()));
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new()
        .env("TRACE", scratch.path().join("trace"))
        .env("BERTH_STALL_TIMEOUT", "1");
    let started = Instant::now();
    let all = failed(&node.install(&spec, &server.url, &[]));
    assert!(all.contains("failed to fetch demo 1.0.0"), "{all}");
    assert!(all.contains("after 5 attempts"), "{all}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(lock_is_free(&node));
    assert_eq!(node.status()["demo"]["progressing"]["reason"], "Failed");
    // The server mends; the re-run completes.
    let mended = FileServer::serve(dist.dist.path(), None);
    succeeded(&node.install(&spec, &mended.url, &[]));
    assert_eq!(node.status()["demo"]["progressing"]["reason"], "Succeeded");
}

#[test]
fn a_download_cut_every_time_is_a_clear_error_and_a_rerun_completes() {
    let (dist, spec) = dist_with("demo", "function demo() { echo demo >> \"$TRACE\"; }\n");
    let server = FileServer::serve_with(
        dist.dist.path(),
        Fault::DropAlways("/demo-1.0.0.tar.gz".into()),
    );
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new().env("TRACE", scratch.path().join("trace"));
    let all = failed(&node.install(&spec, &server.url, &[]));
    assert!(all.contains("failed to fetch demo 1.0.0"), "{all}");
    assert!(lock_is_free(&node));
    let mended = FileServer::serve(dist.dist.path(), None);
    succeeded(&node.install(&spec, &mended.url, &[]));
    assert_eq!(trace(&scratch), "demo\n");
}

#[test]
fn an_endless_download_stops_before_the_disk_is_full() {
    let (dist, spec) = dist_with("demo", "function demo() { :; }\n");
    let server = FileServer::serve_with(
        dist.dist.path(),
        Fault::Endless("/demo-1.0.0.tar.gz".into()),
    );
    let disk = SmallDisk::mount(160);
    let node = Node {
        root: tempfile::tempdir_in(disk.path()).unwrap(),
        envs: Vec::new(),
    };
    let all = failed(&node.install(&spec, &server.url, &[]));
    assert!(all.contains("larger than the"), "{all}");
    assert!(
        disk.free() > 32 << 20,
        "the disk was filled: {} left",
        disk.free()
    );
    assert!(lock_is_free(&node));
}

#[test]
fn a_full_disk_mid_unpack_is_a_clear_error_and_a_rerun_completes_once_there_is_room() {
    let mut dist = TestDist::new();
    let folder = dist.addons.root().join("addons/big/1.0.0");
    fs_err::create_dir_all(&folder).unwrap();
    // Incompressible bytes: the package is as large as what it unpacks to.
    let mut noise = vec![0u8; 48 << 20];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for chunk in noise.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    fs_err::write(folder.join("noise"), &noise).unwrap();
    dist.addon(
        "big",
        "1.0.0",
        "function big() { echo big >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("big", "version: latest")]);
    let disk = SmallDisk::mount(140);
    let scratch = tempfile::tempdir().unwrap();
    let node = Node {
        root: tempfile::tempdir_in(disk.path()).unwrap(),
        envs: vec![(
            "TRACE".into(),
            scratch.path().join("trace").display().to_string(),
        )],
    };
    // The package (48 MiB) fits; it and its unpacked copy, with the room Berth keeps, do not.
    let all = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(
        all.contains("expands past") || all.contains("No space left"),
        "{all}"
    );
    assert!(lock_is_free(&node));
    assert!(!scratch.path().join("trace").exists(), "no hook ran");
    disk.grow(400);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(trace(&scratch), "big\n");
}

/// Hooks for every phase; the one named by $STOP_AT waits (after writing $STARTED) until
/// $RELEASE exists. Each appends its name to $TRACE when it finishes.
const PHASES: &str = r#"
function stop_here() {
    if [ "${STOP_AT:-}" = "$1" ]; then
        touch "$STARTED"
        while [ ! -e "$RELEASE" ]; do sleep 0.05; done
    fi
    echo "$1" >> "$TRACE"
}
function phased_preflight() { stop_here preflight; }
function phased_pre_init() { stop_here pre_init; }
function phased() { stop_here install; }
function phased_post_init() { stop_here post_init; }
function phased_outro() { stop_here outro; }
function phased_reset() { echo reset >> "$TRACE"; }
"#;

#[test]
fn kill_9_at_every_phase_boundary_then_a_rerun_completes() {
    let (dist, spec) = dist_with("phased", PHASES);
    for phase in ["preflight", "pre_init", "install", "post_init", "outro"] {
        let scratch = tempfile::tempdir().unwrap();
        let node = Node::new()
            .env("TRACE", scratch.path().join("trace"))
            .env("STARTED", scratch.path().join("started"))
            .env("RELEASE", scratch.path().join("release"));
        let mut first = spawn_quietly(
            node.install_command(&spec, &dist.url())
                .env("STOP_AT", phase),
        );
        wait_until(
            &format!("the run to reach {phase}"),
            Duration::from_secs(30),
            || scratch.path().join("started").exists(),
        );
        first.kill().unwrap();
        first.wait().unwrap();
        assert!(lock_is_free(&node), "{phase}");
        let rerun = succeeded(&node.install(&spec, &dist.url(), &[]));
        let status = node.status();
        assert_eq!(
            status["phased"]["progressing"]["reason"], "Succeeded",
            "{phase}: {rerun}"
        );
        let trace = trace(&scratch);
        assert!(
            trace.ends_with("preflight\npre_init\ninstall\npost_init\noutro\n"),
            "{phase}: the re-run ran every hook: {trace}"
        );
        // The killed run's session was ended by the re-run: its waiting hook never finished.
        assert_eq!(
            trace.matches(&format!("{phase}\n")).count(),
            1,
            "{phase}: {trace}"
        );
    }
}

#[test]
fn kill_9_during_a_download_then_a_rerun_completes() {
    let (dist, spec) = dist_with("demo", "function demo() { echo demo >> \"$TRACE\"; }\n");
    let server =
        FileServer::serve_with(dist.dist.path(), Fault::Stall("/demo-1.0.0.tar.gz".into()));
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new().env("TRACE", scratch.path().join("trace"));
    let mut first = spawn_quietly(&mut node.install_command(&spec, &server.url));
    wait_until("the download to start", Duration::from_secs(30), || {
        server
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|request| request.contains("demo-1.0.0.tar.gz"))
    });
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(lock_is_free(&node));
    let mended = FileServer::serve(dist.dist.path(), None);
    succeeded(&node.install(&spec, &mended.url, &[]));
    assert_eq!(trace(&scratch), "demo\n");
    assert_eq!(node.status()["demo"]["progressing"]["reason"], "Succeeded");
}

/// Starts an install that stops in its install hook, then sends it `signal`; returns the
/// node, the hook's pid and the install's exit status.
fn interrupted_install(signal: &str) -> (Node, tempfile::TempDir, i32, std::process::ExitStatus) {
    let (dist, spec) = dist_with(
        "slow",
        r#"
function slow() {
    echo $$ > "$HOOK_PID"
    # A child that ignores SIGTERM: the grace period ends it with SIGKILL.
    bash -c "trap '' TERM; exec sleep 300" &
    echo $! > "$CHILD_PID"
    touch "$STARTED"
    wait
}
"#,
    );
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new()
        .env("STARTED", scratch.path().join("started"))
        .env("HOOK_PID", scratch.path().join("hook.pid"))
        .env("CHILD_PID", scratch.path().join("child.pid"));
    let mut run = spawn_quietly(&mut node.install_command(&spec, &dist.url()));
    wait_until("the hook to start", Duration::from_secs(30), || {
        scratch.path().join("started").exists()
    });
    let number = match signal {
        "INT" => nix::sys::signal::Signal::SIGINT,
        _ => nix::sys::signal::Signal::SIGTERM,
    };
    let status = signal_and_wait(&mut run, number);
    let child: i32 = fs_err::read_to_string(scratch.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (node, scratch, child, status)
}

/// Sends `signal` to the run and waits, up to 20 s, for it to end.
fn signal_and_wait(
    run: &mut std::process::Child,
    signal: nix::sys::signal::Signal,
) -> std::process::ExitStatus {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(run.id() as i32), signal).unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = run.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "berth did not stop after {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` runs (a zombie waiting for its parent to reap it does not).
fn alive(pid: i32) -> bool {
    fs_err::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn sigint_and_sigterm_end_the_hooks_and_record_the_interruption() {
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let (node, _scratch, child, status) = interrupted_install(signal);
        assert_eq!(status.code(), Some(code), "{signal}");
        wait_until(
            "the hook's own child to be gone",
            Duration::from_secs(10),
            || !alive(child),
        );
        let state = &node.status()["slow"];
        assert_eq!(state["progressing"]["reason"], "Interrupted", "{signal}");
        let message = state["progressing"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("interrupted by SIG{signal} at its install step")),
            "{signal}: {message}"
        );
        assert!(lock_is_free(&node));
    }
}

/// Ctrl-C after an add-on's hook finished, while Berth waits for its components: the run ends
/// at once (not when the health wait would), and the record says what happened — the version
/// the hook put in place, interrupted at the health step — not that the hook failed.
#[test]
fn ctrl_c_after_a_hook_finished_records_the_interruption_and_the_version_in_place() {
    let mut dist = TestDist::new();
    let scratch = tempfile::tempdir().unwrap();
    let folder = dist.addon(
        "waits",
        "1.0.0",
        "function waits() { touch \"$FINISHED\"; }\n",
    );
    fs_err::write(
        folder.join("health.yaml"),
        format!(
            "components:\n  - name: never\n    command: {{run: [test, -e, '{}']}}\n",
            scratch.path().join("never").display()
        ),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
    let spec = dist.spec("spec.yaml", &[("waits", "version: 1.0.0")]);
    let node = Node::new().env("FINISHED", scratch.path().join("finished"));
    let mut command = node.install_command(&spec, &dist.url());
    command.args(["--health-timeout", "10m"]);
    let mut run = spawn_quietly(&mut command);
    wait_until("the hook to finish", Duration::from_secs(60), || {
        scratch.path().join("finished").exists()
    });
    wait_until("the health wait", Duration::from_secs(30), || {
        node.status()["waits"]["progressing"]["message"]
            .as_str()
            .is_some_and(|message| message.ends_with(": health"))
    });
    let status = signal_and_wait(&mut run, nix::sys::signal::Signal::SIGINT);
    assert_eq!(status.code(), Some(130));
    let state = &node.status()["waits"];
    assert_eq!(state["progressing"]["reason"], "Interrupted", "{state:#}");
    let message = state["progressing"]["message"].as_str().unwrap();
    assert!(
        message.contains("interrupted by SIGINT at its health step")
            && message.contains("run the same command again"),
        "{message}"
    );
    assert_eq!(state["current"]["version"], "1.0.0", "{state:#}");
    assert!(lock_is_free(&node));
}

#[test]
fn reset_undoes_a_failed_first_install() {
    let (dist, spec) = dist_with(
        "broken",
        r#"
function broken() {
    touch "$MARKER"
    bail "broken on purpose, after starting something ($BROKEN_PORT)"
}
function broken_reset() {
    echo "reset $BROKEN_PORT" >> "$TRACE"
    rm -f "$MARKER"
}
"#,
    );
    fs_err::write(
        &spec,
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  broken:\n    version: latest\n    port: 9999\n",
    )
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new()
        .env("MARKER", scratch.path().join("marker"))
        .env("TRACE", scratch.path().join("trace"));
    failed(&node.install(&spec, &dist.url(), &[]));
    assert!(scratch.path().join("marker").exists());
    succeeded(&node.berth(&["reset"]));
    assert!(
        !scratch.path().join("marker").exists(),
        "the reset hook ran"
    );
    assert_eq!(
        trace(&scratch),
        "reset 9999\n",
        "with the configuration the failed install used"
    );
}

#[test]
fn a_damaged_record_stops_neither_status_nor_an_install() {
    let mut dist = TestDist::new();
    dist.addon("first", "1.0.0", "function first() { :; }\n");
    dist.addon(
        "second",
        "1.0.0",
        "function second() { echo second >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec(
        "spec.yaml",
        &[("first", "version: latest"), ("second", "version: latest")],
    );
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new().env("TRACE", scratch.path().join("trace"));
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let record = node.install_dir().join("state/second.json");
    fs_err::write(&record, "{\"name\": \"second\", \"current\": ").unwrap();

    let output = node.berth(&["status"]);
    let all = failed(&output);
    assert!(all.contains("first"), "the other record is shown: {all}");
    assert!(all.contains("second.json is damaged"), "{all}");

    let again = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert!(again.contains("is damaged"), "the plan says why: {again}");
    assert_eq!(
        fs_err::read_to_string(node.install_dir().join("state/second.json.damaged")).unwrap(),
        "{\"name\": \"second\", \"current\": ",
        "the damaged record is kept aside"
    );
    assert_eq!(
        node.status()["second"]["progressing"]["reason"],
        "Succeeded"
    );
    assert_eq!(trace(&scratch), "second\nsecond\n");
}

#[test]
fn a_damaged_digest_in_a_record_is_an_error_not_a_panic() {
    let (dist, spec) = dist_with("demo", "function demo() { :; }\n");
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let record = node.install_dir().join("state/demo.json");
    let text = fs_err::read_to_string(&record).unwrap();
    let digest =
        Sha256Digest::of(&fs_err::read(dist.dist.path().join("demo-1.0.0.tar.gz")).unwrap());
    fs_err::write(&record, text.replace(&digest.to_string(), "sha256:damaged")).unwrap();
    let all = failed(&node.berth(&["rollback", "demo"]));
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains("damaged"), "{all}");
    // Reset stops before it removes anything: the damaged record's add-on cannot be undone.
    let all = failed(&node.berth(&["reset"]));
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains("demo.json is damaged"), "{all}");
    assert!(record.exists(), "nothing was removed");
}

#[test]
fn lifetimes_out_of_range_are_refused_not_a_panic() {
    let node = Node::new();
    for ttl in ["10000years", "0s", "99999999999999999999"] {
        let mut child = node
            .command(&["join-param", "set", "--secret", "--ttl", ttl, "key"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // berth may refuse the argument before it reads standard input.
        let _ = child.stdin.take().unwrap().write_all(b"value");
        let all = failed(&child.wait_with_output().unwrap());
        assert!(!all.contains("panicked"), "{ttl}: {all}");
        assert!(
            all.contains(&format!("`{ttl}` is out of range: from 1s to 1year"))
                || all.contains(&format!("`{ttl}` is not a duration")),
            "{ttl}: {all}"
        );
    }
}

#[test]
fn a_closed_stderr_does_not_leave_an_addon_installing() {
    let (dist, spec) = dist_with(
        "chatty",
        "function chatty() { for i in $(seq 1 2000); do echo \"line $i\" >&2; done; }\n",
    );
    let node = Node::new();
    let mut child = node
        .install_command(&spec, &dist.url())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away at once: every write to stderr fails from here on.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{status}: {:?}",
        node.berth(&["status", "--json"])
    );
    assert_eq!(
        node.status()["chatty"]["progressing"]["reason"],
        "Succeeded"
    );
}

#[test]
fn arguments_that_would_steer_the_shell_are_refused_before_any_hook() {
    let (dist, spec) = dist_with("demo", "function demo() { echo demo >> \"$TRACE\"; }\n");
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new().env("TRACE", scratch.path().join("trace"));
    for param in [
        "path=/tmp/evil",
        "bash-env=/tmp/evil",
        "dir=/tmp",
        "ld-preload=/x.so",
    ] {
        let all = failed(&node.install(&spec, &dist.url(), &["--param", param]));
        assert!(
            all.contains("which the shell or Berth obeys") || all.contains("which Berth sets"),
            "{param}: {all}"
        );
    }
    assert!(!scratch.path().join("trace").exists(), "no hook ran");
}

#[test]
fn a_spec_value_with_a_line_break_cannot_add_yaml_keys() {
    let (dist, spec) = dist_with(
        "render",
        r#"
function render() {
    printf 'name: $RENDER_NAME\n' > "$DIR/pod.yaml"
    render_yaml_file "$DIR/pod.yaml" > "$OUT"
}
"#,
    );
    // Every line break YAML knows, written as YAML escapes: LF, CR, NEL, LS, PS.
    for escape in ["\\n", "\\r", "\\N", "\\L", "\\P"] {
        fs_err::write(
            &spec,
            format!(
                "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  render:\n    version: latest\n    name: \"x{escape}hostPID: true\"\n"
            ),
        )
        .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let node = Node::new().env("OUT", scratch.path().join("out.yaml"));
        let all = failed(&node.install(&spec, &dist.url(), &[]));
        assert!(
            all.contains("$RENDER_NAME holds a line break"),
            "{escape}: {all}"
        );
        let written = fs_err::read_to_string(scratch.path().join("out.yaml")).unwrap_or_default();
        assert!(!written.contains("hostPID"), "{escape}: {written}");
    }
}

#[test]
fn a_record_whose_version_names_a_path_sources_nothing_on_reset() {
    let (dist, spec) = dist_with("demo", "function demo() { :; }\n");
    let scratch = tempfile::tempdir().unwrap();
    let node = Node::new().env("MARKER", scratch.path().join("marker"));
    succeeded(&node.install(&spec, &dist.url(), &[]));
    // An install.sh outside Berth's folders that a crafted version would reach.
    let evil = node.root.path().join("evil");
    fs_err::create_dir_all(&evil).unwrap();
    fs_err::write(evil.join("install.sh"), "touch \"$MARKER\"\n").unwrap();
    let record = node.install_dir().join("state/demo.json");
    let text = fs_err::read_to_string(&record).unwrap();
    fs_err::write(
        &record,
        text.replace(
            "\"version\": \"1.0.0\"",
            "\"version\": \"../../../../../evil\"",
        ),
    )
    .unwrap();
    let all = failed(&node.berth(&["reset"]));
    assert!(all.contains("not a plain name"), "{all}");
    assert!(
        !scratch.path().join("marker").exists(),
        "the crafted path was sourced"
    );
}

#[test]
fn join_secrets_never_reach_a_command_line_and_logs_are_private() {
    // The hook fails if any process shows the secret on its command line.
    let (dist, spec) = dist_with(
        "peer",
        r#"
function peer_join() {
    local cmdline line
    for cmdline in /proc/[0-9]*/cmdline; do
        line=$(tr '\0' ' ' < "$cmdline" 2>/dev/null) || continue
        if [[ "$line" == *"$PEER_TOKEN"* ]]; then
            bail "the secret is on the command line of $cmdline: $line"
        fi
    done
    echo "joined with a token of ${#PEER_TOKEN} characters"
}
"#,
    );
    let node = Node::new();
    let mut child = node
        .command(&[
            "join",
            "--spec",
            spec.to_str().unwrap(),
            "--dist",
            &dist.url(),
            "--params-from-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"peer-token=s3cr3t-0123456789\0peer-other=value\0")
        .unwrap();
    let all = succeeded(&child.wait_with_output().unwrap());
    assert!(
        all.contains("joined with a token of 17 characters"),
        "{all}"
    );
    for (folder, mode) in [("var/log/berth", 0o700), ("var/lib/berth/state", 0o700)] {
        let path = node.root.path().join(folder);
        let actual = fs_err::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(actual, mode, "{folder}");
        for entry in fs_err::read_dir(&path).unwrap() {
            let file = entry.unwrap().path();
            let actual = fs_err::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(actual, 0o600, "{}", file.display());
        }
    }
}
