//! Add-on health, observed live: each component an add-on's `health.yaml` lists is probed
//! (all at once, each within its own timeout), and the add-on is summed up as the Addon API
//! proposal does: `Available` while every required component is healthy, `Degraded` while any
//! component is not, naming it. `Progressing` stays what the runs record.
//!
//! Each probe's findings are kept in `$DIR/health/<name>.json` with the add-on's conditions;
//! a condition keeps its transition time until its status or reason changes, and each such
//! change is added to the record's history.

pub mod found;
pub mod kubernetes;
pub mod probe;

use std::collections::BTreeMap;
use std::sync::{OnceLock, mpsc};
use std::time::Instant;

use berth_formats::health::{HEALTH_FILE, HealthFile, Stage};
use berth_formats::time::now;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::images::Runtime;
use crate::node::layout::Layout;
use crate::node::state::{AddonState, HISTORY_LENGTH};
use found::Found;

/// The node's container runtime, detected the first time a container probe needs it (a
/// detection asks the runtime, so an add-on with no container component costs none).
pub type RuntimeOnce = OnceLock<Option<Runtime>>;

/// A condition as the Addon API and Kubernetes objects carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCondition {
    #[serde(rename = "type")]
    pub kind: String,
    /// `True` or `False`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: String,
}

impl HealthCondition {
    fn new(kind: &str, status: bool, reason: &str, message: String) -> Self {
        Self {
            kind: kind.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: reason.into(),
            message,
            last_transition_time: now(),
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// Keeps `previous`'s transition time when neither status nor reason changed; says
    /// whether they did (a transition, for the history).
    fn since(&mut self, previous: Option<&HealthCondition>) -> bool {
        match previous {
            Some(previous) if previous.status == self.status && previous.reason == self.reason => {
                self.last_transition_time = previous.last_transition_time.clone();
                false
            }
            _ => true,
        }
    }
}

/// An object a component's probe looked at (a container, a unit, a Deployment…).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentRef {
    pub kind: String,
    pub name: String,
    pub conditions: Vec<HealthCondition>,
    /// A Kubernetes object's namespace, API version and own conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<found::ObjectFacts>,
}

/// One component, as the Addon API's status lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub name: String,
    /// The probe's kind: container, systemd, process, tcp, http, command, kubernetes.
    pub probe: String,
    pub required: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    pub refs: Vec<ComponentRef>,
    /// `Healthy`.
    pub conditions: Vec<HealthCondition>,
}

impl ComponentStatus {
    pub fn healthy(&self) -> bool {
        self.conditions.iter().all(HealthCondition::is_true)
    }
}

/// One change of `Available` or `Degraded`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthTransition {
    pub time: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// What an add-on's components were found to be, and what that makes the add-on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthRecord {
    pub name: String,
    /// The version whose components were probed.
    pub version: String,
    pub checked_at: String,
    pub components: Vec<ComponentStatus>,
    /// `Available` and `Degraded`.
    pub conditions: Vec<HealthCondition>,
    #[serde(default)]
    pub history: Vec<HealthTransition>,
}

impl HealthRecord {
    pub fn condition(&self, kind: &str) -> Option<&HealthCondition> {
        self.conditions
            .iter()
            .find(|condition| condition.kind == kind)
    }

    pub fn available(&self) -> bool {
        self.condition("Available")
            .is_some_and(HealthCondition::is_true)
    }

    pub fn degraded(&self) -> bool {
        self.condition("Degraded")
            .is_some_and(HealthCondition::is_true)
    }

    /// What is wrong, in the words of the condition that is: Available False, else Degraded
    /// True (an optional component down leaves Available True, its message saying all is
    /// well). `None` when neither is, or it says nothing.
    pub fn trouble(&self) -> Option<&str> {
        [("Available", false), ("Degraded", true)]
            .iter()
            .filter_map(|(kind, wrong)| {
                self.condition(kind)
                    .filter(|condition| condition.is_true() == *wrong)
            })
            .map(|condition| condition.message.as_str())
            .find(|message| !message.is_empty())
    }

