//! Host packages end to end on this host: a package built from a test apt repository, its
//! `.deb` files installed by `install_host_archives` through apt, and one built from a test
//! yum repository, its `.rpm` files installed through dnf (Debian's dnf and rpm stand in for a
//! RHEL host's), each with no source but the package's own and the host's sources left as
//! they were.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use berth_build::host_packages::distros::DistrosFile;
use support::apt::{deb, index};
use support::rpm::{createrepo, rpm};
use support::{FileServer, Node, TestDist, require, succeeded, text};

fn helpers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common")
}

/// This host's distro as the helpers name it (`debian-12` here).
fn host_distro() -> String {
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"for h in "$HELPERS"/*.sh; do . "$h"; done; host_packages_distro"#)
        .env("HELPERS", helpers())
        .output()
        .unwrap();
    text(&output.stdout).trim().to_string()
}

/// Every file of the host's apt sources, with its bytes.
fn apt_sources() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(entries) = fs_err::read_dir("/etc/apt/sources.list.d") {
        files.extend(entries.filter_map(Result::ok).map(|entry| entry.path()));
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = fs_err::read(&path).unwrap_or_default();
            (path, bytes)
        })
        .collect()
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|output| text(&output.stdout) == "install ok installed")
}

/// Removes the test's packages from the host, whatever the test's outcome.
struct Removal(&'static [&'static str]);

impl Drop for Removal {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").arg("--purge").args(self.0).output();
    }
}

#[test]
fn install_host_archives_installs_through_apt_from_the_package_alone() {
    require("apt-get", "apt");
    let packages: &[&str] = &["berth-test-tool", "berth-test-lib"];
    let _removal = Removal(packages);
    assert!(
        !packages.iter().any(|package| installed(package)),
        "a test package is already on this host"
    );
    let repo = tempfile::tempdir().unwrap();
    deb(
        repo.path(),
        "berth-test-tool",
        "1.0",
        "amd64",
        &[("Depends", "berth-test-lib (>= 2)")],
    );
    deb(repo.path(), "berth-test-lib", "1.5", "all", &[]);
    deb(repo.path(), "berth-test-lib", "2.1", "all", &[]);
    index(repo.path(), "test");
    let server = FileServer::serve(repo.path(), None);

    let distro = host_distro();
    let targets = format!(
        "distros:\n  - name: {distro}\n    format: deb\n    mirrors: [{}]\n    suite: test\n    components: [main]\n    architecture: amd64\n    directives: [apt]\n",
        server.url
    );
    let mut dist = TestDist::new();
    dist.distros = DistrosFile::parse("test distros", &targets)
        .unwrap()
        .distros;
    dist.addon_with_manifest(
        "tools",
        "1.0.0",
        "apt berth-test-tool\n",
        "function tools() {\n    install_host_archives \"$DIR/addons/tools/1.0.0\" berth-test-tool\n}\n",
    );
    let spec = dist.spec("spec.yaml", &[("tools", "version: latest")]);
    let sources = apt_sources();

    let node = Node::new();
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert!(installed("berth-test-tool"), "{output}");
    // The closure brought the dependency, at the version its constraint allows.
    assert!(installed("berth-test-lib"), "{output}");
    let version = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "berth-test-lib"])
        .output()
        .unwrap();
    assert_eq!(text(&version.stdout), "2.1");
    assert_eq!(apt_sources(), sources, "the host's apt sources changed");
    let archives = node
        .install_dir()
        .join(format!("addons/tools/1.0.0/{distro}/archives"));
    let mut shipped: Vec<String> = fs_err::read_dir(&archives)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    shipped.sort();
    assert_eq!(
        shipped,
        [
            "Packages",
            "berth-test-lib_2.1_all.deb",
            "berth-test-tool_1.0_amd64.deb"
        ]
    );
}

/// Every file below the folders, with its bytes.
fn files_with_bytes(folders: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = folders
        .iter()
        .flat_map(|folder| {
            walkdir::WalkDir::new(folder)
                .into_iter()
                .filter_map(Result::ok)
        })
        .filter(|entry| entry.file_type().is_file())
        .map(|entry| {
            let bytes = fs_err::read(entry.path()).unwrap_or_default();
            (entry.path().to_path_buf(), bytes)
        })
        .collect();
    files.sort();
    files
}

fn rpm_installed(package: &str) -> Option<String> {
    let output = Command::new("rpm")
        .args(["-q", "--qf", "%{VERSION}-%{RELEASE}", package])
        .output()
        .ok()?;
    output.status.success().then(|| text(&output.stdout))
}

/// Removes the test's rpm packages from the host, whatever the test's outcome.
struct RpmRemoval(&'static [&'static str]);

impl Drop for RpmRemoval {
    fn drop(&mut self) {
        let _ = Command::new("rpm").arg("-e").args(self.0).output();
    }
}

