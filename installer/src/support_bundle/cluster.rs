//! The in-cluster collectors of SupportBundle documents — those kURL's add-ons ship in
//! `tmpl-troubleshoot.yaml` and `yaml/troubleshoot.yaml` (a ConfigMap or Secret labelled
//! `troubleshoot.io/kind: support-bundle`, its `support-bundle-spec` the document), and the
//! `collectors:` of files given — run as their spec says through `kubectl` with the node's
//! admin kubeconfig, written where troubleshoot writes them. Without a kubeconfig (a worker,
//! a node with no Kubernetes) they are listed as not run, and why.
//!
//! Berth runs `clusterInfo`, `clusterResources` (with the logs of pods in trouble, where
//! troubleshoot puts them), `logs`, `configMap` and `secret`; the others are named as not run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use berth_preflight::support_bundle::{Staging, command, paths, title};
use berth_preflight::{Document, DocumentKind, Origin};
use serde_json::{Map, Value, json};

use crate::node::layout::Layout;

/// What `clusterResources` lists: plural, and whether it is namespaced.
const RESOURCES: [(&str, bool); 12] = [
    ("namespaces", false),
    ("nodes", false),
    ("pods", true),
    ("deployments", true),
    ("daemonsets", true),
    ("statefulsets", true),
    ("services", true),
    ("events", true),
    ("persistentvolumeclaims", true),
    ("persistentvolumes", false),
    ("storageclasses", false),
    ("jobs", true),
];
/// The origin of Berth's own bundle document.
pub const BUILTIN_ORIGIN: &str = "built-in";
/// The most bytes of a kURL troubleshoot file read.
const MAX_SPEC_BYTES: u64 = 1 << 20;

/// The SupportBundle documents kURL's add-on folder ships as Kubernetes objects.
pub fn kurl_documents(folder: &Path, name: &str) -> Vec<Document> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [folder.to_path_buf(), folder.join("yaml")] {
        if let Ok(entries) = fs_err::read_dir(&dir) {
            files.extend(entries.flatten().map(|entry| entry.path()).filter(|path| {
                path.file_name()
                    .is_some_and(|name| name.to_string_lossy().contains("troubleshoot"))
            }));
        }
    }
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let Ok(text) = berth_formats::files::read_to_string_at_most(&file, MAX_SPEC_BYTES) else {
            continue;
        };
        if !text.contains("troubleshoot.io/kind: support-bundle") {
            continue;
        }
        for object in serde_norway::Deserializer::from_str(&text) {
            let Ok(object) = <Value as serde::Deserialize>::deserialize(object) else {
                continue;
            };
            for section in ["data", "stringData"] {
                let Some(spec) = object[section]["support-bundle-spec"].as_str() else {
                    continue;
                };
                // A Secret's `data` is base64.
                let spec = if object["kind"] == "Secret" && section == "data" {
                    use base64::Engine as _;
                    let decoded = base64::engine::general_purpose::STANDARD.decode(spec);
                    String::from_utf8_lossy(&decoded.unwrap_or_default()).into_owned()
                } else {
                    spec.to_string()
                };
                if let Ok(document) = Document::parse_as(
                    Origin::new(name, Some(file.clone())),
                    &spec,
                    &[DocumentKind::SupportBundle],
                ) {
                    documents.push(document);
                }
            }
        }
    }
    documents
}

