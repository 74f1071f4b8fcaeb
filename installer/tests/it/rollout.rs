//! Rollouts across six hosts, each a network namespace with its own containerd and Berth root:
//! node-1 installed demo and serves the fleet, node-2 … node-6 joined it (node-2 and node-4
//! labelled canary), and every node runs `berth fleet agent`. The first node moves demo across
//! them: a version that fails on the canaries stops there and rolls back; 1.0.0 → 2.0.0 goes
//! canaries first, two at a time, through a restart of the coordinator; a node cut off and a
//! node that turns Degraded while it soaks count as failed.

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::fleet::{
    Fleet, HookRun, Machine, most_at_once, rollout_file, states, status, stdout_of, wait_for_state,
};
use support::{TestDist, items, wait_until};

/// demo's versions, and 2.0.1: the same fields, but its install and join hooks fail.
fn dist() -> TestDist {
    let (_, mut dist) = TestDist::examples(&["demo"]);
    let failing = "function demo_preflight() { :; }\n\
                   function demo() { bail \"demo 2.0.1 fails on purpose\"; }\n\
                   function demo_join() { bail \"demo 2.0.1 fails on purpose\"; }\n";
    let folder = dist.addon_with_manifest("demo", "2.0.1", "# no image\n", failing);
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    fs_err::copy(
        repository.join("addons/demo/2.0.0/fields.yaml"),
        folder.join("fields.yaml"),
    )
    .unwrap();
    dist.package(&folder);
    dist.write_versions();
    dist
}

