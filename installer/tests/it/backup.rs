//! `berth backup` against a real etcd (Debian's etcd-server) serving TLS with client
//! certificates, as kubeadm's local etcd does, on a node root laid out as kubeadm and Berth
//! leave a control-plane node: the snapshot comes whole and etcd's own `etcdctl snapshot
//! restore` brings its keys back; `--verify` reads the archive through and refuses each kind of
//! damage with its reason.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use berth_formats::backup::{BackupManifest, MANIFEST_FILE, SCHEMA_VERSION};
use support::certificates::{authority, certificate};
use support::{Server, free_port, require, text, wait_until};

/// A node root with kubeadm's PKI (made by openssl) and some of Berth's records.
struct ControlPlane {
    root: tempfile::TempDir,
    _etcd: Server,
    endpoint: String,
    work: tempfile::TempDir,
}

fn etcdctl(endpoint: &str, pki: &Path, arguments: &[&str]) -> Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .arg(format!("--cacert={}", pki.join("etcd/ca.crt").display()))
        .arg(format!(
            "--cert={}",
            pki.join("apiserver-etcd-client.crt").display()
        ))
        .arg(format!(
            "--key={}",
            pki.join("apiserver-etcd-client.key").display()
        ))
        .args(arguments)
        .output()
        .unwrap()
}

