//! The helper library against kURL's real add-ons: every helper they call (directly or through
//! another helper, listed in `kurl_helpers.txt`) is defined, each add-on's install.sh sources
//! cleanly after it, and kURL's prompts answer at once without a terminal.

use crate::support;

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
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/kurl_helpers.txt"),
    )
    .unwrap();
    let names: Vec<&str> = list
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert!(names.len() >= 90, "{} names", names.len());
    // The names are the arguments after `bash -c SCRIPT $0`.
    let output = support::run(
        Command::new("setsid")
            .args(["bash", "-c"])
            .arg(
                "set -e; for file in \"$LIBRARY\"/*.sh; do . \"$file\"; done; for name in \"$@\"; do declare -F \"$name\" >/dev/null || echo \"missing $name\"; done",
            )
            .arg("check")
            .args(&names)
            .env("LIBRARY", library())
            .stdin(Stdio::null()),
    );
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

/// What kURL's own unit tests of its Docker version helpers expect (kURL's
/// `scripts/common/test/docker-version-test.sh`, `parseDockerVersion` and
/// `compareDockerVersions` in `common.sh`).
#[test]
fn docker_versions_parse_and_compare_as_kurls_do() {
    for (version, parsed) in [
        ("1.13.1", "1 13 1 -"),
        ("17.03.0-ce", "17 03 0 ce"),
        ("20.10.17-3.el8", "20 10 17 3"),
        ("20.10", "20 10 - -"),
        ("", "- - - -"),
    ] {
        let output = with_library(
            "parseDockerVersion \"$V\"; echo \"${DOCKER_VERSION_MAJOR:--} ${DOCKER_VERSION_MINOR:--} ${DOCKER_VERSION_PATCH:--} ${DOCKER_VERSION_RELEASE:--}\"",
            &[("V", version)],
        );
        assert_eq!(printed(&output).trim(), parsed, "{version}");
    }
    for (a, b, full, minor_only) in [
        ("1.13.1", "1.13.1", "0", "0"),
        ("17.03.0-ce", "17.03.0-ce", "0", "0"),
        ("1.12.1", "1.13.1", "-1", "-1"),
        ("1.13.0", "1.13.1", "-1", "0"),
        ("1.13.1", "17.03.0-ce", "-1", "-1"),
        ("17.03.1-ce", "17.03.0-ce", "1", "0"),
        ("18.09.1", "17.03.0-ce", "1", "1"),
        ("20.10", "20.10.1", "0", "0"),
    ] {
        let output = with_library(
            "compareDockerVersions \"$A\" \"$B\"; full=$COMPARE_DOCKER_VERSIONS_RESULT; compareDockerVersionsIgnorePatch \"$A\" \"$B\"; echo \"$full $COMPARE_DOCKER_VERSIONS_RESULT\"",
            &[("A", a), ("B", b)],
        );
        assert_eq!(
            printed(&output).trim(),
            format!("{full} {minor_only}"),
            "{a} against {b}"
        );
    }
}

