//! How long `berth backup` takes, and how large its archive is, on the control-plane node of
//! a cluster with the suite's largest add-on set (Kubernetes, containerd, the pod network, a
//! storage stand-in and kURL's registry): against the by-hand way kubeadm's documentation
//! gives (`etcdctl snapshot save` with the etcd client certificate, then a tar of
//! /etc/kubernetes), which checks and records nothing. Each is run three times; the median is
//! printed, and `result BERTH_S BASELINE_S BERTH_BYTES BASELINE_BYTES` for bench/backup.sh.
//! Needs `BERTH_KUBERNETES_ARTEFACTS`, as the cluster tests do.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::Instant;

use support::kubernetes_cluster::{Cluster, SPEC};
use support::printed;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let cluster = Cluster::start_with_extra(
        1,
        Path::new(env!("CARGO_BIN_EXE_berth")),
        &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build"),
        support::kubernetes_dist::Extra::KurlRegistry,
        |_| format!("{SPEC}  local-volume:\n    version: 1.0.0\n  registry:\n    version: 3.1.1\n"),
    );
    let install = cluster.shell(
        0,
        &format!("curl -fsSL {}/{} | bash", cluster.served, cluster.id),
    );
    assert!(install.status.success(), "{}", printed(&install));
    let addons = cluster.shell(0, "berth status -o json | grep -c '\"currentVersion\"'");
    println!("installed: {} add-ons", printed(&addons).trim());

    let folder = cluster.work.path();
    let mut berth = Vec::new();
    let mut baseline = Vec::new();
    let (mut berth_bytes, mut baseline_bytes) = (0, 0);
    for run in 0..3 {
        let archive = folder.join(format!("berth-{run}.tar.zst"));
        let started = Instant::now();
        let output = cluster.shell(0, &format!("berth backup --output {}", archive.display()));
        berth.push(started.elapsed().as_secs_f64());
        assert!(output.status.success(), "{}", printed(&output));
        berth_bytes = fs_err::metadata(&archive).unwrap().len();

        let snapshot = folder.join(format!("etcd-{run}.db"));
        let tarball = folder.join(format!("by-hand-{run}.tar.gz"));
        let started = Instant::now();
        let output = cluster.shell(
            0,
            &format!(
                "ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 \
                 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
                 --cert=/etc/kubernetes/pki/apiserver-etcd-client.crt \
                 --key=/etc/kubernetes/pki/apiserver-etcd-client.key \
                 snapshot save {snapshot} >/dev/null && \
                 tar czf {tarball} -C / etc/kubernetes -C {folder} etcd-{run}.db",
                snapshot = snapshot.display(),
                tarball = tarball.display(),
                folder = folder.display(),
            ),
        );
        baseline.push(started.elapsed().as_secs_f64());
        assert!(output.status.success(), "{}", printed(&output));
        baseline_bytes = fs_err::metadata(&tarball).unwrap().len();
    }
    let (berth, baseline) = (median(berth), median(baseline));
    println!(
        "berth backup: {berth:.3} s, {berth_bytes} bytes (each file's digest in its manifest, Berth's records with it)"
    );
    println!(
        "etcdctl snapshot save + tar czf /etc/kubernetes: {baseline:.2} s, {baseline_bytes} bytes"
    );
    println!("ratio (berth / by hand): {:.2}", berth / baseline);
    let verify = cluster.shell(
        0,
        &format!(
            "time berth backup --verify {}",
            folder.join("berth-0.tar.zst").display()
        ),
    );
    println!("verify: {}", printed(&verify).trim());
    println!("result {berth:.3} {baseline:.3} {berth_bytes} {baseline_bytes}");
}