#[test]
fn install_host_archives_installs_through_dnf_from_the_package_alone() {
    require("dnf", "dnf");
    require("rpm", "rpm");
    let packages: &[&str] = &["berth-test-tool", "berth-test-lib"];
    let _removal = RpmRemoval(packages);
    assert!(
        !packages
            .iter()
            .any(|package| rpm_installed(package).is_some()),
        "a test package is already on this host"
    );
    let repo = tempfile::tempdir().unwrap();
    rpm(
        repo.path(),
        "berth-test-tool",
        "1.0-1",
        "x86_64",
        &[("Requires", "berth-test-lib >= 2")],
    );
    rpm(repo.path(), "berth-test-lib", "1.5-1", "noarch", &[]);
    rpm(repo.path(), "berth-test-lib", "2.1-1", "noarch", &[]);
    createrepo(repo.path(), "gz");
    let server = FileServer::serve(repo.path(), None);

    // The node says it is Rocky Linux 9; its package manager is this host's dnf.
    let scratch = tempfile::tempdir().unwrap();
    let os_release = scratch.path().join("os-release");
    fs_err::write(&os_release, "ID=\"rocky\"\nVERSION_ID=\"9.4\"\n").unwrap();
    let targets = format!(
        "distros:\n  - name: rhel-9\n    format: rpm\n    mirrors: [{}]\n    architecture: x86_64\n    directives: [yum, yum9]\n",
        server.url
    );
    let mut dist = TestDist::new();
    dist.distros = DistrosFile::parse("test distros", &targets)
        .unwrap()
        .distros;
    dist.addon_with_manifest(
        "tools",
        "1.0.0",
        "yum9 berth-test-tool\n",
        "function tools() {\n    install_host_archives \"$DIR/addons/tools/1.0.0\" berth-test-tool\n}\n",
    );
    let spec = dist.spec("spec.yaml", &[("tools", "version: latest")]);
    let sources = files_with_bytes(&["/etc/yum.repos.d", "/etc/dnf", "/etc/yum.conf"]);

    let node = Node::new().env("BERTH_OS_RELEASE", &os_release);
    let output = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        rpm_installed("berth-test-tool").as_deref(),
        Some("1.0-1"),
        "{output}"
    );
    // The closure brought the dependency, at the version its constraint allows.
    assert_eq!(
        rpm_installed("berth-test-lib").as_deref(),
        Some("2.1-1"),
        "{output}"
    );
    assert_eq!(
        files_with_bytes(&["/etc/yum.repos.d", "/etc/dnf", "/etc/yum.conf"]),
        sources,
        "the host's dnf configuration changed"
    );
    let archives = node
        .install_dir()
        .join("addons/tools/1.0.0/rhel-9/archives");
    let mut shipped: Vec<String> = fs_err::read_dir(&archives)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    shipped.sort();
    assert_eq!(
        shipped,
        [
            "berth-test-lib-2.1-1.noarch.rpm",
            "berth-test-tool-1.0-1.x86_64.rpm",
            "repodata"
        ]
    );
}

/// As kURL's: a host the package has no folder for is told which it has, and the hook goes on
/// (the add-on may install its host software otherwise).
#[test]
fn a_host_the_package_has_no_folder_for_is_told_which_it_has() {
    let scratch = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(scratch.path().join("addon/debian-12/archives")).unwrap();
    fs_err::create_dir_all(scratch.path().join("addon/ubuntu-24.04/archives")).unwrap();
    fs_err::write(
        scratch.path().join("os-release"),
        "ID=ubuntu\nVERSION_ID=\"22.04\"\n",
    )
    .unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"for h in "$HELPERS"/*.sh; do . "$h"; done; install_host_archives "$ADDON" curl"#)
        .env("HELPERS", helpers())
        .env("ADDON", scratch.path().join("addon"))
        .env("BERTH_OS_RELEASE", scratch.path().join("os-release"))
        .output()
        .unwrap();
    let all = succeeded(&output);
    assert!(
        all.contains("has no host packages for ubuntu-22.04; it has: debian-12 ubuntu-24.04"),
        "{all}"
    );
}