/// kURL's flag and JSON helpers (`common.sh`: `kebab_to_camel`, the `get_*_flag` builders,
/// `insertOrReplaceJsonParam`, `common_list_images_in_manifest_file`,
/// `common_upgrade_merge_images_list`), with kURL's tests' expectations; the JSON one writes
/// JSON whatever the value holds, where kURL's sed breaks on `/`, `&` and `"`.
#[test]
fn flag_and_json_helpers_answer_as_kurls_do() {
    for (text, camel) in [
        ("kebab-case", "kebabCase"),
        ("alreadyCamelCase", "alreadyCamelCase"),
        ("cert-manager", "certManager"),
        ("a--b", "a-b"),
        ("abc-", "abc-"),
        ("-lead", "Lead"),
    ] {
        let output = with_library("kebab_to_camel \"$T\"", &[("T", text)]);
        assert_eq!(printed(&output).trim_end(), camel, "{text}");
    }
    let flags = with_library(
        "get_docker_registry_ip_flag 10.96.0.7; get_docker_registry_ip_flag ''; get_skip_system_package_install_flag; get_exclude_builtin_host_preflights_flag; get_ipv6_flag; get_kurl_install_directory_flag /var/lib/kurl; get_kurl_install_directory_flag .; get_additional_no_proxy_addresses_flag 1 a,b; echo",
        &[
            ("SKIP_SYSTEM_PACKAGE_INSTALL", "1"),
            ("EXCLUDE_BUILTIN_HOST_PREFLIGHTS", ""),
            ("IPV6_ONLY", "1"),
        ],
    );
    assert_eq!(
        printed(&flags).trim_end(),
        " docker-registry-ip=10.96.0.7 skip-system-package-install ipv6 kurl-install-directory=. additional-no-proxy-addresses=a,b"
    );

    let dir = tempfile::tempdir().unwrap();
    let daemon = dir.path().join("docker/daemon.json");
    let daemon_text = daemon.to_str().unwrap();
    let output = with_library(
        "insertOrReplaceJsonParam \"$F\" exec-opts 'native.cgroupdriver=systemd'; insertOrReplaceJsonParam \"$F\" log-driver json-file; insertOrReplaceJsonParam \"$F\" exec-opts 'a/b & \"c\"'",
        &[
            ("F", daemon_text),
            ("BERTH_BIN", env!("CARGO_BIN_EXE_berth")),
        ],
    );
    assert!(output.status.success(), "{}", printed(&output));
    let written: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&daemon).unwrap()).unwrap();
    assert_eq!(
        written,
        serde_json::json!({"exec-opts": "a/b & \"c\"", "log-driver": "json-file"})
    );
    fs_err::write(&daemon, "[1, 2]").unwrap();
    let refused = with_library(
        "insertOrReplaceJsonParam \"$F\" k v",
        &[
            ("F", daemon_text),
            ("BERTH_BIN", env!("CARGO_BIN_EXE_berth")),
        ],
    );
    assert!(!refused.status.success());
    assert_eq!(fs_err::read_to_string(&daemon).unwrap(), "[1, 2]");

    let manifest = dir.path().join("Manifest");
    fs_err::write(
        &manifest,
        "image flannel ghcr.io/flannel-io/flannel:v0.28.7\nasset x https://example.com/x\nimage pause registry.k8s.io/pause:3.9\nimage busybox busybox\n",
    )
    .unwrap();
    let listed = with_library(
        "common_list_images_in_manifest_file \"$M\"",
        &[("M", manifest.to_str().unwrap())],
    );
    assert_eq!(
        printed(&listed).trim_end(),
        "ghcr.io/flannel-io/flannel:v0.28.7 registry.k8s.io/pause:3.9 docker.io/library/busybox:latest"
    );
    let merged = with_library("common_upgrade_merge_images_list 'b a' 'c a'", &[]);
    assert_eq!(printed(&merged).trim_end(), "a b c");
}

/// kURL's `discover_public_ip`: the first cloud metadata service that answers with an address
/// gives PUBLIC_ADDRESS (here a loopback server stands in for them); one that answers with
/// something else is passed over (kURL's stops there); an airgap install or a given address
/// asks none; the caller's errexit stays as it was.
#[test]
fn the_public_address_comes_from_the_first_cloud_service_that_gives_one() {
    let served = tempfile::tempdir().unwrap();
    let gce = served
        .path()
        .join("computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip");
    let ec2 = served.path().join("latest/meta-data/public-ipv4");
    for (path, text) in [(&gce, "<html>not an address</html>"), (&ec2, "203.0.113.7")] {
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, text).unwrap();
    }
    let server = support::FileServer::serve(served.path(), None);
    let host = server.url.trim_start_matches("http://").to_string();
    let services = [
        ("BERTH_METADATA_GCE", host.as_str()),
        ("BERTH_METADATA_LINK_LOCAL", host.as_str()),
    ];
    let output = with_library(
        "set +e; discover_public_ip; echo \"address=$PUBLIC_ADDRESS errexit=${-//[^e]/}\"",
        &services,
    );
    assert_eq!(
        printed(&output).trim(),
        "address=203.0.113.7 errexit=",
        "{}",
        printed(&output)
    );
    let mut airgap = services.to_vec();
    airgap.push(("AIRGAP", "1"));
    let output = with_library(
        "discover_public_ip; echo \"address=$PUBLIC_ADDRESS\"",
        &airgap,
    );
    assert_eq!(printed(&output).trim(), "address=");
    let mut given = services.to_vec();
    given.push(("PUBLIC_ADDRESS", "198.51.100.1"));
    let output = with_library(
        "discover_public_ip; echo \"address=$PUBLIC_ADDRESS\"",
        &given,
    );
    assert_eq!(printed(&output).trim(), "address=198.51.100.1");
}