/// Runs every in-cluster collector of `documents` into `staging`.
pub fn collect(layout: &Layout, documents: &[Document], staging: &Staging, timeout: Duration) {
    let items: Vec<(&Document, &berth_preflight::document::Item)> = documents
        .iter()
        .flat_map(|document| {
            document
                .cluster_collectors
                .iter()
                .map(move |item| (document, item))
        })
        .filter(|(document, item)| !item.excluded(&document.origin).unwrap_or(true))
        .collect();
    if items.is_empty() {
        return;
    }
    let kubeconfig = layout.kubeconfig();
    let kubectl = which::which("kubectl");
    let why_not = match (&kubectl, kubeconfig.is_file()) {
        (Err(_), _) => Some("kubectl is not installed on this node".to_string()),
        (_, false) => Some(format!(
            "no admin kubeconfig at {} (a worker, or a node with no Kubernetes)",
            kubeconfig.display()
        )),
        _ => None,
    };
    if let Some(why) = why_not {
        // Berth's own asks for the cluster's half only where it can be had: on the node with
        // the admin's kubeconfig. What the add-ons and given files ask for is listed.
        let items: Vec<_> = items
            .into_iter()
            .filter(|(document, _)| document.origin.name != BUILTIN_ORIGIN)
            .collect();
        if items.is_empty() {
            return;
        }
        let names: Vec<String> = items
            .iter()
            .map(|(document, item)| {
                format!("{} {} ({})", item.kind, title(item), document.origin.name)
            })
            .collect();
        for (_, item) in &items {
            staging.ran(&title(item), 'X', Instant::now());
        }
        let record =
            json!({"error": format!("in-cluster collectors not run: {why}"), "collectors": names});
        let _ = staging.write(
            "collector-errors/in-cluster-error.json",
            record.to_string().as_bytes(),
        );
        return;
    }
    let kubectl = Kubectl {
        program: kubectl.unwrap_or_default(),
        kubeconfig,
        timeout,
        // A large cluster's lists run past one file's bound before they are split.
        bound: staging.limits().file_bytes.saturating_mul(4),
    };
    for (document, item) in items {
        let started = Instant::now();
        let name = title(item);
        let result = match item.kind.as_str() {
            "clusterInfo" => cluster_info(&kubectl, staging),
            "clusterResources" => cluster_resources(&kubectl, staging),
            "logs" => logs(&kubectl, &item.fields, staging),
            "configMap" => object_data(&kubectl, &item.fields, staging, "configmap"),
            "secret" => object_data(&kubectl, &item.fields, staging, "secret"),
            other => Err(format!(
                "Berth does not run the in-cluster collector {other} ({}); it runs clusterInfo, clusterResources, logs, configMap and secret",
                document.origin.at(item.line)
            )),
        };
        match result {
            Ok(()) => staging.ran(&name, 'S', started),
            Err(error) => {
                let record = json!({"collector": name, "error": error});
                let path = format!("collector-errors/{}-error.json", paths::safe_name(&name));
                let _ = staging.write(&path, record.to_string().as_bytes());
                staging.ran(&name, 'F', started);
            }
        }
    }
}

struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    timeout: Duration,
    bound: u64,
}

impl Kubectl {
    /// kubectl's output, or its error output when it failed.
    fn run(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = Command::new(&self.program);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg(format!(
                "--request-timeout={}s",
                self.timeout.as_secs().max(1)
            ))
            .args(args);
        let ran = command::run(&mut command, self.timeout, self.bound)
            .map_err(|error| format!("kubectl: {error}"))?;
        if ran.exit_code == "0" {
            Ok(ran.stdout)
        } else {
            Err(format!(
                "kubectl {} failed ({}): {}",
                args.join(" "),
                ran.exit_code,
                String::from_utf8_lossy(&ran.stderr).trim()
            ))
        }
    }

    fn json(&self, args: &[&str]) -> Result<Value, String> {
        let bytes = self.run(args)?;
        serde_json::from_slice(&bytes)
            .map_err(|error| format!("kubectl {}: {error}", args.join(" ")))
    }
}

/// `clusterInfo`: the API server's version, as troubleshoot writes it
/// (`cluster-info/cluster_version.json`: the server's `info` and its version `string`).
fn cluster_info(kubectl: &Kubectl, staging: &Staging) -> Result<(), String> {
    let version = kubectl.json(&["version", "-o", "json"])?;
    let info = &version["serverVersion"];
    let Some(string) = info["gitVersion"].as_str() else {
        return Err("kubectl version gave no server version".into());
    };
    let output = json!({"info": info, "string": string});
    staging.write(
        "cluster-info/cluster_version.json",
        serde_json::to_string_pretty(&output)
            .unwrap_or_default()
            .as_bytes(),
    )
}

/// The most lines of a troubled pod's log kept by `clusterResources`.
const TROUBLED_POD_LOG_LINES: u32 = 500;

/// Whether a pod is in trouble: not running or done, or a container of it not ready or
/// restarted (crash-looping); its logs are what one looks at first.
fn troubled(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    if phase == "Succeeded" {
        return false;
    }
    let statuses = pod["status"]["containerStatuses"].as_array();
    phase != "Running"
        || statuses.is_none_or(|statuses| {
            statuses.iter().any(|status| {
                status["ready"] != true || status["restartCount"].as_u64().unwrap_or(0) > 0
            })
        })
}

