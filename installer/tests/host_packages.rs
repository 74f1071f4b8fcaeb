//! Host packages end to end on this host: a package built from a test apt repository, its
//! `.deb` files installed by `install_host_archives` through apt, with no source but the
//! package's own and the host's apt sources left as they were.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use berth_build::host_packages::distros::DistrosFile;
use support::apt::{deb, index};
use support::{FileServer, Node, TestDist, failed, require, succeeded, text};

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
    let all = failed(&output);
    assert!(
        all.contains("has no host packages for ubuntu-22.04; it has: debian-12 ubuntu-24.04"),
        "{all}"
    );
}
