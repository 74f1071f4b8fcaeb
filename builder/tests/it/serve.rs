//! `berth-build serve`, `script` and `bundle`: installers posted and served as kurl.sh does,
//! their scripts run with real bash and curl against the node binary, bundles read back.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use berth_formats::Sha256Digest;
use support::images::{self, PlatformImage};
use support::{AddonRepository, BerthBuild, Server, free_port, require, ureq_status, wait_until};

/// The node binary berth-build ships by default: the portable build (scripts/portable.sh)
/// when there is one, else the one built beside berth-build when the workspace is built. The
/// commands that ship it here give `--allow-new-glibc` for the second, which a build host's
/// glibc links.
fn berth_binary() -> PathBuf {
    let builder = Path::new(env!("CARGO_BIN_EXE_berth-build"));
    let portable = builder.parent().unwrap().parent().unwrap().join(format!(
        "{}-unknown-linux-gnu/release/berth",
        std::env::consts::ARCH
    ));
    if portable.is_file() {
        return portable;
    }
    support::built_beside(env!("CARGO_BIN_EXE_berth-build"), "berth")
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A repository with one add-on, `hello`, and a dist built from it.
pub(super) struct Dist {
    pub(super) addons: AddonRepository,
    pub(super) dist: PathBuf,
    pub(super) build: BerthBuild,
}

impl Dist {
    pub(super) fn new() -> Self {
        let addons = AddonRepository::new();
        addons.addon("hello", "1.0.0", "");
        let dist = addons.root().join("dist");
        let dist = Dist {
            addons,
            dist,
            build: BerthBuild::new(),
        };
        dist.rebuild();
        dist
    }

    pub(super) fn rebuild(&self) {
        self.rebuild_with(&[]);
    }

    /// The dist built again, with `extra` arguments (`--signing-key KEY`).
    pub(super) fn rebuild_with(&self, extra: &[&str]) {
        let mut arguments = vec![
            "build",
            self.addons.root().to_str().unwrap(),
            "--out",
            self.dist.to_str().unwrap(),
        ];
        arguments.extend(extra);
        let (ok, _, stderr) = self.build.run(&arguments);
        assert!(ok, "{stderr}");
    }

    /// A key pair made by `berth-build keygen` in `folder` (`NAME.key`, `NAME.pub`); the
    /// private key's path.
    pub(super) fn keygen(&self, folder: &Path, name: &str) -> PathBuf {
        let prefix = folder.join(name);
        let (ok, _, stderr) = self.build.run(&["keygen", prefix.to_str().unwrap()]);
        assert!(ok, "{stderr}");
        folder.join(format!("{name}.key"))
    }

    pub(super) fn spec(&self, text: &str) -> PathBuf {
        self.addons.write("installer.yaml", text)
    }
}

pub(super) const SPEC: &str = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata:\n  name: demo\nspec:\n  hello:\n    version: latest\n";

/// `berth-build serve` on a free port, until dropped.
pub(super) struct Serving {
    pub(super) url: String,
    _server: Server,
    _log: tempfile::TempDir,
}

pub(super) fn serve(dist: &Path, extra: &[&str]) -> Serving {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut arguments = vec!["--listen", listen.as_str()];
    arguments.extend(extra);
    serve_with(dist, &arguments, port)
}

/// [`serve`] with every argument given (its `--listen` among them), answering on `port`.
fn serve_with(dist: &Path, extra: &[&str], port: u16) -> Serving {
    let log = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_berth-build"));
    command.args(["serve", "--allow-new-glibc"]);
    if !extra.contains(&"--installers") {
        command
            .arg("--installers")
            .arg(log.path().join("installers"));
    }
    let server = Server::spawn(
        command.arg("--dist").arg(dist).args(extra),
        &log.path().join("serve.log"),
    );
    let url = format!("http://127.0.0.1:{port}");
    wait_until(
        "berth-build serve to answer",
        Duration::from_secs(20),
        || ureq_status(&format!("{url}/versions.json")) == Some(200),
    );
    Serving {
        url,
        _server: server,
        _log: log,
    }
}

pub(super) fn curl(arguments: &[&str]) -> Output {
    require("curl", "curl");
    Command::new("curl").args(arguments).output().unwrap()
}

/// Posts a spec; returns the status code and body.
fn post(url: &str, spec: &Path) -> (String, String) {
    let output = curl(&[
        "-sS",
        "-w",
        "\n%{http_code}",
        "-X",
        "POST",
        "--data-binary",
        &format!("@{}", spec.display()),
        &format!("{url}/installer"),
    ]);
    let all = text(&output.stdout);
    let (body, status) = all.rsplit_once('\n').unwrap();
    (status.to_string(), body.trim().to_string())
}

/// `bash -s -- ARGUMENTS` with `script` on its input, as a node under `root` runs it.
fn run_script(script: &[u8], root: &Path, arguments: &[&str]) -> Output {
    let mut child = Command::new("bash")
        .args(["-s", "--"])
        .args(arguments)
        .env("BERTH_ROOT", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), script).unwrap();
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

#[test]
fn curl_piped_to_bash_fetches_and_checks_berth_then_prints_the_plan() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let (status, url) = post(&serving.url, &dist.spec(SPEC));
    assert_eq!(status, "201", "{url}");
    assert!(url.starts_with(&format!("{}/", serving.url)), "{url}");

    // `curl -fsSL <url> | bash -s -- plan`, as a user types it.
    let root = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!("curl -fsSL {url} | bash -s -- plan"))
        .env("BERTH_ROOT", root.path())
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    assert!(all.contains("hello") && all.contains("Install"), "{all}");
    assert!(
        all.contains("berth: downloading"),
        "the script downloaded the node binary the server offers (and checked its digest, or it would have stopped): {all}"
    );
    // Plan changes nothing: no installer files, no binary, no state, no link.
    assert_eq!(
        fs_err::read_dir(root.path()).unwrap().count(),
        0,
        "plan left files under the node's root"
    );

    // Every script of the installer is served; an unknown id or script is not.
    for script in ["install.sh", "join.sh", "upgrade.sh", "tasks.sh"] {
        let output = curl(&["-fsS", &format!("{url}/{script}")]);
        assert!(
            output.status.success(),
            "{script}: {}",
            text(&output.stderr)
        );
        assert!(text(&output.stdout).starts_with("#!/usr/bin/env bash\n"));
    }
    let missing = curl(&[
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{}/0000000", serving.url),
    ]);
    assert_eq!(text(&missing.stdout), "404");
    let missing = curl(&[
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{url}/other.sh"),
    ]);
    assert_eq!(text(&missing.stdout), "404");
}