/// The logs of each container of each troubled pod, as troubleshoot's `clusterResources`
/// keeps them: `cluster-resources/pods/logs/<namespace>/<pod>/<container>.log`, and the
/// previous run's in `<container>-previous.log` for one that restarted.
fn troubled_pod_logs(kubectl: &Kubectl, pods: &Value, staging: &Staging) -> Vec<String> {
    let mut errors = Vec::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        if !troubled(pod) {
            continue;
        }
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        let restarted = |container: &str| {
            pod["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|status| {
                    status["name"] == container && status["restartCount"].as_u64().unwrap_or(0) > 0
                })
        };
        let containers = ["initContainers", "containers"]
            .iter()
            .flat_map(|key| pod["spec"][key].as_array().into_iter().flatten())
            .filter_map(|container| container["name"].as_str());
        let folder = format!(
            "cluster-resources/pods/logs/{}/{}",
            paths::safe_name(namespace),
            paths::safe_name(name)
        );
        for container in containers {
            let mut runs = vec![("", false)];
            if restarted(container) {
                runs.push(("-previous", true));
            }
            for (suffix, previous) in runs {
                let in_namespace = format!("--namespace={namespace}");
                let in_container = format!("--container={container}");
                let tail = format!("--tail={TROUBLED_POD_LOG_LINES}");
                let mut args = vec!["logs", &in_namespace, &in_container, &tail];
                if previous {
                    args.push("--previous");
                }
                // Names from the cluster are never taken for options.
                args.extend(["--", name]);
                let path = format!("{folder}/{}{suffix}.log", paths::safe_name(container));
                // A container that never started has no log: kubectl's answer says so.
                let log = kubectl
                    .run(&args)
                    .unwrap_or_else(|error| error.into_bytes());
                if let Err(error) = staging.write(&path, &log) {
                    errors.push(error);
                }
            }
        }
    }
    errors
}

/// `clusterResources`: each kind listed, by namespace where it has them, as troubleshoot
/// writes them (`cluster-resources/pods/<namespace>.json`, `cluster-resources/nodes.json`),
/// and the logs of troubled pods.
fn cluster_resources(kubectl: &Kubectl, staging: &Staging) -> Result<(), String> {
    let mut errors = Vec::new();
    let mut unlisted = 0;
    for (plural, namespaced) in RESOURCES {
        let listed = if namespaced {
            kubectl.json(&["get", plural, "--all-namespaces", "-o", "json"])
        } else {
            kubectl.json(&["get", plural, "-o", "json"])
        };
        let list = match listed {
            Ok(list) => list,
            Err(error) => {
                let _ = staging.write(
                    &format!("cluster-resources/{plural}-errors.json"),
                    json!([error]).to_string().as_bytes(),
                );
                errors.push(error);
                unlisted += 1;
                continue;
            }
        };
        if plural == "pods" {
            errors.extend(troubled_pod_logs(kubectl, &list, staging));
        }
        // Indented as troubleshoot writes them: a `"name"` and its `"value"` on lines of
        // their own, where the multi-line redactors find them.
        let pretty = |value: &Value| serde_json::to_vec_pretty(value).unwrap_or_default();
        if !namespaced {
            let path = format!("cluster-resources/{plural}.json");
            if let Err(error) = staging.write(&path, &pretty(&list)) {
                errors.push(error);
            }
            continue;
        }
        let mut by_namespace: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
        for item in list["items"].as_array().into_iter().flatten() {
            let namespace = item["metadata"]["namespace"].as_str().unwrap_or("default");
            by_namespace
                .entry(namespace.to_string())
                .or_default()
                .push(item.clone());
        }
        for (namespace, items) in by_namespace {
            let mut part = list.clone();
            part["items"] = Value::Array(items);
            let path = format!(
                "cluster-resources/{plural}/{}.json",
                paths::safe_name(&namespace)
            );
            if let Err(error) = staging.write(&path, &pretty(&part)) {
                errors.push(error);
            }
        }
    }
    // Some kinds listed is a result; none is the collector failing.
    if unlisted == RESOURCES.len() {
        return Err(errors.join("; "));
    }
    Ok(())
}

fn text<'a>(fields: &'a Map<String, Value>, key: &str) -> &'a str {
    berth_preflight::support_bundle::fields::text(fields, key).unwrap_or("")
}

