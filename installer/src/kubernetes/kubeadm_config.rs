//! kubeadm's configuration as kURL renders it for `kubeadm init` and `kubeadm join` (kURL's
//! `scripts/kustomize/kubeadm/init-orig` and `join-orig` with the patches its `init` and
//! `join` functions add), from the variables a hook session has: one YAML stream whose
//! documents keep kURL's `metadata.name`s, so that the patches add-ons drop in
//! `$DIR/kustomize/kubeadm/init-patches` and `join-patches` merge into them with kustomize as
//! they do in kURL. Each value is a YAML scalar, never text spliced into YAML.

use serde_json::{Value, json};

/// Which configuration: the first primary's, or a joining node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    Init,
    Join,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("${0} is empty; kubeadm's configuration needs it")]
    Missing(&'static str),
    #[error("${name} is `{value}`: {problem}")]
    Bad {
        name: &'static str,
        value: String,
        problem: &'static str,
    },
}

/// The kubelet's and API server's TLS cipher suites kURL sets.
const CIPHER_SUITES: &str =
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384";

/// Renders the configuration for `role`, reading each variable through `variable` (empty
/// when unset).
pub fn render(role: Role, variable: impl Fn(&str) -> String) -> Result<String, ConfigError> {
    let required = |name: &'static str| {
        let value = variable(name);
        if value.is_empty() {
            Err(ConfigError::Missing(name))
        } else {
            Ok(value)
        }
    };
    let version = required("KUBERNETES_VERSION")?;
    let minor: u32 = version
        .split('.')
        .nth(1)
        .and_then(|minor| minor.parse().ok())
        .ok_or(ConfigError::Bad {
            name: "KUBERNETES_VERSION",
            value: version.clone(),
            problem: "not a version MAJOR.MINOR.PATCH",
        })?;
    // kURL: the kubeadm/v1beta3 API from Kubernetes 1.26 on, v1beta2 before.
    let api = if minor >= 26 {
        "kubeadm.k8s.io/v1beta3"
    } else {
        "kubeadm.k8s.io/v1beta2"
    };
    let private_address = required("PRIVATE_ADDRESS")?;
    // kURL's template text, a trailing comma and all when there are no labels.
    let labels = format!("kurl.sh/cluster=true,{}", variable("NODE_LABELS"));
    let node_registration = json!({
        "taints": [],
        "kubeletExtraArgs": {"node-labels": labels, "node-ip": private_address},
    });
    let documents = match role {
        Role::Init => {
            let mut init = json!({
                "apiVersion": api,
                "kind": "InitConfiguration",
                "metadata": {"name": "kubeadm-init-configuration"},
                "bootstrapTokens": [{
                    "groups": ["system:bootstrappers:kubeadm:default-node-token"],
                    "token": required("BOOTSTRAP_TOKEN")?,
                    // Unset, as in kURL: kubeadm's default, 24 hours.
                    "ttl": scalar_or_null(variable("BOOTSTRAP_TOKEN_TTL")),
                    "usages": ["signing", "authentication"],
                }],
                "localAPIEndpoint": {"advertiseAddress": private_address},
                "nodeRegistration": node_registration,
            });
            if variable("HA_CLUSTER") == "1" {
                init["certificateKey"] = Value::String(required("CERT_KEY")?);
            }
            // kURL's kubernetes_configure_pause_image: before 1.27, the kubelet keeps
            // containerd's sandbox image.
            let pause_image = variable("CONTAINERD_PAUSE_IMAGE");
            if minor < 27 && !pause_image.is_empty() {
                init["nodeRegistration"]["kubeletExtraArgs"]["pod-infra-container-image"] =
                    Value::String(pause_image);
            }
            vec![
                init,
                cluster_configuration(api, minor, &version, &variable)?,
                kubelet_configuration(minor, &variable)?,
                json!({
                    "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                    "kind": "KubeProxyConfiguration",
                    "metadata": {"name": "kube-proxy-configuration"},
                    "mode": "ipvs",
                }),
            ]
        }
        Role::Join => {
            // kURL's join_prompts: the first node's address, port 6443 unless it names one.
            let (host, port) = host_and_port(&required("KUBERNETES_MASTER_ADDR")?);
            let api_server_endpoint = format!("{host}:{port}");
            let mut join = json!({
                "apiVersion": api,
                "kind": "JoinConfiguration",
                "metadata": {"name": "kubeadm-join-configuration"},
                "nodeRegistration": node_registration,
                "discovery": {"bootstrapToken": {
                    "token": required("KUBEADM_TOKEN")?,
                    "apiServerEndpoint": api_server_endpoint,
                    "caCertHashes": [required("KUBEADM_TOKEN_CA_HASH")?],
                }},
            });
            if variable("MASTER") == "1" {
                join["controlPlane"] = json!({
                    "certificateKey": required("CERT_KEY")?,
                    "localAPIEndpoint": {"advertiseAddress": private_address},
                });
            }
            vec![join]
        }
    };
    let mut text = String::new();
    for document in documents {
        text.push_str("---\n");
        text.push_str(&serde_norway::to_string(&document).expect("a JSON value writes as YAML"));
    }
    Ok(text)
}