#[test]
fn a_package_changed_after_the_script_was_served_is_refused() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let script = curl(&["-fsSL", &url]).stdout;
    let served = Sha256Digest::of(&fs_err::read(dist.dist.join("hello-1.0.0.tar.gz")).unwrap());

    // The package is rebuilt with other content, its .sha256 with it: only the lock knows.
    dist.addons.write(
        "addons/hello/1.0.0/install.sh",
        "function hello() {\n    echo something else\n}\n",
    );
    dist.rebuild();
    let changed = Sha256Digest::of(&fs_err::read(dist.dist.join("hello-1.0.0.tar.gz")).unwrap());
    assert_ne!(served, changed);

    // Posting the spec again does not hand out the URL that would install the old package.
    let (status, said) = post(&serving.url, &dist.spec(SPEC));
    assert_eq!(status, "409", "{said}");
    assert!(
        said.contains(&served.hex())
            && said.contains(&changed.hex())
            && said.contains("metadata.name"),
        "names both packages and the way out: {said}"
    );

    let root = tempfile::tempdir().unwrap();
    let output = run_script(&script, root.path(), &[]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(all.contains("hello 1.0.0"), "names the package: {all}");
    assert!(
        all.contains(&served.hex()) && all.contains(&changed.hex()),
        "names both digests: {all}"
    );
    assert!(
        !all.contains("something else"),
        "no hook of the changed package ran: {all}"
    );
}

#[test]
fn whoever_writes_the_store_cannot_change_what_an_installer_url_already_installs() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let first = text(&curl(&["-fsSL", &url]).stdout);
    let served = Sha256Digest::of(&fs_err::read(dist.dist.join("hello-1.0.0.tar.gz")).unwrap());
    assert!(
        first.contains(&served.hex()),
        "the lock pins the package: {first}"
    );

    // The store's package and .sha256 are replaced: the installer's URL still pins the
    // package it was created with, and running it refuses the new one.
    dist.addons.write(
        "addons/hello/1.0.0/install.sh",
        "function hello() {\n    echo tampered\n}\n",
    );
    dist.rebuild();
    let changed = Sha256Digest::of(&fs_err::read(dist.dist.join("hello-1.0.0.tar.gz")).unwrap());
    assert_ne!(served, changed);
    let again = text(&curl(&["-fsSL", &url]).stdout);
    assert!(again.contains(&served.hex()), "{again}");
    assert!(!again.contains(&changed.hex()), "{again}");
    let root = tempfile::tempdir().unwrap();
    let output = run_script(again.as_bytes(), root.path(), &[]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(
        !all.contains("tampered"),
        "no hook of the replaced package ran: {all}"
    );
}

#[test]
fn a_berth_binary_other_than_the_script_expects_is_refused() {
    let dist = Dist::new();
    let spec = dist.spec(SPEC);
    let serving = serve(&dist.dist, &[]);
    let (_, url) = post(&serving.url, &spec);
    let script = curl(&["-fsSL", &url]).stdout;
    let port = serving.url.rsplit(':').next().unwrap().to_string();
    drop(serving);

    // The same address now offers another binary.
    let other = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(other.path(), "#!/bin/sh\necho not berth\n").unwrap();
    let log = tempfile::tempdir().unwrap();
    let _server = Server::spawn(
        Command::new(env!("CARGO_BIN_EXE_berth-build"))
            .args(["serve", "--installers"])
            .arg(log.path().join("installers"))
            .arg("--dist")
            .arg(&dist.dist)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--berth"])
            .arg(other.path()),
        &log.path().join("serve.log"),
    );
    wait_until(
        "berth-build serve to answer",
        Duration::from_secs(20),
        || ureq_status(&format!("http://127.0.0.1:{port}/versions.json")) == Some(200),
    );
    let root = tempfile::tempdir().unwrap();
    let output = run_script(&script, root.path(), &["plan"]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let expected = Sha256Digest::of(&fs_err::read(berth_binary()).unwrap());
    assert!(
        stderr.contains(&format!("this script expects {}", expected.hex())),
        "{stderr}"
    );
    assert!(!root.path().join("var/lib/berth/bin/berth").exists());
}

#[test]
fn bad_posts_are_answered_with_the_reason() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let (status, body) = post(
        &serving.url,
        &dist.spec("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello: [\n"),
    );
    assert_eq!(status, "400", "{body}");
    assert!(
        body.starts_with("installer.yaml:"),
        "the parse error, with its place: {body}"
    );
    let (status, body) = post(
        &serving.url,
        &dist.spec("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  nothere:\n    version: latest\n"),
    );
    assert_eq!(status, "400", "{body}");
    assert!(body.contains("unknown add-on `nothere`"), "{body}");

    // A field the add-on does not declare, and one of kURL's misspelled.
    fs_err::write(
        dist.addons.root().join("addons/hello/1.0.0/fields.yaml"),
        "fields:\n  - {name: greeting, type: string, default: hi, help: what it says}\n",
    )
    .unwrap();
    dist.rebuild();
    let (status, body) = post(
        &serving.url,
        &dist.spec("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello:\n    version: latest\n    greting: hey\n"),
    );
    assert_eq!(status, "400", "{body}");
    assert!(
        body.starts_with(
            "installer.yaml:6: spec.hello.greting is not a field of hello; did you mean `greeting`?"
        ),
        "the line is named, as a YAML error's is: {body}"
    );
    let (status, body) = post(
        &serving.url,
        &dist.spec("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello:\n    version: latest\n  kurl:\n    airgapp: true\n"),
    );
    assert_eq!(status, "400", "{body}");
    assert!(body.contains("did you mean `airgap`?"), "{body}");
}

