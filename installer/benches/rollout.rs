//! The wall time of one rollout of demo 1.0.0 → 2.0.0 across six hosts (network namespaces,
//! each with its own containerd), by strategy: every node at once (`All`), one at a time (as
//! kURL's successor upgrades its nodes), three at a time; against six times one node's own
//! `berth upgrade`, the least a serial rollout can take. A fresh fleet for each, its agents at
//! their default settings (a report every 30 s, a poll held open in between); the time runs
//! from `berth rollout apply` until every node succeeded. `bench/rollout.sh` runs it.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::TestDist;
use support::fleet::{Fleet, Machine, rollout_file, stdout_of, wait_for_state};
use support::network::Network;

fn main() {
    let strategies = [
        ("All", "    type: All\n".to_string()),
        ("maxConcurrency 1", progressive(1)),
        ("maxConcurrency 3", progressive(3)),
    ];
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let newer = dist.spec("demo-2.yaml", &[("demo", "version: 2.0.0, port: 8080")]);
    let one = one_upgrade(&dist, &spec, &newer);
    println!("{:<18} {:>6.2} s", "one node's upgrade", one.as_secs_f64());
    let files = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    for (label, strategy) in &strategies {
        let fleet = Fleet::start_with(&dist, &spec, None);
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
        println!("{label:<18} {:>6.2} s", elapsed.as_secs_f64());
        times.push(elapsed);
    }
    let six = 6.0 * one.as_secs_f64();
    let serial = times[1].as_secs_f64();
    for ((label, _), time) in strategies.iter().zip(&times) {
        println!(
            "{label:<18} {:>5.2}x six upgrades' time, {:>5.2}x the serial rollout's",
            time.as_secs_f64() / six,
            time.as_secs_f64() / serial
        );
    }
}

/// The median of three `berth upgrade`s of one host from `spec` to `newer`, each on a host
/// installed afresh: what one node's step of a rollout cannot take less than.
fn one_upgrade(dist: &TestDist, spec: &std::path::Path, newer: &std::path::Path) -> Duration {
    let mut network = Network::new();
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let machine = Machine::start(network.host(), "single");
            let url = dist.url();
            let install = ["install", "--spec", spec.to_str().unwrap(), "--dist", &url];
            stdout_of(&machine.berth(&install));
            let upgrade = ["upgrade", "--spec", newer.to_str().unwrap(), "--dist", &url];
            let started = Instant::now();
            stdout_of(&machine.berth(&upgrade));
            started.elapsed()
        })
        .collect();
    times.sort();
    times[1]
}

fn progressive(concurrency: u32) -> String {
    format!("    type: Progressive\n    progressive:\n      maxConcurrency: {concurrency}\n")
}
