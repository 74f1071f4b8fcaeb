//! Kubernetes components judged on real objects, read by the real `kubectl` with the node's
//! kubeconfig from an API server on loopback. No cluster runs here, so the objects come from
//! published files that scripts/test.sh downloads into `.test-packages/kubernetes`:
//! - a k3s cluster's Deployments, DaemonSet and StatefulSet as `kubectl get -o yaml` printed
//!   them (the test data of the kdash crate, 0.6.2);
//! - Kubernetes' own round-trip test data (`k8s.io/api` and `k8s.io/apiextensions-apiserver`
//!   `testdata/HEAD`, as Debian packages them), every field of each kind filled in;
//! - Gateway API's HTTPRoute CustomResourceDefinition as the project publishes it (the kopium
//!   crate's tests), its status empty as no server has accepted it yet.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::*;

const INPUTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.test-packages/kubernetes");
const CRD_TESTDATA: &str = "debian/usr/share/gocode/src/k8s.io/apiextensions-apiserver/pkg/apis/testdata/HEAD/apiextensions.k8s.io.v1.CustomResourceDefinition.json";

fn input(path: &str) -> PathBuf {
    let file = Path::new(INPUTS).join(path);
    assert!(
        file.is_file(),
        "{} is missing: scripts/test.sh downloads the Kubernetes objects these tests read",
        file.display()
    );
    file
}

/// The objects of a file: a `List`'s items (given their kind back, as kubectl prints them)
/// or the one object.
fn objects(path: &str) -> Vec<Value> {
    let file = input(path);
    let text = fs_err::read_to_string(&file).unwrap();
    let read: Value = if path.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_norway::from_str(&text).unwrap()
    };
    match read["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![read],
    }
}

fn api_testdata(kind: &str) -> Value {
    objects(&format!(
        "debian/usr/share/gocode/src/k8s.io/api/testdata/HEAD/apps.v1.{kind}.json"
    ))
    .remove(0)
}

/// The k3s cluster's objects as captured.
fn captured_cluster() -> Vec<Value> {
    ["deployments", "daemonsets", "stfs"]
        .iter()
        .flat_map(|file| objects(&format!("kdash-0.6.2/test_data/{file}.yaml")))
        .collect()
}

/// A node whose kubeconfig (kubeadm's admin.conf) points at `api`.
fn node_for(api: &KubernetesApi) -> Node {
    let node = Node::new();
    let kubeconfig = node.root.path().join("etc/kubernetes/admin.conf");
    fs_err::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    fs_err::write(&kubeconfig, api.kubeconfig()).unwrap();
    // kubectl keeps its discovery cache under $HOME: the node's own.
    let home = node.root.path().join("root");
    node.env("HOME", home)
}

fn addon_with_components(dist: &mut TestDist, name: &str, health: &str) -> PathBuf {
    let folder = dist.addon(name, "1.0.0", &format!("function {name}() {{ :; }}\n"));
    fs_err::write(folder.join("health.yaml"), health).unwrap();
    dist.package(&folder);
    dist.write_versions();
    dist.spec(&format!("{name}.yaml"), &[(name, "version: 1.0.0")])
}

/// The add-on's health condition of `kind` (Available, Degraded).
fn health_condition(node: &Node, addon: &str, kind: &str) -> Value {
    let status = node.status();
    status[addon]["health"]["conditions"]
        .as_array()
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|condition| condition["type"] == kind)
        })
        .unwrap_or_else(|| panic!("no {kind} for {addon}: {status:#?}"))
        .clone()
}