#[test]
fn every_rendered_script_passes_shellcheck() {
    let shellcheck = require("shellcheck", "shellcheck");
    let dist = Dist::new();
    let keys = tempfile::tempdir().unwrap();
    let key = dist.keygen(keys.path(), "vendor");
    let spec = dist.spec(SPEC);
    // Unsigned, and signed (carrying the lock's signature and the vendor's key).
    for signing in [None, Some(key.to_str().unwrap())] {
        let out = tempfile::tempdir().unwrap();
        let mut arguments = vec![
            "script",
            "--spec",
            spec.to_str().unwrap(),
            "--dist",
            dist.dist.to_str().unwrap(),
            "--dist-url",
            "http://127.0.0.1:1/dist",
            "--out",
            out.path().to_str().unwrap(),
            "--allow-new-glibc",
        ];
        if let Some(key) = signing {
            // The release must be the key's own: sign the dist first.
            let (ok, _, stderr) =
                dist.build
                    .run(&["sign", dist.dist.to_str().unwrap(), "--signing-key", key]);
            assert!(ok, "{stderr}");
            arguments.extend(["--signing-key", key]);
        }
        let (ok, _, stderr) = dist.build.run(&arguments);
        assert!(ok, "{stderr}");
        let scripts: Vec<PathBuf> = ["install.sh", "join.sh", "upgrade.sh", "tasks.sh"]
            .iter()
            .map(|script| out.path().join(script))
            .collect();
        let install = fs_err::read_to_string(&scripts[0]).unwrap();
        assert_eq!(install.contains("BEGIN PUBLIC KEY"), signing.is_some());
        assert!(!install.contains("PRIVATE KEY"));
        let output = Command::new(&shellcheck).args(&scripts).output().unwrap();
        assert!(
            output.status.success(),
            "{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
}

/// The vendor signs in CI (`keygen`, `build --signing-key`) and serves with its key: the
/// script carries the lock's signature and the public key, and a node checks the dist with
/// it — a versions.json signed by another key is refused before anything is unpacked.
#[test]
fn a_signed_dist_served_with_its_key_installs_and_a_dist_re_signed_by_another_key_is_refused() {
    let dist = Dist::new();
    let keys = tempfile::tempdir().unwrap();
    let vendor = dist.keygen(keys.path(), "vendor");
    dist.keygen(keys.path(), "other");
    dist.rebuild_with(&["--signing-key", vendor.to_str().unwrap()]);
    assert!(dist.dist.join("versions.json.sig").is_file());
    assert!(dist.dist.join("hello-1.0.0.tar.gz.sha256.sig").is_file());
    let serving = serve(&dist.dist, &["--signing-key", vendor.to_str().unwrap()]);
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let script = curl(&["-fsSL", &url]).stdout;

    let root = tempfile::tempdir().unwrap();
    let output = run_script(&script, root.path(), &[]);
    let said = text(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(
        !said.contains("NOTHING IS CHECKED AGAINST A SIGNING KEY"),
        "{said}"
    );
    let installers = root.path().join("var/lib/berth/installers");
    let id = fs_err::read_dir(&installers)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(id.join("lock.json.sig").is_file());
    // The node keeps the vendor's key for this dist's origin alone: later runs for the dist
    // (a rollout's upgrade) check with it too, and no other dist's do.
    let kept: Vec<std::path::PathBuf> =
        fs_err::read_dir(root.path().join("etc/berth/trusted-keys"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
    assert!(kept.len() == 1 && kept[0].is_dir(), "{kept:?}");
    let origin = fs_err::read_to_string(kept[0].join("origin")).unwrap();
    assert_eq!(
        origin.trim(),
        serving
            .url
            .replace("localhost", "127.0.0.1")
            .trim_end_matches('/'),
        "{kept:?}"
    );
    let kept_keys = fs_err::read_dir(&kept[0])
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|extension| extension == "pub")
        })
        .count();
    assert_eq!(kept_keys, 1, "{kept:?}");

    // Its bundle carries each package's bill of materials, signed with the rest.
    let (_, installer) = url.rsplit_once('/').unwrap();
    let bundle = root.path().join("bundle.tar.gz");
    let fetched = curl(&[
        "-fsS",
        "-o",
        bundle.to_str().unwrap(),
        &format!("{}/bundle/{installer}.tar.gz", serving.url),
    ]);
    assert!(fetched.status.success(), "{}", text(&fetched.stderr));
    // Signed, it is still the same bytes on every download (deterministic signatures).
    let again = curl(&[
        "-fsS",
        &format!("{}/bundle/{installer}.tar.gz", serving.url),
    ]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        again.stdout == fs_err::read(&bundle).unwrap(),
        "a second download of the signed bundle differs"
    );
    let listed = text(
        &Command::new("tar")
            .arg("tzf")
            .arg(&bundle)
            .output()
            .unwrap()
            .stdout,
    );
    for file in [
        "packages/hello-1.0.0.cdx.json",
        "packages/hello-1.0.0.cdx.json.sig",
        "versions.json.sig",
        "lock.json.sig",
    ] {
        assert!(
            listed
                .lines()
                .any(|line| line.trim_start_matches("./") == file),
            "{file} in {listed}"
        );
    }
    // The same bundle in zstd, named so: the same files, in zstd's format.
    let zstd = root.path().join("bundle.tar.zst");
    let fetched = curl(&[
        "-fsS",
        "-o",
        zstd.to_str().unwrap(),
        "-w",
        "%{content_type}",
        &format!("{}/bundle/{installer}.tar.zst", serving.url),
    ]);
    assert!(fetched.status.success(), "{}", text(&fetched.stderr));
    assert_eq!(text(&fetched.stdout), "application/zstd");
    assert_eq!(
        berth_formats::compression::Compression::sniff(&fs_err::read(&zstd).unwrap()),
        Some(berth_formats::compression::Compression::Zstd)
    );
    let in_zstd = text(
        &Command::new("tar")
            .args(["--zstd", "-tf"])
            .arg(&zstd)
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(in_zstd, listed);
    let other = curl(&[
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{}/bundle/{installer}.tar.xz", serving.url),
    ]);
    assert_eq!(text(&other.stdout), "404");

    // The dist's versions.json re-signed with another key: refused, naming it and the key.
    let other = keys.path().join("other.key");
    let (ok, _, stderr) = dist.build.run(&[
        "sign",
        dist.dist.to_str().unwrap(),
        "--key",
        other.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let root = tempfile::tempdir().unwrap();
    let output = run_script(&script, root.path(), &[]);
    let said = text(&output.stderr);
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains("versions.json is not signed by a trusted key"),
        "{said}"
    );
    assert!(!root.path().join("var/lib/berth/addons").exists());
    // And the server no longer signs a lock for that release: it is not its key's.
    let output = curl(&["-sS", "-o", "/dev/null", "-w", "%{http_code}", &url]);
    assert_eq!(text(&output.stdout), "502");
}

#[test]
fn a_bundle_stores_a_blob_that_three_add_ons_share_once() {
    let addons = AddonRepository::new();
    let base = images::unique_layer("base.bin", "shared base", 256 * 1024);
    let mut own = BTreeMap::new();
    for name in ["one", "two", "three"] {
        let layer = images::unique_layer("app.bin", name, 64 * 1024);
        own.insert(name, Sha256Digest::of(&layer.gz));
        images::write_oci_archive(
            &addons.root().join(format!("{name}.tar")),
            &format!("local/{name}:1"),
            &[PlatformImage {
                arch: "amd64",
                layers: vec![base.clone(), layer],
            }],
        );
        addons.addon(name, "1.0.0", &format!("image {name} {name}.tar\n"));
    }
    let dist = addons.root().join("dist");
    let build = BerthBuild::new();
    let (ok, _, stderr) = build.run(&[
        "build",
        addons.root().to_str().unwrap(),
        "--out",
        dist.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let spec = addons.write(
        "installer.yaml",
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  one: {version: latest}\n  two: {version: latest}\n  three: {version: latest}\n",
    );
    let bundle = addons.root().join("bundle.tar.gz");
    let (ok, _, stderr) = build.run(&[
        "bundle",
        "--spec",
        spec.to_str().unwrap(),
        "--dist",
        dist.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
        "--allow-new-glibc",
    ]);
    assert!(ok, "{stderr}");
    // Shipped, so readable by all, as `tar czf` leaves an archive.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = fs_err::metadata(&bundle).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");

    let mut entries: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
        fs_err::File::open(&bundle).unwrap(),
    ));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        assert!(
            entries.insert(path.clone(), data).is_none(),
            "{path} is in the bundle twice"
        );
    }
    let base_digest = Sha256Digest::of(&base.gz);
    let base_path = format!("blobs/sha256/{}", base_digest.hex());
    assert!(entries.contains_key(&base_path), "{:?}", entries.keys());
    let blobs_with_base = entries
        .keys()
        .filter(|path| path.ends_with(&base_digest.hex()))
        .count();
    assert_eq!(blobs_with_base, 1, "the shared layer is stored once");
    for digest in own.values() {
        assert!(entries.contains_key(&format!("blobs/sha256/{}", digest.hex())));
    }
    for file in [
        "install.sh",
        "join.sh",
        "upgrade.sh",
        "tasks.sh",
        "berth",
        "installer.yaml",
        "lock.json",
        "versions.json",
    ] {
        assert!(entries.contains_key(file), "{file} is in the bundle");
    }
    // The lock pins each package and its index; the index in the bundle matches it.
    let lock = berth_formats::lock::Lock::parse("lock.json", &entries["lock.json"]).unwrap();
    assert_eq!(lock.addons.len(), 3);
    for addon in &lock.addons {
        let index = &entries[&format!("packages/{}-{}/package.json", addon.name, addon.version)];
        assert_eq!(Some(Sha256Digest::of(index)), addon.index_sha256);
        let package =
            fs_err::read(dist.join(format!("{}-{}.tar.gz", addon.name, addon.version))).unwrap();
        assert_eq!(Sha256Digest::of(&package), addon.sha256);
    }
    assert_eq!(entries["berth"], fs_err::read(berth_binary()).unwrap());
}

/// The `berth` a bundle carries.
fn bundled_berth(bundle: &Path) -> Vec<u8> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
        fs_err::File::open(bundle).unwrap(),
    ));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap() == Path::new("berth") {
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
            return data;
        }
    }
    panic!("{} carries no berth", bundle.display());
}

