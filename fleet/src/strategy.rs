//! Which nodes a rollout starts next, given where each node stands: OCM's rollout rules.
//!
//! The nodes are split into phases, taken one after the other: each mandatory decision group
//! (the canaries) in the order the strategy lists them, then the rest. A phase starts only
//! once every node of the phases before it has finished, succeeded or failed. Within a phase:
//! - `All` starts every node at once (no role order, failures never stop it, as OCM's All);
//! - `Progressive` starts nodes in order, at most `maxConcurrency` running or soaking at a
//!   time, canaries included; the rest runs its primaries before its secondaries, so a control
//!   plane moves before the nodes that depend on it. Failures count over the whole rollout;
//! - `ProgressivePerGroup` starts each whole group at once: the canary groups, then the rest in
//!   groups of `nodesPerDecisionGroup`, primaries first. Failures count per group.
//!
//! A node runs, then soaks: it counts as succeeded once it has stayed healthy for
//! `minSuccessTime` after its run (the coordinator fails a node that turns unhealthy while
//! soaking). A node still running `progressDeadline` after it started has timed out, and counts
//! as failed. Once the failures exceed `maxFailures`, no further node starts; the nodes already
//! started finish.
//!
//! Everything here is a pure function of the targets, their progress and the time, so the
//! coordinator can persist progress, die, and decide again from what it wrote.

use std::collections::BTreeMap;
use std::time::Duration;

use berth_formats::rollout::{Role, RolloutType, Size, Strategy};

/// A node the rollout moves, in the order its phase takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub node: String,
    pub role: Role,
    /// The decision group whose labels the node matches first, if any.
    pub group: Option<String>,
}

/// Where one node stands. Times are seconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Not started.
    ToApply,
    /// Its run started and has not finished.
    Running {
        since: u64,
    },
    /// Its run succeeded at `since`; it soaks until `minSuccessTime` has passed.
    Succeeded {
        since: u64,
    },
    Failed,
}

/// What to do now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Nodes to start now, in order.
    pub start: Vec<String>,
    /// Running nodes past `progressDeadline`: record them failed.
    pub timed_out: Vec<String>,
    /// Where the rollout is.
    pub state: RolloutState,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RolloutState {
    /// Nodes are running or soaking in this phase (or are about to start).
    #[default]
    Progressing,
    /// Failures exceeded `maxFailures`: no node starts any more. `settled` once no node of the
    /// rollout is running or soaking.
    Stopped { settled: bool },
    /// Every node finished.
    Completed,
}

/// One phase: its name (a decision group's, or `rest`) and its nodes in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub name: String,
    pub nodes: Vec<String>,
}

/// The phases of `targets` under `strategy`, in the order they are taken.
pub fn phases(
    strategy: &Strategy,
    targets: &[Target],
    nodes_per_group: Option<Size>,
) -> Vec<Phase> {
    let ordered = |mut members: Vec<&Target>| {
        if strategy.kind != RolloutType::All {
            // Stable: primaries first, each role in the targets' own order.
            members.sort_by_key(|target| target.role);
        }
        members
            .into_iter()
            .map(|target| target.node.clone())
            .collect::<Vec<_>>()
    };
    let mut phases = Vec::new();
    for group in &strategy.mandatory_decision_groups {
        let members = targets
            .iter()
            .filter(|target| target.group.as_deref() == Some(group.as_str()))
            .collect();
        phases.push(Phase {
            name: group.clone(),
            nodes: ordered(members),
        });
    }
    let rest: Vec<&Target> = targets
        .iter()
        .filter(|target| {
            target
                .group
                .as_ref()
                .is_none_or(|group| !strategy.mandatory_decision_groups.contains(group))
        })
        .collect();
    let rest = ordered(rest);
    match strategy.kind {
        RolloutType::ProgressivePerGroup => {
            let size = nodes_per_group
                .map(|size| size.of(rest.len()).max(1))
                .unwrap_or(rest.len().max(1));
            for (index, chunk) in rest.chunks(size).enumerate() {
                phases.push(Phase {
                    name: format!("rest-{}", index + 1),
                    nodes: chunk.to_vec(),
                });
            }
        }
        _ => phases.push(Phase {
            name: "rest".into(),
            nodes: rest,
        }),
    }
    phases.retain(|phase| !phase.nodes.is_empty());
    phases
}

