//! Every field of every one of kURL's Installer specs in the shared fixtures, exported into a
//! hook: each variable has the name and the value kURL's spec-to-bash conversion
//! (`kurl_util/cmd/yamltobash`) gives it. The table below is taken from that conversion; the
//! rules for values are written here again, apart from Berth's own, so that either can catch
//! the other.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use support::{Node, kurl_specs, succeeded};

/// How kURL's conversion writes a value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// A string as written; absent is empty.
    Text,
    /// A string with every `/` dropped.
    Cidr,
    /// `1` for true, empty otherwise.
    Flag,
    /// `1` unless written `false`.
    FlagDefaultOn,
    /// `0` when written `false`, `1` otherwise.
    OneOrZero,
    /// A whole number; 0 or absent is empty.
    Number,
    /// A list joined with `,`.
    Joined,
    /// Always empty (kURL hands the document to another tool).
    Empty,
}

use Rule::*;

/// (spec key, field, variable, rule), from kURL's conversion table.
const CONVERSION: &[(&str, &str, &str, Rule)] = &[
    ("kubernetes", "bootstrapToken", "BOOTSTRAP_TOKEN", Text),
    (
        "kubernetes",
        "bootstrapTokenTTL",
        "BOOTSTRAP_TOKEN_TTL",
        Text,
    ),
    ("kubernetes", "certKey", "CERT_KEY", Text),
    ("kubernetes", "controlPlane", "MASTER", Flag),
    ("kubernetes", "HACluster", "HA_CLUSTER", Flag),
    (
        "kubernetes",
        "containerLogMaxSize",
        "CONTAINER_LOG_MAX_SIZE",
        Text,
    ),
    (
        "kubernetes",
        "containerLogMaxFiles",
        "CONTAINER_LOG_MAX_FILES",
        Number,
    ),
    (
        "kubernetes",
        "maxPodsPerNode",
        "KUBERNETES_MAX_PODS_PER_NODE",
        Number,
    ),
    ("kubernetes", "kubeadmToken", "KUBEADM_TOKEN", Text),
    (
        "kubernetes",
        "kubeadmTokenCAHash",
        "KUBEADM_TOKEN_CA_HASH",
        Text,
    ),
    (
        "kubernetes",
        "loadBalancerAddress",
        "LOAD_BALANCER_ADDRESS",
        Text,
    ),
    (
        "kubernetes",
        "loadBalancerUseFirstPrimary",
        "KUBERNETES_LOAD_BALANCER_USE_FIRST_PRIMARY",
        Flag,
    ),
    (
        "kubernetes",
        "masterAddress",
        "KUBERNETES_MASTER_ADDR",
        Text,
    ),
    ("kubernetes", "s3Override", "SERVICE_S3_OVERRIDE", Text),
    ("kubernetes", "serviceCIDR", "SERVICE_CIDR", Text),
    ("kubernetes", "serviceCidrRange", "SERVICE_CIDR_RANGE", Cidr),
    (
        "kubernetes",
        "useStandardNodePortRange",
        "USE_STANDARD_PORT_RANGE",
        Flag,
    ),
    ("kubernetes", "kubeReserved", "KUBE_RESERVED", Flag),
    (
        "kubernetes",
        "evictionThresholdResources",
        "EVICTION_THRESHOLD",
        Text,
    ),
    (
        "kubernetes",
        "systemReservedResources",
        "SYSTEM_RESERVED",
        Text,
    ),
    ("kubernetes", "version", "KUBERNETES_VERSION", Text),
    (
        "kubernetes",
        "cisCompliance",
        "KUBERNETES_CIS_COMPLIANCE",
        Flag,
    ),
    ("kubernetes", "clusterName", "KUBERNETES_CLUSTER_NAME", Text),
    (
        "kubernetes",
        "initIgnorePreflightErrors",
        "KUBERNETES_INIT_IGNORE_PREFLIGHT_ERRORS",
        Text,
    ),
    (
        "kubernetes",
        "upgradeIgnorePreflightErrors",
        "KUBERNETES_UPGRADE_IGNORE_PREFLIGHT_ERRORS",
        Text,
    ),
    (
        "docker",
        "bypassStorageDriverWarning",
        "BYPASS_STORAGEDRIVER_WARNINGS",
        Flag,
    ),
    ("docker", "dockerRegistryIP", "DOCKER_REGISTRY_IP", Text),
    (
        "docker",
        "hardFailOnLoopback",
        "HARD_FAIL_ON_LOOPBACK",
        FlagDefaultOn,
    ),
    ("docker", "noCEOnEE", "NO_CE_ON_EE", Flag),
    ("docker", "preserveConfig", "PRESERVE_DOCKER_CONFIG", Flag),
    ("docker", "s3Override", "DOCKER_S3_OVERRRIDE", Text),
    ("docker", "version", "DOCKER_VERSION", Text),
    ("weave", "isEncryptionDisabled", "ENCRYPT_NETWORK", Flag),
    ("weave", "podCIDR", "POD_CIDR", Text),
    ("weave", "podCidrRange", "POD_CIDR_RANGE", Cidr),
    ("weave", "s3Override", "WEAVE_S3_OVERRIDE", Text),
    ("weave", "version", "WEAVE_VERSION", Text),
    ("weave", "noMasqLocal", "NO_MASQ_LOCAL", OneOrZero),
    ("flannel", "podCIDR", "FLANNEL_POD_CIDR", Text),
    ("flannel", "podCIDRRange", "FLANNEL_POD_CIDR_RANGE", Cidr),
    ("flannel", "s3Override", "FLANNEL_S3_OVERRIDE", Text),
    ("flannel", "version", "FLANNEL_VERSION", Text),
    (
        "antrea",
        "isEncryptionDisabled",
        "ANTREA_DISABLE_ENCRYPTION",
        Flag,
    ),
    ("antrea", "podCIDR", "ANTREA_POD_CIDR", Text),
    ("antrea", "podCidrRange", "ANTREA_POD_CIDR_RANGE", Cidr),
    ("antrea", "s3Override", "ANTREA_S3_OVERRIDE", Text),
    ("antrea", "version", "ANTREA_VERSION", Text),
    ("calico", "s3Override", "CALICO_S3_OVERRIDE", Text),
    ("calico", "version", "CALICO_VERSION", Text),
    ("contour", "s3Override", "CONTOUR_S3_OVERRIDE", Text),
    ("contour", "version", "CONTOUR_VERSION", Text),
    (
        "contour",
        "tlsMinimumProtocolVersion",
        "CONTOUR_TLS_MINIMUM_PROTOCOL_VERSION",
        Text,
    ),
    ("contour", "httpPort", "CONTOUR_HTTP_PORT", Number),
    ("contour", "httpsPort", "CONTOUR_HTTPS_PORT", Number),
    (
        "rook",
        "blockDeviceFilter",
        "ROOK_BLOCK_DEVICE_FILTER",
        Text,
    ),
    ("rook", "nodes", "ROOK_NODES", Text),
    (
        "rook",
        "bypassUpgradeWarning",
        "ROOK_BYPASS_UPGRADE_WARNING",
        Flag,
    ),
    ("rook", "cephReplicaCount", "CEPH_POOL_REPLICAS", Number),
    (
        "rook",
        "isBlockStorageEnabled",
        "ROOK_BLOCK_STORAGE_ENABLED",
        Flag,
    ),
    (
        "rook",
        "isSharedFilesystemDisabled",
        "ROOK_SHARED_FILESYSTEM_DISABLED",
        Flag,
    ),
    ("rook", "s3Override", "ROOK_S3_OVERRIDE", Text),
    ("rook", "storageClassName", "STORAGE_CLASS", Text),
    (
        "rook",
        "hostpathRequiresPrivileged",
        "ROOK_HOSTPATH_REQUIRES_PRIVILEGED",
        Flag,
    ),
    (
        "rook",
        "minimumNodeCount",
        "ROOK_MINIMUM_NODE_COUNT",
        Number,
    ),
    ("rook", "version", "ROOK_VERSION", Text),
    ("registry", "publishPort", "REGISTRY_PUBLISH_PORT", Number),
    ("registry", "s3Override", "REGISTRY_S3_OVERRIDE", Text),
    ("registry", "version", "REGISTRY_VERSION", Text),
    ("prometheus", "s3Override", "PROMETHEUS_S3_OVERRIDE", Text),
    ("prometheus", "version", "PROMETHEUS_VERSION", Text),
    ("prometheus", "serviceType", "PROMETHEUS_SERVICE_TYPE", Text),
    ("fluentd", "fullEFKStack", "FLUENTD_FULL_EFK_STACK", Flag),
    ("fluentd", "s3Override", "FLUENTD_S3_OVERRIDE", Text),
    ("fluentd", "version", "FLUENTD_VERSION", Text),
    ("fluentd", "fluentdConfPath", "FLUENTD_CONF_FILE", Text),
    (
        "kotsadm",
        "applicationNamespace",
        "KOTSADM_APPLICATION_NAMESPACES",
        Text,
    ),
    (
        "kotsadm",
        "applicationSlug",
        "KOTSADM_APPLICATION_SLUG",
        Text,
    ),
    (
        "kotsadm",
        "applicationVersionLabel",
        "KOTSADM_APPLICATION_VERSION_LABEL",
        Text,
    ),
    ("kotsadm", "hostname", "KOTSADM_HOSTNAME", Text),
    ("kotsadm", "s3Override", "KOTSADM_S3_OVERRIDE", Text),
    ("kotsadm", "disableS3", "KOTSADM_DISABLE_S3", Flag),
    ("kotsadm", "uiBindPort", "KOTSADM_UI_BIND_PORT", Number),
    ("kotsadm", "version", "KOTSADM_VERSION", Text),
    ("velero", "s3Override", "VELERO_S3_OVERRIDE", Text),
    // kURL writes it to VELERO_LOCAL_BUCKET, racing localBucket; velero's script reads this.
    ("velero", "namespace", "VELERO_NAMESPACE", Text),
    ("velero", "disableCLI", "VELERO_DISABLE_CLI", Flag),
    ("velero", "disableRestic", "VELERO_DISABLE_RESTIC", Flag),
    ("velero", "localBucket", "VELERO_LOCAL_BUCKET", Text),
    (
        "velero",
        "resticRequiresPrivileged",
        "VELERO_RESTIC_REQUIRES_PRIVILEGED",
        Flag,
    ),
    ("velero", "resticTimeout", "VELERO_RESTIC_TIMEOUT", Text),
    ("velero", "serverFlags", "VELERO_SERVER_FLAGS", Joined),
    ("velero", "version", "VELERO_VERSION", Text),
    ("minio", "claimSize", "MINIO_CLAIM_SIZE", Text),
    ("minio", "namespace", "MINIO_NAMESPACE", Text),
    ("minio", "s3Override", "MINIO_S3_OVERRIDE", Text),
    ("minio", "hostPath", "MINIO_HOSTPATH", Text),
    ("minio", "version", "MINIO_VERSION", Text),
    (
        "openebs",
        "cstorStorageClassName",
        "OPENEBS_CSTOR_STORAGE_CLASS",
        Text,
    ),
    ("openebs", "isCstorEnabled", "OPENEBS_CSTOR", Flag),
    ("openebs", "isLocalPVEnabled", "OPENEBS_LOCALPV", Flag),
    (
        "openebs",
        "localPVStorageClassName",
        "OPENEBS_LOCALPV_STORAGE_CLASS",
        Text,
    ),
    ("openebs", "namespace", "OPENEBS_NAMESPACE", Text),
    ("openebs", "s3Override", "OPENEBS_S3_OVERRIDE", Text),
    ("openebs", "version", "OPENEBS_VERSION", Text),
    (
        "kurl",
        "additionalNoProxyAddresses",
        "ADDITIONAL_NO_PROXY_ADDRESSES",
        Joined,
    ),
    ("kurl", "airgap", "AIRGAP", Flag),
    ("kurl", "hostnameCheck", "HOSTNAME_CHECK", Text),
    (
        "kurl",
        "ignoreRemoteLoadImagesPrompt",
        "KURL_IGNORE_REMOTE_LOAD_IMAGES_PROMPT",
        Flag,
    ),
    (
        "kurl",
        "ignoreRemoteUpgradePrompt",
        "KURL_IGNORE_REMOTE_UPGRADE_PROMPT",
        Flag,
    ),
    ("kurl", "licenseURL", "LICENSE_URL", Text),
    ("kurl", "nameserver", "NAMESERVER", Text),
    ("kurl", "noProxy", "NO_PROXY", Flag),
    ("kurl", "hostPreflights", "HOST_PREFLIGHTS", Empty),
    ("kurl", "hostPreflightIgnore", "HOST_PREFLIGHT_IGNORE", Flag),
    (
        "kurl",
        "hostPreflightEnforceWarnings",
        "HOST_PREFLIGHT_ENFORCE_WARNINGS",
        Flag,
    ),
    ("kurl", "privateAddress", "PRIVATE_ADDRESS", Text),
    ("kurl", "proxyAddress", "PROXY_ADDRESS", Text),
    ("kurl", "publicAddress", "PUBLIC_ADDRESS", Text),
    (
        "kurl",
        "skipSystemPackageInstall",
        "SKIP_SYSTEM_PACKAGE_INSTALL",
        Flag,
    ),
    (
        "kurl",
        "excludeBuiltinHostPreflights",
        "EXCLUDE_BUILTIN_HOST_PREFLIGHTS",
        Flag,
    ),
    ("kurl", "ipv6", "IPV6_ONLY", Flag),
    ("selinuxConfig", "disableSelinux", "DISABLE_SELINUX", Flag),
    (
        "selinuxConfig",
        "preserveConfig",
        "PRESERVE_SELINUX_CONFIG",
        Flag,
    ),
    (
        "iptablesConfig",
        "preserveConfig",
        "PRESERVE_IPTABLES_CONFIG",
        Flag,
    ),
    (
        "firewalldConfig",
        "bypassFirewalldWarning",
        "BYPASS_FIREWALLD_WARNING",
        Flag,
    ),
    (
        "firewalldConfig",
        "disableFirewalld",
        "DISABLE_FIREWALLD",
        Flag,
    ),
    (
        "firewalldConfig",
        "hardFailOnFirewalld",
        "HARD_FAIL_ON_FIREWALLD",
        Flag,
    ),
    (
        "firewalldConfig",
        "preserveConfig",
        "PRESERVE_FIREWALLD_CONFIG",
        Flag,
    ),
    (
        "ekco",
        "minReadyMasterNodeCount",
        "EKCO_MIN_READY_MASTER_NODE_COUNT",
        Number,
    ),
    (
        "ekco",
        "minReadyWorkerNodeCount",
        "EKCO_MIN_READY_WORKER_NODE_COUNT",
        Number,
    ),
    (
        "ekco",
        "nodeUnreachableToleration",
        "EKCO_NODE_UNREACHABLE_TOLERATION_DURATION",
        Text,
    ),
    (
        "ekco",
        "rookShouldUseAllNodes",
        "EKCO_ROOK_SHOULD_USE_ALL_NODES",
        Flag,
    ),
    (
        "ekco",
        "rookShouldDisableReconcileMDSPlacement",
        "EKCO_ROOK_SHOULD_DISABLE_RECONCILE_MDS_PLACEMENT",
        Flag,
    ),
    (
        "ekco",
        "rookShouldDisableReconcileCephCSIResources",
        "EKCO_ROOK_SHOULD_DISABLE_RECONCILE_CEPH_CSI_RESOURCES",
        Flag,
    ),
    ("ekco", "s3Override", "EKCO_S3_OVERRIDE", Text),
    (
        "ekco",
        "shouldDisableRebootServices",
        "EKCO_SHOULD_DISABLE_REBOOT_SERVICE",
        Flag,
    ),
    (
        "ekco",
        "shouldDisableClearNodes",
        "EKCO_SHOULD_DISABLE_CLEAR_NODES",
        Flag,
    ),
    (
        "ekco",
        "shouldEnablePurgeNodes",
        "EKCO_SHOULD_ENABLE_PURGE_NODES",
        Flag,
    ),
    ("ekco", "version", "EKCO_VERSION", Text),
    (
        "ekco",
        "autoUpgradeSchedule",
        "EKCO_AUTO_UPGRADE_SCHEDULE",
        Text,
    ),
    (
        "ekco",
        "enableInternalLoadBalancer",
        "EKCO_ENABLE_INTERNAL_LOAD_BALANCER",
        Flag,
    ),
    (
        "ekco",
        "podImageOverrides",
        "EKCO_POD_IMAGE_OVERRIDES",
        Joined,
    ),
    (
        "ekco",
        "shouldDisableRestartFailedEnvoyPods",
        "EKCO_SHOULD_DISABLE_RESTART_FAILED_ENVOY_PODS",
        Flag,
    ),
    (
        "ekco",
        "envoyPodsNotReadyDuration",
        "EKCO_ENVOY_PODS_NOT_READY_DURATION",
        Text,
    ),
    (
        "ekco",
        "minioShouldDisableManagement",
        "EKCO_MINIO_SHOULD_DISABLE_MANAGEMENT",
        Flag,
    ),
    ("containerd", "s3Override", "CONTAINERD_S3_OVERRIDE", Text),
    ("containerd", "tomlConfig", "CONTAINERD_TOML_CONFIG", Text),
    (
        "containerd",
        "preserveConfig",
        "CONTAINERD_PRESERVE_CONFIG",
        Flag,
    ),
    ("containerd", "version", "CONTAINERD_VERSION", Text),
    ("collectd", "s3Override", "COLLECTD_S3_OVERRIDE", Text),
    ("collectd", "version", "COLLECTD_VERSION", Text),
    (
        "certManager",
        "s3Override",
        "CERT_MANAGER_S3_OVERRIDE",
        Text,
    ),
    ("certManager", "version", "CERT_MANAGER_VERSION", Text),
    (
        "metricsServer",
        "s3Override",
        "METRICS_SERVER_S3_OVERRIDE",
        Text,
    ),
    ("metricsServer", "version", "METRICS_SERVER_VERSION", Text),
    ("helm", "helmfileSpec", "HELM_HELMFILE_SPEC", Text),
    ("helm", "additionalImages", "HELM_ADDITIONAL_IMAGES", Joined),
    ("longhorn", "s3Override", "LONGHORN_S3_OVERRIDE", Text),
    (
        "longhorn",
        "storageOverProvisioningPercentage",
        "LONGHORN_STORAGE_OVER_PROVISIONING_PERCENTAGE",
        Number,
    ),
    ("longhorn", "version", "LONGHORN_VERSION", Text),
    ("longhorn", "uiBindPort", "LONGHORN_UI_BIND_PORT", Number),
    (
        "longhorn",
        "uiReplicaCount",
        "LONGHORN_UI_REPLICA_COUNT",
        Number,
    ),
    ("sonobuoy", "s3Override", "SONOBUOY_S3_OVERRIDE", Text),
    ("sonobuoy", "version", "SONOBUOY_VERSION", Text),
    ("ufwConfig", "bypassUFWWarning", "BYPASS_UFW_WARNING", Flag),
    ("ufwConfig", "disableUFW", "DISABLE_UFW", Flag),
    ("ufwConfig", "hardFailOnUFW", "HARD_FAIL_ON_UFW", Flag),
    ("goldpinger", "s3Override", "GOLDPINGER_S3_OVERRIDE", Text),
    ("goldpinger", "version", "GOLDPINGER_VERSION", Text),
    ("aws", "s3Override", "AWS_S3_OVERRIDE", Text),
    ("aws", "version", "AWS_VERSION", Text),
    (
        "aws",
        "excludeStorageClass",
        "AWS_EXCLUDE_STORAGE_CLASS",
        Flag,
    ),
];

