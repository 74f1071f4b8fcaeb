//! `berth-build` against real parts: a docker-registry on loopback, skopeo-pushed images,
//! containerd + runc, buildah. Each test owns its servers, cache and output folder.

use crate::support;

use std::path::Path;
use std::process::Command;

use berth_formats::package_index::PackageIndex;
use support::images::{self, Layer, PlatformImage, busybox_layer, push_image, unique_layer};
use support::{
    AddonRepository, BerthBuild, Containerd, Registry, addon_with_image, files_below, run,
};

fn read_index(package: &Path) -> PackageIndex {
    let (_, bytes) =
        berth_formats::archive::read_entry(fs_err::File::open(package).unwrap(), |path| {
            path.ends_with("/package.json")
        })
        .unwrap()
        .unwrap();
    PackageIndex::from_bytes(&bytes).unwrap()
}

fn hello_layer(text: &str) -> Layer {
    images::layer(&[images::Entry::File("hello.txt", text.as_bytes(), 0o644)])
}

#[test]
fn same_addon_gives_same_bytes_twice_and_with_another_cache() {
    let registry = Registry::start();
    push_image(
        &registry,
        "team/app",
        "1.0",
        vec![busybox_layer(), hello_layer("hello v1\n")],
    );
    let repository = AddonRepository::new();
    repository.write("addons/app/1.0.0/files/notes.txt", "release notes\n");
    let pin = berth_formats::Sha256Digest::of(b"release notes\n");
    let addon = repository.addon(
        "app",
        "1.0.0",
        &format!(
            "image app {}/team/app:1.0\nasset notes files/notes.txt {pin}\n",
            registry.address
        ),
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    let first = builder.package(&addon, &out.path().join("a"));
    let second = builder.package(&addon, &out.path().join("b"));
    let other_cache = BerthBuild::new().package(&addon, &out.path().join("c"));
    assert_eq!(first, second);
    assert_eq!(first, other_cache);
    let package = out.path().join("a/app-1.0.0.tar.gz");
    let bytes_a = fs_err::read(&package).unwrap();
    assert_eq!(
        bytes_a,
        fs_err::read(out.path().join("c/app-1.0.0.tar.gz")).unwrap()
    );
    assert_eq!(berth_formats::Sha256Digest::of(&bytes_a).hex(), first);
    use std::os::unix::fs::PermissionsExt;
    for written in ["a/app-1.0.0.tar.gz", "a/app-1.0.0.tar.gz.sha256"] {
        let mode = fs_err::metadata(out.path().join(written))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o644,
            "{written} is published, so readable by all"
        );
    }
    let checksum = fs_err::read_to_string(out.path().join("a/app-1.0.0.tar.gz.sha256")).unwrap();
    assert_eq!(checksum, format!("{first}  app-1.0.0.tar.gz\n"));
    let index = read_index(&package);
    assert_eq!(index.images.len(), 1);
    assert_eq!(
        index.images[0].reference,
        format!("{}/team/app:1.0", registry.address)
    );
    assert!(
        index
            .files
            .iter()
            .any(|file| file.path == "assets/notes" && file.sha256 == pin)
    );
}

#[test]
fn a_rebuild_of_unchanged_images_needs_no_network() {
    let registry = Registry::start();
    let digest = push_image(
        &registry,
        "team/app",
        "1.0",
        vec![busybox_layer(), hello_layer("offline\n")],
    );
    let repository = AddonRepository::new();
    let addon = repository.addon(
        "app",
        "1.0.0",
        &format!("image app {}/team/app@{digest}\n", registry.address),
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    let first = builder.package(&addon, &out.path().join("a"));
    drop(registry);
    let second = builder.package(&addon, &out.path().join("b"));
    assert_eq!(first, second);
}

#[test]
fn a_layer_shared_by_two_images_is_stored_once() {
    let registry = Registry::start();
    push_image(
        &registry,
        "team/one",
        "1",
        vec![busybox_layer(), hello_layer("one\n")],
    );
    push_image(
        &registry,
        "team/two",
        "1",
        vec![busybox_layer(), hello_layer("two\n")],
    );
    let repository = AddonRepository::new();
    let addon = repository.addon(
        "pair",
        "1.0.0",
        &format!(
            "image one {0}/team/one:1\nimage two {0}/team/two:1\n",
            registry.address
        ),
    );
    let out = tempfile::tempdir().unwrap();
    BerthBuild::new().package(&addon, out.path());
    let package = out.path().join("pair-1.0.0.tar.gz");
    let listing = run(Command::new("tar").arg("tzf").arg(&package));
    let blobs: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|line| line.contains("/images/blobs/sha256/") && !line.ends_with('/'))
        .map(str::to_string)
        .collect();
    // busybox layer once + two hello layers + two configs + two manifests.
    assert_eq!(blobs.len(), 7, "{blobs:#?}");
    let busybox = format!(
        "/images/blobs/sha256/{}",
        berth_formats::Sha256Digest::of(&busybox_layer().gz).hex()
    );
    assert_eq!(
        blobs.iter().filter(|blob| blob.ends_with(&busybox)).count(),
        1
    );
}

