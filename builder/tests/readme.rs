//! The README's quick start, run as a new user runs it: its lines taken from the README itself
//! (so the two cannot drift) and run by bash, line after line, stopping at the first that
//! fails. It runs in a network namespace of its own, with a containerd of its own, so its
//! fixed ports (8800, 8080, 8081) meet nothing else; what the machine cannot give it is
//! stood in for, each in one place below:
//! - the build (the README's first lines): the binaries this test suite built, and a dist of
//!   the `demo` add-on built by the real `berth-build build`;
//! - `sudo`: these tests run as root, and the machine may have no sudo;
//! - the node's root `/`: a folder of the test's (`BERTH_ROOT`), and `/tmp` a folder of its own.

use std::path::Path;
use std::process::Command;

use berth_testgrid::network::Network;
use berth_testgrid::{Containerd, built_beside};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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

#[test]
fn the_readmes_quick_start_runs_as_written() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = fs_err::read_to_string(repository.join("README.md")).unwrap();
    let quick_start = block_after(&readme, "## Quick start");

    let work = tempfile::tempdir().unwrap();
    let work_path = work.path();
    // What the README's first command leaves: both binaries, and a dist of the add-ons.
    let release = work_path.join("target/release");
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
        let to = work_path
            .join("addons/demo")
            .join(entry.path().strip_prefix(&demo).unwrap());
        if entry.file_type().is_dir() {
            fs_err::create_dir_all(&to).unwrap();
        } else {
            fs_err::copy(entry.path(), &to).unwrap();
        }
    }
    fs_err::os::unix::fs::symlink(repository.join("examples"), work_path.join("examples")).unwrap();
    let built = Command::new(builder)
        .args(["build", "addons", "--out", "dist"])
        .env("BERTH_CACHE_DIR", work_path.join("cache"))
        .current_dir(work_path)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));

    let mut network = Network::new();
    let host = network.host();
    let containerd = Containerd::start_in(&host);
    let tmp = work_path.join("tmp");
    fs_err::create_dir_all(&tmp).unwrap();
    let mut script = format!(
        "set -euo pipefail\n# What it started in the background ends with it, however it ends.\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nsudo() {{ env \"$@\"; }}\nexport BERTH_ROOT={root}\nexport CONTAINERD_ADDRESS={socket}\n",
        root = work_path.join("node1").display(),
        socket = containerd.socket.display(),
    );
    let mut lines = 0;
    for line in quick_start.lines() {
        // Built by the test suite, as the README's first command builds it.
        if line.starts_with("cargo build") {
            continue;
        }
        script.push_str(&line.replace("/tmp/", &format!("{}/", tmp.display())));
        script.push('\n');
        lines += 1;
    }
    assert!(
        lines > 20,
        "the quick start is {lines} lines:\n{quick_start}"
    );
    let output = host
        .command("bash")
        .args(["-c", &script])
        .current_dir(work_path)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "the quick start stopped:\n{said}");
    // What its comments say each line shows.
    let stdout = text(&output.stdout);
    for answer in ["demo 1.0.0", "demo 2.0.0"] {
        assert!(stdout.contains(answer), "{stdout}");
    }
    for reason in ["Installing", "Upgrading", "RollingBack"] {
        assert!(
            stdout.contains(reason),
            "the history shows {reason}: {stdout}"
        );
    }
    // And it left both nodes as they were.
    for node in ["node1", "tmp/node2"] {
        let state = work_path.join(node).join("var/lib/berth/state");
        let left: Vec<_> = fs_err::read_dir(&state)
            .map(|entries| entries.map(|entry| entry.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{node} keeps {left:?}");
    }
}
