//! kURL's Installer type, field by field: the fields each of kURL's spec keys takes
//! (replicatedhq/kurlkinds, `installer_types.go`), the Go type each is, and the variable kURL's
//! spec-to-bash conversion (`kurl_util/cmd/yamltobash`) gives hooks for it, with its value
//! rules. A spec is checked against it (an unknown field or a value of the wrong type is
//! refused, naming the nearest field), and hooks get every field under kURL's name.
//!
//! Where kURL's conversion is not deterministic, Berth takes the one reading kURL's scripts
//! expect: `HA_CLUSTER` is 1 when `kubernetes.HACluster` is true or `loadBalancerAddress` is
//! set (kURL's two writers race in Go map order), and `velero.namespace` is `VELERO_NAMESPACE`,
//! the variable velero's script reads (kURL's table sends it to `VELERO_LOCAL_BUCKET`, where it
//! races with `localBucket`).

use serde_json::{Map, Value};

/// How a field's value is written and becomes its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A string, as written (numbers are taken as their text, as YAML may read `1.24`).
    Text,
    /// A string of a CIDR range: every `/` is dropped (`/22` → `22`).
    CidrRange,
    /// `1` for true, empty for false or unset.
    Bool,
    /// As [`FieldKind::Bool`], but `1` unless the spec writes `false`.
    BoolDefaultTrue,
    /// `1` unless the spec writes `false`, which gives `0` (weave's `noMasqLocal`).
    BoolOneOrZero,
    /// A whole number; 0 and unset are both empty.
    Integer,
    /// A list of strings, joined with `,`.
    List,
    /// A list of command lines (`[[chcon, …], …]`), read by kURL's own tools, not by hooks.
    Commands,
    /// A whole document kURL hands to another tool (`kurl.hostPreflights`).
    Document,
}

/// One field of kURL's Installer type.
#[derive(Debug, Clone, Copy)]
pub struct KurlField {
    /// The spec key it is under (`kubernetes`, `kurl`, `certManager`, …).
    pub key: &'static str,
    /// Its name in the spec.
    pub field: &'static str,
    /// The variable hooks see it as; `None` where kURL gives hooks none.
    pub variable: Option<&'static str>,
    pub kind: FieldKind,
}

const fn field(
    key: &'static str,
    field: &'static str,
    variable: Option<&'static str>,
    kind: FieldKind,
) -> KurlField {
    KurlField {
        key,
        field,
        variable,
        kind,
    }
}

use FieldKind::{
    Bool, BoolDefaultTrue, BoolOneOrZero, CidrRange, Commands, Document, Integer, List, Text,
};

