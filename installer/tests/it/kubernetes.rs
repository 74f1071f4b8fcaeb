//! Real Kubernetes v1.20.2, built here from Debian's source package by `scripts/kubernetes.sh`,
//! packaged by `berth-build` from kURL's own Manifest (`testgrid::kubernetes_dist`), and
//! installed by Berth on machines of their own (`testgrid::kubernetes_cluster`): `kubeadm
//! init` on the first, the printed join command on the others, each node's kubelet started
//! by kubeadm through `systemctl`.
//!
//! The test needs `BERTH_KUBERNETES_ARTEFACTS` (what `scripts/kubernetes.sh` prints;
//! `scripts/test.sh` sets it) and fails naming it when it is missing.

use crate::support;

use std::time::{Duration, Instant};

use support::kubelet_host::cgroup_root;
use support::kubernetes_cluster::{BUSYBOX, Cluster, SPEC, nodes, wait_or_explain};
use support::{conforms, printed, succeeded, wait_until};

/// Builds the dist and boots `count` machines for it.
fn cluster(count: usize) -> Cluster {
    Cluster::start(
        count,
        std::path::Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
    )
}

/// One primary and two workers that joined with the printed command: three Ready nodes, a
/// DaemonSet's pod Running on each, a pod answering a pod on another node by its address, and
/// the cluster's DNS answering for the Services. On the way, what is refused before anything
/// changes: a Kubernetes version the dist lacks, a host with a kubelet of another version, a
/// control-plane timeout that is no duration, the join command run on the first node, a join
/// command with a token the cluster does not know or another cluster's CA hash; the refused
/// node then joins with the right command.
#[test]
fn three_nodes_install_join_and_run_pods_that_reach_each_other() {
    let started = Instant::now();
    let cluster = cluster(3);
    let install_command = format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id);

    // A version the dist lacks, named with those it has.
    let spec = cluster.work.path().join("other-version.yaml");
    fs_err::write(&spec, SPEC.replace("version: 1.20.2", "version: 1.21.0")).unwrap();
    let refused = cluster.shell(
        1,
        &format!(
            "{} install --spec {} --dist {}/dist",
            env!("CARGO_BIN_EXE_berth"),
            spec.display(),
            cluster.served
        ),
    );
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("kubernetes has no version `1.21.0`") && said.contains("1.20.2"),
        "{said}"
    );
    assert!(untouched(&cluster, 1), "{said}");

    // A kubelet of another version on the host.
    let placed = cluster.shell(
        1,
        "printf '#!/bin/sh\\necho Kubernetes v1.19.0\\n' > /usr/local/bin/kubelet && chmod +x /usr/local/bin/kubelet",
    );
    assert!(placed.status.success(), "{}", printed(&placed));
    let refused = cluster.shell(1, &install_command);
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("this host already has kubelet 1.19.0 (/usr/local/bin/kubelet)"),
        "{said}"
    );
    assert!(untouched(&cluster, 1), "{said}");
    cluster.shell(1, "rm /usr/local/bin/kubelet");

    // A control-plane timeout that is no duration.
    let refused = cluster.shell(
        1,
        &format!("{install_command} -s kubernetes-control-plane-timeout=soon"),
    );
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("kubernetes-control-plane-timeout=soon is not a duration such as 20m"),
        "{said}"
    );
    assert!(untouched(&cluster, 1), "{said}");

    // The first node, and its join command run on itself.
    let install = cluster.shell(0, &install_command);
    assert!(install.status.success(), "{}", printed(&install));
    eprintln!("first node installed after {:?}", started.elapsed());
    let join_command = cluster.shell(0, "berth join-command");
    assert!(join_command.status.success(), "{}", printed(&join_command));
    let join_command = String::from_utf8_lossy(&join_command.stdout)
        .trim()
        .replacen("sudo ", "", 1);
    assert!(
        join_command.contains("kubeadm-token=") && join_command.contains("kubeadm-token-ca-hash="),
        "{join_command}"
    );
    let refused = cluster.shell(0, &join_command);
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(said.contains("the cluster's first node"), "{said}");
    assert!(
        kubernetes_health(&cluster, 0).0,
        "{}",
        kubernetes_health(&cluster, 0).1
    );

    // A token the cluster does not know (as one past its 24 hours), and another cluster's CA.
    let token = support::join_param(&join_command, "kubeadm-token");
    let unknown = join_command.replace(&token, &format!("zzzzzz{}", &token[6..]));
    let refused = cluster.shell(1, &unknown);
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("does not know the join command's token zzzzzz"),
        "{said}"
    );
    assert!(untouched(&cluster, 1), "{said}");
    let hash = support::join_param(&join_command, "kubeadm-token-ca-hash");
    let other_ca = join_command.replace(&hash, &format!("sha256:{}", "0".repeat(64)));
    let refused = cluster.shell(1, &other_ca);
    let said = printed(&refused);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("is not the one the join command names"),
        "{said}"
    );
    assert!(untouched(&cluster, 1), "{said}");

    // The right command joins the node the refusals left as it was.
    for index in 1..3 {
        let joined = cluster.shell(index, &join_command);
        assert!(joined.status.success(), "{}", printed(&joined));
        eprintln!("node-{} joined after {:?}", index + 1, started.elapsed());
    }
    wait_or_explain(
        "three Ready nodes",
        Duration::from_secs(300),
        || {
            let nodes = nodes(&cluster);
            nodes.len() == 3 && nodes.iter().all(|(_, ready)| *ready)
        },
        || cluster.account(),
    );
    let names: Vec<String> = nodes(&cluster).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["node-1", "node-2", "node-3"]);

    for index in 0..3 {
        cluster.import_busybox(index);
    }
    let daemonset = format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: answer
spec:
  selector:
    matchLabels: {{app: answer}}
  template:
    metadata:
      labels: {{app: answer}}
    spec:
      containers:
      - name: answer
        image: {BUSYBOX}
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && echo \"$NODE_NAME\" > /www/index.html && exec httpd -f -p 8080 -h /www']
        env:
        - name: NODE_NAME
          valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
