//! apt closures against real repositories: one the test builds with `dpkg-deb` and
//! `dpkg-scanpackages`, served over HTTP on loopback.

mod support;

use std::path::Path;
use std::process::Command;

use berth_build::cache::BlobCache;
use berth_build::download::RetryPolicy;
use berth_build::host_packages::apt::AptSource;
use berth_build::host_packages::fetch::{FetchError, Fetcher};
use berth_formats::Sha256Digest;
use support::{FileServer, require, run};

/// Builds `<repo>/pool/<name>_<version>_<arch>.deb` with these control fields.
fn deb(repo: &Path, name: &str, version: &str, arch: &str, fields: &[(&str, &str)]) {
    let root = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(root.path().join("DEBIAN")).unwrap();
    let mut control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: Berth tests <tests@berth.invalid>\nDescription: a test package\n"
    );
    for (field, value) in fields {
        control.push_str(&format!("{field}: {value}\n"));
    }
    fs_err::write(root.path().join("DEBIAN/control"), control).unwrap();
    fs_err::create_dir_all(root.path().join("usr/share/doc").join(name)).unwrap();
    fs_err::write(
        root.path().join("usr/share/doc").join(name).join("README"),
        name,
    )
    .unwrap();
    fs_err::create_dir_all(repo.join("pool")).unwrap();
    run(Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(root.path())
        .arg(repo.join(format!("pool/{name}_{version}_{arch}.deb"))));
}

/// Writes the suite `test`'s Packages, Packages.gz and an unsigned InRelease listing them.
fn index(repo: &Path) {
    require("dpkg-scanpackages", "dpkg-dev");
    let output = run(Command::new("dpkg-scanpackages")
        .args(["--multiversion", "pool", "/dev/null"])
        .current_dir(repo));
    let dir = repo.join("dists/test/main/binary-amd64");
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(dir.join("Packages"), &output.stdout).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &output.stdout).unwrap();
    let gzipped = gz.finish().unwrap();
    fs_err::write(dir.join("Packages.gz"), &gzipped).unwrap();
    let mut release = String::from(
        "Origin: test\nSuite: test\nArchitectures: amd64\nComponents: main\nSHA256:\n",
    );
    for (path, bytes) in [
        ("main/binary-amd64/Packages", output.stdout.as_slice()),
        ("main/binary-amd64/Packages.gz", gzipped.as_slice()),
    ] {
        release.push_str(&format!(
            " {} {} {path}\n",
            Sha256Digest::of(bytes).hex(),
            bytes.len()
        ));
    }
    fs_err::write(repo.join("dists/test/InRelease"), release).unwrap();
}

/// A repository with a dependency chain, alternatives, a virtual package, versioned
/// constraints, a conflict, and a required package every host has.
fn repository() -> tempfile::TempDir {
    require("dpkg-deb", "dpkg");
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    deb(r, "base-lib", "1.0", "amd64", &[("Priority", "required")]);
    deb(
        r,
        "app",
        "2.0",
        "amd64",
        &[(
            "Depends",
            "base-lib, lib-a (>= 1.2), mta | mail-transport-agent, runtime (>= 5), helper (<< 3)",
        )],
    );
    deb(r, "lib-a", "1.1", "amd64", &[]);
    deb(r, "lib-a", "1.3", "amd64", &[("Depends", "lib-b")]);
    deb(r, "lib-b", "0.9", "all", &[]);
    deb(
        r,
        "mailer",
        "3.7",
        "amd64",
        &[("Provides", "mail-transport-agent"), ("Conflicts", "mta")],
    );
    deb(
        r,
        "runtime-impl",
        "5.1",
        "amd64",
        &[("Provides", "runtime (= 5.1)")],
    );
    deb(r, "helper", "3.1", "amd64", &[]);
    deb(r, "helper", "2.9", "amd64", &[]);
    deb(r, "unrelated", "1.0", "amd64", &[("Depends", "lib-b")]);
    index(r);
    repo
}

