//! The time Berth takes to make a Kubernetes cluster on machines of their own
//! (`testgrid::kubernetes_cluster`), from `curl … | bash` to Ready nodes: one node, then three
//! (the first installed, two more joined with the printed command, one after the other), each
//! step's share of the first node's time as Berth and kubeadm report it (hooks that took over a
//! second, image loads, kubeadm's wait for the control plane). `bench/cluster.sh` runs it; it
//! needs `BERTH_KUBERNETES_ARTEFACTS`, as the tests do.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::kubernetes_cluster::{Cluster, nodes};
use support::printed;

fn cluster(count: usize) -> Cluster {
    Cluster::start(
        count,
        Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
    )
}

/// Waits until `count` nodes are Ready; panics with the cluster's account after `timeout`.
fn until_ready(cluster: &Cluster, count: usize, timeout: Duration) {
    support::kubernetes_cluster::wait_or_explain(
        &format!("{count} Ready nodes"),
        timeout,
        || {
            let nodes = nodes(cluster);
            nodes.len() == count && nodes.iter().all(|(_, ready)| *ready)
        },
        || cluster.account(),
    );
}

/// The steps an install's output times: `NAME took 12.3s`, `N image(s) imported (4.5s…)`, and
/// kubeadm's `All control plane components are healthy after 28.1 seconds`.
fn steps(output: &str) -> Vec<(String, f64)> {
    output
        .lines()
        .map(|line| line.trim_start_matches("berth: "))
        .filter_map(|line| {
            if let Some((what, rest)) = line.rsplit_once(" took ") {
                let seconds = rest.strip_suffix('s')?.parse().ok()?;
                // The engine times the wait for health as it times a hook.
                let what = match what {
                    "becoming healthy" => "waiting for health".to_string(),
                    hook => format!("hook {hook}"),
                };
                Some((what, seconds))
            } else if let Some((what, rest)) = line.split_once(" image(s) imported (") {
                let seconds = rest.split(['s', ',']).next()?.parse().ok()?;
                Some((format!("images of {what}"), seconds))
            } else {
                let rest = line
                    .strip_prefix("[apiclient] All control plane components are healthy after ")?;
                let seconds = rest.split(' ').next()?.parse().ok()?;
                Some(("kubeadm: control plane healthy after".into(), seconds))
            }
        })
        .collect()
}

fn main() {
    // One node.
    let one = cluster(1);
    let command = format!("curl -fsSL {}/{} | bash", one.served, one.id);
    let started = Instant::now();
    let install = one.shell(0, &command);
    let installed = started.elapsed();
    assert!(install.status.success(), "{}", printed(&install));
    until_ready(&one, 1, Duration::from_secs(300));
    let ready = started.elapsed();
    println!(
        "one node: installed in {:.1} s, Ready at {:.1} s",
        installed.as_secs_f64(),
        ready.as_secs_f64()
    );
    let one_ready = ready;
    for (step, seconds) in steps(&printed(&install)) {
        println!(
            "  {step:<48} {seconds:>6.1} s  {:>4.0}%",
            100.0 * seconds / ready.as_secs_f64()
        );
    }
    drop(one);

    // Three nodes: the first installed, two joined one after the other.
    let three = cluster(3);
    let command = format!("curl -fsSL {}/{} | bash", three.served, three.id);
    let started = Instant::now();
    let install = three.shell(0, &command);
    assert!(install.status.success(), "{}", printed(&install));
    let first = started.elapsed();
    let join = three.shell(0, "berth join-command");
    assert!(join.status.success(), "{}", printed(&join));
    let join = String::from_utf8_lossy(&join.stdout)
        .trim()
        .replacen("sudo ", "", 1);
    let mut joins = Vec::new();
    for index in 1..3 {
        let before = Instant::now();
        let joined = three.shell(index, &join);
        assert!(joined.status.success(), "{}", printed(&joined));
        joins.push(before.elapsed());
    }
    until_ready(&three, 3, Duration::from_secs(300));
    let ready = started.elapsed();
    println!(
        "three nodes: first installed in {:.1} s, joins {:.1} s and {:.1} s, three Ready at {:.1} s",
        first.as_secs_f64(),
        joins[0].as_secs_f64(),
        joins[1].as_secs_f64(),
        ready.as_secs_f64()
    );
    // For bench/cluster.sh's headline rows.
    println!(
        "result {:.1} {:.1}",
        one_ready.as_secs_f64(),
        ready.as_secs_f64()
    );
}