"
    );
    let applied = cluster.shell(
        0,
        &format!(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - <<'EOF'\n{daemonset}EOF"
        ),
    );
    assert!(applied.status.success(), "{}", printed(&applied));
    // Each pod: its node, its address, whether it runs.
    let pods = || -> Vec<(String, String, String, String)> {
        let output = cluster.kubectl(
            "get pods -l app=answer -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP} {.status.phase}{\"\\n\"}{end}'",
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace().map(str::to_string);
                Some((words.next()?, words.next()?, words.next()?, words.next()?))
            })
            .collect()
    };
    wait_or_explain(
        "a Running answer pod on each node",
        Duration::from_secs(180),
        || {
            let pods = pods();
            pods.len() == 3 && pods.iter().all(|(_, _, _, phase)| phase == "Running")
        },
        || cluster.account(),
    );
    let pods = pods();
    let on = |node: &str| {
        pods.iter()
            .find(|(_, pod_node, _, _)| pod_node == node)
            .unwrap_or_else(|| panic!("no answer pod on {node}: {pods:?}"))
            .clone()
    };
    let (from, _, _, _) = on("node-1");
    for node in ["node-2", "node-3"] {
        let (_, _, address, _) = on(node);
        let answer = std::cell::RefCell::new(String::new());
        wait_or_explain(
            &format!("the pod on node-1 to reach the pod on {node} at {address}"),
            Duration::from_secs(60),
            || {
                let output = cluster.kubectl(&format!(
                    "exec {from} -- sh -c 'printf \"GET / HTTP/1.0\\r\\n\\r\\n\" | nc -w 5 {address} 8080'"
                ));
                // What it answered, or all it printed when it failed.
                *answer.borrow_mut() = if output.status.success() {
                    String::from_utf8_lossy(&output.stdout).into_owned()
                } else {
                    printed(&output)
                };
                output.status.success()
            },
            || {
                let mut account = format!("the last try: {}\n", answer.borrow());
                for index in 0..3 {
                    let output = cluster.shell(
                        index,
                        "ip route; tail -5 /var/log/berth-pod-network.log; \
                         for pid in $(pgrep -f 'bash /usr/local/bin/berth-pod-network$'); do \
                             ps -o pid,stat,etime,args --ppid $pid; done; \
                         kubectl --kubeconfig /etc/kubernetes/kubelet.conf --request-timeout=10s get nodes -o wide",
                    );
                    account.push_str(&format!("== node-{}\n{}", index + 1, printed(&output)));
                }
                account
            },
        );
        // The body follows the headers (busybox's wget crashes in a static image, so the
        // request goes through nc).
        let answer = answer.into_inner();
        let answer = answer.rsplit("\r\n\r\n").next().unwrap_or_default().trim();
        assert_eq!(answer, node, "the pod at {address} answered");
    }

    // The cluster's DNS (cluster-dns): a Service by its full name and by the short name the
    // pods' search path completes, the API server's Service, and a name that does not exist.
    let exposed = cluster.kubectl("create service clusterip answer --tcp=8080:8080");
    assert!(exposed.status.success(), "{}", printed(&exposed));
    let service_address = cluster.kubectl("get service answer -o jsonpath='{.spec.clusterIP}'");
    let service_address = String::from_utf8_lossy(&service_address.stdout).to_string();
    let (asker, _, _, _) = on("node-3");
    let lookup = |name: &str| cluster.kubectl(&format!("exec {asker} -- busybox nslookup {name}"));
    wait_or_explain(
        "cluster-dns to answer answer.default.svc.cluster.local",
        Duration::from_secs(120),
        || {
            let output = lookup("answer.default.svc.cluster.local");
            output.status.success()
                && String::from_utf8_lossy(&output.stdout).contains(&service_address)
        },
        || {
            format!(
                "{}\n{}",
                printed(&lookup("answer.default.svc.cluster.local")),
                printed(&cluster.kubectl(
                    "-n kube-system get deployment,pods,service -l k8s-app=kube-dns -o wide"
                ))
            )
        },
    );
    let api = lookup("kubernetes.default.svc.cluster.local");
    assert!(
        String::from_utf8_lossy(&api.stdout).contains("10.96.0.1"),
        "{}",
        printed(&api)
    );
    let missing = lookup("nothing-here.default.svc.cluster.local");
    assert!(!missing.status.success(), "{}", printed(&missing));
    let by_short_name = cluster.kubectl(&format!(
        "exec {asker} -- sh -c 'printf \"GET / HTTP/1.0\\r\\n\\r\\n\" | nc -w 5 answer 8080'"
    ));
    assert!(
        by_short_name.status.success()
            && ["node-1", "node-2", "node-3"]
                .iter()
                .any(|node| String::from_utf8_lossy(&by_short_name.stdout)
                    .trim_end()
                    .ends_with(node)),
        "{}",
        printed(&by_short_name)
    );

    // A Service whose one pod runs on node-2 answers node-1 itself (a node's own connection
    // to a Service is masqueraded by kube-proxy, so the pod's answer comes back).
    let (pod_on_2, _, _, _) = on("node-2");
    let labelled = cluster.kubectl(&format!("label pod {pod_on_2} reached=node-2"));
    assert!(labelled.status.success(), "{}", printed(&labelled));
    let service = "apiVersion: v1
kind: Service
metadata: {name: answer-on-2}
spec:
  selector: {reached: node-2}
  ports: [{port: 80, targetPort: 8080}]
";
    let applied = cluster.shell(
        0,
        &format!(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - <<'EOF'\n{service}EOF"
        ),
    );
    assert!(applied.status.success(), "{}", printed(&applied));
    let address = cluster.kubectl("get service answer-on-2 -o jsonpath='{.spec.clusterIP}'");
    let address = String::from_utf8_lossy(&address.stdout).to_string();
    let from_node_1 = || cluster.shell(0, &format!("curl -fsS --max-time 5 http://{address}/"));
    wait_or_explain(
        &format!("node-1 to reach the Service at {address}, its pod on node-2"),
        Duration::from_secs(120),
        || String::from_utf8_lossy(&from_node_1().stdout).trim() == "node-2",
        || {
            format!(
                "{}\n{}",
                printed(&from_node_1()),
                printed(&cluster.kubectl("-n kube-system logs -l k8s-app=kube-proxy --tail=5"))
            )
        },
    );

    // node-3 is removed from node-1 (kURL's ekco-purge-node); misuses are refused first,
    // changing nothing.
    let refused = |index: usize, node: &str, says: &str| {
        let output = cluster.shell(index, &format!("berth remove-node '{node}'"));
        assert!(
            !output.status.success() && printed(&output).contains(says),
            "berth remove-node {node} on node-{}: {}",
            index + 1,
            printed(&output)
        );
    };
    refused(1, "node-3", "runs on a control-plane node");
    refused(0, "node-9", "its nodes: node-1 node-2 node-3");
    refused(0, "node-1", "is this node");
    refused(0, "Node;3", "is not a node name");
    assert_eq!(nodes(&cluster).len(), 3, "{:?}", nodes(&cluster));
    let removed = cluster.shell(0, "berth remove-node node-3");
    let said = printed(&removed);
    assert!(removed.status.success(), "{said}");
    // Ready, it was drained first (kubectl's own words).
    assert!(said.contains("node/node-3 drained"), "{said}");
    let names: Vec<String> = nodes(&cluster).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["node-1", "node-2"]);
    refused(0, "node-3", "the cluster has no node node-3");
    eprintln!("done after {:?}", started.elapsed());
}