#[test]
fn a_host_built_node_binary_is_shipped_by_default_only_when_allowed_and_the_portable_one_first() {
    let dist = Dist::new();
    let spec = dist.spec(SPEC);
    // berth-build in a target folder of its own, as cargo leaves it: a hard link, since it
    // looks for the node binary beside its own path, not a symbolic link's. Beside it, a
    // `berth` cargo linked against this host's glibc (berth-build itself is one).
    let target = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let builder = target.path().join("debug/berth-build");
    fs_err::create_dir_all(builder.parent().unwrap()).unwrap();
    if fs_err::hard_link(env!("CARGO_BIN_EXE_berth-build"), &builder).is_err() {
        fs_err::copy(env!("CARGO_BIN_EXE_berth-build"), &builder).unwrap();
    }
    let host_build = builder.with_file_name("berth");
    fs_err::os::unix::fs::symlink(env!("CARGO_BIN_EXE_berth-build"), &host_build).unwrap();
    let bundle = target.path().join("bundle.tar.gz");
    let run = |extra: &[&str]| {
        let output = Command::new(&builder)
            .args(["bundle", "--spec", spec.to_str().unwrap(), "--dist"])
            .arg(&dist.dist)
            .arg("--out")
            .arg(&bundle)
            .args(extra)
            .output()
            .unwrap();
        (output.status.success(), text(&output.stderr))
    };

    let (ok, said) = run(&[]);
    assert!(!ok, "{said}");
    for part in [
        &format!("{} (the `berth` beside berth-build", host_build.display()),
        "asks for GLIBC_2.",
        "hint: build the portable one with `scripts/portable.sh`",
        "--allow-new-glibc",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    assert!(!bundle.exists());

    let (ok, said) = run(&["--allow-new-glibc"]);
    assert!(ok, "{said}");
    assert_eq!(bundled_berth(&bundle), fs_err::read(&host_build).unwrap());

    // Where scripts/portable.sh leaves it; a script here, which asks for no glibc at all.
    let portable = target.path().join(format!(
        "{}-unknown-linux-gnu/release/berth",
        std::env::consts::ARCH
    ));
    fs_err::create_dir_all(portable.parent().unwrap()).unwrap();
    fs_err::write(&portable, "#!/bin/sh\necho portable berth\n").unwrap();
    let (ok, said) = run(&[]);
    assert!(ok, "{said}");
    assert_eq!(bundled_berth(&bundle), fs_err::read(&portable).unwrap());
}

#[test]
fn an_s3_store_is_served_as_a_folder_is() {
    let s3 = support::s3::S3Server::start();
    s3.create_bucket("berth");
    let dist = Dist::new();
    let mut build = BerthBuild::new();
    build.envs = s3
        .env()
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect();
    let (ok, _, stderr) = build.run(&[
        "upload",
        dist.dist.to_str().unwrap(),
        "--to",
        "s3://berth/channel",
        "--release",
        "r1",
        "--endpoint",
        &s3.endpoint,
        "--path-style",
        "--allow-new-glibc",
    ]);
    assert!(ok, "{stderr}");

    let port = free_port();
    let log = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_berth-build"));
    command
        .args(["serve", "--dist", "s3://berth/channel", "--release", "r1"])
        .arg("--installers")
        .arg(log.path().join("installers"))
        .args(["--endpoint", &s3.endpoint, "--path-style"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .envs(s3.env());
    let _server = Server::spawn(&mut command, &log.path().join("serve.log"));
    let url = format!("http://127.0.0.1:{port}");
    wait_until(
        "berth-build serve to answer",
        Duration::from_secs(20),
        || ureq_status(&format!("{url}/versions.json")) == Some(200),
    );
    let package = curl(&["-fsS", &format!("{url}/dist/hello-1.0.0.tar.gz")]);
    assert_eq!(
        Sha256Digest::of(&package.stdout),
        Sha256Digest::of(&fs_err::read(dist.dist.join("hello-1.0.0.tar.gz")).unwrap())
    );
    let (status, installer) = post(&url, &dist.spec(SPEC));
    assert_eq!(status, "201", "{installer}");
    let root = tempfile::tempdir().unwrap();
    let script = curl(&["-fsSL", &installer]).stdout;
    let output = run_script(&script, root.path(), &["plan"]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    assert!(all.contains("hello") && all.contains("Install"), "{all}");
}

#[test]
fn an_installer_id_is_128_bits_and_its_url_outlives_a_restart() {
    let dist = Dist::new();
    let kept = tempfile::tempdir().unwrap();
    let kept_dir = kept.path().display().to_string();
    let serving = serve(&dist.dist, &["--installers", &kept_dir]);
    let (status, url) = post(&serving.url, &dist.spec(SPEC));
    assert_eq!(status, "201", "{url}");
    let id = url.rsplit('/').next().unwrap().to_string();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|byte| byte.is_ascii_hexdigit()), "{id}");
    // The same spec again binds nothing new.
    assert_eq!(post(&serving.url, &dist.spec(SPEC)).0, "200");
    drop(serving);
    let restarted = serve(&dist.dist, &["--installers", &kept_dir]);
    let script = curl(&["-fsS", &format!("{}/{id}", restarted.url)]);
    assert!(script.status.success(), "{}", text(&script.stderr));
    assert!(text(&script.stdout).contains(&id));
}

#[test]
fn nested_yaml_is_refused_at_once_while_the_server_keeps_answering() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    // About 200 KB of nested brackets held a worker for most of a minute.
    let nested = format!(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let spec = dist.spec(&nested);
    let started = std::time::Instant::now();
    let posts: Vec<_> = (0..4)
        .map(|_| {
            let url = serving.url.clone();
            let spec = spec.clone();
            std::thread::spawn(move || post(&url, &spec))
        })
        .collect();
    assert_eq!(
        ureq_status(&format!("{}/versions.json", serving.url)),
        Some(200)
    );
    for handle in posts {
        let (status, body) = handle.join().unwrap();
        assert_eq!(status, "400", "{body}");
        assert!(body.contains("nests deeper"), "{body}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A spec past the size bound is refused before it is read whole.
    let big = dist.spec(&format!("{SPEC}# {}\n", "x".repeat(600 * 1024)));
    assert_eq!(post(&serving.url, &big).0, "413");
}

#[test]
fn a_full_installer_store_refuses_more_posts() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &["--max-installers", "1"]);
    assert_eq!(post(&serving.url, &dist.spec(SPEC)).0, "201");
    let other = SPEC
        .replace("name: demo", "name: other")
        .replace("version: latest", "version: latest\n    greeting: hi");
    let (status, body) = post(&serving.url, &dist.spec(&other));
    assert_eq!(status, "507", "{body}");
    assert!(body.contains("its limit"), "{body}");
}

/// Posts a spec from the loopback address `from`; the status code and the headers and body.
fn post_from(from: &str, url: &str, spec: &Path) -> (String, String) {
    let output = curl(&[
        "-sS",
        "-i",
        "--interface",
        from,
        "-w",
        "\n%{http_code}",
        "-X",
        "POST",
        "--data-binary",
        &format!("@{}", spec.display()),
        &format!("{url}/installer"),
    ]);
    let all = text(&output.stdout);
    let (body, status) = all.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

/// The spec SPEC with its greeting `n`: another installer each.
fn numbered(dist: &Dist, n: usize) -> std::path::PathBuf {
    let other = SPEC
        .replace("name: demo", &format!("name: spec-{n}"))
        .replace(
            "version: latest",
            &format!("version: latest\n    greeting: hi-{n}"),
        );
    dist.spec(&other)
}

#[test]
fn a_client_past_its_share_is_told_when_to_come_back_and_others_are_served() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &["--installers-per-client", "2"]);
    for n in 0..2 {
        assert_eq!(
            post_from("127.0.0.1", &serving.url, &numbered(&dist, n)).0,
            "201"
        );
    }
    // The same spec again costs nothing.
    assert_eq!(
        post_from("127.0.0.1", &serving.url, &numbered(&dist, 0)).0,
        "200"
    );
    let (status, said) = post_from("127.0.0.1", &serving.url, &numbered(&dist, 2));
    assert_eq!(status, "429", "{said}");
    assert!(said.to_lowercase().contains("retry-after: "), "{said}");
    assert!(
        said.contains("created 2 installers within the hour, its share"),
        "{said}"
    );
    // Another client is not held back by the first one's flood.
    assert_eq!(
        post_from("127.0.0.2", &serving.url, &numbered(&dist, 3)).0,
        "201"
    );
}

#[test]
fn a_full_store_makes_room_from_the_installer_unused_longest_once_it_is_idle() {
    let dist = Dist::new();
    let kept = tempfile::tempdir().unwrap();
    let installers = kept.path().join("installers");
    let serving = serve(
        &dist.dist,
        &[
            "--installers",
            installers.to_str().unwrap(),
            "--max-installers",
            "1",
        ],
    );
    let (status, first) = post(&serving.url, &numbered(&dist, 0));
    assert_eq!(status, "201", "{first}");
    // In use: no room.
    let (status, said) = post(&serving.url, &numbered(&dist, 1));
    assert_eq!(status, "507", "{said}");
    // Unused for a month (as the file's time says): it gives way.
    let id = first.rsplit('/').next().unwrap();
    let file = fs_err::File::options()
        .append(true)
        .open(installers.join(format!("{id}.yaml")))
        .unwrap();
    file.file()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(31 * 24 * 3600))
        .unwrap();
    let (status, second) = post(&serving.url, &numbered(&dist, 1));
    assert_eq!(status, "201", "{second}");
    assert_eq!(
        curl(&["-sS", "-o", "/dev/null", "-w", "%{http_code}", &first]).stdout,
        b"404"
    );
    assert_eq!(
        curl(&["-sS", "-o", "/dev/null", "-w", "%{http_code}", &second]).stdout,
        b"200"
    );
    assert!(!installers.join(format!("{id}.lock.json")).exists());
}

