//! kURL's real add-ons (`shared/fixtures/kurl-addons`, read in place and never changed),
//! packaged by `berth-build` for Debian 12 and run through `berth install` and `berth join` on
//! machines of their own (network, mount and UTS namespaces; see `testgrid::machine`), each
//! with the real containerd its add-on's hook brings up.
//!
//! These machines reach no image registry, no GitHub and no Ubuntu or RHEL mirror, and boot
//! no init system. Each stand-in, and why:
//! - a loopback registry holds a busybox image under each reference the Manifests name
//!   (`registry.k8s.io/pause:3.6`, `docker.io/replicated/ekco:v0.28.14`, …), reached through
//!   the builder's `--registry-mirror`: no image registry is reachable;
//! - a loopback file server answers for github.com with Debian's own `runc`, through
//!   `--asset-mirror`: GitHub is not reachable;
//! - a loopback apt suite stands for Debian 12's mirror, with a stand-in `collectd` package
//!   for the builder to resolve: the build must not depend on the Debian mirror answering;
//! - `/etc/os-release` says Ubuntu 22.04: kURL's hooks branch on `LSB_DIST` and have no Debian
//!   branch;
//! - the spec sets kURL's `skipSystemPackageInstall`, and containerd and collectd are
//!   preinstalled from Debian (containerd by `scripts/test.sh` on this machine, collectd into
//!   each test machine from the packages `scripts/test.sh` downloads into `.test-packages/`):
//!   kURL ships these only
//!   for Ubuntu and RHEL, whose mirrors are not reachable;
//! - `systemctl` is the machine's stand-in (it starts a unit's real `ExecStart`): the
//!   machines are namespaces, with no systemd.

use crate::support;

use std::path::{Path, PathBuf};

use support::kurl_dist::IMAGES;
use support::machine::Machine;
use support::network::Network;
use support::{kurl_fixtures, printed};

/// Where `scripts/test.sh` downloads Debian's collectd and what it depends on.
fn debian_packages() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-packages/debian")
}

/// The dist `berth-build` built of the fixtures' kURL repository (`testgrid::kurl_dist`).
struct Built {
    dist: tempfile::TempDir,
}

fn build_the_fixture_addons() -> Built {
    let dist = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let builder = support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build");
    support::kurl_dist::build(&builder, dist.path(), cache.path())
        .unwrap_or_else(|error| panic!("{error}"));
    Built { dist }
}

/// A machine set up as the module's comment says: Ubuntu 22.04 by its os-release, Debian's
/// containerd (from this machine) and collectd (installed into it from the packages
/// `scripts/test.sh` downloads).
fn ubuntu_machine(network: &mut Network, name: &str) -> Machine {
    let machine = Machine::start(network.host(), name);
    machine.write(
        "/etc/os-release",
        "NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME=\"Ubuntu 22.04 (stand-in)\"\n",
    );
    let packages = debian_packages();
    assert!(
        packages.is_dir(),
        "{} is missing: scripts/test.sh downloads Debian's collectd there",
        packages.display()
    );
    // Into the machine's own apt cache: apt locks the folder it installs from.
    for entry in fs_err::read_dir(&packages).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "deb") {
            let name = path.file_name().unwrap().to_str().unwrap();
            machine.write(
                &format!("/var/cache/apt/archives/{name}"),
                fs_err::read(&path).unwrap(),
            );
        }
    }
    let installed = machine
        .command("apt-get")
        .args(["install", "--no-download", "--no-install-recommends"])
        .args(["-y", "-q", "collectd"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "collectd could not be preinstalled from {} (scripts/test.sh downloads it): {}",
        packages.display(),
        printed(&installed)
    );
    machine
}

/// A fresh machine, the dist built for it, and a spec of the fixtures' add-ons: each alive
/// as long as the scene (the machine ends before its network).
struct Scene {
    machine: Machine,
    _network: Network,
    built: Built,
    work: tempfile::TempDir,
}