/// The processes named `name` that run under machine `index`'s kubelet (its cgroup root).
fn pids_of(cluster: &Cluster, index: usize, name: &str) -> Vec<String> {
    let root = cgroup_root(&cluster.machines[index]);
    let output = cluster.shell(
        index,
        &format!(
            "for pid in $(pgrep -x {name}); do grep -q '/{root}/' /proc/$pid/cgroup && echo $pid; done; true"
        ),
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `berth health kubernetes` on machine `index`: whether it says Available, and what it says.
fn kubernetes_health(cluster: &Cluster, index: usize) -> (bool, String) {
    let output = cluster.shell(index, "berth health kubernetes");
    (output.status.success(), printed(&output))
}

/// One node: `kubeadm init` failing midway, then by Berth's hooks once the cause is gone (with
/// `kubernetes-control-plane-timeout=`, whose liveness patches the static pods carry), the
/// control plane's pods Running, a Deployment Available; health that names a frozen scheduler
/// and a stopped kubelet; a re-run that repairs the node (starts the kubelet) without running
/// kubeadm init again, and one that stops, naming the kubelet, when it cannot start; a reset, after which the node installs again from the installer's
/// airgap bundle, the server out of reach, with kubeadm's own probes.
#[test]
fn one_node_is_probed_repaired_by_a_rerun_reset_and_installed_again() {
    let cluster = cluster(1);
    // As on a slow machine: the control plane may take ten minutes to start, and so to answer
    // its liveness probes again (kubeadm's patches of the static pods).
    let install_command = format!(
        "curl -fsSL {}/{} | bash -s kubernetes-control-plane-timeout=10m",
        cluster.served, cluster.id
    );
    let liveness_failures = |component: &str| {
        let output = cluster.shell(
            0,
            &format!(
                "awk '/livenessProbe:/ {{ probe = 1 }} probe && /failureThreshold:/ {{ print $2; exit }}' /etc/kubernetes/manifests/{component}.yaml"
            ),
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };

    // kubeadm init failing midway: a file where its control-plane phase writes the static
    // pods' manifests, after its certificate and kubeconfig phases wrote theirs. Recorded
    // Failed, the node left as `kubeadm reset` leaves it; once the cause is gone, the same
    // command completes.
    let blocked = cluster.shell(
        0,
        "mkdir -p /etc/kubernetes && touch /etc/kubernetes/manifests",
    );
    assert!(blocked.status.success(), "{}", printed(&blocked));
    let failed = cluster.shell(0, &install_command);
    let said = printed(&failed);
    assert!(!failed.status.success(), "{said}");
    assert!(
        said.contains("[certs] Generating \"ca\" certificate and key")
            && said.contains("kubeadm init failed (above); the node is as kubeadm reset leaves it"),
        "{said}"
    );
    let status = cluster.shell(0, "berth status --json");
    let records: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", printed(&status)));
    conforms("node-status.v1.json", &records);
    let kubernetes = records["addons"]
        .as_array()
        .and_then(|addons| addons.iter().find(|addon| addon["name"] == "kubernetes"))
        .unwrap_or_else(|| panic!("no kubernetes in {records:#}"));
    assert_eq!(
        kubernetes["conditions"][2],
        serde_json::json!({"type": "Progressing", "status": "False", "reason": "Failed",
            "message": kubernetes["conditions"][2]["message"], "lastTransitionTime": kubernetes["conditions"][2]["lastTransitionTime"]}),
        "{kubernetes:#}"
    );
    let left = cluster.shell(
        0,
        "! [ -e /etc/kubernetes/pki/ca.crt ] && ! [ -e /etc/kubernetes/admin.conf ] \
         && ! [ -e /var/lib/kubelet/config.yaml ]",
    );
    assert!(
        left.status.success(),
        "what kubeadm init wrote is still there: {said}"
    );
    let fixed = cluster.shell(0, "rm /etc/kubernetes/manifests");
    assert!(fixed.status.success(), "{}", printed(&fixed));

    let install = cluster.shell(0, &install_command);
    assert!(install.status.success(), "{}", printed(&install));
    assert!(
        printed(&install).contains("[init] Using Kubernetes version: v1.20.2"),
        "kubeadm init ran: {}",
        printed(&install)
    );
    for component in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        assert_eq!(liveness_failures(component), "60", "{component}");
    }
    let leases = cluster.shell(
        0,
        "grep -c -e '--leader-elect-renew-deadline=60s' /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/manifests/kube-scheduler.yaml",
    );
    assert!(
        String::from_utf8_lossy(&leases.stdout)
            .lines()
            .all(|line| line.ends_with(":1")),
        "the slow machine's leader leases: {}",
        printed(&leases)
    );
    let ready = || {
        let nodes = nodes(&cluster);
        nodes.len() == 1 && nodes[0].1
    };
    wait_or_explain("node-1 Ready", Duration::from_secs(180), ready, || {
        cluster.account()
    });
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "etcd",
    ] {
        let pod = format!("{component}-node-1");
        wait_or_explain(
            &format!("{pod} Running"),
            Duration::from_secs(120),
            || {
                let output = cluster.kubectl(&format!(
                    "-n kube-system get pod {pod} -o jsonpath='{{.status.phase}}'"
                ));
                String::from_utf8_lossy(&output.stdout) == "Running"
            },
            || cluster.account(),
        );
    }
    cluster.import_busybox(0);
    let deployment = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {BUSYBOX}
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && echo web > /www/index.html && exec httpd -f -p 8080 -h /www']
"
    );
    let applied = cluster.shell(
        0,
        &format!(
            "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - <<'EOF'\n{deployment}EOF\n\
             kubectl --kubeconfig /etc/kubernetes/admin.conf wait --for=condition=Available deployment/web --timeout=180s"
        ),
    );
    assert!(
        applied.status.success(),
        "{}\n{}",
        printed(&applied),
        cluster.account()
    );

    // Health probes the control plane: Available, then not while the scheduler is frozen
    // (it answers nothing, as a hung process), naming it, then Available again.
    wait_or_explain(
        "Kubernetes healthy",
        Duration::from_secs(60),
        || kubernetes_health(&cluster, 0).0,
        || kubernetes_health(&cluster, 0).1,
    );
    let scheduler = pids_of(&cluster, 0, "kube-scheduler");
    assert_eq!(scheduler.len(), 1, "one scheduler runs on node-1");
    cluster.shell(0, &format!("kill -STOP {}", scheduler[0]));
    let (healthy, said) = kubernetes_health(&cluster, 0);
    cluster.shell(0, &format!("kill -CONT {}", scheduler[0]));
    assert!(!healthy, "a frozen scheduler is not healthy: {said}");
    assert!(said.contains("scheduler"), "{said}");
    wait_or_explain(
        "Kubernetes healthy again",
        Duration::from_secs(60),
        || kubernetes_health(&cluster, 0).0,
        || kubernetes_health(&cluster, 0).1,
    );

    // A stopped kubelet: not healthy, naming it; the same command run again repairs the node
    // (Repair) by starting it, and leaves kubeadm alone.
    let stopped = cluster.shell(0, "systemctl stop kubelet");
    assert!(stopped.status.success(), "{}", printed(&stopped));
    let (healthy, said) = kubernetes_health(&cluster, 0);
    assert!(!healthy && said.contains("kubelet"), "{said}");
    let rerun = cluster.shell(0, &install_command);
    let said = printed(&rerun);
    assert!(rerun.status.success(), "{said}");
    assert!(
        said.contains(
            "kubernetes   1.20.2   Repair          applied as asked, but not healthy: kubelet"
        ),
        "the re-run repairs Kubernetes: {said}"
    );
    assert!(
        said.contains("repairing it, not running kubeadm init again"),
        "{said}"
    );
    assert!(
        !said.contains("[init]"),
        "kubeadm init did not run again: {said}"
    );
    wait_or_explain(
        "node-1 Ready again",
        Duration::from_secs(120),
        ready,
        || cluster.account(),
    );
    assert!(
        kubernetes_health(&cluster, 0).0,
        "{}",
        kubernetes_health(&cluster, 0).1
    );
    // A kubelet that cannot start (its configuration gone): the re-run stops, saying so,
    // rather than report a node that runs no pod as repaired; once it can start, the next
    // one repairs the node.
    let broken = cluster.shell(
        0,
        "systemctl stop kubelet && mv /var/lib/kubelet/config.yaml /root/kubelet-config.away",
    );
    succeeded(&broken);
    let said = support::failed(&cluster.shell(0, &install_command));
    assert!(
        said.contains("the kubelet is not running on this node and did not start within 60 s"),
        "{said}"
    );
    let mended = cluster.shell(
        0,
        "mv /root/kubelet-config.away /var/lib/kubelet/config.yaml",
    );
    succeeded(&mended);
    succeeded(&cluster.shell(0, &install_command));
    wait_or_explain(
        "node-1 Ready after the kubelet came back",
        Duration::from_secs(120),
        ready,
        || cluster.account(),
    );

    // Healthy again, the next run has nothing to do for Kubernetes.
    let rerun = cluster.shell(0, &install_command);
    let said = printed(&rerun);
    assert!(rerun.status.success(), "{said}");
    assert!(
        said.contains("kubernetes   1.20.2   AlreadyApplied"),
        "{said}"
    );
    assert!(!said.contains("[init]"), "{said}");

    // Reset: kubeadm's reset, nothing of the control plane left running.
    let reset = cluster.shell(0, "berth reset");
    assert!(reset.status.success(), "{}", printed(&reset));
    let kubelet = cluster.shell(0, "systemctl is-active kubelet");
    assert!(
        !kubelet.status.success(),
        "the kubelet stopped: {}",
        printed(&kubelet)
    );
    for component in ["kube-apiserver", "kube-scheduler", "etcd"] {
        wait_until(
            &format!("{component} to have stopped after the reset"),
            Duration::from_secs(60),
            || pids_of(&cluster, 0, component).is_empty(),
        );
    }
    let left = cluster.shell(
        0,
        "ls /etc/kubernetes/manifests 2>/dev/null; ls /etc/kubernetes/*.conf 2>/dev/null; \
         ls -d /opt/replicated/kubeadm-static-pod-patches 2>/dev/null; true",
    );
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "",
        "kubeadm reset left files"
    );
    // It installs again, this time from the installer's airgap bundle, with the server out
    // of reach (a blackhole route to it) once the bundle is there.
    let airgap = cluster.work.path().join("airgap");
    cluster.unpack_airgap_bundle(0, &airgap);
    let again = cluster.shell(
        0,
        &format!("cd {} && bash install.sh airgap", airgap.display()),
    );
    assert!(again.status.success(), "{}", printed(&again));
    assert!(
        printed(&again).contains("[init] Using Kubernetes version: v1.20.2"),
        "{}",
        printed(&again)
    );
    wait_or_explain(
        "node-1 Ready after installing again from the airgap bundle",
        Duration::from_secs(180),
        ready,
        || cluster.account(),
    );
    // Without the timeout, the static pods are kubeadm's own again.
    assert_eq!(liveness_failures("kube-apiserver"), "8");
}

