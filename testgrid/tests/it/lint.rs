//! Repository-wide lints that run with the tests, so CI keeps them: every shell script Berth
//! ships or runs passes shellcheck. (The rendered install, join, upgrade and tasks scripts are
//! checked by `builder/tests/it/serve.rs`, since their templates are not bash until rendered.)

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root: the workspace folder above this crate.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate lives in the workspace")
        .to_path_buf()
}

/// Every `.sh` below `folders`, and the extensionless scripts named in `files`.
fn scripts(root: &Path, folders: &[&str], files: &[&str]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = files.iter().map(|file| root.join(file)).collect();
    for folder in folders {
        let folder = root.join(folder);
        assert!(folder.is_dir(), "{} is missing", folder.display());
        for entry in walkdir::WalkDir::new(&folder).sort_by_file_name() {
            let entry = entry.expect("the repository is readable");
            if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "sh") {
                found.push(entry.into_path());
            }
        }
    }
    found
}

#[test]
fn every_shell_script_passes_shellcheck() {
    let shellcheck = berth_testkit::require("shellcheck", "shellcheck");
    let root = repository();
    let scripts = scripts(
        &root,
        &["scripts", "addons", "bench", "builder/hooks"],
        &[".ci/run", "addons/pod-network/1.0.0/berth-pod-network"],
    );
    // The helper library, every add-on's install.sh, the test and bench scripts at least.
    for expected in [
        "scripts/common/common.sh",
        "scripts/test.sh",
        "addons/demo/1.0.0/install.sh",
        "bench/install.sh",
        "builder/hooks/kubernetes.sh",
        "scripts/kubernetes.sh",
    ] {
        assert!(
            scripts.contains(&root.join(expected)),
            "{expected} is not among the scripts checked"
        );
    }
    let output = Command::new(shellcheck)
        .current_dir(&root)
        .args(["--severity", "warning", "--external-sources"])
        .args(&scripts)
        .output()
        .expect("shellcheck runs");
    assert!(
        output.status.success(),
        "shellcheck found problems in {} scripts:\n{}{}",
        scripts.len(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
