//! A rollout: which nodes get which version and configuration of one add-on, and how fast the
//! change moves across them. The vocabulary is OCM's add-on management: placements choose nodes
//! by role and labels, decision groups order them, and a strategy (`All`, `Progressive`,
//! `ProgressivePerGroup`) moves through them with mandatory decision groups first (canaries),
//! `maxConcurrency`, `minSuccessTime` (soak), `progressDeadline` and `maxFailures`.
//!
//! ```yaml
//! apiVersion: berth/v1alpha1
//! kind: Rollout
//! metadata:
//!   name: demo-2
//! spec:
//!   addon: demo
//!   version: 2.0.0
//!   config: {port: 8080}          # over the add-on's defaults, under each node's own
//!   placements:                   # the first that selects a node gives its version and config
//!     - name: edge
//!       roles: [secondary]
//!       matchLabels: {zone: edge}
//!       config: {port: 8081}
//!   decisionGroups:
//!     - groupName: canary
//!       matchLabels: {canary: "true"}
//!   strategy:
//!     type: Progressive
//!     progressive:
//!       mandatoryDecisionGroups: [{groupName: canary}]
//!       maxConcurrency: 2         # or a percentage: "25%"
//!       minSuccessTime: 30s
//!       progressDeadline: 10m
//!       maxFailures: 10%          # or a number of nodes
//! ```
//!
//! What a rollout leaves out takes these defaults (`berth rollout status` shows the values in
//! force): `type: All`; `maxConcurrency` 1 for `Progressive` (one node at a time, as a careful
//! operator and Embedded Cluster move nodes); `minSuccessTime` 0s; `progressDeadline` 30m, so
//! a node whose agent never answers fails instead of holding the rollout for good (`None`
//! asks for no deadline); `maxFailures` 0, so the first failure stops the rollout.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::name::{plain_name, plain_version, plain_version_option};

pub const API_VERSION: &str = "berth/v1alpha1";
pub const KIND: &str = "Rollout";
/// The largest rollout file read.
pub const MAX_ROLLOUT_BYTES: usize = 256 * 1024;
/// The most placements or decision groups one rollout lists.
pub const MAX_ENTRIES: usize = 256;
/// How long a node may take when the rollout gives no `progressDeadline`.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// How many nodes a `Progressive` rollout moves at once when it gives no `maxConcurrency`.
pub const DEFAULT_MAX_CONCURRENCY: Size = Size::Count(1);
/// The longest duration a rollout may give: longer ones are mistakes, and would overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rollout {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: RolloutSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    #[serde(deserialize_with = "plain_name")]
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    #[serde(deserialize_with = "plain_name")]
    pub addon: String,
    #[serde(deserialize_with = "plain_version")]
    pub version: String,
    /// The add-on's fields for every selected node, over its defaults.
    #[serde(default)]
    pub config: BTreeMap<String, serde_json::Value>,
    /// Which nodes take part; none means every node, with `version` and `config`.
    #[serde(default)]
    pub placements: Vec<Placement>,
    /// Named groups of the selected nodes, by labels; the nodes in none make up the rest.
    #[serde(default)]
    pub decision_groups: Vec<DecisionGroup>,
    /// How many of the rest form one group for `ProgressivePerGroup` (all of them unless given).
    #[serde(default)]
    pub nodes_per_decision_group: Option<Size>,
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// Whether the rollout may move a node to a version older than the one it runs (refused
    /// otherwise, as `berth upgrade` refuses it without `--allow-downgrade`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_downgrade: bool,
}

/// Nodes chosen by role and labels, with the version and configuration they get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    #[serde(deserialize_with = "plain_name")]
    pub name: String,
    /// Both roles unless given.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// Every label given must match (none: every node of the roles).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// The spec's version unless given.
    #[serde(default, deserialize_with = "plain_version_option")]
    pub version: Option<String>,
    /// Over the spec's `config`, under each node's own.
    #[serde(default)]
    pub config: BTreeMap<String, serde_json::Value>,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The first node and the nodes that joined its control plane.
    Primary,
    Secondary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionGroup {
    #[serde(deserialize_with = "plain_name")]
    pub group_name: String,
    pub match_labels: BTreeMap<String, String>,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum RolloutType {
    /// Every node at once.
    #[default]
    All,
    /// Node by node, at most `maxConcurrency` at a time.
    Progressive,
    /// Group by group, each whole group at once.
    ProgressivePerGroup,
}

/// OCM's `RolloutStrategy`: the type, and the parameters under the type's own key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStrategy {
    #[serde(default, rename = "type")]
    pub kind: RolloutType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Parameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<Parameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<Parameters>,
}

