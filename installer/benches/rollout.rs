//! The wall time of one rollout of demo 1.0.0 → 2.0.0 across six hosts (network namespaces,
//! each with its own containerd), by strategy: every node at once (`All`), one at a time (as
//! kURL's successor upgrades its nodes), three at a time. A fresh fleet for each, its agents
//! asking each second; the time runs from `berth rollout apply` until every node succeeded.
//! `bench/rollout.sh` runs it.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::TestDist;
use support::fleet::{Fleet, rollout_file, stdout_of, wait_for_state};

fn main() {
    let strategies = [
        ("All", "    type: All\n".to_string()),
        ("maxConcurrency 1", progressive(1)),
        ("maxConcurrency 3", progressive(3)),
    ];
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let files = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    for (label, strategy) in &strategies {
        let fleet = Fleet::start(&dist, &spec);
        let first = &fleet.machines[0];
        let file = rollout_file(
            files.path(),
            "demo-2",
            &format!("  addon: demo\n  version: 2.0.0\n  strategy:\n{strategy}"),
        );
        let started = Instant::now();
        stdout_of(&first.berth(&["rollout", "apply", file.to_str().unwrap()]));
        wait_for_state(
            &fleet.machines,
            "demo-2",
            "Completed",
            Duration::from_secs(600),
        );
        let elapsed = started.elapsed();
        println!("{label:<18} {:>6.1} s", elapsed.as_secs_f64());
        times.push(elapsed);
    }
    let serial = times[1].as_secs_f64();
    for ((label, _), time) in strategies.iter().zip(&times) {
        println!(
            "{label:<18} {:>5.2}x the serial rollout's time",
            time.as_secs_f64() / serial
        );
    }
}

fn progressive(concurrency: u32) -> String {
    format!("    type: Progressive\n    progressive:\n      maxConcurrency: {concurrency}\n")
}