/// kURL's upgrade-step helpers (`common.sh`: `common_upgrade_step_versions`,
/// `common_upgrade_major_minor_less_one`, `common_upgrade_print_list_of_minor_upgrades`), with
/// the expectations of kURL's `common-test.sh`.
#[test]
fn upgrade_steps_are_listed_as_kurl_lists_them() {
    let steps =
        "1.0.4-14.2.21 0.0.0 0.0.0 0.0.0 1.4.9 1.5.12 1.6.11 1.7.11 1.8.10 1.9.12 1.10.11 1.11.2";
    for (from, to, expected) in [
        ("1.6", "1.6", ""),
        ("1.6", "1.9", "1.7.11 1.8.10 1.9.12"),
        ("1.0", "1.2", "0.0.0 0.0.0"),
        ("1.9", "1.11", "1.10.11 1.11.2"),
        ("1.6", "1.4", ""),
        ("1.9.3", "1.10.9", "1.10.9"),
        ("1.9.3", "1.11.3", "1.10.11 1.11.3"),
    ] {
        let output = with_library(
            "common_upgrade_step_versions \"$STEPS\" \"$FROM\" \"$TO\" | xargs",
            &[("STEPS", steps), ("FROM", from), ("TO", to)],
        );
        assert_eq!(printed(&output).trim(), expected, "{from} to {to}");
    }
    for (from, to) in [("1.9", "1.15"), ("1.1", "2.1")] {
        let output = with_library(
            "common_upgrade_step_versions \"$STEPS\" \"$FROM\" \"$TO\"",
            &[("STEPS", steps), ("FROM", from), ("TO", to)],
        );
        assert_eq!(output.status.code(), Some(1), "{from} to {to}: refused");
    }
    let output = with_library(
        "common_upgrade_major_minor_less_one 1.9; common_upgrade_major_minor_less_one 1.0; common_upgrade_print_list_of_minor_upgrades 1.0 1.4",
        &[],
    );
    assert_eq!(
        printed(&output).trim(),
        "1.8\n1.0\nThis involves upgrading from 1.0 to 1.1, 1.1 to 1.2, 1.2 to 1.3, and 1.3 to 1.4."
    );
}

/// Berth's Kubernetes hooks (packaged for kURL's `packages/kubernetes`): a version change is
/// refused before anything changes (kURL's `kubeadm upgrade` path is not theirs); a first
/// install on a host without a kubelet names what is missing.
#[test]
fn kubernetes_hooks_refuse_what_they_cannot_finish() {
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../builder/hooks/kubernetes.sh");
    let hooks = hooks.to_str().unwrap();
    let upgrade = with_library(
        ". \"$HOOKS\"; kubernetes_pre_init",
        &[
            ("HOOKS", hooks),
            ("KUBERNETES_VERSION", "1.31.4"),
            ("BERTH_KUBERNETES_DECISION", "Upgrade"),
            ("BERTH_KUBERNETES_CURRENT_VERSION", "1.30.8"),
        ],
    );
    assert!(!upgrade.status.success());
    assert!(
        printed(&upgrade).contains("Kubernetes 1.30.8 to 1.31.4: upgrading Kubernetes"),
        "{}",
        printed(&upgrade)
    );
    // A PATH with no kubelet and no kubectl, whatever this machine has.
    let empty = tempfile::tempdir().unwrap();
    let install = with_library(
        ". \"$HOOKS\"; PATH=\"$EMPTY\"; kubernetes_pre_init",
        &[
            ("HOOKS", hooks),
            ("EMPTY", empty.path().to_str().unwrap()),
            ("KUBERNETES_VERSION", "1.30.8"),
            ("BERTH_KUBERNETES_DECISION", "Install"),
        ],
    );
    assert!(!install.status.success());
    assert!(
        printed(&install).contains("needs kubelet kubectl on this host"),
        "{}",
        printed(&install)
    );
}

