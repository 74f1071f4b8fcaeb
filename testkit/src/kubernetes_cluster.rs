//! Kubernetes clusters on machines of their own (network, mount and UTS namespaces; see
//! [`crate::machine`]), for the tests and benchmarks that install real Kubernetes with Berth:
//! the dist [`crate::kubernetes_dist`] builds, served by `berth-build serve` from a host of its
//! own, and machines ready for `curl … | bash` and the printed join command.
//!
//! The machines are readied for their kubelets ([`crate::kubelet_host`]), and `/etc/hosts`
//! names every machine: no name server is reachable, and the kubelet's hostname must resolve.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use berth_formats::spec::InstallerSpec;

use crate::images::{PlatformImage, busybox_layer, write_oci_archive};
use crate::kubelet_host::{self, KubeletCgroup};
use crate::kubernetes_dist;
use crate::machine::Machine;
use crate::network::{Host, Network};
use crate::{Server, printed};

pub use crate::machine::PATH;

/// A test workload image: busybox, imported on every node under this name.
pub const BUSYBOX: &str = "docker.io/library/busybox:berth-test";

/// The machines, the server that serves their installer, and the dist it serves. Fields drop
/// in order: the machines end (with every process they ran), then what their kubelets ran.
pub struct Cluster {
    pub machines: Vec<Machine>,
    _cgroups: Vec<KubeletCgroup>,
    /// `http://ADDRESS:PORT`, where the installer is served.
    pub served: String,
    /// The installer's id: `curl -fsSL {served}/{id} | bash` installs it.
    pub id: String,
    /// The test's own folder (the spec, the server's log, the installers it posted).
    pub work: tempfile::TempDir,
    _server: Server,
    network: Network,
}

/// The spec: kURL's Installer with Kubernetes, Berth's containerd and its pod network.
pub const SPEC: &str = "apiVersion: cluster.kurl.sh/v1beta1
kind: Installer
metadata:
  name: kubernetes
spec:
  kubernetes:
    version: 1.20.2
  containerd:
    version: 1.6.20
  pod-network:
    version: 1.0.0
";

impl Cluster {
    /// Builds the dist with `berth_build` (or finds it built: [`kubernetes_dist::cached`]),
    /// serves it (with `berth` as the node binary) from a host of its own, and boots `count` machines named `node-1`…, ready for Berth.
    pub fn start(count: usize, berth: &Path, berth_build: &Path) -> Cluster {
        Self::start_with(count, berth, berth_build, |_| SPEC.to_string())
    }

    /// [`Cluster::start`] with the spec `spec` makes from the machines' addresses (in order).
    pub fn start_with(
        count: usize,
        berth: &Path,
        berth_build: &Path,
        spec: impl FnOnce(&[String]) -> String,
    ) -> Cluster {
        Self::start_with_extra(
            count,
            berth,
            berth_build,
            kubernetes_dist::Extra::None,
            spec,
        )
    }

