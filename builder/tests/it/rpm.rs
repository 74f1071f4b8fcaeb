//! rpm closures against real repositories: one the test builds with `rpmbuild` and
//! `createrepo_c`, served over HTTP on loopback.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;

use berth_build::host_packages::repodata;
use berth_build::host_packages::rpm::RpmSource;
use berth_formats::Sha256Digest;
use support::rpm::{createrepo, rpm};
use support::{Client, FileServer, runtime};

/// A repository with a dependency chain, an alternative (a rich `or`), a virtual package
/// (`mail-transport-agent`),
/// versioned constraints, a conflict, a file dependency, and a base package every host has.
fn repository(compression: &str) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    rpm(
        r,
        "base-lib",
        "1.0-1",
        "x86_64",
        &[("File", "/usr/bin/base-tool")],
    );
    rpm(
        r,
        "app",
        "2.0-1",
        "x86_64",
        &[
            ("Requires", "base-lib"),
            ("Requires", "lib-a >= 1.2"),
            ("Requires", "mail-transport-agent"),
            ("Requires", "(mta or exim)"),
            ("Requires", "runtime >= 5"),
            ("Requires", "helper < 3"),
            ("Requires", "/usr/bin/app-helper"),
        ],
    );
    rpm(r, "lib-a", "1.1-1", "x86_64", &[]);
    rpm(r, "lib-a", "1.3-1", "x86_64", &[("Requires", "lib-b")]);
    rpm(
        r,
        "lib-b",
        "0.9-1",
        "noarch",
        &[("License", "GPL-2.0-or-later AND MIT")],
    );
    rpm(
        r,
        "mailer",
        "1:3.7-2",
        "x86_64",
        &[("Provides", "mail-transport-agent"), ("Conflicts", "mta")],
    );
    rpm(r, "mta", "1.0-1", "x86_64", &[]);
    rpm(r, "exim", "4.96-1", "x86_64", &[]);
    rpm(
        r,
        "runtime-impl",
        "5.1-1",
        "x86_64",
        &[("Provides", "runtime = 5.1")],
    );
    rpm(r, "helper", "3.1-1", "x86_64", &[]);
    rpm(r, "helper", "2.9-1", "x86_64", &[]);
    rpm(
        r,
        "app-tools",
        "1.0-1",
        "noarch",
        &[("File", "/usr/bin/app-helper")],
    );
    rpm(r, "unrelated", "1.0-1", "x86_64", &[("Requires", "lib-b")]);
    createrepo(r, compression);
    repo
}

fn source(server: &FileServer) -> RpmSource {
    RpmSource {
        repositories: vec![server.url.clone()],
        architecture: "x86_64".into(),
        keyring: None,
    }
}

/// The closure is exactly what dnf would install with weak dependencies off, for metadata
/// compressed with gzip and with xz (zstd is read too; this createrepo_c cannot write it).
#[test]
fn the_closure_of_a_test_repository_is_exactly_what_dnf_would_install() {
    for compression in ["gz", "xz"] {
        let repo = repository(compression);
        let server = FileServer::serve(repo.path(), None);
        let client = Client::new();
        let fetcher = client.fetcher();
        let runtime = runtime();
        let index = runtime
            .block_on(fetcher.rpm_index("test-distro", &source(&server)))
            .unwrap();
        let base = index.base(&["base-lib".into()]);
        assert_eq!(base, BTreeSet::from(["base-lib".to_string()]));
        let closure = index
            .resolve("test-distro", &["app".into()], &base)
            .unwrap();
        let names: Vec<String> = closure
            .iter()
            .map(|package| format!("{} {}", package.name, package.evr))
            .collect();
        assert_eq!(
            names,
            [
                "app 2.0-1",
                "app-tools 1.0-1",
                // mailer conflicts with mta, the first alternative.
                "exim 4.96-1",
                "helper 2.9-1",
                "lib-a 1.3-1",
                "lib-b 0.9-1",
                "mailer 1:3.7-2",
                "runtime-impl 5.1-1"
            ],
            "metadata compressed with {compression}"
        );
        for package in closure {
            let path = runtime
                .block_on(fetcher.rpm("test-distro", package))
                .unwrap();
            assert_eq!(
                Sha256Digest::of(&fs_err::read(&path).unwrap()).hex(),
                package.sha256
            );
        }
    }
}

