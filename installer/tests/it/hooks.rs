//! The engine with real bash: phase order, globals across hooks, failures and resumption,
//! the decision rule end to end, the node lock, a killed run, and hook timeouts.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{Node, TestDist, failed, spawn_quietly, succeeded, take_trace, trace, wait_until};

/// Hooks that append their name to $TRACE, for every phase; `a_pre_init` sets a global.
const TRACING_A: &str = r#"
function a_preflight() { echo a_preflight >> "$TRACE"; }
function a_pre_init() { A_GLOBAL="from a_pre_init"; echo a_pre_init >> "$TRACE"; }
function a() { echo "a sees $A_GLOBAL" >> "$TRACE"; }
function a_already_applied() { echo "a_already_applied sees $A_GLOBAL" >> "$TRACE"; }
function a_post_init() { echo a_post_init >> "$TRACE"; }
function a_outro() { echo a_outro >> "$TRACE"; }
"#;

/// No pre_init and no outro: those are skipped.
const TRACING_B: &str = r#"
function b_preflight() { echo b_preflight >> "$TRACE"; }
function b() { echo "b sees $A_GLOBAL" >> "$TRACE"; }
function b_post_init() {
    echo "b_post_init: a $BERTH_A_DECISION from '$BERTH_A_CURRENT_VERSION'" >> "$TRACE"
}
"#;

/// Fails in its install hook while $FAIL_B is set, after printing some output.
const FAILING_B: &str = r#"
function b() {
    echo b >> "$TRACE"
    echo "b is working"
    if [ -n "$FAIL_B" ]; then
        bail "b was told to fail"
    fi
}
function b_already_applied() { echo b_already_applied >> "$TRACE"; }
"#;

