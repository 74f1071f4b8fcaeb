//! A Kubernetes API server on loopback for the real `kubectl`: it answers discovery, `get`
//! (one object, or a list selected by namespace and equality label selectors) from the
//! objects it holds, which a test swaps at will, and `logs` of a pod's container from the
//! pod's annotation `test.berth/log-<container>`. No cluster runs on these machines, so objects
//! come from files; only what `kubectl get` asks is served, and every request is recorded.
//! It speaks plain HTTP and asks for no credentials (kubectl sends a token over TLS alone):
//! the kubeconfig that names it is how kubectl finds it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// A kind the server knows: its API group and version, and its plural resource name.
struct Resource {
    kind: &'static str,
    group_version: &'static str,
    plural: &'static str,
    namespaced: bool,
}

const RESOURCES: [Resource; 9] = [
    Resource {
        kind: "Pod",
        group_version: "v1",
        plural: "pods",
        namespaced: true,
    },
    Resource {
        kind: "ConfigMap",
        group_version: "v1",
        plural: "configmaps",
        namespaced: true,
    },
    Resource {
        kind: "Secret",
        group_version: "v1",
        plural: "secrets",
        namespaced: true,
    },
    Resource {
        kind: "Node",
        group_version: "v1",
        plural: "nodes",
        namespaced: false,
    },
    Resource {
        kind: "Namespace",
        group_version: "v1",
        plural: "namespaces",
        namespaced: false,
    },
    Resource {
        kind: "Deployment",
        group_version: "apps/v1",
        plural: "deployments",
        namespaced: true,
    },
    Resource {
        kind: "DaemonSet",
        group_version: "apps/v1",
        plural: "daemonsets",
        namespaced: true,
    },
    Resource {
        kind: "StatefulSet",
        group_version: "apps/v1",
        plural: "statefulsets",
        namespaced: true,
    },
    Resource {
        kind: "CustomResourceDefinition",
        group_version: "apiextensions.k8s.io/v1",
        plural: "customresourcedefinitions",
        namespaced: false,
    },
];

/// The server; it stops with the test process.
pub struct KubernetesApi {
    pub url: String,
    objects: Arc<Mutex<Vec<Value>>>,
    /// Every request as `METHOD path?query`, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl KubernetesApi {
    pub fn start(objects: Vec<Value>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let api = KubernetesApi {
            url: format!("http://{}", listener.local_addr().unwrap()),
            objects: Arc::new(Mutex::new(objects)),
            requests: Arc::default(),
        };
        let (objects, requests) = (api.objects.clone(), api.requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (objects, requests) = (objects.clone(), requests.clone());
                std::thread::spawn(move || serve(stream, &objects, &requests));
            }
        });
        api
    }

    /// Replaces the objects the server holds.
    pub fn set_objects(&self, objects: Vec<Value>) {
        *self.objects.lock().unwrap() = objects;
    }

    /// A kubeconfig whose one context points at this server.
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.url)
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// A kubeconfig whose one context points at `server`.
pub fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n\
         users:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    \
         cluster: test\n    user: test\ncurrent-context: test\n"
    )
}

fn serve(stream: TcpStream, objects: &Mutex<Vec<Value>>, requests: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    // kubectl keeps its connection open between requests: answer each in turn.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                break;
            }
        }
        let mut words = line.split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        requests.lock().unwrap().push(format!("{method} {target}"));
        if method == "GET"
            && let Some(text) = pod_log(target, &objects.lock().unwrap())
        {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                text.len()
            );
            if writer.write_all(head.as_bytes()).is_err()
                || writer.write_all(text.as_bytes()).is_err()
            {
                return;
            }
            continue;
        }
        let (code, body) = if method != "GET" {
            status(405, "MethodNotAllowed", format!("{method} is not served"))
        } else if target.split('?').next() == Some("/version") {
            // Some kubectl wrappers pick a client version by the server's.
            let version = json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0"});
            (200, version)
        } else {
            answer(target, &objects.lock().unwrap())
        };
        let body = body.to_string();
        let head = format!(
            "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            if code == 200 { "OK" } else { "Error" },
            body.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(body.as_bytes()).is_err()
        {
            return;
        }
    }
}