    pub fn load(layout: &Layout, name: &str) -> Option<Self> {
        let text = fs_err::read_to_string(layout.health_file(name)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Written for root alone: what components answered may be more than anyone should read.
    fn save(&self, layout: &Layout) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let path = layout.health_file(&self.name);
        if let Some(parent) = path.parent() {
            crate::files::private_dir(parent)?;
        }
        crate::files::write_atomically_with_mode(&path, &text, 0o600)
    }
}

/// Probes the components of the version of `state` in place now, records what it found, and
/// gives it; None when no version is in place or the version lists no components.
pub fn check(layout: &Layout, state: &AddonState, runtime: &RuntimeOnce) -> Option<HealthRecord> {
    let current = state.current.as_ref()?;
    let version = &current.target.version;
    let folder = layout.addon_dir(&state.name, version);
    let path = folder.join(HEALTH_FILE);
    // Read to one byte past the bound, so that a larger file is refused, not read whole.
    let read = fs_err::File::open(&path).and_then(|file| {
        use std::io::Read as _;
        let mut text = String::new();
        file.take(berth_formats::health::MAX_HEALTH_BYTES as u64 + 1)
            .read_to_string(&mut text)
            .map(|_| text)
    });
    let text = match read {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            let message = format!("{}: {error}", path.display());
            return Some(record(
                layout,
                state,
                version,
                vec![unreadable(message)],
                &[],
            ));
        }
    };
    let mut elsewhere = Vec::new();
    let components = match HealthFile::parse(&path.display().to_string(), &text) {
        Ok(mut health) => {
            // Only what lives on this node is probed: a worker never waits for what the
            // primary's install hook makes, nor for the cluster's objects.
            if let (Some(role), Some(ran)) = (current.role, current.hooks_ran) {
                health.components.retain(|component| {
                    let judged = component.judged_on(role, ran);
                    if let Err(place) = &judged {
                        elsewhere.push(format!("{} ({place})", component.name));
                    }
                    judged.is_ok()
                });
            }
            probe_all(layout, &health, &variables(state, layout), runtime)
        }
        Err(error) => vec![unreadable(error.to_string())],
    };
    Some(record(layout, state, version, components, &elsewhere))
}

/// A health file that cannot be read is itself an unhealthy, required component.
fn unreadable(message: String) -> ComponentStatus {
    ComponentStatus {
        name: HEALTH_FILE.into(),
        probe: "file".into(),
        required: true,
        match_labels: BTreeMap::new(),
        refs: Vec::new(),
        conditions: vec![HealthCondition::new(
            "Healthy",
            false,
            "InvalidHealthFile",
            message,
        )],
    }
}

/// What values in health.yaml may name: the add-on's fields as applied (`port`), its `name`
/// and `version`, and `berth.root` and `berth.dir` (the node's root and `$DIR`).
fn variables(state: &AddonState, layout: &Layout) -> Value {
    let mut variables: Map<String, Value> = state
        .current
        .as_ref()
        .map(|current| current.config.clone())
        .unwrap_or_default();
    variables.insert("name".into(), state.name.clone().into());
    if let Some(current) = &state.current {
        variables.insert("version".into(), current.target.version.clone().into());
    }
    variables.insert(
        "berth".into(),
        serde_json::json!({
            "root": layout.root().display().to_string(),
            "dir": layout.install_dir().display().to_string(),
        }),
    );
    Value::Object(variables)
}

/// A component of health.yaml with its values rendered (`{{ port }}`) and checked again: an
/// unknown name, a value that loops, one that moves an http probe to another host, or a
/// rendered component that no longer reads is an error saying so.
pub fn render_component(
    written: &berth_formats::health::Component,
    variables: &Value,
) -> Result<berth_formats::health::Component, String> {
    let mut environment = minijinja::Environment::new();
    environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // A value is a few words: a template that loops is stopped, not left to stall `status`,
    // an install's health wait or a signal.
    environment.set_fuel(Some(TEMPLATE_FUEL));
    let mut rendered = serde_json::to_value(written).unwrap_or_default();
    render(&mut rendered, &environment, variables)?;
    let component = serde_json::from_value::<berth_formats::health::Component>(rendered)
        .map_err(|error| error.to_string())?;
    component.check(Stage::Rendered)?;
    same_host(written, &component)?;
    Ok(component)
}

/// How much work rendering one value may take (minijinja's fuel: about one unit per
/// instruction).
const TEMPLATE_FUEL: u64 = 100_000;