#[test]
fn an_rpm_that_does_not_match_its_metadata_is_refused() {
    let repo = repository("gz");
    // One byte changed after indexing: same name and size, other content.
    let file = repo.path().join("Packages/lib-b-0.9-1.noarch.rpm");
    let mut bytes = fs_err::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs_err::write(&file, &bytes).unwrap();
    let server = FileServer::serve(repo.path(), None);
    let client = Client::new();
    let fetcher = client.fetcher();
    let runtime = runtime();
    let index = runtime
        .block_on(fetcher.rpm_index("test-distro", &source(&server)))
        .unwrap();
    let closure = index
        .resolve("test-distro", &["lib-b".into()], &BTreeSet::new())
        .unwrap();
    let error = runtime
        .block_on(fetcher.rpm("test-distro", closure[0]))
        .unwrap_err();
    support::assert_refused_for_its_digest(
        &error,
        "Packages/lib-b-0.9-1.noarch.rpm",
        &closure[0].sha256,
        &bytes,
    );
}

#[test]
fn unknown_and_unsatisfiable_packages_are_named_with_their_chain() {
    let repo = repository("gz");
    rpm(
        repo.path(),
        "top",
        "1-1",
        "x86_64",
        &[("Requires", "middle")],
    );
    rpm(
        repo.path(),
        "middle",
        "1-1",
        "x86_64",
        &[("Requires", "lib-b >= 2")],
    );
    createrepo(repo.path(), "gz");
    let server = FileServer::serve(repo.path(), None);
    let client = Client::new();
    let index = runtime()
        .block_on(client.fetcher().rpm_index("rhel-9", &source(&server)))
        .unwrap();
    let unknown = index
        .resolve("rhel-9", &["helpr".into()], &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "rhel-9 has no package `helpr`; did you mean helper?"
    );
    let unsatisfiable = index
        .resolve("rhel-9", &["top".into()], &BTreeSet::new())
        .unwrap_err();
    assert_eq!(
        unsatisfiable.to_string(),
        "rhel-9: cannot satisfy top → middle → lib-b >= 2: lib-b >= 2: only 0.9-1 on offer"
    );
}

