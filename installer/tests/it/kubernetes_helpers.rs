//! kURL's helpers that talk to the cluster (`scripts/common/`), each called as an add-on's hook
//! calls it, against the API server of a real one-node Kubernetes v1.20.2 cluster installed by
//! Berth (`testgrid::kubernetes_cluster`), on objects the test makes: Deployments, a
//! DaemonSet, a StatefulSet, Secrets and pods of the test's busybox image; EKCO's Deployment;
//! Rook's toolbox and Deployments with their version labels, its toolbox run from a stand-in
//! for Rook's image whose `ceph` prints the status the test gives it; Longhorn's volumes,
//! replicas, nodes and settings as custom resources. Rook's and Longhorn's own images cannot be
//! built here (no source of them is vendored), so the test plays their operators' part:
//! Ceph's status, and Longhorn dropping the replicas of a volume scaled down. Then the API
//! server stopped: the installer run again fails naming it, and completes once it is back.
//!
//! Needs `BERTH_KUBERNETES_ARTEFACTS`, as `kubernetes.rs`.

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use support::images::{Entry, busybox_layer, layer};
use support::kubernetes_cluster::{BUSYBOX, Cluster, wait_or_explain};
use support::{failed, printed, succeeded};

/// Rook's operator image as the test's Rook Deployments name it.
const ROOK_IMAGE: &str = "docker.io/rook/ceph:v1.0.4-berth-test";

/// A stand-in for Rook's image: `/tini` and the toolbox script Rook's toolbox runs, and a
/// `ceph` that prints the status the test wrote into the pod (`/tmp/ceph-status.json` for
/// `--format`, `/tmp/ceph-status.txt` as text), and records modules disabled, after which the
/// status the test left in `/tmp/ceph-status-fixed.json` holds.
const CEPH: &str = r#"#!/bin/sh
case "$1" in
status)
    if [ "$2" = --format ]; then file=/tmp/ceph-status.json; else file=/tmp/ceph-status.txt; fi
    [ -f "$file" ] || file=/tmp/ceph-status.json
    [ -f "$file" ] || { echo "error connecting to the cluster" >&2; exit 1; }
    cat "$file" ;;
mgr)
    [ "$2 $3" = "module disable" ] || exit 22
    echo "$4" >> /tmp/disabled-modules
    if [ -f /tmp/ceph-status-fixed.json ]; then
        cp /tmp/ceph-status-fixed.json /tmp/ceph-status.json
        rm -f /tmp/ceph-status.txt
    fi ;;
*) echo "ceph $1: not answered by this stand-in" >&2; exit 22 ;;
esac
"#;
const TINI: &str = "#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n";
const TOOLBOX: &str = "#!/bin/sh\nwhile :; do sleep 3600; done\n";

fn rook_image() -> Vec<support::images::Layer> {
    let links: Vec<String> = ["cat", "cp", "rm", "sleep"]
        .iter()
        .map(|applet| format!("bin/{applet}"))
        .collect();
    let mut entries = vec![
        Entry::File("bin/ceph", CEPH.as_bytes(), 0o755),
        Entry::File("tini", TINI.as_bytes(), 0o755),
        Entry::File("usr/local/bin/toolbox.sh", TOOLBOX.as_bytes(), 0o755),
        Entry::File("tmp/.keep", b"", 0o644),
    ];
    entries.extend(links.iter().map(|link| Entry::Symlink(link, "busybox")));
    vec![busybox_layer(), layer(&entries)]
}

/// The objects the helpers work on: the kinds (Longhorn's definitions among them), then
/// Longhorn's objects, once their definitions are established.
fn objects() -> (String, String) {
    let busybox = |command: &str| {
        format!(
            "containers: [{{name: main, image: {BUSYBOX}, imagePullPolicy: Never, command: [/bin/busybox, sh, -c, '{command}']}}]"
        )
    };
    let sleeper = busybox("exec /bin/busybox sleep 100000");
    // A workload of `kind`: `metadata` added to its name and namespace, `spec` lines before
    // its selector, its pods labelled app=NAME with `pod` as their spec.
    let workload =
        |kind: &str, namespace: &str, name: &str, metadata: &str, spec: &str, pod: &str| {
            format!(
                "apiVersion: apps/v1
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}{metadata}}}
spec:
{spec}  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{{pod}}}
"
            )
        };
    let rook_deployment = |name: &str| {
        workload(
            "Deployment",
            "rook-ceph",
            name,
            ", labels: {rook_cluster: rook-ceph, rook-version: v1.0.4, ceph-version: 14.2.21-0}",
            "  replicas: 0\n",
            &format!("containers: [{{name: main, image: {ROOK_IMAGE}, imagePullPolicy: Never}}]"),
        )
    };
    let longhorn_kind = |plural: &str, kind: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.longhorn.io}}