#[test]
fn a_multi_arch_index_resolves_to_the_requested_arch() {
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let digests = images::write_layout(
        layout.path(),
        "2.0",
        &[
            PlatformImage {
                arch: "amd64",
                layers: vec![hello_layer("amd64\n")],
            },
            PlatformImage {
                arch: "arm64",
                layers: vec![hello_layer("arm64\n")],
            },
        ],
    );
    images::push(layout.path(), "2.0", &registry, "team/multi");
    let repository = AddonRepository::new();
    let addon = repository.addon(
        "multi",
        "2.0.0",
        &format!("image multi {}/team/multi:2.0\n", registry.address),
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    for (arch, digest) in [("amd64", digests[0]), ("arm64", digests[1])] {
        let dir = out.path().join(arch);
        let (ok, _, stderr) = builder.run(&[
            "package",
            addon.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--arch",
            arch,
        ]);
        assert!(ok, "{stderr}");
        assert_eq!(
            read_index(&dir.join("multi-2.0.0.tar.gz")).images[0].manifest_digest,
            digest
        );
    }
    let dir = out.path().join("s390x");
    let (ok, _, stderr) = builder.run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--arch",
        "s390x",
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("has no linux/s390x variant; it offers linux/amd64, linux/arm64"),
        "{stderr}"
    );
    assert!(files_below(&dir).is_empty());
}

#[test]
fn a_registry_behind_basic_auth_is_reached_with_docker_config_credentials() {
    let registry = Registry::start_with_basic_auth("vendor", "s3cret");
    let (_repository, addon) = addon_with_image(
        &registry,
        ("private", "1.0.0", "app"),
        ("private/app", "1"),
        vec![hello_layer("private\n")],
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    let (ok, _, stderr) = builder.run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "registry {} refused access to private/app",
            registry.address
        )),
        "{stderr}"
    );
    assert!(stderr.contains("docker login"), "{stderr}");
    assert!(files_below(out.path()).is_empty());

    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("vendor:s3cret");
    fs_err::write(
        builder.docker_config.path().join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            registry.address
        ),
    )
    .unwrap();
    builder.package(&addon, out.path());
    assert_eq!(
        read_index(&out.path().join("private-1.0.0.tar.gz"))
            .images
            .len(),
        1
    );
}

#[test]
fn a_packaged_image_imports_into_containerd_and_runs() {
    let registry = Registry::start();
    let (_repository, addon) = addon_with_image(
        &registry,
        ("runme", "1.0.0", "runme"),
        ("team/runme", "1"),
        vec![busybox_layer(), hello_layer("ran from a berth package\n")],
    );
    let out = tempfile::tempdir().unwrap();
    BerthBuild::new().package(&addon, out.path());

    let unpacked = tempfile::tempdir().unwrap();
    berth_formats::archive::extract(
        fs_err::File::open(out.path().join("runme-1.0.0.tar.gz")).unwrap(),
        unpacked.path(),
    )
    .unwrap();
    let archive = unpacked.path().join("images.tar");
    images::tar_folder(&unpacked.path().join("addons/runme/1.0.0/images"), &archive);

    let containerd = Containerd::start();
    let import = containerd.ctr(&["images", "import", archive.to_str().unwrap()]);
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let reference = format!("{}/team/runme:1", registry.address);
    let listed = containerd.ctr(&["images", "ls", "-q"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|line| line == reference)
    );
    let ran = containerd.ctr(&[
        "run",
        "--rm",
        &reference,
        "berth-test",
        "/bin/busybox",
        "cat",
        "/hello.txt",
    ]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "ran from a berth package\n"
    );
}

#[test]
fn a_local_image_archive_and_a_dockerout_build_are_packaged() {
    // Base image for the Dockerfile, reached by buildah over plain HTTP on loopback.
    let registry = Registry::start();
    push_image(&registry, "base/busybox", "1", vec![busybox_layer()]);
    let scratch = tempfile::tempdir().unwrap();
    let registries_conf = scratch.path().join("registries.conf");
    fs_err::write(
        &registries_conf,
        format!(
            "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
            registry.address
        ),
    )
    .unwrap();
    let storage_conf = scratch.path().join("storage.conf");
    fs_err::write(
        &storage_conf,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n",
            scratch.path().display()
        ),
    )
    .unwrap();

    let repository = AddonRepository::new();
    images::write_oci_archive(
        &repository.root().join("tool.tar"),
        "local/tool:3",
        &[PlatformImage {
            arch: "amd64",
            layers: vec![hello_layer("tool\n")],
        }],
    );
    repository.write(
        "build/Dockerfile",
        format!(
            "FROM {}/base/busybox:1\nARG VERSION\nRUN [\"/bin/busybox\", \"sh\", \"-c\", \"echo built $VERSION > /version.txt\"]\nCMD [\"/bin/busybox\", \"cp\", \"/version.txt\", \"/out/\"]\n",
            registry.address
        ),
    );
    let addon = repository.addon(
        "tools",
        "3.0.0",
        "image tool tool.tar\ndockerout rhel-9 build/Dockerfile 3.0.0\n",
    );
    let mut builder = BerthBuild::new();
    builder.envs = vec![
        (
            "CONTAINERS_REGISTRIES_CONF".into(),
            registries_conf.display().to_string(),
        ),
        (
            "CONTAINERS_STORAGE_CONF".into(),
            storage_conf.display().to_string(),
        ),
        ("BUILDAH_ISOLATION".into(), "chroot".into()),
    ];
    support::require("buildah", "buildah");
    let out = tempfile::tempdir().unwrap();
    builder.package(&addon, out.path());
    let package = out.path().join("tools-3.0.0.tar.gz");
    let index = read_index(&package);
    assert_eq!(index.images[0].reference, "docker.io/local/tool:3");
    let (_, version) =
        berth_formats::archive::read_entry(fs_err::File::open(&package).unwrap(), |path| {
            path == "addons/tools/3.0.0/rhel-9/version.txt"
        })
        .unwrap()
        .expect("dockerout output is packaged");
    assert_eq!(String::from_utf8_lossy(&version), "built 3.0.0\n");
}

