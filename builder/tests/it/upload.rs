//! `berth-build upload` against a real S3 server (SeaweedFS on loopback) and a local folder.

use crate::support;

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use berth_formats::Sha256Digest;
use support::s3::S3Server;
use support::{BerthBuild, wait_until};

const BUCKET: &str = "berth";

/// A dist folder as `berth-build build` leaves it (`out/`), with a package of `package_mib`
/// MiB, and beside it a stand-in for the node binary (`berth`).
fn dist(package_mib: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    fs_err::create_dir_all(&out).unwrap();
    let mut package = fs_err::File::create(out.join("big-1.0.0.tar.gz")).unwrap();
    // Content that differs from MiB to MiB, so no layer of the store can fold it.
    let mut chunk: Vec<u8> = (0..1024 * 1024)
        .map(|byte: usize| byte.wrapping_mul(31) as u8)
        .collect();
    for index in 0..package_mib {
        chunk[..8].copy_from_slice(&(index as u64).to_le_bytes());
        package.write_all(&chunk).unwrap();
    }
    fs_err::write(out.join("big-1.0.0.tar.gz.sha256"), "x  big-1.0.0.tar.gz\n").unwrap();
    fs_err::write(out.join("versions.json"), "{\"addons\": []}\n").unwrap();
    fs_err::write(dir.path().join("berth"), "#!/bin/sh\necho berth\n").unwrap();
    dir
}

fn build_for(server: &S3Server) -> BerthBuild {
    let mut build = BerthBuild::new();
    build.envs = server
        .env()
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect();
    build
}

/// `berth-build upload` of the dist to `s3://berth/channel`, release r1, on `endpoint`.
fn upload_arguments(dist: &Path, endpoint: &str, extra: &[&str]) -> Vec<String> {
    let arguments: Vec<String> = [
        "upload",
        dist.join("out").to_str().unwrap(),
        "--to",
        "s3://berth/channel",
        "--release",
        "r1",
        "--endpoint",
        endpoint,
        "--path-style",
        "--berth",
        dist.join("berth").to_str().unwrap(),
    ]
    .iter()
    .chain(extra)
    .map(ToString::to_string)
    .collect();
    arguments
}

fn run(build: &BerthBuild, arguments: &[String]) -> (bool, String, String) {
    build.run(&arguments.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn an_upload_goes_up_once_in_parts_and_reads_back_the_same_bytes() {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let dist = dist(12);
    let build = build_for(&server);
    let arguments = upload_arguments(dist.path(), &server.endpoint, &["--part-size", "5"]);
    let (ok, stdout, stderr) = run(&build, &arguments);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("dist/r1/big-1.0.0.tar.gz") && stdout.contains("written in 3 parts"),
        "{stdout}"
    );
    assert_eq!(
        server.keys(BUCKET, "channel/"),
        [
            "channel/dist/r1/big-1.0.0.tar.gz",
            "channel/dist/r1/big-1.0.0.tar.gz.sha256",
            "channel/dist/r1/bin/berth-linux-amd64",
            "channel/dist/r1/bin/berth-linux-amd64.sha256",
            "channel/dist/r1/versions.json"
        ]
    );
    for file in ["big-1.0.0.tar.gz", "versions.json", "berth"] {
        let key = match file {
            "berth" => "channel/dist/r1/bin/berth-linux-amd64".to_string(),
            file => format!("channel/dist/r1/{file}"),
        };
        assert_eq!(
            Sha256Digest::of(&server.get(BUCKET, &key)),
            Sha256Digest::of(
                &fs_err::read(match file {
                    "berth" => dist.path().join("berth"),
                    file => dist.path().join("out").join(file),
                })
                .unwrap()
            ),
            "{key} reads back as it went up"
        );
    }
    let checksum =
        String::from_utf8(server.get(BUCKET, "channel/dist/r1/bin/berth-linux-amd64.sha256"))
            .unwrap();
    assert!(checksum.ends_with("  berth-linux-amd64\n"), "{checksum}");

    // Unchanged files are not written again: the objects keep their ETag and Last-Modified.
    let before: Vec<_> = server
        .keys(BUCKET, "channel/")
        .iter()
        .map(|key| server.head(BUCKET, key))
        .collect();
    let (ok, stdout, stderr) = run(&build, &arguments);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.matches("unchanged").count(), 5, "{stdout}");
    assert!(stderr.contains("0 written"), "{stderr}");
    let after: Vec<_> = server
        .keys(BUCKET, "channel/")
        .iter()
        .map(|key| server.head(BUCKET, key))
        .collect();
    assert_eq!(before, after);
}

