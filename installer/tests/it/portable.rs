//! The node binary that ships (`scripts/portable.sh` builds it; `scripts/test.sh` runs that
//! first) starts on every system kURL installs on: it asks the dynamic loader for no glibc
//! symbol newer than 2.17 (CentOS/RHEL 7) and for no library but glibc's own.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{require, run};

/// The oldest glibc the node binary runs on.
const FLOOR: (u32, u32) = (2, 17);

/// glibc's own libraries: a binary linked against them needs nothing else on a node.
const C_LIBRARY: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
];

/// What `binary` asks of the dynamic loader: the libraries it needs, and the glibc symbol
/// versions it requires (`GLIBC_2.17` as (2, 17)), read with binutils' objdump.
fn needs(binary: &Path) -> (Vec<String>, Vec<(u32, u32)>) {
    let output = run(Command::new(require("objdump", "binutils"))
        .arg("-p")
        .arg(binary));
    let text = String::from_utf8_lossy(&output.stdout);
    let libraries = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("NEEDED"))
        .map(|name| name.trim().to_string())
        .collect();
    let versions = text
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .filter_map(|version| {
            let mut parts = version.split('.').map(str::parse::<u32>);
            Some((parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .collect();
    (libraries, versions)
}

/// Why `binary` would not start on every system kURL supports, if it would not.
fn portable(binary: &Path) -> Result<(), String> {
    let (libraries, versions) = needs(binary);
    let mut problems = Vec::new();
    let foreign: Vec<&String> = libraries
        .iter()
        .filter(|library| !C_LIBRARY.contains(&library.as_str()))
        .collect();
    if !foreign.is_empty() {
        problems.push(format!("it links {foreign:?}, beyond the C library"));
    }
    if let Some(newest) = versions.iter().max().filter(|newest| **newest > FLOOR) {
        problems.push(format!(
            "it asks for GLIBC_{}.{}, newer than GLIBC_{}.{}",
            newest.0, newest.1, FLOOR.0, FLOOR.1
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The target folder the suite's binaries were built in.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_berth"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}

#[test]
fn the_shipped_node_binary_needs_no_glibc_newer_than_2_17_and_no_other_library() {
    let binary = target_dir().join("x86_64-unknown-linux-gnu/release/berth");
    assert!(
        binary.exists(),
        "{} is missing: build it with scripts/portable.sh (scripts/test.sh does)",
        binary.display()
    );
    portable(&binary).unwrap_or_else(|why| panic!("{}: {why}", binary.display()));
    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert!(version.status.success());
}

/// The check can fail: a binary built against this host's newer glibc, as `cargo build`
/// makes it, is refused.
#[test]
fn a_binary_built_against_a_newer_glibc_is_refused() {
    let host = Command::new("ldd").arg("--version").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout);
    let version = host
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().last())
        .and_then(|version| {
            let (major, minor) = version.split_once('.')?;
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        })
        .expect("ldd --version names glibc's version");
    assert!(
        version >= (2, 34),
        "this check expects a build host with glibc 2.34 or newer, whose `cargo build` asks for it; this one has {version:?}"
    );
    let error = portable(Path::new(env!("CARGO_BIN_EXE_berth"))).unwrap_err();
    assert!(error.contains("newer than GLIBC_2.17"), "{error}");
}
