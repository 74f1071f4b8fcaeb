//! An add-on's components and how each is known to work (`health.yaml` in its folder), as the
//! Addon API proposal models an add-on: a set of components, each probed on its own, summed
//! up as Available or Degraded. The builder checks the file when it packages the add-on; the
//! node renders its values with the add-on's variables and probes each component.
//!
//! ```yaml
//! components:
//!   - name: container
//!     container:
//!       matchLabels:
//!         berth.addon: demo
//!   - name: answers
//!     http:
//!       url: http://127.0.0.1:{{ port }}/
//!       status: 200
//!       bodyContains: demo
//!     timeout: 3s
//!     required: true
//! ```
//!
//! Kinds: `container` (by name or labels, in containerd or docker), `systemd` (a unit),
//! `process` (a pid file), `tcp` (an address that accepts), `http` (a URL, its status, and
//! text its body holds), `command` (an argument list that exits 0), and `kubernetes`
//! (objects of one kind selected by name or `matchLabels`, judged by their own conditions).
//!
//! `where` says on which nodes a component lives, so that no node waits for what cannot
//! appear on it ([`Component::judged_on`]): `every-node`, `primary` (the node that runs the
//! add-on's install hook: kURL runs it on the first node alone), `control-plane`, or
//! `cluster` (one for the whole cluster, judged once, on the primary). Unsaid, a `kubernetes`
//! component is the cluster's and any other lives where the add-on's hooks ran: on the
//! primary, and on a joining node only if its `_join` hook ran there.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The file's name in an add-on folder.
pub const HEALTH_FILE: &str = "health.yaml";
/// The largest file read: a few components fit in a few KiB.
pub const MAX_HEALTH_BYTES: usize = 64 * 1024;
/// The most components one add-on lists.
pub const MAX_COMPONENTS: usize = 64;
/// A probe's time when its component gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a probe may be given: status must stay quick.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// The containerd namespace a container is looked for in: Kubernetes', where Berth loads images.
pub const CONTAINERD_NAMESPACE: &str = "k8s.io";
/// The Kubernetes kinds whose conditions Berth reads.
pub const KUBERNETES_KINDS: [&str; 4] = [
    "Deployment",
    "DaemonSet",
    "StatefulSet",
    "CustomResourceDefinition",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthFile {
    pub components: Vec<Component>,
}

/// One component: its name, whether the add-on needs it, and the one probe that tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub name: String,
    /// An add-on is Available only while every required component is healthy; an optional
    /// one that is not makes it Degraded alone.
    #[serde(default = "required_by_default")]
    pub required: bool,
    /// How long the probe may take (`3s`, `500ms`), at most [`MAX_TIMEOUT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The nodes it lives on; unsaid, what the add-on's hooks imply ([`Component::judged_on`]).
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd: Option<SystemdProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesProbe>,
}

fn required_by_default() -> bool {
    true
}

/// The nodes a component lives on (`where:` in health.yaml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every node the add-on is in place on.
    EveryNode,
    /// The node that runs the add-on's install hook: the cluster's first node.
    Primary,
    /// The primary and the nodes that joined the control plane.
    ControlPlane,
    /// One for the whole cluster (its objects in the API server), judged once, on the primary.
    Cluster,
}

impl Placement {
    fn said(self) -> &'static str {
        match self {
            Placement::EveryNode => "on every node",
            Placement::Primary => "on the primary",
            Placement::ControlPlane => "on the control plane's nodes",
            Placement::Cluster => "once for the cluster, on the primary",
        }
    }
}

/// A node's part in the cluster, as far as where components live goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRole {
    /// The node the cluster was installed on (not joined): it runs install hooks.
    Primary,
    /// A node that joined the control plane.
    ControlPlane,
    /// A node that joined as a worker.
    Worker,
}

/// Which of an add-on's own hooks (those that make things) ran on a node when its version was
/// applied there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HooksRan {
    /// Its install hook (or, for the container runtime, its install hook on a joining node).
    Install,
    /// Its `_join` hook.
    Join,
    /// Neither: kURL's add-ons without a `_join` hook do nothing on a joining node.
    Nothing,
}

/// A container, by its name or by labels (every one given must match), running in the
/// node's runtime (containerd or docker, as images are loaded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerProbe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// containerd's namespace ([`CONTAINERD_NAMESPACE`] unless given); docker has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// A systemd unit that is active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SystemdProbe {
    pub unit: String,
}

/// A process whose pid a file holds, alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessProbe {
    pub pid_file: String,
}

/// A `host:port` that accepts a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpProbe {
    pub address: String,
}