/// A value as kURL's templates leave it: empty is YAML's null.
fn scalar_or_null(value: String) -> Value {
    if value.is_empty() {
        Value::Null
    } else {
        Value::String(value)
    }
}

fn non_empty(value: String, default: &str) -> String {
    if value.is_empty() {
        default.to_string()
    } else {
        value
    }
}

/// The leader-election settings of the controller-manager and the scheduler where
/// `KUBERNETES_CONTROL_PLANE_TIMEOUT` says the machine is slow (kubeadm's: 15 s, 10 s, 2 s).
const SLOW_MACHINE_LEASES: [(&str, &str); 3] = [
    ("leader-elect-lease-duration", "120s"),
    ("leader-elect-renew-deadline", "60s"),
    ("leader-elect-retry-period", "10s"),
];

/// Whether `text` is a Go duration of whole seconds, minutes and hours (`20m`, `1h30m`), more
/// than none and at most a day, as kubeadm reads `timeoutForControlPlane`.
fn is_duration(text: &str) -> bool {
    let mut seconds: u64 = 0;
    let mut number = String::new();
    for character in text.chars() {
        let unit = match character {
            '0'..='9' if number.len() < 6 => {
                number.push(character);
                continue;
            }
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return false,
        };
        let Ok(count) = number.parse::<u64>() else {
            return false;
        };
        seconds += count * unit;
        number.clear();
    }
    number.is_empty() && seconds > 0 && seconds <= 24 * 3600
}

/// `host:port` of a load balancer address, kURL's default port 6443 when it names none.
fn host_and_port(address: &str) -> (String, String) {
    if let Some(rest) = address.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        let port = after.strip_prefix(':').unwrap_or("6443");
        return (format!("[{host}]"), non_empty(port.to_string(), "6443"));
    }
    match address.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host.to_string(), port.to_string()),
        _ => (address.to_string(), "6443".to_string()),
    }
}