/// Every field of every key of kURL's Installer type, in the type's order: a table, one
/// field a line (rustfmt would spread most over six lines).
#[rustfmt::skip]
pub const KURL_FIELDS: &[KurlField] = &[
    field("kubernetes", "bootstrapToken", Some("BOOTSTRAP_TOKEN"), Text),
    field("kubernetes", "bootstrapTokenTTL", Some("BOOTSTRAP_TOKEN_TTL"), Text),
    field("kubernetes", "certKey", Some("CERT_KEY"), Text),
    field("kubernetes", "controlPlane", Some("MASTER"), Bool),
    field("kubernetes", "HACluster", Some("HA_CLUSTER"), Bool),
    field("kubernetes", "containerLogMaxSize", Some("CONTAINER_LOG_MAX_SIZE"), Text),
    field("kubernetes", "containerLogMaxFiles", Some("CONTAINER_LOG_MAX_FILES"), Integer),
    field("kubernetes", "maxPodsPerNode", Some("KUBERNETES_MAX_PODS_PER_NODE"), Integer),
    field("kubernetes", "kubeadmToken", Some("KUBEADM_TOKEN"), Text),
    field("kubernetes", "kubeadmTokenCAHash", Some("KUBEADM_TOKEN_CA_HASH"), Text),
    field("kubernetes", "loadBalancerAddress", Some("LOAD_BALANCER_ADDRESS"), Text),
    field("kubernetes", "loadBalancerUseFirstPrimary", Some("KUBERNETES_LOAD_BALANCER_USE_FIRST_PRIMARY"), Bool),
    field("kubernetes", "masterAddress", Some("KUBERNETES_MASTER_ADDR"), Text),
    field("kubernetes", "s3Override", Some("SERVICE_S3_OVERRIDE"), Text),
    field("kubernetes", "serviceCIDR", Some("SERVICE_CIDR"), Text),
    field("kubernetes", "serviceCidrRange", Some("SERVICE_CIDR_RANGE"), CidrRange),
    field("kubernetes", "useStandardNodePortRange", Some("USE_STANDARD_PORT_RANGE"), Bool),
    field("kubernetes", "kubeReserved", Some("KUBE_RESERVED"), Bool),
    field("kubernetes", "evictionThresholdResources", Some("EVICTION_THRESHOLD"), Text),
    field("kubernetes", "systemReservedResources", Some("SYSTEM_RESERVED"), Text),
    field("kubernetes", "version", Some("KUBERNETES_VERSION"), Text),
    field("kubernetes", "cisCompliance", Some("KUBERNETES_CIS_COMPLIANCE"), Bool),
    field("kubernetes", "clusterName", Some("KUBERNETES_CLUSTER_NAME"), Text),
    field("kubernetes", "initIgnorePreflightErrors", Some("KUBERNETES_INIT_IGNORE_PREFLIGHT_ERRORS"), Text),
    field("kubernetes", "upgradeIgnorePreflightErrors", Some("KUBERNETES_UPGRADE_IGNORE_PREFLIGHT_ERRORS"), Text),
    field("rke2", "version", None, Text),
    field("k3s", "version", None, Text),
    field("docker", "bypassStorageDriverWarning", Some("BYPASS_STORAGEDRIVER_WARNINGS"), Bool),
    field("docker", "daemonConfig", None, Text),
    field("docker", "dockerRegistryIP", Some("DOCKER_REGISTRY_IP"), Text),
    field("docker", "hardFailOnLoopback", Some("HARD_FAIL_ON_LOOPBACK"), BoolDefaultTrue),
    field("docker", "noCEOnEE", Some("NO_CE_ON_EE"), Bool),
    field("docker", "preserveConfig", Some("PRESERVE_DOCKER_CONFIG"), Bool),
    field("docker", "s3Override", Some("DOCKER_S3_OVERRRIDE"), Text),
    field("docker", "version", Some("DOCKER_VERSION"), Text),
    field("weave", "isEncryptionDisabled", Some("ENCRYPT_NETWORK"), Bool),
    field("weave", "podCIDR", Some("POD_CIDR"), Text),
    field("weave", "podCidrRange", Some("POD_CIDR_RANGE"), CidrRange),
    field("weave", "s3Override", Some("WEAVE_S3_OVERRIDE"), Text),
    field("weave", "version", Some("WEAVE_VERSION"), Text),
    field("weave", "noMasqLocal", Some("NO_MASQ_LOCAL"), BoolOneOrZero),
    field("flannel", "podCIDR", Some("FLANNEL_POD_CIDR"), Text),
    field("flannel", "podCIDRRange", Some("FLANNEL_POD_CIDR_RANGE"), CidrRange),
    field("flannel", "s3Override", Some("FLANNEL_S3_OVERRIDE"), Text),
    field("flannel", "version", Some("FLANNEL_VERSION"), Text),
    field("antrea", "isEncryptionDisabled", Some("ANTREA_DISABLE_ENCRYPTION"), Bool),
    field("antrea", "podCIDR", Some("ANTREA_POD_CIDR"), Text),
    field("antrea", "podCidrRange", Some("ANTREA_POD_CIDR_RANGE"), CidrRange),
    field("antrea", "s3Override", Some("ANTREA_S3_OVERRIDE"), Text),
    field("antrea", "version", Some("ANTREA_VERSION"), Text),
    field("calico", "s3Override", Some("CALICO_S3_OVERRIDE"), Text),
    field("calico", "version", Some("CALICO_VERSION"), Text),
    field("contour", "s3Override", Some("CONTOUR_S3_OVERRIDE"), Text),
    field("contour", "version", Some("CONTOUR_VERSION"), Text),
    field("contour", "tlsMinimumProtocolVersion", Some("CONTOUR_TLS_MINIMUM_PROTOCOL_VERSION"), Text),
    field("contour", "httpPort", Some("CONTOUR_HTTP_PORT"), Integer),
    field("contour", "httpsPort", Some("CONTOUR_HTTPS_PORT"), Integer),
    field("rook", "blockDeviceFilter", Some("ROOK_BLOCK_DEVICE_FILTER"), Text),
    field("rook", "nodes", Some("ROOK_NODES"), Text),
    field("rook", "bypassUpgradeWarning", Some("ROOK_BYPASS_UPGRADE_WARNING"), Bool),
    field("rook", "cephReplicaCount", Some("CEPH_POOL_REPLICAS"), Integer),
    field("rook", "isBlockStorageEnabled", Some("ROOK_BLOCK_STORAGE_ENABLED"), Bool),
    field("rook", "isSharedFilesystemDisabled", Some("ROOK_SHARED_FILESYSTEM_DISABLED"), Bool),
    field("rook", "s3Override", Some("ROOK_S3_OVERRIDE"), Text),
    field("rook", "storageClassName", Some("STORAGE_CLASS"), Text),
    field("rook", "hostpathRequiresPrivileged", Some("ROOK_HOSTPATH_REQUIRES_PRIVILEGED"), Bool),
    field("rook", "minimumNodeCount", Some("ROOK_MINIMUM_NODE_COUNT"), Integer),
    field("rook", "version", Some("ROOK_VERSION"), Text),
    field("registry", "publishPort", Some("REGISTRY_PUBLISH_PORT"), Integer),
    field("registry", "s3Override", Some("REGISTRY_S3_OVERRIDE"), Text),
    field("registry", "version", Some("REGISTRY_VERSION"), Text),
    field("prometheus", "s3Override", Some("PROMETHEUS_S3_OVERRIDE"), Text),
    field("prometheus", "version", Some("PROMETHEUS_VERSION"), Text),
    field("prometheus", "serviceType", Some("PROMETHEUS_SERVICE_TYPE"), Text),
    field("fluentd", "fullEFKStack", Some("FLUENTD_FULL_EFK_STACK"), Bool),
    field("fluentd", "s3Override", Some("FLUENTD_S3_OVERRIDE"), Text),
    field("fluentd", "version", Some("FLUENTD_VERSION"), Text),
    field("fluentd", "fluentdConfPath", Some("FLUENTD_CONF_FILE"), Text),
    field("kotsadm", "applicationNamespace", Some("KOTSADM_APPLICATION_NAMESPACES"), Text),
    field("kotsadm", "applicationSlug", Some("KOTSADM_APPLICATION_SLUG"), Text),
    field("kotsadm", "applicationVersionLabel", Some("KOTSADM_APPLICATION_VERSION_LABEL"), Text),
    field("kotsadm", "hostname", Some("KOTSADM_HOSTNAME"), Text),
    field("kotsadm", "s3Override", Some("KOTSADM_S3_OVERRIDE"), Text),
    field("kotsadm", "disableS3", Some("KOTSADM_DISABLE_S3"), Bool),
    field("kotsadm", "uiBindPort", Some("KOTSADM_UI_BIND_PORT"), Integer),
    field("kotsadm", "version", Some("KOTSADM_VERSION"), Text),
    field("velero", "s3Override", Some("VELERO_S3_OVERRIDE"), Text),
    field("velero", "namespace", Some("VELERO_NAMESPACE"), Text),
    field("velero", "disableCLI", Some("VELERO_DISABLE_CLI"), Bool),
    field("velero", "disableRestic", Some("VELERO_DISABLE_RESTIC"), Bool),
    field("velero", "localBucket", Some("VELERO_LOCAL_BUCKET"), Text),
    field("velero", "resticRequiresPrivileged", Some("VELERO_RESTIC_REQUIRES_PRIVILEGED"), Bool),
    field("velero", "resticTimeout", Some("VELERO_RESTIC_TIMEOUT"), Text),
    field("velero", "serverFlags", Some("VELERO_SERVER_FLAGS"), List),
    field("velero", "version", Some("VELERO_VERSION"), Text),
    field("minio", "claimSize", Some("MINIO_CLAIM_SIZE"), Text),
    field("minio", "namespace", Some("MINIO_NAMESPACE"), Text),
    field("minio", "s3Override", Some("MINIO_S3_OVERRIDE"), Text),
    field("minio", "hostPath", Some("MINIO_HOSTPATH"), Text),
    field("minio", "version", Some("MINIO_VERSION"), Text),
    field("openebs", "cstorStorageClassName", Some("OPENEBS_CSTOR_STORAGE_CLASS"), Text),
    field("openebs", "isCstorEnabled", Some("OPENEBS_CSTOR"), Bool),
    field("openebs", "isLocalPVEnabled", Some("OPENEBS_LOCALPV"), Bool),
    field("openebs", "localPVStorageClassName", Some("OPENEBS_LOCALPV_STORAGE_CLASS"), Text),
    field("openebs", "namespace", Some("OPENEBS_NAMESPACE"), Text),
    field("openebs", "s3Override", Some("OPENEBS_S3_OVERRIDE"), Text),
    field("openebs", "version", Some("OPENEBS_VERSION"), Text),
    field("kurl", "additionalNoProxyAddresses", Some("ADDITIONAL_NO_PROXY_ADDRESSES"), List),
    field("kurl", "airgap", Some("AIRGAP"), Bool),
    field("kurl", "hostnameCheck", Some("HOSTNAME_CHECK"), Text),
    field("kurl", "ignoreRemoteLoadImagesPrompt", Some("KURL_IGNORE_REMOTE_LOAD_IMAGES_PROMPT"), Bool),
    field("kurl", "ignoreRemoteUpgradePrompt", Some("KURL_IGNORE_REMOTE_UPGRADE_PROMPT"), Bool),
    field("kurl", "installerVersion", None, Text),
    field("kurl", "licenseURL", Some("LICENSE_URL"), Text),
    field("kurl", "nameserver", Some("NAMESERVER"), Text),
    field("kurl", "noProxy", Some("NO_PROXY"), Bool),
    field("kurl", "hostPreflights", Some("HOST_PREFLIGHTS"), Document),
    field("kurl", "hostPreflightIgnore", Some("HOST_PREFLIGHT_IGNORE"), Bool),
    field("kurl", "hostPreflightEnforceWarnings", Some("HOST_PREFLIGHT_ENFORCE_WARNINGS"), Bool),
    field("kurl", "privateAddress", Some("PRIVATE_ADDRESS"), Text),
    field("kurl", "proxyAddress", Some("PROXY_ADDRESS"), Text),
    field("kurl", "publicAddress", Some("PUBLIC_ADDRESS"), Text),
    field("kurl", "skipSystemPackageInstall", Some("SKIP_SYSTEM_PACKAGE_INSTALL"), Bool),
    field("kurl", "excludeBuiltinHostPreflights", Some("EXCLUDE_BUILTIN_HOST_PREFLIGHTS"), Bool),
    field("kurl", "ipv6", Some("IPV6_ONLY"), Bool),
    field("selinuxConfig", "chconCmds", None, Commands),
    field("selinuxConfig", "disableSelinux", Some("DISABLE_SELINUX"), Bool),
    field("selinuxConfig", "preserveConfig", Some("PRESERVE_SELINUX_CONFIG"), Bool),
    field("selinuxConfig", "selinux", None, Text),
    field("selinuxConfig", "semanageCmds", None, Commands),
    field("selinuxConfig", "type", None, Text),
    field("iptablesConfig", "iptablesCmds", None, Commands),
    field("iptablesConfig", "preserveConfig", Some("PRESERVE_IPTABLES_CONFIG"), Bool),
    field("firewalldConfig", "bypassFirewalldWarning", Some("BYPASS_FIREWALLD_WARNING"), Bool),
    field("firewalldConfig", "disableFirewalld", Some("DISABLE_FIREWALLD"), Bool),
    field("firewalldConfig", "firewalld", None, Text),
    field("firewalldConfig", "firewalldCmds", None, Commands),
    field("firewalldConfig", "hardFailOnFirewalld", Some("HARD_FAIL_ON_FIREWALLD"), Bool),
    field("firewalldConfig", "preserveConfig", Some("PRESERVE_FIREWALLD_CONFIG"), Bool),
    field("ekco", "minReadyMasterNodeCount", Some("EKCO_MIN_READY_MASTER_NODE_COUNT"), Integer),
    field("ekco", "minReadyWorkerNodeCount", Some("EKCO_MIN_READY_WORKER_NODE_COUNT"), Integer),
    field("ekco", "nodeUnreachableToleration", Some("EKCO_NODE_UNREACHABLE_TOLERATION_DURATION"), Text),
    field("ekco", "rookShouldUseAllNodes", Some("EKCO_ROOK_SHOULD_USE_ALL_NODES"), Bool),
    field("ekco", "rookShouldDisableReconcileMDSPlacement", Some("EKCO_ROOK_SHOULD_DISABLE_RECONCILE_MDS_PLACEMENT"), Bool),
    field("ekco", "rookShouldDisableReconcileCephCSIResources", Some("EKCO_ROOK_SHOULD_DISABLE_RECONCILE_CEPH_CSI_RESOURCES"), Bool),
    field("ekco", "s3Override", Some("EKCO_S3_OVERRIDE"), Text),
    field("ekco", "shouldDisableRebootServices", Some("EKCO_SHOULD_DISABLE_REBOOT_SERVICE"), Bool),
    field("ekco", "shouldDisableClearNodes", Some("EKCO_SHOULD_DISABLE_CLEAR_NODES"), Bool),
    field("ekco", "shouldEnablePurgeNodes", Some("EKCO_SHOULD_ENABLE_PURGE_NODES"), Bool),
    field("ekco", "version", Some("EKCO_VERSION"), Text),
    field("ekco", "autoUpgradeSchedule", Some("EKCO_AUTO_UPGRADE_SCHEDULE"), Text),
    field("ekco", "enableInternalLoadBalancer", Some("EKCO_ENABLE_INTERNAL_LOAD_BALANCER"), Bool),
    field("ekco", "podImageOverrides", Some("EKCO_POD_IMAGE_OVERRIDES"), List),
    field("ekco", "shouldDisableRestartFailedEnvoyPods", Some("EKCO_SHOULD_DISABLE_RESTART_FAILED_ENVOY_PODS"), Bool),
    field("ekco", "envoyPodsNotReadyDuration", Some("EKCO_ENVOY_PODS_NOT_READY_DURATION"), Text),
    field("ekco", "minioShouldDisableManagement", Some("EKCO_MINIO_SHOULD_DISABLE_MANAGEMENT"), Bool),
    field("containerd", "s3Override", Some("CONTAINERD_S3_OVERRIDE"), Text),
    field("containerd", "tomlConfig", Some("CONTAINERD_TOML_CONFIG"), Text),
    field("containerd", "preserveConfig", Some("CONTAINERD_PRESERVE_CONFIG"), Bool),
    field("containerd", "version", Some("CONTAINERD_VERSION"), Text),
    field("collectd", "s3Override", Some("COLLECTD_S3_OVERRIDE"), Text),
    field("collectd", "version", Some("COLLECTD_VERSION"), Text),
    field("certManager", "s3Override", Some("CERT_MANAGER_S3_OVERRIDE"), Text),
    field("certManager", "version", Some("CERT_MANAGER_VERSION"), Text),
    field("metricsServer", "s3Override", Some("METRICS_SERVER_S3_OVERRIDE"), Text),
    field("metricsServer", "version", Some("METRICS_SERVER_VERSION"), Text),
    field("helm", "helmfileSpec", Some("HELM_HELMFILE_SPEC"), Text),
    field("helm", "additionalImages", Some("HELM_ADDITIONAL_IMAGES"), List),
    field("longhorn", "s3Override", Some("LONGHORN_S3_OVERRIDE"), Text),
    field("longhorn", "storageOverProvisioningPercentage", Some("LONGHORN_STORAGE_OVER_PROVISIONING_PERCENTAGE"), Integer),
    field("longhorn", "version", Some("LONGHORN_VERSION"), Text),
    field("longhorn", "uiBindPort", Some("LONGHORN_UI_BIND_PORT"), Integer),
    field("longhorn", "uiReplicaCount", Some("LONGHORN_UI_REPLICA_COUNT"), Integer),
    field("sonobuoy", "s3Override", Some("SONOBUOY_S3_OVERRIDE"), Text),
    field("sonobuoy", "version", Some("SONOBUOY_VERSION"), Text),
    field("ufwConfig", "bypassUFWWarning", Some("BYPASS_UFW_WARNING"), Bool),
    field("ufwConfig", "disableUFW", Some("DISABLE_UFW"), Bool),
    field("ufwConfig", "hardFailOnUFW", Some("HARD_FAIL_ON_UFW"), Bool),
    field("goldpinger", "s3Override", Some("GOLDPINGER_S3_OVERRIDE"), Text),
    field("goldpinger", "version", Some("GOLDPINGER_VERSION"), Text),
    field("aws", "s3Override", Some("AWS_S3_OVERRIDE"), Text),
    field("aws", "version", Some("AWS_VERSION"), Text),
    field("aws", "excludeStorageClass", Some("AWS_EXCLUDE_STORAGE_CLASS"), Bool),
];