/// Packages `manifest` and expects failure with `expected` in the error and an empty `--out`.
fn expect_failure(builder: &BerthBuild, manifest: &str, expected: &[&str]) -> String {
    let repository = AddonRepository::new();
    repository.write("files/asset.bin", "asset content\n");
    let addon = repository.addon("broken", "1.0.0", manifest);
    let out = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = builder.run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(!ok, "package succeeded on {manifest:?}");
    for text in expected {
        assert!(stderr.contains(text), "expected {text:?} in:\n{stderr}");
    }
    assert!(
        files_below(out.path()).is_empty(),
        "partial output: {:?}",
        files_below(out.path())
    );
    stderr
}

#[test]
fn bad_manifest_lines_name_the_file_and_line() {
    let builder = BerthBuild::new();
    expect_failure(
        &builder,
        "# header\nimgae app busybox:1\n",
        &[
            "addons/broken/1.0.0/Manifest:2: unknown directive `imgae`",
            "did you mean `image`",
        ],
    );
    expect_failure(
        &builder,
        "image app\n",
        &["Manifest:1: `image` is missing its image reference"],
    );
    expect_failure(
        &builder,
        "apt\n",
        &["Manifest:1: `apt` is missing its package name"],
    );
    expect_failure(
        &builder,
        "image app Not/A:Valid:Ref\n",
        &["Manifest:1: bad image reference `Not/A:Valid:Ref`"],
    );
}

#[test]
fn unreachable_registry_and_missing_tag_name_the_image() {
    let builder = BerthBuild::new();
    let closed = format!("127.0.0.1:{}", support::free_port());
    expect_failure(
        &builder,
        &format!("image app {closed}/team/app:1\n"),
        &[
            &format!("image `app` ({closed}/team/app:1)"),
            &format!("cannot reach registry {closed}"),
        ],
    );
    let registry = Registry::start();
    push_image(&registry, "team/app", "1", vec![hello_layer("x\n")]);
    expect_failure(
        &builder,
        &format!("image app {}/team/app:2\n", registry.address),
        &[&format!("{}/team/app:2 was not found", registry.address)],
    );
}

#[test]
fn a_blob_corrupted_in_the_registry_is_refused() {
    let registry = Registry::start();
    let layer = unique_layer("data.bin", "corrupt-me", 64 * 1024);
    push_image(&registry, "team/app", "1", vec![layer.clone()]);
    let digest = berth_formats::Sha256Digest::of(&layer.gz);
    let data = registry.blob_data(&digest.hex());
    let mut bytes = fs_err::read(&data).unwrap();
    bytes[1000] ^= 0xff;
    fs_err::write(&data, bytes).unwrap();
    let builder = BerthBuild::new();
    expect_failure(
        &builder,
        &format!("image app {}/team/app:1\n", registry.address),
        &[
            "image `app`",
            &format!("but {digest} was expected: the content does not match its digest"),
        ],
    );
    // Nothing unverified entered the cache either.
    assert!(
        !builder
            .cache
            .path()
            .join("blobs/sha256")
            .join(digest.hex())
            .exists()
    );
}

#[test]
fn an_asset_that_does_not_match_its_pin_is_refused() {
    let builder = BerthBuild::new();
    let wrong = berth_formats::Sha256Digest::of(b"something else");
    let right = berth_formats::Sha256Digest::of(b"asset content\n");
    expect_failure(
        &builder,
        &format!("asset blob ../../../files/asset.bin {wrong}\n"),
        &[
            "asset `blob`",
            &format!("does not match its pin: expected {wrong}, found {right}"),
        ],
    );
    expect_failure(
        &builder,
        "asset blob ../../../../../etc/passwd\n",
        &["Manifest:1", "leaves the add-ons repository"],
    );
}