impl ControlPlane {
    fn start() -> ControlPlane {
        require("openssl", "openssl");
        require("etcd", "etcd-server");
        require("etcdctl", "etcd-client");
        let root = tempfile::tempdir().unwrap();
        let pki = root.path().join("etc/kubernetes/pki");
        fs_err::create_dir_all(pki.join("etcd")).unwrap();
        authority(&pki, "ca");
        authority(&pki.join("etcd"), "ca");
        let san = "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n";
        certificate(&pki, "etcd/server", "etcd/ca", san);
        certificate(
            &pki,
            "apiserver-etcd-client",
            "etcd/ca",
            "basicConstraints=CA:FALSE\n",
        );
        for key in [
            "ca.key",
            "etcd/ca.key",
            "etcd/server.key",
            "apiserver-etcd-client.key",
        ] {
            fs_err::set_permissions(pki.join(key), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let kubernetes = root.path().join("etc/kubernetes");
        fs_err::create_dir_all(kubernetes.join("manifests")).unwrap();
        fs_err::write(
            kubernetes.join("admin.conf"),
            "apiVersion: v1\nkind: Config\n",
        )
        .unwrap();
        fs_err::set_permissions(
            kubernetes.join("admin.conf"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        fs_err::write(kubernetes.join("manifests/etcd.yaml"), "kind: Pod\n").unwrap();
        let berth = root.path().join("var/lib/berth");
        for folder in ["state", "installers/abc", "packages", "work"] {
            fs_err::create_dir_all(berth.join(folder)).unwrap();
        }
        fs_err::write(berth.join("state/demo.json"), "{\"name\": \"demo\"}\n").unwrap();
        fs_err::write(
            berth.join("installers/abc/installer.yaml"),
            "kind: Installer\n",
        )
        .unwrap();
        fs_err::write(berth.join("join.json"), "{}\n").unwrap();
        fs_err::write(berth.join("packages/demo-1.0.0.tar.gz"), "a package").unwrap();
        fs_err::write(berth.join("work/scratch"), "scratch").unwrap();

        let work = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("https://127.0.0.1:{client}");
        let etcd = Server::spawn(
            Command::new("etcd")
                .arg("--name=backup-test")
                .arg(format!("--data-dir={}", work.path().join("etcd").display()))
                .arg(format!("--listen-client-urls={endpoint}"))
                .arg(format!("--advertise-client-urls={endpoint}"))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
                ))
                .arg(format!(
                    "--initial-cluster=backup-test=http://127.0.0.1:{peer}"
                ))
                .arg(format!(
                    "--cert-file={}",
                    pki.join("etcd/server.crt").display()
                ))
                .arg(format!(
                    "--key-file={}",
                    pki.join("etcd/server.key").display()
                ))
                .arg(format!(
                    "--trusted-ca-file={}",
                    pki.join("etcd/ca.crt").display()
                ))
                .arg("--client-cert-auth"),
            &work.path().join("etcd.log"),
        );
        wait_until("etcd to answer", Duration::from_secs(30), || {
            etcdctl(&endpoint, &pki, &["endpoint", "health"])
                .status
                .success()
        });
        for (key, value) in [
            ("/registry/configmaps/default/settings", "kept"),
            ("/registry/secrets/default/password", "hunter2"),
        ] {
            let put = etcdctl(&endpoint, &pki, &["put", key, value]);
            assert!(put.status.success(), "{}", text(&put.stderr));
        }
        ControlPlane {
            root,
            _etcd: etcd,
            endpoint,
            work,
        }
    }

    fn berth(&self, arguments: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .output()
            .unwrap()
    }

    /// `berth backup --verify ARCHIVE EXTRA…`.
    fn verify(&self, archive: &Path, extra: &[&str]) -> Output {
        let mut arguments = vec!["backup", "--verify", archive.to_str().unwrap()];
        arguments.extend(extra);
        self.berth(&arguments)
    }

    fn backup(&self, output: &Path, extra: &[&str]) -> Output {
        let mut arguments = vec![
            "backup",
            "--output",
            output.to_str().unwrap(),
            "--etcd-endpoint",
            &self.endpoint,
        ];
        arguments.extend(extra);
        self.berth(&arguments)
    }
}

fn all(output: &Output) -> String {
    format!("{}{}", text(&output.stdout), text(&output.stderr))
}

/// `output` failed, saying `expected`.
fn refused(output: &Output, expected: &str) {
    assert!(!output.status.success(), "{}", all(output));
    assert!(all(output).contains(expected), "{}", all(output));
}

/// An archive's entries (name, bytes), in order.
type Entries = Vec<(String, Vec<u8>)>;

fn entries(archive: &Path) -> Entries {
    let file = fs_err::File::open(archive).unwrap();
    let mut tar = berth_formats::archive::open(file).unwrap();
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

/// Writes `entries` as a backup archive is written (a zstd tar).
fn write_entries(path: &Path, entries: &[(String, Vec<u8>)]) {
    let file = fs_err::File::create(path).unwrap();
    let setting = berth_formats::compression::Setting::new(
        berth_formats::compression::Compression::Zstd,
        None,
    )
    .unwrap();
    let encoder = berth_formats::compression::Encoder::new(file, setting, 1).unwrap();
    let mut tar = berth_formats::archive::TarWriter::over(encoder, 0);
    for (name, bytes) in entries {
        tar.append_file(name, bytes.len() as u64, false, &bytes[..])
            .unwrap();
    }
    tar.finish().unwrap();
}

#[test]
fn a_backup_holds_a_snapshot_etcd_restores_and_every_file_its_manifest_lists() {
    let node = ControlPlane::start();
    let archive = node.work.path().join("backups/first.tar.zst");
    let output = node.backup(&archive, &[]);
    assert!(output.status.success(), "{}", all(&output));
    assert_eq!(text(&output.stdout).trim(), archive.display().to_string());
    let said = text(&output.stderr);
    eprintln!("{said}");
    assert!(said.contains("the etcd snapshot ("), "{said}");
    let mode = fs_err::metadata(&archive).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the archive is root's alone");
    let leftovers: Vec<String> = support::files_below(archive.parent().unwrap());
    assert_eq!(leftovers, ["first.tar.zst"], "no temporary file stays");
    let folder = fs_err::metadata(archive.parent().unwrap()).unwrap();
    assert_eq!(
        folder.permissions().mode() & 0o777,
        0o700,
        "a folder it made is root's"
    );
    // Without --output: under /var/backups/berth, which reset leaves.
    let output = node.berth(&["backup", "--etcd-endpoint", &node.endpoint]);
    assert!(output.status.success(), "{}", all(&output));
    let default = PathBuf::from(text(&output.stdout).trim());
    assert!(
        default.starts_with(node.root.path().join("var/backups/berth")),
        "{}",
        default.display()
    );

    let written = entries(&archive);
    assert_eq!(written[0].0, MANIFEST_FILE);
    let manifest = BackupManifest::parse(&written[0].1).unwrap();
    let listed: Vec<(&str, u32)> = manifest
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.mode))
        .collect();
    for wanted in [
        ("etcd/snapshot.db", 0o600),
        ("etc/kubernetes/pki/ca.key", 0o600),
        ("etc/kubernetes/pki/etcd/ca.crt", 0o644),
        ("etc/kubernetes/admin.conf", 0o600),
        ("etc/kubernetes/manifests/etcd.yaml", 0o644),
        ("var/lib/berth/state/demo.json", 0o644),
        ("var/lib/berth/installers/abc/installer.yaml", 0o644),
        ("var/lib/berth/join.json", 0o644),
    ] {
        assert!(listed.contains(&wanted), "{wanted:?} in {listed:?}");
    }
    for left_out in ["packages", "work"] {
        assert!(
            !listed.iter().any(|(path, _)| path.contains(left_out)),
            "{left_out}: {listed:?}"
        );
    }
    let ca = fs_err::read(node.root.path().join("etc/kubernetes/pki/ca.crt")).unwrap();
    assert_eq!(
        manifest.cluster.ca_sha256,
        berth_formats::Sha256Digest::of(&ca)
    );

    // etcd's own tool restores the snapshot, and the keys are in it.
    let snapshot = node.work.path().join("snapshot.db");
    let (_, bytes) = written
        .iter()
        .find(|(name, _)| name == "files/etcd/snapshot.db")
        .unwrap();
    fs_err::write(&snapshot, bytes).unwrap();
    let restored = node.work.path().join("restored");
    let output = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "restore"])
        .arg(&snapshot)
        .arg(format!("--data-dir={}", restored.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", all(&output));
    let (client, peer) = (free_port(), free_port());
    let endpoint = format!("http://127.0.0.1:{client}");
    let _restored_etcd = Server::spawn(
        Command::new("etcd")
            .arg(format!("--data-dir={}", restored.display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}")),
        &node.work.path().join("restored.log"),
    );
    let mut value = String::new();
    wait_until(
        "the restored etcd to answer",
        Duration::from_secs(30),
        || {
            let got = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &endpoint, "get", "--print-value-only"])
                .arg("/registry/secrets/default/password")
                .output()
                .unwrap();
            value = text(&got.stdout).trim().to_string();
            got.status.success()
        },
    );
    assert_eq!(value, "hunter2");

    // --verify reads it through.
    let output = node.berth(&["backup", "--verify", archive.to_str().unwrap()]);
    assert!(output.status.success(), "{}", all(&output));
    let verified = text(&output.stdout);
    eprintln!("{verified}");
    assert!(
        verified.contains(&format!("whole: {} files", manifest.files.len())),
        "{verified}"
    );
    assert!(
        verified.contains("not signed: its digests show it is whole"),
        "{verified}"
    );

    // Run again onto the same file: refused, the file kept.
    let before = fs_err::read(&archive).unwrap();
    let output = node.backup(&archive, &[]);
    refused(&output, "already exists; nothing was written");
    assert_eq!(fs_err::read(&archive).unwrap(), before);
}

