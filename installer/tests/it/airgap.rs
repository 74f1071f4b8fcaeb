//! Airgap: a bundle made by berth-build, extracted and installed with `bash install.sh airgap`
//! in a network namespace with nothing in it, so any use of the network would fail.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use berth_build::deliver::bundle;
use berth_build::publish::release::Release;
use berth_build::publish::store::{LocalStore, Store};
use berth_formats::compression::Compression;
use berth_formats::spec::InstallerSpec;
use support::{Containerd, Node, TestDist, failed, require, run, run_greeting, succeeded, text};

/// Bundles `spec` from the dist, with this build's `berth`, into `bundle.tar.gz` in a folder.
fn bundle_archive(dist: &TestDist, spec: &Path) -> (tempfile::TempDir, PathBuf) {
    bundle_archive_in(dist, spec, Compression::Gzip)
}

/// [`bundle_archive`], the bundle compressed with `compression`.
fn bundle_archive_in(
    dist: &TestDist,
    spec: &Path,
    compression: Compression,
) -> (tempfile::TempDir, PathBuf) {
    let release = Arc::new(Release::new(
        Store::Local(LocalStore::new(dist.dist.path())),
        String::new(),
        Some(("amd64".into(), PathBuf::from(env!("CARGO_BIN_EXE_berth")))),
    ));
    let spec_text = fs_err::read_to_string(spec).unwrap();
    let parsed = InstallerSpec::parse(spec, &spec_text).unwrap();
    let folder = tempfile::tempdir().unwrap();
    let archive = folder
        .path()
        .join(format!("bundle{}", compression.tar_suffix()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut plan = bundle::prepare(&release, &parsed, None, &spec_text, "amd64", "", "")
            .await
            .unwrap();
        plan.compression = compression;
        let file = fs_err::tokio::File::create(&archive).await.unwrap();
        bundle::write(release, &plan, file).await.unwrap();
    });
    (folder, archive)
}

/// Bundles `spec` from the dist, with this build's `berth`, and extracts it into a folder.
fn extracted_bundle(dist: &TestDist, spec: &Path) -> tempfile::TempDir {
    let (folder, archive) = bundle_archive(dist, spec);
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .current_dir(folder.path()));
    fs_err::remove_file(&archive).unwrap();
    folder
}

/// `bash install.sh airgap WORDS…` in the bundle, in a new network namespace (only a down
/// loopback).
fn install_offline(bundle: &Path, node: &Node, words: &[&str]) -> Output {
    require("unshare", "util-linux");
    Command::new("unshare")
        .args(["-n", "bash", "install.sh", "airgap"])
        .args(words)
        .current_dir(bundle)
        .env("BERTH_ROOT", node.root.path())
        .envs(node.envs.iter().map(|(key, value)| (key, value)))
        .output()
        .unwrap()
}