/// Whether `key` is one of kURL's spec keys.
pub fn is_kurl_key(key: &str) -> bool {
    KURL_FIELDS.iter().any(|field| field.key == key)
}

/// The fields of kURL's spec key `key`.
pub fn fields_of(key: &str) -> impl Iterator<Item = &'static KurlField> + '_ {
    KURL_FIELDS.iter().filter(move |field| field.key == key)
}

/// Checks one field of kURL's spec key `key`: known, and of the field's type. The error names
/// the field and, for an unknown one, the nearest known field.
pub fn check_field(key: &str, name: &str, value: &Value) -> Result<(), String> {
    let Some(known) = fields_of(key).find(|field| field.field == name) else {
        let fields: Vec<&str> = fields_of(key).map(|field| field.field).collect();
        let hint = crate::fields::unknown_field_hint(name, &fields);
        return Err(format!(
            "spec.{key}.{name} is not a field of kURL's `{key}`{hint}"
        ));
    };
    let fits = match known.kind {
        Text | CidrRange => matches!(value, Value::String(_) | Value::Number(_) | Value::Null),
        Bool | BoolDefaultTrue | BoolOneOrZero => matches!(value, Value::Bool(_) | Value::Null),
        Integer => value.is_i64() || value.is_u64() || value.is_null(),
        List => match value {
            Value::Array(items) => items.iter().all(Value::is_string),
            Value::Null => true,
            _ => false,
        },
        Commands => match value {
            Value::Array(lines) => lines.iter().all(|line| {
                line.as_array()
                    .is_some_and(|words| words.iter().all(Value::is_string))
            }),
            Value::Null => true,
            _ => false,
        },
        Document => matches!(value, Value::Object(_) | Value::Null),
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "spec.{key}.{name} is {}, expected {}",
            super::kind_of(value),
            match known.kind {
                Text | CidrRange => "a string",
                Bool | BoolDefaultTrue | BoolOneOrZero => "true or false",
                Integer => "a whole number",
                List => "a list of strings",
                Commands => "a list of commands, each a list of strings",
                Document => "a mapping",
            }
        ))
    }
}