#[test]
fn build_packages_every_addon_and_skips_unchanged_ones() {
    let repository = AddonRepository::new();
    let first = repository.addon("alpha", "1.0.0", "# nothing to fetch\n");
    repository.addon("beta", "2.0.0", "# nothing to fetch either\n");
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    let addons = repository.root().join("addons");
    let build_at = |builder: &BerthBuild, level: &str| {
        let (ok, stdout, stderr) = builder.run(&[
            "build",
            addons.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
            "--compression-level",
            level,
        ]);
        assert!(ok, "{stderr}");
        stdout
    };
    let build = |builder: &BerthBuild| build_at(builder, "6");
    let table = build(&builder);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("alpha") && l.contains(" built ")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("beta") && l.contains(" built ")),
        "{table}"
    );
    let table = build(&builder);
    assert_eq!(table.matches(" unchanged ").count(), 2, "{table}");
    // Another compression level makes other bytes: the packages there are not it.
    let package = out.path().join("beta-2.0.0.tar.gz");
    let at_six = fs_err::read(&package).unwrap();
    let table = build_at(&builder, "1");
    assert_eq!(table.matches(" built ").count(), 2, "{table}");
    assert_ne!(fs_err::read(&package).unwrap(), at_six);
    assert_eq!(build_at(&builder, "1").matches(" unchanged ").count(), 2);
    let table = build(&builder);
    assert_eq!(table.matches(" built ").count(), 2, "{table}");
    assert_eq!(fs_err::read(&package).unwrap(), at_six);
    fs_err::write(
        first.join("install.sh"),
        "function alpha() { echo changed; }\n",
    )
    .unwrap();
    let table = build(&builder);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("alpha") && l.contains(" built ")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("beta") && l.contains(" unchanged ")),
        "{table}"
    );
}