#[test]
fn out_of_range_limits_are_refused_by_name_not_by_a_panic() {
    for (flag, value) in [
        ("--max-connections", "99999999999999999999"),
        ("--max-connections", "0"),
        ("--max-bundles", "18446744073709551615"),
        ("--header-timeout", "18446744073709551615"),
        ("--max-installers", "0"),
        ("--installers-per-client", "0"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_berth-build"))
            .args(["serve", flag, value, "--dist", "/nonexistent"])
            .output()
            .unwrap();
        let said = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {said}");
        assert!(said.contains(flag), "{flag} {value}: {said}");
        assert!(!said.contains("panicked"), "{said}");
    }
}

#[test]
fn a_method_a_path_does_not_take_is_answered_with_a_reason_in_json_too() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let url = format!("{}/installer", serving.url);
    let asked = |json: bool| {
        let mut arguments = vec!["-sS", "-X", "DELETE", "-w", "\n%{http_code}", &url];
        if json {
            arguments.extend(["-H", "Accept: application/json"]);
        }
        let output = curl(&arguments);
        let all = text(&output.stdout);
        let (body, status) = all.rsplit_once('\n').unwrap();
        (status.to_string(), body.to_string())
    };
    let (status, body) = asked(true);
    assert_eq!(status, "405");
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value["status"], 405);
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .starts_with("405 Method Not Allowed"),
        "{value}"
    );
    let (status, body) = asked(false);
    assert_eq!(status, "405");
    assert!(body.starts_with("405 Method Not Allowed"), "{body}");
}