/// Refuses an http probe whose values moved it to another host than its health.yaml names:
/// a spec's field fills in a port or a path, never where the probe goes.
fn same_host(
    written: &berth_formats::health::Component,
    rendered: &berth_formats::health::Component,
) -> Result<(), String> {
    let (Some(written), Some(rendered)) = (http_url(written), http_url(rendered)) else {
        return Ok(());
    };
    // The host, as the file writes it: checked unless the file leaves the host itself to a
    // value (`http://{{ host }}:80/`).
    let rest = written
        .split_once("://")
        .map_or(written.as_str(), |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = if authority.starts_with('[') {
        authority.split_inclusive(']').next().unwrap_or(authority)
    } else {
        authority.split(':').next().unwrap_or(authority)
    };
    if host.is_empty() || host.contains("{{") || host.contains("{%") || host.contains('@') {
        return Ok(());
    }
    let parsed = url::Url::parse(&rendered).map_err(|error| format!("`{rendered}`: {error}"))?;
    if parsed.host_str() != Some(host)
        || !parsed.username().is_empty()
        || parsed.password().is_some()
    {
        return Err(format!(
            "`{rendered}`: its values move the probe off {host}, the host its health.yaml names"
        ));
    }
    Ok(())
}

fn http_url(component: &berth_formats::health::Component) -> Option<String> {
    component.http.as_ref().map(|http| http.url.clone())
}

/// Renders every string of `value` with `variables` (`{{ port }}`); an unknown name is an
/// error.
fn render(
    value: &mut Value,
    environment: &minijinja::Environment,
    variables: &Value,
) -> Result<(), String> {
    match value {
        Value::String(text) if text.contains("{{") || text.contains("{%") => {
            *text = environment
                .render_str(text, variables)
                .map_err(|error| format!("`{text}`: {error}"))?;
        }
        Value::Array(items) => {
            for item in items {
                render(item, environment, variables)?;
            }
        }
        Value::Object(fields) => {
            for (_, field) in fields.iter_mut() {
                render(field, environment, variables)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Probes every component at once; one that has not answered by its timeout is TimedOut.
fn probe_all(
    layout: &Layout,
    health: &HealthFile,
    variables: &Value,
    runtime: &RuntimeOnce,
) -> Vec<ComponentStatus> {
    let runtime = health
        .components
        .iter()
        .any(|component| component.container.is_some())
        .then(|| runtime.get_or_init(Runtime::detect).clone())
        .flatten();
    let (sender, receiver) = mpsc::channel::<(usize, Vec<Found>)>();
    let started = Instant::now();
    let mut results: Vec<Option<Vec<Found>>> = vec![None; health.components.len()];
    // Shown as probed: rendered, its values in place (as written when it did not render).
    let mut shown = health.components.clone();
    let mut deadlines = Vec::new();
    for (index, component) in health.components.iter().enumerate() {
        let timeout = component.timeout();
        deadlines.push(started + timeout);
        let component = match render_component(component, variables) {
            Ok(component) => component,
            Err(message) => {
                results[index] = Some(vec![Found::new(
                    "value",
                    &component.name,
                    false,
                    "BadValue",
                    message,
                )]);
                continue;
            }
        };
        shown[index] = component.clone();
        let sender = sender.clone();
        let kubeconfig = layout.kubeconfig();
        let runtime = runtime.clone();
        // A probe that hangs is left behind (and ends with the process): status goes on.
        std::thread::spawn(move || {
            let context = probe::Context {
                kubeconfig: &kubeconfig,
                runtime: runtime.as_ref(),
            };
            let found = component
                .probe()
                .map(|probe| probe::run(probe, timeout, &context))
                .unwrap_or_default();
            let _ = sender.send((index, found));
        });
    }
    drop(sender);
    loop {
        let waiting: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].is_none())
            .collect();
        let Some(until) = waiting
            .iter()
            .map(|&i| deadlines[i])
            .filter(|deadline| *deadline > Instant::now())
            .min()
        else {
            break;
        };
        match receiver.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((index, found)) => results[index] = Some(found),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    shown
        .iter()
        .zip(results)
        .map(|(component, found)| {
            let kind = component.probe().map_or("none", |probe| probe.kind());
            let found = found.unwrap_or_else(|| {
                let message = format!(
                    "no answer within {}",
                    crate::program::seconds(component.timeout())
                );
                vec![Found::new(
                    kind,
                    &component.name,
                    false,
                    "TimedOut",
                    message,
                )]
            });
            status_of(component, kind, found)
        })
        .collect()
}

fn status_of(
    component: &berth_formats::health::Component,
    kind: &str,
    found: Vec<Found>,
) -> ComponentStatus {
    // Healthy: every object found, the first one's reason; else the ones that are not.
    let unhealthy: Vec<&Found> = found.iter().filter(|found| !found.healthy).collect();
    let shown: Vec<&Found> = if unhealthy.is_empty() {
        found.iter().collect()
    } else {
        unhealthy
    };
    let condition = match shown.first() {
        None => HealthCondition::new("Healthy", false, "NotFound", "nothing to probe".into()),
        Some(first) => HealthCondition::new(
            "Healthy",
            first.healthy,
            &first.reason,
            shown
                .iter()
                .map(|found| format!("{} {}: {}", found.kind, found.name, found.message))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    let match_labels = match (&component.container, &component.kubernetes) {
        (Some(container), _) => container.match_labels.clone(),
        (_, Some(kubernetes)) => kubernetes.match_labels.clone(),
        _ => BTreeMap::new(),
    };
    ComponentStatus {
        name: component.name.clone(),
        probe: kind.into(),
        required: component.required,
        match_labels,
        refs: found
            .into_iter()
            .map(|found| ComponentRef {
                conditions: vec![HealthCondition::new(
                    "Healthy",
                    found.healthy,
                    &found.reason,
                    found.message,
                )],
                kind: found.kind,
                name: found.name,
                object: found.object,
            })
            .collect(),
        conditions: vec![condition],
    }
}

/// The add-on's conditions from its components (those judged elsewhere named, when none is
/// judged here), transitions kept from the last record, and the record saved (a node whose
/// folder cannot be written still gets the answer).
fn record(
    layout: &Layout,
    state: &AddonState,
    version: &str,
    components: Vec<ComponentStatus>,
    elsewhere: &[String],
) -> HealthRecord {
    let previous = HealthRecord::load(layout, &state.name);
    let unhealthy: Vec<&ComponentStatus> = components
        .iter()
        .filter(|component| !component.healthy())
        .collect();
    let describe = |components: &[&ComponentStatus]| {
        components
            .iter()
            .map(|component| {
                let message = component
                    .conditions
                    .first()
                    .map_or("", |condition| condition.message.as_str());
                format!("{} ({message})", component.name)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let required_down: Vec<&ComponentStatus> = unhealthy
        .iter()
        .copied()
        .filter(|component| component.required)
        .collect();
    // A condition from the components it is about: `healthy` (its status, reason and message)
    // when none is down, else `down_status` naming them.
    let summary = |kind, down: &[&ComponentStatus], healthy: (bool, &str, &str)| {
        if down.is_empty() {
            HealthCondition::new(kind, healthy.0, healthy.1, healthy.2.into())
        } else {
            let message = format!("not healthy: {}", describe(down));
            HealthCondition::new(kind, !healthy.0, "ComponentUnhealthy", message)
        }
    };
    let none_here = (components.is_empty() && !elsewhere.is_empty()).then(|| {
        format!(
            "none of its components lives on this node: {}",
            elsewhere.join(", ")
        )
    });
    let (available, degraded) = match &none_here {
        Some(message) => (
            (true, "JudgedElsewhere", message.as_str()),
            (false, "JudgedElsewhere", message.as_str()),
        ),
        None => (
            (
                true,
                "ComponentsHealthy",
                "every required component is healthy",
            ),
            (false, "AsExpected", "every component is healthy"),
        ),
    };
    let mut conditions = vec![
        summary("Available", &required_down, available),
        summary("Degraded", &unhealthy, degraded),
    ];
    let mut history = previous
        .as_ref()
        .map(|previous| previous.history.clone())
        .unwrap_or_default();
    for condition in &mut conditions {
        let old = previous
            .as_ref()
            .and_then(|previous| previous.condition(&condition.kind));
        if condition.since(old) {
            history.push(HealthTransition {
                time: condition.last_transition_time.clone(),
                kind: condition.kind.clone(),
                status: condition.status.clone(),
                reason: condition.reason.clone(),
                message: condition.message.clone(),
            });
        }
    }
    let excess = history.len().saturating_sub(HISTORY_LENGTH);
    history.drain(..excess);
    let record = HealthRecord {
        name: state.name.clone(),
        version: version.into(),
        checked_at: now(),
        components,
        conditions,
        history,
    };
    let _ = record.save(layout);
    record
}

/// Probes every add-on's components at once: one slow add-on does not hold up the others'.
pub fn check_all(
    layout: &Layout,
    states: &[AddonState],
    runtime: &RuntimeOnce,
) -> BTreeMap<String, HealthRecord> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = states
            .iter()
            .map(|state| scope.spawn(move || (state.name.clone(), check(layout, state, runtime))))
            .collect();
        handles
            .into_iter()
            .filter_map(|handle| handle.join().ok())
            .filter_map(|(name, record)| record.map(|record| (name, record)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(conditions: &[(&str, bool, &str)]) -> HealthRecord {
        HealthRecord {
            name: "demo".into(),
            version: "1.0.0".into(),
            checked_at: String::new(),
            components: Vec::new(),
            conditions: conditions
                .iter()
                .map(|(kind, status, message)| {
                    HealthCondition::new(kind, *status, "Reason", message.to_string())
                })
                .collect(),
            history: Vec::new(),
        }
    }

    #[test]
    fn the_trouble_is_told_in_the_words_of_the_condition_that_is_wrong() {
        let optional_down = record(&[
            ("Available", true, "every required component is healthy"),
            ("Degraded", true, "not healthy: DaemonSet kube-proxy"),
        ]);
        assert_eq!(
            optional_down.trouble(),
            Some("not healthy: DaemonSet kube-proxy")
        );
        let required_down = record(&[
            ("Available", false, "not healthy: kubelet"),
            (
                "Degraded",
                true,
                "not healthy: kubelet, DaemonSet kube-proxy",
            ),
        ]);
        assert_eq!(required_down.trouble(), Some("not healthy: kubelet"));
        let well = record(&[
            ("Available", true, "every required component is healthy"),
            ("Degraded", false, "every component is healthy"),
        ]);
        assert_eq!(well.trouble(), None);
    }
}
