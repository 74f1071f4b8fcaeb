//! Runs the way kURL runs them: the container runtime's install first (and on joining nodes),
//! its images after it, the join hooks on an upgrade of a joined node, MASTER by the node's
//! role, a rollback with the installer's settings, and declared fields checked.

use crate::support;

use support::{Node, TestDist, failed, succeeded, take_trace, trace};

/// A joining node gets the container runtime as kURL's join.sh gives it: containerd's install
/// hook first, then every add-on's `_join` in order.
#[test]
fn a_joining_node_installs_the_runtime_before_any_join_hook() {
    let mut dist = TestDist::new();
    let containerd = r#"
function containerd_preflight() { echo containerd_preflight >> "$TRACE"; }
function containerd_install() { echo containerd_install >> "$TRACE"; }
function containerd_join() { echo containerd_join >> "$TRACE"; }
"#;
    dist.addon("containerd", "1.0.0", containerd);
    dist.addon(
        "a",
        "1.0.0",
        "function a() { :; }\nfunction a_join() { echo a_join >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec(
        "spec.yaml",
        &[("containerd", "version: latest"), ("a", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.run("join", &spec, &dist.url(), &[]));
    assert_eq!(
        take_trace(&trace_file),
        [
            "containerd_preflight",
            "containerd_install",
            "containerd_join",
            "a_join"
        ]
    );
    // Joined again, nothing changed: the runtime's install does not run again; every other
    // add-on's `_join` does, as kURL's join.sh runs it on every join.
    succeeded(&node.run("join", &spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["containerd_preflight", "a_join"]);
}

/// kURL's containerd Manifest ships the pause image: it loads once containerd's install hook
/// has brought the runtime up, not before (when there is none yet).
#[test]
fn the_runtime_addons_images_load_once_its_install_hook_has_run() {
    use support::images::{PlatformImage, busybox_layer, write_oci_archive};
    let real = support::Containerd::start();
    let mut dist = TestDist::new();
    write_oci_archive(
        &dist.addons.root().join("pause.tar"),
        "pause:3.9",
        &[PlatformImage {
            arch: "amd64",
            layers: vec![busybox_layer()],
        }],
    );
    // The runtime's socket appears only when the hook "installs" it.
    let runtime_dir = tempfile::tempdir().unwrap();
    let socket = runtime_dir.path().join("containerd.sock");
    let containerd = r#"
function containerd_install() {
    echo containerd_install >> "$TRACE"
    ln -s "$REAL_SOCKET" "$CONTAINERD_ADDRESS"
}
"#;
    dist.addon_with_manifest(
        "containerd",
        "1.6.20",
        "image pause pause.tar\n",
        containerd,
    );
    let spec = dist.spec("spec.yaml", &[("containerd", "version: latest")]);
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new()
        .env("TRACE", &trace_file)
        .env("CONTAINERD_ADDRESS", &socket)
        .env("REAL_SOCKET", &real.socket)
        .env("BERTH_CONTAINER_RUNTIME", "containerd");
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["containerd_install"]);
    let images = real.ctr(&["images", "ls", "-q"]);
    let images = String::from_utf8_lossy(&images.stdout);
    assert!(images.contains("pause:3.9"), "{images}");
}

/// `berth upgrade` (what upgrade.sh runs) does what kURL's upgrade does on each node: the
/// install hooks on the node that installed the cluster, the join hooks on one that joined.
#[test]
fn an_upgrade_runs_the_join_hooks_on_a_node_that_joined() {
    let mut dist = TestDist::new();
    let hooks = |version: &str| {
        format!(
            "function a() {{ echo a {version} >> \"$TRACE\"; }}\nfunction a_join() {{ echo a_join {version} >> \"$TRACE\"; }}\n"
        )
    };
    dist.addon("a", "1.0.0", &hooks("1.0.0"));
    let first = dist.spec("first.yaml", &[("a", "version: 1.0.0")]);
    let trace_file = dist.addons.root().join("trace");
    let primary = Node::new().env("TRACE", &trace_file);
    let joined = Node::new().env("TRACE", &trace_file);
    succeeded(&primary.install(&first, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["a 1.0.0"]);
    let url = dist.url();
    succeeded(&joined.run("join", &first, &url, &[]));
    assert_eq!(take_trace(&trace_file), ["a_join 1.0.0"]);

    dist.addon("a", "2.0.0", &hooks("2.0.0"));
    let second = dist.spec("second.yaml", &[("a", "version: 2.0.0")]);
    succeeded(&primary.run("upgrade", &second, &url, &[]));
    assert_eq!(take_trace(&trace_file), ["a 2.0.0"]);
    succeeded(&joined.run("upgrade", &second, &url, &[]));
    assert_eq!(take_trace(&trace_file), ["a_join 2.0.0"]);
    assert_eq!(joined.status()["a"]["current"]["version"], "2.0.0");
}

/// An add-on's `fields.yaml` declares its fields: a spec's unknown or mistyped field is refused
/// before anything runs, naming the nearest, and the defaults reach the hooks.
#[test]
fn declared_fields_are_checked_and_their_defaults_filled_in() {
    let mut dist = TestDist::new();
    let folder = dist.addon(
        "a",
        "1.0.0",
        "function a() { echo \"port=$A_PORT\" >> \"$TRACE\"; }\n",
    );
    fs_err::write(
        folder.join("fields.yaml"),
        "fields:\n  - {name: port, type: integer, default: 8080, help: the port it answers on}\n",
    )
    .unwrap();
    dist.write_versions();
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    for (fields, expected) in [
        (
            "version: latest, prot: 9090",
            "spec.a.prot is not a field of a; did you mean `port`?",
        ),
        (
            "version: latest, port: high",
            "expected a whole number (the port it answers on)",
        ),
    ] {
        let spec = dist.spec("spec.yaml", &[("a", fields)]);
        let output = node.install(&spec, &dist.url(), &[]);
        failed(&output);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{fields}: {stderr}");
        assert!(trace(&trace_file).is_empty(), "{fields}: nothing ran");
    }
    // The refusal names the field's line, as a YAML error does.
    let block = dist.addons.root().join("block.yaml");
    fs_err::write(
        &block,
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  a:\n    version: latest\n    port: eighty\n",
    )
    .unwrap();
    let refused = failed(&node.install(&block, &dist.url(), &[]));
    assert!(
        refused.contains(&format!("{}:6: spec.a.port is \"eighty\"", block.display())),
        "{refused}"
    );
    let spec = dist.spec("spec.yaml", &[("a", "version: latest")]);
    // A mistyped field from --set is blamed on --set, and one from the node's configuration
    // on its file, not on the spec, which is right.
    let refused = failed(&node.install(&spec, &dist.url(), &["--set", "a.prot=9090"]));
    assert!(
        refused.contains("--set a.prot: spec.a.prot is not a field of a; did you mean `port`?")
            && !refused.contains(&spec.display().to_string()),
        "{refused}"
    );
    let node_config = node.root.path().join("etc/berth/node.yaml");
    fs_err::create_dir_all(node_config.parent().unwrap()).unwrap();
    fs_err::write(&node_config, "a:\n  prot: 9090\n").unwrap();
    let refused = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(
        refused.contains(&format!(
            "{}: spec.a.prot is not a field of a",
            node_config.display()
        )),
        "{refused}"
    );
    fs_err::remove_file(&node_config).unwrap();
    assert!(trace(&trace_file).is_empty(), "nothing ran");
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["port=8080"]);
    // The default is part of the configuration the record keeps (and hashes).
    assert_eq!(node.status()["a"]["current"]["config"]["port"], 8080);
}

/// MASTER as kURL's scripts set it: 1 on the first node and on a node joining the control
/// plane, empty on a worker; `yes` (ASSUME_YES) reaches hooks as kURL's prompts read it.
#[test]
fn master_is_set_as_kurls_scripts_set_it() {
    let mut dist = TestDist::new();
    dist.addon(
        "a",
        "1.0.0",
        "function a() { echo \"a MASTER=$MASTER\" >> \"$TRACE\"; }\nfunction a_join() { echo \"a_join MASTER=$MASTER HA_CLUSTER=$HA_CLUSTER ASSUME_YES=${ASSUME_YES:-}\" >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("a", "version: latest")]);
    let trace_file = dist.addons.root().join("trace");
    succeeded(
        &Node::new()
            .env("TRACE", &trace_file)
            .install(&spec, &dist.url(), &[]),
    );
    assert_eq!(take_trace(&trace_file), ["a MASTER=1"]);
    let url = dist.url();
    let join = |words: &[&str]| {
        succeeded(
            &Node::new()
                .env("TRACE", &trace_file)
                .run("join", &spec, &url, words),
        );
        take_trace(&trace_file)
    };
    assert_eq!(
        join(&["control-plane", "ha", "yes"]),
        ["a_join MASTER=1 HA_CLUSTER=1 ASSUME_YES=1"]
    );
    // Berth's older spelling of `yes` still answers.
    assert_eq!(
        join(&["assume-yes=1"]),
        ["a_join MASTER= HA_CLUSTER= ASSUME_YES=1"]
    );
    assert_eq!(join(&[]), ["a_join MASTER= HA_CLUSTER= ASSUME_YES="]);
}

/// kURL installs the runtime before any other add-on's install hook, wherever the runtime's
/// add-on stands in the order.
#[test]
fn the_runtime_installs_before_any_other_install_hook() {
    let mut dist = TestDist::new();
    dist.addon("a", "1.0.0", "function a() { echo a >> \"$TRACE\"; }\n");
    dist.addon(
        "containerd",
        "1.0.0",
        "function containerd_install() { echo containerd_install >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec(
        "spec.yaml",
        &[("a", "version: latest"), ("containerd", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["containerd_install", "a"]);
}

/// On a joining node an add-on with no join hook is applied only once its images are in: a
/// load that fails leaves it Failed, for the next run to retry.
#[test]
fn a_joining_addon_is_not_applied_before_its_images_load() {
    use support::images::{PlatformImage, busybox_layer, write_oci_archive};
    let mut dist = TestDist::new();
    write_oci_archive(
        &dist.addons.root().join("b.tar"),
        "b:1.0.0",
        &[PlatformImage {
            arch: "amd64",
            layers: vec![busybox_layer()],
        }],
    );
    dist.addon_with_manifest(
        "b",
        "1.0.0",
        "image b b.tar\n",
        "function b() { :; }\nfunction b_preflight() { :; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("b", "version: latest")]);
    let nowhere = tempfile::tempdir().unwrap();
    let node = Node::new()
        .env("BERTH_CONTAINER_RUNTIME", "containerd")
        .env("CONTAINERD_ADDRESS", nowhere.path().join("containerd.sock"));
    let output = node.run("join", &spec, &dist.url(), &[]);
    failed(&output);
    let status = node.status();
    assert_eq!(status["b"]["progressing"]["reason"], "Failed", "{status:?}");
    assert!(status["b"]["current"].is_null(), "{status:?}");
}

/// A rollback's hooks see the settings of the installer the node runs, as the run that
/// applied the version did.
#[test]
fn a_rollback_sees_the_installers_kurl_settings() {
    let mut dist = TestDist::new();
    let hooks = "function a() { echo \"a $A_VERSION at $PRIVATE_ADDRESS\" >> \"$TRACE\"; }\n";
    dist.addon("a", "1.0.0", hooks);
    dist.addon("a", "2.0.0", hooks);
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    for version in ["1.0.0", "2.0.0"] {
        let spec = dist.spec(
            "spec.yaml",
            &[
                ("a", &format!("version: {version}")),
                ("kurl", "privateAddress: 10.9.8.7"),
            ],
        );
        succeeded(&node.install(&spec, &dist.url(), &[]));
    }
    assert_eq!(
        take_trace(&trace_file),
        ["a 1.0.0 at 10.9.8.7", "a 2.0.0 at 10.9.8.7"]
    );
    succeeded(&node.berth(&["rollback", "a"]));
    assert_eq!(take_trace(&trace_file), ["a 1.0.0 at 10.9.8.7"]);
}

/// kURL's flannel asks `"$BIN_KURL" netutil …` which interface holds the node's address and
/// which the default route leaves by: `$DIR/bin/kurl` answers, with kURL's error (and exit
/// status) where there is no such interface.
#[test]
fn hooks_run_kurls_utility_program_as_bin_kurl() {
    let mut dist = TestDist::new();
    dist.addon(
        "a",
        "1.0.0",
        r#"
function a() {
    [ "$BIN_KURL" = "$DIR/bin/kurl" ]
    "$BIN_KURL" netutil iface-from-ip 127.0.0.1 >> "$TRACE"
    "$BIN_KURL" netutil iface-from-ip ::ffff:127.0.0.1 >> "$TRACE"
    if ! "$BIN_KURL" netutil iface-from-ip 192.0.2.77 2>> "$TRACE"; then echo refused >> "$TRACE"; fi
    if "$BIN_KURL" netutil iface-from-ip not-an-address 2>/dev/null; then echo accepted >> "$TRACE"; fi
    "$BIN_KURL" netutil format-ip-address 10.0.0.4 >> "$TRACE"
    "$BIN_KURL" netutil format-ip-address fd00::4 >> "$TRACE"
    "$BIN_KURL" netutil format-address fd00::5 >> "$TRACE"
}
"#,
    );
    let spec = dist.spec("spec.yaml", &[("a", "version: latest")]);
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let trace = take_trace(&trace_file);
    assert_eq!(trace[..2], ["lo", "lo"]);
    assert!(
        trace[2].contains("no interface with given IP address found"),
        "{trace:?}"
    );
    // kURL's format-ip-address (and its deprecated name): brackets around IPv6.
    assert_eq!(
        trace[3..],
        ["refused", "10.0.0.4", "[fd00::4]", "[fd00::5]"]
    );
}

/// kURL's join.sh runs `kubeadm join` once every add-on's `_join` has dropped its kubeadm
/// patches: Kubernetes' join hook runs last, wherever it stands in the order.
#[test]
fn kubernetes_joins_after_every_other_addons_join_hook() {
    let mut dist = TestDist::new();
    for name in ["containerd", "kubernetes", "flannel"] {
        dist.addon(
            name,
            "1.0.0",
            &format!(
                "function {name}() {{ :; }}\nfunction {name}_join() {{ echo {name}_join >> \"$TRACE\"; }}\n"
            ),
        );
    }
    let spec = dist.spec(
        "spec.yaml",
        &[
            ("containerd", "version: latest"),
            ("kubernetes", "version: latest"),
            ("flannel", "version: latest"),
        ],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.run("join", &spec, &dist.url(), &[]));
    assert_eq!(
        take_trace(&trace_file),
        ["containerd_join", "flannel_join", "kubernetes_join"]
    );
}

/// kURL's MERGED_YAML_SPEC and `get_addon_config`: the spec the hooks act on, with resolved
/// versions and the script flags merged, read back through `$BIN_YAMLUTIL`.
#[test]
fn hooks_read_the_merged_spec_as_kurls_do() {
    let mut dist = TestDist::new();
    dist.addon(
        "cert-manager",
        "1.0.0",
        "function cert-manager() { get_addon_config cert-manager >> \"$TRACE\"; \"$BIN_YAMLUTIL\" -j -fp \"$MERGED_YAML_SPEC\" -jf spec.kurl.privateAddress >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("cert-manager", "version: latest")]);
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.install(&spec, &dist.url(), &["--param", "private-address=10.0.0.7"]));
    assert_eq!(
        take_trace(&trace_file),
        [r#"{"version":"1.0.0"}"#, r#""10.0.0.7""#]
    );
}