fn selector(fields: &Map<String, Value>) -> String {
    fields
        .get("selector")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// `logs`: each container of each pod the selector finds, in `<name>/<pod>/<container>.log`
/// (where troubleshoot's link to it is, and where analyzers read it).
fn logs(kubectl: &Kubectl, fields: &Map<String, Value>, staging: &Staging) -> Result<(), String> {
    let name = paths::safe_path(match text(fields, "name") {
        "" => "logs",
        name => name,
    });
    let namespace = text(fields, "namespace");
    let selector = format!("--selector={}", selector(fields));
    let in_namespace = format!("--namespace={namespace}");
    let mut args = vec!["get", "pods", "-o", "json"];
    // Every namespace when the spec names none, as troubleshoot lists them.
    args.push(if namespace.is_empty() {
        "--all-namespaces"
    } else {
        &in_namespace
    });
    if selector != "--selector=" {
        args.push(&selector);
    }
    let pods = match kubectl.json(&args) {
        Ok(pods) => pods,
        Err(error) => {
            let _ = staging.write(
                &format!("{name}-errors.json"),
                json!([error]).to_string().as_bytes(),
            );
            return Err(error);
        }
    };
    let wanted: Vec<&str> = fields
        .get("containerNames")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let limits = fields.get("limits");
    let max_lines = limits.and_then(|limits| limits["maxLines"].as_i64());
    let max_age = limits
        .and_then(|limits| limits["maxAge"].as_str())
        .filter(|age| !age.is_empty());
    let mut errors = Vec::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or("");
        let pod_namespace = pod["metadata"]["namespace"].as_str().unwrap_or(namespace);
        let containers: Vec<&str> = if wanted.is_empty() {
            ["containers", "initContainers"]
                .iter()
                .flat_map(|key| pod["spec"][key].as_array().into_iter().flatten())
                .filter_map(|container| container["name"].as_str())
                .collect()
        } else {
            wanted.clone()
        };
        for container in containers {
            let tail = max_lines.map(|lines| format!("--tail={lines}"));
            let since = max_age.map(|age| format!("--since={age}"));
            let in_namespace = format!("--namespace={pod_namespace}");
            let in_container = format!("--container={container}");
            let mut args = vec!["logs", &in_namespace, &in_container];
            args.extend(tail.as_deref());
            args.extend(since.as_deref());
            // Names from the cluster are never taken for options.
            args.extend(["--", pod_name]);
            let target = format!(
                "{name}/{}/{}",
                paths::safe_name(pod_name),
                paths::safe_name(container)
            );
            match kubectl.run(&args) {
                Ok(log) => staging.write(&format!("{target}.log"), &log)?,
                Err(error) => {
                    let _ = staging.write(
                        &format!("{target}-errors.json"),
                        json!([error]).to_string().as_bytes(),
                    );
                    errors.push(error);
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// `configMap` and `secret`: whether the object and its key exist, and their values where
/// the spec asks for them (redacted as everything is), in `configmaps/<ns>/<name>[/<key>].json`
/// or `secrets/…`.
fn object_data(
    kubectl: &Kubectl,
    fields: &Map<String, Value>,
    staging: &Staging,
    kind: &str,
) -> Result<(), String> {
    let (folder, exists_key) = match kind {
        "configmap" => ("configmaps", "configMapExists"),
        _ => ("secrets", "secretExists"),
    };
    let namespace = text(fields, "namespace");
    let name = text(fields, "name");
    let key = text(fields, "key");
    let include_value = fields
        .get("includeValue")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let include_all = fields
        .get("includeAllData")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let in_namespace = format!("--namespace={namespace}");
    let mut args = vec!["get", kind, "-o", "json"];
    if !namespace.is_empty() {
        args.push(&in_namespace);
    }
    let selector = format!("--selector={}", selector(fields));
    let objects: Vec<Value> = if !name.is_empty() {
        // The name from the spec is never taken for an option.
        args.extend(["--", name]);
        match kubectl.json(&args) {
            Ok(object) => vec![object],
            Err(error) if error.contains("NotFound") || error.contains("not found") => {
                let output = json!({"namespace": namespace, "name": name, "key": key, exists_key: false, "keyExists": false});
                return staging.write(
                    &file_name(folder, namespace, name, key),
                    output.to_string().as_bytes(),
                );
            }
            Err(error) => return Err(error),
        }
    } else if selector != "--selector=" {
        args.push(&selector);
        if namespace.is_empty() {
            args.push("--all-namespaces");
        }
        kubectl.json(&args)?["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    } else {
        return Err("either name or selector must be specified".into());
    };
    for object in objects {
        let object_name = object["metadata"]["name"].as_str().unwrap_or(name);
        // Each object in its own namespace: two of one name never share a file.
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(namespace);
        let data: Map<String, Value> = object["data"].as_object().cloned().unwrap_or_default();
        let decode = |value: &Value| -> String {
            let text = value.as_str().unwrap_or_default();
            if kind == "secret" {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .unwrap_or_default()
            } else {
                text.to_string()
            }
        };
        let mut output = json!({
            "namespace": namespace,
            "name": object_name,
            "key": key,
            exists_key: true,
            "keyExists": !key.is_empty() && data.contains_key(key),
        });
        if include_value && let Some(value) = data.get(key) {
            output["value"] = Value::String(decode(value));
        }
        if include_all {
            output["data"] = data
                .iter()
                .map(|(key, value)| (key.clone(), Value::String(decode(value))))
                .collect::<Map<_, _>>()
                .into();
        }
        staging.write(
            &file_name(folder, namespace, object_name, key),
            serde_json::to_string_pretty(&output)
                .unwrap_or_default()
                .as_bytes(),
        )?;
    }
    Ok(())
}

fn file_name(folder: &str, namespace: &str, name: &str, key: &str) -> String {
    let mut path = format!(
        "{folder}/{}/{}",
        paths::safe_name(namespace),
        paths::safe_name(name)
    );
    if !key.is_empty() {
        path.push('/');
        path.push_str(&paths::safe_name(key));
    }
    format!("{path}.json")
}