/// The parameters of a strategy (each type takes those OCM gives it; see [`Rollout::check`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Parameters {
    /// Groups rolled out first, in order; the rest starts only once all of them succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<Size>,
    /// How long a node must stay healthy after its run to count as succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    /// How long a node may take to succeed before it counts as failed (`None`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    /// How many failed nodes are tolerated before no further node starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<Size>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MandatoryDecisionGroup {
    #[serde(deserialize_with = "plain_name")]
    pub group_name: String,
}

/// A number of nodes, or a percentage of them (OCM's IntOrString: `2`, `"25%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "serde_json::Value")]
pub enum Size {
    Count(u32),
    Percent(u8),
}

impl Size {
    /// The number of nodes out of `total`: a percentage rounds up, as OCM's does, so that any
    /// percentage above zero moves at least one node.
    pub fn of(self, total: usize) -> usize {
        match self {
            Size::Count(count) => count as usize,
            Size::Percent(percent) => (total * percent as usize).div_ceil(100),
        }
    }
}

/// A number of nodes, or a percentage of them (`25%`).
impl schemars::JsonSchema for Size {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of nodes, or a percentage of them (`25%`).",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^(100|[0-9]{1,2})%$"}
            ]
        })
    }
}

impl From<Size> for serde_json::Value {
    fn from(size: Size) -> Self {
        match size {
            Size::Count(count) => count.into(),
            Size::Percent(percent) => format!("{percent}%").into(),
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Size::Count(count) => write!(formatter, "{count}"),
            Size::Percent(percent) => write!(formatter, "{percent}%"),
        }
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(u32),
            Text(String),
        }
        let refuse = |text: &str| {
            serde::de::Error::custom(format!(
                "`{text}` is neither a number of nodes nor a percentage from 0% to 100%"
            ))
        };
        match Written::deserialize(deserializer)? {
            Written::Count(count) => Ok(Size::Count(count)),
            Written::Text(text) => match text.strip_suffix('%') {
                Some(percent) => match percent.parse::<u8>() {
                    Ok(percent) if percent <= 100 => Ok(Size::Percent(percent)),
                    _ => Err(refuse(&text)),
                },
                None => text.parse().map(Size::Count).map_err(|_| refuse(&text)),
            },
        }
    }
}

/// A strategy's parameters read: durations parsed, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    pub kind: RolloutType,
    pub mandatory_decision_groups: Vec<String>,
    /// `None`: every node of the phase at once.
    pub max_concurrency: Option<Size>,
    pub min_success_time: Duration,
    /// `None`: no deadline.
    pub progress_deadline: Option<Duration>,
    pub max_failures: Size,
}

impl std::fmt::Display for Strategy {
    /// The values in force, as `berth rollout status` shows them.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}", self.kind)?;
        if !self.mandatory_decision_groups.is_empty() {
            write!(
                formatter,
                ", mandatoryDecisionGroups {}",
                self.mandatory_decision_groups.join(", ")
            )?;
        }
        match self.max_concurrency {
            Some(size) => write!(formatter, ", maxConcurrency {size}")?,
            None => write!(formatter, ", maxConcurrency all")?,
        }
        write!(
            formatter,
            ", minSuccessTime {}, progressDeadline {}, maxFailures {}",
            humantime::format_duration(self.min_success_time),
            self.progress_deadline.map_or_else(
                || "None".to_string(),
                |deadline| { humantime::format_duration(deadline).to_string() }
            ),
            self.max_failures
        )
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct RolloutError {
    pub file: String,
    pub message: String,
}

impl Rollout {
    /// Reads and checks a rollout file; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, RolloutError> {
        let invalid = |message: String| RolloutError {
            file: file.to_string(),
            message,
        };
        if text.len() > MAX_ROLLOUT_BYTES {
            return Err(invalid(format!(
                "larger than {} KiB; a rollout is a few lines",
                MAX_ROLLOUT_BYTES / 1024
            )));
        }
        let rollout: Rollout =
            serde_norway::from_str(text).map_err(|error| invalid(error.to_string()))?;
        rollout.check().map_err(invalid)?;
        Ok(rollout)
    }