impl Scene {
    fn new(name: &str) -> Scene {
        let built = build_the_fixture_addons();
        let mut network = Network::new();
        Scene {
            machine: ubuntu_machine(&mut network, name),
            _network: network,
            built,
            work: tempfile::tempdir().unwrap(),
        }
    }

    /// `berth COMMAND` on the machine for a spec of these add-ons (spec lines under `spec:`),
    /// with kURL's `skipSystemPackageInstall`; what it printed, and whether it succeeded.
    fn berth(&self, command: &str, addons: &str) -> (bool, String) {
        let spec = self.work.path().join("installer.yaml");
        fs_err::write(
            &spec,
            format!(
                "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: kurl-addons\nspec:\n  kurl:\n    skipSystemPackageInstall: true\n{addons}"
            ),
        )
        .unwrap();
        let output = self
            .machine
            .command(env!("CARGO_BIN_EXE_berth"))
            .arg(command)
            .arg("--spec")
            .arg(&spec)
            .arg("--dist")
            .arg(self.built.dist.path())
            .env_remove("BERTH_ROOT")
            .env_remove("BERTH_DIST")
            .env_remove("CONTAINERD_ADDRESS")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let printed = printed(&output);
        (output.status.success(), printed)
    }

    /// What `ctr` lists in containerd's `k8s.io` namespace on the machine.
    fn images(&self) -> String {
        self.machine.shell("ctr --namespace k8s.io images ls -q")
    }

    fn service_is_active(&self, unit: &str) -> bool {
        self.machine
            .command("systemctl")
            .args(["is-active", "--quiet", unit])
            .status()
            .unwrap()
            .success()
    }
}

#[test]
fn kurls_containerd_and_collectd_install_on_a_fresh_machine() {
    let scene = Scene::new("kurl-first");
    let machine = &scene.machine;
    let addons = "  containerd:\n    version: 1.6.33\n  collectd:\n    version: v5\n";
    let (ok, printed) = scene.berth("install", addons);
    assert!(
        ok,
        "{printed}\ncontainerd: {}\ncollectd: {}",
        machine.service_log("containerd.service"),
        machine.service_log("collectd.service")
    );
    // containerd's install configured the node's containerd, and its pause image is in it.
    let config = machine
        .read("/etc/containerd/config.toml")
        .expect("containerd_configure wrote its config");
    assert!(config.contains("SystemdCgroup = true"), "{config}");
    assert!(machine.read("/etc/crictl.yaml").is_some());
    assert!(
        machine.shell("systemctl is-enabled containerd").trim() == "enabled",
        "kURL's hook enables containerd"
    );
    assert!(
        scene.images().contains("registry.k8s.io/pause:3.6"),
        "{}",
        scene.images()
    );
    // collectd's install put kURL's configuration in place and started Debian's collectd.
    let conf = machine.read("/etc/collectd/collectd.conf").unwrap();
    assert_eq!(
        conf,
        fs_err::read_to_string(kurl_fixtures(
            "kurl-addons/addons/collectd/v5/collectd.conf"
        ))
        .unwrap()
    );
    assert!(
        scene.service_is_active("collectd"),
        "collectd runs: {}",
        machine.service_log("collectd.service")
    );
    // Its hostname did not resolve: kURL's prompt took its default answer, yes, and the
    // hook added the name to /etc/hosts.
    let hosts = machine.read("/etc/hosts").unwrap();
    assert!(
        hosts.contains(&format!("{}    kurl-first", machine.host.address())),
        "{hosts}"
    );

    // Run again, unchanged: kURL's pre_init runs as on every run; no install hook does.
    let (ok, printed) = scene.berth("install", addons);
    assert!(ok, "{printed}");
    assert_eq!(hooks_run(&printed), ["containerd_pre_init"], "{printed}");
    assert!(scene.service_is_active("containerd") && scene.service_is_active("collectd"));
}

/// The hooks Berth says it runs (`berth: <add-on> <version>: <hook>`), in order.
fn hooks_run(printed: &str) -> Vec<String> {
    printed
        .lines()
        .filter_map(|line| line.strip_prefix("berth: "))
        .filter_map(|line| line.rsplit_once(": "))
        .filter(|(addon, _)| addon.contains(' '))
        .map(|(_, step)| step.to_string())
        .filter(|step| !step.contains(' ') && step != "succeeded")
        .collect()
}