/// kURL's `addon_install` (`addon.sh`), as MinIO's and OpenEBS's pre_init hooks call it to
/// install themselves early: the add-on's install.sh sourced from `$DIR/addons/NAME/VERSION`
/// and its hook run; nothing for an empty version; an add-on not on the node is named.
#[test]
fn addon_install_runs_an_addons_hook_early_as_kurls_does() {
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("addons/minio/2024.1.1");
    fs_err::create_dir_all(&addon).unwrap();
    fs_err::write(
        addon.join("install.sh"),
        "function minio() { echo \"minio installed, kustomize $(ls -d \"$DIR/kustomize/minio\")\"; }\nfunction minio_join() { :; }\n",
    )
    .unwrap();
    let directory = dir.path().to_str().unwrap();
    let output = with_library(
        "addon_install minio 2024.1.1; addon_install minio ''; echo \"host=${ADDONS_HAVE_HOST_COMPONENTS:-}\"; addon_install velero 1.0.0",
        &[("DIR", directory)],
    );
    let said = printed(&output);
    assert!(
        said.contains(&format!(
            "minio installed, kustomize {directory}/kustomize/minio"
        )),
        "{said}"
    );
    assert_eq!(said.matches("minio installed").count(), 1, "{said}");
    assert!(said.contains("host=1"), "{said}");
    assert!(!output.status.success());
    assert!(
        said.contains("add-on velero 1.0.0 is not on this node"),
        "{said}"
    );
}

/// kURL's storage migrations are refused before they change anything (no kubectl call), with
/// kURL's signatures; the cleanups after them do nothing without Rook or Longhorn, and leave
/// them in place, saying so, where they are.
#[test]
fn storage_migrations_refuse_before_changing_anything() {
    let tools = tempfile::tempdir().unwrap();
    let calls = tools.path().join("calls");
    // A kubectl that records each call and lists the given namespaces.
    let kubectl = tools.path().join("kubectl");
    fs_err::write(
        &kubectl,
        "#!/bin/sh\necho \"$*\" >> \"$CALLS\"\nprintf '%s\\n' $NAMESPACES\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs_err::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap()
    );
    let environment = |namespaces: &'static str| {
        vec![
            ("PATH", path.clone()),
            ("CALLS", calls.to_str().unwrap().to_string()),
            ("NAMESPACES", namespaces.to_string()),
        ]
    };
    let run = |script: &str, namespaces: &'static str| {
        let pairs = environment(namespaces);
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        with_library(script, &pairs)
    };
    for call in [
        "rook_ceph_to_sc_migration openebs 1",
        "longhorn_to_sc_migration openebs 1",
        "migrate_rgw_to_minio",
        "migrate_object_store default rook-ceph-rgw a b minio c d",
    ] {
        let output = run(call, "");
        assert!(!output.status.success(), "{call}");
        assert!(
            printed(&output).contains("is not something Berth does; nothing was changed"),
            "{call}: {}",
            printed(&output)
        );
    }
    assert!(!calls.exists(), "a refused migration ran kubectl");
    let output = run(
        "maybe_cleanup_rook; maybe_cleanup_longhorn; echo done",
        "default kube-system",
    );
    assert!(output.status.success());
    assert_eq!(printed(&output).trim(), "done");
    let output = run(
        "maybe_cleanup_rook; echo \"status=$?\"",
        "default rook-ceph",
    );
    assert!(
        printed(&output).contains("Rook: Berth does not migrate"),
        "{}",
        printed(&output)
    );
    assert!(printed(&output).contains("status=0"));
}