#[test]
fn a_bundle_installs_with_no_network_at_all() {
    let mut dist = TestDist::new();
    dist.addon(
        "hello",
        "1.0.0",
        "function hello() {\n    echo \"hello from the bundle, AIRGAP=$AIRGAP\"\n}\n",
    );
    let spec = dist.spec("spec.yaml", &[("hello", "version: latest")]);
    let bundle = extracted_bundle(&dist, &spec);

    let node = Node::new();
    let output = install_offline(bundle.path(), &node, &[]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    assert!(all.contains("hello from the bundle, AIRGAP=1"), "{all}");
    let status = node.status();
    assert_eq!(
        status["hello"]["progressing"]["reason"], "Succeeded",
        "{status:?}"
    );
}

#[test]
fn a_bundled_file_that_does_not_match_its_index_is_refused() {
    let mut dist = TestDist::new();
    dist.addon("hello", "1.0.0", "function hello() {\n    echo hello\n}\n");
    let spec = dist.spec("spec.yaml", &[("hello", "version: latest")]);
    let bundle = extracted_bundle(&dist, &spec);
    let changed = bundle.path().join("packages/hello-1.0.0/install.sh");
    fs_err::write(&changed, "function hello() {\n    echo changed\n}\n").unwrap();

    let node = Node::new();
    let output = install_offline(bundle.path(), &node, &[]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains(&changed.display().to_string()),
        "names the file: {all}"
    );
    assert!(all.contains("does not match its expected digest"), "{all}");
    assert!(
        !all.contains("changed\n"),
        "no hook of the changed package ran: {all}"
    );
}

#[test]
fn the_demo_bundle_installs_and_runs_on_a_host_with_loopback_alone() {
    let mut network = support::network::Network::new();
    let host = network.isolated_host();
    let containerd = support::Containerd::start_in(&host);
    let (_, dist) = TestDist::examples(&["demo"]);
    let spec = dist.spec("demo.yaml", &[("demo", "version: 1.0.0, port: 8080")]);
    let bundle = extracted_bundle(&dist, &spec);
    let root = tempfile::tempdir().unwrap();
    let on_host = |program: &str| {
        let mut command = host.command(program);
        command
            .env("BERTH_ROOT", root.path())
            .env("CONTAINERD_ADDRESS", &containerd.socket)
            .current_dir(bundle.path());
        command
    };

    // With loopback alone the node has no address of its own to publish: the hook says so,
    // and the same command given one continues.
    let output = on_host("bash")
        .args(["install.sh", "airgap"])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains("cannot tell this node's address; pass private-address=IP"),
        "{all}"
    );
    let output = on_host("bash")
        .args(["install.sh", "airgap", "private-address=127.0.0.1"])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{all}");
    let answer = on_host("curl")
        .args(["-fsS", "--max-time", "2", "http://127.0.0.1:8080/"])
        .output()
        .unwrap();
    assert_eq!(text(&answer.stdout).trim(), "demo 1.0.0");

    // The join command for an airgap node runs the bundle's join.sh.
    let output = on_host(env!("CARGO_BIN_EXE_berth"))
        .args(["join-command", "--airgap"])
        .output()
        .unwrap();
    let command = text(&output.stdout);
    assert!(
        command.starts_with("cat join.sh | sudo bash -s airgap demo-address=127.0.0.1:8080 "),
        "{command}{}",
        text(&output.stderr)
    );
    let output = on_host(env!("CARGO_BIN_EXE_berth"))
        .arg("reset")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// The scripts take `hook-timeout=` and `health-timeout=` as durations and hand them to berth:
/// a slow hook past a short one is killed, a word that is not a duration is refused before
/// any hook runs, and a longer one lets the same install finish.
#[test]
fn the_scripts_take_the_runs_timeouts() {
    let mut dist = TestDist::new();
    dist.addon(
        "slow",
        "1.0.0",
        "function slow() { echo \"slow ran\" >>\"$TRACE\"; sleep 3; }\n",
    );
    let spec = dist.spec("spec.yaml", &[("slow", "version: 1.0.0")]);
    let bundle = extracted_bundle(&dist, &spec);
    let trace = dist.addons.root().join("trace");
    let node = Node::new().env("TRACE", &trace);
    let install = |words: &[&str]| install_offline(bundle.path(), &node, words);
    let runs = || {
        fs_err::read_to_string(&trace)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let output = install(&["hook-timeout=1s"]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{all}");
    assert!(all.contains("ran past its timeout of 1s"), "{all}");
    assert_eq!(runs(), 1);

    for word in ["hook-timeout=soon", "health-timeout=25h"] {
        let output = install(&[word]);
        let said = text(&output.stderr);
        assert!(!output.status.success(), "{word}: {said}");
        let value = word.split_once('=').unwrap().1;
        assert!(said.contains(&format!("`{value}`")), "{word}: {said}");
        assert_eq!(runs(), 1, "{word} ran a hook");
    }

    let output = install(&["hook-timeout=1m", "health-timeout=0"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(runs(), 2);
    assert_eq!(node.status()["slow"]["progressing"]["reason"], "Succeeded");
}

/// `berth install --bundle` reads the bundle as a stream, from its file or a pipe, never
/// extracting it: the node ends as an install from the extracted bundle leaves it (files,
/// records, images), an image blob two packages share is one file on disk, a stream cut
/// midway fails and the next run completes, and a disk without room for the packages is
/// refused before anything is written.
#[test]
fn a_bundle_installs_as_a_stream_as_it_does_extracted() {
    let containerd = Containerd::start();
    let mut dist = TestDist::new();
    let names = ["first", "second"];
    for name in names {
        dist.addon_with_greeting_image(
            name,
            &format!("function {name}() {{ echo \"{name} ran, AIRGAP=$AIRGAP\"; }}\n"),
        );
    }
    let spec = dist.spec("spec.yaml", &names.map(|name| (name, "version: 1.0.0")));
    let (_folder, archive) = bundle_archive(&dist, &spec);
    let on_containerd = || Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);

    // The extracted bundle's install.sh, as before.
    let extracted = extracted_bundle(&dist, &spec);
    let plain = on_containerd();
    let output = install_offline(extracted.path(), &plain, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));

    // From the file, as a stream.
    let streamed = on_containerd();
    let said = succeeded(&streamed.berth(&[
        "install",
        "--bundle",
        archive.to_str().unwrap(),
        "--param",
        "airgap=1",
    ]));
    assert!(said.contains("second ran, AIRGAP=1"), "{said}");
    assert_eq!(
        Node::installed_files(&streamed),
        Node::installed_files(&plain)
    );
    assert_eq!(Node::applied(&streamed), Node::applied(&plain));
    assert!(
        !streamed.install_dir().join("received-bundle").exists(),
        "the received bundle's folder goes once the run ends"
    );
    assert!(
        said.contains("bundle: 2 packages received, 0 passed over"),
        "{said}"
    );
    // The node still plans against what it installed (the installer keeps the versions), and
    // a plan of a bundle leaves nothing of it behind. A plan reads the bundle's head alone:
    // one cut short after it plans as the whole one does.
    let planned = succeeded(&streamed.berth(&["plan"]));
    assert!(planned.contains("AlreadyApplied"), "{planned}");
    let planned = succeeded(&streamed.berth(&["plan", "--bundle", archive.to_str().unwrap()]));
    assert!(planned.contains("AlreadyApplied"), "{planned}");
    assert!(!streamed.install_dir().join("received-bundle").exists());
    let whole = fs_err::read(&archive).unwrap();
    let cut_archive = archive.with_file_name("cut.tar.gz");
    fs_err::write(&cut_archive, &whole[..whole.len() - 4096]).unwrap();
    let planned = succeeded(&streamed.berth(&["plan", "--bundle", cut_archive.to_str().unwrap()]));
    assert!(planned.contains("AlreadyApplied"), "{planned}");

    // The same bundle again: both add-ons are in place and applied as asked, so their packages
    // pass by unwritten and the installed files stay the very same (same inodes).
    use std::os::unix::fs::MetadataExt as _;
    let inodes = |node: &Node| {
        Node::installed_files(node)
            .keys()
            .map(|path| {
                let metadata =
                    fs_err::metadata(node.install_dir().join("addons").join(path)).unwrap();
                (path.clone(), metadata.ino())
            })
            .collect::<Vec<_>>()
    };
    let before = inodes(&streamed);
    let again = succeeded(&streamed.berth(&["install", "--bundle", archive.to_str().unwrap()]));
    assert!(
        again.contains("bundle: 0 packages received, 2 passed over"),
        "{again}"
    );
    assert_eq!(inodes(&streamed), before);
    assert_eq!(Node::applied(&streamed), Node::applied(&plain));
    // With one add-on's folder gone, that package alone is received; the image blob it shares
    // with the other, which passes by, is linked from the node's copy, not written again.
    let shared = |node: &Node, name: &str| {
        let folder = node
            .install_dir()
            .join(format!("addons/{name}/1.0.0/images/blobs/sha256"));
        fs_err::read_dir(folder)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                (
                    path.file_name().unwrap().to_owned(),
                    fs_err::metadata(&path).unwrap().ino(),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let first_blobs = shared(&streamed, "first");
    fs_err::remove_dir_all(streamed.install_dir().join("addons/second/1.0.0")).unwrap();
    let again = succeeded(&streamed.berth(&["install", "--bundle", archive.to_str().unwrap()]));
    assert!(
        again.contains("bundle: 1 packages received, 1 passed over"),
        "{again}"
    );
    assert_eq!(
        Node::installed_files(&streamed),
        Node::installed_files(&plain)
    );
    let second_blobs = shared(&streamed, "second");
    assert!(
        second_blobs
            .iter()
            .any(|(name, inode)| first_blobs.get(name) == Some(inode)),
        "the shared blob is the first add-on's file: {first_blobs:?} {second_blobs:?}"
    );
    // --force-reapply needs every package: each is received.
    let again = succeeded(&streamed.berth(&[
        "install",
        "--bundle",
        archive.to_str().unwrap(),
        "--force-reapply",
    ]));
    assert!(
        again.contains("bundle: 2 packages received, 0 passed over"),
        "{again}"
    );
    assert!(!streamed.install_dir().join("received-bundle").exists());
    // A join or an upgrade whose words are refused after the bundle came in leaves nothing
    // of it either.
    for command in ["join", "upgrade"] {
        let node = on_containerd();
        let refused = failed(&node.berth(&[
            command,
            "--bundle",
            archive.to_str().unwrap(),
            "no-such-flag",
        ]));
        assert!(refused.contains("no-such-flag"), "{refused}");
        assert!(
            !node.install_dir().join("received-bundle").exists(),
            "{command}: {refused}"
        );
    }
    // The busybox layer both images share: one file, linked into both packages.
    let blob = |name: &str| {
        let folder = streamed
            .install_dir()
            .join(format!("addons/{name}/1.0.0/images/blobs/sha256"));
        fs_err::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect::<Vec<_>>()
    };
    let linked = blob("first")
        .iter()
        .filter(|path| fs_err::metadata(path).unwrap().nlink() == 2)
        .count();
    assert!(linked >= 1, "a shared blob is linked, not copied");
    assert_eq!(blob("first").len(), blob("second").len());

    assert!(
        Node::applied(&plain)
            .iter()
            .all(|(_, version, digest)| version != "null" && digest != "null"),
        "{:?}",
        Node::applied(&plain)
    );

    // The scripts and the binary taken out of the bundle's head.
    let head = tempfile::tempdir().unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .args(["--occurrence", "install.sh", "join.sh", "berth"])
        .current_dir(head.path()));
    // Both scripts read it as a stream, `install.sh airgap bundle=…` on a first node and
    // `join.sh airgap bundle=…` on a joining one: each node ends with the files and records
    // the extracted install left, and nothing of the received bundle.
    for script in ["install.sh", "join.sh"] {
        let node = on_containerd();
        let output = Command::new("bash")
            .arg(script)
            .arg("airgap")
            .arg(format!("bundle={}", archive.display()))
            .current_dir(head.path())
            .env("BERTH_ROOT", node.root.path())
            .env("CONTAINERD_ADDRESS", &containerd.socket)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{script}: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
        assert_eq!(
            Node::installed_files(&node),
            Node::installed_files(&plain),
            "{script}"
        );
        assert_eq!(Node::applied(&node), Node::applied(&plain), "{script}");
        assert!(
            !node.install_dir().join("received-bundle").exists(),
            "{script}"
        );
    }

    // From a pipe, cut midway: refused, nothing applied; then whole: completed.
    let bytes = fs_err::read(&archive).unwrap();
    let piped = on_containerd();
    let pipe_in = |node: &Node, bytes: &[u8]| {
        let mut child = node
            .command(&["install", "--bundle", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let owned = bytes.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &owned);
        });
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap();
        output
    };
    // Cut in its head, and among its packages (read once the plan is made).
    for end in [bytes.len() * 2 / 3, bytes.len() - 4096] {
        let cut = failed(&pipe_in(&piped, &bytes[..end]));
        assert!(cut.contains("bundle") && !cut.contains("panicked"), "{cut}");
        assert!(
            cut.contains("the bundle could not be read to its end")
                && cut.contains("the file is cut short"),
            "{cut}"
        );
        assert!(
            piped
                .status()
                .values()
                .all(|record| record["current"].is_null())
        );
        assert!(
            !piped.install_dir().join("received-bundle").exists(),
            "what came in of the cut stream is not kept"
        );
    }
    succeeded(&pipe_in(&piped, &bytes));
    assert_eq!(Node::installed_files(&piped), Node::installed_files(&plain));
    assert_eq!(Node::applied(&piped), Node::applied(&plain));

    // A package handed as a bundle, or something else: refused, saying what it is.
    let package = dist.dist.path().join("first-1.0.0.tar.gz");
    let refused =
        failed(&on_containerd().berth(&["install", "--bundle", package.to_str().unwrap()]));
    assert!(
        refused.contains("this is a package, not a bundle"),
        "{refused}"
    );
    let refused = failed(&on_containerd().berth(&["install", "--bundle", "/etc/hostname"]));
    assert!(
        refused.contains("the bundle is not a compressed tar Berth can read"),
        "{refused}"
    );

    // No room for the packages: refused up front, naming what is needed.
    let cramped = on_containerd();
    let work = cramped.install_dir().join("received-bundle");
    fs_err::create_dir_all(&work).unwrap();
    run(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&work));
    let refused = failed(&cramped.berth(&["install", "--bundle", archive.to_str().unwrap()]));
    run(Command::new("umount").arg(&work));
    assert!(
        refused.contains("the bundle's packages need") && refused.contains("MiB is free"),
        "{refused}"
    );
    assert!(!cramped.install_dir().join("addons").exists());
}

/// zstd packages and bundles: a dist of zstd packages (`.tar.zst`, which its versions.json
/// names) installs as the gzip dist of the same add-ons does: the same files, images that run,
/// the same versions applied. The package digests differ, so the install over a gzip node
/// applies again. A zstd bundle installs from a stream, as its gzip twin does, and is read by
/// zstd's own tool.
#[test]
fn zstd_packages_and_bundles_install_as_gzip_ones_do() {
    let containerd = Containerd::start();
    let names = ["first", "second"];
    let dist_in = |compression| {
        let mut dist = TestDist::new();
        dist.compression = compression;
        for name in names {
            dist.addon_with_greeting_image(
                name,
                &format!("function {name}() {{ echo \"{name} ran\"; }}\n"),
            );
        }
        dist
    };
    let (gzip, zstd) = (dist_in(Compression::Gzip), dist_in(Compression::Zstd));
    for name in names {
        let zstd_file = zstd.dist.path().join(format!("{name}-1.0.0.tar.zst"));
        assert_eq!(
            Compression::sniff(&fs_err::read(&zstd_file).unwrap()),
            Some(Compression::Zstd)
        );
        assert!(
            !zstd
                .dist
                .path()
                .join(format!("{name}-1.0.0.tar.gz"))
                .exists()
        );
    }
    let versions = fs_err::read_to_string(zstd.dist.path().join("versions.json")).unwrap();
    assert!(versions.contains("\"compression\": \"zstd\""), "{versions}");
    let spec = gzip.spec("spec.yaml", &names.map(|name| (name, "version: 1.0.0")));
    let on_containerd = || Node::new().env("CONTAINERD_ADDRESS", &containerd.socket);

    let from_zstd = on_containerd();
    let said = succeeded(&from_zstd.install(&spec, &zstd.url(), &[]));
    assert!(
        said.contains("first ran") && said.contains("second ran"),
        "{said}"
    );
    for name in names {
        assert_eq!(run_greeting(&containerd, name), format!("{name}\n"));
    }
    let from_gzip = on_containerd();
    let said = succeeded(&from_gzip.install(&spec, &gzip.url(), &[]));
    assert!(said.contains("second ran"), "{said}");
    assert_eq!(
        Node::installed_files(&from_zstd),
        Node::installed_files(&from_gzip)
    );
    let versions_of = |node: &Node| {
        Node::applied(node)
            .into_iter()
            .map(|(name, version, _)| (name, version))
            .collect::<Vec<_>>()
    };
    assert_eq!(versions_of(&from_zstd), versions_of(&from_gzip));
    assert_ne!(
        Node::applied(&from_zstd),
        Node::applied(&from_gzip),
        "other package bytes"
    );
    // Run again: nothing to do. Over the gzip node: the other packages apply.
    let again = succeeded(&from_zstd.berth(&["plan"]));
    assert_eq!(again.matches("AlreadyApplied").count(), 2, "{again}");
    let over = succeeded(&from_gzip.install(&spec, &zstd.url(), &[]));
    assert!(over.contains("second ran"), "{over}");
    assert_eq!(Node::applied(&from_gzip), Node::applied(&from_zstd));

    // A zstd bundle, streamed, from a zstd dist: the node ends as the gzip bundle leaves it.
    let (_gzip_folder, gzip_bundle) = bundle_archive(&gzip, &spec);
    let (_zstd_folder, zstd_bundle) = bundle_archive_in(&zstd, &spec, Compression::Zstd);
    let head = fs_err::read(&zstd_bundle).unwrap();
    assert_eq!(Compression::sniff(&head), Some(Compression::Zstd));
    require("zstd", "zstd");
    let listed = run(Command::new("tar")
        .arg("--zstd")
        .arg("-tf")
        .arg(&zstd_bundle));
    assert!(
        text(&listed.stdout).contains("install.sh"),
        "{}",
        text(&listed.stdout)
    );
    // `berth verify` reads the zstd dist and bundle as it reads gzip ones.
    let checked = succeeded(&from_zstd.berth(&["verify", zstd.dist.path().to_str().unwrap()]));
    assert!(checked.contains("first-1.0.0.tar.zst"), "{checked}");
    succeeded(&from_zstd.berth(&["verify", zstd_bundle.to_str().unwrap()]));
    let streamed_gzip = on_containerd();
    succeeded(&streamed_gzip.berth(&["install", "--bundle", gzip_bundle.to_str().unwrap()]));
    let streamed_zstd = on_containerd();
    let said =
        succeeded(&streamed_zstd.berth(&["install", "--bundle", zstd_bundle.to_str().unwrap()]));
    assert!(said.contains("first ran"), "{said}");
    assert_eq!(
        Node::installed_files(&streamed_zstd),
        Node::installed_files(&streamed_gzip)
    );
    assert_eq!(Node::applied(&streamed_zstd), Node::applied(&from_zstd));
    for node in [&from_gzip, &from_zstd, &streamed_gzip, &streamed_zstd] {
        succeeded(&node.berth(&["reset"]));
    }
}