/// kURL's join on a fresh node: containerd's install first, then every add-on's `_join` in
/// kURL's order (registry, flannel and ekco need no cluster there).
#[test]
fn kurls_join_hooks_run_on_a_joining_machine_after_containerds_install() {
    let scene = Scene::new("kurl-joining");
    let machine = &scene.machine;
    let (ok, printed) = scene.berth(
        "join",
        "  containerd:\n    version: 1.6.33\n  registry:\n    version: 3.1.1\n  flannel:\n    version: 0.28.7\n  ekco:\n    version: 0.28.14\n  collectd:\n    version: v5\n",
    );
    assert!(
        ok,
        "{printed}\ncontainerd: {}",
        machine.service_log("containerd.service"),
    );
    assert_eq!(
        hooks_run(&printed),
        [
            "containerd_install",
            "containerd_join",
            "flannel_join",
            "ekco_join",
            "registry_join",
            "collectd_join"
        ],
        "{printed}"
    );
    // Every add-on's images are in the containerd the runtime's hook brought up.
    let loaded = scene.images();
    for (registry, repository, tag) in IMAGES.iter().filter(|(_, _, tag)| *tag != "3.10") {
        let short = repository.trim_start_matches("library/");
        let named = [
            format!("{registry}/{repository}:{tag}"),
            format!("{short}:{tag}"),
        ];
        assert!(
            named
                .iter()
                .any(|name| loaded.lines().any(|line| line == name)),
            "{named:?} not in\n{loaded}"
        );
    }
    // flannel_join warned of its port; ekco_join installed and started its reboot service.
    assert!(
        printed.contains("Flannel requires UDP port 8472"),
        "{printed}"
    );
    assert!(machine.read("/opt/ekco/startup.sh").is_some());
    assert_eq!(
        machine.shell("systemctl is-enabled ekco-reboot").trim(),
        "enabled"
    );
    assert_eq!(
        machine.shell("systemctl is-active ekco-reboot").trim(),
        "active"
    );
    assert!(
        scene.service_is_active("collectd"),
        "collectd_join started collectd: {}",
        machine.service_log("collectd.service")
    );
}

/// Hooks that need a cluster get as far as kubectl, which fails as it fails on a node with no
/// cluster: no helper is missing on the way.
#[test]
fn kurls_cluster_hooks_reach_kubectl_and_fail_with_its_error() {
    let scene = Scene::new("kurl-cluster");
    for (addon, version) in [
        ("registry", "3.1.1"),
        ("flannel", "0.28.7"),
        ("ekco", "0.28.14"),
    ] {
        let (ok, printed) = scene.berth(
            "install",
            &format!("  containerd:\n    version: 1.6.33\n  {addon}:\n    version: {version}\n"),
        );
        assert!(!ok, "{printed}");
        assert!(
            printed.contains("localhost:8080") && printed.contains("connection refused"),
            "{addon}: kubectl's own error expected:\n{printed}"
        );
        assert!(
            printed.contains(&format!("`{addon}` exited with status 1")),
            "{addon}: its install hook is what failed:\n{printed}"
        );
        assert!(!printed.contains("command not found"), "{printed}");
    }
}

