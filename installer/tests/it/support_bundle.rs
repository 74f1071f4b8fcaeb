//! `berth support-bundle` on a node with real parts: demo on a real containerd, its container
//! killed; an add-on whose last run failed; secrets planted in the spec, node.yaml, the join
//! command, the fleet's tokens and the environment. The archive is opened with the system's
//! tar and checked file by file against troubleshoot's layout.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

/// An add-on that prints its settings (its secret among them) and fails when told to.
const KEEPER: &str = r#"
function keeper() {
    echo "keeper settings:"
    set | grep '^KEEPER_' || true
    if [ "${KEEPER_FAIL:-}" = "yes" ]; then
        echo "keeper could not reach its store" >&2
        return 1
    fi
}
"#;

const SPEC_SECRET: &str = "spec-secret-3f9a1c77";
const NODE_SECRET: &str = "node-secret-8b2e4d19";
const ENV_SECRET: &str = "env-secret-5c6d7e8f";

fn spec(dir: &Path, file: &str, port: u16, fail: bool) -> PathBuf {
    let path = dir.join(file);
    fs_err::write(
        &path,
        format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: bundle\nspec:\n  demo:\n    version: 1.0.0\n    port: {port}\n  keeper:\n    version: 1.0.0\n    adminPassword: {SPEC_SECRET}\n    fail: \"{}\"\n",
            if fail { "yes" } else { "no" }
        ),
    )
    .unwrap();
    path
}

/// Every file below `dir`, by its path from `dir`, with its bytes.
fn bundle_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_file())
        .map(|entry| {
            let relative = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            (relative, fs_err::read(entry.path()).unwrap())
        })
        .collect()
}