#[test]
fn a_slow_request_head_is_cut_off_and_connections_are_bounded() {
    use std::io::{Read as _, Write as _};
    let dist = Dist::new();
    let serving = serve(
        &dist.dist,
        &["--header-timeout", "1", "--max-connections", "2"],
    );
    let address = serving.url.trim_start_matches("http://").to_string();
    // Two clients that send half a request head and then nothing hold every connection.
    let mut idle: Vec<std::net::TcpStream> = (0..2)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&address).unwrap();
            stream
                .write_all(b"GET /versions.json HTTP/1.1\r\n")
                .unwrap();
            stream
        })
        .collect();
    // They are cut off at the timeout, and a real request is answered after them: not before
    // (the two connections are all the server serves), and not much later.
    let started = std::time::Instant::now();
    assert_eq!(
        ureq_status(&format!("{}/versions.json", serving.url)),
        Some(200)
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700),
        "answered past the bound: {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    for stream in &mut idle {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest);
        assert!(
            read.is_ok(),
            "the server closed the slow connection: {read:?}"
        );
    }
}

#[test]
fn a_spec_line_that_ended_the_old_heredoc_installs_whole() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &["--berth", berth_binary().to_str().unwrap()]);
    let text_spec = format!(
        "{SPEC}    note: |\n      BERTH_SPEC_END\n      echo injected > {}/injected\n      BERTH_LOCK_END\n",
        dist.addons.root().display()
    );
    let (status, url) = post(&serving.url, &dist.spec(&text_spec));
    assert_eq!(status, "201", "{url}");
    let id = url.rsplit('/').next().unwrap();
    let script = curl(&["-fsS", &url]);
    assert!(script.status.success(), "{}", text(&script.stderr));
    let root = tempfile::tempdir().unwrap();
    let output = run_script(&script.stdout, root.path(), &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(!dist.addons.root().join("injected").exists());
    let kept = root
        .path()
        .join(format!("var/lib/berth/installers/{id}/installer.yaml"));
    assert_eq!(fs_err::read_to_string(kept).unwrap(), text_spec);
}

#[test]
fn bad_paths_are_bad_requests_and_answers_name_no_store_path() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let status = |path: &str| {
        let output = curl(&[
            "-sS",
            "-w",
            "\n%{http_code}",
            &format!("{}{path}", serving.url),
        ]);
        let all = text(&output.stdout);
        let (body, code) = all.rsplit_once('\n').unwrap();
        (code.to_string(), body.to_string())
    };
    let (code, _) = status("/dist/a%00b");
    assert_eq!(code, "400");
    let (code, body) = status("/dist/nothing-1.0.0.tar.gz");
    assert_eq!(code, "404", "{body}");
    assert!(!body.contains(&dist.dist.display().to_string()), "{body}");
    let (code, body) = status("/");
    assert_eq!(code, "200");
    assert!(
        body.contains("POST") && body.contains("/installer"),
        "{body}"
    );
}

#[test]
fn bundles_past_the_bound_are_answered_503() {
    let dist = Dist::new();
    let serving = serve(
        &dist.dist,
        &[
            "--max-bundles",
            "1",
            "--berth",
            berth_binary().to_str().unwrap(),
        ],
    );
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let id = url.rsplit('/').next().unwrap();
    let bundle = format!("{}/bundle/{id}.tar.gz", serving.url);
    // A client that reads one byte a second holds the one place once its answer has begun.
    let headers = tempfile::NamedTempFile::new().unwrap();
    let mut slow = Command::new("curl")
        .args(["-sS", "--limit-rate", "1", "-o", "/dev/null", "-D"])
        .arg(headers.path())
        .arg(&bundle)
        .spawn()
        .unwrap();
    wait_until(
        "the first bundle to be under way",
        Duration::from_secs(10),
        || fs_err::read_to_string(headers.path()).is_ok_and(|head| head.contains(" 200")),
    );
    let output = curl(&["-sS", "-o", "/dev/null", "-w", "%{http_code}", &bundle]);
    assert_eq!(text(&output.stdout), "503");
    // Asked for JSON, the answer is JSON and still says when to come back.
    let output = curl(&["-sS", "-D", "-", "-H", "Accept: application/json", &bundle]);
    let answer = text(&output.stdout).to_ascii_lowercase();
    assert!(answer.contains("retry-after: "), "{answer}");
    assert!(
        answer.contains("content-type: application/json"),
        "{answer}"
    );
    assert!(answer.contains(r#""status":503"#), "{answer}");
    slow.kill().unwrap();
    slow.wait().unwrap();
    wait_until(
        "the place to be given back",
        Duration::from_secs(30),
        || {
            let output = curl(&["-sS", "-o", "/dev/null", "-w", "%{http_code}", &bundle]);
            text(&output.stdout) == "200"
        },
    );
}

#[test]
fn a_script_cut_short_runs_nothing() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &["--berth", berth_binary().to_str().unwrap()]);
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let script = curl(&["-fsS", &url]).stdout;
    for tenth in 1..10 {
        let cut = &script[..script.len() * tenth / 10];
        let root = tempfile::tempdir().unwrap();
        let output = run_script(cut, root.path(), &[]);
        assert!(
            !text(&output.stderr).contains("berth:"),
            "{tenth}/10 of the script ran: {}",
            text(&output.stderr)
        );
        assert_eq!(
            fs_err::read_dir(root.path()).unwrap().count(),
            0,
            "{tenth}/10 of the script wrote files"
        );
    }
}