/// A URL answering `status` (200 unless given), its body holding `bodyContains` if given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpProbe {
    pub url: String,
    #[serde(default = "ok_status")]
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_contains: Option<String>,
    /// Accept any certificate (a component serving a self-signed one).
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

fn ok_status() -> u16 {
    200
}

/// A program and its arguments (no shell), healthy when it exits 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandProbe {
    pub run: Vec<String>,
}

/// Kubernetes objects of one kind, by name or `matchLabels`, read with `kubectl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesProbe {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// The probe a component names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe<'a> {
    Container(&'a ContainerProbe),
    Systemd(&'a SystemdProbe),
    Process(&'a ProcessProbe),
    Tcp(&'a TcpProbe),
    Http(&'a HttpProbe),
    Command(&'a CommandProbe),
    Kubernetes(&'a KubernetesProbe),
}

impl Probe<'_> {
    /// The kind's name, as the file spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Probe::Container(_) => "container",
            Probe::Systemd(_) => "systemd",
            Probe::Process(_) => "process",
            Probe::Tcp(_) => "tcp",
            Probe::Http(_) => "http",
            Probe::Command(_) => "command",
            Probe::Kubernetes(_) => "kubernetes",
        }
    }
}

/// When a component is checked: as written (its values may still hold `{{ … }}`, checked once
/// the node fills them in) or rendered (every value final).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Written,
    Rendered,
}

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
}

impl Component {
    /// The one probe the component names (checked by [`HealthFile::parse`]).
    pub fn probe(&self) -> Option<Probe<'_>> {
        let probes = self.probes();
        match probes[..] {
            [probe] => Some(probe),
            _ => None,
        }
    }

    /// Checks that the component names exactly one probe, and that probe's values.
    pub fn check(&self, stage: Stage) -> Result<(), String> {
        let probes = self.probes();
        let [probe] = probes[..] else {
            let kinds: Vec<&str> = probes.iter().map(Probe::kind).collect();
            return Err(format!(
                "names {} probes ({kinds:?}); give exactly one of container, systemd, \
                 process, tcp, http, command, kubernetes",
                kinds.len()
            ));
        };
        check_probe(probe, stage)
    }

    fn probes(&self) -> Vec<Probe<'_>> {
        [
            self.container.as_ref().map(Probe::Container),
            self.systemd.as_ref().map(Probe::Systemd),
            self.process.as_ref().map(Probe::Process),
            self.tcp.as_ref().map(Probe::Tcp),
            self.http.as_ref().map(Probe::Http),
            self.command.as_ref().map(Probe::Command),
            self.kubernetes.as_ref().map(Probe::Kubernetes),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// Whether the component is judged on a node of `role` where `ran` of the add-on's hooks
    /// ran; if not, where it is judged instead, in words. Unsaid, a `kubernetes` component
    /// is the cluster's, and any other lives where a hook of the add-on that makes things ran.
    pub fn judged_on(&self, role: NodeRole, ran: HooksRan) -> Result<(), String> {
        let placement = self.placement.or_else(|| {
            matches!(self.probe(), Some(Probe::Kubernetes(_))).then_some(Placement::Cluster)
        });
        let here = match placement {
            Some(Placement::EveryNode) => true,
            Some(Placement::Primary | Placement::Cluster) => role == NodeRole::Primary,
            Some(Placement::ControlPlane) => role != NodeRole::Worker,
            None => ran != HooksRan::Nothing,
        };
        match (here, placement) {
            (true, _) => Ok(()),
            (false, Some(placement)) => Err(placement.said().into()),
            (false, None) => Err(
                "where its install hook ran, on the primary (no hook of it that makes \
                 anything ran on this node)"
                    .into(),
            ),
        }
    }

    /// The probe's time: its `timeout`, else [`DEFAULT_TIMEOUT`].
    pub fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|text| parse_duration(text).ok())
            .unwrap_or(DEFAULT_TIMEOUT)
    }
}