/// Decides what to do at `now`, from every node's progress (a node missing is `ToApply`).
pub fn decide(
    strategy: &Strategy,
    phases: &[Phase],
    roles: &BTreeMap<String, Role>,
    progress: &BTreeMap<String, Progress>,
    now: u64,
) -> Decision {
    let deadline = strategy
        .progress_deadline
        .map(|deadline| deadline.as_secs());
    let soak = strategy.min_success_time.as_secs();
    let total: usize = phases.iter().map(|phase| phase.nodes.len()).sum();
    let mut decision = Decision::default();
    // Progress as of now: a node past its deadline has failed.
    let state_of = |node: &String| match progress.get(node).unwrap_or(&Progress::ToApply) {
        Progress::Running { since } if deadline.is_some_and(|deadline| now >= since + deadline) => {
            Progress::Failed
        }
        other => other.clone(),
    };
    for phase in phases {
        for node in &phase.nodes {
            if matches!(progress.get(node), Some(Progress::Running { .. }))
                && state_of(node) == Progress::Failed
            {
                decision.timed_out.push(node.clone());
            }
        }
    }
    let active = |node: &String| match state_of(node) {
        Progress::Running { .. } => true,
        Progress::Succeeded { since } => now < since + soak,
        _ => false,
    };
    let mut failed_so_far = 0;
    for phase in phases {
        let failed = phase
            .nodes
            .iter()
            .filter(|node| state_of(node) == Progress::Failed)
            .count();
        failed_so_far += failed;
        let breached = match strategy.kind {
            RolloutType::All => false,
            RolloutType::Progressive => failed_so_far > strategy.max_failures.of(total),
            RolloutType::ProgressivePerGroup => {
                failed > strategy.max_failures.of(phase.nodes.len())
            }
        };
        if breached {
            let settled = !phases.iter().flat_map(|phase| &phase.nodes).any(active);
            decision.state = RolloutState::Stopped { settled };
            return decision;
        }
        let running: Vec<&String> = phase.nodes.iter().filter(|node| active(node)).collect();
        let pending: Vec<&String> = phase
            .nodes
            .iter()
            .filter(|node| state_of(node) == Progress::ToApply)
            .collect();
        if running.is_empty() && pending.is_empty() {
            continue;
        }
        let room = match (strategy.kind, strategy.max_concurrency) {
            (RolloutType::Progressive, Some(limit)) => limit.of(total).max(1),
            _ => usize::MAX,
        }
        .saturating_sub(running.len());
        // Primaries before secondaries: a secondary waits while a primary of the phase has
        // not finished (All keeps no role order).
        let primary_unfinished = strategy.kind != RolloutType::All
            && phase.nodes.iter().any(|node| {
                roles.get(node) == Some(&Role::Primary)
                    && (active(node) || state_of(node) == Progress::ToApply)
            });
        decision.start = pending
            .into_iter()
            .filter(|node| !primary_unfinished || roles.get(*node) == Some(&Role::Primary))
            .take(room)
            .cloned()
            .collect();
        return decision;
    }
    decision.state = RolloutState::Completed;
    decision
}