#[test]
fn a_signed_backup_is_checked_with_the_key_given_and_damage_is_named() {
    let node = ControlPlane::start();
    let keys = tempfile::tempdir().unwrap();
    let mut public = Vec::new();
    for name in ["operator", "other"] {
        let key = berth_formats::signature::SigningKey::generate().unwrap();
        fs_err::write(keys.path().join(format!("{name}.key")), key.to_pem()).unwrap();
        fs_err::write(
            keys.path().join(format!("{name}.pub")),
            key.public().to_pem(),
        )
        .unwrap();
        public.push(key.public().fingerprint());
    }
    let key = |name: &str| keys.path().join(name).display().to_string();
    let archive = node.work.path().join("signed.tar.zst");
    let output = node.backup(&archive, &["--signing-key", &key("operator.key")]);
    assert!(output.status.success(), "{}", all(&output));
    let verify = |path: &Path, extra: &[&str]| node.verify(path, extra);
    let output = verify(&archive, &["--trust-key", &key("operator.pub")]);
    assert!(output.status.success(), "{}", all(&output));
    assert!(
        text(&output.stdout).contains(&format!("signed by {}", public[0])),
        "{}",
        all(&output)
    );
    let output = verify(&archive, &[]);
    assert!(
        text(&output.stdout).contains("signed; not checked"),
        "{}",
        all(&output)
    );
    let output = verify(&archive, &["--trust-key", &key("other.pub")]);
    assert!(!output.status.success());
    assert!(
        all(&output).contains(&public[1]),
        "the key tried is named: {}",
        all(&output)
    );

    let unsigned = node.work.path().join("unsigned.tar.zst");
    assert!(node.backup(&unsigned, &[]).status.success());
    let output = verify(&unsigned, &["--trust-key", &key("operator.pub")]);
    refused(&output, "unsigned");

    // Damage of each kind, refused with its reason.
    let whole = entries(&unsigned);
    let crafted = |name: &str, change: &dyn Fn(&mut Entries)| -> PathBuf {
        let mut changed = whole.clone();
        change(&mut changed);
        let path = node.work.path().join(name);
        write_entries(&path, &changed);
        path
    };
    let bytes = fs_err::read(&unsigned).unwrap();
    let cut = node.work.path().join("cut.tar.zst");
    fs_err::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let state = "files/var/lib/berth/state/demo.json";
    let cases: Vec<(PathBuf, String)> = vec![
        (cut, "is not a whole Berth backup".to_string()),
        (
            crafted("changed.tar.zst", &|entries| {
                let file = entries.iter_mut().find(|(name, _)| name == state).unwrap();
                file.1 = b"{\"name\": \"evil\"}\n".to_vec();
            }),
            format!("`{state}` has sha256"),
        ),
        (
            crafted("extra.tar.zst", &|entries| {
                entries.push(("files/etc/cron.d/evil".into(), b"x".to_vec()));
            }),
            "`files/etc/cron.d/evil` is not in the manifest".to_string(),
        ),
        (
            crafted("missing.tar.zst", &|entries| {
                entries.pop();
            }),
            "it ends before `files/".to_string(),
        ),
        (
            crafted("newer.tar.zst", &|entries| {
                let mut manifest: serde_json::Value =
                    serde_json::from_slice(&entries[0].1).unwrap();
                manifest["schemaVersion"] = (SCHEMA_VERSION + 1).into();
                entries[0].1 = manifest.to_string().into_bytes();
            }),
            format!(
                "the backup was made by a newer Berth (manifest schema {}; this berth reads {SCHEMA_VERSION})",
                SCHEMA_VERSION + 1
            ),
        ),
        (
            crafted("escape.tar.zst", &|entries| {
                let mut manifest: serde_json::Value =
                    serde_json::from_slice(&entries[0].1).unwrap();
                manifest["files"][1]["path"] = "../../etc/shadow".into();
                entries[0].1 = manifest.to_string().into_bytes();
            }),
            "`../../etc/shadow`: not a relative path".to_string(),
        ),
    ];
    for (path, expected) in cases {
        let output = verify(&path, &[]);
        assert!(!output.status.success(), "{}", path.display());
        assert!(
            all(&output).contains(&expected),
            "{}: {}",
            path.display(),
            all(&output)
        );
    }
}