#[test]
fn hooks_share_one_session_and_run_in_kurl_phase_order() {
    let mut dist = TestDist::new();
    dist.addon("a", "1.0.0", TRACING_A);
    dist.addon("b", "1.0.0", TRACING_B);
    // The spec lists b first; versions.json order (a, b) decides.
    let spec = dist.spec(
        "spec.yaml",
        &[("b", "version: latest"), ("a", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        trace(&trace_file),
        [
            "a_preflight",
            "b_preflight",
            "a_pre_init",
            "a sees from a_pre_init",
            "b sees from a_pre_init",
            "a_post_init",
            "b_post_init: a Install from ''",
            "a_outro",
        ]
    );
    let status = node.status();
    for name in ["a", "b"] {
        assert_eq!(status[name]["progressing"]["reason"], "Succeeded", "{name}");
        assert_eq!(status[name]["available"]["status"], true, "{name}");
        assert_eq!(status[name]["current"]["version"], "1.0.0", "{name}");
    }

    // Nothing changed: kURL still runs every pre_init, post_init and outro, so the global a
    // sets reaches a_already_applied, which runs in the place of the install hook.
    let _ = fs_err::remove_file(&trace_file);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        trace(&trace_file),
        [
            "a_preflight",
            "b_preflight",
            "a_pre_init",
            "a_already_applied sees from a_pre_init",
            "a_post_init",
            "b_post_init: a AlreadyApplied from '1.0.0'",
            "a_outro",
        ]
    );
    let status = node.status();
    for name in ["a", "b"] {
        assert_eq!(status[name]["progressing"]["reason"], "Succeeded", "{name}");
    }
}

/// kURL calls an applied add-on's install hook unguarded: an install.sh without one is
/// refused before any hook runs, naming what was looked for.
#[test]
fn an_addon_without_its_install_hook_fails_naming_the_functions() {
    let mut dist = TestDist::new();
    dist.addon("a", "1.0.0", TRACING_A);
    dist.addon(
        "cert-manager",
        "1.0.0",
        "function cert_manager_pre_init() { :; }\n",
    );
    let spec = dist.spec(
        "spec.yaml",
        &[("a", "version: latest"), ("certManager", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    let output = node.install(&spec, &dist.url(), &[]);
    failed(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("defines no install hook; looked for `cert-manager`, `cert_manager`"),
        "{stderr}"
    );
    assert!(trace(&trace_file).is_empty(), "no hook ran");
    let status = node.status();
    assert_eq!(status["cert-manager"]["progressing"]["reason"], "Failed");
    assert!(
        status["cert-manager"]["progressing"]["message"]
            .as_str()
            .unwrap()
            .contains("looked for")
    );
}

#[test]
fn a_failing_hook_fails_its_addon_and_a_rerun_resumes_there() {
    let mut dist = TestDist::new();
    dist.addon("a", "1.0.0", TRACING_A);
    dist.addon("b", "1.0.0", FAILING_B);
    let spec = dist.spec(
        "spec.yaml",
        &[("a", "version: latest"), ("b", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);

    let output = failed(
        &node
            .install_command(&spec, &dist.url())
            .env("FAIL_B", "1")
            .output()
            .unwrap(),
    );
    assert!(output.contains("b 1.0.0: b failed"), "{output}");
    let status = node.status();
    let b = &status["b"];
    assert_eq!(b["progressing"]["reason"], "Failed");
    let message = b["progressing"]["message"].as_str().unwrap();
    assert!(message.contains("`b` exited with status 1"), "{message}");
    assert!(
        message.contains("b is working"),
        "the tail of its output: {message}"
    );
    assert!(message.contains("b was told to fail"), "{message}");
    assert_eq!(b["available"]["status"], false);
    assert!(b["current"].is_null());
    assert!(
        b["progressing"]["lastTransitionTime"]
            .as_str()
            .is_some_and(|time| time.starts_with("20") && time.ends_with('Z')),
        "{b}"
    );
    // The hook's output went to the run log as well as the terminal.
    let logs = node.root.path().join("var/log/berth");
    let logged: String = fs_err::read_dir(&logs)
        .unwrap()
        .map(|entry| fs_err::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    assert!(logged.contains("b is working"), "{logged}");
    let table = support::text(&node.berth(&["status"]).stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAME",
            "VERSION",
            "CURRENT",
            "LAST",
            "AVAILABLE",
            "DEGRADED",
            "PROGRESSING"
        ]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["b", "1.0.0", "-", "-", "False", "-", "Failed"]
    );
    assert!(
        table.contains("b was told to fail"),
        "the failure is shown: {table}"
    );
    // a's post_init and outro come after b's install, so a is not finished either, and says why.
    assert_eq!(status["a"]["progressing"]["reason"], "Failed");
    assert!(
        status["a"]["progressing"]["message"]
            .as_str()
            .unwrap()
            .contains("the run stopped at b")
    );
    take_trace(&trace_file);

    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        take_trace(&trace_file),
        [
            "a_preflight",
            "a_pre_init",
            "a sees from a_pre_init",
            "b",
            "a_post_init",
            "a_outro"
        ]
    );
    let status = node.status();
    assert_eq!(status["a"]["progressing"]["reason"], "Succeeded");
    assert_eq!(status["b"]["progressing"]["reason"], "Succeeded");
}

/// A join run again on a node that joined runs each add-on's `_join` again, as kURL's
/// join.sh does on every join; never its `_already_applied`, which kURL's add-ons write for
/// the primary (they read the cluster with the admin's kubeconfig, which a joined node has not).
#[test]
fn a_join_run_again_runs_the_join_hooks_never_the_primarys_already_applied() {
    let mut dist = TestDist::new();
    dist.addon(
        "a",
        "1.0.0",
        "function a() { echo a >> \"$TRACE\"; }\n\
         function a_join() { echo a_join >> \"$TRACE\"; }\n\
         function a_already_applied() { echo a_already_applied >> \"$TRACE\"; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("a", "version: latest")]);
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    succeeded(&node.run("join", &spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["a_join"]);
    assert_eq!(
        node.decisions(&spec, &dist.url(), &[]),
        [("a".into(), "AlreadyApplied".into())]
    );
    succeeded(&node.run("join", &spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["a_join"]);
}

#[test]
fn addons_that_finished_before_a_failure_are_not_run_again() {
    let mut dist = TestDist::new();
    // a has an install hook only, so it is finished as soon as that hook succeeds.
    dist.addon("a", "1.0.0", "function a() { echo a >> \"$TRACE\"; }\nfunction a_already_applied() { echo a_already_applied >> \"$TRACE\"; }\n");
    dist.addon("b", "1.0.0", FAILING_B);
    let spec = dist.spec(
        "spec.yaml",
        &[("a", "version: latest"), ("b", "version: latest")],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    failed(
        &node
            .install_command(&spec, &dist.url())
            .env("FAIL_B", "1")
            .output()
            .unwrap(),
    );
    assert_eq!(take_trace(&trace_file), ["a", "b"]);
    assert_eq!(node.status()["a"]["progressing"]["reason"], "Succeeded");

    assert_eq!(
        node.decisions(&spec, &dist.url(), &[]),
        [
            ("a".into(), "AlreadyApplied".into()),
            ("b".into(), "Retry".into())
        ]
    );
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(take_trace(&trace_file), ["a_already_applied", "b"]);
}

/// Every row of the decision rule, carried out by the engine: the plan's decision and the
/// hooks that ran.
#[test]
fn every_row_of_the_decision_rule_through_the_engine() {
    let demo = |version: &str| {
        format!(
            "function demo() {{ echo \"demo {version} greeting=$DEMO_GREETING\" >> \"$TRACE\"; }}\n\
             function demo_already_applied() {{ echo demo_already_applied >> \"$TRACE\"; }}\n\
             function other() {{ :; }}\n"
        )
    };
    let mut dist = TestDist::new();
    dist.addon("demo", "1.0.0", &demo("1.0.0"));
    dist.addon("other", "1.0.0", "function other() { :; }\n");
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    let url = dist.url();
    let spec_v1 = dist.spec(
        "v1.yaml",
        &[
            ("demo", "version: 1.0.0, greeting: hi"),
            ("other", "version: latest"),
        ],
    );
    let spec_other_id = dist.spec(
        "id.yaml",
        &[
            ("demo", "version: 1.0.0, greeting: hi"),
            ("other", "version: latest, x: 1"),
        ],
    );
    let spec_v2 = dist.spec(
        "v2.yaml",
        &[
            ("demo", "version: 2.0.0, greeting: hi"),
            ("other", "version: latest"),
        ],
    );

    let row =
        |name: &str, spec: &Path, extra: &[&str], decision: &str, hooks: &[&str], ok: bool| {
            let planned = node.decisions(spec, &url, extra);
            assert_eq!(
                planned[0],
                ("demo".to_string(), decision.to_string()),
                "row {name}: plan"
            );
            let output = node.install(spec, &url, extra);
            if ok {
                succeeded(&output);
            } else {
                failed(&output);
            }
            assert_eq!(take_trace(&trace_file), hooks, "row {name}: hooks");
        };

    row(
        "no record",
        &spec_v1,
        &[],
        "Install",
        &["demo 1.0.0 greeting=hi"],
        true,
    );
    row(
        "nothing changed",
        &spec_v1,
        &[],
        "AlreadyApplied",
        &["demo_already_applied"],
        true,
    );
    row(
        "config changed with --set",
        &spec_v1,
        &["--set", "demo.greeting=hello"],
        "Reapply",
        &["demo 1.0.0 greeting=hello"],
        true,
    );
    row(
        "config back as the spec has it",
        &spec_v1,
        &[],
        "Reapply",
        &["demo 1.0.0 greeting=hi"],
        true,
    );
    row(
        "another installer id",
        &spec_other_id,
        &[],
        "Reapply",
        &["demo 1.0.0 greeting=hi"],
        true,
    );
    row(
        "forced",
        &spec_other_id,
        &["--force-reapply"],
        "Reapply",
        &["demo 1.0.0 greeting=hi"],
        true,
    );

    // The same version packaged again with other content: another digest.
    let folder = dist.addons.root().join("addons/demo/1.0.0");
    fs_err::write(folder.join("notes.txt"), "changed\n").unwrap();
    dist.package(&folder);
    row(
        "package changed",
        &spec_other_id,
        &[],
        "Reapply",
        &["demo 1.0.0 greeting=hi"],
        true,
    );

    dist.addon("demo", "2.0.0", &demo("2.0.0"));
    row(
        "newer version",
        &spec_v2,
        &[],
        "Upgrade",
        &["demo 2.0.0 greeting=hi"],
        true,
    );
    row(
        "older version refused",
        &spec_v1,
        &[],
        "DowngradeRefused",
        &[],
        false,
    );
    let refusal = failed(&node.install(&spec_v1, &url, &[]));
    assert!(refusal.contains("pass --allow-downgrade"), "{refusal}");
    row(
        "older version allowed",
        &spec_v1,
        &["--allow-downgrade"],
        "Downgrade",
        &["demo 1.0.0 greeting=hi"],
        true,
    );
    let status = node.status();
    assert_eq!(status["demo"]["current"]["version"], "1.0.0");
    assert_eq!(status["demo"]["last"]["version"], "2.0.0");
    assert_eq!(status["demo"]["progressing"]["reason"], "Succeeded");

    // A failed run is retried.
    let failing = dist.spec(
        "failing.yaml",
        &[
            ("demo", "version: 1.0.0, greeting: hi"),
            ("other", "version: latest, x: 2"),
        ],
    );
    fs_err::write(
        folder.join("install.sh"),
        "function demo() { echo demo failing >> \"$TRACE\"; false; }\n",
    )
    .unwrap();
    dist.package(&folder);
    row(
        "reapply that fails",
        &failing,
        &[],
        "Reapply",
        &["demo failing"],
        false,
    );
    fs_err::write(folder.join("install.sh"), demo("1.0.0")).unwrap();
    dist.package(&folder);
    row(
        "last run failed",
        &failing,
        &[],
        "Retry",
        &["demo 1.0.0 greeting=hi"],
        true,
    );
}

/// An add-on whose install hook waits until $RELEASE exists, after writing $STARTED.
const WAITING: &str = r#"
function slow() {
    touch "$STARTED"
    while [ ! -e "$RELEASE" ]; do sleep 0.05; done
    echo slow >> "$TRACE"
}
"#;

/// A run of the WAITING add-on, started in the background and waited on until its hook runs.
struct SlowRun {
    dist: TestDist,
    spec: PathBuf,
    node: Node,
    first: std::process::Child,
}

impl SlowRun {
    fn start() -> Self {
        let mut dist = TestDist::new();
        dist.addon("slow", "1.0.0", WAITING);
        let spec = dist.spec("spec.yaml", &[("slow", "version: latest")]);
        let scratch = dist.addons.root().to_path_buf();
        let node = Node::new()
            .env("TRACE", scratch.join("trace"))
            .env("STARTED", scratch.join("started"))
            .env("RELEASE", scratch.join("release"));
        let first = spawn_quietly(&mut node.install_command(&spec, &dist.url()));
        wait_until(
            "the first run's hook to start",
            Duration::from_secs(30),
            || scratch.join("started").exists(),
        );
        SlowRun {
            dist,
            spec,
            node,
            first,
        }
    }

    fn scratch(&self) -> &Path {
        self.dist.addons.root()
    }
}

#[test]
fn a_second_run_fails_at_once_naming_the_holder() {
    let SlowRun {
        dist,
        spec,
        node,
        mut first,
    } = SlowRun::start();
    let started = std::time::Instant::now();
    let second = failed(&node.install(&spec, &dist.url(), &[]));
    assert!(started.elapsed() < Duration::from_secs(5), "it waited");
    assert!(second.contains("another berth run holds"), "{second}");
    assert!(
        second.contains(&format!("pid {}", first.id())),
        "names the holder: {second}"
    );
    fs_err::write(dist.addons.root().join("release"), "").unwrap();
    assert!(first.wait().unwrap().success());
}

#[test]
fn a_run_killed_mid_hook_is_completed_by_the_next_run() {
    let mut run = SlowRun::start();
    run.first.kill().unwrap(); // SIGKILL
    run.first.wait().unwrap();
    let SlowRun {
        dist, spec, node, ..
    } = &run;
    let scratch = run.scratch();
    // No run holds the node's lock any more: status says the run stopped, not Installing.
    let status = node.status();
    assert_eq!(status["slow"]["progressing"]["reason"], "Interrupted");
    assert_eq!(status["slow"]["attempt"]["outcome"], "running");

    assert_eq!(
        node.decisions(spec, &dist.url(), &[]),
        [("slow".into(), "Retry".into())]
    );
    // The re-run ends the killed run's session (its hook is still waiting) before its own
    // hook starts; only then is the hook released, so an orphan left alive would trace too.
    fs_err::remove_file(scratch.join("started")).unwrap();
    let rerun = node
        .install_command(spec, &dist.url())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the re-run's hook to start",
        Duration::from_secs(30),
        || scratch.join("started").exists(),
    );
    fs_err::write(scratch.join("release"), "").unwrap();
    succeeded(&rerun.wait_with_output().unwrap());
    let status = node.status();
    assert_eq!(status["slow"]["progressing"]["reason"], "Succeeded");
    assert_eq!(status["slow"]["attempt"]["outcome"], "succeeded");
    assert_eq!(status["slow"]["current"]["version"], "1.0.0");
    // The orphaned session of the killed run was ended, so the hook ran once more, not twice.
    assert_eq!(trace(&scratch.join("trace")), ["slow"]);
}

#[test]
fn a_hook_past_its_timeout_is_killed_with_its_children() {
    let mut dist = TestDist::new();
    dist.addon(
        "stuck",
        "1.0.0",
        "function stuck() { sleep 600 & echo $! > \"$CHILD\"; echo stuck and waiting; wait; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("stuck", "version: latest")]);
    let child_file = dist.addons.root().join("child");
    let node = Node::new().env("CHILD", &child_file);
    let output = failed(&node.install(&spec, &dist.url(), &["--hook-timeout", "1"]));
    assert!(output.contains("ran past its timeout of 1s"), "{output}");
    let child = fs_err::read_to_string(&child_file).unwrap();
    let proc = format!("/proc/{}", child.trim());
    wait_until(
        "the hook's child to be gone",
        Duration::from_secs(10),
        || {
            !Path::new(&proc).exists()
                || fs_err::read_to_string(format!("{proc}/stat")).is_ok_and(|s| s.contains(") Z "))
        },
    );
    let status = node.status();
    let message = status["stuck"]["progressing"]["message"].as_str().unwrap();
    assert!(message.contains("stuck and waiting"), "{message}");
}

/// kURL's names for the hooks of an add-on whose name has a dash (`cert-manager`), and for
/// containerd's main hook (`containerd_install`); and Berth's `_remove_node` hook.
const KURL_NAMED: &str = r#"
function cert-manager_pre_init() { echo cert-manager_pre_init >> "$TRACE"; }
function cert-manager() { echo cert-manager >> "$TRACE"; }
function cert-manager_outro() { echo cert-manager_outro >> "$TRACE"; }
function cert-manager_reset() { echo cert-manager_reset >> "$TRACE"; }
function cert-manager_remove_node() { echo "cert-manager_remove_node $BERTH_REMOVE_NODE" >> "$TRACE"; }
"#;

const KURL_CONTAINERD: &str = r#"
function containerd_install() { echo containerd_install >> "$TRACE"; }
"#;

/// Berth's underscore names still serve an add-on with a dash, where kURL's are not defined.
const UNDERSCORE_NAMED: &str = r#"
function metrics_server() { echo metrics_server >> "$TRACE"; }
"#;

#[test]
fn hooks_are_found_by_the_names_kurl_calls() {
    let mut dist = TestDist::new();
    dist.addon("containerd", "1.0.0", KURL_CONTAINERD);
    dist.addon("cert-manager", "1.0.0", KURL_NAMED);
    dist.addon("metrics-server", "1.0.0", UNDERSCORE_NAMED);
    // certManager and metricsServer are kURL's spec keys for these folders.
    let spec = dist.spec(
        "spec.yaml",
        &[
            ("containerd", "version: latest"),
            ("certManager", "version: latest"),
            ("metricsServer", "version: latest"),
        ],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace_file);
    // Nothing installed, nothing removes nodes.
    let output = failed(&node.berth(&["remove-node", "node-2"]));
    assert!(
        output.contains("no add-on installed on this node removes nodes"),
        "{output}"
    );
    succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        take_trace(&trace_file),
        [
            "cert-manager_pre_init",
            "containerd_install",
            "cert-manager",
            "metrics_server",
            "cert-manager_outro",
        ]
    );
    let status = node.status();
    assert_eq!(status["cert-manager"]["progressing"]["reason"], "Succeeded");
    // `berth remove-node NODE`: each add-on's `_remove_node` hook, given the node's name; a
    // name that is not a node's is refused before any hook runs.
    let output = failed(&node.berth(&["remove-node", "node-2;id"]));
    assert!(output.contains("is not a node name"), "{output}");
    succeeded(&node.berth(&["remove-node", "node-2"]));
    assert_eq!(take_trace(&trace_file), ["cert-manager_remove_node node-2"]);
    succeeded(&node.berth(&["reset"]));
    assert_eq!(take_trace(&trace_file), ["cert-manager_reset"]);
}

/// Commands reach the session framed by their length in bytes: a root and values in UTF-8
/// (which bash would count in characters), quotes and line breaks all arrive as they were.
#[test]
fn hooks_see_a_root_and_values_in_utf8_as_they_are() {
    let mut dist = TestDist::new();
    dist.addon(
        "a",
        "1.0.0",
        r#"
function a() { printf '%s\n' "$DIR" "$A_GREETING" "$A_NOTE" >> "$TRACE"; }
function a_outro() { printf 'outro %s %s\n' "$A_GREETING" "${BERTH_HOST_ADDRESSES-gone}" >> "$TRACE"; }
"#,
    );
    let greeting = "grüß dich, ça va? ✔ 'quoted' \"double\" $(touch x) `y`";
    let spec = dist.spec(
        "spec.yaml",
        &[(
            "a",
            &format!(
                "version: latest, greeting: {}, note: \"two\\nlines\"",
                serde_json::to_string(greeting).unwrap()
            ),
        )],
    );
    let trace_file = dist.addons.root().join("trace");
    let node = Node {
        root: tempfile::Builder::new()
            .prefix("nœud é ")
            .tempdir()
            .unwrap(),
        envs: Vec::new(),
    }
    .env("TRACE", &trace_file);
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let dir = node.root.path().join("var/lib/berth");
    assert_eq!(
        fs_err::read_to_string(&trace_file).unwrap(),
        format!(
            "{}\n{greeting}\ntwo\nlines\noutro {greeting} gone\n",
            dir.display()
        )
    );
}

/// A version the dist does not have is refused and the add-on says Failed; the spec put back
/// at the version in place runs, and the add-on no longer says Failed.
#[test]
fn a_refused_version_given_up_leaves_the_addon_succeeded() {
    let mut dist = TestDist::new();
    dist.addon("a", "1.0.0", "function a() { :; }\n");
    let good = dist.spec("good.yaml", &[("a", "version: 1.0.0")]);
    let unknown = dist.spec("unknown.yaml", &[("a", "version: 9.9.9")]);
    let node = Node::new();
    succeeded(&node.install(&good, &dist.url(), &[]));
    let refused = failed(&node.install(&unknown, &dist.url(), &[]));
    assert!(refused.contains("a has no version `9.9.9`"), "{refused}");
    assert_eq!(node.status()["a"]["progressing"]["reason"], "Failed");
    succeeded(&node.install(&good, &dist.url(), &[]));
    let status = node.status();
    assert_eq!(
        status["a"]["progressing"]["reason"], "Succeeded",
        "{status:?}"
    );
    assert_eq!(status["a"]["desired"], "1.0.0");
    let message = status["a"]["progressing"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("9.9.9 was given up"), "{message}");
}