#[test]
fn check_reports_every_problem_with_file_and_line() {
    let repository = AddonRepository::new();
    repository.addon("good", "1.0.0", "apt fio\n");
    let bad = repository.addon("bad", "1.0.0", "apt fio\nimgae x y\nasset a\n");
    fs_err::write(bad.join("install.sh"), "function bad() {\n").unwrap();
    fs_err::write(
        bad.join("health.yaml"),
        "components:\n  - name: answers\n    http: {url: 'http://127.0.0.1/'}\n    tcp: {address: '127.0.0.1:1'}\n",
    )
    .unwrap();
    let builder = BerthBuild::new();
    let (ok, stdout, stderr) =
        builder.run(&["check", repository.root().join("addons").to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stdout.contains("addons/bad/1.0.0/Manifest:2: unknown directive `imgae`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("addons/bad/1.0.0/Manifest:3: `asset` is missing its URL or path"),
        "{stdout}"
    );
    assert!(
        stdout.contains("addons/bad/1.0.0/install.sh: line 2: syntax error"),
        "{stdout}"
    );
    assert!(
        stdout.contains("addons/bad/1.0.0/health.yaml: component `answers`: names 2 probes"),
        "{stdout}"
    );
    assert!(
        stderr.contains("checked 2 Manifests and 2 install.sh scripts: 4 problems"),
        "{stderr}"
    );
    let (ok, _, _) = builder.run(&[
        "check",
        repository.root().join("addons/good").to_str().unwrap(),
    ]);
    assert!(ok);
}

#[test]
fn inspect_shows_images_and_files_as_a_table_and_json() {
    let registry = Registry::start();
    let (_repository, addon) = addon_with_image(
        &registry,
        ("shown", "1.0.0", "app"),
        ("team/app", "1"),
        vec![hello_layer("inspect\n")],
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    builder.package(&addon, out.path());
    let package = out.path().join("shown-1.0.0.tar.gz");
    let (ok, table, _) = builder.run(&["inspect", package.to_str().unwrap()]);
    assert!(ok);
    assert!(
        table.contains(&format!("{}/team/app:1", registry.address)),
        "{table}"
    );
    assert!(table.contains("install.sh"), "{table}");
    let (ok, json, _) = builder.run(&["inspect", "--json", package.to_str().unwrap()]);
    assert!(ok);
    berth_testkit::conforms(
        "package-index.v1.json",
        &serde_json::from_str(&json).unwrap(),
    );
    assert_eq!(
        PackageIndex::from_bytes(json.as_bytes()).unwrap(),
        read_index(&package)
    );
}

#[test]
fn an_addon_file_in_the_way_of_the_image_folder_is_refused() {
    let repository = AddonRepository::new();
    images::write_oci_archive(
        &repository.root().join("tool.tar"),
        "local/tool:1",
        &[PlatformImage {
            arch: "amd64",
            layers: vec![hello_layer("tool\n")],
        }],
    );
    let addon = repository.addon("clash", "1.0.0", "image tool tool.tar\n");
    fs_err::write(addon.join("images"), "not a folder\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = BerthBuild::new().run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        !ok,
        "a package with a file and a folder both named images was written"
    );
    assert!(
        stderr.contains("addons/clash/1.0.0/images` is a file, but"),
        "{stderr}"
    );
    assert!(files_below(out.path()).is_empty());
}

#[test]
fn an_url_asset_resumes_after_a_dropped_connection() {
    let body: Vec<u8> = (0..256 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let pin = berth_formats::Sha256Digest::of(&body);
    let served = tempfile::tempdir().unwrap();
    fs_err::write(served.path().join("runc.amd64"), &body).unwrap();
    let server = support::FileServer::serve(served.path(), Some("/runc.amd64"));
    let repository = AddonRepository::new();
    let addon = repository.addon(
        "fetched",
        "1.0.0",
        &format!("asset runc {}/runc.amd64 {pin}\n", server.url),
    );
    let out = tempfile::tempdir().unwrap();
    BerthBuild::new().package(&addon, out.path());
    let (_, packaged) = berth_formats::archive::read_entry(
        fs_err::File::open(out.path().join("fetched-1.0.0.tar.gz")).unwrap(),
        |path| path == "addons/fetched/1.0.0/assets/runc",
    )
    .unwrap()
    .expect("the asset is packaged");
    assert_eq!(packaged, body);
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(
        requests,
        [
            "GET /runc.amd64".to_string(),
            format!("GET /runc.amd64 bytes={}-", body.len() / 2)
        ],
        "the second request resumes where the first stopped"
    );
}

#[test]
fn inspect_keeps_its_columns_aligned_and_says_when_there_are_no_images() {
    let repository = AddonRepository::new();
    let addon = repository.addon("plain", "1.0.0", "");
    // A file named by a digest, as image blobs and cached assets are: 64 hex digits and more.
    let long = format!("files/{}.json", "ab".repeat(32));
    fs_err::create_dir_all(addon.join("files")).unwrap();
    fs_err::write(addon.join(&long), "{}\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    builder.package(&addon, out.path());
    let (ok, shown, stderr) = builder.run(&[
        "inspect",
        out.path().join("plain-1.0.0.tar.gz").to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(shown.contains("\nIMAGES  none\n"), "{shown}");
    assert!(
        !shown.contains("REFERENCE"),
        "no header over nothing: {shown}"
    );
    let files: Vec<&str> = shown
        .lines()
        .skip_while(|line| !line.starts_with("FILE"))
        .take_while(|line| !line.is_empty())
        .collect();
    assert!(
        files.len() >= 3,
        "the header, install.sh and the long file at least: {shown}"
    );
    // Every line's SIZE column ends, and its SHA256 column starts, at the same place.
    let column = files[0].find("SHA256").unwrap();
    for line in &files[1..] {
        assert_eq!(
            line.get(column - 2..column),
            Some("  "),
            "the SHA256 column starts at {column}: {shown}"
        );
        assert!(
            line[column..].chars().all(|c| c.is_ascii_hexdigit()) && line.len() == column + 64,
            "a whole digest in the SHA256 column: {line}"
        );
    }
    assert!(files.iter().any(|line| line.starts_with(&long)), "{shown}");
}

/// A package's bill of materials, checked by CycloneDX's own validator (its Python library's
/// JSON schema check) and against the image's own package database as dpkg reads it.
#[test]
fn a_packages_bill_of_materials_validates_and_lists_exactly_the_images_dpkg_and_rpm_packages() {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-test/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh, which installs CycloneDX's validator",
        python.display()
    );
    // A real dpkg database (this machine's), in an image's layer.
    let status = fs_err::read("/var/lib/dpkg/status").expect("a Debian machine's dpkg database");
    let registry = Registry::start();
    push_image(
        &registry,
        "team/debianish",
        "1.0",
        vec![
            busybox_layer(),
            images::layer(&[images::Entry::File("var/lib/dpkg/status", &status, 0o644)]),
        ],
    );
    // A real rpm database (SQLite, rpm's own since 4.16), made by rpm from packages rpmbuild
    // made, in another image's layer.
    let rpms = tempfile::tempdir().unwrap();
    support::rpm::rpm(rpms.path(), "tool", "2.1-3", "x86_64", &[]);
    support::rpm::rpm(
        rpms.path(),
        "libtool-extra",
        "1:0.4-1",
        "noarch",
        &[("License", "BSD-3-Clause")],
    );
    let database = rpms.path().join("db");
    let rpm = |arguments: &[&str]| {
        let output = run(Command::new("rpm")
            .arg("--dbpath")
            .arg(&database)
            .args(arguments));
        String::from_utf8(output.stdout).unwrap()
    };
    rpm(&["--initdb"]);
    for entry in fs_err::read_dir(rpms.path().join("Packages")).unwrap() {
        let path = entry.unwrap().path();
        rpm(&[
            "-i",
            "--justdb",
            "--nodeps",
            "--nosignature",
            path.to_str().unwrap(),
        ]);
    }
    let sqlite = fs_err::read(database.join("rpmdb.sqlite")).expect("rpm keeps an rpmdb.sqlite");
    push_image(
        &registry,
        "team/rhelish",
        "9",
        vec![
            busybox_layer(),
            images::layer(&[
                images::Entry::File(
                    "usr/lib/os-release",
                    b"ID=\"rhel\"\nVERSION_ID=\"9.4\"\n",
                    0o644,
                ),
                images::Entry::File("var/lib/rpm/rpmdb.sqlite", &sqlite, 0o644),
            ]),
        ],
    );
    let repository = AddonRepository::new();
    repository.write("addons/app/1.0.0/files/notes.txt", "release notes\n");
    let addon = repository.addon(
        "app",
        "1.0.0",
        &format!(
            "image app {0}/team/debianish:1.0\nimage rhel {0}/team/rhelish:9\nasset notes files/notes.txt\n",
            registry.address
        ),
    );
    let out = tempfile::tempdir().unwrap();
    let builder = BerthBuild::new();
    builder.package(&addon, out.path());
    let package = out.path().join("app-1.0.0.tar.gz");
    let (ok, bom, stderr) = builder.run(&["inspect", "--sbom", package.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    // Made from the package alone: twice the same.
    let (_, again, _) = builder.run(&["inspect", "--sbom", package.to_str().unwrap()]);
    assert_eq!(bom, again);
    // The package carries it; one built with --no-sbom does not, and its BOM is then made by
    // reading the package: the same components.
    let carried = |package: &Path| {
        berth_formats::archive::read_entry(fs_err::File::open(package).unwrap(), |path| {
            path == "addons/app/1.0.0/sbom.cdx.json"
        })
        .unwrap()
    };
    assert!(carried(&package).is_some());
    let bare = out.path().join("bare");
    let (ok, _, stderr) = builder.run(&[
        "package",
        addon.to_str().unwrap(),
        "--out",
        bare.to_str().unwrap(),
        "--no-sbom",
    ]);
    assert!(ok, "{stderr}");
    let bare_package = bare.join("app-1.0.0.tar.gz");
    assert!(carried(&bare_package).is_none());
    let (ok, read, stderr) = builder.run(&["inspect", "--sbom", bare_package.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let components = |text: &str| {
        let bom: serde_json::Value = serde_json::from_str(text).unwrap();
        bom["components"].clone()
    };
    assert_eq!(components(&read), components(&bom));

    let file = out.path().join("bom.json");
    fs_err::write(&file, &bom).unwrap();
    let checked = Command::new(&python)
        .args([
            "-c",
            "import sys\nfrom cyclonedx.validation.json import JsonStrictValidator\nfrom cyclonedx.schema import SchemaVersion\nerror = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read())\nprint(error or 'valid')\nsys.exit(1 if error else 0)",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let bom: serde_json::Value = serde_json::from_str(&bom).unwrap();
    assert_eq!(
        (
            bom["metadata"]["component"]["name"].as_str(),
            bom["metadata"]["component"]["version"].as_str()
        ),
        (Some("app"), Some("1.0.0"))
    );
    let components = bom["components"].as_array().unwrap();
    let image = components
        .iter()
        .find(|component| {
            component["type"] == "container"
                && component["name"]
                    .as_str()
                    .unwrap()
                    .ends_with("debianish:1.0")
        })
        .unwrap();
    // The rpm image lists what rpm itself lists of its database, with licences and epochs.
    let rhel = components
        .iter()
        .find(|component| {
            component["type"] == "container"
                && component["name"].as_str().unwrap().ends_with("rhelish:9")
        })
        .unwrap();
    let listed_rpms: std::collections::BTreeSet<String> = rhel["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            assert!(
                package["purl"].as_str().unwrap().starts_with(&format!(
                    "pkg:rpm/rhel/{}@",
                    package["name"].as_str().unwrap()
                )),
                "{package}"
            );
            assert!(
                package["purl"]
                    .as_str()
                    .unwrap()
                    .contains("distro=rhel-9.4")
            );
            format!(
                "{} {} {}",
                package["name"].as_str().unwrap(),
                package["version"].as_str().unwrap(),
                package["licenses"][0]["license"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let read_rpms: std::collections::BTreeSet<String> = rpm(&[
        "-qa",
        "--qf",
        "%{NAME} %|EPOCH?{%{EPOCH}:}|%{VERSION}-%{RELEASE} %{LICENSE}\\n",
    ])
    .lines()
    .map(str::to_string)
    .collect();
    assert_eq!(read_rpms.len(), 2, "{read_rpms:?}");
    assert_eq!(listed_rpms, read_rpms);
    let listed: std::collections::BTreeSet<(String, String)> = image["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            (
                package["name"].as_str().unwrap().to_string(),
                package["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // dpkg's own reading of the same database.
    let admin = tempfile::tempdir().unwrap();
    fs_err::write(admin.path().join("status"), &status).unwrap();
    fs_err::create_dir_all(admin.path().join("info")).unwrap();
    fs_err::create_dir_all(admin.path().join("updates")).unwrap();
    let query = Command::new("dpkg-query")
        .arg(format!("--admindir={}", admin.path().display()))
        .args(["-W", "-f", "${db:Status-Abbrev}|${Package}|${Version}\n"])
        .output()
        .unwrap();
    assert!(
        query.status.success(),
        "{}",
        String::from_utf8_lossy(&query.stderr)
    );
    let installed: std::collections::BTreeSet<(String, String)> =
        String::from_utf8_lossy(&query.stdout)
            .lines()
            .filter(|line| line.starts_with("ii"))
            .filter_map(|line| {
                let mut parts = line.split('|').skip(1);
                Some((parts.next()?.to_string(), parts.next()?.to_string()))
            })
            .collect();
    assert!(installed.len() > 50, "{} packages", installed.len());
    assert_eq!(listed, installed);
    // The add-on's files and the asset, each with its sha256.
    let asset = components
        .iter()
        .find(|component| component["name"] == "notes")
        .unwrap();
    assert_eq!(
        asset["hashes"][0]["content"],
        berth_formats::Sha256Digest::of(b"release notes\n").hex()
    );
    assert!(
        components
            .iter()
            .any(|component| component["name"] == "Manifest" && component["type"] == "file")
    );
}

/// A registry holding `team/app:1.0` (busybox's layer and a `hello` layer) and add-on app 1.0.0
/// whose Manifest names it, then `more` lines.
fn app_with_image(more: &str) -> (Registry, AddonRepository, std::path::PathBuf) {
    let registry = Registry::start();
    push_image(
        &registry,
        "team/app",
        "1.0",
        vec![busybox_layer(), hello_layer("hello\n")],
    );
    let repository = AddonRepository::new();
    let addon = repository.addon(
        "app",
        "1.0.0",
        &format!("image app {}/team/app:1.0\n{more}", registry.address),
    );
    (registry, repository, addon)
}

/// A signed build writes each package's provenance; `verify-provenance` checks its signature,
/// builds the add-on again with its settings and finds the same bytes — and says so when the
/// add-on changed or another key signed.
#[test]
fn a_packages_signed_provenance_names_its_inputs_and_rebuilds_to_the_same_bytes() {
    let (_registry, repository, addon) = app_with_image("asset notes files/notes.txt\n");
    repository.write("addons/app/1.0.0/files/notes.txt", "release notes\n");
    let builder = BerthBuild::new();
    let keys = tempfile::tempdir().unwrap();
    for name in ["vendor", "other"] {
        let (ok, _, stderr) = builder.run(&["keygen", keys.path().join(name).to_str().unwrap()]);
        assert!(ok, "{stderr}");
    }
    let key = |file: &str| keys.path().join(file).to_str().unwrap().to_string();
    let out = tempfile::tempdir().unwrap();
    let dist = out.path().join("dist");
    let (ok, _, stderr) = builder.run(&[
        "build",
        repository.root().to_str().unwrap(),
        "--out",
        dist.to_str().unwrap(),
        "--signing-key",
        &key("vendor.key"),
    ]);
    assert!(ok, "{stderr}");
    for file in [
        "app-1.0.0.tar.gz.intoto.json",
        "app-1.0.0.tar.gz.cdx.json",
        "app-1.0.0.tar.gz.cdx.json.sig",
        "app-1.0.0.tar.gz.sha256.sig",
        "versions.json.sig",
    ] {
        assert!(dist.join(file).is_file(), "{file}");
    }
    let provenance = dist.join("app-1.0.0.tar.gz.intoto.json");
    let envelope: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&provenance).unwrap()).unwrap();
    assert_eq!(envelope["payloadType"], "application/vnd.in-toto+json");
    use base64::Engine as _;
    let statement: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let index = read_index(&dist.join("app-1.0.0.tar.gz"));
    let dependencies =
        statement["predicate"]["buildDefinition"]["resolvedDependencies"].to_string();
    assert!(
        dependencies.contains(&index.images[0].manifest_digest.hex()),
        "{dependencies}"
    );
    assert!(dependencies.contains("\"Manifest\""), "{dependencies}");

    let verify = |signer: &str, scratch: &str| {
        builder.run(&[
            "verify-provenance",
            provenance.to_str().unwrap(),
            addon.to_str().unwrap(),
            "--trust-key",
            &key(signer),
            "--out",
            out.path().join(scratch).to_str().unwrap(),
        ])
    };
    let (ok, said, stderr) = verify("vendor.pub", "again");
    assert!(ok, "{said}{stderr}");
    assert!(said.contains("byte for byte"), "{said}");
    let (ok, _, stderr) = verify("other.pub", "other");
    assert!(
        !ok && stderr.contains("not signed by a trusted key"),
        "{stderr}"
    );
    // The add-on changed since: built again, its bytes differ, and that is said.
    repository.write(
        "addons/app/1.0.0/install.sh",
        "function app() { echo changed; }\n",
    );
    let (ok, said, _) = verify("vendor.pub", "changed");
    assert!(!ok && said.contains("FAIL"), "{said}");
    // An unsigned build over the signed dist leaves no signature it made stale.
    let (ok, _, stderr) = builder.run(&[
        "build",
        repository.root().to_str().unwrap(),
        "--out",
        dist.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    for file in [
        "versions.json.sig",
        "app-1.0.0.tar.gz.sha256.sig",
        "app-1.0.0.tar.gz.cdx.json.sig",
        "app-1.0.0.tar.gz.intoto.json",
    ] {
        assert!(!dist.join(file).exists(), "{file} is stale: {stderr}");
    }
    assert!(stderr.contains("berth-build sign"), "{stderr}");
}

/// `--compression zstd`: the package is `<name>-<version>.tar.zst` in zstd, the same index
/// (so the same `package.json` digest) as the gzip build, byte-reproducible, named so in
/// `versions.json`, read by `inspect`, and its provenance rebuilds it byte for byte. A level
/// the format does not take is refused, naming the range.
#[test]
fn a_zstd_build_is_reproducible_and_holds_what_the_gzip_build_holds() {
    let (_registry, repository, addon) = app_with_image("");
    let builder = BerthBuild::new();
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("vendor");
    let (ok, _, stderr) = builder.run(&["keygen", key.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let out = tempfile::tempdir().unwrap();
    let build = |folder: &str, extra: &[&str]| {
        let dist = out.path().join(folder);
        let mut arguments = vec![
            "build",
            repository.root().to_str().unwrap(),
            "--out",
            dist.to_str().unwrap(),
        ];
        arguments.extend_from_slice(extra);
        let (ok, _, stderr) = builder.run(&arguments);
        assert!(ok, "{stderr}");
        dist
    };
    let signing = ["--signing-key", &format!("{}.key", key.display())].map(String::from);
    let signing: Vec<&str> = signing.iter().map(String::as_str).collect();
    let zstd = build("zstd", &[&["--compression", "zstd"][..], &signing].concat());
    let again = build("again", &["--compression", "zstd"]);
    let gzip = build("gzip", &[]);
    let package = zstd.join("app-1.0.0.tar.zst");
    let bytes = fs_err::read(&package).unwrap();
    assert_eq!(
        berth_formats::compression::Compression::sniff(&bytes),
        Some(berth_formats::compression::Compression::Zstd)
    );
    assert_eq!(
        bytes,
        fs_err::read(again.join("app-1.0.0.tar.zst")).unwrap()
    );
    assert!(!zstd.join("app-1.0.0.tar.gz").exists());
    let checksum = fs_err::read_to_string(zstd.join("app-1.0.0.tar.zst.sha256")).unwrap();
    assert!(checksum.ends_with("  app-1.0.0.tar.zst\n"), "{checksum}");
    let index_bytes = |path: &Path| {
        berth_formats::package_index::read_from_archive(fs_err::File::open(path).unwrap(), None)
            .unwrap()
            .bytes
    };
    assert_eq!(
        index_bytes(&package),
        index_bytes(&gzip.join("app-1.0.0.tar.gz"))
    );
    let versions = fs_err::read_to_string(zstd.join("versions.json")).unwrap();
    assert!(versions.contains("\"compression\": \"zstd\""), "{versions}");
    let gzip_versions = fs_err::read_to_string(gzip.join("versions.json")).unwrap();
    assert!(!gzip_versions.contains("compression"), "{gzip_versions}");
    let (ok, shown, stderr) = builder.run(&["inspect", package.to_str().unwrap()]);
    assert!(ok && shown.contains("team/app:1.0"), "{shown}{stderr}");
    let (ok, said, stderr) = builder.run(&[
        "verify-provenance",
        zstd.join("app-1.0.0.tar.zst.intoto.json").to_str().unwrap(),
        addon.to_str().unwrap(),
        "--trust-key",
        &format!("{}.pub", key.display()),
        "--out",
        out.path().join("rebuilt").to_str().unwrap(),
    ]);
    assert!(ok && said.contains("byte for byte"), "{said}{stderr}");
    let (ok, _, stderr) = builder.run(&[
        "build",
        repository.root().to_str().unwrap(),
        "--out",
        out.path().join("refused").to_str().unwrap(),
        "--compression",
        "zstd",
        "--compression-level",
        "22",
    ]);
    assert!(
        !ok && stderr.contains("zstd takes levels 1 to 19"),
        "{stderr}"
    );
}

/// `keygen` refuses to write over a key, and into a folder that is not there (a typo), making
/// nothing; the same prefix in a folder that exists is written.
#[test]
fn keygen_refuses_an_existing_key_and_a_missing_folder() {
    let builder = BerthBuild::new();
    let keys = tempfile::tempdir().unwrap();
    let typo = keys.path().join("kyes/vendor");
    let (ok, _, stderr) = builder.run(&["keygen", typo.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "{} is not a folder",
            keys.path().join("kyes").display()
        )),
        "{stderr}"
    );
    assert!(!keys.path().join("kyes").exists(), "keygen made the folder");
    let key = keys.path().join("vendor");
    let (ok, _, stderr) = builder.run(&["keygen", key.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = builder.run(&["keygen", key.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("exists; give another PREFIX"), "{stderr}");
}