/// Whether machine `index` is as before any install: no configuration of Berth's containerd
/// add-on, no kubelet package, nothing of kubeadm's.
fn untouched(cluster: &Cluster, index: usize) -> bool {
    cluster
        .shell(
            index,
            "! [ -e /etc/containerd/config.d ] && ! dpkg-query -W kubelet >/dev/null 2>&1 \
             && ! [ -e /etc/kubernetes ]",
        )
        .status
        .success()
}

#[test]
fn three_control_planes_share_a_stacked_etcd_and_one_leaves() {
    let cluster = Cluster::start_with(
        3,
        std::path::Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
        |addresses| {
            SPEC.replace(
                "    version: 1.20.2\n",
                &format!(
                    "    version: 1.20.2\n    loadBalancerAddress: {}:6443\n",
                    addresses[0]
                ),
            )
        },
    );
    let install = cluster.shell(
        0,
        &format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id),
    );
    assert!(install.status.success(), "{}", printed(&install));
    let join_command = cluster.shell(0, "berth join-command --control-plane");
    assert!(join_command.status.success(), "{}", printed(&join_command));
    let join_command = String::from_utf8_lossy(&join_command.stdout)
        .trim()
        .replacen("sudo ", "", 1);
    assert!(
        join_command.contains("cert-key=") && join_command.ends_with("control-plane"),
        "{join_command}"
    );
    // Bounded well below the hook timeout: a join kubeadm cannot finish retries for half an
    // hour.
    let join = |index: usize| {
        assert!(!join_command.contains('\''), "{join_command}");
        let joined = cluster.shell(index, &format!("timeout 900 bash -c '{join_command}'"));
        assert!(joined.status.success(), "{}", printed(&joined));
    };
    for index in 1..3 {
        join(index);
    }
    let control_planes = || {
        let output = cluster.kubectl(
            "get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.ends_with(" True"))
            .count()
    };
    wait_or_explain(
        "three Ready control-plane nodes",
        Duration::from_secs(300),
        || control_planes() == 3,
        || cluster.account(),
    );
    let members = || {
        let output = cluster.kubectl(
            "-n kube-system exec etcd-node-1 -- etcdctl --endpoints https://127.0.0.1:2379 \
             --cacert /etc/kubernetes/pki/etcd/ca.crt --cert /etc/kubernetes/pki/etcd/server.crt \
             --key /etc/kubernetes/pki/etcd/server.key member list",
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.contains(", started, "))
            .map(|line| line.split(", ").nth(2).unwrap_or_default().to_string())
            .collect::<Vec<String>>()
    };
    wait_or_explain(
        "three etcd members",
        Duration::from_secs(120),
        || members().len() == 3,
        || format!("{:?}\n{}", members(), cluster.account()),
    );

    // node-3 leaves: its etcd member and Node object go.
    let reset = cluster.shell(2, "berth reset");
    assert!(reset.status.success(), "{}", printed(&reset));
    wait_or_explain(
        "two etcd members",
        Duration::from_secs(120),
        || {
            let members = members();
            members.len() == 2 && !members.contains(&"node-3".to_string())
        },
        || format!("{:?}", members()),
    );
    assert!(
        !nodes(&cluster).iter().any(|(name, _)| name == "node-3"),
        "{:?}",
        nodes(&cluster)
    );

    // And joins again with the same command.
    join(2);
    wait_or_explain(
        "three Ready control-plane nodes again",
        Duration::from_secs(300),
        || control_planes() == 3,
        || cluster.account(),
    );
    wait_or_explain(
        "three etcd members again",
        Duration::from_secs(120),
        || members().len() == 3,
        || format!("{:?}\n{}", members(), cluster.account()),
    );

    // node-3 is removed from node-1, as a control plane that is gone would be: its etcd
    // member, its API endpoint in kubeadm's ClusterStatus and its Node object go.
    let stopped = cluster.shell(2, "systemctl stop kubelet");
    assert!(stopped.status.success(), "{}", printed(&stopped));
    wait_or_explain(
        "node-3 NotReady once its kubelet stopped",
        Duration::from_secs(120),
        || {
            nodes(&cluster)
                .iter()
                .any(|(name, ready)| name == "node-3" && !ready)
        },
        || cluster.account(),
    );
    let removed = cluster.shell(0, "berth remove-node node-3");
    assert!(removed.status.success(), "{}", printed(&removed));
    let members = members();
    assert!(
        members.len() == 2 && !members.contains(&"node-3".to_string()),
        "{members:?}"
    );
    assert!(
        !nodes(&cluster).iter().any(|(name, _)| name == "node-3"),
        "{:?}",
        nodes(&cluster)
    );
    let status = cluster
        .kubectl("-n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterStatus}'");
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("node-1:") && status.contains("node-2:") && !status.contains("node-3"),
        "{status}"
    );
}