/// kURL's test-grid specs against a dist of kURL's folders with its `packages/kubernetes`:
/// every spec names Kubernetes, and each whose Kubernetes version the dist offers plans it
/// (with the spec's add-ons the dist has); one asking for another version is told which the
/// dist offers, not that Berth cannot install Kubernetes.
#[test]
fn kurls_test_grid_specs_naming_kubernetes_plan_against_a_dist_of_kurls_folders() {
    let built = build_the_fixture_addons();
    let versions =
        berth_formats::versions::VersionsFile::load(&built.dist.path().join("versions.json"))
            .unwrap();
    let offered: Vec<&str> = versions
        .addons
        .iter()
        .map(|addon| addon.name.as_str())
        .collect();
    assert_eq!(offered[..2], ["containerd", "kubernetes"], "{offered:?}");
    let specs = support::kurl_specs::specs();
    let (mut planned, mut other_versions) = (0, 0);
    let work = tempfile::tempdir().unwrap();
    for (file, text) in &specs {
        let mut document: serde_json::Value = serde_norway::from_str(text).unwrap();
        let spec = document["spec"].as_object_mut().unwrap();
        assert!(spec.contains_key("kubernetes"), "{}", file.display());
        let requested = spec["kubernetes"]["version"].as_str().unwrap().to_string();
        // Kubernetes, the other add-ons at versions this dist has, and kURL's settings
        // sections; no others.
        spec.retain(|key, section| {
            let version = match &section["version"] {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            key == "kubernetes"
                || (offered.contains(&key.as_str())
                    && versions.resolve(key, &version, None).is_ok())
                || support::kurl_specs::SETTINGS.contains(&key.as_str())
        });
        let spec_path = work.path().join("spec.yaml");
        fs_err::write(&spec_path, serde_norway::to_string(&document).unwrap()).unwrap();
        let root = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(["plan", "--json", "--spec"])
            .arg(&spec_path)
            .arg("--dist")
            .arg(built.dist.path())
            .env("BERTH_ROOT", root.path())
            .output()
            .unwrap();
        let name = file.file_name().unwrap().to_string_lossy();
        let resolves = versions.resolve("kubernetes", &requested, None).is_ok();
        if resolves {
            assert!(output.status.success(), "{name}: {}", printed(&output));
            let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            let kubernetes = plan["addons"]
                .as_array()
                .unwrap()
                .iter()
                .find(|addon| addon["name"] == "kubernetes")
                .unwrap_or_else(|| panic!("{name}: no kubernetes in {plan}"));
            assert_eq!(
                kubernetes["version"],
                support::kurl_dist::KUBERNETES_VERSION
            );
            assert_eq!(kubernetes["decision"], "Install", "{name}");
            planned += 1;
        } else {
            let said = printed(&output);
            assert!(!output.status.success(), "{name}: {said}");
            assert!(
                said.contains(&format!("kubernetes has no version `{requested}`"))
                    && said.contains(support::kurl_dist::KUBERNETES_VERSION),
                "{name}: {said}"
            );
            other_versions += 1;
        }
    }
    eprintln!(
        "{planned} specs planned Kubernetes {}; {other_versions} ask for a version this dist does not build",
        support::kurl_dist::KUBERNETES_VERSION
    );
    assert!(planned > 0, "no spec asked for a version the dist has");
    assert_eq!(planned + other_versions, specs.len());
}

/// Kubernetes from kURL's `packages/kubernetes` on a host without a kubelet: refused before
/// any add-on's install hook changes the node, saying what is missing and why; no kubeadm step
/// runs (this machine has no kubelet to run one with).
#[test]
fn kubernetes_from_kurls_folder_stops_where_the_host_has_no_kubelet() {
    let scene = Scene::new("kurl-kubernetes");
    let (ok, printed) = scene.berth(
        "install",
        &format!(
            "  containerd:\n    version: 1.6.33\n  kubernetes:\n    version: {}\n",
            support::kurl_dist::KUBERNETES_VERSION
        ),
    );
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("needs kubelet on this host")
            && printed.contains("kURL builds the kubelet and kubectl host packages apart"),
        "names what is missing and why:\n{printed}"
    );
    assert!(
        printed.contains("`kubernetes_pre_init` exited with status 1"),
        "{printed}"
    );
    assert!(
        !printed.contains("a stand-in for kubeadm"),
        "no kubeadm step ran:\n{printed}"
    );
    assert_eq!(
        hooks_run(&printed),
        [
            "kubernetes_preflight",
            "containerd_pre_init",
            "kubernetes_pre_init"
        ],
        "no install hook ran (Kubernetes' preflight checks the host first):\n{printed}"
    );
}
