//! What a new user meets on a node after the first install: `berth plan` and `berth status`
//! with no arguments, an empty node that says so, and logs named for the run they record.

use crate::support;

use support::{Node, TestDist, conforms, failed, succeeded, text};

/// An add-on with no images, in two versions, and a node with the first one installed.
fn installed() -> (TestDist, Node, std::path::PathBuf) {
    let mut dist = TestDist::new();
    dist.addon("plain", "1.0.0", "function plain() { echo plain 1; }\n");
    dist.addon("plain", "2.0.0", "function plain() { echo plain 2; }\n");
    dist.write_versions();
    let spec = dist.spec("v1.yaml", &[("plain", "version: 1.0.0")]);
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &[]));
    (dist, node, spec)
}

/// The log files of the node's runs, by name.
/// The run logs (`hooks.log`, the hooks' record across runs, left out).
fn logs(node: &Node) -> Vec<String> {
    let mut names: Vec<String> = fs_err::read_dir(node.root.path().join("var/log/berth"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "hooks.log")
        .collect();
    names.sort();
    names
}

#[test]
fn plan_and_status_on_an_installed_node_need_no_arguments() {
    let (dist, node, _) = installed();
    let plan = node.berth(&["plan", "--json"]);
    let shown = succeeded(&plan);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(plan["addons"][0]["name"], "plain", "{shown}");
    assert_eq!(plan["addons"][0]["decision"], "AlreadyApplied", "{shown}");

    let status = text(&node.berth(&["status"]).stdout);
    let id = plan["installer"].as_str().unwrap();
    assert!(
        status.contains(&format!(
            "installer {id} from {}",
            dist.dist.path().display()
        )),
        "status names the installer the node runs: {status}"
    );

    // Another spec given on the command line takes the dist the node came from.
    let v2 = dist.spec("v2.yaml", &[("plain", "version: 2.0.0")]);
    let plan = node.berth(&["plan", "--json", "--spec", v2.to_str().unwrap()]);
    let shown = succeeded(&plan);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(plan["addons"][0]["version"], "2.0.0", "{shown}");
}

#[test]
fn a_node_with_nothing_installed_says_so() {
    let node = Node::new();
    let status = node.berth(&["status"]);
    let shown = succeeded(&status);
    assert!(
        text(&status.stdout).starts_with("no add-on is installed on this node"),
        "{shown}"
    );
    let output = node.berth(&["status", "--json"]);
    succeeded(&output);
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    conforms("node-status.v1.json", &document);
    assert_eq!(document["addons"], serde_json::json!([]), "{document:#}");
    assert_eq!(
        document["installer"],
        serde_json::Value::Null,
        "{document:#}"
    );
    let plan = failed(&node.berth(&["plan"]));
    assert!(
        plan.contains("give the Installer spec with --spec"),
        "with no installer run yet, plan says what it needs: {plan}"
    );
    let join = failed(&node.berth(&["join-command"]));
    assert!(
        join.contains("run `berth join-command` on the cluster's first node"),
        "{join}"
    );
}

#[test]
fn only_plan_and_preflight_take_the_last_installer_by_default() {
    let (_dist, node, _) = installed();
    for command in ["install", "join", "upgrade"] {
        let refused = failed(&node.berth(&[command]));
        assert!(
            refused.contains("--spec <SPEC>") && refused.contains("--dist <DIST>"),
            "{command}: {refused}"
        );
        // Its help says what it needs, not a default it does not take.
        let help = succeeded(&node.berth(&[command, "--help"]));
        assert!(
            help.contains(&format!("berth {command} --spec <SPEC> --dist <DIST>"))
                && help.contains(&format!("berth {command} --bundle <FILE|->")),
            "{help}"
        );
        assert!(!help.contains("ran last"), "{command}: {help}");
    }
    succeeded(&node.berth(&["plan"]));
    // The installer's own host preflights (this machine may warn on its CPUs): the closing
    // line says what the exit status means.
    let preflight = node.berth(&["preflight"]);
    let code = preflight.status.code().unwrap();
    let meaning = match code {
        0 => "no check failed or warned",
        4 => "a check warned and none failed",
        _ => panic!("{}", text(&preflight.stderr)),
    };
    let said = text(&preflight.stderr);
    let closing = said.lines().last().unwrap_or_default();
    assert!(
        closing.contains("host preflights: ")
            && closing.ends_with(&format!("exit {code}: {meaning}")),
        "{said}"
    );
}

/// Each command lists the flags it acts on: a plan none of the run's, a preflight none of the
/// plan's decisions; and preflight's help says what its exit statuses mean.
#[test]
fn help_lists_only_the_flags_a_command_acts_on() {
    let node = Node::new();
    let plan = succeeded(&node.berth(&["plan", "--help"]));
    for flag in [
        "--dry-run",
        "--hook-timeout",
        "--health-timeout",
        "--join-ttl",
        "--scripts-url",
    ] {
        assert!(!plan.contains(flag), "plan lists {flag}: {plan}");
    }
    assert!(plan.contains("--force-reapply"), "{plan}");
    let preflight = succeeded(&node.berth(&["preflight", "--help"]));
    for flag in [
        "--dry-run",
        "--force-reapply",
        "--allow-downgrade",
        "--hook-timeout",
        "--join-ttl",
    ] {
        assert!(
            !preflight.contains(flag),
            "preflight lists {flag}: {preflight}"
        );
    }
    assert!(
        preflight.contains("4 a check warned and none failed"),
        "{preflight}"
    );
}

#[test]
fn logs_are_named_for_the_run_they_record() {
    let (dist, node, _) = installed();
    assert!(logs(&node)[0].starts_with("install-"), "{:?}", logs(&node));
    let v2 = dist.spec("v2.yaml", &[("plain", "version: 2.0.0")]);
    succeeded(&node.install(&v2, &dist.url(), &[]));
    succeeded(&node.berth(&["rollback", "plain"]));
    let names = logs(&node);
    // Every hook run in hooks.log names a run whose log is there.
    let hooks = fs_err::read_to_string(node.root.path().join("var/log/berth/hooks.log")).unwrap();
    assert_eq!(hooks.lines().count(), 3, "{hooks}");
    for line in hooks.lines() {
        let run: serde_json::Value = serde_json::from_str(line).unwrap();
        let log = format!("{}.log", run["run"].as_str().unwrap());
        assert!(
            names.contains(&log),
            "{line} names a run without a log: {names:?}"
        );
        assert_eq!(run["succeeded"], true, "{line}");
    }
    let kinds: Vec<&str> = names
        .iter()
        .map(|name| name.split('-').next().unwrap())
        .collect();
    assert_eq!(kinds.len(), 3, "{names:?}");
    for kind in ["install", "upgrade", "rollback"] {
        assert!(kinds.contains(&kind), "a log named {kind}-…: {names:?}");
    }
}

/// `berth status | head`: a reader that went away before berth wrote is no panic.
#[test]
fn a_reader_that_went_away_is_not_a_panic() {
    let (_dist, node, _spec) = installed();
    for arguments in [&["status"][..], &["status", "--json"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = node
            .command(arguments)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{arguments:?}: {stderr}");
        assert!(output.status.success(), "{arguments:?}: {stderr}");
    }
}

/// A command that fails on an empty node leaves nothing behind, and a reset leaves a root of
/// its own as empty as it found it.
#[test]
fn a_failed_run_and_a_reset_leave_no_folders_behind() {
    let node = Node::new();
    let missing = node.root.path().join("nothere.yaml");
    let dist = TestDist::new();
    failed(&node.install(&missing, &dist.url(), &[]));
    let left: Vec<_> = fs_err::read_dir(node.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The hook session it began as it took the lock is gone too.
    let running = running_under(node.root.path());
    assert!(running.is_empty(), "{running:?}");

    let (_dist, node, _) = installed();
    succeeded(&node.berth(&["reset"]));
    let left: Vec<_> = walkdir::WalkDir::new(node.root.path())
        .min_depth(1)
        .into_iter()
        .map(|entry| entry.unwrap().path().to_path_buf())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The hook session starts while the helper library is written: a library that cannot be
/// written fails the run at once, naming where, and leaves no bash running.
#[test]
fn a_library_that_cannot_be_written_fails_the_run_and_ends_its_session() {
    let dist = TestDist::new();
    let spec = dist.spec("spec.yaml", &[]);
    let node = Node::new();
    let install_dir = node.root.path().join("var/lib/berth");
    fs_err::create_dir_all(&install_dir).unwrap();
    // Where the library's folder goes, a file.
    fs_err::write(install_dir.join("scripts"), "in the way").unwrap();
    let mut child = node
        .command(&[
            "install",
            "--spec",
            spec.to_str().unwrap(),
            "--dist",
            &dist.url(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ended = None;
    support::wait_until(
        "the failed run to end",
        std::time::Duration::from_secs(30),
        || {
            ended = child.try_wait().unwrap();
            ended.is_some()
        },
    );
    assert!(!ended.unwrap().success());
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("scripts/common"), "{said}");
    let running = running_under(node.root.path());
    assert!(running.is_empty(), "{running:?}");
    assert!(!install_dir.join("work").exists());
}

/// The command lines of the processes running that name `root` (a session's bash does).
fn running_under(root: &std::path::Path) -> Vec<String> {
    let root = root.to_string_lossy().into_owned();
    fs_err::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| fs_err::read(entry.ok()?.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(&root))
        .collect()
}

/// An add-on name that is not installed, given to `health` or `rollback`: the installed one it
/// is a typo of, else the installed ones, else that nothing is installed where Berth looked;
/// and a root that does not exist is named as that.
#[test]
fn a_mistyped_addon_name_gets_the_installed_one_it_is_near() {
    let (_dist, node, _) = installed();
    for command in ["health", "rollback"] {
        let said = failed(&node.berth(&[command, "plian"]));
        assert!(said.contains("did you mean `plain`?"), "{command}: {said}");
        let said = failed(&node.berth(&[command, "everything"]));
        assert!(said.contains("installed here: plain"), "{command}: {said}");
    }
    // A root that is not there is a mistyped BERTH_ROOT, not a node with nothing installed.
    let nowhere = node.root.path().join("nowhere");
    for command in [
        &["status"][..],
        &["health", "plain"],
        &["rollback", "plain"],
    ] {
        let said = failed(
            &node
                .command(command)
                .env("BERTH_ROOT", &nowhere)
                .output()
                .unwrap(),
        );
        assert!(
            said.contains(&format!(
                "{} is not a folder (--root, or BERTH_ROOT)",
                nowhere.display()
            )),
            "{command:?}: {said}"
        );
    }
    let empty = Node::new();
    let said = failed(&empty.berth(&["health", "plain"]));
    let root = empty.root.path().join("var/lib/berth");
    assert!(
        said.contains(&format!("no add-on is installed in {}", root.display())),
        "{said}"
    );
}

/// `berth --help` lists the commands people run, not those hooks call; `version` prints what
/// `--version` does; `completion bash` is a bash script that registers berth's completions.
#[test]
fn help_hides_the_hooks_commands_and_version_and_completion_work() {
    let node = Node::new();
    let help = succeeded(&node.berth(&["--help"]));
    for hidden in ["join-param", "kustomization", "kurl ", "kubeadm-config"] {
        assert!(!help.contains(hidden), "--help lists {hidden}: {help}");
    }
    for listed in ["install", "status", "version", "completion"] {
        assert!(help.contains(listed), "--help lacks {listed}: {help}");
    }
    // Hidden, the hooks' commands still run.
    succeeded(&node.berth(&["join-param", "--help"]));
    let version = succeeded(&node.berth(&["version"]));
    assert_eq!(
        version.trim(),
        succeeded(&node.berth(&["--version"])).trim()
    );
    assert!(version.starts_with("berth "), "{version}");

    let completion = node.berth(&["completion", "bash"]);
    assert!(completion.status.success(), "{}", text(&completion.stderr));
    let script = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(script.path(), &completion.stdout).unwrap();
    let registered = std::process::Command::new("bash")
        .arg("-c")
        .arg("source \"$1\" && complete -p berth")
        .arg("bash")
        .arg(script.path())
        .output()
        .unwrap();
    assert!(
        registered.status.success() && text(&registered.stdout).contains("berth"),
        "{}{}",
        text(&registered.stdout),
        text(&registered.stderr)
    );
    assert!(!text(&completion.stdout).contains("join-param"));
    failed(&node.berth(&["completion", "cmd.exe"]));
}

/// On a terminal, `berth reset` asks first, no by default: anything but yes changes nothing;
/// yes, or `--yes`, resets. Without a terminal (scripts) nothing is asked.
#[test]
fn reset_asks_on_a_terminal_and_takes_yes() {
    support::require("script", "bsdutils");
    let (dist, node, spec) = installed();
    // `script` gives the command a terminal, and writes what it is given to it.
    let on_terminal = |command: &str, answer: &str| {
        let mut child = std::process::Command::new("script")
            .args([
                "-qec",
                &format!("{} {command}", env!("CARGO_BIN_EXE_berth")),
                "/dev/null",
            ])
            .env("BERTH_ROOT", node.root.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), answer.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let state = node.root.path().join("var/lib/berth/state/plain.json");
    for answer in ["\n", "n\n", "maybe\n"] {
        let output = on_terminal("reset", answer);
        let said = text(&output.stdout);
        assert!(!output.status.success(), "{answer:?}: {said}");
        assert!(said.contains("Reset this node?"), "{said}");
        assert!(
            said.contains("not confirmed; nothing was changed"),
            "{said}"
        );
        assert!(state.exists(), "{answer:?} reset the node");
    }
    let output = on_terminal("reset", "y\n");
    assert!(output.status.success(), "{}", text(&output.stdout));
    assert!(!state.exists());

    succeeded(&node.install(&spec, &dist.url(), &[]));
    let output = on_terminal("reset --yes", "");
    let said = text(&output.stdout);
    assert!(output.status.success(), "{said}");
    assert!(!said.contains("Reset this node?"), "{said}");
    assert!(!state.exists());
}

/// Every command that reports prints its result for scripts with `-o json|yaml` (`--json` the
/// same as `-o json`): one document each, following its schema in docs/schemas/, in the
/// words the tables print; `install` too, when it ends. `-o` is a format, never a path.
#[test]
fn reports_print_documents_in_the_tables_words_and_o_is_the_format() {
    let (dist, node, spec) = installed();
    let document = |arguments: &[&str]| -> serde_json::Value {
        let output = node.berth(arguments);
        let shown = succeeded(&output);
        if arguments.contains(&"yaml") {
            serde_norway::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {shown}"))
        } else {
            serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {shown}"))
        }
    };

    // install (run again: nothing to do) prints the node's status when it ends.
    let url = dist.url();
    let spec_path = spec.to_str().unwrap();
    let installed = document(&["install", "--spec", spec_path, "--dist", &url, "-o", "json"]);
    conforms("node-status.v1.json", &installed);
    assert_eq!(installed["kind"], "NodeStatus");
    assert_eq!(installed["installer"]["dist"], url, "{installed:#}");
    let plain = &installed["addons"][0];
    assert_eq!(plain["name"], "plain");
    assert_eq!(plain["currentVersion"], "1.0.0");
    let types: Vec<&str> = plain["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|condition| condition["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Available", "Degraded", "Progressing"], "{plain:#}");
    // Conditions' statuses are the strings Kubernetes and the table use.
    assert_eq!(plain["conditions"][0]["status"], "True", "{plain:#}");
    assert_eq!(plain["conditions"][1]["status"], "Unknown", "{plain:#}");
    assert_eq!(plain["conditions"][2]["reason"], "Succeeded", "{plain:#}");
    assert!(installed["hostPreflights"].is_object() || installed["hostPreflights"].is_null());

    // status: the same document in JSON, YAML and with --json.
    let status = document(&["status", "-o", "json"]);
    conforms("node-status.v1.json", &status);
    let yaml = document(&["status", "-o", "yaml"]);
    conforms("node-status.v1.json", &yaml);
    assert_eq!(yaml["addons"], status["addons"]);
    assert_eq!(document(&["status", "--json"])["kind"], "NodeStatus");

    // plan: the decision is the table's word.
    let plan = document(&["plan", "-o", "yaml"]);
    conforms("plan.v1.json", &plan);
    assert_eq!(plan["addons"][0]["decision"], "AlreadyApplied", "{plan:#}");
    assert!(succeeded(&node.berth(&["plan"])).contains("AlreadyApplied"));
    let wide = succeeded(&node.berth(&["plan", "-o", "wide"]));
    assert!(
        wide.contains("PACKAGE") && wide.contains("sha256:"),
        "{wide}"
    );

    // health: its own document.
    let health = document(&["health", "plain", "-o", "json"]);
    conforms("addon-health.v1.json", &health);
    assert_eq!(
        health["conditions"][0]["reason"], "NoComponents",
        "{health:#}"
    );

    // status -o wide: more columns.
    let wide = succeeded(&node.berth(&["status", "-o", "wide"]));
    assert!(wide.lines().next().unwrap().contains("APPLIED"), "{wide}");

    // -o is a format: a path given to it is refused with the formats, and nothing is written.
    let refused = failed(&node.berth(&["status", "-o", "status.json"]));
    assert!(
        refused.contains("table") && refused.contains("yaml"),
        "{refused}"
    );
    let scratch = tempfile::tempdir().unwrap();
    let refused = failed(
        &node
            .command(&["support-bundle", "-o", "json"])
            .current_dir(scratch.path())
            .output()
            .unwrap(),
    );
    assert!(refused.contains("--out"), "{refused}");
    assert_eq!(fs_err::read_dir(scratch.path()).unwrap().count(), 0);

    // reset: what it did.
    let reset = document(&["reset", "--yes", "-o", "json"]);
    conforms("reset-report.v1.json", &reset);
    assert_eq!(reset["hooks"], serde_json::json!([]), "{reset:#}");
    assert!(
        !reset["removed"].as_array().unwrap().is_empty(),
        "{reset:#}"
    );
}

/// One name for each key, and the names cosign and zarf users bring: a public key is
/// `--trust-key` (or `--key`, as `cosign verify` and `zarf package deploy` take it); a
/// near miss is told the right flag rather than to pass it as a value.
#[test]
fn key_flags_take_one_name_and_the_common_alias() {
    let (dist, _node, _) = installed();
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("vendor.pub");
    let node = Node::new();
    for flag in ["--trust-key", "--key"] {
        let said = failed(&node.berth(&[
            "verify",
            dist.dist.path().to_str().unwrap(),
            flag,
            missing.to_str().unwrap(),
        ]));
        assert!(said.contains("vendor.pub"), "{flag}: {said}");
        assert!(!said.contains("unexpected argument"), "{flag}: {said}");
    }
    let said = failed(&node.berth(&[
        "verify",
        dist.dist.path().to_str().unwrap(),
        "--trusted-key",
        missing.to_str().unwrap(),
    ]));
    assert!(said.contains("--trust-key"), "{said}");
    assert!(!said.contains("'-- --trusted-key'"), "{said}");
}