/// kURL's registry add-on from kURL's own folder (the fixtures' `registry/3.1.1`, unchanged)
/// on a two-node cluster. Its image is Debian's Distribution registry (2.8.2) under kURL's
/// name, and `local-volume` stands in for the storage provisioner kURL installs before it
/// ([`support::kubernetes_dist::Extra::KurlRegistry`]). The Kubernetes hook's init calls
/// `registry_init` (the registry's Service) as kURL's does; the registry's install hook makes
/// its htpasswd, its certificate (signed by the cluster's CA for the Service's address), its
/// Secrets and Deployment on the real API server, and the Deployment becomes Available. Each
/// node's containerd trusts it: the primary's from init, the others' from the join command's
/// `docker-registry-ip`. An image pushed through it from the first node runs in a pod on the
/// second, which never had it. A support bundle on the first node then holds the cluster's half.
#[test]
fn kurls_registry_from_its_own_folder_carries_an_image_from_one_node_to_a_pod_on_another() {
    kurls_registry(false);
}

/// The same from the installer's airgap bundle: each node has it and the server is out of
/// its reach; the first runs `install.sh airgap`, the others the airgap join command.
#[test]
fn kurls_registry_from_an_airgap_bundle_carries_an_image_from_one_node_to_a_pod_on_another() {
    kurls_registry(true);
}