fn source(server: &FileServer) -> AptSource {
    AptSource {
        mirror: server.url.clone(),
        suite: "test".into(),
        components: vec!["main".into()],
        architecture: "amd64".into(),
        keyring: None,
    }
}

/// What a Fetcher borrows: an HTTP client and a blob cache of its own.
struct Client {
    http: reqwest::Client,
    cache: BlobCache,
    _cache_dir: tempfile::TempDir,
}

impl Client {
    fn new() -> Self {
        let cache_dir = tempfile::tempdir().unwrap();
        Self {
            http: reqwest::Client::new(),
            cache: BlobCache::open(cache_dir.path()).unwrap(),
            _cache_dir: cache_dir,
        }
    }

    fn fetcher(&self) -> Fetcher<'_> {
        Fetcher {
            http: &self.http,
            cache: &self.cache,
            retry: RetryPolicy::default(),
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_closure_of_a_test_repository_is_exactly_what_apt_would_install() {
    let repo = repository();
    let server = FileServer::serve(repo.path(), None);
    let client = Client::new();
    let fetcher = client.fetcher();
    let source = source(&server);
    let runtime = runtime();
    let index = runtime
        .block_on(fetcher.index("test-distro", &source))
        .unwrap();
    let closure = index
        .resolve("test-distro", &["app".into()], &index.base())
        .unwrap();
    let names: Vec<String> = closure
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    assert_eq!(
        names,
        [
            "app 2.0",
            "helper 2.9",
            "lib-a 1.3",
            "lib-b 0.9",
            "mailer 3.7",
            "runtime-impl 5.1"
        ]
    );
    for package in closure {
        let path = runtime
            .block_on(fetcher.deb("test-distro", &source, package))
            .unwrap();
        assert_eq!(
            Sha256Digest::of(&fs_err::read(&path).unwrap()).hex(),
            package.sha256
        );
    }
}

#[test]
fn a_deb_that_does_not_match_its_index_is_refused() {
    let repo = repository();
    // One byte changed after indexing: same name and size, other content.
    let deb = repo.path().join("pool/lib-b_0.9_all.deb");
    let mut bytes = fs_err::read(&deb).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs_err::write(&deb, &bytes).unwrap();
    let server = FileServer::serve(repo.path(), None);
    let client = Client::new();
    let fetcher = client.fetcher();
    let source = source(&server);
    let runtime = runtime();
    let index = runtime
        .block_on(fetcher.index("test-distro", &source))
        .unwrap();
    let closure = index
        .resolve("test-distro", &["lib-b".into()], &index.base())
        .unwrap();
    let error = runtime
        .block_on(fetcher.deb("test-distro", &source, closure[0]))
        .unwrap_err();
    let FetchError::Download { url, source, .. } = &error else {
        panic!("{error}");
    };
    assert!(url.ends_with("pool/lib-b_0.9_all.deb"), "{url}");
    let message = format!("{error}: {source}");
    assert!(
        message.contains(&closure[0].sha256) && message.contains(&Sha256Digest::of(&bytes).hex()),
        "names both digests: {message}"
    );
}

#[test]
fn an_index_not_signed_by_the_distro_keyring_is_refused() {
    let keyring = Path::new("/usr/share/keyrings/debian-archive-keyring.gpg");
    require("gpgv", "gpgv");
    assert!(
        keyring.exists(),
        "debian-archive-keyring is not installed: run scripts/test.sh"
    );
    let repo = repository();
    let server = FileServer::serve(repo.path(), None);
    let client = Client::new();
    let fetcher = client.fetcher();
    // The test repository's InRelease carries no signature at all.
    let source = AptSource {
        keyring: Some(keyring.to_path_buf()),
        ..source(&server)
    };
    let error = runtime()
        .block_on(fetcher.index("test-distro", &source))
        .unwrap_err();
    assert!(matches!(error, FetchError::Signature { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("does not check against /usr/share/keyrings/debian-archive-keyring.gpg"),
        "{error}"
    );
}
