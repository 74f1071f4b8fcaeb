//! What a machine of this host ([`crate::machine`]) needs before a kubelet runs on it, for the
//! suite's clusters and the grid's `netns` provider alike, and why:
//! - each kubelet has a cgroup folder of its own (`--cgroup-root`, in `/etc/default/kubelet`,
//!   the file upstream's kubelet unit reads for node flags): the machines share this host's
//!   cgroups, where two kubelets would otherwise both own `/kubepods`;
//! - the kubelets judge the disk they share with this host and everything else it runs: they
//!   evict no pod and remove no image for disk space (only memory evicts), else a host disk
//!   filled by other work makes pods Evicted and removes images Berth loaded before any pod
//!   used them;
//! - a `kubectl` package this host may have from elsewhere is removed, as kubectl comes with
//!   the Kubernetes package (Debian's `kubernetes-client`).
//!
//! Containers run in mount namespaces of their own, so ending a machine's processes leaves
//! them (a pod's pause process outlives its shim): [`KubeletCgroup`] ends what the kubelet's
//! cgroup folders hold once the machine has ended.

use crate::machine::{Machine, PATH};

/// A machine's kubelet cgroup folders: what they hold is ended, and they are removed, when
/// this is dropped (after the machine).
pub struct KubeletCgroup {
    root: String,
}

/// Readies `machine` for a kubelet (the module's comment says how and why); its cgroup
/// folders go when the returned value is dropped.
pub fn prepare(machine: &Machine) -> KubeletCgroup {
    let root = cgroup_root(machine);
    machine.write(
        "/etc/default/kubelet",
        format!(
            "KUBELET_EXTRA_ARGS=--cgroup-root=/{root} --fail-swap-on=false \
             --eviction-hard=memory.available<100Mi --image-gc-high-threshold=100 \
             --image-gc-low-threshold=99\n"
        ),
    );
    crate::run(machine.command("bash").args([
            "-c",
            "set -e
             for controller in /sys/fs/cgroup/*/; do mkdir -p \"$controller$1\"; done
             if dpkg-query -W -f='${Status}' kubectl 2>/dev/null | grep -q 'install ok installed'; then
                 dpkg --remove kubectl >/dev/null
             fi",
            "bash",
            &root,
        ])
        .env("PATH", PATH));
    KubeletCgroup { root }
}

/// The cgroup folder of a machine's kubelet: its namespace's name, unique on this host.
pub fn cgroup_root(machine: &Machine) -> String {
    format!("berth-{}", machine.host.namespace)
}

/// Ends every process in a kubelet's cgroup folders, then removes them, deepest first (a
/// cgroup folder is removed empty or not at all).
const END_CGROUP_TREE: &str = "
for controller in /sys/fs/cgroup/*/; do
    tree=\"$controller$1\"
    [ -d \"$tree\" ] || continue
    for _ in $(seq 50); do
        pids=$(find \"$tree\" -name cgroup.procs -exec cat {} +)
        [ -n \"$pids\" ] || break
        kill -9 $pids 2>/dev/null
        sleep 0.1
    done
    find \"$tree\" -depth -type d -exec rmdir {} + 2>/dev/null
done
true";

impl Drop for KubeletCgroup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("sh")
            .args(["-c", END_CGROUP_TREE, "sh", &self.root])
            .status();
    }
}