/// Each component's refs as (component, kind, name, healthy, reason, message).
fn refs(node: &Node, addon: &str) -> Vec<(String, String, String, String, String, String)> {
    let status = node.status();
    let components = status[addon]["health"]["components"]
        .as_array()
        .unwrap_or_else(|| panic!("no components for {addon}: {status:#?}"))
        .clone();
    components
        .iter()
        .flat_map(|component| {
            component["refs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|found| {
                    let condition = &found["conditions"][0];
                    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
                    (
                        text(&component["name"]),
                        text(&found["kind"]),
                        text(&found["name"]),
                        text(&condition["status"]),
                        text(&condition["reason"]),
                        text(&condition["message"]),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

// Each probe may take a minute: the test judges what the objects say, and a loaded machine
// must not turn a judgement into a timeout.
const CLUSTER_COMPONENTS: &str = "components:
  - name: kube-dns
    timeout: 1m
    kubernetes: {kind: Deployment, matchLabels: {k8s-app: kube-dns}}
  - name: metrics-server
    timeout: 1m
    kubernetes: {kind: Deployment, namespace: kube-system, matchLabels: {k8s-app: metrics-server}}
  - name: traefik
    timeout: 1m
    kubernetes: {kind: Deployment, namespace: kube-system, matchLabels: {app: traefik, release: traefik}}
  - name: local-path
    timeout: 1m
    kubernetes: {kind: Deployment, namespace: kube-system, name: local-path-provisioner}
  - name: load-balancer
    timeout: 1m
    kubernetes: {kind: DaemonSet, matchLabels: {svccontroller.k3s.cattle.io/nodeselector: 'false'}}
  - name: web
    timeout: 1m
    kubernetes: {kind: StatefulSet, name: web}
";

/// The condition of `kind` in a captured object's status.
fn condition<'a>(object: &'a Value, kind: &str) -> &'a Value {
    object["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == kind)
        .unwrap()
}

/// Turns the object's condition of `kind` False, with the controller's reason and message.
fn set_condition(object: &mut Value, kind: &str, reason: &str, message: &str) {
    let condition = object["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|condition| condition["type"] == kind)
        .unwrap();
    condition["status"] = json!("False");
    condition["reason"] = json!(reason);
    condition["message"] = json!(message);
}

fn named<'a>(objects: &'a mut [Value], name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|object| object["metadata"]["name"] == name)
        .unwrap()
}

#[test]
fn a_captured_cluster_is_available_then_degraded_by_each_kind_of_status_then_available_again() {
    let cluster = captured_cluster();
    let api = KubernetesApi::start(cluster.clone());
    let node = node_for(&api);
    let mut dist = TestDist::new();
    let spec = addon_with_components(&mut dist, "cluster", CLUSTER_COMPONENTS);

    // The install waits for the objects, as kubectl reads them, to be available.
    succeeded(&node.install(&spec, &dist.url(), &["--health-timeout", "30"]));
    succeeded(&node.berth(&["health", "cluster"]));
    assert_eq!(
        health_condition(&node, "cluster", "Available")["status"],
        "True"
    );
    let found = refs(&node, "cluster");
    let coredns = cluster
        .iter()
        .find(|object| object["metadata"]["name"] == "coredns")
        .unwrap();
    let available = condition(coredns, "Available");
    assert!(
        found.contains(&(
            "kube-dns".into(),
            "Deployment".into(),
            "coredns".into(),
            "True".into(),
            available["reason"].as_str().unwrap().into(),
            available["message"].as_str().unwrap().into(),
        )),
        "{found:#?}"
    );
    let names: Vec<(&str, &str)> = found
        .iter()
        .map(|found| (found.0.as_str(), found.2.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("kube-dns", "coredns"),
            ("metrics-server", "metrics-server"),
            ("traefik", "traefik"),
            ("local-path", "local-path-provisioner"),
            ("load-balancer", "svclb-traefik"),
            ("web", "web"),
        ]
    );
    let daemon_set = &cluster[4]["status"];
    let load_balancer = found
        .iter()
        .find(|found| found.0 == "load-balancer")
        .unwrap();
    assert_eq!(
        load_balancer.5,
        format!(
            "{} of {} pods available, {} updated",
            daemon_set["numberAvailable"],
            daemon_set["desiredNumberScheduled"],
            daemon_set["updatedNumberScheduled"]
        )
    );
    // kubectl found the server through the node's kubeconfig, and asked across all namespaces
    // for labels alone, in the kubeconfig's namespace for a name alone.
    let requests = api.requests();
    for asked in [
        "GET /apis/apps/v1/deployments?labelSelector=k8s-app%3Dkube-dns",
        "GET /apis/apps/v1/namespaces/kube-system/deployments?labelSelector=app%3Dtraefik%2Crelease%3Dtraefik",
        "GET /apis/apps/v1/namespaces/kube-system/deployments/local-path-provisioner",
        "GET /apis/apps/v1/namespaces/default/statefulsets/web",
    ] {
        assert!(
            requests.iter().any(|request| request.starts_with(asked)),
            "{asked} not in {requests:#?}"
        );
    }

    // Each object's status as its controller writes it when pods go away, one kind at a time:
    // the condition reasons and messages are the controllers' own.
    let mut degraded = cluster.clone();
    let deployment = named(&mut degraded, "metrics-server");
    deployment["status"]["availableReplicas"] = json!(0);
    deployment["status"]["unavailableReplicas"] = json!(1);
    set_condition(
        deployment,
        "Available",
        "MinimumReplicasUnavailable",
        "Deployment does not have minimum availability.",
    );
    set_condition(
        named(&mut degraded, "traefik"),
        "Progressing",
        "ProgressDeadlineExceeded",
        "ReplicaSet \"traefik-5dd496474\" has timed out progressing.",
    );
    // A new spec the controller has not seen yet.
    named(&mut degraded, "local-path-provisioner")["metadata"]["generation"] = json!(2);
    let daemon_set = &mut named(&mut degraded, "svclb-traefik")["status"];
    daemon_set["numberAvailable"] = json!(0);
    daemon_set["numberUnavailable"] = json!(1);
    named(&mut degraded, "web")["status"]["availableReplicas"] = json!(1);
    named(&mut degraded, "web")["status"]["readyReplicas"] = json!(1);
    api.set_objects(degraded);

    assert_eq!(node.berth(&["health", "cluster"]).status.code(), Some(1));
    let found = refs(&node, "cluster");
    let judged: Vec<(&str, &str, &str)> = found
        .iter()
        .map(|found| (found.0.as_str(), found.3.as_str(), found.4.as_str()))
        .collect();
    assert_eq!(
        judged,
        [
            ("kube-dns", "True", "MinimumReplicasAvailable"),
            ("metrics-server", "False", "MinimumReplicasUnavailable"),
            ("traefik", "False", "ProgressDeadlineExceeded"),
            ("local-path", "False", "NotObserved"),
            ("load-balancer", "False", "NotAvailable"),
            ("web", "False", "NotAvailable"),
        ],
        "{found:#?}"
    );
    assert!(
        found[5].5.starts_with("1 of 2 replicas available"),
        "{found:#?}"
    );
    let degraded = health_condition(&node, "cluster", "Degraded");
    assert_eq!(degraded["status"], "True", "{degraded:#}");
    for component in [
        "metrics-server",
        "traefik",
        "local-path",
        "load-balancer",
        "web",
    ] {
        assert!(
            degraded["message"].as_str().unwrap().contains(component),
            "{degraded:#}"
        );
    }
    assert!(
        !degraded["message"].as_str().unwrap().contains("kube-dns"),
        "{degraded:#}"
    );

    api.set_objects(cluster);
    succeeded(&node.berth(&["health", "cluster"]));
    let history = node.status()["cluster"]["health"]["history"].clone();
    let available: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|transition| transition["type"] == "Available")
        .map(|transition| transition["status"].as_str().unwrap())
        .collect();
    assert!(
        available.ends_with(&["True", "False", "True"]),
        "{history:#}"
    );
}

#[test]
fn kubernetes_own_test_data_is_judged_by_every_field_it_fills_in() {
    let mut objects: Vec<Value> = ["Deployment", "DaemonSet", "StatefulSet"]
        .into_iter()
        .map(api_testdata)
        .collect();
    objects.extend(self::objects(CRD_TESTDATA));
    objects.extend(self::objects("kopium-0.24.1/tests/httproute-crd.yaml"));
    let api = KubernetesApi::start(objects.clone());
    let node = node_for(&api);
    let mut dist = TestDist::new();
    // The round-trip objects' names and namespace (`nameValue`) are not names Kubernetes
    // accepts, so they are selected by their labels, across the cluster.
    let spec = addon_with_components(
        &mut dist,
        "fixtures",
        "components:
  - name: deployment
    kubernetes: {kind: Deployment, matchLabels: {labelsKey: labelsValue}}
  - name: daemon-set
    kubernetes: {kind: DaemonSet, matchLabels: {labelsKey: labelsValue}}
  - name: stateful-set
    kubernetes: {kind: StatefulSet, matchLabels: {labelsKey: labelsValue}}
  - name: definition
    kubernetes: {kind: CustomResourceDefinition, matchLabels: {labelsKey: labelsValue}}
  - name: routes
    kubernetes: {kind: CustomResourceDefinition, name: httproutes.gateway.networking.k8s.io}
",
    );
    let error = failed(&node.install(&spec, &dist.url(), &["--health-timeout", "2"]));
    assert!(error.contains("not healthy"), "{error}");
    assert_eq!(node.berth(&["health", "fixtures"]).status.code(), Some(1));

    let found = refs(&node, "fixtures");
    // Each workload's generation is ahead of what its status observed.
    for (component, object) in ["deployment", "daemon-set", "stateful-set"]
        .iter()
        .zip(&objects)
    {
        let found = found.iter().find(|found| found.0 == *component).unwrap();
        assert_eq!(found.2, object["metadata"]["name"].as_str().unwrap());
        assert_eq!(
            (found.3.as_str(), found.4.as_str()),
            ("False", "NotObserved")
        );
        assert_eq!(
            found.5,
            format!(
                "its controller has not yet observed generation {} (its status is of generation {})",
                object["metadata"]["generation"], object["status"]["observedGeneration"]
            )
        );
    }
    // Neither definition has a NamesAccepted condition.
    for component in ["definition", "routes"] {
        let found = found.iter().find(|found| found.0 == component).unwrap();
        assert_eq!(found.1, "CustomResourceDefinition");
        assert_eq!(
            (found.3.as_str(), found.4.as_str()),
            ("False", "NotNamesAccepted")
        );
    }

    // Once the controllers catch up (observedGeneration is the object's generation), the
    // round-trip statuses' counts decide: each of them has enough.
    let caught_up: Vec<Value> = objects
        .into_iter()
        .map(|mut object| {
            if let Some(generation) = object["metadata"].get("generation").cloned()
                && object["status"].get("observedGeneration").is_some()
                && object["kind"] != "CustomResourceDefinition"
            {
                object["status"]["observedGeneration"] = generation;
            }
            object
        })
        .collect();
    api.set_objects(caught_up.clone());
    node.berth(&["health", "fixtures"]);
    let found = refs(&node, "fixtures");
    let deployment = found.iter().find(|found| found.0 == "deployment").unwrap();
    // Its one condition is of a type no controller writes: no Available condition.
    assert_eq!(
        (deployment.3.as_str(), deployment.4.as_str()),
        ("False", "NoCondition")
    );
    let daemon_set = found.iter().find(|found| found.0 == "daemon-set").unwrap();
    let status = &caught_up[1]["status"];
    assert_eq!(
        daemon_set.5,
        format!(
            "{} of {} pods available, {} updated",
            status["numberAvailable"],
            status["desiredNumberScheduled"],
            status["updatedNumberScheduled"]
        )
    );
    assert_eq!(daemon_set.3, "True");
    let stateful_set = found
        .iter()
        .find(|found| found.0 == "stateful-set")
        .unwrap();
    assert_eq!(
        stateful_set.5,
        format!(
            "{} of {} replicas available, {} updated",
            caught_up[2]["status"]["availableReplicas"],
            caught_up[2]["spec"]["replicas"],
            caught_up[2]["status"]["updatedReplicas"]
        )
    );
    assert_eq!(stateful_set.3, "True");
}

#[test]
fn a_component_whose_objects_are_gone_or_unreachable_says_so() {
    let api = KubernetesApi::start(Vec::new());
    let node = node_for(&api);
    let mut dist = TestDist::new();
    let spec = addon_with_components(
        &mut dist,
        "missing",
        "components:
  - name: by-labels
    kubernetes: {kind: Deployment, namespace: kube-system, matchLabels: {k8s-app: kube-dns}}
  - name: by-name
    kubernetes: {kind: StatefulSet, namespace: default, name: web}
",
    );
    failed(&node.install(&spec, &dist.url(), &["--health-timeout", "1"]));
    let found = refs(&node, "missing");
    assert_eq!(found[0].4, "NotFound", "{found:#?}");
    assert_eq!(found[1].4, "NotFound", "{found:#?}");

    // A kubeconfig that names a server nobody answers on: kubectl fails, its words kept.
    let kubeconfig = node.root.path().join("etc/kubernetes/admin.conf");
    let nobody = format!("http://127.0.0.1:{}", free_port());
    fs_err::write(&kubeconfig, berth_testkit::kubeconfig(&nobody)).unwrap();
    assert_eq!(node.berth(&["health", "missing"]).status.code(), Some(1));
    let found = refs(&node, "missing");
    assert_eq!(found[0].4, "KubectlFailed", "{found:#?}");
    assert!(found[0].5.contains("refused"), "{found:#?}");
}

/// A pod of `deployment`'s template, made `age` ago, whose container waits for `reason`.
fn waiting_pod(deployment: &Value, name: &str, age: std::time::Duration, reason: &str) -> Value {
    let made = humantime::format_rfc3339_seconds(std::time::SystemTime::now() - age);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": deployment["metadata"]["namespace"],
            "labels": deployment["spec"]["selector"]["matchLabels"],
            "creationTimestamp": made.to_string(),
        },
        "status": {
            "phase": "Pending",
            "containerStatuses": [{
                "name": "traefik",
                "ready": false,
                "restartCount": 0,
                "image": "docker.io/rancher/traefik:missing",
                "imageID": "",
                "state": {"waiting": {
                    "reason": reason,
                    "message": "Back-off pulling image \"docker.io/rancher/traefik:missing\"",
                }},
            }],
        },
    })
}