/// The repository's containerd and registry add-ons, their host packages resolved from the
/// Debian 12 mirror, installed with demo on top in a private mount and network namespace (so
/// /etc/containerd, containerd's folders and the network are the test's own): containerd is
/// configured and started directly (no systemd here), demo runs on it, the registry answers,
/// a second node's registry join points its containerd at the registry; every add-on's
/// components are healthy until the registry is stopped, which degrades it; then reset stops
/// both and removes their files.
#[test]
#[ignore = "reaches the Debian 12 mirror; scripts/test.sh runs it when the mirror answers"]
fn containerd_and_registry_addons_install_from_their_packages_and_reset() {
    require("unshare", "util-linux");
    let mirror = std::env::var("BERTH_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".to_string());
    let distros = DistrosFile::load(None)
        .unwrap()
        .select(
            "built in",
            &["debian-12".to_string()],
            &[format!("debian-12={mirror}")],
        )
        .unwrap();
    let (_, dist) = TestDist::examples_for(&["containerd", "registry", "demo"], distros);
    let spec = dist.spec(
        "cluster.yaml",
        &[
            (
                "containerd",
                "version: 1.6.20, tomlConfig: '[debug]\n  level = \"warn\"'",
            ),
            ("registry", "version: 2.8.2, publishPort: 5000"),
            ("demo", "version: 1.0.0, port: 8080"),
        ],
    );
    let registry_spec = dist.spec(
        "registry.yaml",
        &[("registry", "version: 2.8.2, publishPort: 5000")],
    );
    let node = Node::new();
    let joined = tempfile::tempdir().unwrap();
    let berth = env!("CARGO_BIN_EXE_berth");
    let script = format!(
        r#"set -euo pipefail
for dir in /etc/containerd /var/lib/containerd /run/containerd; do
    mkdir -p "$dir" && mount -t tmpfs tmpfs "$dir"
done
ip link set lo up
trap '{berth} reset >/dev/null 2>&1 || true' EXIT
{berth} install --spec {spec} --dist {dist} --param private-address=127.0.0.1
echo "config: $(grep -c 'config.d' /etc/containerd/config.toml) import line"
cat /etc/containerd/config.d/berth.toml
echo "demo: $(curl -fsS http://127.0.0.1:8080/)"
echo "registry: $(curl -fsS http://127.0.0.1:5000/v2/)"
{berth} status
# A second node (another Berth root) joins the registry: its containerd is pointed at it.
BERTH_ROOT={joined} {berth} join --spec {registry_spec} --dist {dist} registry-address=127.0.0.1:5000
echo "hosts: $(grep -c 'http://127.0.0.1:5000' /etc/containerd/certs.d/127.0.0.1:5000/hosts.toml) lines"
BERTH_ROOT={joined} {berth} reset
echo "after the joined node's reset: $(ls /etc/containerd/certs.d | wc -l) hosts"
# Each add-on's components: all healthy; then the registry stopped, and it is Degraded.
{berth} health containerd >/dev/null && {berth} health demo >/dev/null && {berth} health registry >/dev/null && echo "health: all available"
kill "$(cat "$BERTH_ROOT/var/lib/berth/registry/pid")"
for _ in $(seq 100); do curl -fsS --max-time 1 http://127.0.0.1:5000/v2/ >/dev/null 2>&1 || break; sleep 0.1; done
{berth} health registry || echo "registry health: exit $?"
{berth} status
{berth} reset
echo "after reset: $(ls -A /etc/containerd | wc -l) files in /etc/containerd"
curl -fsS --max-time 2 http://127.0.0.1:5000/v2/ || echo "registry: stopped"
ctr version >/dev/null 2>&1 || echo "containerd: stopped"
trap - EXIT
"#,
        spec = spec.display(),
        dist = dist.url(),
        joined = joined.path().display(),
        registry_spec = registry_spec.display(),
    );
    let output = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--net",
            "bash",
            "-c",
            &script,
        ])
        .env("BERTH_ROOT", node.root.path())
        .env_remove("CONTAINERD_ADDRESS")
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    // Reset undoes the last applied first, and takes demo's image while containerd still runs.
    let position = |text: &str| {
        all.find(text)
            .unwrap_or_else(|| panic!("`{text}` in:\n{all}"))
    };
    assert!(position("demo 1.0.0: demo_reset") < position("containerd 1.6.20: containerd_reset"));
    assert!(
        position("registry 2.8.2: registry_reset")
            < position("containerd 1.6.20: containerd_reset")
    );
    assert!(
        !all.contains("3 hook(s) ran, 0 image(s)"),
        "demo's image was removed:\n{all}"
    );
    for expected in [
        "containerd 1.6.20: containerd_install\n",
        "config: 1 import line",
        "level = \"warn\"",
        "demo: demo 1.0.0",
        "registry: {}",
        "registry 2.8.2: registry_join",
        "hosts: 2 lines",
        "after the joined node's reset: 0 hosts",
        "health: all available",
        "registry health: exit 1",
        "registry: Degraded: not healthy: api (url http://127.0.0.1:5000/v2/",
        "containerd 1.6.20: containerd_reset",
        "registry 2.8.2: registry_reset",
        "after reset: 0 files in /etc/containerd",
        "registry: stopped",
        "containerd: stopped",
    ] {
        assert!(all.contains(expected), "expected `{expected}` in:\n{all}");
    }
}