impl HealthFile {
    /// Reads and checks a health file; `file` names it in errors. Values may still hold
    /// `{{ … }}` (rendered on the node): only their shape is checked here.
    pub fn parse(file: &str, text: &str) -> Result<Self, HealthError> {
        let invalid = |message: String| HealthError::Invalid {
            file: file.to_string(),
            message,
        };
        if text.len() > MAX_HEALTH_BYTES {
            return Err(invalid(format!(
                "{} bytes, more than the {MAX_HEALTH_BYTES} a health file may be",
                text.len()
            )));
        }
        let health: HealthFile = serde_norway::from_str(text).map_err(|error| {
            invalid(format!(
                "{error}; a health file is `components:`, a list of entries each with a name \
                 and one of container, systemd, process, tcp, http, command, kubernetes"
            ))
        })?;
        if health.components.len() > MAX_COMPONENTS {
            return Err(invalid(format!(
                "{} components, more than the {MAX_COMPONENTS} Berth probes",
                health.components.len()
            )));
        }
        let mut names = std::collections::BTreeSet::new();
        for component in &health.components {
            let name = &component.name;
            let at = |message: String| invalid(format!("component `{name}`: {message}"));
            // Component names key records and show in tables: plain names, as add-ons'.
            crate::name::check_plain("component name", name)
                .map_err(|error| invalid(error.to_string()))?;
            if !names.insert(name.clone()) {
                return Err(at("named twice; give each component its own name".into()));
            }
            if let Some(timeout) = &component.timeout {
                match parse_duration(timeout) {
                    Ok(duration) if !duration.is_zero() && duration <= MAX_TIMEOUT => {}
                    _ => {
                        return Err(at(format!(
                            "timeout `{timeout}`: give a duration such as 3s or 500ms, \
                             above 0 and at most {}s",
                            MAX_TIMEOUT.as_secs()
                        )));
                    }
                }
            }
            component.check(Stage::Written).map_err(at)?;
        }
        Ok(health)
    }
}

fn check_probe(probe: Probe<'_>, stage: Stage) -> Result<(), String> {
    let empty = |what: &str| Err(format!("{} has an empty {what}", probe.kind()));
    // A value still to be rendered is checked once it is.
    let final_value = |text: &str| stage == Stage::Rendered || !text.contains("{{");
    match probe {
        Probe::Container(container)
            if container.name.as_deref().is_none_or(str::is_empty)
                && container.match_labels.is_empty() =>
        {
            return Err("container names neither `name` nor `matchLabels`".into());
        }
        Probe::Systemd(systemd) if systemd.unit.is_empty() => return empty("unit"),
        Probe::Process(process) if process.pid_file.is_empty() => return empty("pidFile"),
        Probe::Tcp(tcp) if tcp.address.is_empty() => return empty("address"),
        Probe::Http(http) => {
            if http.url.is_empty() {
                return empty("url");
            }
            if !(100..=599).contains(&http.status) {
                return Err(format!("http status {} is not an HTTP status", http.status));
            }
        }
        Probe::Command(command) if command.run.first().is_none_or(String::is_empty) => {
            return empty("run (the program and its arguments, as a list)");
        }
        Probe::Kubernetes(kubernetes) => {
            if !KUBERNETES_KINDS.contains(&kubernetes.kind.as_str()) {
                return Err(format!(
                    "kubernetes kind `{}`: Berth reads the conditions of {}",
                    kubernetes.kind,
                    KUBERNETES_KINDS.join(", ")
                ));
            }
            if kubernetes.name.as_deref().is_none_or(str::is_empty)
                && kubernetes.match_labels.is_empty()
            {
                return Err("kubernetes names neither `name` nor `matchLabels`".into());
            }
            if let Some(namespace) = kubernetes
                .namespace
                .as_deref()
                .filter(|text| final_value(text))
            {
                check_dns_label(namespace)
                    .map_err(|why| format!("namespace `{namespace}` {why}"))?;
            }
            if let Some(name) = kubernetes.name.as_deref().filter(|text| final_value(text)) {
                check_dns_subdomain(name).map_err(|why| format!("name `{name}` {why}"))?;
            }
            check_labels(&kubernetes.match_labels, final_value)?;
        }
        _ => {}
    }
    Ok(())
}

/// Checks each label as Kubernetes' own validation does: they become a `kubectl --selector`,
/// where a `,`, `=` or `!` would change what is selected. (A container's labels are any text,
/// as containerd's and docker's are, quoted where they become a filter.)
fn check_labels(
    labels: &BTreeMap<String, String>,
    final_value: impl Fn(&str) -> bool + Copy,
) -> Result<(), String> {
    for (key, value) in labels {
        if final_value(key) {
            check_label_key(key).map_err(|why| format!("label key `{key}` {why}"))?;
        }
        if final_value(value) && !value.is_empty() {
            check_label_name(value)
                .map_err(|why| format!("label value `{value}` of `{key}` {why}"))?;
        }
    }
    Ok(())
}

/// A label key: an optional DNS subdomain and `/`, then a name.
fn check_label_key(key: &str) -> Result<(), String> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            check_dns_subdomain(prefix).map_err(|why| format!("has a prefix that {why}"))?;
            check_label_name(name)
        }
        None => check_label_name(key),
    }
}

