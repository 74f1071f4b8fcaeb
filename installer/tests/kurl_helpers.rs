//! The helper library against kURL's real add-ons: every helper they call (directly or through
//! another helper, listed in `kurl_helpers.txt`) is defined, each add-on's install.sh sources
//! cleanly after it, and kURL's prompts answer at once without a terminal.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{kurl_fixtures, printed};

fn library() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common")
}

/// Runs `script` in bash after sourcing the whole library, with no terminal and stdin closed.
fn with_library(script: &str, environment: &[(&str, &str)]) -> std::process::Output {
    Command::new("setsid")
        .args(["bash", "-c"])
        .arg(format!(
            "set -e; for file in \"$LIBRARY\"/*.sh; do . \"$file\"; done; {script}"
        ))
        .env("LIBRARY", library())
        .envs(environment.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn every_helper_kurls_addons_call_is_defined() {
    let list = fs_err::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kurl_helpers.txt"),
    )
    .unwrap();
    let names: Vec<&str> = list
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert!(names.len() >= 90, "{} names", names.len());
    // The names are the arguments after `bash -c SCRIPT $0`.
    let output = Command::new("setsid")
        .args(["bash", "-c"])
        .arg(
            "set -e; for file in \"$LIBRARY\"/*.sh; do . \"$file\"; done; for name in \"$@\"; do declare -F \"$name\" >/dev/null || echo \"missing $name\"; done",
        )
        .arg("check")
        .args(&names)
        .env("LIBRARY", library())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", printed(&output));
    assert_eq!(printed(&output), "", "every helper is defined");
}

#[test]
fn every_kurl_addon_sources_after_the_library_and_defines_its_hooks() {
    let addons = kurl_fixtures("kurl-addons/addons");
    for (folder, hooks) in [
        ("collectd/v5", &["collectd", "collectd_join"][..]),
        (
            "containerd/2.2.6",
            &[
                "containerd_install",
                "containerd_pre_init",
                "containerd_join",
            ][..],
        ),
        (
            "containerd/1.6.33",
            &[
                "containerd_install",
                "containerd_pre_init",
                "containerd_join",
            ][..],
        ),
        (
            "ekco/0.28.14",
            &["ekco", "ekco_pre_init", "ekco_join", "ekco_post_init"][..],
        ),
        (
            "flannel/0.28.7",
            &["flannel", "flannel_pre_init", "flannel_join"][..],
        ),
        (
            "registry/3.1.1",
            &["registry", "registry_pre_init", "registry_join"][..],
        ),
    ] {
        let script = addons.join(folder).join("install.sh");
        let check = hooks
            .iter()
            .map(|hook| format!("declare -F {hook} >/dev/null || echo 'no {hook}'; "))
            .collect::<String>();
        let output = with_library(
            &format!(". \"$SCRIPT\"; {check}"),
            &[("SCRIPT", script.to_str().unwrap())],
        );
        assert!(output.status.success(), "{folder}: {}", printed(&output));
        assert!(
            !printed(&output).contains("no "),
            "{folder}: {}",
            printed(&output)
        );
    }
}

#[test]
fn prompts_answer_at_once_without_a_terminal() {
    for (call, environment, status, says) in [
        ("confirmY", &[][..], 0, "Y"),
        ("confirmN", &[][..], 1, "N"),
        ("confirmN", &[("ASSUME_YES", "1")][..], 0, "Y"),
        ("prompt; [ -z \"$PROMPT_RESULT\" ]", &[][..], 0, ""),
    ] {
        let started = Instant::now();
        let output = with_library(call, environment);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{call} waited for an answer"
        );
        assert_eq!(
            output.status.code(),
            Some(status),
            "{call}: {}",
            printed(&output)
        );
        assert!(
            printed(&output).contains(says),
            "{call}: {}",
            printed(&output)
        );
    }
}

/// kURL's subnet discovery computes in bash arithmetic, which runs a command named in its
/// operands; spec values (`weave.podCIDR`, `kubernetes.serviceCIDR`) reach it, and only
/// checked IPv4 CIDRs go in.
#[test]
fn a_crafted_cidr_runs_nothing_in_subnet_discovery() {
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("ran");
    let crafted = format!("x[$(touch {})].0.0.0/16", touched.display());
    let output = with_library(
        "__berth_subnet_alloc --subnet-alloc-range \"$RANGE\" --cidr-range 20 || echo refused; __berth_subnet_alloc --subnet-alloc-range 10.32.0.0/16 --cidr-range 20 --exclude-subnet=\"$RANGE,10.32.0.0/20\"",
        &[("RANGE", crafted.as_str())],
    );
    assert!(output.status.success(), "{}", printed(&output));
    assert!(!touched.exists(), "a command in a spec value ran");
    let all = printed(&output);
    assert!(all.contains("refused"), "{all}");
    assert!(all.contains("10.32.16.0/20"), "{all}");
}
