//! The README's quick starts (one machine, then a fleet), run as a new user runs them: its lines taken from the README itself
//! (so the two cannot drift) and run by bash, line after line, stopping at the first that
//! fails. It runs in a network namespace of its own, with a containerd of its own, so its
//! fixed ports (8800, 8080, 8081, 7433) meet nothing else; what the machine cannot give it is
//! stood in for, each in one place below:
//! - the build (the README's `cargo build` lines): the binaries this test suite built;
//! - `sudo`: these tests run as root, and the machine may have no sudo;
//! - `/tmp`, where the quick starts keep the dist and the nodes' roots: a folder of the test's;
//! - the blob cache of `berth-build build`: a folder of the test's;
//! - the user's state folder (`XDG_STATE_HOME`, where `serve` keeps its installers): a
//!   folder of the test's, as a new user's is empty.

use std::path::Path;

use berth_testkit::network::Network;
use berth_testkit::{Containerd, built_beside};

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
    host: berth_testkit::network::Host,
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
            "set -euo pipefail\n# What it started in the background ends with it, however it ends.\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nexport PATH={bin}:$PATH\nexport BERTH_CACHE_DIR={cache}\nexport CONTAINERD_ADDRESS={socket}\n",
            bin = path.join("bin").display(),
            cache = path.join("cache").display(),
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
        for node in ["tmp/node1", "tmp/node2"] {
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

/// The README reads in the order a newcomer needs it: what Berth is and who it is for, the
/// two set-up commands, a try-it path, the words it uses, then each part as a user meets it,
/// contributing last; and its table of contents lists every section.
#[test]
fn the_readme_reads_in_a_newcomers_order() {
    let readme = fs_err::read_to_string(repository().join("README.md")).unwrap();
    let mut in_code = false;
    let mut headings = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && let Some(heading) = line.strip_prefix("## ") {
            headings.push(heading.to_string());
        }
    }
    assert_eq!(
        headings,
        [
            "Quick start: one machine, two nodes",
            "Quick start: a fleet of two nodes",
            "Words this README uses",
            "Installing on a node: berth",
            "Building packages: berth-build",
            "Signing",
            "Serving and airgap",
            "Fleet and rollouts",
            "Support bundles",
            "Backups",
            "Testgrid: your specs on real machines",
            "kURL compatibility",
            "Contributing",
        ]
    );
    // Each section is in the table of contents, by its anchor, before the first section.
    let first_section = readme.find("\n## ").unwrap();
    for heading in &headings {
        let anchor: String = heading
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' => Some(c),
                _ => None,
            })
            .collect();
        let entry = format!("[{heading}](#{anchor})");
        let at = readme.find(&entry);
        assert!(
            at.is_some_and(|at| at < first_section),
            "the contents lack {entry}"
        );
    }
    // The first screen: who it is for, then the two set-up commands, each on a line of its own.
    let first_screen: Vec<&str> = readme.lines().take(24).collect();
    let first_screen = first_screen.join("\n");
    assert!(first_screen.contains("It is for "), "{first_screen}");
    let commands: Vec<&str> = first_screen
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_default()
        .lines()
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert!(
        commands[0].starts_with("cargo build --release"),
        "{commands:?}"
    );
    assert!(commands[1].starts_with("scripts/test.sh"), "{commands:?}");
    // The try-it path needs no distro mirror and writes nothing under `/`.
    let try_it = block_after(&readme, "## Quick start: one machine");
    assert!(
        try_it.contains("berth-build build addons/demo --out /tmp/"),
        "{try_it}"
    );
    for line in try_it.lines() {
        // What each `sudo` runs: berth, or bash running an installer, only with a root in /tmp.
        for after in line.split("sudo ").skip(1) {
            let program = after.split_whitespace().next().unwrap_or_default();
            assert!(
                program.starts_with("BERTH_ROOT=/tmp/")
                    || !["berth", "bash", "timeout"].contains(&program),
                "writes under /: {line}"
            );
        }
    }
}