fn json(files: &BTreeMap<String, Vec<u8>>, path: &str) -> serde_json::Value {
    let bytes = files
        .get(path)
        .unwrap_or_else(|| panic!("no {path} among {:?}", files.keys().collect::<Vec<_>>()));
    serde_json::from_slice(bytes).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn a_bundle_of_a_node_with_a_killed_container_and_a_failed_run_says_what_is_wrong_and_holds_no_secret()
 {
    let containerd = Containerd::start();
    let (_, mut dist) = TestDist::examples(&["demo"]);
    dist.addon("keeper", "1.0.0", KEEPER);
    let specs = tempfile::tempdir().unwrap();
    let port = free_port();
    // A secret in the environment that hooks print (as a careless hook would).
    let node = Node::new()
        .env("CONTAINERD_ADDRESS", &containerd.socket)
        .env("KEEPER_SERVICE_TOKEN", ENV_SECRET);
    let node_config = node.root.path().join("etc/berth/node.yaml");
    fs_err::create_dir_all(node_config.parent().unwrap()).unwrap();
    fs_err::write(
        &node_config,
        format!("keeper:\n  apiToken: {NODE_SECRET}\n"),
    )
    .unwrap();

    succeeded(&node.install(
        &spec(specs.path(), "ok.yaml", port, false),
        &dist.url(),
        &[],
    ));
    // The fleet's tokens join the join command.
    let fleet_address = format!("127.0.0.1:{}", free_port());
    let serve = Server::spawn(
        &mut node.command(&[
            "fleet",
            "serve",
            "--listen",
            &fleet_address,
            "--name",
            "first",
        ]),
        &specs.path().join("serve.log"),
    );
    let join_command = fleet_join_command(|| node.berth(&["join-command", "--airgap"]));
    let join_file: serde_json::Value = serde_json::from_slice(
        &fs_err::read(node.root.path().join("var/lib/berth/join.json")).unwrap(),
    )
    .unwrap();
    let join_secrets: Vec<String> = join_file["params"]
        .as_object()
        .unwrap()
        .values()
        .filter(|param| param["secret"] == true)
        .map(|param| param["value"].as_str().unwrap().to_string())
        .collect();
    assert!(
        join_secrets.len() >= 3,
        "demo's token and the fleet's two: {join_file:#}"
    );
    let control_plane = text(
        &node
            .berth(&["join-command", "--airgap", "--control-plane"])
            .stdout,
    );
    for secret in &join_secrets {
        assert!(
            join_command.contains(secret.as_str()) || control_plane.contains(secret.as_str()),
            "{secret} is in a join command"
        );
    }
    drop(serve);

    // A run that fails: keeper's hook exits 1.
    let failing = node.install(
        &spec(specs.path(), "fail.yaml", port, true),
        &dist.url(),
        &[],
    );
    assert!(!failing.status.success(), "{}", printed(&failing));
    // demo's container killed.
    let status = node.status();
    let id = status["demo"]["health"]["components"][0]["refs"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let ctr = |arguments: &[&str]| {
        let mut all = vec!["--namespace", "k8s.io"];
        all.extend(arguments);
        containerd.ctr(&all)
    };
    ctr(&["tasks", "kill", "--signal", "SIGKILL", &id]);
    wait_until("the demo task to stop", Duration::from_secs(20), || {
        !text(&ctr(&["tasks", "ls"]).stdout)
            .lines()
            .any(|line| line.starts_with(&id) && line.contains("RUNNING"))
    });

    let out = specs.path().join("bundle.tar.gz");
    let output = node
        .command(&["support-bundle", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let said = succeeded(&output);
    assert!(said.contains("FAIL Add-on demo health"), "{said}");

    // Opened by another reader: the system's tar.
    let opened = tempfile::tempdir().unwrap();
    let root = untar(&out, opened.path());
    assert!(
        root.ends_with("bundle"),
        "one top folder, named as the archive: {root:?}"
    );
    let files = bundle_files(&root);

    // troubleshoot's reader needs version.yaml at the root; its analysis is analysis.json.
    let version = String::from_utf8(files["version.yaml"].clone()).unwrap();
    assert!(
        version.starts_with(
            "apiVersion: troubleshoot.sh/v1beta2\nkind: SupportBundle\nspec:\n  versionNumber: "
        ),
        "{version}"
    );
    let analysis = json(&files, "analysis.json");
    let entries = analysis.as_array().unwrap();
    for entry in entries {
        for key in ["name", "insight", "severity", "analyzerSpec"] {
            assert!(entry.get(key).is_some(), "{key} of {entry:#}");
        }
        for key in ["name", "primary", "detail", "severity"] {
            assert!(
                entry["insight"].get(key).is_some(),
                "insight.{key} of {entry:#}"
            );
        }
    }
    let insight = |primary: &str| {
        entries
            .iter()
            .find(|entry| entry["insight"]["primary"] == primary)
            .unwrap_or_else(|| panic!("no {primary} in {analysis:#}"))
            .clone()
    };
    // What is wrong, said by the analyzers.
    let health = insight("Add-on demo health");
    assert_eq!(health["severity"], "error");
    let detail = health["insight"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("Degraded") && detail.contains("component container"),
        "{detail}"
    );
    assert!(detail.contains(&id), "the container is named: {detail}");
    let run = insight("Add-on keeper run");
    assert_eq!(run["severity"], "error");
    let detail = run["insight"]["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("its last run failed"), "{detail}");
    // demo's part of that run did not finish: the run stopped at keeper.
    let demo_run = insight("Add-on demo run");
    assert!(
        demo_run["insight"]["detail"]
            .as_str()
            .unwrap()
            .contains("the run stopped at keeper"),
        "{demo_run:#}"
    );

    // The failing run's log, named by the analysis, is in the bundle.
    let log_path = detail
        .split_whitespace()
        .find(|word| word.starts_with("host-collectors/berth/logs/") && word.ends_with(".log"))
        .unwrap_or_else(|| panic!("no run log named in {detail}"));
    let log = String::from_utf8_lossy(&files[log_path]).into_owned();
    assert!(log.contains("keeper could not reach its store"), "{log}");
    // Its settings were printed: the secret in them is hidden, the rest kept.
    assert!(log.contains("KEEPER_FAIL=yes"), "{log}");
    for name in [
        "KEEPER_ADMIN_PASSWORD",
        "KEEPER_SERVICE_TOKEN",
        "KEEPER_API_TOKEN",
    ] {
        assert!(
            log.contains(&format!("{name}=***HIDDEN***")),
            "{name} in {log}"
        );
    }
    assert!(files.contains_key("host-collectors/berth/logs/hooks.log"));

    // The health record naming the component.
    let record = json(&files, "host-collectors/berth/health/demo.json");
    let degraded = record["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == "Degraded")
        .unwrap();
    assert_eq!(degraded["status"], "True", "{record:#}");
    assert!(degraded["message"].as_str().unwrap().contains("container"));

    // containerd's view of the container.
    let tasks = String::from_utf8_lossy(&files["host-collectors/run-host/containerd-tasks.txt"])
        .into_owned();
    let task = tasks
        .lines()
        .find(|line| line.starts_with(&id))
        .unwrap_or_else(|| panic!("{tasks}"));
    assert!(task.contains("STOPPED"), "{task}");
    let containers =
        String::from_utf8_lossy(&files["host-collectors/run-host/containerd-containers.txt"])
            .into_owned();
    assert!(
        containers.contains(&id) && containers.contains("docker.io/berth/demo:1.0.0"),
        "{containers}"
    );
    let info = json(
        &files,
        "host-collectors/run-host/containerd-tasks-info.json",
    );
    assert_eq!(info["exitCode"], "0");
    for key in ["command", "error", "outputDir", "input", "env"] {
        assert!(info.get(key).is_some(), "{key} of {info:#}");
    }
    let demo_log = files
        .keys()
        .find(|path| path.starts_with("host-collectors/berth/addon-logs/demo/"))
        .unwrap_or_else(|| {
            panic!(
                "demo's container log: {:?}",
                files.keys().collect::<Vec<_>>()
            )
        });
    assert!(demo_log.ends_with("container.log"));

    // Every file where troubleshoot's layout puts one (pkg/collect/host_*.go, result.go).
    let documented = [
        "version.yaml",
        "analysis.json",
        "execution-data/summary.txt",
        "execution-data/redactions.json",
        "host-collectors/system/",
        "host-collectors/run-host/",
        "host-collectors/journald/",
        "host-collectors/errors/",
        "host-collectors/diskUsage/",
        // copy collectors: host-collectors/<collectorName>/<base name>
        "host-collectors/berth/",
        "host-collectors/os-release/",
    ];
    for path in files.keys() {
        assert!(
            documented.iter().any(|prefix| path == prefix || (prefix.ends_with('/') && path.starts_with(prefix))),
            "{path} is where troubleshoot puts no file"
        );
    }
    for path in files.keys().filter(|path| {
        path.starts_with("host-collectors/run-host/")
            && path.ends_with(".txt")
            && !path.ends_with("-stderr.txt")
    }) {
        let info = path.replace(".txt", "-info.json");
        assert!(files.contains_key(&info), "{path} has its {info}");
    }

    // The host, where troubleshoot writes it.
    let os = json(&files, "host-collectors/system/hostos_info.json");
    for key in [
        "name",
        "kernelVersion",
        "platformVersion",
        "platform",
        "platformFamily",
    ] {
        assert!(os.get(key).is_some(), "{key} of {os:#}");
    }
    assert!(
        json(&files, "host-collectors/system/memory.json")["total"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        json(&files, "host-collectors/system/cpu.json")["logicalCount"]
            .as_u64()
            .unwrap()
            > 0
    );
    let usage = json(&files, "host-collectors/diskUsage/root.json");
    assert!(usage["total_bytes"].as_u64().unwrap() > 0);
    assert!(files.contains_key("host-collectors/run-host/ip-routes.txt"));
    assert!(files.contains_key("host-collectors/run-host/uname.txt"));
    assert!(files.contains_key("execution-data/summary.txt"));
    // A collector that could not run is recorded, not fatal.
    for (path, bytes) in files
        .iter()
        .filter(|(path, _)| path.starts_with("host-collectors/errors/"))
    {
        let error: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert!(path.ends_with("-error.json"), "{path}");
        for key in ["collector", "error", "timestamp"] {
            assert!(error.get(key).is_some(), "{key} of {path}");
        }
    }

    // No secret anywhere, though the files that held them are in the bundle.
    let spec_copy = files
        .iter()
        .find(|(path, _)| {
            path.starts_with("host-collectors/berth/installers/")
                && path.ends_with("installer.yaml")
        })
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_else(|| {
            panic!(
                "the specs kept on the node: {:?}",
                files
                    .keys()
                    .filter(|path| path.contains("installers"))
                    .collect::<Vec<_>>()
            )
        });
    assert!(
        spec_copy.contains("adminPassword: ***HIDDEN***")
            || spec_copy.contains("adminPassword: '***HIDDEN***'"),
        "{spec_copy}"
    );
    let node_copy =
        String::from_utf8_lossy(&files["host-collectors/berth/node/node.yaml"]).into_owned();
    assert!(node_copy.contains("apiToken: ***HIDDEN***"), "{node_copy}");
    let mut secrets: Vec<&str> = vec![SPEC_SECRET, NODE_SECRET, ENV_SECRET];
    secrets.extend(join_secrets.iter().map(String::as_str));
    for secret in secrets {
        for (path, bytes) in &files {
            assert!(!contains(bytes, secret), "{secret} is in {path}");
        }
    }
    // And nowhere in the archive's own bytes (names, headers).
    let raw = std::process::Command::new("sh")
        .args(["-c", &format!("gzip -dc {}", out.display())])
        .output()
        .unwrap()
        .stdout;
    for secret in [SPEC_SECRET, NODE_SECRET, ENV_SECRET] {
        assert!(!contains(&raw, secret), "{secret} in the archive");
    }
    // The fleet's key is never copied.
    assert!(!files.keys().any(|path| path.ends_with("fleet.key")));

    // Run again at the same place, with a Redactor of the vendor's and a bound the logs pass:
    // the bundle is replaced, the value hidden, what does not fit left out and said, and the
    // bundle still whole.
    let redactor = specs.path().join("redactor.yaml");
    fs_err::write(
        &redactor,
        "apiVersion: troubleshoot.sh/v1beta2\nkind: Redactor\nmetadata:\n  name: vendor\nspec:\n  redactors:\n  - name: store\n    fileSelector:\n      files: [\"host-collectors/berth/logs/*.log\"]\n    removals:\n      values: [\"could not reach its store\"]\n",
    )
    .unwrap();
    fs_err::write(
        node.root.path().join("var/log/berth/big.log"),
        "x".repeat(3 << 20),
    )
    .unwrap();
    let output = node
        .command(&[
            "support-bundle",
            "--out",
            out.to_str().unwrap(),
            "--redact",
            redactor.to_str().unwrap(),
            "--max-size",
            "2",
        ])
        .output()
        .unwrap();
    let said = succeeded(&output);
    assert!(
        said.contains("left out host-collectors/berth/logs/big.log"),
        "{said}"
    );
    let opened = tempfile::tempdir().unwrap();
    let again = bundle_files(&untar(&out, opened.path()));
    assert!(again.contains_key("version.yaml") && again.contains_key("analysis.json"));
    assert!(!again.contains_key("host-collectors/berth/logs/big.log"));
    let log = String::from_utf8_lossy(&again[log_path]).into_owned();
    assert!(
        log.contains("keeper ***HIDDEN***") && !log.contains("reach its store"),
        "{log}"
    );
    let redactions = json(&again, "execution-data/redactions.json");
    assert!(
        redactions["byRedactor"]["store.literal.0"].is_array(),
        "{redactions:#}"
    );
    ctr(&["tasks", "delete", "--force", &id]);
    ctr(&["containers", "delete", &id]);
}

/// The untarred archive at `path`: its one top folder.
fn untar(path: &Path, into: &Path) -> PathBuf {
    succeeded(
        &std::process::Command::new("tar")
            .args(["xzf", path.to_str().unwrap(), "-C", into.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    let tops: Vec<PathBuf> = fs_err::read_dir(into)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(tops.len(), 1, "{tops:?}");
    tops[0].clone()
}

#[test]
fn the_first_node_gathers_every_nodes_bundle_in_one_archive_and_names_a_node_cut_off() {
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let fleet = support::fleet::Fleet::start_nodes(&dist, &spec, 3, Some(1));
    let machines = &fleet.machines;
    let first = &machines[0];
    let work = tempfile::tempdir().unwrap();

    // Every node answers: one archive, a folder per node, each a whole bundle.
    let out = work.path().join("fleet.tar.gz");
    let output = first.berth(&[
        "support-bundle",
        "--nodes",
        "all",
        "--wait",
        "120s",
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = succeeded(&output);
    let opened = tempfile::tempdir().unwrap();
    let root = untar(&out, opened.path());
    let all = bundle_files(&root);
    assert!(all.contains_key("version.yaml"), "{said}");
    let nodes = json(&all, "nodes.json");
    let lines: BTreeMap<String, String> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|line| {
            (
                line["name"].as_str().unwrap().to_string(),
                line["bundle"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("node-1", "collected"),
            ("node-2", "collected"),
            ("node-3", "collected")
        ]
        .map(|(name, bundle)| (name.to_string(), bundle.to_string()))
        .into_iter()
        .collect(),
        "{nodes:#}"
    );
    for node in ["node-1", "node-2", "node-3"] {
        for file in [
            "version.yaml",
            "analysis.json",
            "host-collectors/berth/state/demo.json",
            "host-collectors/system/hostos_info.json",
        ] {
            let path = format!("nodes/{node}/{file}");
            assert!(
                all.contains_key(&path),
                "{path} in {:?}",
                all.keys()
                    .filter(|path| path.starts_with(&format!("nodes/{node}/host-collectors/berth")))
                    .collect::<Vec<_>>()
            );
        }
        // Each node's own records: its state says it joined, or installed.
        let state = json(
            &all,
            &format!("nodes/{node}/host-collectors/berth/state/demo.json"),
        );
        assert_eq!(state["current"]["version"], "1.0.0");
    }
    let analysis = json(&all, "analysis.json");
    for node in ["node-1", "node-2", "node-3"] {
        let title = format!("{node}: Add-on demo run");
        assert!(
            analysis
                .as_array()
                .unwrap()
                .iter()
                .any(|entry| entry["insight"]["primary"] == title),
            "{title} in {analysis:#}"
        );
    }
    // What the first node took in is gone once the archive is written.
    let received = first.root.path().join("var/lib/berth/fleet/bundles");
    assert_eq!(fs_err::read_dir(&received).unwrap().count(), 0);

    // node-3 cut off: listed as missing once the bound has passed, the others collected.
    machines[2].host.set_link(false);
    let again = work.path().join("cut.tar.gz");
    let started = std::time::Instant::now();
    let output = first.berth(&[
        "support-bundle",
        "--nodes",
        "all",
        "--wait",
        "15s",
        "--out",
        again.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    let said = failed(&output);
    assert!(
        said.contains("node-3: missing: no bundle came within 15s"),
        "{said}"
    );
    assert!(took < Duration::from_secs(75), "took {took:?}");
    let opened = tempfile::tempdir().unwrap();
    let root = untar(&again, opened.path());
    let files = bundle_files(&root);
    let nodes = json(&files, "nodes.json");
    let bundle_of = |name: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|line| line["name"] == name)
            .unwrap()["bundle"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        [
            bundle_of("node-1"),
            bundle_of("node-2"),
            bundle_of("node-3")
        ],
        ["collected", "collected", "missing"],
        "{nodes:#}"
    );
    assert!(!files.keys().any(|path| path.starts_with("nodes/node-3/")));
    let analysis = json(&files, "analysis.json");
    assert!(
        analysis
            .as_array()
            .unwrap()
            .iter()
            .any(
                |entry| entry["insight"]["primary"] == "node-3: support bundle"
                    && entry["severity"] == "error"
            ),
        "{analysis:#}"
    );
    machines[2].host.set_link(true);

    // A name the fleet does not know is refused, naming those it knows.
    let error = failed(&first.berth(&["support-bundle", "--nodes", "node-9", "--wait", "5s"]));
    assert!(
        error.contains("no node of the fleet is called node-9") && error.contains("node-2"),
        "{error}"
    );
}

/// A kURL add-on's file among the fixtures, read in place.
fn kurl_fixture(path: &str) -> PathBuf {
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kurl-addons/addons");
    let path = fixtures.join(path);
    assert!(
        path.is_file(),
        "the kURL fixture {} is missing",
        path.display()
    );
    path
}

fn object(kind: &str, namespace: &str, name: &str, rest: serde_json::Value) -> serde_json::Value {
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
    });
    for (key, value) in rest.as_object().unwrap() {
        if key == "metadata" {
            for (field, value) in value.as_object().unwrap() {
                object["metadata"][field] = value.clone();
            }
        } else {
            object[key] = value.clone();
        }
    }
    object
}

fn pod(
    namespace: &str,
    name: &str,
    label: (&str, &str),
    container: &str,
    log: &str,
) -> serde_json::Value {
    object(
        "Pod",
        namespace,
        name,
        serde_json::json!({
            "metadata": {
                "labels": {label.0: label.1},
                "annotations": {format!("test.berth/log-{container}"): log},
            },
            "spec": {"containers": [{"name": container, "image": "x"}]},
        }),
    )
}

#[test]
fn kurls_in_cluster_collectors_run_through_kubectl_as_their_specs_say() {
    // An add-on carrying kURL's registry and flannel troubleshoot specs, as kURL ships them.
    let (_, mut dist) = TestDist::examples(&[]);
    let folder = dist.addon("kurlish", "1.0.0", "function kurlish() { :; }\n");
    fs_err::copy(
        kurl_fixture("registry/3.1.1/tmpl-troubleshoot.yaml"),
        folder.join("tmpl-troubleshoot.yaml"),
    )
    .unwrap();
    fs_err::create_dir_all(folder.join("yaml")).unwrap();
    fs_err::copy(
        kurl_fixture("flannel/0.28.7/yaml/troubleshoot.yaml"),
        folder.join("yaml/troubleshoot.yaml"),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
    let spec = dist.spec("kurlish.yaml", &[("kurlish", "version: 1.0.0")]);
    let api = KubernetesApi::start(vec![
        object("Namespace", "", "kurl", serde_json::json!({})),
        object(
            "ConfigMap",
            "kurl",
            "registry-config",
            serde_json::json!({"data": {"config.yml": "http:\n  addr: :443\n"}}),
        ),
        object(
            "Secret",
            "kurl",
            "registry-pki",
            serde_json::json!({"data": {"registry.crt": "Q0VSVElGSUNBVEU=", "registry.key": "S0VZ"}}),
        ),
        {
            // Its environment holds a password, as a Deployment's may.
            let mut registry = pod(
                "kurl",
                "registry-7d9c",
                ("app", "registry"),
                "registry",
                "registry listening on :443\n",
            );
            registry["spec"]["containers"][0]["env"] = serde_json::json!(
                [{"name": "REGISTRY_HTTP_PASSWORD", "value": "pod-env-secret-991"}]
            );
            registry
        },
        pod(
            "kube-flannel",
            "kube-flannel-ds-x2b",
            ("app", "flannel"),
            "kube-flannel",
            "E1126 failed to read net conf: open /etc/kube-flannel/net-conf.json: no such file\n",
        ),
    ]);

    // Without a kubeconfig: listed as not run, and why.
    let node = Node::new();
    succeeded(&node.install(&spec, &dist.url(), &[]));
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("none.tar.gz");
    succeeded(&node.berth(&["support-bundle", "--out", out.to_str().unwrap()]));
    let opened = tempfile::tempdir().unwrap();
    let files = bundle_files(&untar(&out, opened.path()));
    let record = json(&files, "collector-errors/in-cluster-error.json");
    assert!(
        record["error"]
            .as_str()
            .unwrap()
            .contains("no admin kubeconfig"),
        "{record:#}"
    );
    assert!(record.to_string().contains("registry-config"), "{record:#}");

    // With the admin kubeconfig: each collector as its spec says, where troubleshoot puts it.
    let kubeconfig = node.root.path().join("etc/kubernetes/admin.conf");
    fs_err::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    fs_err::write(&kubeconfig, api.kubeconfig()).unwrap();
    let out = work.path().join("cluster.tar.gz");
    let given = work.path().join("resources.yaml");
    fs_err::write(
        &given,
        "apiVersion: troubleshoot.sh/v1beta2\nkind: SupportBundle\nspec:\n  collectors:\n  - clusterResources: {}\n",
    )
    .unwrap();
    let output = node
        .command(&[
            "support-bundle",
            given.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("HOME", node.root.path().join("root"))
        .output()
        .unwrap();
    succeeded(&output);
    let opened = tempfile::tempdir().unwrap();
    let files = bundle_files(&untar(&out, opened.path()));
    let config = json(&files, "configmaps/kurl/registry-config.json");
    assert_eq!(config["configMapExists"], true, "{config:#}");
    assert!(
        config["data"]["config.yml"]
            .as_str()
            .unwrap()
            .contains("http:")
    );
    let missing = json(&files, "configmaps/kurl/registry-velero-config.json");
    assert_eq!(missing["configMapExists"], false, "{missing:#}");
    let pki = json(&files, "secrets/kurl/registry-pki/registry.crt.json");
    assert_eq!(
        (
            pki["secretExists"].clone(),
            pki["keyExists"].clone(),
            pki["value"].clone()
        ),
        (true.into(), true.into(), "CERTIFICATE".into()),
        "{pki:#}"
    );
    let log = String::from_utf8_lossy(&files["kurl/registry/logs/registry-7d9c/registry.log"])
        .into_owned();
    assert_eq!(log, "registry listening on :443\n");
    assert!(files.contains_key("kots/kurl/flannel/kube-flannel-ds-x2b/kube-flannel.log"));
    // clusterResources, by namespace; the password in a pod's environment hidden, as
    // troubleshoot's multi-line redactors hide it.
    let pods = String::from_utf8_lossy(&files["cluster-resources/pods/kurl.json"]).into_owned();
    assert!(
        pods.contains("registry-7d9c") && pods.contains("REGISTRY_HTTP_PASSWORD"),
        "{pods}"
    );
    assert!(!pods.contains("pod-env-secret-991"), "{pods}");
    assert!(files.contains_key("cluster-resources/namespaces.json"));
    // kURL's own analyzers read what was collected: flannel's says what is wrong.
    let analysis = json(&files, "analysis.json");
    let flannel = analysis
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["insight"]["primary"] == "Flannel: can read net-conf.json")
        .unwrap_or_else(|| panic!("{analysis:#}"));
    assert_eq!(flannel["severity"], "error", "{flannel:#}");
    assert_eq!(flannel["insight"]["detail"], "failed to read net-conf.json");
    let rbac = analysis
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["insight"]["primary"] == "Flannel: has access")
        .unwrap();
    assert_eq!(rbac["severity"], "debug", "{rbac:#}");
    // kubectl asked the API for what the specs name, with the selectors they give.
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|request| request.contains("/namespaces/kurl/pods")
                && request.contains("labelSelector=app%3Dregistry")),
        "{requests:#?}"
    );
}

/// Ctrl-C during a support bundle stops the collectors' programs, which run in process groups
/// of their own that the terminal's signal misses, writes no bundle, and exits 130.
#[test]
fn an_interrupted_bundle_stops_its_collectors_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A collector that would run for minutes, named so that it can be found.
    let marker = format!("{}", 4000 + std::process::id() % 1000);
    let spec = dir.path().join("slow.yaml");
    fs_err::write(
        &spec,
        format!(
            "apiVersion: troubleshoot.sh/v1beta2\nkind: SupportBundle\nmetadata: {{name: slow}}\nspec:\n  hostCollectors:\n    - run: {{collectorName: slow, command: sleep, args: [\"{marker}\"]}}\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("bundle.tar.gz");
    let node = Node::new();
    let mut child = node
        .command(&[
            "support-bundle",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--collector-timeout",
            "10m",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sleeping = || {
        std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}$")])
            .output()
            .unwrap()
            .status
            .success()
    };
    wait_until("the collector to run", Duration::from_secs(120), sleeping);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut ended = None;
    wait_until("berth to end after Ctrl-C", Duration::from_secs(10), || {
        ended = child.try_wait().unwrap();
        ended.is_some()
    });
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(ended.unwrap().code(), Some(130), "{said}");
    assert!(said.contains("no bundle was written"), "{said}");
    assert!(!sleeping(), "the collector still runs");
    assert!(!out.exists(), "a bundle was written");
}