fn cluster_configuration(
    api: &str,
    minor: u32,
    version: &str,
    variable: &impl Fn(&str) -> String,
) -> Result<Value, ConfigError> {
    let private_address = variable("PRIVATE_ADDRESS");
    let mut sans = vec![private_address];
    let public_address = variable("PUBLIC_ADDRESS");
    if !public_address.is_empty() {
        sans.push(public_address);
    }
    let load_balancer = variable("LOAD_BALANCER_ADDRESS");
    let mut endpoint = None;
    if !load_balancer.is_empty() {
        let (host, port) = host_and_port(&load_balancer);
        endpoint = Some(format!("{host}:{port}"));
        sans.push(host);
    }
    let mut networking = json!({});
    let service_cidr = variable("SERVICE_CIDR");
    if !service_cidr.is_empty() {
        networking["serviceSubnet"] = Value::String(service_cidr);
    }
    let mut cluster = json!({
        "apiVersion": api,
        "kind": "ClusterConfiguration",
        "metadata": {"name": "kubeadm-cluster-configuration"},
        "kubernetesVersion": format!("v{version}"),
        "certificatesDir": "/etc/kubernetes/pki",
        "clusterName": non_empty(variable("KUBERNETES_CLUSTER_NAME"), "kubernetes"),
        "controllerManager": {"extraArgs": {"profiling": "false"}},
        "etcd": {"local": {
            "dataDir": "/var/lib/etcd",
            "extraArgs": {"cipher-suites": CIPHER_SUITES},
        }},
        "networking": networking,
        "apiServer": {
            "extraArgs": {
                "service-node-port-range": if variable("USE_STANDARD_PORT_RANGE") == "1" {
                    "30000-32767"
                } else {
                    "80-60000"
                },
                "tls-cipher-suites": CIPHER_SUITES,
                "profiling": "false",
                "audit-log-path": "/auditlog/k8s-audit.log",
                "audit-policy-file": "/etc/kubernetes/audit.yaml",
                "audit-log-maxage": "30",
                "audit-log-maxsize": "100",
                "audit-log-maxbackup": "10",
            },
            "extraVolumes": [
                {"name": "audit", "hostPath": "/etc/kubernetes/audit.yaml",
                 "mountPath": "/etc/kubernetes/audit.yaml", "readOnly": true, "pathType": "File"},
                {"name": "auditlog", "hostPath": "/var/log/apiserver",
                 "mountPath": "/auditlog", "pathType": "Directory"},
            ],
            "certSANs": sans,
        },
        "scheduler": {"extraArgs": {"profiling": "false"}},
    });
    if let Some(endpoint) = endpoint {
        cluster["controlPlaneEndpoint"] = Value::String(endpoint);
    }
    // Berth's, for machines slower than kubeadm expects (emulated, small boards): how long
    // `kubeadm init` waits for the control plane, which also sets how long the kubelet lets
    // each static pod start before its liveness probe may restart it. Unset, kubeadm's four
    // minutes, as in kURL.
    let timeout = variable("KUBERNETES_CONTROL_PLANE_TIMEOUT");
    if !timeout.is_empty() {
        if !is_duration(&timeout) {
            return Err(ConfigError::Bad {
                name: "KUBERNETES_CONTROL_PLANE_TIMEOUT",
                value: timeout,
                problem: "not a duration such as 20m or 1h30m (s, m and h, at most 24h)",
            });
        }
        cluster["apiServer"]["timeoutForControlPlane"] = Value::String(timeout);
        // And longer leader leases: a controller-manager or scheduler that cannot renew its
        // lease within 10 s (kubeadm's) exits, and a loaded API server often answers later;
        // the controller-manager then restarts into a crash loop and never gives the nodes
        // their pod ranges. A minute to renew, as a slow machine needs; a standby takes over
        // a lost leader's work after two minutes rather than kubeadm's 15 s.
        for component in ["controllerManager", "scheduler"] {
            let arguments = &mut cluster[component]["extraArgs"];
            for (name, value) in SLOW_MACHINE_LEASES {
                arguments[name] = Value::String(value.to_string());
            }
        }
    }
    // kURL's v1beta2 template (before 1.26).
    if minor < 26 {
        cluster["useHyperKubeImage"] = json!(false);
        cluster["dns"] = json!({"type": "CoreDNS"});
    }
    // kURL's patch-cluster-config-cis-compliance (with the insecure port shut before 1.20).
    if variable("KUBERNETES_CIS_COMPLIANCE") == "1" {
        let arguments = &mut cluster["apiServer"]["extraArgs"];
        arguments["enable-admission-plugins"] = json!("NodeRestriction");
        arguments["kubelet-certificate-authority"] = json!("/etc/kubernetes/pki/ca.crt");
        if minor < 20 {
            arguments["insecure-port"] = json!("0");
        }
    }
    Ok(cluster)
}