#[test]
fn an_upload_cut_off_by_the_server_dying_completes_when_run_again() {
    let mut server = S3Server::start();
    server.create_bucket(BUCKET);
    let dist = dist(200);
    let build = build_for(&server);
    let arguments = upload_arguments(
        dist.path(),
        &server.endpoint,
        &["--part-size", "5", "-j", "1"],
    );
    let mut upload = build
        .command(&arguments.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the server once some of the package has arrived, while the upload still runs.
    let data = server.data_dir();
    wait_until(
        "20 MiB to reach the server",
        Duration::from_secs(60),
        || support::size_below(&data) > 20 * 1024 * 1024,
    );
    assert!(
        upload.try_wait().unwrap().is_none(),
        "the upload ended too soon to be cut off"
    );
    server.kill();
    let output = upload.wait_with_output().unwrap();
    assert!(
        !output.status.success(),
        "the upload cannot succeed without its server"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach"), "{stderr}");

    server.restart();
    let (ok, _, stderr) = run(&build, &arguments);
    assert!(ok, "{stderr}");
    assert_eq!(
        Sha256Digest::of(&server.get(BUCKET, "channel/dist/r1/big-1.0.0.tar.gz")),
        Sha256Digest::of(&fs_err::read(dist.path().join("out/big-1.0.0.tar.gz")).unwrap())
    );
}

#[test]
fn wrong_credentials_and_unreachable_endpoints_fail_with_one_clear_message_in_time() {
    let server = S3Server::start();
    server.create_bucket(BUCKET);
    let dist = dist(1);
    let mut build = build_for(&server);
    build
        .envs
        .push(("AWS_SECRET_ACCESS_KEY".into(), "not-the-secret".into()));
    let (ok, _, stderr) = run(
        &build,
        &upload_arguments(dist.path(), &server.endpoint, &[]),
    );
    assert!(!ok);
    assert_eq!(
        stderr
            .lines()
            .filter(|line| line.starts_with("error:"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("access denied (HTTP 403)"), "{stderr}");

    // Nothing listens: refused at once, retried, then one message naming the endpoint.
    let build = build_for(&server);
    let closed = format!("http://127.0.0.1:{}", support::free_port());
    let started = Instant::now();
    let (ok, _, stderr) = run(
        &build,
        &upload_arguments(dist.path(), &closed, &["--timeout", "30"]),
    );
    assert!(!ok);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        stderr.contains(&format!("cannot reach {closed}")),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|line| line.starts_with("error:"))
            .count(),
        1,
        "{stderr}"
    );

    // Something listens and never answers: the total bound ends it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_endpoint = format!("http://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let (ok, _, stderr) = run(
        &build,
        &upload_arguments(dist.path(), &silent_endpoint, &["--timeout", "3"]),
    );
    assert!(!ok);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr.contains("did not finish within 3s"), "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|line| line.starts_with("error:"))
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn an_upload_to_a_folder_keeps_unchanged_files() {
    let dist = dist(1);
    let store = tempfile::tempdir().unwrap();
    let build = BerthBuild::new();
    let out = dist.path().join("out");
    let berth = dist.path().join("berth");
    let arguments = [
        "upload",
        out.to_str().unwrap(),
        "--to",
        store.path().to_str().unwrap(),
        "--release",
        "r1",
        "--staging",
        "--berth",
        berth.to_str().unwrap(),
    ];
    let (ok, _, stderr) = build.run(&arguments);
    assert!(ok, "{stderr}");
    let package = store.path().join("staging/r1/big-1.0.0.tar.gz");
    assert_eq!(
        fs_err::read(&package).unwrap(),
        fs_err::read(dist.path().join("out/big-1.0.0.tar.gz")).unwrap()
    );
    assert!(
        store
            .path()
            .join("staging/r1/bin/berth-linux-amd64.sha256")
            .exists()
    );
    let modified = fs_err::metadata(&package).unwrap().modified().unwrap();
    let (ok, stdout, stderr) = build.run(&arguments);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("unchanged") && !stdout.contains("written"),
        "{stdout}"
    );
    assert_eq!(
        fs_err::metadata(&package).unwrap().modified().unwrap(),
        modified
    );
}