/// A label name or value: at most 63 letters, digits, `-`, `_` and `.`, starting and ending
/// with a letter or digit.
fn check_label_name(name: &str) -> Result<(), String> {
    let alphanumeric_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if name.len() > 63
        || !alphanumeric_ends
        || !name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
    {
        return Err(
            "is not a label name: give at most 63 letters, digits, `-`, `_` and `.`, \
                    starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

/// A DNS label (RFC 1123), as namespaces are named: at most 63 lowercase letters, digits and
/// `-`, starting and ending with a letter or digit.
fn check_dns_label(text: &str) -> Result<(), String> {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if text.is_empty()
        || text.len() > 63
        || !text.starts_with(alphanumeric)
        || !text.ends_with(alphanumeric)
        || !text.chars().all(|c| alphanumeric(c) || c == '-')
    {
        return Err(
            "is not a DNS label: give at most 63 lowercase letters, digits and `-`, \
                    starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

/// A DNS subdomain (RFC 1123), as most objects are named: at most 253 characters of DNS
/// labels joined by `.`.
pub fn check_dns_subdomain(text: &str) -> Result<(), String> {
    if text.len() > 253 || text.split('.').any(|label| check_dns_label(label).is_err()) {
        return Err(
            "is not a DNS subdomain: give at most 253 characters of lowercase letters, \
                    digits, `-` and `.`, each part starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

/// `3s`, `500ms`, `1m`, `1m30s`: a whole number and a unit, repeated.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("empty".into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 || digits > 9 {
            return Err(format!("`{text}` is not a duration"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}` is not a duration"))?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit] {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number * 60),
            _ => return Err(format!("`{text}`: units are ms, s and m")),
        };
        total = total.saturating_add(part);
        rest = &rest[unit..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_is_judged_where_it_lives_said_or_implied() {
        let text = "components:
  - name: here
    command: {run: [true]}
  - name: everywhere
    where: every-node
    command: {run: [true]}
  - name: first
    where: primary
    tcp: {address: '127.0.0.1:5000'}
  - name: control
    where: control-plane
    command: {run: [true]}
  - name: objects
    kubernetes: {kind: Deployment, name: registry}
  - name: daemons
    where: every-node
    kubernetes: {kind: DaemonSet, name: agent}
";
        let health = HealthFile::parse("health.yaml", text).unwrap();
        let judged = |role, ran| -> Vec<&str> {
            health
                .components
                .iter()
                .filter(|component| component.judged_on(role, ran).is_ok())
                .map(|component| component.name.as_str())
                .collect()
        };
        let all = [
            "here",
            "everywhere",
            "first",
            "control",
            "objects",
            "daemons",
        ];
        assert_eq!(judged(NodeRole::Primary, HooksRan::Install), all);
        // A worker where the add-on's `_join` ran: what the hooks made here, and what lives
        // on every node; never the primary's or the cluster's.
        assert_eq!(
            judged(NodeRole::Worker, HooksRan::Join),
            ["here", "everywhere", "daemons"]
        );
        // A worker where no hook of it ran (kURL's add-ons without `_join`).
        assert_eq!(
            judged(NodeRole::Worker, HooksRan::Nothing),
            ["everywhere", "daemons"]
        );
        assert_eq!(
            judged(NodeRole::ControlPlane, HooksRan::Nothing),
            ["everywhere", "control", "daemons"]
        );
        let elsewhere = health.components[0]
            .judged_on(NodeRole::Worker, HooksRan::Nothing)
            .unwrap_err();
        assert!(elsewhere.contains("primary"), "{elsewhere}");
        let error = HealthFile::parse(
            "health.yaml",
            "components:\n  - name: x\n    where: somewhere\n    command: {run: [true]}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("somewhere"), "{error}");
    }

    #[test]
    fn a_file_of_every_kind_reads() {
        let text = "components:
  - name: container
    container: {matchLabels: {berth.addon: demo}}
  - name: unit
    systemd: {unit: containerd.service}
  - name: pid
    process: {pidFile: /run/demo.pid}
    required: false
  - name: port
    tcp: {address: '127.0.0.1:{{ port }}'}
  - name: answers
    http: {url: 'http://127.0.0.1:{{ port }}/', bodyContains: demo}
    timeout: 1m
  - name: ctr
    command: {run: [ctr, version]}
  - name: deployment
    kubernetes: {kind: Deployment, namespace: kube-system, matchLabels: {k8s-app: kube-dns}}
";
        let health = HealthFile::parse("health.yaml", text).unwrap();
        let kinds: Vec<&str> = health
            .components
            .iter()
            .map(|component| component.probe().unwrap().kind())
            .collect();
        assert_eq!(
            kinds,
            [
                "container",
                "systemd",
                "process",
                "tcp",
                "http",
                "command",
                "kubernetes"
            ]
        );
        assert!(!health.components[2].required);
        assert!(health.components[0].required);
        assert_eq!(health.components[4].timeout(), Duration::from_secs(60));
        assert_eq!(health.components[0].timeout(), DEFAULT_TIMEOUT);
        let Some(Probe::Http(http)) = health.components[4].probe() else {
            panic!("http");
        };
        assert_eq!(http.status, 200);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let cases = [
            ("components:\n  - name: a\n", "names 0 probes"),
            (
                "components:\n  - name: a\n    tcp: {address: x}\n    http: {url: y}\n",
                "names 2 probes",
            ),
            (
                "components:\n  - name: a\n    tcp: {address: x}\n  - name: a\n    tcp: {address: y}\n",
                "named twice",
            ),
            (
                "components:\n  - name: ../a\n    tcp: {address: x}\n",
                "component name",
            ),
            (
                "components:\n  - name: a\n    tcp: {address: x}\n    timeout: 2h\n",
                "timeout `2h`",
            ),
            (
                "components:\n  - name: a\n    tcp: {address: x}\n    timeout: 61s\n",
                "at most 60s",
            ),
            (
                "components:\n  - name: a\n    http: {url: x, status: 42}\n",
                "not an HTTP status",
            ),
            (
                "components:\n  - name: a\n    command: {run: []}\n",
                "empty run",
            ),
            (
                "components:\n  - name: a\n    container: {}\n",
                "neither `name` nor",
            ),
            (
                "components:\n  - name: a\n    kubernetes: {kind: Pod, name: x}\n",
                "kubernetes kind `Pod`",
            ),
            (
                "components:\n  - name: a\n    tcp: {address: x, port: 1}\n",
                "unknown field",
            ),
            (
                "components:\n  - name: a\n    socket: {}\n",
                "unknown field",
            ),
        ];
        for (text, expected) in cases {
            let error = HealthFile::parse("demo 1.0.0 health.yaml", text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.starts_with("demo 1.0.0 health.yaml: "), "{error}");
        }
        let big = format!("components: []\n#{}\n", "x".repeat(MAX_HEALTH_BYTES));
        assert!(HealthFile::parse("h", &big).is_err());
    }

    #[test]
    fn labels_and_object_names_follow_kubernetes_syntax_once_rendered() {
        let component = |probe: &str| {
            HealthFile::parse("h", &format!("components:\n  - name: a\n    {probe}\n"))
                .map(|health| health.components[0].clone())
        };
        for good in [
            "kubernetes: {kind: Deployment, namespace: kube-system, matchLabels: {app.kubernetes.io/name: kube-dns, tier: ''}}",
            "kubernetes: {kind: CustomResourceDefinition, name: installers.cluster.kurl.sh}",
            "container: {matchLabels: {berth.root: /var/lib/berth, berth.addon: 'a,b'}}",
        ] {
            component(good).unwrap_or_else(|error| panic!("{good}: {error}"));
        }
        let cases = [
            (
                "kubernetes: {kind: Deployment, matchLabels: {app: 'a,b=c'}}",
                "label value `a,b=c`",
            ),
            (
                "kubernetes: {kind: Deployment, matchLabels: {'!app': x}}",
                "label key `!app`",
            ),
            (
                "kubernetes: {kind: Deployment, matchLabels: {Example.com/app: x}}",
                "prefix",
            ),
            (
                "kubernetes: {kind: Deployment, matchLabels: {app: -x}}",
                "not a label name",
            ),
            (
                "kubernetes: {kind: Deployment, namespace: Kube_System, name: x}",
                "namespace `Kube_System`",
            ),
            (
                "kubernetes: {kind: Deployment, name: '--all'}",
                "name `--all`",
            ),
        ];
        for (probe, expected) in cases {
            let error = component(probe).unwrap_err().to_string();
            assert!(error.contains(expected), "{probe}: {error}");
        }
        // A value the node fills in is checked once filled in.
        let templated = component("kubernetes: {kind: Deployment, namespace: '{{ namespace }}', matchLabels: {app: '{{ app }}'}}").unwrap();
        assert_eq!(templated.check(Stage::Written), Ok(()));
        let error = templated.check(Stage::Rendered).unwrap_err();
        assert!(error.contains("namespace `{{ namespace }}`"), "{error}");
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        for bad in ["", "s", "5", "5h", "-1s", "1.5s", "99999999999s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