#[test]
fn operator_values_are_quoted_in_the_scripts() {
    let dist = Dist::new();
    let spec = dist.spec(SPEC);
    let out = tempfile::tempdir().unwrap();
    let marker = out.path().join("PWNED");
    let dist_url = format!("http://127.0.0.1:1/$(touch {})'\"x", marker.display());
    let (ok, _, stderr) = dist.build.run(&[
        "script",
        "--spec",
        spec.to_str().unwrap(),
        "--dist-url",
        &dist_url,
        "--dist",
        dist.dist.to_str().unwrap(),
        "--berth",
        berth_binary().to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let root = tempfile::tempdir().unwrap();
    let script = fs_err::read(out.path().join("install.sh")).unwrap();
    let output = run_script(&script, root.path(), &[]);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains(&format!("{dist_url}/bin/berth-linux-")),
        "the URL is used as written: {}",
        text(&output.stderr)
    );
    assert!(!marker.exists(), "a value ran as a command");
}

/// The README's own command for posting a spec, taken from the README.
fn readme_post_command() -> String {
    readme_line(|line| line.starts_with("url=$(curl") && line.contains("@examples/demo.yaml"))
}

/// The README's first line that `wanted` picks.
fn readme_line(wanted: impl Fn(&str) -> bool) -> String {
    let readme =
        fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    readme
        .lines()
        .find(|line| wanted(line))
        .expect("the README's quick start posts examples/demo.yaml, then runs what it answers")
        .to_string()
}

#[test]
fn the_readmes_post_shows_why_a_spec_is_refused() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let bad = dist.spec(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  nothere:\n    version: latest\n",
    );
    let command = readme_post_command()
        .replace("@examples/demo.yaml", &format!("@{}", bad.display()))
        .replace("http://127.0.0.1:8800", &serving.url);
    let output = Command::new("bash")
        .args(["-c", &command])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        all.contains("unknown add-on `nothere`"),
        "the user sees the server's reason: {all}"
    );
    // The README's next line, the install, then fails rather than running an empty script
    // (`cat` stands in for `sudo bash`).
    let install =
        readme_line(|line| line.starts_with("curl -fsSL \"${url")).replace("sudo bash", "cat");
    let pipefail = readme_line(|line| line.starts_with("set -o pipefail"));
    let output = Command::new("bash")
        .args(["-c", &format!("{pipefail}\n{command}\n{install}")])
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "the install goes on after a refusal: {}",
        text(&output.stderr)
    );
    assert!(
        text(&output.stderr).contains("the spec was refused"),
        "{}",
        text(&output.stderr)
    );

    // The same command with a good spec prints nothing and leaves the URL in $url.
    let good = readme_post_command()
        .replace(
            "@examples/demo.yaml",
            &format!("@{}", dist.spec(SPEC).display()),
        )
        .replace("http://127.0.0.1:8800", &serving.url);
    let output = Command::new("bash")
        .args(["-c", &format!("{good}; printf '%s' \"$url\"")])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with(&format!("{}/", serving.url)),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn errors_are_json_for_a_client_that_asks_for_json() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let bad =
        dist.spec("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello: [\n");
    let ask = |accept: &str, arguments: &[&str]| {
        let mut all = vec!["-sS", "-H", accept, "-w", "\n%{http_code} %{content_type}"];
        all.extend_from_slice(arguments);
        let shown = text(&curl(&all).stdout);
        let (body, status) = shown.rsplit_once('\n').unwrap();
        (status.to_string(), body.to_string())
    };
    let post = format!("@{}", bad.display());
    let installer = format!("{}/installer", serving.url);
    let post_arguments = ["--data-binary", post.as_str(), installer.as_str()];

    let (status, body) = ask("Accept: application/json", &post_arguments);
    assert_eq!(status, "400 application/json", "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["status"], 400);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("installer.yaml:"),
        "the parse error, with its place: {body}"
    );

    let missing = format!("{}/{}", serving.url, "0".repeat(32));
    let (status, body) = ask("Accept: application/json", &[missing.as_str()]);
    assert_eq!(status, "404 application/json", "{body}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("no installer"),
        "{body}"
    );

    // A client that does not ask for JSON reads text, as before.
    let (status, body) = ask("Accept: */*", &post_arguments);
    assert!(status.starts_with("400 text/plain"), "{status} {body}");
    assert!(body.starts_with("installer.yaml:"), "{body}");
}

