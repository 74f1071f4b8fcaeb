//! The README's quick starts (one machine, then a fleet), run as a new user runs them: its lines taken from the README itself
//! (so the two cannot drift) and run by bash, line after line, stopping at the first that
//! fails. It runs in a network namespace of its own, with a containerd of its own, so its
//! fixed ports (8800, 8080, 8081, 7433) meet nothing else; what the machine cannot give it is
//! stood in for, each in one place below:
//! - the build (the README's first lines): the binaries this test suite built, and a dist of
//!   the `demo` add-on built by the real `berth-build build`;
//! - `sudo`: these tests run as root, and the machine may have no sudo;
//! - the node's root `/`: a folder of the test's (`BERTH_ROOT`), and `/tmp` a folder of its own;
//! - the user's state folder (`XDG_STATE_HOME`, where `serve` keeps its installers): a
//!   folder of the test's, as a new user's is empty.

use std::path::Path;
use std::process::Command;

use berth_testgrid::network::Network;
use berth_testgrid::{Containerd, built_beside};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The repository this test is part of.
fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The first `sh` block after `heading` in the README.
fn block_after(readme: &str, heading: &str) -> String {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has no `{heading}`"));
    let rest = &readme[start..];
    let open = rest.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let close = rest[open..].find("```").expect("its end") + open;
    rest[open..close].to_string()
}

/// A folder where the README's quick starts run: the binaries and a dist as the README's
/// first command leaves them, `sudo` as a program that runs its command as it is (these tests
/// run as root), and a containerd in a network namespace of its own.
struct Workbench {
    work: tempfile::TempDir,
    host: berth_testgrid::network::Host,
    containerd: Containerd,
    _network: Network,
}

impl Workbench {
    fn new() -> Workbench {
        let repository = repository();
        let work = tempfile::tempdir().unwrap();
        let path = work.path();
        let release = path.join("target/release");
        fs_err::create_dir_all(&release).unwrap();
        let builder = Path::new(env!("CARGO_BIN_EXE_berth-build"));
        fs_err::os::unix::fs::symlink(builder, release.join("berth-build")).unwrap();
        fs_err::os::unix::fs::symlink(
            built_beside(env!("CARGO_BIN_EXE_berth-build"), "berth"),
            release.join("berth"),
        )
        .unwrap();
        // The demo add-on alone (the others' host packages need a distro mirror).
        let demo = repository.join("addons/demo");
        for entry in walkdir::WalkDir::new(&demo) {
            let entry = entry.unwrap();
            let to = path
                .join("addons/demo")
                .join(entry.path().strip_prefix(&demo).unwrap());
            if entry.file_type().is_dir() {
                fs_err::create_dir_all(&to).unwrap();
            } else {
                fs_err::copy(entry.path(), &to).unwrap();
            }
        }
        fs_err::os::unix::fs::symlink(repository.join("examples"), path.join("examples")).unwrap();
        let built = Command::new(builder)
            .args(["build", "addons", "--out", "dist"])
            .env("BERTH_CACHE_DIR", path.join("cache"))
            .current_dir(path)
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", text(&built.stderr));
        // A program, not a function: `sudo X &` is then X's own process, which `kill` ends.
        fs_err::create_dir_all(path.join("bin")).unwrap();
        fs_err::write(path.join("bin/sudo"), "#!/bin/sh\nexec env \"$@\"\n").unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        fs_err::set_permissions(path.join("bin/sudo"), mode).unwrap();
        fs_err::create_dir_all(path.join("tmp")).unwrap();
        let mut network = Network::new();
        let host = network.host();
        let containerd = Containerd::start_in(&host);
        Workbench {
            work,
            host,
            containerd,
            _network: network,
        }
    }

    /// Runs the README's `sh` block under `heading`, line by line, stopping at the first that
    /// fails; returns what it printed on standard output.
    fn run(&self, heading: &str) -> String {
        let repository = repository();
        let readme = fs_err::read_to_string(repository.join("README.md")).unwrap();
        let block = block_after(&readme, heading);
        let path = self.work.path();
        let mut script = format!(
            "set -euo pipefail\n# What it started in the background ends with it, however it ends.\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nexport PATH={bin}:$PATH\nexport BERTH_ROOT={root}\nexport CONTAINERD_ADDRESS={socket}\n",
            bin = path.join("bin").display(),
            root = path.join("node1").display(),
            socket = self.containerd.socket.display(),
        );
        let mut lines = 0;
        for line in block.lines() {
            // Built by the test suite, as the README's first command builds it.
            if line.starts_with("cargo build") {
                continue;
            }
            script.push_str(&line.replace("/tmp/", &format!("{}/tmp/", path.display())));
            script.push('\n');
            lines += 1;
        }
        assert!(lines > 20, "{heading} is {lines} lines:\n{block}");
        let output = self
            .host
            .command("bash")
            .args(["-c", &script])
            // `serve` keeps the installers posted to it under the user's state folder, each
            // with the lock it was first given: a fresh user's is empty.
            .env("XDG_STATE_HOME", path.join("state"))
            .current_dir(path)
            .output()
            .unwrap();
        let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(output.status.success(), "{heading} stopped:\n{said}");
        // And it left both nodes as they were.
        for node in ["node1", "tmp/node2"] {
            let state = path.join(node).join("var/lib/berth/state");
            let left: Vec<_> = fs_err::read_dir(&state)
                .map(|entries| entries.map(|entry| entry.unwrap().file_name()).collect())
                .unwrap_or_default();
            assert!(left.is_empty(), "{heading}: {node} keeps {left:?}");
        }
        text(&output.stdout)
    }
}

#[test]
fn the_readmes_quick_starts_run_as_written() {
    let bench = Workbench::new();
    let stdout = bench.run("## Quick start: one machine");
    // What its comments say the lines show.
    for answer in ["demo 1.0.0", "demo 2.0.0"] {
        assert!(stdout.contains(answer), "{stdout}");
    }
    for reason in ["Installing", "Upgrading", "RollingBack"] {
        assert!(
            stdout.contains(reason),
            "the history shows {reason}: {stdout}"
        );
    }

    let stdout = bench.run("## Quick start: a fleet");
    assert!(stdout.contains("node-2"), "{stdout}");
    assert_eq!(
        stdout.matches("demo 2.0.0\n").count(),
        2,
        "both nodes moved: {stdout}"
    );
}