#[test]
fn a_backup_where_it_cannot_be_made_leaves_nothing() {
    let node = ControlPlane::start();
    // Not a control-plane node: no cluster CA.
    let empty = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["backup", "--output"])
        .arg(node.work.path().join("none.tar.zst"))
        .env("BERTH_ROOT", empty.path())
        .output()
        .unwrap();
    refused(
        &output,
        "is not a control-plane node of a cluster Berth installed",
    );
    // etcd not answering there.
    let folder = node.work.path().join("backups");
    let output = node.berth(&[
        "backup",
        "--output",
        folder.join("down.tar.zst").to_str().unwrap(),
        "--etcd-endpoint",
        &format!("https://127.0.0.1:{}", free_port()),
    ]);
    refused(&output, "did not answer");
    assert_eq!(support::files_below(&folder), Vec::<String>::new());
}

#[test]
fn a_backup_goes_to_s3_and_is_verified_from_there_and_a_folder_keeps_the_newest() {
    let node = ControlPlane::start();
    let s3 = support::s3::S3Server::start();
    s3.create_bucket("backups");
    let berth_s3 = |arguments: &[&str], with_credentials: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_berth"));
        command
            .args(arguments)
            .args(["--s3-endpoint", &s3.endpoint])
            .env("BERTH_ROOT", node.root.path())
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_ENDPOINT_URL");
        if with_credentials {
            command.envs(s3.env());
        }
        command.output().unwrap()
    };
    let backup = [
        "backup",
        "--output",
        "s3://backups/cluster-a/",
        "--etcd-endpoint",
        &node.endpoint,
    ];
    let output = berth_s3(&backup, false);
    refused(&output, "no S3 credentials");
    let output = berth_s3(&backup, true);
    assert!(output.status.success(), "{}", all(&output));
    let place = text(&output.stdout).trim().to_string();
    let keys = s3.keys("backups", "cluster-a/");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(place, format!("s3://backups/{}", keys[0]));
    assert!(keys[0].starts_with("cluster-a/backup-") && keys[0].ends_with(".tar.zst"));
    // Nothing stays on the node on its way there.
    assert_eq!(
        support::files_below(&node.root.path().join("var/backups/berth")),
        Vec::<String>::new()
    );
    let output = berth_s3(&["backup", "--verify", &place], true);
    assert!(output.status.success(), "{}", all(&output));
    assert!(text(&output.stdout).contains("whole: "), "{}", all(&output));
    let output = berth_s3(
        &["backup", "--verify", "s3://backups/cluster-a/none.tar.zst"],
        true,
    );
    refused(&output, "404");
    let output = berth_s3(
        &[
            "backup",
            "--output",
            "s3://backups/x/",
            "--keep",
            "2",
            "--etcd-endpoint",
            &node.endpoint,
        ],
        true,
    );
    assert!(
        all(&output).contains("--keep prunes a folder on this node"),
        "{}",
        all(&output)
    );

    // Four backups into one folder with --keep 2: the two newest stay, and a file of the
    // operator's own name is left alone.
    let folder = node.work.path().join("kept");
    fs_err::create_dir_all(&folder).unwrap();
    fs_err::write(folder.join("before-upgrade.tar.zst"), "mine").unwrap();
    let mut made = Vec::new();
    for _ in 0..4 {
        let output = node.berth(&[
            "backup",
            "--output",
            &format!("{}/", folder.display()),
            "--keep",
            "2",
            "--etcd-endpoint",
            &node.endpoint,
        ]);
        assert!(output.status.success(), "{}", all(&output));
        made.push(text(&output.stdout).trim().to_string());
        // Names are by the second: the next backup is another second's.
        let second = made.last().unwrap().clone();
        wait_until("the next second", Duration::from_secs(3), || {
            next_name_differs(&second)
        });
    }
    let mut kept = support::files_below(&folder);
    kept.sort();
    let newest: Vec<String> = made[2..]
        .iter()
        .map(|path| {
            Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        kept,
        [newest, vec!["before-upgrade.tar.zst".to_string()]].concat()
    );
}