#[test]
fn a_downgrade_the_script_refuses_goes_through_with_allow_downgrade() {
    let dist = Dist::new();
    dist.addons.addon("hello", "2.0.0", "");
    dist.rebuild();
    let serving = serve(&dist.dist, &[]);
    let spec =
        |version: &str| dist.spec(&SPEC.replace("version: latest", &format!("version: {version}")));
    let (_, newer) = post(&serving.url, &spec("2.0.0"));
    let (_, older) = post(&serving.url, &spec("1.0.0"));
    let root = tempfile::tempdir().unwrap();
    let script = |url: &str| curl(&["-fsSL", url]).stdout;
    let installed = run_script(&script(&newer), root.path(), &[]);
    assert!(installed.status.success(), "{}", text(&installed.stderr));

    let refused = run_script(&script(&older), root.path(), &[]);
    assert!(!refused.status.success());
    let advice = text(&refused.stderr);
    assert!(
        advice.contains("hint:") && advice.contains("bash -s allow-downgrade"),
        "the refusal says how to go on through the script: {advice}"
    );
    let berth_status = || {
        let output = Command::new(berth_binary())
            .arg("status")
            .env("BERTH_ROOT", root.path())
            .output()
            .unwrap();
        text(&output.stdout)
    };
    let newer_id = newer.rsplit('/').next().unwrap();
    assert!(
        berth_status().contains(&format!("installer {newer_id} ")),
        "a refused installer does not become the node's: {}",
        berth_status()
    );

    let allowed = run_script(&script(&older), root.path(), &["allow-downgrade"]);
    assert!(allowed.status.success(), "{}", text(&allowed.stderr));
    let status = Command::new(berth_binary())
        .args(["status", "--json"])
        .env("BERTH_ROOT", root.path())
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["addons"][0]["currentVersion"], "1.0.0", "{status}");
    assert_eq!(status["addons"][0]["lastVersion"], "2.0.0", "{status}");

    // Run again, nothing is to do; with the script's force-reapply word, the hooks run again.
    let again = run_script(&script(&older), root.path(), &[]);
    assert!(
        text(&again.stderr).contains("AlreadyApplied"),
        "{}",
        text(&again.stderr)
    );
    let forced = run_script(&script(&older), root.path(), &["force-reapply"]);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(
        text(&forced.stderr).contains("Reapply")
            && text(&forced.stderr).contains("--force-reapply"),
        "{}",
        text(&forced.stderr)
    );

    // A joining node takes the cluster's versions: the word is refused there.
    let join = curl(&["-fsSL", &format!("{older}/join.sh")]).stdout;
    let joined = run_script(
        &join,
        tempfile::tempdir().unwrap().path(),
        &["allow-downgrade"],
    );
    assert!(!joined.status.success());
    assert!(
        text(&joined.stderr).contains("allow-downgrade is for install.sh and upgrade.sh"),
        "{}",
        text(&joined.stderr)
    );
}

/// kURL's flags on the served scripts, as kURL's `get_patch_yaml` and `bashmerge` read them:
/// bare words and pairs merge into the spec, and hooks see kURL's variables with kURL's
/// derived values; a word kURL does not take is refused with those it does, before anything
/// is written.
#[test]
fn kurls_script_flags_reach_hooks_under_kurls_names() {
    let dist = Dist::new();
    dist.addons.write(
        "addons/hello/1.0.0/install.sh",
        "function hello() {\n    env > \"$DIR/hello-environment\"\n}\n",
    );
    dist.rebuild();
    let serving = serve(&dist.dist, &[]);
    let (_, url) = post(&serving.url, &dist.spec(SPEC));
    let script = curl(&["-fsSL", &url]).stdout;

    let root = tempfile::tempdir().unwrap();
    let refused = run_script(&script, root.path(), &["preserve-everything"]);
    let said = text(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("unknown argument `preserve-everything`")
            && said.contains("preserve-selinux-config"),
        "names the word and lists kURL's: {said}"
    );
    let refused = run_script(&script, root.path(), &["public-address"]);
    assert!(
        text(&refused.stderr).contains("flag public-address does not have a value"),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        !root.path().join("var/lib/berth/addons").exists(),
        "a refused word wrote no add-on"
    );

    let output = run_script(
        &script,
        root.path(),
        &[
            "ha",
            "ipv6",
            "yes",
            "preserve-selinux-config",
            "skip-system-package-install",
            "kubernetes-master-address=10.0.0.9:6443",
            "labels=zone=edge",
            "primary-host=10.0.0.1",
            "primary-host=10.0.0.2",
            "host-preflight-ignore",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let environment =
        fs_err::read_to_string(root.path().join("var/lib/berth/hello-environment")).unwrap();
    for line in [
        "HA_CLUSTER=1",
        "IPV6_ONLY=1",
        "ASSUME_YES=1",
        "PRESERVE_SELINUX_CONFIG=1",
        "DISABLE_SELINUX=",
        "SKIP_SYSTEM_PACKAGE_INSTALL=1",
        "KUBERNETES_MASTER_ADDR=10.0.0.9:6443",
        "NODE_LABELS=zone=edge",
        "PRIMARY_HOST=10.0.0.1,10.0.0.2",
        "HOST_PREFLIGHT_IGNORE=1",
    ] {
        assert!(
            environment.lines().any(|seen| seen == line),
            "{line} in:\n{environment}"
        );
    }
}

/// A `--from` that names no dist is refused at start, naming it; `--listen :PORT` binds every
/// address, and since it names no host the nodes could reach, it needs `--public-url`, which
/// the served scripts then carry.
#[test]
fn serve_refuses_a_store_with_no_dist_and_takes_listen_colon_port() {
    let refuse = |arguments: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_berth-build"))
            .arg("serve")
            .args(arguments)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
        text(&output.stderr)
    };
    let missing = tempfile::tempdir().unwrap();
    let typo = missing.path().join("dsit");
    // `--from`, the flag's older name, still reads.
    for flag in ["--dist", "--from"] {
        let said = refuse(&[flag, typo.to_str().unwrap(), "--allow-new-glibc"]);
        assert!(
            said.contains(&format!("{} holds no dist to serve", typo.display()))
                && said.contains("give --dist the folder"),
            "{flag}: {said}"
        );
    }

    let dist = Dist::new();
    let port = free_port();
    let colon_port = format!(":{port}");
    let from = dist.dist.to_str().unwrap();
    let said = refuse(&["--dist", from, "--listen", &colon_port, "--allow-new-glibc"]);
    assert!(
        said.contains(&format!("as --public-url http://HOST:{port}")),
        "{said}"
    );

    let public = format!("http://127.0.0.1:{port}");
    let serving = serve_with(
        &dist.dist,
        &["--listen", &colon_port, "--public-url", &public],
        port,
    );
    let (code, body) = post(&serving.url, &dist.spec(SPEC));
    assert!(code.starts_with("20"), "{code} {body}");
    assert!(body.starts_with(&format!("{public}/")), "{body}");
}

/// A spec posted with curl's `-d @FILE` loses its line breaks: refused, saying so and what to
/// post it with; the same file with `--data-binary` is taken.
#[test]
fn a_spec_posted_without_its_line_breaks_is_told_to_use_data_binary() {
    let dist = Dist::new();
    let serving = serve(&dist.dist, &[]);
    let spec = dist.spec(SPEC);
    let output = curl(&[
        "-sS",
        "-w",
        "\n%{http_code}",
        "-d",
        &format!("@{}", spec.display()),
        &format!("{}/installer", serving.url),
    ]);
    let all = text(&output.stdout);
    let (body, status) = all.rsplit_once('\n').unwrap();
    assert_eq!(status, "400", "{body}");
    assert!(
        body.contains("curl's -d strips a file's line breaks; post it with --data-binary @FILE"),
        "{body}"
    );
    let (status, body) = post(&serving.url, &spec);
    assert!(status.starts_with("20"), "{status} {body}");
}