fn kurls_registry(airgap: bool) {
    let cluster = Cluster::start_with_extra(
        2,
        std::path::Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
        support::kubernetes_dist::Extra::KurlRegistry,
        |_| format!("{SPEC}  local-volume:\n    version: 1.0.0\n  registry:\n    version: 3.1.1\n"),
    );
    let bundle_dir = |index: usize| cluster.work.path().join(format!("airgap-{index}"));
    if airgap {
        // The bundle on each node, the server out of its reach.
        for index in 0..2 {
            cluster.unpack_airgap_bundle(index, &bundle_dir(index));
        }
    }
    let install = cluster.shell(
        0,
        &if airgap {
            format!("cd {} && bash install.sh airgap", bundle_dir(0).display())
        } else {
            format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id)
        },
    );
    let said = printed(&install);
    assert!(install.status.success(), "{said}\n{}", cluster.account());
    assert!(said.contains("Registry is healthy"), "{said}");
    assert_eq!(
        kubectl_text(
            &cluster,
            "-n kurl get deployment registry -o jsonpath={.status.availableReplicas}"
        ),
        "1",
        "{}",
        cluster.account()
    );
    let address = kubectl_text(
        &cluster,
        "-n kurl get service registry -o jsonpath={.spec.clusterIP}",
    );
    assert!(address.parse::<std::net::Ipv4Addr>().is_ok(), "{address}");
    for secret in [
        "registry-htpasswd",
        "registry-pki",
        "registry-session-secret",
    ] {
        assert!(
            !kubectl_text(&cluster, &format!("-n kurl get secret {secret} -o name")).is_empty(),
            "no {secret}"
        );
    }
    // The certificate names the Service's address, signed by the cluster's CA.
    let certificate = cluster.shell(
        0,
        "kubectl --kubeconfig /etc/kubernetes/admin.conf -n kurl get secret registry-pki \
         -o jsonpath='{.data.registry\\.crt}' | base64 -d > /tmp/berth-registry.crt \
         && openssl verify -CAfile /etc/kubernetes/pki/ca.crt /tmp/berth-registry.crt \
         && openssl x509 -noout -text -in /tmp/berth-registry.crt; rm -f /tmp/berth-registry.crt",
    );
    let text = printed(&certificate);
    assert!(certificate.status.success(), "{text}");
    assert!(text.contains(&format!("IP Address:{address}")), "{text}");

    // Airgap, `berth` stays on the node once the bundle's folder is gone.
    let join_command = cluster.shell(
        0,
        &if airgap {
            format!(
                "rm -rf {} && berth join-command --airgap",
                bundle_dir(0).display()
            )
        } else {
            "berth join-command".to_string()
        },
    );
    let asked = printed(&join_command);
    let join_command = String::from_utf8_lossy(&join_command.stdout)
        .trim()
        .replacen("sudo ", "", 1);
    assert!(
        join_command.contains(&format!("docker-registry-ip={address}")),
        "{asked}"
    );
    for index in 1..2 {
        let command = if airgap {
            format!("cd {} && {join_command}", bundle_dir(index).display())
        } else {
            join_command.clone()
        };
        let joined = cluster.shell(index, &command);
        assert!(joined.status.success(), "{}", printed(&joined));
    }
    for machine in &cluster.machines {
        let trust = machine
            .read(&format!("/etc/containerd/certs.d/{address}/hosts.toml"))
            .unwrap_or_else(|| panic!("{}'s containerd does not trust the registry", machine.name));
        assert!(trust.contains("/etc/kubernetes/pki/ca.crt"), "{trust}");
    }
    wait_or_explain(
        "two Ready nodes",
        Duration::from_secs(300),
        || nodes(&cluster).iter().filter(|(_, ready)| *ready).count() == 2,
        || cluster.account(),
    );

    // Pushed on the first node with the credentials the hook made for pods...
    let credentials = cluster
        .kubectl("-n default get secret registry-creds -o jsonpath='{.data.\\.dockerconfigjson}'");
    let credentials = String::from_utf8_lossy(&credentials.stdout)
        .trim()
        .to_string();
    let decoded = cluster.shell(0, &format!("echo {credentials} | base64 -d"));
    let config: serde_json::Value = serde_json::from_slice(&decoded.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", printed(&decoded)));
    let login = &config["auths"][address.as_str()];
    let (user, password) = (
        login["username"].as_str().unwrap_or_default(),
        login["password"].as_str().unwrap_or_default(),
    );
    assert_eq!(user, "kurl", "{config:#}");
    let trust = cluster.work.path().join("registry-ca");
    let pushed = cluster.shell(
        0,
        &format!(
            "mkdir -p {trust} && cp /etc/kubernetes/pki/ca.crt {trust}/ca.crt && \
             skopeo --insecure-policy copy --quiet --dest-cert-dir {trust} --dest-creds {user}:{password} \
             oci-archive:{archive} docker://{address}/test/busybox:1",
            trust = trust.display(),
            archive = cluster.work.path().join("busybox.tar").display(),
        ),
    );
    assert!(pushed.status.success(), "{}", printed(&pushed));
    // ...pulled by node-2's kubelet for a pod there.
    let run = cluster.kubectl(&format!(
        "run pulled --image={address}/test/busybox:1 --restart=Never \
         --overrides='{{\"apiVersion\":\"v1\",\"spec\":{{\"nodeName\":\"node-2\",\"imagePullSecrets\":[{{\"name\":\"registry-creds\"}}]}}}}' \
         --command -- /bin/busybox echo carried-by-the-registry"
    ));
    assert!(run.status.success(), "{}", printed(&run));
    wait_or_explain(
        "the pod on node-2 to run the pushed image",
        Duration::from_secs(180),
        || kubectl_text(&cluster, "get pod pulled -o jsonpath={.status.phase}") == "Succeeded",
        || kubectl_text(&cluster, "describe pod pulled"),
    );
    assert_eq!(
        kubectl_text(&cluster, "logs pulled"),
        "carried-by-the-registry"
    );

    // The support bundle's in-cluster half against this API server: kURL's registry spec (its
    // tmpl-troubleshoot.yaml) as it says, and Berth's own clusterInfo and clusterResources,
    // with the logs of a crash-looping pod where troubleshoot keeps them.
    cluster.import_busybox(1);
    let crashing = cluster.kubectl(&format!(
        "run crashing --image={BUSYBOX} --image-pull-policy=Never --restart=Always \
         --overrides='{{\"apiVersion\":\"v1\",\"spec\":{{\"nodeName\":\"node-2\"}}}}' \
         --command -- /bin/busybox sh -c 'echo crashing-on-purpose; exit 1'"
    ));
    succeeded(&crashing);
    wait_or_explain(
        "the crashing pod to have restarted",
        Duration::from_secs(180),
        || {
            kubectl_text(
                &cluster,
                "get pod crashing -o jsonpath={.status.containerStatuses[0].restartCount}",
            )
            .parse::<u32>()
            .is_ok_and(|restarts| restarts >= 1)
        },
        || kubectl_text(&cluster, "describe pod crashing"),
    );
    let bundle = cluster.work.path().join("bundle");
    let collected = cluster.shell(
        0,
        &format!(
            "berth support-bundle --out {bundle}.tar.gz && mkdir {bundle} && tar -xzf {bundle}.tar.gz -C {bundle}",
            bundle = bundle.display()
        ),
    );
    succeeded(&collected);
    let root = fs_err::read_dir(&bundle)
        .unwrap()
        .next()
        .expect("the bundle's folder")
        .unwrap()
        .path();
    let read = |path: &str| {
        fs_err::read_to_string(root.join(path)).unwrap_or_else(|error| {
            let listed = cluster.shell(
                0,
                &format!("cd {} && find . -type f | sort | head -300", root.display()),
            );
            panic!("{error}\n{}", printed(&listed))
        })
    };
    let version: serde_json::Value =
        serde_json::from_str(&read("cluster-info/cluster_version.json")).unwrap();
    assert_eq!(version["string"], "v1.20.2", "{version:#}");
    assert!(read("cluster-resources/pods/kurl.json").contains("\"app\": \"registry\""));
    assert!(read("cluster-resources/nodes.json").contains("node-2"));
    assert!(
        read("cluster-resources/pods/logs/default/crashing/crashing.log")
            .contains("crashing-on-purpose")
    );
    assert!(
        read("cluster-resources/pods/logs/default/crashing/crashing-previous.log")
            .contains("crashing-on-purpose")
    );
    let config: serde_json::Value =
        serde_json::from_str(&read("configmaps/kurl/registry-config.json")).unwrap();
    assert_eq!(config["configMapExists"], true, "{config:#}");
    assert!(
        config["data"]["config.yml"]
            .as_str()
            .is_some_and(|text| text.contains("http:")),
        "{config:#}"
    );
    let certificate: serde_json::Value =
        serde_json::from_str(&read("secrets/kurl/registry-pki/registry.crt.json")).unwrap();
    assert!(
        certificate["value"]
            .as_str()
            .is_some_and(|value| value.starts_with("-----BEGIN CERTIFICATE")),
        "{certificate:#}"
    );
    let registry_logs = cluster.shell(
        0,
        &format!(
            "ls {}/kurl/registry/logs/registry-*/registry.log",
            root.display()
        ),
    );
    assert!(
        registry_logs.status.success(),
        "{}",
        printed(&registry_logs)
    );
    assert!(!root.join("host-collectors/pod-logs").exists());
    // The registry's password, in a Secret the pods pull with, is nowhere in the bundle.
    let leaked = cluster.shell(0, &format!("grep -rlF -- '{password}' {}", root.display()));
    assert!(
        !leaked.status.success(),
        "the password is in {}",
        printed(&leaked)
    );
}

/// `berth ARGUMENTS` on machine `index`, left running (a fleet's coordinator or agent), its
/// error output in the test's folder.
fn spawn_berth(cluster: &Cluster, index: usize, arguments: &[&str], log: &str) -> support::Server {
    let mut command = cluster.command(index, env!("CARGO_BIN_EXE_berth"));
    command.args(arguments);
    support::Server::spawn(&mut command, &cluster.work.path().join(log))
}

/// What `kubectl get` prints for `arguments` (empty when it fails).
fn kubectl_text(cluster: &Cluster, arguments: &str) -> String {
    String::from_utf8_lossy(&cluster.kubectl(arguments).stdout)
        .trim()
        .to_string()
}

/// `berth health NAME -o json` on machine `index`: the add-on's conditions, by type.
fn health_of(cluster: &Cluster, index: usize, name: &str) -> serde_json::Value {
    let output = cluster.shell(index, &format!("berth health {name} -o json"));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", printed(&output)))
}