spec:
  group: longhorn.io
  scope: Namespaced
  names: {{plural: {plural}, kind: {kind}}}
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"
        )
    };
    let replica = |n: u32| {
        format!(
            "apiVersion: longhorn.io/v1beta1
kind: Replica
metadata: {{name: pvc-a-r-{n}, namespace: longhorn-system, labels: {{longhornvolume: pvc-a}}}}
spec: {{volumeName: pvc-a}}
"
        )
    };
    let documents = vec![
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: helpers}\n".to_string(),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kurl}\n".to_string(),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: rook-ceph}\n".to_string(),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: longhorn-system}\n".to_string(),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: app-login, namespace: helpers}\nstringData: {password: s3cret}\n".to_string(),
        workload("Deployment", "helpers", "web", "", "  replicas: 1\n", &sleeper),
        // Running, and never ready.
        format!(
            "apiVersion: v1
kind: Pod
metadata: {{name: never-ready, namespace: helpers}}
spec:
  containers:
    - name: main
      image: {BUSYBOX}
      imagePullPolicy: Never
      command: [/bin/busybox, sleep, '100000']
      readinessProbe: {{exec: {{command: [/bin/busybox, 'false']}}, periodSeconds: 2}}
"
        ),
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: helpers}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n".to_string(),
        "apiVersion: v1\nkind: Service\nmetadata: {name: nobody, namespace: helpers}\nspec: {selector: {app: nobody}, ports: [{port: 80}]}\n".to_string(),
        workload("DaemonSet", "helpers", "everywhere", "", "", &sleeper),
        workload(
            "StatefulSet",
            "helpers",
            "ordered",
            "",
            "  serviceName: ordered\n  replicas: 2\n",
            &sleeper,
        ),
        // What pvmigrate leaves: scaled to 0, its count kept.
        workload(
            "Deployment",
            "helpers",
            "uses-longhorn",
            ", annotations: {kurl.sh/pvcmigrate-scale: \"2\"}",
            "  replicas: 0\n",
            &sleeper,
        ),
        workload("Deployment", "kurl", "ekc-operator", "", "  replicas: 1\n", &sleeper),
        rook_deployment("rook-ceph-operator"),
        rook_deployment("rook-ceph-mgr-a"),
        rook_deployment("rook-ceph-osd-0"),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: rook-ceph-mon, namespace: rook-ceph}\nstringData: {admin-secret: not-a-real-key}\n".to_string(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rook-ceph-mon-endpoints, namespace: rook-ceph}\ndata: {data: a=10.0.0.1:6789}\n".to_string(),
        longhorn_kind("volumes", "Volume"),
        longhorn_kind("replicas", "Replica"),
        longhorn_kind("nodes", "Node"),
        longhorn_kind("settings", "Setting"),
    ];
    let custom = [
        "apiVersion: longhorn.io/v1beta1
kind: Volume
metadata: {name: pvc-a, namespace: longhorn-system}
spec: {numberOfReplicas: 3}
status:
  state: attached
  robustness: healthy
  conditions: [{type: scheduled, status: \"True\"}]
"
        .to_string(),
        replica(1),
        replica(2),
        replica(3),
        "apiVersion: longhorn.io/v1beta1
kind: Node
metadata: {name: node-1, namespace: longhorn-system}
status:
  conditions: [{type: Ready, status: \"True\"}, {type: Schedulable, status: \"True\"}]
  diskStatus:
    default-disk:
      storageAvailable: 10737418240
      storageScheduled: 2147483648
      conditions: [{type: Ready, status: \"True\"}, {type: Schedulable, status: \"True\"}]
"
        .to_string(),
        "apiVersion: longhorn.io/v1beta1
kind: Setting
metadata: {name: storage-over-provisioning-percentage, namespace: longhorn-system}
value: \"200\"
"
        .to_string(),
    ];
    (documents.join("---\n"), custom.join("---\n"))
}

/// Ceph's status as `ceph status --format json` gives it: `status` with `checks` (code, message).
fn ceph_status(status: &str, checks: &[(&str, &str)]) -> String {
    let checks: serde_json::Map<String, serde_json::Value> = checks
        .iter()
        .map(|(code, message)| {
            (
                code.to_string(),
                serde_json::json!({"severity": "HEALTH_WARN", "summary": {"message": message}}),
            )
        })
        .collect();
    serde_json::json!({
        "health": {"status": status, "checks": checks},
        "pgmap": {"recovering_bytes_per_sec": 0, "inactive_pgs_ratio": 0, "degraded_ratio": 0, "misplaced_ratio": 0},
        "progress_events": {},
    })
    .to_string()
}

/// The helpers' cases: each a script that calls one helper (or a few that go together) and
/// fails, saying why, when it answers wrong. Run in order: later ones build on what earlier
/// ones changed.
fn cases(address: &str) -> Vec<(&'static str, String)> {
    let write_status = |file: &str, text: &str| {
        format!(
            "kubectl -n rook-ceph exec -i deploy/rook-ceph-tools -- sh -c 'cat > /tmp/{file}' <<'STATUS'\n{text}\nSTATUS\n"
        )
    };
    let healthy_single_node = ceph_status(
        "HEALTH_WARN",
        &[(
            "POOL_NO_REDUNDANCY",
            "3 pool(s) have no replicas configured",
        )],
    );
    vec![
        ("kubectl_server_version", r#"[ "$(kubectl_server_version)" = v1.20.2 ] && [ "$(kubectl_client_version)" = v1.20.2 ] || { kubectl_server_version; kubectl_client_version; exit 1; }"#.into()),
        ("kubernetes_is_master", "kubernetes_is_master".into()),
        ("kubernetes_any_node_ready", "kubernetes_any_node_ready".into()),
        ("kubernetes_api_is_healthy", "kubernetes_api_is_healthy && spinner_kubernetes_api_healthy".into()),
        ("kubeadm_cluster_configuration", "kubeadm_cluster_configuration | grep -q 'kubernetesVersion: v1.20.2'".into()),
        ("kubernetes_get_control_plane_label", r#"[ "$(kubernetes_get_control_plane_label)" = node-role.kubernetes.io/master ]"#.into()),
        ("get_remotes_flags", format!(r#"flags="$(get_remotes_flags)"; [ "$flags" = " primary-host={address}" ] || {{ echo "$flags"; exit 1; }}"#)),
        ("kubernetes_resource_exists", "kubernetes_resource_exists kube-system configmap kubeadm-config && ! kubernetes_resource_exists kube-system configmap no-such-map".into()),
        ("kubernetes_secret_value", r#"[ "$(kubernetes_secret_value helpers app-login password)" = s3cret ]"#.into()),
        ("deployment_fully_updated", "spinner_until 120 deployment_fully_updated helpers web".into()),
        ("daemonset_fully_updated", "spinner_until 120 daemonset_fully_updated helpers everywhere".into()),
        ("statefulset_fully_updated", "spinner_until 180 statefulset_fully_updated helpers ordered".into()),
        ("kubernetes_service_healthy", "spinner_until 60 kubernetes_service_healthy helpers web && ! kubernetes_service_healthy helpers nobody".into()),
        ("kubernetes_scale", r#"kubernetes_scale helpers deployment web 2 && spinner_until 120 deployment_fully_updated helpers web && [ "$(pod_count_by_selector helpers app=web)" = 2 ] && kubernetes_scale helpers deployment no-such-deployment 2"#.into()),
        ("kubernetes_scale_down", "kubernetes_scale_down helpers deployment web && spinner_until 120 pods_gone_by_selector helpers app=web".into()),
        ("pod_count_by_selector", r#"[ "$(pod_count_by_selector helpers app=ordered)" = 2 ] && [ "$(pod_count_by_selector helpers app=nobody)" = 0 ] && [ "$(pod_count_by_selector helpers '!!')" = -1 ]"#.into()),
        ("kubernetes_pod_succeeded", format!(
            "kubectl -n helpers run once --image={BUSYBOX} --image-pull-policy=Never --restart=Never --command -- /bin/busybox echo done >/dev/null \
             && spinner_until 120 kubernetes_pod_started once helpers && spinner_until 120 kubernetes_pod_completed once helpers \
             && kubernetes_pod_succeeded once helpers"
        )),
        ("spinnerPodRunning", "spinnerPodRunning helpers ordered- & pid=$!; \
             for _ in $(seq 120); do kill -0 $pid 2>/dev/null || break; sleep 1; done; \
             if kill -0 $pid 2>/dev/null; then kill $pid; echo 'still spinning after 2 minutes'; exit 1; fi; wait $pid".into()),
        ("check_for_running_pods",
            "spinner_until 120 check_for_running_pods kube-system || { echo \"$UNHEALTHY_PODS\"; exit 1; }; \
             spinner_until 60 kubernetes_pod_started never-ready helpers; \
             if check_for_running_pods helpers; then echo 'a pod never ready passed'; exit 1; fi; \
             [[ \"$UNHEALTHY_PODS\" == ' never-ready' ]] || { echo \"$UNHEALTHY_PODS\"; exit 1; }".into()),
        ("rook_disable_ekco_operator", r#"spinner_until 120 deployment_fully_updated kurl ekc-operator && rook_disable_ekco_operator && ekco_pods_gone && [ "$(kubectl -n kurl get deployment ekc-operator -o jsonpath='{.spec.replicas}')" = 0 ]"#.into()),
        ("rook_enable_ekco_operator", r#"rook_enable_ekco_operator && [ "$(kubectl -n kurl get deployment ekc-operator -o jsonpath='{.spec.replicas}')" = 1 ]"#.into()),
        ("add_rook_pvc_migration_status", r#"add_rook_pvc_migration_status && add_rook_store_object_migration_status && [ "$(kubectl -n kurl get configmap kurl-migration-from-rook -o jsonpath='{.data.DID_MIGRATE_ROOK_PVCS}{.data.DID_MIGRATE_ROOK_OBJECT_STORE}')" = 11 ]"#.into()),
        ("current_ceph_version", r#"[ "$(current_ceph_version)" = 14.2.21 ]"#.into()),
        // No toolbox yet: the program makes it from the operator's image; Ceph does not answer.
        ("kurl rook wait-for-health (no toolbox)", format!(
            "if said=\"$(\"$DIR\"/bin/kurl rook wait-for-health 20 2>&1)\"; then echo \"$said\"; exit 1; fi; \
             echo \"$said\" | grep -q 'error connecting to the cluster' || {{ echo \"$said\"; exit 1; }}; \
             [ \"$(kubectl -n rook-ceph get deployment rook-ceph-tools -o jsonpath='{{.spec.template.spec.containers[0].image}}')\" = {ROOK_IMAGE} ]"
        )),
        ("kurl rook wait-for-health (unhealthy)", format!(
            "{}if said=\"$(\"$DIR\"/bin/kurl rook wait-for-health 8 2>&1)\"; then echo \"$said\"; exit 1; fi; \
             echo \"$said\" | grep -qF 'timed out waiting rook to become healthy, currently \"health is HEALTH_WARN because \\\"1 osds down\\\"\"' || {{ echo \"$said\"; exit 1; }}",
            write_status("ceph-status.json", &ceph_status("HEALTH_WARN", &[("OSD_DOWN", "1 osds down"), ("POOL_NO_REDUNDANCY", "no replicas")]))
        )),
        ("rook_is_healthy_to_upgrade", format!(
            "{}rook_is_healthy_to_upgrade",
            write_status("ceph-status.json", &healthy_single_node)
        )),
        ("rook_is_healthy_to_upgrade (two Rook versions)",
            "kubectl -n rook-ceph label --overwrite deployment rook-ceph-osd-0 rook-version=v1.4.9 >/dev/null; \
             if said=\"$(rook_is_healthy_to_upgrade 2>&1)\"; then echo \"$said\"; exit 1; fi; \
             echo \"$said\" | grep -q 'Multiple Rook versions detected' || { echo \"$said\"; exit 1; }; \
             kubectl -n rook-ceph label --overwrite deployment rook-ceph-osd-0 rook-version=v1.0.4 ceph-version=0.0.0-0 >/dev/null; \
             said=\"$(rook_is_healthy_to_upgrade 2>&1)\" || { echo \"$said\"; exit 1; }; \
             echo \"$said\" | grep -q 'one of them is 0.0.0-0 which will be ignored'".into()),
        ("rook_is_healthy_to_migrate_from", format!(
            "{}{}{}said=\"$(rook_is_healthy_to_migrate_from 2>&1)\" || {{ echo \"$said\"; exit 1; }}; \
             echo \"$said\" | grep -q 'Disabling Ceph manager modules' || {{ echo \"$said\"; exit 1; }}; \
             [ \"$(kubectl -n rook-ceph exec deploy/rook-ceph-tools -- cat /tmp/disabled-modules | sort | tr '\\n' ' ')\" = 'dashboard prometheus ' ]",
            write_status("ceph-status.json", &ceph_status("HEALTH_ERR", &[("MGR_MODULE_ERROR", "2 mgr modules have failed")])),
            write_status("ceph-status.txt", "  cluster:\n    health: HEALTH_ERR\n            Module 'dashboard' has failed: error('No socket could be created',)\n            Module 'prometheus' has failed: error('No socket could be created',)"),
            write_status("ceph-status-fixed.json", &healthy_single_node),
        )),
        // One node: the volume is scaled to one replica, its count kept; the program waits
        // until Longhorn (here the test) drops the other replicas.
        ("longhorn_prepare_for_migration",
            "longhorn_prepare_for_migration > /tmp/berth-prepare.log 2>&1 & pid=$!; \
             for _ in $(seq 60); do \
                 [ \"$(kubectl -n longhorn-system get volumes.longhorn.io pvc-a -o jsonpath='{.spec.numberOfReplicas}/{.metadata.annotations.kurl\\.sh/pvcmigrate-scale}')\" = 1/3 ] && break; sleep 1; done; \
             sleep 3; kill -0 $pid || { cat /tmp/berth-prepare.log; echo 'it did not wait for the replicas to go'; exit 1; }; \
             kubectl -n longhorn-system delete replicas.longhorn.io pvc-a-r-2 pvc-a-r-3 >/dev/null; \
             wait $pid || { cat /tmp/berth-prepare.log; exit 1; }; \
             grep -q 'Environment is ready for the Longhorn migration' /tmp/berth-prepare.log || { cat /tmp/berth-prepare.log; exit 1; }".into()),
        // A node that is not schedulable: refused, and (no terminal: the default answer) the
        // replicas and the workloads scaled down are put back.
        ("longhorn_restore_migration_replicas",
            "kubectl -n longhorn-system patch nodes.longhorn.io node-1 --type merge \
                 -p '{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"Schedulable\",\"status\":\"False\"}]}}' >/dev/null; \
             if said=\"$(longhorn_prepare_for_migration 2>&1)\"; then echo \"$said\"; exit 1; fi; \
             echo \"$said\" | grep -q -- '- node-1' || { echo \"$said\"; exit 1; }; \
             [ \"$(kubectl -n longhorn-system get volumes.longhorn.io pvc-a -o jsonpath='{.spec.numberOfReplicas}/{.metadata.annotations.kurl\\.sh/pvcmigrate-scale}')\" = 3/ ] || { echo \"$said\"; kubectl -n longhorn-system get volumes.longhorn.io pvc-a -o yaml; exit 1; }; \
             [ \"$(kubectl -n helpers get deployment uses-longhorn -o jsonpath='{.spec.replicas}/{.metadata.annotations.kurl\\.sh/pvcmigrate-scale}')\" = 2/ ]".into()),
    ]
}

#[test]
fn kurls_cluster_helpers_answer_against_the_real_api_server() {
    let cluster = Cluster::start(
        1,
        Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
    );
    let install_command = format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id);
    succeeded(&cluster.shell(0, &install_command));
    cluster.import_busybox(0);
    cluster.import_image(0, ROOK_IMAGE, rook_image());
    // One node runs the test's pods: no taint of the control plane may keep them off it.
    let untainted = cluster.kubectl(
        "taint nodes --all node-role.kubernetes.io/master- 2>/dev/null; \
         kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o jsonpath='{.items[*].spec.taints}'",
    );
    assert!(
        !String::from_utf8_lossy(&untainted.stdout).contains("node-role.kubernetes.io"),
        "{}",
        printed(&untainted)
    );

    let folder = cluster.work.path().join("objects");
    fs_err::create_dir_all(&folder).unwrap();
    let (kinds, custom) = objects();
    fs_err::write(folder.join("kinds.yaml"), kinds).unwrap();
    fs_err::write(folder.join("custom.yaml"), custom).unwrap();
    let applied = cluster.kubectl(&format!(
        "apply -f {kinds} && kubectl --kubeconfig /etc/kubernetes/admin.conf wait --for condition=established --timeout=60s crd --all \
         && kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f {custom}",
        kinds = folder.join("kinds.yaml").display(),
        custom = folder.join("custom.yaml").display(),
    ));
    succeeded(&applied);

    // `$DIR/bin/kurl`, as the installer links it for hooks.
    let dir = cluster.work.path().join("kurl");
    fs_err::create_dir_all(dir.join("bin")).unwrap();
    fs_err::os::unix::fs::symlink(env!("CARGO_BIN_EXE_berth"), dir.join("bin/kurl")).unwrap();
    let library = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common");
    let address = cluster.machines[0].host.address().to_string();
    wait_or_explain(
        "a Ready node",
        Duration::from_secs(300),
        || {
            helpers(&cluster, &library, &dir, "kubernetes_any_node_ready")
                .status
                .success()
        },
        || cluster.account(),
    );

    let mut wrong = Vec::new();
    for (helper, script) in cases(&address) {
        let output = helpers(&cluster, &library, &dir, &script);
        if !output.status.success() {
            wrong.push(format!("== {helper}\n{}", printed(&output)));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of the helpers answered wrong:\n{}\n{}",
        wrong.len(),
        wrong.join("\n"),
        cluster.account()
    );

    // The API server stopped (its static pod's manifest moved away): the installer run again
    // fails, naming the API server and what to check, once the control plane's timeout is
    // over (kURL's two minutes unless kubernetes-control-plane-timeout= says otherwise: 30 s
    // here); once the API server is back, the installer completes.
    let api_healthy = || {
        helpers(&cluster, &library, &dir, "kubernetes_api_is_healthy")
            .status
            .success()
    };
    let stopped = cluster.shell(
        0,
        "mv /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/kube-apiserver.yaml.away",
    );
    succeeded(&stopped);
    wait_or_explain(
        "the API server to stop",
        Duration::from_secs(120),
        || !api_healthy(),
        || cluster.account(),
    );
    let said = failed(&cluster.shell(
        0,
        &format!("{install_command} -s kubernetes-control-plane-timeout=30s"),
    ));
    assert!(
        said.contains("did not report healthy after 30s of tries: check that the API server runs"),
        "{said}"
    );
    let restored = cluster.shell(
        0,
        "mv /etc/kubernetes/kube-apiserver.yaml.away /etc/kubernetes/manifests/kube-apiserver.yaml",
    );
    succeeded(&restored);
    wait_or_explain(
        "the API server to answer again",
        Duration::from_secs(240),
        api_healthy,
        || cluster.account(),
    );
    succeeded(&cluster.shell(0, &install_command));
    assert!(
        helpers(
            &cluster,
            &library,
            &dir,
            "kubernetes_resource_exists helpers deployment web"
        )
        .status
        .success(),
        "the cluster's objects outlived the API server's stop"
    );
}

/// `script` in bash on the node, after the helper library, as a hook runs: the admin's
/// kubeconfig, `$DIR` with kURL's program in `bin/`, no terminal.
fn helpers(cluster: &Cluster, library: &Path, dir: &Path, script: &str) -> Output {
    cluster.shell(
        0,
        &format!(
            "set -e; export KUBECONFIG=/etc/kubernetes/admin.conf DIR={dir}; \
             for file in {library}/*.sh; do . \"$file\"; done; {script}",
            dir = dir.display(),
            library = library.display(),
        ),
    )
}