    fn check(&self) -> Result<(), String> {
        if self.api_version != API_VERSION || self.kind != KIND {
            return Err(format!(
                "apiVersion `{}` and kind `{}`: a rollout is apiVersion {API_VERSION}, kind {KIND}",
                self.api_version, self.kind
            ));
        }
        let spec = &self.spec;
        if spec.placements.len() > MAX_ENTRIES || spec.decision_groups.len() > MAX_ENTRIES {
            return Err(format!(
                "at most {MAX_ENTRIES} placements and {MAX_ENTRIES} decision groups"
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for placement in &spec.placements {
            if !names.insert(&placement.name) {
                return Err(format!("placement `{}` is named twice", placement.name));
            }
        }
        let mut groups = std::collections::BTreeSet::new();
        for group in &spec.decision_groups {
            if !groups.insert(group.group_name.as_str()) {
                return Err(format!(
                    "decision group `{}` is named twice",
                    group.group_name
                ));
            }
        }
        let strategy = self.strategy()?;
        for group in &strategy.mandatory_decision_groups {
            if !groups.contains(group.as_str()) {
                return Err(format!(
                    "mandatory decision group `{group}` is not among decisionGroups ({})",
                    groups.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The strategy with its parameters read and the defaults filled in (see the module's
    /// documentation): no soak, a deadline of [`DEFAULT_PROGRESS_DEADLINE`], no failure
    /// tolerated, and [`DEFAULT_MAX_CONCURRENCY`] nodes at once for `Progressive`.
    pub fn strategy(&self) -> Result<Strategy, String> {
        let written = &self.spec.strategy;
        let (key, parameters) = match written.kind {
            RolloutType::All => ("all", &written.all),
            RolloutType::Progressive => ("progressive", &written.progressive),
            RolloutType::ProgressivePerGroup => {
                ("progressivePerGroup", &written.progressive_per_group)
            }
        };
        let others = [
            ("all", written.all.is_some()),
            ("progressive", written.progressive.is_some()),
            (
                "progressivePerGroup",
                written.progressive_per_group.is_some(),
            ),
        ];
        if let Some((other, _)) = others.iter().find(|(other, given)| *given && *other != key) {
            return Err(format!(
                "strategy type {:?} reads its parameters from `{key}`, not `{other}`",
                written.kind
            ));
        }
        let parameters = parameters.clone().unwrap_or_default();
        let refuse_for = |field: &str| {
            Err(format!(
                "strategy type {:?} takes no `{field}` (OCM gives it to Progressive alone)",
                written.kind
            ))
        };
        if written.kind != RolloutType::Progressive && parameters.max_concurrency.is_some() {
            return refuse_for("maxConcurrency");
        }
        if written.kind == RolloutType::All && !parameters.mandatory_decision_groups.is_empty() {
            return Err("strategy type All takes no `mandatoryDecisionGroups`".into());
        }
        if parameters.max_concurrency == Some(Size::Count(0))
            || parameters.max_concurrency == Some(Size::Percent(0))
        {
            return Err("maxConcurrency 0 would move no node; give at least 1".into());
        }
        let duration = |field: &str, text: &Option<String>| -> Result<Option<Duration>, String> {
            match text.as_deref() {
                None | Some("None") => Ok(None),
                Some(text) => match humantime::parse_duration(text) {
                    Ok(duration) if duration <= MAX_DURATION => Ok(Some(duration)),
                    Ok(_) => Err(format!(
                        "{field} `{text}` is longer than a year; give at most 366d"
                    )),
                    Err(error) => Err(format!(
                        "{field} `{text}` is not a duration such as 90s, 10m or 2h: {error}"
                    )),
                },
            }
        };
        let progress_deadline = match parameters.progress_deadline.as_deref() {
            None => Some(DEFAULT_PROGRESS_DEADLINE),
            Some(_) => duration("progressDeadline", &parameters.progress_deadline)?,
        };
        Ok(Strategy {
            kind: written.kind,
            mandatory_decision_groups: parameters
                .mandatory_decision_groups
                .iter()
                .map(|group| group.group_name.clone())
                .collect(),
            max_concurrency: match written.kind {
                RolloutType::Progressive => Some(
                    parameters
                        .max_concurrency
                        .unwrap_or(DEFAULT_MAX_CONCURRENCY),
                ),
                _ => None,
            },
            min_success_time: duration("minSuccessTime", &parameters.min_success_time)?
                .unwrap_or_default(),
            progress_deadline,
            max_failures: parameters.max_failures.unwrap_or(Size::Count(0)),
        })
    }
}

/// The first node's record of a rollout: the spec as applied, and where each node stands.
/// Kept as `var/lib/berth/fleet/rollouts/<name>.json`; `berth rollout status --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    pub rollout: Rollout,
    /// Made anew by every apply: with the generation it makes work ids that are never given
    /// twice, even after the rollout is deleted and applied again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Bumped by every apply of the rollout's name and every rollback: the work a node is
    /// given is `<name>.<uid>.<generation>`, so a node runs each generation once.
    pub generation: u32,
    pub direction: Direction,
    pub control: Control,
    /// Where it stands, as of the last decision.
    pub state: RolloutState,
    /// Why it stopped, when it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub applied_at: String,
    pub updated_at: String,
    /// The sha256 of each version's package (`<addon>-<version>.tar.gz`) in the first node's
    /// dist when the rollout was applied: its nodes install those bytes and no others,
    /// whatever a dist holds by the time they run. Empty for a rollback, whose nodes go back
    /// to the packages they kept digests of.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, crate::Sha256Digest>,
    pub targets: Vec<TargetRecord>,
}

impl RolloutRecord {
    /// The id of the work this generation gives its nodes.
    pub fn work_id(&self) -> String {
        self.work_id_of(self.generation)
    }

    /// The id of the work generation `generation` of this apply gave its nodes.
    pub fn work_id_of(&self, generation: u32) -> String {
        let name = &self.rollout.metadata.name;
        if self.uid.is_empty() {
            format!("{name}.{generation}")
        } else {
            format!("{name}.{}.{generation}", self.uid)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Direction {
    /// Nodes move to the rollout's version and configuration.
    Forward,
    /// The nodes an earlier generation moved go back to what they ran before it.
    Rollback,
}

/// What the admin asked: go on, hold (no node starts), or stop for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Control {
    Running,
    Paused,
    Aborted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum RolloutState {
    /// Nodes are running or soaking, or about to start.
    Progressing,
    /// Paused by the admin: nodes already started finish, none starts.
    Paused,
    /// More nodes failed than `maxFailures` allows: no node starts any more.
    Stopped,
    /// Aborted by the admin.
    Aborted,
    /// Every node finished.
    Completed,
}

/// One node of a rollout: what it gets and where it stands (OCM's per-cluster status:
/// desired and last version, the config hash, the state and its times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRecord {
    /// The node's name: a label, which several nodes may share.
    pub node: String,
    /// The node's machine id: who the target is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine_id: String,
    pub role: Role,
    /// The decision group it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The placement that chose it, if the rollout has placements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// The version it moves to (for a rollback, the version it ran before).
    pub version: String,
    /// The version it ran when the rollout was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_version: Option<String>,
    /// Its configuration, layered: the rollout's, the placement's, the node's own.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// The hash of `version` and `config`: OCM's desired config hash (for a rollback, the
    /// hash the node had before; empty when it had none).
    pub config_hash: String,
    /// The configuration hash the node reported when the rollout was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_config_hash: Option<String>,
    pub state: TargetState,
    /// When the rollout started it (handed out its work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the node said it took the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked_up_at: Option<String>,
    /// When its run succeeded (its soak starts then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_at: Option<String>,
    /// When it finished: soaked, or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum TargetState {
    /// Not started.
    ToApply,
    /// Its work was handed out (or waits for the node to ask) and has not finished.
    Running,
    /// Its run succeeded; it must stay healthy for `minSuccessTime`.
    Soaking,
    Succeeded,
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "apiVersion: berth/v1alpha1
kind: Rollout
metadata: {name: demo-2}
spec:
  addon: demo
  version: 2.0.0
  config: {port: 8080}
  placements:
    - name: edge
      roles: [secondary]
      matchLabels: {zone: edge}
      config: {port: 8081}
  decisionGroups:
    - groupName: canary
      matchLabels: {canary: 'true'}
  strategy:
    type: Progressive
    progressive:
      mandatoryDecisionGroups: [{groupName: canary}]
      maxConcurrency: 2
      minSuccessTime: 30s
      progressDeadline: 10m
      maxFailures: 10%
";

    #[test]
    fn the_documented_example_reads() {
        let rollout = Rollout::parse("rollout.yaml", EXAMPLE).unwrap();
        assert_eq!(rollout.spec.addon, "demo");
        assert_eq!(rollout.spec.placements[0].roles, [Role::Secondary]);
        let strategy = rollout.strategy().unwrap();
        assert_eq!(
            strategy,
            Strategy {
                kind: RolloutType::Progressive,
                mandatory_decision_groups: vec!["canary".into()],
                max_concurrency: Some(Size::Count(2)),
                min_success_time: Duration::from_secs(30),
                progress_deadline: Some(Duration::from_secs(600)),
                max_failures: Size::Percent(10),
            }
        );
        // The doc comment's example is this one.
        let documented: String = include_str!("rollout.rs")
            .lines()
            .skip_while(|line| *line != "//! ```yaml")
            .skip(1)
            .take_while(|line| *line != "//! ```")
            .map(|line| {
                let line = line.trim_start_matches("//!");
                line.strip_prefix(' ').unwrap_or(line)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let documented = Rollout::parse("documented", &documented).unwrap();
        assert_eq!(documented.spec.strategy, rollout.spec.strategy);
    }

    #[test]
    fn sizes_read_as_ocm_writes_them_and_percentages_round_up() {
        let read = |text: &str| serde_norway::from_str::<Size>(text);
        assert_eq!(read("3").unwrap(), Size::Count(3));
        assert_eq!(read("'3'").unwrap(), Size::Count(3));
        assert_eq!(read("25%").unwrap(), Size::Percent(25));
        for bad in ["101%", "-1", "x%", "1.5", "''"] {
            assert!(read(bad).is_err(), "{bad}");
        }
        assert_eq!(Size::Percent(25).of(5), 2);
        assert_eq!(Size::Percent(1).of(5), 1);
        assert_eq!(Size::Percent(0).of(5), 0);
        assert_eq!(Size::Percent(100).of(5), 5);
        assert_eq!(Size::Count(2).of(5), 2);
        assert_eq!(serde_json::to_value(Size::Percent(25)).unwrap(), "25%");
    }

    #[test]
    fn a_default_strategy_is_all_at_once_with_no_failure_tolerated_and_a_deadline() {
        let text = EXAMPLE.split("  strategy:").next().unwrap();
        let strategy = Rollout::parse("r", text).unwrap().strategy().unwrap();
        assert_eq!(strategy.kind, RolloutType::All);
        assert_eq!(strategy.max_failures, Size::Count(0));
        assert_eq!(strategy.progress_deadline, Some(DEFAULT_PROGRESS_DEADLINE));
        assert_eq!(strategy.min_success_time, Duration::ZERO);
        assert_eq!(
            strategy.to_string(),
            "All, maxConcurrency all, minSuccessTime 0s, progressDeadline 30m, maxFailures 0"
        );
        // Progressive with nothing given: one node at a time.
        let progressive = format!("{text}  strategy: {{type: Progressive}}\n");
        let strategy = Rollout::parse("r", &progressive)
            .unwrap()
            .strategy()
            .unwrap();
        assert_eq!(strategy.max_concurrency, Some(Size::Count(1)));
        assert_eq!(
            strategy.to_string(),
            "Progressive, maxConcurrency 1, minSuccessTime 0s, progressDeadline 30m, maxFailures 0"
        );
        // No deadline only when asked for.
        let none = EXAMPLE.replace("progressDeadline: 10m", "progressDeadline: None");
        let strategy = Rollout::parse("r", &none).unwrap().strategy().unwrap();
        assert_eq!(strategy.progress_deadline, None);
    }

    #[test]
    fn bad_rollouts_say_what_is_wrong() {
        let cases = [
            ("kind: Rollout", "kind: Installer", "kind `Installer`"),
            ("addon: demo", "addon: ../demo", "not a plain name"),
            ("maxConcurrency: 2", "maxConcurrency: 0", "maxConcurrency 0"),
            (
                "maxConcurrency: 2",
                "maxConcurrency: 2x",
                "neither a number",
            ),
            (
                "progressDeadline: 10m",
                "progressDeadline: soon",
                "progressDeadline `soon`",
            ),
            (
                "type: Progressive",
                "type: ProgressivePerGroup",
                "reads its parameters from `progressivePerGroup`",
            ),
            (
                "{groupName: canary}",
                "{groupName: early}",
                "mandatory decision group `early`",
            ),
            (
                "- name: edge",
                "- name: edge\n      colour: red",
                "unknown field `colour`",
            ),
            (
                "progressDeadline: 10m",
                "progressDeadline: 584942417355y",
                "progressDeadline `584942417355y`",
            ),
            (
                "minSuccessTime: 30s",
                "minSuccessTime: 400d",
                "longer than a year",
            ),
        ];
        for (from, to, expected) in cases {
            let text = EXAMPLE.replace(from, to);
            assert_ne!(text, EXAMPLE, "{from}");
            let error = Rollout::parse("rollout.yaml", &text)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("rollout.yaml: "), "{error}");
            assert!(error.contains(expected), "{to}: {error}");
        }
        let per_group = EXAMPLE
            .replace("type: Progressive", "type: ProgressivePerGroup")
            .replace("progressive:", "progressivePerGroup:");
        let error = Rollout::parse("r", &per_group).unwrap_err().to_string();
        assert!(error.contains("takes no `maxConcurrency`"), "{error}");
        let big = format!("{EXAMPLE}#{}\n", "x".repeat(MAX_ROLLOUT_BYTES));
        assert!(Rollout::parse("r", &big).is_err());
    }
}