/// The session hands the library the host's addresses (`BERTH_HOST_ADDRESSES`) for its
/// discovery as it starts; read in place of `ip -o addr`, they give the same interfaces, in
/// the same order, with the same ones left out. Checked in a network namespace of its own with
/// addresses of both families, one on an interface Kubernetes' networks make.
#[test]
fn the_addresses_berth_lists_are_those_ip_lists() {
    std::thread::spawn(|| {
        // Only this thread (and what it starts) moves to the new namespace.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .expect("a network namespace (root)");
        for command in [
            "ip link set lo up",
            // No link-local address the kernel adds in its own time: the two listings are
            // taken one after the other.
            "ip link add eth9 type veth peer name cni0",
            "ip link add eth8 type bridge",
            "ip link set eth9 addrgenmode none",
            "ip link set cni0 addrgenmode none",
            "ip link set eth8 addrgenmode none",
            "ip addr add 10.1.0.5/24 dev eth9",
            "ip addr add 2001:db8::5/64 dev eth9",
            "ip addr add 10.2.0.1/16 dev cni0",
            "ip addr add 10.3.0.7/20 dev eth8",
            "ip addr add 10.3.1.8/20 dev eth8",
            "ip link set eth9 up",
            "ip link set cni0 up",
            "ip link set eth8 up",
        ] {
            let status = Command::new("sh").args(["-c", command]).status().unwrap();
            assert!(status.success(), "{command}");
        }
        let listing = berth::hooks::network_interfaces::address_listing();
        for ipv6 in ["", "1"] {
            // LISTING: the library unsets BERTH_HOST_ADDRESSES once its discovery read it.
            let script = r#"__berth_private_interfaces "$LISTING"
                given="${__berth_iface_names[*]} / ${__berth_iface_addrs[*]}"
                __berth_private_interfaces
                printf '%s\n%s\n' "$given" "${__berth_iface_names[*]} / ${__berth_iface_addrs[*]}""#;
            let output = with_library(
                script,
                &[("LISTING", &listing), ("IPV6_ONLY", ipv6)],
            );
            let text = support::text(&output.stdout);
            let lines: Vec<&str> = text.lines().collect();
            let expected = if ipv6.is_empty() {
                "eth9 eth8 eth8 / 10.1.0.5 10.3.0.7 10.3.1.8"
            } else {
                "eth9 / 2001:db8::5"
            };
            assert_eq!(lines, [expected, expected], "listing:\n{listing}");
        }
    })
    .join()
    .unwrap();
}