#[test]
fn a_rollout_whose_new_pod_cannot_start_is_unhealthy_past_its_deadline_though_it_progresses() {
    let mut cluster = captured_cluster();
    // A rollout under way that Kubernetes says progresses (as it does again whenever an old
    // pod turns ready once more): one pod of the new template, not available.
    let traefik = named(&mut cluster, "traefik");
    traefik["spec"]["progressDeadlineSeconds"] = json!(30);
    let replicas = traefik["spec"]["replicas"].as_i64().unwrap();
    traefik["status"]["replicas"] = json!(replicas + 1);
    traefik["status"]["updatedReplicas"] = json!(1);
    traefik["status"]["unavailableReplicas"] = json!(1);
    let traefik = traefik.clone();
    assert_eq!(condition(&traefik, "Progressing")["status"], "True");
    let minute = std::time::Duration::from_secs(60);
    let judged = |pods: Vec<Value>| {
        let mut objects = cluster.clone();
        objects.extend(pods);
        let api = KubernetesApi::start(objects);
        let node = node_for(&api);
        let mut dist = TestDist::new();
        let spec = addon_with_components(&mut dist, "cluster", CLUSTER_COMPONENTS);
        node.install(&spec, &dist.url(), &["--health-timeout", "1"]);
        let found = refs(&node, "cluster");
        let traefik = found.iter().find(|found| found.0 == "traefik").unwrap();
        (traefik.3.clone(), traefik.4.clone(), traefik.5.clone(), api)
    };

    // Its new pod has failed to pull its image for a minute, past the 30 s deadline.
    let (healthy, reason, message, api) = judged(vec![waiting_pod(
        &traefik,
        "traefik-new",
        minute,
        "ImagePullBackOff",
    )]);
    assert_eq!(
        (healthy.as_str(), reason.as_str()),
        ("False", "ImagePullBackOff")
    );
    assert!(
        message.starts_with("pod traefik-new has waited ")
            && message.contains(
                "past its progress deadline (30s): ImagePullBackOff: Back-off pulling image"
            ),
        "{message}"
    );
    // The pods were asked for by the Deployment's own selector, in its namespace.
    let selector = traefik["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(key, value)| format!("{key}%3D{}", value.as_str().unwrap()))
        .collect::<Vec<_>>()
        .join("%2C");
    let asked = format!("GET /api/v1/namespaces/kube-system/pods?labelSelector={selector}");
    let requests = api.requests();
    assert!(
        requests.iter().any(|request| request.starts_with(&asked)),
        "{asked} not in {requests:#?}"
    );
    // The kubelet's next try: the same, by the failure's own reason.
    let (healthy, reason, ..) = judged(vec![waiting_pod(
        &traefik,
        "traefik-new",
        minute,
        "ErrImagePull",
    )]);
    assert_eq!(
        (healthy.as_str(), reason.as_str()),
        ("False", "ErrImagePull")
    );

    // Within the deadline, or waiting as a pod being made does, it is still on its way.
    for (age, reason) in [
        (std::time::Duration::from_secs(5), "ImagePullBackOff"),
        (minute, "ContainerCreating"),
    ] {
        let (healthy, reason, ..) = judged(vec![waiting_pod(&traefik, "traefik-new", age, reason)]);
        assert_eq!(
            (healthy.as_str(), reason.as_str()),
            (
                "True",
                condition(&traefik, "Available")["reason"].as_str().unwrap()
            )
        );
    }
}