#[test]
fn demo_rolls_out_across_six_hosts_canaries_first_two_at_a_time() {
    let dist = dist();
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let mut fleet = Fleet::start(&dist, &spec);
    let machines = &fleet.machines;
    let first = &machines[0];
    let files = tempfile::tempdir().unwrap();
    let progressive = |soak: &str, deadline: &str, failures: u32| {
        format!(
            "  decisionGroups:\n    - groupName: canary\n      matchLabels: {{canary: \"true\"}}\n  strategy:\n    type: Progressive\n    progressive:\n      mandatoryDecisionGroups: [{{groupName: canary}}]\n      maxConcurrency: 2\n      minSuccessTime: {soak}\n      progressDeadline: {deadline}\n      maxFailures: {failures}\n"
        )
    };

    // A version that fails on the canaries stops there: no other node starts.
    let broken = rollout_file(
        files.path(),
        "broken",
        &format!(
            "  addon: demo\n  version: 2.0.1\n{}",
            progressive("2s", "2m", 0)
        ),
    );
    stdout_of(&first.berth(&["rollout", "apply", broken.to_str().unwrap()]));
    let record = wait_for_state(machines, "broken", "Stopped", Duration::from_secs(120));
    let stopped = states(&record);
    assert_eq!(stopped["node-2"], "Failed", "{record:#}");
    assert_eq!(stopped["node-4"], "Failed", "{record:#}");
    for node in ["node-1", "node-3", "node-5", "node-6"] {
        assert_eq!(stopped[node], "ToApply", "{node} never started: {record:#}");
    }
    let table = stdout_of(&first.berth(&["rollout", "status", "broken"]));
    for node in ["node-2", "node-4"] {
        let row = table.lines().find(|line| line.starts_with(node)).unwrap();
        assert!(row.contains("Failed"), "{table}");
        assert!(row.contains("fails on purpose"), "why it failed: {table}");
    }
    assert!(table.contains("more than maxFailures"), "{table}");
    for machine in machines {
        let tried = machine.hooks("2.0.1");
        let canary = machine.name == "node-2" || machine.name == "node-4";
        assert_eq!(!tried.is_empty(), canary, "{}: {tried:?}", machine.name);
    }
    // The rollback returns the canaries to 1.0.0.
    let said = stdout_of(&first.berth(&["rollout", "rollback", "broken"]));
    assert!(said.contains("node-2 to 1.0.0"), "{said}");
    wait_for_state(machines, "broken", "Completed", Duration::from_secs(120));
    for machine in machines {
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 1.0.0"),
            "{}",
            machine.name
        );
    }
    // The rollback's heading says where it goes, and the canaries' failed attempt no longer
    // shows once they are back.
    let table = stdout_of(&first.berth(&["rollout", "status", "broken"]));
    assert!(
        table.contains("back to what each node ran before broken."),
        "{table}"
    );
    wait_until(
        "every node's report after the rollback",
        Duration::from_secs(30),
        || {
            stdout_of(&first.berth(&["nodes"]))
                .matches("demo 1.0.0 Succeeded")
                .count()
                == 6
        },
    );

    // 1.0.0 → 2.0.0: the canaries, then the primary, then the rest, two at a time; the
    // coordinator is killed on the way and restarted.
    let upgrade = rollout_file(
        files.path(),
        "demo-2",
        &format!(
            "  addon: demo\n  version: 2.0.0\n{}",
            progressive("3s", "3m", 0)
        ),
    );
    stdout_of(&first.berth(&["rollout", "apply", upgrade.to_str().unwrap()]));
    wait_until("the canaries to succeed", Duration::from_secs(120), || {
        let states = states(&status(first, "demo-2"));
        states["node-2"] == "Succeeded" && states["node-4"] == "Succeeded"
    });
    fleet.restart_coordinator();
    let machines = &fleet.machines;
    let first = &machines[0];
    let untouched = states(&status(first, "demo-2"));
    let record = wait_for_state(machines, "demo-2", "Completed", Duration::from_secs(240));
    assert!(
        states(&record).values().all(|state| state == "Succeeded"),
        "{record:#}"
    );
    assert!(
        untouched.values().any(|state| state != "Succeeded"),
        "the coordinator was killed before the rollout ended: {untouched:?}"
    );
    let runs: Vec<HookRun> = machines
        .iter()
        .flat_map(|machine| machine.hooks("2.0.0"))
        .filter(|run| run.hook == "demo" || run.hook == "demo_join")
        .collect();
    for machine in machines {
        let count = runs.iter().filter(|run| run.node == machine.name).count();
        assert_eq!(count, 1, "{} ran 2.0.0 once: {runs:#?}", machine.name);
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 2.0.0"),
            "{}",
            machine.name
        );
    }
    let all: Vec<&HookRun> = runs.iter().collect();
    assert!(most_at_once(&all) <= 2, "at most two at once: {runs:#?}");
    let of = |node: &str| runs.iter().find(|run| run.node == node).unwrap();
    let canaries_done = of("node-2").ended.max(of("node-4").ended);
    for node in ["node-1", "node-3", "node-5", "node-6"] {
        assert!(
            of(node).started > canaries_done,
            "canaries first: {runs:#?}"
        );
    }
    for node in ["node-3", "node-5", "node-6"] {
        assert!(
            of(node).started > of("node-1").ended,
            "the primary first: {runs:#?}"
        );
    }
    let nodes: Vec<serde_json::Value> = items(
        stdout_of(&first.berth(&["nodes", "--json"])).as_bytes(),
        "NodeList",
    );
    for node in &nodes {
        let demo = &node["addons"][0];
        assert_eq!(demo["current"], "2.0.0", "{node:#}");
        assert_eq!(demo["rollout"]["desiredVersion"], "2.0.0", "{node:#}");
        assert_eq!(
            demo["configHash"], demo["rollout"]["desiredConfigHash"],
            "the last-applied config is the desired one: {node:#}"
        );
    }
    let table = stdout_of(&first.berth(&["nodes"]));
    assert_eq!(table.matches("demo 2.0.0 Succeeded").count(), 6, "{table}");

    // Rolled back, deleted and applied again from the same file: every node runs 2.0.0
    // again (the work has a new id; no node may answer with its earlier outcome) and ends
    // on it, its report proving it.
    stdout_of(&first.berth(&["rollout", "rollback", "demo-2"]));
    let back = wait_for_state(machines, "demo-2", "Completed", Duration::from_secs(240));
    assert!(
        states(&back).values().all(|state| state == "Succeeded"),
        "{back:#}"
    );
    for machine in machines {
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 1.0.0"),
            "{}",
            machine.name
        );
    }
    let first_id = record["uid"].clone();
    stdout_of(&first.berth(&["rollout", "delete", "demo-2"]));
    stdout_of(&first.berth(&["rollout", "apply", upgrade.to_str().unwrap()]));
    let again = wait_for_state(machines, "demo-2", "Completed", Duration::from_secs(240));
    assert_ne!(again["uid"], first_id, "a new apply, new work ids");
    assert!(
        states(&again).values().all(|state| state == "Succeeded"),
        "{again:#}"
    );
    for machine in machines {
        let main_runs = machine
            .hooks("2.0.0")
            .into_iter()
            .filter(|run| run.hook == "demo" || run.hook == "demo_join")
            .count();
        assert_eq!(main_runs, 2, "{} ran 2.0.0 again", machine.name);
        assert_eq!(
            machine.demo(8080).as_deref(),
            Some("demo 2.0.0"),
            "{}",
            machine.name
        );
    }

    // A node cut off counts as failed after progressDeadline; a node that turns Degraded
    // while it soaks counts as failed. The secondaries move demo to port 8081.
    machines[5].host.set_link(false);
    let port = rollout_file(
        files.path(),
        "port",
        "  addon: demo\n  version: 2.0.0\n  placements:\n    - name: secondaries\n      roles: [secondary]\n      config: {port: 8081}\n  strategy:\n    type: Progressive\n    progressive:\n      maxConcurrency: 5\n      minSuccessTime: 25s\n      progressDeadline: 20s\n      maxFailures: 2\n",
    );
    stdout_of(&first.berth(&["rollout", "apply", port.to_str().unwrap()]));
    wait_until("node-3 to soak", Duration::from_secs(60), || {
        states(&status(first, "port"))["node-3"] == "Soaking"
    });
    machines[2].containerd.ctr(&[
        "task",
        "kill",
        "--signal",
        "SIGKILL",
        &container_of(&machines[2]),
    ]);
    let record = wait_for_state(machines, "port", "Completed", Duration::from_secs(120));
    let targets = record["targets"].as_array().unwrap();
    let target = |node: &str| {
        targets
            .iter()
            .find(|target| target["node"] == node)
            .unwrap()
    };
    assert!(
        targets.iter().all(|target| target["node"] != "node-1"),
        "{record:#}"
    );
    assert_eq!(target("node-3")["state"], "Failed", "{record:#}");
    assert!(
        target("node-3")["message"]
            .as_str()
            .unwrap()
            .contains("within minSuccessTime (25s) after its run succeeded: demo is not Available"),
        "{record:#}"
    );
    assert_eq!(target("node-6")["state"], "Failed", "{record:#}");
    assert!(
        target("node-6")["message"]
            .as_str()
            .unwrap()
            .contains("did not succeed within progressDeadline"),
        "{record:#}"
    );
    for node in ["node-2", "node-4", "node-5"] {
        assert_eq!(target(node)["state"], "Succeeded", "{record:#}");
    }
    assert_eq!(machines[1].demo(8081).as_deref(), Some("demo 2.0.0"));
    machines[5].host.set_link(true);
    let log = fs_err::read_to_string(first.root.path().join("var/log/berth/fleet.log")).unwrap();
    assert!(
        log.lines().any(|line| line.contains("node-2 (")
            && line.contains(": demo-2.")
            && line.ends_with(" Soaking")),
        "{log}"
    );
}

/// The name demo's hook gives its container on a machine whose root is not /.
fn container_of(machine: &Machine) -> String {
    use sha2::Digest as _;
    let hash = hex::encode(sha2::Sha256::digest(
        machine.root.path().display().to_string().as_bytes(),
    ));
    format!("berth-demo-{}", &hash[..12])
}
