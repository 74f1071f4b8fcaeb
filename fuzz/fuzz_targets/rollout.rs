//! A rollout file, and what the first node does with it: read, planned over three nodes, and
//! decided step by step as the nodes report, with every deadline and soak in play.
#![no_main]
use std::time::{Duration, UNIX_EPOCH};

use berth_fleet::rollouts;
use berth_formats::fleet::{AddonReport, NodeInfo, NodeRecord, Outcome, Role};
use berth_formats::Sha256Digest;
use berth_formats::rollout::Rollout;

fn node(number: usize) -> NodeRecord {
    NodeRecord {
        info: NodeInfo {
            name: format!("node-{number}"),
            machine_id: format!("m{number}"),
            role: if number == 0 { Role::Primary } else { Role::Secondary },
            labels: [("canary".to_string(), (number % 2 == 0).to_string())].into(),
            address: String::new(),
        },
        pin: format!("sha256:{number}"),
        seen_from: String::new(),
        registered_at: String::new(),
        last_contact: "2030-01-01T00:00:00Z".into(),
        addons: vec![AddonReport {
            name: "demo".into(),
            desired: None,
            current: Some("1.0.0".into()),
            last: None,
            progressing: "Succeeded".into(),
            available: Some(true),
            degraded: None,
            config_hash: None,
            node_config: Default::default(),
        }],
    }
}

libfuzzer_sys::fuzz_target!(|text: &str| {
    let Ok(rollout) = Rollout::parse("rollout.yaml", text) else {
        return;
    };
    let nodes: Vec<NodeRecord> = (0..3).map(node).collect();
    let start = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let packages = rollouts::wanted_versions(&rollout)
        .into_iter()
        .map(|version| (version.to_string(), Sha256Digest::of(version.as_bytes())))
        .collect();
    let Ok(record) = rollouts::plan(rollout, &[], &nodes, "fuzz".into(), packages, start) else {
        return;
    };
    let mut records = vec![record];
    for step in 0..8u64 {
        let now = start + Duration::from_secs(step * 3600);
        rollouts::tick(&mut records[0], &nodes, now);
        let _ = rollouts::next_tick(&records, now);
        for node in &nodes {
            if let Some(work) = rollouts::work_for(&records, &node.info.machine_id, &[]) {
                let target = records[0]
                    .targets
                    .iter()
                    .find(|target| target.machine_id == node.info.machine_id)
                    .cloned();
                let mut addons = node.addons.clone();
                if let Some(target) = target {
                    addons[0].current = Some(target.version.clone());
                    addons[0].config_hash = Some(target.config_hash.clone());
                }
                let outcome = if step % 3 == 0 { Outcome::Failed } else { Outcome::Succeeded };
                let _ = rollouts::progress(
                    &mut records,
                    &node.info.machine_id,
                    &work.id,
                    outcome,
                    "fuzz",
                    &addons,
                    now,
                );
            }
        }
    }
    let _ = rollouts::rollback(&records[0], start + Duration::from_secs(9 * 3600));
});