    /// [`Cluster::start_with`], its dist holding `extra` add-ons too.
    pub fn start_with_extra(
        count: usize,
        berth: &Path,
        berth_build: &Path,
        extra: kubernetes_dist::Extra,
        spec: impl FnOnce(&[String]) -> String,
    ) -> Cluster {
        let artefacts = kubernetes_dist::artefacts().unwrap_or_else(|error| panic!("{error}"));
        let work = tempfile::tempdir().unwrap();
        let dist = kubernetes_dist::cached_with(
            berth_build,
            &artefacts,
            &berth_build
                .parent()
                .expect("berth-build is in a folder")
                .join("kubernetes-dist"),
            extra,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let mut network = Network::new();
        let server_host = network.host();
        let hosts: Vec<Host> = (0..count).map(|_| network.host()).collect();
        let addresses: Vec<String> = hosts
            .iter()
            .map(|host| host.address().to_string())
            .collect();
        let spec_file = work.path().join("installer.yaml");
        fs_err::write(&spec_file, spec(&addresses)).unwrap();
        let spec = spec_file;
        let id = InstallerSpec::load(&spec).unwrap().id();

        let served = format!("http://{}:8800", server_host.address());
        let server = Server::spawn(
            server_host
                .command(&berth_build.display().to_string())
                .args(["serve", "--dist"])
                .arg(&dist)
                .args(["--listen", &format!("{}:8800", server_host.address())])
                .arg("--spec")
                .arg(&spec)
                .arg("--berth")
                .arg(berth)
                .arg("--installers")
                .arg(work.path().join("installers")),
            &work.path().join("serve.log"),
        );
        let names: Vec<String> = (1..=count).map(|n| format!("node-{n}")).collect();
        let mut etc_hosts = String::from("127.0.0.1 localhost\n");
        for (host, name) in hosts.iter().zip(&names) {
            etc_hosts.push_str(&format!("{} {name}\n", host.address()));
        }
        let busybox = work.path().join("busybox.tar");
        write_oci_archive(
            &busybox,
            BUSYBOX,
            &[PlatformImage {
                arch: "amd64",
                layers: vec![busybox_layer()],
            }],
        );
        let mut cgroups = Vec::new();
        let machines: Vec<Machine> = hosts
            .into_iter()
            .zip(&names)
            .map(|(host, name)| {
                let machine = Machine::start(host, name);
                machine.write("/etc/hosts", &etc_hosts);
                cgroups.push(kubelet_host::prepare(&machine));
                machine
            })
            .collect();
        let cluster = Cluster {
            machines,
            _cgroups: cgroups,
            served,
            id,
            work,
            _server: server,
            network,
        };
        let first = &cluster.machines[0];
        let deadline = Instant::now() + Duration::from_secs(30);
        while !first
            .command("curl")
            .args([
                "-fsS",
                "-o",
                "/dev/null",
                &format!("{}/versions.json", cluster.served),
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
        {
            assert!(
                Instant::now() < deadline,
                "the installer server did not answer within 30 s; its log: {}",
                fs_err::read_to_string(cluster.work.path().join("serve.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    /// Machine `index` lost, and a fresh one of its name at another address, with nothing of
    /// the old one's disk, processes or cgroups: the old address goes dark (its link cut, as
    /// a dead machine's), and every machine's `/etc/hosts` names the new one. Returns the old
    /// and the new address.
    pub fn replace_machine_elsewhere(&mut self, index: usize) -> (String, String) {
        let etc_hosts = self.machines[index]
            .read("/etc/hosts")
            .expect("every machine names the others");
        let old = self.machines.remove(index);
        let (old_host, name) = (old.host.clone(), old.name.clone());
        drop(old);
        drop(self._cgroups.remove(index));
        old_host.set_link(false);
        let host = self.network.host();
        let old_address = old_host.address().to_string();
        let new_address = host.address().to_string();
        let etc_hosts = etc_hosts.replace(
            &format!("{old_address} {name}\n"),
            &format!("{new_address} {name}\n"),
        );
        let machine = Machine::start(host, &name);
        self._cgroups.insert(index, kubelet_host::prepare(&machine));
        self.machines.insert(index, machine);
        for machine in &self.machines {
            machine.write("/etc/hosts", &etc_hosts);
        }
        (old_address, new_address)
    }

    /// Another host on the cluster's network (a server the nodes reach), not a machine.
    pub fn add_host(&mut self) -> Host {
        self.network.host()
    }

    /// `program` on machine `index`, as root there, with a plain PATH and none of the test
    /// host's settings for Berth, containerd or kubectl.
    pub fn command(&self, index: usize, program: &str) -> std::process::Command {
        let mut command = self.machines[index].command(program);
        command
            .env("PATH", PATH)
            .env_remove("BERTH_ROOT")
            .env_remove("BERTH_DIST")
            .env_remove("CONTAINERD_ADDRESS")
            .env_remove("KUBECONFIG");
        command
    }

    /// `bash -c script` on machine `index` ([`Cluster::command`]).
    pub fn shell(&self, index: usize, script: &str) -> Output {
        self.command(index, "bash")
            .args(["-c", script])
            .output()
            .unwrap()
    }

    /// `kubectl` on the first node, with the admin's kubeconfig.
    pub fn kubectl(&self, arguments: &str) -> Output {
        self.shell(
            0,
            &format!("kubectl --kubeconfig /etc/kubernetes/admin.conf {arguments}"),
        )
    }

    /// Imports the test image into machine `index`'s containerd, where the kubelet finds it.
    pub fn import_busybox(&self, index: usize) {
        self.import_archive(index, &self.work.path().join("busybox.tar"));
    }

    /// Imports an image of `layers`, named `tag`, into machine `index`'s containerd.
    pub fn import_image(&self, index: usize, tag: &str, layers: Vec<crate::images::Layer>) {
        let archive = self
            .work
            .path()
            .join(format!("{}.tar", tag.replace(['/', ':'], "_")));
        write_oci_archive(
            &archive,
            tag,
            &[PlatformImage {
                arch: "amd64",
                layers,
            }],
        );
        self.import_archive(index, &archive);
    }

    /// The installer's airgap bundle unpacked in `folder` on machine `index` (fetched once, by
    /// the first machine asked), which then no longer reaches the server: a blackhole route
    /// to it.
    pub fn unpack_airgap_bundle(&self, index: usize, folder: &Path) {
        let tarball = self.work.path().join("bundle.tar.gz");
        if !tarball.exists() {
            let fetched = self.shell(
                index,
                &format!(
                    "curl -fsSL -o {0}.partial {1}/bundle/{2}.tar.gz && mv {0}.partial {0}",
                    tarball.display(),
                    self.served,
                    self.id
                ),
            );
            assert!(fetched.status.success(), "{}", printed(&fetched));
        }
        let server = self
            .served
            .trim_start_matches("http://")
            .split(':')
            .next()
            .expect("the server's address");
        let unpacked = self.shell(
            index,
            &format!(
                "mkdir -p {folder} && tar -xzf {tarball} -C {folder} && ip route add blackhole {server}/32",
                folder = folder.display(),
                tarball = tarball.display(),
            ),
        );
        assert!(unpacked.status.success(), "{}", printed(&unpacked));
        let reached = self.shell(
            index,
            &format!("curl -fsS --max-time 5 {}/versions.json", self.served),
        );
        assert!(
            !reached.status.success(),
            "the server is out of reach: {}",
            printed(&reached)
        );
    }

    fn import_archive(&self, index: usize, archive: &Path) {
        let output = self.shell(
            index,
            &format!("ctr -n k8s.io images import {}", archive.display()),
        );
        assert!(output.status.success(), "{}", printed(&output));
    }
}

/// Waits up to `timeout` for `condition`; if it never holds, fails with what `explain` says
/// then (the cluster's own account of why).
pub fn wait_or_explain(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
    explain: impl Fn() -> String,
) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}:\n{}",
            explain()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

impl Cluster {
    /// What the cluster says of its nodes, pods and recent events.
    pub fn account(&self) -> String {
        let output = self.kubectl(
            "get nodes,pods -A -o wide; \
             kubectl --kubeconfig /etc/kubernetes/admin.conf get events -A --sort-by=.lastTimestamp \
                 -o jsonpath='{range .items[*]}{.involvedObject.name}: {.reason}: {.message}{\"\\n\"}{end}' | tail -25; \
             for pod in $(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get pods -o name | grep -v -e etcd -e kube-apiserver -e kube-scheduler -e kube-controller); do \
                 echo \"== $pod\"; kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system logs --tail=15 $pod; \
                 kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system logs -p --tail=15 $pod 2>/dev/null; done",
        );
        printed(&output)
    }
}

/// The nodes `kubectl get nodes` lists, each with whether it is Ready.
pub fn nodes(cluster: &Cluster) -> Vec<(String, bool)> {
    let output = cluster.kubectl(
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
    );
    if !output.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (name, ready) = line.split_once(' ')?;
            Some((name.to_string(), ready == "True"))
        })
        .collect()
}