fn kubelet_configuration(
    minor: u32,
    variable: &impl Fn(&str) -> String,
) -> Result<Value, ConfigError> {
    let mut kubelet = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "metadata": {"name": "kubelet-configuration"},
        "tlsCipherSuites": CIPHER_SUITES.split(',').collect::<Vec<_>>(),
        "nodeStatusMaxImages": -1,
    });
    // kURL's patch-kubelet-21.yaml from Kubernetes 1.21 on, patch-kubelet-pre21.yaml before.
    if minor >= 21 {
        kubelet["shutdownGracePeriod"] = json!("30s");
        kubelet["shutdownGracePeriodCriticalPods"] = json!("10s");
    } else {
        kubelet["cgroupDriver"] = json!("systemd");
    }
    if variable("KUBERNETES_CIS_COMPLIANCE") == "1" {
        kubelet["protectKernelDefaults"] = json!(true);
        kubelet["serverTLSBootstrap"] = json!(true);
    }
    // kURL's kubeReserved: the share of this machine's memory and CPUs GKE reserves.
    if variable("KUBE_RESERVED") == "1" {
        let (memory, cpus) = machine_size();
        kubelet["kubeReserved"] = json!({
            "cpu": format!("{}m", cpu_millicores_to_reserve(cpus * 1000)),
            "ephemeral-storage": "1Gi",
            "memory": format!("{}Mi", memory_mebibytes_to_reserve(memory)),
        });
    }
    // Maps kURL's spec writes as YAML text (`{"memory.available": "234Mi", …}`).
    for (name, field) in [
        ("EVICTION_THRESHOLD", "evictionHard"),
        ("SYSTEM_RESERVED", "systemReserved"),
    ] {
        let text = variable(name);
        if text.is_empty() {
            continue;
        }
        let value: Value = serde_norway::from_str(&text).map_err(|_| ConfigError::Bad {
            name,
            value: text.clone(),
            problem: "not YAML",
        })?;
        kubelet[field] = value;
    }
    let size = variable("CONTAINER_LOG_MAX_SIZE");
    if !size.is_empty() {
        kubelet["containerLogMaxSize"] = Value::String(size);
    }
    for (name, field) in [
        ("CONTAINER_LOG_MAX_FILES", "containerLogMaxFiles"),
        ("KUBERNETES_MAX_PODS_PER_NODE", "maxPods"),
    ] {
        let value = variable(name);
        if value.is_empty() {
            continue;
        }
        let number: u32 = value.parse().map_err(|_| ConfigError::Bad {
            name,
            value: value.clone(),
            problem: "not a whole number",
        })?;
        kubelet[field] = json!(number);
    }
    Ok(kubelet)
}

/// This machine's memory in MiB (`free -m`'s total) and its CPUs (`nproc`), as kURL reads them.
fn machine_size() -> (u64, u64) {
    let memory = berth_preflight::checks::meminfo_kib("MemTotal").map_or(0, |kib| kib / 1024);
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map(|set| {
            (0..nix::sched::CpuSet::count())
                .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                .count() as u64
        })
        .unwrap_or(1);
    (memory, cpus)
}

/// kURL's `get_resource_to_reserve_in_range`: `percentage` hundredths of a percent of the part
/// of `total` between `start` and `end`.
fn reserve_in_range(total: u64, start: u64, end: u64, percentage: u64) -> u64 {
    if total > start {
        (total.min(end) - start) * percentage / 100 / 100
    } else {
        0
    }
}

/// kURL's `get_memory_mebibytes_to_reserve`: 255 MiB up to 1 GiB; else 25% of the first 4 GiB,
/// 20% of the next 4, 10% of the next 8, 6% up to 128 GiB and 2% above.
fn memory_mebibytes_to_reserve(total: u64) -> u64 {
    if total <= 1024 {
        return 255;
    }
    let ranges = [0, 4096, 8192, 16384, 131072, total];
    [2500, 2000, 1000, 600, 200]
        .iter()
        .enumerate()
        .map(|(index, &percentage)| {
            reserve_in_range(total, ranges[index], ranges[index + 1], percentage)
        })
        .sum()
}