/// The variable kURL's conversion gives a field written `value` (or not written), by `rule`.
fn expected(rule: Rule, value: Option<&Value>) -> String {
    let value = value.filter(|value| !value.is_null());
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match rule {
        Text => value.map(text).unwrap_or_default(),
        Cidr => value.map(text).unwrap_or_default().replace('/', ""),
        Flag => if value == Some(&Value::Bool(true)) {
            "1"
        } else {
            ""
        }
        .into(),
        FlagDefaultOn => if value == Some(&Value::Bool(false)) {
            ""
        } else {
            "1"
        }
        .into(),
        OneOrZero => if value == Some(&Value::Bool(false)) {
            "0"
        } else {
            "1"
        }
        .into(),
        Number => match value.and_then(Value::as_i64) {
            None | Some(0) => String::new(),
            Some(number) => number.to_string(),
        },
        Joined => value
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|item| item.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        Empty => String::new(),
    }
}

/// The environment a hook saw, from `env -0`.
fn read_environment(path: &Path) -> BTreeMap<String, String> {
    fs_err::read(path)
        .unwrap()
        .split(|byte| *byte == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (name, value) = entry.split_once('=')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

#[test]
fn every_field_of_every_kurl_spec_reaches_hooks_as_kurl_names_it() {
    let specs = kurl_specs::specs();
    let mut compared = 0;
    for (file, text) in &specs {
        let document: Value = serde_norway::from_str(text).unwrap();
        let spec = document["spec"].as_object().unwrap();
        let dump_dir = tempfile::tempdir().unwrap();
        let dump = dump_dir.path().join("environment");
        let (dist, versions) = kurl_specs::dist_for(spec, |name, _| {
            format!(
                "function {name}() {{ [ -s \"$DUMP\" ] || env -0 > \"$DUMP\"; }}\nfunction containerd_install() {{ {name}; }}\n"
            )
        });
        let spec_path = dist.addons.root().join("spec.yaml");
        fs_err::write(&spec_path, text).unwrap();
        let node = Node::new().env("DUMP", &dump);
        // Host preflights are not what this compares, and their etcd disk latency probe (some
        // 10,000 synced writes) would take seconds for each spec.
        succeeded(&node.install(
            &spec_path,
            &dist.url(),
            &["--param", "exclude-builtin-host-preflights"],
        ));
        let environment = read_environment(&dump);
        let name = file.file_name().unwrap().to_string_lossy();

        for (key, field, variable, rule) in CONVERSION {
            let section = spec.get(*key);
            let value = section.and_then(|section| section.get(*field));
            let want = if *field == "version" && section.is_some() {
                versions[*key].clone()
            } else {
                let written = |key: &str, field: &str, rule| {
                    expected(rule, spec.get(key).and_then(|section| section.get(field)))
                };
                match *variable {
                    // Derived as kURL derives them.
                    "HA_CLUSTER"
                        if !written("kubernetes", "loadBalancerAddress", Text).is_empty() =>
                    {
                        "1".into()
                    }
                    "DISABLE_FIREWALLD"
                        if written("firewalldConfig", "preserveConfig", Flag) == "1" =>
                    {
                        String::new()
                    }
                    "DISABLE_SELINUX"
                        if written("selinuxConfig", "preserveConfig", Flag) == "1" =>
                    {
                        String::new()
                    }
                    "KUBERNETES_CLUSTER_NAME" if expected(Text, value).is_empty() => {
                        "kubernetes".into()
                    }
                    // kURL's install.sh sets MASTER on the first node.
                    "MASTER" => "1".into(),
                    // The script flag given above, merged into the spec as kURL merges it.
                    "EXCLUDE_BUILTIN_HOST_PREFLIGHTS" => "1".into(),
                    _ => expected(*rule, value),
                }
            };
            // kurl.noProxy is given only when true: empty, it would wipe the node's NO_PROXY.
            if *variable == "NO_PROXY" && want.is_empty() {
                assert_eq!(
                    environment.get("NO_PROXY"),
                    std::env::var("NO_PROXY").ok().as_ref(),
                    "{name}"
                );
                compared += 1;
                continue;
            }
            // Left empty by the spec, the helper library discovers these as kURL's discover
            // does (the node's address, the proxy of its environment).
            if matches!(*variable, "PRIVATE_ADDRESS" | "PROXY_ADDRESS") && want.is_empty() {
                compared += 1;
                continue;
            }
            let got = environment
                .get(*variable)
                .unwrap_or_else(|| panic!("{name}: spec.{key}.{field} gave no ${variable}"));
            assert_eq!(got, &want, "{name}: spec.{key}.{field} as ${variable}");
            compared += 1;
        }
    }
    assert_eq!(compared, specs.len() * CONVERSION.len());
}