/// A distros file with one rpm target, `test-rhel`, whose repository is `mirror`.
fn distros_file(dir: &Path, mirror: &str) -> std::path::PathBuf {
    let path = dir.join("distros.yaml");
    fs_err::write(
        &path,
        format!(
            "distros:\n  - name: test-rhel\n    format: rpm\n    mirrors: [{mirror}]\n    architecture: x86_64\n    base: [base-lib]\n    directives: [yum, yum9]\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_package_ships_the_closure_as_a_local_yum_repository() {
    let repo = repository("xz");
    let server = FileServer::serve(repo.path(), None);
    let addons = support::AddonRepository::new();
    let addon = addons.addon("tools", "1.0.0", "yum app\nyum8 unrelated\n");
    let distros = distros_file(addons.root(), &server.url);
    let out = tempfile::tempdir().unwrap();
    let build = support::BerthBuild::new();
    let arguments = [
        "package",
        addon.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--distros",
        distros.to_str().unwrap(),
    ];
    let (ok, _, stderr) = build.run(&arguments);
    assert!(ok, "{stderr}");
    let package = out.path().join("tools-1.0.0.tar.gz");
    let (_, stdout, _) = build.run(&["inspect", "--json", package.to_str().unwrap()]);
    let index: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // `yum8` feeds only a target that takes it.
    assert_eq!(
        index["hostPackages"]["test-rhel"],
        serde_json::json!([
            "app-2.0-1.x86_64.rpm",
            "app-tools-1.0-1.noarch.rpm",
            "exim-4.96-1.x86_64.rpm",
            "helper-2.9-1.x86_64.rpm",
            "lib-a-1.3-1.x86_64.rpm",
            "lib-b-0.9-1.noarch.rpm",
            "mailer-3.7-2.x86_64.rpm",
            "runtime-impl-5.1-1.x86_64.rpm"
        ])
    );

    // The shipped repodata reads as a repository of exactly the shipped files.
    let unpacked = tempfile::tempdir().unwrap();
    berth_formats::archive::extract(fs_err::File::open(&package).unwrap(), unpacked.path())
        .unwrap();
    let archives = unpacked
        .path()
        .join("addons/tools/1.0.0/test-rhel/archives");
    let repomd = fs_err::read_to_string(archives.join("repodata/repomd.xml")).unwrap();
    let primary = repodata::read_repomd("repomd.xml", &repomd)
        .unwrap()
        .into_iter()
        .find(|file| file.kind == "primary")
        .unwrap();
    let primary_path = archives.join(&primary.href);
    assert_eq!(
        Sha256Digest::of(&fs_err::read(&primary_path).unwrap()).hex(),
        primary.checksum
    );
    let text =
        repodata::decompress(&primary.href, fs_err::File::open(&primary_path).unwrap()).unwrap();
    let local = archives.display().to_string();
    for package in repodata::read_primary("shipped primary", &local, &text).unwrap() {
        let path = Path::new(&package.url);
        assert!(path.exists(), "{} is shipped", path.display());
        assert_eq!(
            Sha256Digest::of(&fs_err::read(path).unwrap()).hex(),
            package.sha256
        );
    }

    // The bill of materials lists exactly the shipped closure, each package as rpm itself
    // reads it (name, version-release, architecture).
    let (ok, bom, stderr) = build.run(&["inspect", "--sbom", package.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let bom: serde_json::Value = serde_json::from_str(&bom).unwrap();
    let listed: std::collections::BTreeSet<String> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|component| {
            component["purl"].as_str().is_some_and(|purl| {
                purl.starts_with("pkg:rpm/") && purl.contains("distro=test-rhel")
            })
        })
        .map(|component| {
            let purl = component["purl"].as_str().unwrap();
            let arch = purl
                .split("arch=")
                .nth(1)
                .unwrap()
                .split('&')
                .next()
                .unwrap();
            let source = component["properties"]
                .as_array()
                .unwrap()
                .iter()
                .find(|property| property["name"] == "berth:source")
                .map_or("(none)", |property| property["value"].as_str().unwrap());
            format!(
                "{} {} {arch} {} {source}",
                component["name"].as_str().unwrap(),
                component["version"].as_str().unwrap(),
                component["licenses"][0]["license"]["name"]
                    .as_str()
                    .unwrap_or("(none)"),
            )
        })
        .collect();
    let mut read = std::collections::BTreeSet::new();
    for entry in fs_err::read_dir(&archives).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "rpm") {
            let output = support::run(
                std::process::Command::new("rpm")
                    .args([
                        "-qp",
                        "--nosignature",
                        "--qf",
                        "%{NAME} %{VERSION}-%{RELEASE} %{ARCH} %{LICENSE} %{SOURCERPM}",
                    ])
                    .arg(&path),
            );
            read.insert(String::from_utf8_lossy(&output.stdout).trim().to_string());
        }
    }
    assert_eq!(read.len(), 8);
    assert_eq!(listed, read);

    // Built again, the package is the same bytes.
    let first = fs_err::read(&package).unwrap();
    let (ok, _, stderr) = support::BerthBuild::new().run(&arguments);
    assert!(ok, "{stderr}");
    assert_eq!(fs_err::read(&package).unwrap(), first);
}