/// `…/namespaces/<ns>/pods/<pod>/log?container=<c>`: the pod's annotation for the container.
fn pod_log(target: &str, objects: &[Value]) -> Option<String> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["api", "v1", "namespaces", namespace, "pods", name, "log"] = parts[..] else {
        return None;
    };
    let container = url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "container")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let pod = objects.iter().find(|object| {
        object["kind"] == "Pod"
            && object["metadata"]["namespace"] == namespace
            && object["metadata"]["name"] == name
    })?;
    Some(
        pod["metadata"]["annotations"][format!("test.berth/log-{container}")]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// A `Status` object, as the API server answers errors.
fn status(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn answer(target: &str, objects: &[Value]) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts[..] {
        ["api"] => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] => (200, group_list()),
        ["api", "v1"] => (200, resource_list("v1")),
        ["apis", group, version] => (200, resource_list(&format!("{group}/{version}"))),
        _ => {
            let (group_version, rest) = match parts[..] {
                ["api", "v1", ..] => ("v1".to_string(), &parts[2..]),
                ["apis", group, version, ..] => (format!("{group}/{version}"), &parts[3..]),
                _ => return status(404, "NotFound", format!("{path} is not served")),
            };
            let (namespace, rest) = match rest {
                ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
                    (Some(*namespace), rest)
                }
                rest => (None, rest),
            };
            let Some(resource) = RESOURCES.iter().find(|resource| {
                resource.group_version == group_version && Some(&resource.plural) == rest.first()
            }) else {
                return status(404, "NotFound", format!("{path} is not served"));
            };
            let held = objects.iter().filter(|object| {
                object["kind"] == resource.kind
                    && namespace
                        .is_none_or(|namespace| object["metadata"]["namespace"] == namespace)
            });
            match rest {
                [_, name] => match held
                    .into_iter()
                    .find(|object| object["metadata"]["name"] == *name)
                {
                    Some(object) => (200, object.clone()),
                    None => status(
                        404,
                        "NotFound",
                        format!("{} \"{name}\" not found", resource.plural),
                    ),
                },
                [_] => {
                    let selector = selector(query);
                    // A list's items carry neither kind nor apiVersion; kubectl adds them.
                    let items: Vec<Value> = held
                        .filter(|object| {
                            selector.iter().all(|(key, value)| {
                                object["metadata"]["labels"][key].as_str() == Some(value)
                            })
                        })
                        .map(|object| {
                            let mut item = object.clone();
                            if let Some(item) = item.as_object_mut() {
                                item.remove("kind");
                                item.remove("apiVersion");
                            }
                            item
                        })
                        .collect();
                    (
                        200,
                        json!({"kind": format!("{}List", resource.kind),
                               "apiVersion": resource.group_version,
                               "metadata": {"resourceVersion": "1"}, "items": items}),
                    )
                }
                _ => status(404, "NotFound", format!("{path} is not served")),
            }
        }
    }
}

/// The `labelSelector` of a query: equality terms only (`key=value`, `key==value`).
fn selector(query: &str) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name == "labelSelector")
        .flat_map(|(_, text)| {
            text.split(',')
                .filter_map(|term| {
                    let (key, value) = term.split_once('=')?;
                    Some((key.to_string(), value.trim_start_matches('=').to_string()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn group_list() -> Value {
    let mut groups: Vec<&str> = RESOURCES
        .iter()
        .map(|resource| resource.group_version)
        .filter(|group_version| group_version.contains('/'))
        .collect();
    groups.dedup();
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|group_version| {
            let (group, version) = group_version.split_once('/').unwrap();
            let version = json!({"groupVersion": group_version, "version": version});
            json!({"name": group, "versions": [version], "preferredVersion": version})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(group_version: &str) -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|resource| resource.group_version == group_version)
        .map(|resource| {
            json!({"name": resource.plural, "singularName": resource.kind.to_lowercase(),
                   "namespaced": resource.namespaced, "kind": resource.kind,
                   "verbs": ["get", "list"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}