/// kURL's `kubernetes_api_address` (the load balancer's, with its own port or
/// LOAD_BALANCER_PORT, else the private address on 6443; IPv6 in brackets) and its API health
/// helpers probing /healthz over TLS on a real server (openssl's): `ok` is healthy; another
/// answer, and nothing listening, are not; `spinner_kubernetes_api_healthy` waits for a server
/// that becomes healthy.
#[test]
fn the_api_address_and_health_helpers_answer_as_kurls_do() {
    for (environment, address) in [
        (vec![("PRIVATE_ADDRESS", "10.0.0.4")], "10.0.0.4:6443"),
        (
            vec![("LOAD_BALANCER_ADDRESS", "api.example:7443")],
            "api.example:7443",
        ),
        (
            vec![
                ("LOAD_BALANCER_ADDRESS", "10.0.0.9"),
                ("LOAD_BALANCER_PORT", "443"),
            ],
            "10.0.0.9:443",
        ),
        (vec![("LOAD_BALANCER_ADDRESS", "10.0.0.9")], "10.0.0.9:6443"),
        (vec![("PRIVATE_ADDRESS", "fd00::4")], "[fd00::4]:6443"),
        (
            vec![("LOAD_BALANCER_ADDRESS", "[fd00::9]:7443")],
            "[fd00::9]:7443",
        ),
    ] {
        let output = with_library("kubernetes_api_address", &environment);
        assert!(output.status.success(), "{}", printed(&output));
        assert_eq!(printed(&output).trim_end(), address, "{environment:?}");
    }

    support::require("openssl", "openssl");
    let served = tempfile::tempdir().unwrap();
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=api", "-keyout", "key.pem", "-out", "cert.pem"])
        .current_dir(served.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", printed(&made));
    let health = served.path().join("healthz");
    fs_err::write(&health, "starting\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let mut server = Command::new("openssl")
        .args([
            "s_server", "-quiet", "-WWW", "-cert", "cert.pem", "-key", "key.pem",
        ])
        .args(["-accept", &address])
        .current_dir(served.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::wait_until("openssl to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(&address).is_ok()
    });
    let environment = [("LOAD_BALANCER_ADDRESS", address.as_str())];
    let healthy = || {
        with_library("kubernetes_api_is_healthy", &environment)
            .status
            .success()
    };
    assert!(!healthy(), "`starting` is not healthy");

    // Healthy a moment after the wait began: the spinner returns once it is.
    let later = {
        let health = health.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            fs_err::write(&health, "ok\n").unwrap();
        })
    };
    let started = Instant::now();
    let waited = with_library("spinner_kubernetes_api_healthy", &environment);
    later.join().unwrap();
    assert!(waited.status.success(), "{}", printed(&waited));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(healthy(), "`ok` is healthy");

    server.kill().unwrap();
    server.wait().unwrap();
    let started = Instant::now();
    assert!(!healthy(), "nothing listening is not healthy");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// kURL's log helpers colour their lines where asked (BERTH_COLOR=1, or a terminal), and never
/// under NO_COLOR.
#[test]
fn no_color_turns_the_log_helpers_colours_off() {
    let coloured = with_library("logSuccess done", &[("BERTH_COLOR", "1")]);
    assert!(
        printed(&coloured).contains("\u{1b}[0;32m"),
        "{}",
        printed(&coloured)
    );
    let plain = with_library(
        "logSuccess done; printf '%s' \"$GREEN$NC\"",
        &[("BERTH_COLOR", "1"), ("NO_COLOR", "1")],
    );
    assert!(!printed(&plain).contains('\u{1b}'), "{:?}", printed(&plain));
    assert!(printed(&plain).contains("done"));
}

/// `get_yaml_from_multidoc_yaml FILE NAME`: the documents of a multi-document file with a
/// `name: NAME` line, each ended by `---`; the name matched whole, quoted or not; exit 1
/// when none has it.
#[test]
fn get_yaml_from_multidoc_yaml_prints_the_documents_of_a_name() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("objects.yaml");
    fs_err::write(
        &file,
        "kind: ConfigMap\nmetadata:\n  name: rook-config-override\n---\nkind: ConfigMap\nmetadata:\n  name: \"rook-config\"\n  namespace: rook-ceph\n---\nkind: Secret\nmetadata:\n  name: rook-config # the one\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let output = with_library(
        "get_yaml_from_multidoc_yaml \"$FILE\" rook-config",
        &[("FILE", file)],
    );
    assert!(output.status.success(), "{}", printed(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "kind: ConfigMap\nmetadata:\n  name: \"rook-config\"\n  namespace: rook-ceph\n---\nkind: Secret\nmetadata:\n  name: rook-config # the one\n---\n"
    );
    let output = with_library(
        "get_yaml_from_multidoc_yaml \"$FILE\" rook",
        &[("FILE", file)],
    );
    assert_eq!(output.status.code(), Some(1), "{}", printed(&output));
    assert!(output.stdout.is_empty(), "{}", printed(&output));
}
