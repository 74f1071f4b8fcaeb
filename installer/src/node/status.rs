//! The node's status as one document (`berth status`; what install, join and upgrade print
//! when they end): the installer it ran last, its last host preflights, and each add-on's
//! versions and conditions, its components probed live. The tables are printed from it, so
//! the table and the document say the same words.

use berth_formats::output::{
    AddonHealth, AddonHealthKind, AddonStatus, ApiVersion, Component, ComponentObject, Condition,
    ConditionStatus, ConditionType, HostPreflights, InstallerRef, NodeStatus, NodeStatusKind,
    Transition,
};

use crate::engine::PreflightRecord;
use crate::health::{HealthCondition, HealthRecord, RuntimeOnce};
use crate::node::last_installer::LastInstaller;
use crate::node::layout::Layout;
use crate::node::state::{self, AddonState, StateError};

/// Reads every record and probes every add-on's components now.
pub fn collect(layout: &Layout) -> Result<NodeStatus, StateError> {
    let (states, damaged) = state::load_as_seen(layout)?;
    let health = crate::health::check_all(layout, &states, &RuntimeOnce::new());
    Ok(NodeStatus {
        api_version: ApiVersion::V1,
        kind: NodeStatusKind::NodeStatus,
        installer: LastInstaller::load(layout)
            .ok()
            .flatten()
            .map(|last| InstallerRef {
                id: last.id,
                dist: last.dist,
            }),
        host_preflights: PreflightRecord::load(layout).map(host_preflights),
        addons: states
            .iter()
            .map(|state| addon_status(state, health.get(&state.name)))
            .collect(),
        damaged_records: damaged.iter().map(ToString::to_string).collect(),
    })
}

fn host_preflights(record: PreflightRecord) -> HostPreflights {
    HostPreflights {
        summary: record.report.summary(),
        checks: record.report.checks(),
        run: record.run,
        role: record.role,
        decision: record.decision,
    }
}

/// One add-on. Available is what its components say when it lists any, else whether a
/// version is in place; Degraded is Unknown for an add-on that lists no components.
pub fn addon_status(state: &AddonState, health: Option<&HealthRecord>) -> AddonStatus {
    let recorded = |kind: ConditionType, condition: &Option<state::Condition>| match condition {
        Some(condition) => Condition {
            kind,
            status: ConditionStatus::from_bool(condition.status),
            reason: condition.reason.to_string(),
            message: condition.message.clone(),
            last_transition_time: Some(condition.last_transition_time.clone()),
        },
        None => Condition {
            kind,
            status: ConditionStatus::Unknown,
            reason: "NotRecorded".into(),
            message: "no run has recorded it".into(),
            last_transition_time: None,
        },
    };
    let probed = |kind: ConditionType| {
        health
            .and_then(|record| record.condition(kind.as_str()))
            .map(|condition| health_condition(kind, condition))
    };
    let available = probed(ConditionType::Available).unwrap_or_else(|| match state.available {
        Some(_) => recorded(ConditionType::Available, &state.available),
        None => Condition {
            kind: ConditionType::Available,
            status: ConditionStatus::False,
            reason: "NotApplied".into(),
            message: "no version is in place".into(),
            last_transition_time: None,
        },
    });
    let degraded = probed(ConditionType::Degraded).unwrap_or_else(|| Condition {
        kind: ConditionType::Degraded,
        status: ConditionStatus::Unknown,
        reason: NO_COMPONENTS.into(),
        message: "the add-on's health.yaml lists no components".into(),
        last_transition_time: None,
    });
    AddonStatus {
        name: state.name.clone(),
        desired_version: state.desired.clone(),
        current_version: state.current.as_ref().map(|a| a.target.version.clone()),
        last_version: state.last.as_ref().map(|a| a.target.version.clone()),
        applied_at: state.current.as_ref().map(|a| a.applied_at.clone()),
        conditions: vec![
            available,
            degraded,
            recorded(ConditionType::Progressing, &state.progressing),
        ],
        components: health.map(components).unwrap_or_default(),
        history: state
            .history
            .iter()
            .map(|transition| Transition {
                time: transition.time.clone(),
                reason: transition.reason.to_string(),
                message: transition.message.clone(),
            })
            .collect(),
    }
}

/// The reason of a condition an add-on without components cannot probe.
const NO_COMPONENTS: &str = "NoComponents";

/// `berth health`'s document for an add-on whose version `version` is in place and which lists
/// no components: nothing to probe, so Available as applied, as `berth status` says.
pub fn addon_health_without_components(name: &str, version: &str) -> AddonHealth {
    AddonHealth {
        api_version: ApiVersion::V1,
        kind: AddonHealthKind::AddonHealth,
        name: name.to_string(),
        version: version.to_string(),
        checked_at: berth_formats::time::now(),
        conditions: vec![Condition {
            kind: ConditionType::Available,
            status: ConditionStatus::True,
            reason: NO_COMPONENTS.into(),
            message: "it lists no components (no health.yaml): Available as applied".into(),
            last_transition_time: None,
        }],
        components: Vec::new(),
    }
}

/// `berth health`'s document: one probe's conditions and components.
pub fn addon_health(record: &HealthRecord) -> AddonHealth {
    AddonHealth {
        api_version: ApiVersion::V1,
        kind: AddonHealthKind::AddonHealth,
        name: record.name.clone(),
        version: record.version.clone(),
        checked_at: record.checked_at.clone(),
        conditions: [ConditionType::Available, ConditionType::Degraded]
            .into_iter()
            .filter_map(|kind| {
                record
                    .condition(kind.as_str())
                    .map(|condition| health_condition(kind, condition))
            })
            .collect(),
        components: components(record),
    }
}

fn health_condition(kind: ConditionType, condition: &HealthCondition) -> Condition {
    Condition {
        kind,
        status: ConditionStatus::from_bool(condition.is_true()),
        reason: condition.reason.clone(),
        message: condition.message.clone(),
        last_transition_time: Some(condition.last_transition_time.clone()),
    }
}

fn components(record: &HealthRecord) -> Vec<Component> {
    let healthy = |conditions: &[HealthCondition]| {
        ConditionStatus::from_bool(conditions.iter().all(HealthCondition::is_true))
    };
    record
        .components
        .iter()
        .map(|component| {
            let first = component.conditions.first();
            Component {
                name: component.name.clone(),
                probe: component.probe.clone(),
                required: component.required,
                healthy: healthy(&component.conditions),
                reason: first.map(|c| c.reason.clone()).unwrap_or_default(),
                message: first.map(|c| c.message.clone()).unwrap_or_default(),
                objects: component
                    .refs
                    .iter()
                    .map(|object| ComponentObject {
                        kind: object.kind.clone(),
                        name: object.name.clone(),
                        healthy: healthy(&object.conditions),
                    })
                    .collect(),
            }
        })
        .collect()
}