/// Whether a backup started now gets another name than `path`'s.
fn next_name_differs(path: &str) -> bool {
    let now = berth_formats::time::now().replace(':', "");
    !path.ends_with(&format!("backup-{now}.tar.zst"))
}

#[test]
fn an_encrypted_backup_opens_with_its_identity_or_passphrase_alone() {
    use age::secrecy::ExposeSecret as _;
    let node = ControlPlane::start();
    let keys = tempfile::tempdir().unwrap();
    let identity = age::x25519::Identity::generate();
    let identity_file = keys.path().join("operator.age");
    fs_err::write(
        &identity_file,
        format!("{}\n", identity.to_string().expose_secret()),
    )
    .unwrap();
    let other_file = keys.path().join("other.age");
    fs_err::write(
        &other_file,
        format!(
            "{}\n",
            age::x25519::Identity::generate()
                .to_string()
                .expose_secret()
        ),
    )
    .unwrap();
    let recipient = identity.to_public().to_string();

    let folder = node.work.path().join("sealed");
    let output = node.backup(
        Path::new(&format!("{}/", folder.display())),
        &["--encrypt-to", &recipient],
    );
    assert!(output.status.success(), "{}", all(&output));
    let archive = PathBuf::from(text(&output.stdout).trim());
    assert!(
        archive.to_string_lossy().ends_with(".tar.zst.age"),
        "{}",
        archive.display()
    );
    let bytes = fs_err::read(&archive).unwrap();
    assert!(bytes.starts_with(b"age-encryption.org/v1\n"));
    let verify = |extra: &[&str]| node.verify(&archive, extra);
    let output = verify(&[]);
    refused(&output, "give --identity FILE");
    let output = verify(&["--identity", other_file.to_str().unwrap()]);
    refused(&output, "could not be decrypted");
    let output = verify(&["--identity", identity_file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", all(&output));
    assert!(text(&output.stdout).contains("whole: "), "{}", all(&output));

    // With a passphrase instead.
    let passphrase = keys.path().join("passphrase");
    fs_err::write(&passphrase, "correct horse battery staple\n").unwrap();
    let wrong = keys.path().join("wrong");
    fs_err::write(&wrong, "incorrect\n").unwrap();
    let sealed = node.work.path().join("passphrase.tar.zst.age");
    let output = node.backup(
        &sealed,
        &["--passphrase-file", passphrase.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", all(&output));
    let verify = |extra: &[&str]| node.verify(&sealed, extra);
    let output = verify(&["--identity", identity_file.to_str().unwrap()]);
    assert!(
        all(&output).contains("give --passphrase-file FILE"),
        "{}",
        all(&output)
    );
    let output = verify(&["--passphrase-file", wrong.to_str().unwrap()]);
    refused(&output, "could not be decrypted");
    let output = verify(&["--passphrase-file", passphrase.to_str().unwrap()]);
    assert!(output.status.success(), "{}", all(&output));

    // An identity opens; it does not encrypt.
    let output = node.backup(
        &node.work.path().join("no.tar.zst"),
        &["--identity", identity_file.to_str().unwrap()],
    );
    refused(&output, "give --encrypt-to RECIPIENT");
}

/// What `berth restore` refuses before it changes anything (the restore itself, on a real
/// cluster, is `kubernetes_restore.rs`).
#[test]
fn a_restore_is_refused_where_a_cluster_runs_or_another_clusters_ca_is() {
    let node = ControlPlane::start();
    let archive = node.work.path().join("b.tar.zst");
    assert!(node.backup(&archive, &[]).status.success());
    let restore = |root: &Path| {
        Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(["restore", archive.to_str().unwrap()])
            .env("BERTH_ROOT", root)
            .output()
            .unwrap()
    };
    // The node it was taken on runs its cluster.
    let output = restore(node.root.path());
    assert!(!output.status.success());
    assert!(
        all(&output).contains("this node already runs a cluster")
            && all(&output).contains("admin.conf"),
        "{}",
        all(&output)
    );
    // A node that holds another cluster's CA.
    let other = tempfile::tempdir().unwrap();
    let pki = other.path().join("etc/kubernetes/pki");
    fs_err::create_dir_all(&pki).unwrap();
    fs_err::write(pki.join("ca.crt"), "another cluster's CA\n").unwrap();
    let output = restore(other.path());
    refused(&output, "holds another cluster's CA");
    assert_eq!(
        support::files_below(other.path()),
        ["etc/kubernetes/pki/ca.crt"]
    );
    // A fresh node, and a backup that records no installer to run again (this one's node ran
    // none).
    let fresh = tempfile::tempdir().unwrap();
    let output = restore(fresh.path());
    refused(&output, "the backup records no installer");
    assert_eq!(support::files_below(fresh.path()), Vec::<String>::new());
}

/// An add-on whose data lives on the host, in `$STORE`, with Berth's hook pair to back it up
/// and restore it; its restore fails while `$FAIL` names a file that is there.
const STORE: &str = r#"
function store() { mkdir -p "$STORE"; }
function store_backup() {
    cp -p "$STORE"/* "$BERTH_BACKUP_DIR/"
    ln -s /etc/shadow "$BERTH_BACKUP_DIR/planted"
    [ ! -e "${FAIL_BACKUP:-/nonexistent}" ] || { echo "the store is busy" >&2; return 1; }
}
function store_restore() {
    [ ! -e "$FAIL" ] || { echo "the store cannot be written" >&2; return 1; }
    mkdir -p "$STORE"
    cp -p "$BERTH_RESTORE_DIR"/* "$STORE/"
    echo restored >> "$STORE/.restores"
}
"#;

#[test]
fn an_addons_data_goes_through_its_backup_hook_and_comes_back_through_its_restore_hook() {
    let node = ControlPlane::start();
    // The fixture's stand-ins for Berth's records go: this test's install writes real ones.
    for stand_in in ["state/demo.json", "join.json"] {
        fs_err::remove_file(node.root.path().join("var/lib/berth").join(stand_in)).unwrap();
    }
    let mut dist = support::TestDist::new();
    dist.addon("store", "1.0.0", STORE);
    // An add-on with no data to keep: no hook, nothing of it in the backup.
    dist.addon("plain", "1.0.0", "function plain() { :; }\n");
    let spec = dist.spec(
        "store.yaml",
        &[("store", "version: 1.0.0"), ("plain", "version: 1.0.0")],
    );
    let store = node.work.path().join("store");
    let installed = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "install",
            "--spec",
            spec.to_str().unwrap(),
            "--dist",
            &dist.url(),
        ])
        .env("BERTH_ROOT", node.root.path())
        .env("STORE", &store)
        .output()
        .unwrap();
    assert!(installed.status.success(), "{}", all(&installed));
    fs_err::write(store.join("records.db"), "every record\n").unwrap();
    fs_err::set_permissions(
        store.join("records.db"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();

    let backup = |archive: &Path, extra: &[(&str, &Path)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_berth"));
        command
            .args(["backup", "--output", archive.to_str().unwrap()])
            .args(["--etcd-endpoint", &node.endpoint])
            .env("BERTH_ROOT", node.root.path())
            .env("STORE", &store);
        for (key, value) in extra {
            command.env(key, value);
        }
        command.output().unwrap()
    };
    // A backup hook that fails stops the backup; nothing is written.
    let busy = node.work.path().join("busy");
    fs_err::write(&busy, "").unwrap();
    let archive = node.work.path().join("backups/with-data.tar.zst");
    let output = backup(&archive, &[("FAIL_BACKUP", &busy)]);
    refused(&output, "store_backup");
    assert!(
        all(&output).contains("the store is busy"),
        "{}",
        all(&output)
    );
    assert!(
        all(&output).contains("nothing was written"),
        "{}",
        all(&output)
    );
    assert_eq!(
        support::files_below(archive.parent().unwrap()),
        Vec::<String>::new()
    );

    let output = backup(&archive, &[]);
    assert!(output.status.success(), "{}", all(&output));
    assert!(
        all(&output).contains("store 1.0.0: store_backup")
            && all(&output).contains("add-on data (1 files)"),
        "{}",
        all(&output)
    );
    let manifest = BackupManifest::parse(&entries(&archive)[0].1).unwrap();
    let data: Vec<(&str, u32)> = manifest
        .files
        .iter()
        .filter(|file| file.part == berth_formats::backup::Part::Addon)
        .map(|file| (file.path.as_str(), file.mode))
        .collect();
    // The link the hook left is not followed: a backup holds only what the hook wrote.
    assert_eq!(data, [("addons/store/records.db", 0o640)]);
    assert!(node.verify(&archive, &[]).status.success());

    // Onto a fresh node, whose store is empty: the installer runs again, then the restore
    // hook gets the data. Stopped by the hook, the restore says so and continues when run again.
    let fresh = tempfile::tempdir().unwrap();
    let new_store = node.work.path().join("new-store");
    let blocked = node.work.path().join("blocked");
    fs_err::write(&blocked, "").unwrap();
    let restore = || {
        Command::new(env!("CARGO_BIN_EXE_berth"))
            .args(["restore", archive.to_str().unwrap()])
            .env("BERTH_ROOT", fresh.path())
            .env("STORE", &new_store)
            .env("FAIL", &blocked)
            .output()
            .unwrap()
    };
    let output = restore();
    refused(&output, "the store cannot be written");
    assert!(
        all(&output).contains("run the same berth restore again to continue"),
        "{}",
        all(&output)
    );
    assert!(!new_store.join("records.db").exists());
    fs_err::remove_file(&blocked).unwrap();
    let output = restore();
    assert!(output.status.success(), "{}", all(&output));
    assert!(
        all(&output).contains("store 1.0.0: store_restore"),
        "{}",
        all(&output)
    );
    assert_eq!(
        fs_err::read_to_string(new_store.join("records.db")).unwrap(),
        "every record\n"
    );
    let mode = fs_err::metadata(new_store.join("records.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    assert_eq!(
        fs_err::read_to_string(new_store.join(".restores")).unwrap(),
        "restored\n"
    );
    // The restore's folder, the data in it, went with it.
    assert!(!fresh.path().join("var/lib/berth/restore").exists());
    // Done: a third run is refused, the node runs what was restored.
    refused(&restore(), "already runs a cluster");
}