/// The value of `field` as kURL's conversion writes it, from the spec's `value` (`None` when
/// the spec does not give the field).
pub fn render(field: &KurlField, value: Option<&Value>) -> String {
    let value = value.filter(|value| !value.is_null());
    match field.kind {
        Text => value.map(text).unwrap_or_default(),
        CidrRange => value.map(text).unwrap_or_default().replace('/', ""),
        Bool => flag(value == Some(&Value::Bool(true))),
        BoolDefaultTrue => flag(value != Some(&Value::Bool(false))),
        BoolOneOrZero => {
            if value == Some(&Value::Bool(false)) {
                "0".into()
            } else {
                "1".into()
            }
        }
        Integer => match value.and_then(Value::as_i64) {
            Some(0) | None => String::new(),
            Some(number) => number.to_string(),
        },
        List => value
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        Commands | Document => String::new(),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn flag(on: bool) -> String {
    if on { "1".into() } else { String::new() }
}

/// One variable kURL's conversion gives hooks, and the spec field it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KurlVariable {
    pub variable: String,
    pub value: String,
    /// `spec.<key>.<field>`.
    pub origin: String,
}

/// Every variable kURL's conversion gives hooks, for every field of every key of its type,
/// whether or not the spec writes it (as kURL's conversion does: an absent field is empty, or
/// its default), but `NO_PROXY` (`kurl.noProxy`), given only when true. `section(key)` gives what the spec holds under a key. Left out: `<KEY>_VERSION`
/// of the keys the spec asks for (the engine sets it to the resolved version) and `MASTER`
/// (the engine's: 1 on the first node, and on a node joining as a control plane).
pub fn kurl_environment<'a>(
    section: impl Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<KurlVariable> {
    let mut variables = Vec::new();
    for field in KURL_FIELDS {
        let Some(variable) = field.variable else {
            continue;
        };
        let present = section(field.key);
        if variable == "MASTER" || (field.field == "version" && present.is_some()) {
            continue;
        }
        let value = render(field, present.and_then(|map| map.get(field.field)));
        // kURL's `kurl.noProxy` is named NO_PROXY; written empty it would wipe the proxy
        // exceptions the node's environment gives hooks, so it is written only when true.
        if variable == "NO_PROXY" && value.is_empty() {
            continue;
        }
        variables.push(KurlVariable {
            variable: variable.to_string(),
            value,
            origin: format!("spec.{}.{}", field.key, field.field),
        });
    }
    let value_of = |name: &str| {
        variables
            .iter()
            .find(|variable| variable.variable == name)
            .map(|variable| variable.value.clone())
            .unwrap_or_default()
    };
    // kURL's derived values.
    let load_balancer = value_of("LOAD_BALANCER_ADDRESS");
    let preserve_firewalld = value_of("PRESERVE_FIREWALLD_CONFIG") == "1";
    let preserve_selinux = value_of("PRESERVE_SELINUX_CONFIG") == "1";
    let airgap = value_of("AIRGAP") == "1";
    for variable in &mut variables {
        match variable.variable.as_str() {
            "HA_CLUSTER" if !load_balancer.is_empty() => variable.value = "1".into(),
            "DISABLE_FIREWALLD" if preserve_firewalld => variable.value.clear(),
            "DISABLE_SELINUX" if preserve_selinux => variable.value.clear(),
            "KUBERNETES_CLUSTER_NAME" if variable.value.is_empty() => {
                variable.value = "kubernetes".into()
            }
            _ => {}
        }
    }
    if airgap {
        variables.push(KurlVariable {
            variable: "OFFLINE_DOCKER_INSTALL".into(),
            value: "1".into(),
            origin: "spec.kurl.airgap".into(),
        });
    }
    variables
}