/// How long until the next decision can differ without any node reporting: the earliest
/// deadline or soak end still ahead.
pub fn next_change(
    strategy: &Strategy,
    progress: &BTreeMap<String, Progress>,
    now: u64,
) -> Option<Duration> {
    progress
        .values()
        .filter_map(|progress| match progress {
            Progress::Running { since } => strategy
                .progress_deadline
                .map(|deadline| since + deadline.as_secs()),
            Progress::Succeeded { since } => Some(since + strategy.min_success_time.as_secs()),
            _ => None,
        })
        .filter(|at| *at > now)
        .min()
        .map(|at| Duration::from_secs(at - now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{Just, any, prop_assert_eq, prop_oneof, proptest};
    use proptest::strategy::Strategy as _;

    fn strategy(kind: RolloutType, concurrency: Option<u32>, max_failures: u32) -> Strategy {
        Strategy {
            kind,
            mandatory_decision_groups: vec!["canary".into()],
            max_concurrency: concurrency.map(Size::Count),
            min_success_time: Duration::from_secs(30),
            progress_deadline: Some(Duration::from_secs(300)),
            max_failures: Size::Count(max_failures),
        }
    }

    /// The acceptance fleet: one primary, five secondaries, two of them canaries.
    fn fleet() -> Vec<Target> {
        let target = |node: &str, role, group: Option<&str>| Target {
            node: node.into(),
            role,
            group: group.map(str::to_string),
        };
        vec![
            target("node-1", Role::Primary, None),
            target("node-2", Role::Secondary, Some("canary")),
            target("node-3", Role::Secondary, None),
            target("node-4", Role::Secondary, Some("canary")),
            target("node-5", Role::Secondary, None),
            target("node-6", Role::Secondary, None),
        ]
    }

    fn roles(targets: &[Target]) -> BTreeMap<String, Role> {
        targets
            .iter()
            .map(|target| (target.node.clone(), target.role))
            .collect()
    }

    #[test]
    fn canaries_first_then_the_primary_then_the_rest_two_at_a_time() {
        let targets = fleet();
        let strategy = strategy(RolloutType::Progressive, Some(2), 0);
        let phases = phases(&strategy, &targets, None);
        assert_eq!(
            phases,
            [
                Phase {
                    name: "canary".into(),
                    nodes: vec!["node-2".into(), "node-4".into()]
                },
                Phase {
                    name: "rest".into(),
                    nodes: vec![
                        "node-1".into(),
                        "node-3".into(),
                        "node-5".into(),
                        "node-6".into()
                    ]
                },
            ]
        );
        let roles = roles(&targets);
        let mut progress = BTreeMap::new();
        let decide_at = |progress: &BTreeMap<String, Progress>, now| {
            decide(&strategy, &phases, &roles, progress, now)
        };
        assert_eq!(decide_at(&progress, 0).start, ["node-2", "node-4"]);
        progress.insert("node-2".into(), Progress::Running { since: 0 });
        progress.insert("node-4".into(), Progress::Running { since: 0 });
        assert_eq!(decide_at(&progress, 10).start, Vec::<String>::new());
        progress.insert("node-2".into(), Progress::Succeeded { since: 20 });
        progress.insert("node-4".into(), Progress::Succeeded { since: 25 });
        // Soaking: the rest waits for both canaries' 30 s.
        assert!(decide_at(&progress, 50).start.is_empty());
        assert_eq!(
            next_change(&strategy, &progress, 50),
            Some(Duration::from_secs(5))
        );
        // The primary alone first, then the secondaries two at a time.
        assert_eq!(decide_at(&progress, 55).start, ["node-1"]);
        progress.insert("node-1".into(), Progress::Running { since: 55 });
        assert!(decide_at(&progress, 60).start.is_empty());
        progress.insert("node-1".into(), Progress::Succeeded { since: 60 });
        assert!(decide_at(&progress, 89).start.is_empty());
        assert_eq!(decide_at(&progress, 90).start, ["node-3", "node-5"]);
    }

    #[test]
    fn a_failed_canary_stops_the_rollout_before_the_rest() {
        let targets = fleet();
        let strategy = strategy(RolloutType::Progressive, Some(2), 0);
        let phases = phases(&strategy, &targets, None);
        let roles = roles(&targets);
        let mut progress = BTreeMap::new();
        progress.insert("node-2".into(), Progress::Failed);
        progress.insert("node-4".into(), Progress::Running { since: 0 });
        let decision = decide(&strategy, &phases, &roles, &progress, 10);
        assert_eq!(decision.start, Vec::<String>::new());
        assert_eq!(decision.state, RolloutState::Stopped { settled: false });
        // The other canary times out: settled, still stopped.
        let decision = decide(&strategy, &phases, &roles, &progress, 300);
        assert_eq!(decision.timed_out, ["node-4"]);
        assert_eq!(decision.state, RolloutState::Stopped { settled: true });
    }

    #[test]
    fn all_starts_every_node_at_once_and_per_group_a_group_at_a_time() {
        let targets = fleet();
        let all = Strategy {
            mandatory_decision_groups: Vec::new(),
            ..strategy(RolloutType::All, None, 0)
        };
        let phases_all = phases(&all, &targets, None);
        let decision = decide(&all, &phases_all, &roles(&targets), &BTreeMap::new(), 0);
        assert_eq!(decision.start.len(), 6);

        let per_group = strategy(RolloutType::ProgressivePerGroup, None, 0);
        let groups = phases(&per_group, &targets, Some(Size::Count(2)));
        let names: Vec<&str> = groups.iter().map(|phase| phase.name.as_str()).collect();
        assert_eq!(names, ["canary", "rest-1", "rest-2"]);
        assert_eq!(groups[1].nodes, ["node-1", "node-3"]);
    }

    /// Runs a rollout to its end: each started node succeeds or fails by `fails`, after
    /// `durations` seconds; checks the rules at every step.
    fn simulate(
        strategy: &Strategy,
        targets: &[Target],
        fails: &[bool],
        durations: &[u64],
    ) -> BTreeMap<String, Progress> {
        let phases = phases(strategy, targets, Some(Size::Count(2)));
        let roles = roles(targets);
        let index: BTreeMap<&str, usize> = targets
            .iter()
            .enumerate()
            .map(|(index, target)| (target.node.as_str(), index))
            .collect();
        let mut progress: BTreeMap<String, Progress> = BTreeMap::new();
        let mut stopped_at = None;
        for now in 0..100_000u64 {
            let decision = decide(strategy, &phases, &roles, &progress, now);
            for node in &decision.timed_out {
                progress.insert(node.clone(), Progress::Failed);
            }
            if let RolloutState::Stopped { .. } = decision.state {
                stopped_at.get_or_insert(now);
            }
            // Failures beyond the tolerance start nothing, counted here on their own.
            let failed = |nodes: &[String]| {
                nodes
                    .iter()
                    .filter(|node| progress.get(*node) == Some(&Progress::Failed))
                    .count()
            };
            let all_nodes: Vec<String> = targets.iter().map(|target| target.node.clone()).collect();
            let breached = match strategy.kind {
                RolloutType::All => false,
                RolloutType::Progressive => {
                    failed(&all_nodes) > strategy.max_failures.of(targets.len())
                }
                RolloutType::ProgressivePerGroup => phases.iter().any(|phase| {
                    failed(&phase.nodes) > strategy.max_failures.of(phase.nodes.len())
                }),
            };
            assert!(
                !breached || decision.start.is_empty(),
                "{:?} started past the failure tolerance at {now}",
                decision.start
            );
            for node in &decision.start {
                assert!(
                    stopped_at.is_none(),
                    "{node} started after the rollout stopped"
                );
                assert!(!progress.contains_key(node), "{node} started twice");
                // Every node of earlier phases has finished.
                let phase = phases
                    .iter()
                    .position(|phase| phase.nodes.contains(node))
                    .unwrap();
                for earlier in phases[..phase].iter().flat_map(|phase| &phase.nodes) {
                    let finished = match progress.get(earlier) {
                        Some(Progress::Failed) => true,
                        Some(Progress::Succeeded { since }) => {
                            now >= since + strategy.min_success_time.as_secs()
                        }
                        _ => false,
                    };
                    assert!(finished, "{node} started before {earlier} finished");
                }
                progress.insert(node.clone(), Progress::Running { since: now });
            }
            if let (RolloutType::Progressive, Some(limit)) =
                (strategy.kind, strategy.max_concurrency)
            {
                let busy = progress
                    .values()
                    .filter(|progress| match progress {
                        Progress::Running { .. } => true,
                        Progress::Succeeded { since } => {
                            now < since + strategy.min_success_time.as_secs()
                        }
                        _ => false,
                    })
                    .count();
                assert!(
                    busy <= limit.of(targets.len()).max(1),
                    "{busy} busy at {now}"
                );
            }
            if matches!(
                decision.state,
                RolloutState::Completed | RolloutState::Stopped { settled: true }
            ) {
                return progress;
            }
            for (node, state) in progress.iter_mut() {
                let at = index[node.as_str()];
                if let Progress::Running { since } = *state
                    && now + 1 >= since + durations[at]
                {
                    *state = if fails[at] {
                        Progress::Failed
                    } else {
                        Progress::Succeeded { since: now + 1 }
                    };
                }
            }
        }
        panic!("the rollout never ended: {progress:?}");
    }

    fn any_fleet() -> impl proptest::strategy::Strategy<Value = Vec<Target>> {
        proptest::collection::vec((any::<bool>(), 0..3u8), 1..12).prop_map(|nodes| {
            nodes
                .into_iter()
                .enumerate()
                .map(|(index, (primary, group))| Target {
                    node: format!("node-{index:02}"),
                    role: if primary {
                        Role::Primary
                    } else {
                        Role::Secondary
                    },
                    group: match group {
                        0 => Some("canary".into()),
                        1 => Some("other".into()),
                        _ => None,
                    },
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn every_rule_holds_at_every_step(
            targets in any_fleet(),
            kind in prop_oneof![
                Just(RolloutType::All),
                Just(RolloutType::Progressive),
                Just(RolloutType::ProgressivePerGroup)
            ],
            concurrency in 1..4u32,
            max_failures in 0..3u32,
            fails in proptest::collection::vec(proptest::bool::weighted(0.2), 12),
            durations in proptest::collection::vec(1..400u64, 12),
        ) {
            let mut strategy = strategy(kind, Some(concurrency), max_failures);
            if kind != RolloutType::Progressive {
                strategy.max_concurrency = None;
            }
            if kind == RolloutType::All {
                strategy.mandatory_decision_groups.clear();
            }
            let progress = simulate(&strategy, &targets, &fails, &durations);
            let failed = progress.values().filter(|state| **state == Progress::Failed).count();
            // A rollout with no failure moves every node.
            if failed == 0 {
                prop_assert_eq!(progress.len(), targets.len());
            }
        }
    }
}