/// kURL's `get_cpu_millicores_to_reserve`: 6% of the first core, 1% of the second, 0.5% of the
/// next two, 0.25% above.
fn cpu_millicores_to_reserve(total: u64) -> u64 {
    let ranges = [0, 1000, 2000, 4000, total];
    [600, 100, 50, 25]
        .iter()
        .enumerate()
        .map(|(index, &percentage)| {
            reserve_in_range(total, ranges[index], ranges[index + 1], percentage)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn documents(text: &str) -> Vec<Value> {
        use serde::Deserialize as _;
        serde_norway::Deserializer::from_str(text)
            .map(|document| Value::deserialize(document).unwrap())
            .collect()
    }

    fn render_with(role: Role, pairs: &[(&str, &str)]) -> Result<Vec<Value>, ConfigError> {
        let map: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        render(role, |name| map.get(name).unwrap_or(&"").to_string()).map(|text| documents(&text))
    }

    const BASE: [(&str, &str); 5] = [
        ("KUBERNETES_VERSION", "1.30.8"),
        ("PRIVATE_ADDRESS", "10.0.0.4"),
        ("BOOTSTRAP_TOKEN", "abcdef.0123456789abcdef"),
        ("SERVICE_CIDR", "10.96.0.0/22"),
        ("NODE_LABELS", "zone=edge"),
    ];

    /// The documents and names kURL's init-orig gives, with the values of the variables.
    #[test]
    fn init_follows_kurls_documents_and_patches() {
        let mut pairs = BASE.to_vec();
        pairs.extend([
            ("HA_CLUSTER", "1"),
            ("CERT_KEY", "f00d"),
            ("LOAD_BALANCER_ADDRESS", "10.0.0.100"),
            ("PUBLIC_ADDRESS", "203.0.113.9"),
            ("CONTAINER_LOG_MAX_FILES", "3"),
        ]);
        let rendered = render_with(Role::Init, &pairs).unwrap();
        let kinds: Vec<(&str, &str)> = rendered
            .iter()
            .map(|document| {
                (
                    document["kind"].as_str().unwrap(),
                    document["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("InitConfiguration", "kubeadm-init-configuration"),
                ("ClusterConfiguration", "kubeadm-cluster-configuration"),
                ("KubeletConfiguration", "kubelet-configuration"),
                ("KubeProxyConfiguration", "kube-proxy-configuration"),
            ]
        );
        let (init, cluster, kubelet) = (&rendered[0], &rendered[1], &rendered[2]);
        assert_eq!(init["apiVersion"], "kubeadm.k8s.io/v1beta3");
        assert_eq!(init["certificateKey"], "f00d");
        assert_eq!(init["bootstrapTokens"][0]["ttl"], Value::Null);
        assert_eq!(
            init["nodeRegistration"]["kubeletExtraArgs"]["node-labels"],
            "kurl.sh/cluster=true,zone=edge"
        );
        assert_eq!(cluster["kubernetesVersion"], "v1.30.8");
        assert_eq!(cluster["clusterName"], "kubernetes");
        assert_eq!(cluster["controlPlaneEndpoint"], "10.0.0.100:6443");
        assert_eq!(
            cluster["apiServer"]["certSANs"],
            json!(["10.0.0.4", "203.0.113.9", "10.0.0.100"])
        );
        assert_eq!(cluster["apiServer"]["extraArgs"]["profiling"], "false");
        assert_eq!(kubelet["containerLogMaxFiles"], 3);
        assert_eq!(kubelet["shutdownGracePeriod"], "30s");
        // Before 1.26, kubeadm's v1beta2.
        pairs[0] = ("KUBERNETES_VERSION", "1.25.4");
        let old = render_with(Role::Init, &pairs).unwrap();
        assert_eq!(old[0]["apiVersion"], "kubeadm.k8s.io/v1beta2");
        assert_eq!(old[1]["dns"]["type"], "CoreDNS");
    }

    /// kURL's reservation tables, at the edges of their ranges.
    #[test]
    fn reservations_follow_kurls_tables() {
        assert_eq!(memory_mebibytes_to_reserve(512), 255);
        assert_eq!(memory_mebibytes_to_reserve(4096), 1024);
        assert_eq!(memory_mebibytes_to_reserve(8192), 1024 + 819);
        assert_eq!(cpu_millicores_to_reserve(1000), 60);
        assert_eq!(cpu_millicores_to_reserve(2000), 70);
        assert_eq!(cpu_millicores_to_reserve(8000), 80 + 10);
    }

    #[test]
    fn join_carries_the_join_commands_values_and_a_control_plane_its_key() {
        let mut pairs = BASE.to_vec();
        pairs.extend([
            ("KUBEADM_TOKEN", "abcdef.0123456789abcdef"),
            ("KUBERNETES_MASTER_ADDR", "10.0.0.4"),
            ("KUBEADM_TOKEN_CA_HASH", "sha256:00"),
        ]);
        let worker = render_with(Role::Join, &pairs).unwrap();
        assert_eq!(worker.len(), 1);
        assert_eq!(
            worker[0]["discovery"]["bootstrapToken"]["apiServerEndpoint"],
            "10.0.0.4:6443"
        );
        assert!(worker[0].get("controlPlane").is_none());
        pairs.push(("MASTER", "1"));
        assert!(matches!(
            render_with(Role::Join, &pairs),
            Err(ConfigError::Missing("CERT_KEY"))
        ));
        pairs.push(("CERT_KEY", "f00d"));
        let primary = render_with(Role::Join, &pairs).unwrap();
        assert_eq!(primary[0]["controlPlane"]["certificateKey"], "f00d");
    }

    /// A value is a scalar: YAML in a label does not become structure.
    #[test]
    fn values_cannot_inject_yaml() {
        let mut pairs = BASE.to_vec();
        pairs[4] = ("NODE_LABELS", "a=b\n  evil: true");
        let rendered = render_with(Role::Init, &pairs).unwrap();
        assert_eq!(
            rendered[0]["nodeRegistration"]["kubeletExtraArgs"]["node-labels"],
            "kurl.sh/cluster=true,a=b\n  evil: true"
        );
        assert!(rendered[0]["nodeRegistration"].get("evil").is_none());
        pairs[4] = ("KUBERNETES_MAX_PODS_PER_NODE", "many");
        assert!(render_with(Role::Init, &pairs).is_err());
    }

    /// The control plane's timeout is kubeadm's unless set, and a set one is a duration; with
    /// it, the controller-manager and scheduler take longer leader leases.
    #[test]
    fn a_control_plane_timeout_is_set_only_when_given_and_only_as_a_duration() {
        let unset = render_with(Role::Init, &BASE).unwrap();
        assert!(
            unset[1]["apiServer"]
                .get("timeoutForControlPlane")
                .is_none()
        );
        assert_eq!(
            unset[1]["controllerManager"]["extraArgs"],
            serde_json::json!({"profiling": "false"})
        );
        for good in ["20m", "1h30m", "90s", "24h"] {
            let mut pairs = BASE.to_vec();
            pairs.push(("KUBERNETES_CONTROL_PLANE_TIMEOUT", good));
            let rendered = render_with(Role::Init, &pairs).unwrap();
            assert_eq!(rendered[1]["apiServer"]["timeoutForControlPlane"], good);
            for component in ["controllerManager", "scheduler"] {
                let arguments = &rendered[1][component]["extraArgs"];
                assert_eq!(
                    arguments["leader-elect-renew-deadline"], "60s",
                    "{component}"
                );
                assert_eq!(arguments["profiling"], "false", "{component}");
            }
        }
        for bad in [
            "20",
            "m",
            "0m",
            "25h",
            "-5m",
            "5 m",
            "1.5h",
            "20m\nx: y",
            "9999999s",
        ] {
            let mut pairs = BASE.to_vec();
            pairs.push(("KUBERNETES_CONTROL_PLANE_TIMEOUT", bad));
            let error = render_with(Role::Init, &pairs).unwrap_err().to_string();
            assert!(
                error.contains("not a duration such as 20m"),
                "{bad}: {error}"
            );
        }
    }
}