fn condition<'a>(health: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    health["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} in {health:#}"))
}

/// Berth's own cluster add-on (`addons/cluster-demo`) on a two-node cluster, as a vendor's
/// add-on would run: its install hook on the primary renders its kustomize base with the
/// spec's replicas and applies it to the real API server; the worker's join runs its `_join`
/// (the image its pods need is there); its health is its Deployment's, judged on the primary
/// and not waited for on the worker. Live: an image no node has makes it Degraded naming
/// the Deployment, and running the installer again plans it Repair and applies it again. An
/// object the API server rejects fails the run naming it, with 1.0.0 left in place. A fleet rollout moves it
/// 1.0.0 → 2.0.0 (the primary applies, the worker runs its `_join`), the pods then answer
/// 2.0.0; a rollback returns 1.0.0; `berth reset` on the primary removes its objects. All
/// along, `kubectl get addons` shows each add-on as an Addon resource the primary keeps
/// current (its runs and its fleet agent): Degraded while it is.
#[test]
fn a_cluster_addon_is_applied_judged_live_rolled_out_rolled_back_and_reset() {
    let cluster = Cluster::start_with(
        2,
        std::path::Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
        |_| format!("{SPEC}  cluster-demo:\n    version: 1.0.0\n    replicas: 2\n"),
    );
    let install = cluster.shell(
        0,
        &format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id),
    );
    let said = printed(&install);
    assert!(install.status.success(), "{said}");
    assert!(
        said.contains("cluster-demo 1.0.0 applied: 2 replicas in namespace cluster-demo"),
        "{said}"
    );
    assert!(
        said.contains("4 add-on(s) published as Addon resources"),
        "{said}"
    );
    assert_eq!(
        kubectl_text(
            &cluster,
            "-n cluster-demo get deployment cluster-demo -o jsonpath={.status.availableReplicas}"
        ),
        "2",
        "{}",
        cluster.account()
    );
    let address = kubectl_text(
        &cluster,
        "-n cluster-demo get service cluster-demo -o jsonpath={.spec.clusterIP}",
    );
    let answer = |index: usize| {
        let output = cluster.shell(index, &format!("curl -fsS --max-time 3 http://{address}/"));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    assert_eq!(answer(0), "demo 1.0.0");
    let health = health_of(&cluster, 0, "cluster-demo");
    assert_eq!(
        condition(&health, "Available")["status"],
        "True",
        "{health:#}"
    );
    assert_eq!(health["components"][0]["probe"], "kubernetes", "{health:#}");

    // Each add-on in the cluster as an Addon resource: listed with its version and
    // conditions, its Deployment referred to with the object's own conditions.
    let listed = kubectl_text(&cluster, "get addons");
    let row = listed
        .lines()
        .find(|line| line.starts_with("cluster-demo "))
        .unwrap_or_else(|| panic!("no cluster-demo in:\n{listed}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        columns[1..5],
        ["1.0.0", "True", "False", "False"],
        "{listed}"
    );
    for name in ["containerd", "kubernetes", "pod-network"] {
        assert!(listed.contains(&format!("{name} ")), "{listed}");
    }
    let resource: serde_json::Value =
        serde_json::from_str(&kubectl_text(&cluster, "get addon cluster-demo -o json")).unwrap();
    let reference = &resource["status"]["components"]["refs"][0];
    assert_eq!(reference["kind"], "Deployment", "{resource:#}");
    assert_eq!(reference["apiVersion"], "apps/v1", "{resource:#}");
    assert_eq!(reference["namespace"], "cluster-demo", "{resource:#}");
    assert!(
        reference["conditions"]
            .as_array()
            .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Available")),
        "{resource:#}"
    );
    assert_eq!(
        resource["status"]["installer"],
        cluster.id.as_str(),
        "{resource:#}"
    );
    let addon_column = |column: usize| {
        kubectl_text(&cluster, "get addons --no-headers")
            .lines()
            .find(|line| line.starts_with("cluster-demo "))
            .and_then(|row| row.split_whitespace().nth(column).map(str::to_string))
            .unwrap_or_default()
    };

    // The worker joins, with the fleet's parameters; its `_join` runs, and the Deployment
    // is not its to wait for.
    let coordinator = spawn_berth(
        &cluster,
        0,
        &[
            "fleet",
            "serve",
            "--listen",
            &format!("{}:7433", cluster.machines[0].host.address()),
            "--name",
            "node-1",
        ],
        "fleet-serve.log",
    );
    let join_command = support::fleet_join_command(|| cluster.shell(0, "berth join-command"))
        .trim()
        .replacen("sudo ", "", 1);
    let joined = cluster.shell(1, &join_command);
    let said = printed(&joined);
    assert!(joined.status.success(), "{said}");
    assert!(
        said.contains(
            "cluster-demo: docker.io/berth/demo:1.0.0 is in place for the pods scheduled here"
        ),
        "{said}"
    );
    let health = health_of(&cluster, 1, "cluster-demo");
    let available = condition(&health, "Available");
    assert_eq!(available["status"], "True", "{health:#}");
    assert_eq!(available["reason"], "JudgedElsewhere", "{health:#}");
    wait_or_explain(
        "both nodes Ready",
        Duration::from_secs(300),
        || nodes(&cluster).iter().filter(|(_, ready)| *ready).count() == 2,
        || cluster.account(),
    );

    // Every node reports to the first node; the primary's agent keeps the Addons current.
    let agents: Vec<support::Server> = (0..2)
        .map(|index| {
            spawn_berth(
                &cluster,
                index,
                &["fleet", "agent", "--interval", "2"],
                &format!("agent-{index}.log"),
            )
        })
        .collect();

    // Live health: an image no node has. The rollout cannot finish, and once past its
    // progress deadline the add-on is Degraded, naming the Deployment; the installer run
    // again applies the base again and repairs it.
    let broken = cluster.kubectl(
        "-n cluster-demo set image deployment/cluster-demo demo=docker.io/berth/demo:missing",
    );
    assert!(broken.status.success(), "{}", printed(&broken));
    let health = std::cell::RefCell::new(serde_json::Value::Null);
    wait_or_explain(
        "cluster-demo Degraded",
        Duration::from_secs(120),
        || {
            *health.borrow_mut() = health_of(&cluster, 0, "cluster-demo");
            condition(&health.borrow(), "Degraded")["status"] == "True"
        },
        || format!("{:#}\n{}", health.borrow(), cluster.account()),
    );
    let health = health.into_inner();
    let message = condition(&health, "Degraded")["message"].to_string();
    assert!(
        message.contains("Deployment") && message.contains("cluster-demo"),
        "{message}"
    );
    // The primary's agent publishes it: the Addon no longer claims what it has lost.
    wait_or_explain(
        "the Addon to say Degraded",
        Duration::from_secs(120),
        || addon_column(3) == "True",
        || kubectl_text(&cluster, "get addons -o wide"),
    );
    let status = cluster.shell(0, "berth status");
    assert!(
        printed(&status).contains("cluster-demo"),
        "{}",
        printed(&status)
    );
    let again = cluster.shell(
        0,
        &format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id),
    );
    let said = printed(&again);
    assert!(again.status.success(), "{said}");
    // Planned Repair (its component is down), so its install hook applies the base again.
    assert!(
        said.contains("Repair") && said.contains("Deployment cluster-demo"),
        "{said}"
    );
    assert!(
        said.contains("cluster-demo 1.0.0 applied: 2 replicas"),
        "{said}"
    );
    wait_or_explain(
        "cluster-demo repaired",
        Duration::from_secs(120),
        || {
            let health = health_of(&cluster, 0, "cluster-demo");
            condition(&health, "Available")["status"] == "True"
                && condition(&health, "Degraded")["status"] == "False"
        },
        || cluster.account(),
    );

    // An object the API server rejects (a negative replica count, from a field no type
    // check refuses): the run fails naming the object and the server's reason, records the
    // add-on Failed with 1.0.0 still in place and serving, and the fixed setting applies.
    let run_with = |extra: &str| {
        cluster.shell(
            0,
            &format!(
                "berth install --spec {} --dist {}/dist {extra}",
                cluster.work.path().join("installer.yaml").display(),
                cluster.served
            ),
        )
    };
    let rejected = run_with("--set cluster-demo.replicas=-1");
    let said = printed(&rejected);
    assert!(!rejected.status.success(), "{said}");
    assert!(
        said.contains("The Deployment \"cluster-demo\" is invalid: spec.replicas")
            && said.contains("cluster_demo failed"),
        "{said}"
    );
    let status = cluster.shell(0, "berth status -o json");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let record = status["addons"]
        .as_array()
        .and_then(|addons| addons.iter().find(|addon| addon["name"] == "cluster-demo"))
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(record["currentVersion"], "1.0.0", "{record:#}");
    assert_eq!(record["conditions"][2]["reason"], "Failed", "{record:#}");
    assert_eq!(answer(0), "demo 1.0.0");
    let fixed = run_with("--set cluster-demo.replicas=2");
    assert!(fixed.status.success(), "{}", printed(&fixed));
    assert!(
        printed(&fixed).contains("cluster-demo 1.0.0 applied: 2 replicas"),
        "{}",
        printed(&fixed)
    );

    // 1.0.0 → 2.0.0 across the fleet, the primary first.
    let rollout = cluster.work.path().join("cluster-demo-2.yaml");
    fs_err::write(
        &rollout,
        "apiVersion: berth/v1alpha1\nkind: Rollout\nmetadata:\n  name: cluster-demo-2\nspec:\n  addon: cluster-demo\n  version: 2.0.0\n  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 1\n      minSuccessTime: 2s\n      progressDeadline: 10m\n      maxFailures: 0\n",
    )
    .unwrap();
    let rollout_state = || {
        let output = cluster.shell(0, "berth rollout status cluster-demo-2 --json");
        let list: serde_json::Value =
            serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
        list["items"][0].clone()
    };
    let applied = cluster.shell(0, &format!("berth rollout apply {}", rollout.display()));
    assert!(applied.status.success(), "{}", printed(&applied));
    let explain = || {
        format!(
            "{:#}\n{}\n{}",
            rollout_state(),
            fs_err::read_to_string(cluster.work.path().join("agent-0.log")).unwrap_or_default(),
            fs_err::read_to_string(cluster.work.path().join("agent-1.log")).unwrap_or_default()
        )
    };
    wait_or_explain(
        "the rollout to complete",
        Duration::from_secs(600),
        || rollout_state()["state"] == "Completed",
        explain,
    );
    let record = rollout_state();
    for target in record["targets"].as_array().unwrap() {
        assert_eq!(target["state"], "Succeeded", "{record:#}");
    }
    wait_or_explain(
        "the pods to answer 2.0.0",
        Duration::from_secs(120),
        || answer(1) == "demo 2.0.0",
        || cluster.account(),
    );
    assert_eq!(
        addon_column(1),
        "2.0.0",
        "{}",
        kubectl_text(&cluster, "get addons")
    );
    // The primary applied 2.0.0 (its install hook); the worker ran its `_join`.
    let ran = |index: usize, hook: &str| {
        let log = cluster.machines[index]
            .read("/var/log/berth/hooks.log")
            .unwrap_or_default();
        log.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .any(|line| line["hook"] == hook && line["version"] == "2.0.0")
    };
    assert!(ran(0, "cluster_demo"), "the primary did not apply 2.0.0");
    assert!(
        ran(1, "cluster_demo_join"),
        "the worker ran no _join of 2.0.0"
    );
    assert!(!ran(1, "cluster_demo"), "the worker applied the base");

    // Rolled back: 1.0.0 again, applied by the primary.
    let back = cluster.shell(0, "berth rollout rollback cluster-demo-2");
    assert!(back.status.success(), "{}", printed(&back));
    wait_or_explain(
        "the rollback to complete on both nodes",
        Duration::from_secs(600),
        || {
            let record = rollout_state();
            record["direction"] == "Rollback"
                && record["state"] == "Completed"
                && record["targets"].as_array().is_some_and(|targets| {
                    targets.iter().all(|target| target["state"] == "Succeeded")
                })
        },
        explain,
    );
    wait_or_explain(
        "the pods to answer 1.0.0 again",
        Duration::from_secs(120),
        || answer(0) == "demo 1.0.0",
        || cluster.account(),
    );
    assert_eq!(
        kubectl_text(
            &cluster,
            "-n cluster-demo get deployment cluster-demo -o jsonpath={.spec.template.spec.containers[0].image}"
        ),
        "docker.io/berth/demo:1.0.0"
    );

    // Reset on the worker leaves the cluster's objects; on the primary, removes them.
    assert_eq!(addon_column(1), "1.0.0");
    drop(agents);
    let reset = cluster.shell(1, "berth reset --force");
    assert!(reset.status.success(), "{}", printed(&reset));
    assert!(
        !kubectl_text(
            &cluster,
            "-n cluster-demo get deployment cluster-demo -o name"
        )
        .is_empty(),
        "the worker's reset removed the cluster's objects"
    );
    assert!(
        !kubectl_text(&cluster, "get addons").is_empty(),
        "the worker's reset removed the Addons"
    );
    // Not while the fleet's server writes in Berth's folder: refused before any hook runs.
    let refused = cluster.shell(0, "berth reset --force");
    let said = printed(&refused);
    assert!(
        !refused.status.success() && said.contains("berth fleet serve runs on this node"),
        "{said}"
    );
    assert_eq!(addon_column(1), "1.0.0", "{said}");
    drop(coordinator);
    let reset = cluster.shell(0, "berth reset --force");
    let said = printed(&reset);
    assert!(reset.status.success(), "{said}");
    assert!(!said.contains("Addon resources were not removed"), "{said}");
}
