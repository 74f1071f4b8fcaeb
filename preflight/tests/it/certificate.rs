//! The certificate check on key pairs that openssl makes, in every key format kubeadm and
//! openssl write: each status troubleshoot gives (valid, switched, mismatch, encrypted,
//! missing, invalid) from real files.

use std::path::{Path, PathBuf};
use std::process::Command;

use berth_preflight::{Limits, Origin, TemplateContext};

fn openssl(folder: &Path, arguments: &[&str]) {
    berth_testkit::require("openssl", "openssl");
    berth_testkit::run(Command::new("openssl").args(arguments).current_dir(folder));
}

/// A key made by `generate` (an openssl command, written to `name.key`) and a self-signed
/// certificate for it, `name.crt`.
fn pair(folder: &Path, name: &str, generate: &[&str]) -> (PathBuf, PathBuf) {
    let key = format!("{name}.key");
    let certificate = format!("{name}.crt");
    // `-out` right after the command: genrsa takes the key size last.
    let mut arguments = vec![generate[0], "-out", &key];
    arguments.extend(&generate[1..]);
    openssl(folder, &arguments);
    let mut sign = vec!["req", "-new", "-x509", "-days", "2", "-subj", "/CN=node"];
    sign.extend(["-key", &key, "-out", &certificate, "-passin", "pass:secret"]);
    openssl(folder, &sign);
    (folder.join(certificate), folder.join(key))
}

/// The status the certificate collector gives `certificate` and `key`, through a document
/// whose outcomes name every status.
fn status(certificate: &Path, key: &Path) -> String {
    let statuses = [
        "key-pair-missing",
        "key-pair-switched",
        "key-pair-encrypted",
        "key-pair-mismatch",
        "key-pair-invalid",
        "key-pair-valid",
    ];
    let outcomes: String = statuses
        .iter()
        .map(|status| {
            format!("      - pass:\n          when: {status}\n          message: {status}\n")
        })
        .collect();
    let text = format!(
        "apiVersion: troubleshoot.sh/v1beta2\nkind: HostPreflight\nmetadata:\n  name: t\nspec:\n  collectors:\n  - certificate:\n      collectorName: pair\n      certificatePath: {}\n      keyPath: {}\n  analyzers:\n  - certificate:\n      collectorName: pair\n      outcomes:\n{outcomes}",
        certificate.display(),
        key.display()
    );
    let document = berth_preflight::load_text(
        Origin::new("certificate", None),
        &text,
        &TemplateContext::default(),
    )
    .unwrap();
    let report = berth_preflight::run(&[document], &Limits::default()).unwrap();
    assert_eq!(report.results.len(), 1, "{report:?}");
    report.results[0].message.clone()
}

#[test]
fn every_key_format_is_matched_to_its_certificate() {
    let folder = tempfile::tempdir().unwrap();
    let folder = folder.path();
    let formats: [(&str, &[&str]); 5] = [
        // kubeadm's own keys: RSA, PKCS#1 ("RSA PRIVATE KEY").
        ("rsa-pkcs1", &["genrsa", "-traditional", "2048"]),
        // openssl 3's default: PKCS#8 ("PRIVATE KEY").
        (
            "rsa-pkcs8",
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
        ),
        // SEC 1 ("EC PRIVATE KEY"), as `openssl ecparam -genkey` writes it.
        (
            "ec-sec1",
            &["ecparam", "-name", "prime256v1", "-genkey", "-noout"],
        ),
        (
            "ec-p384-pkcs8",
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
            ],
        ),
        ("ed25519", &["genpkey", "-algorithm", "ED25519"]),
    ];
    let mut pairs = Vec::new();
    for (name, generate) in formats {
        let (certificate, key) = pair(folder, name, generate);
        assert_eq!(status(&certificate, &key), "key-pair-valid", "{name}");
        pairs.push((name, certificate, key));
    }
    // Each certificate with the next format's key: no pair.
    for (index, (name, certificate, _)) in pairs.iter().enumerate() {
        let (other, _, key) = &pairs[(index + 1) % pairs.len()];
        assert_eq!(
            status(certificate, key),
            "key-pair-mismatch",
            "{name} certificate with the {other} key"
        );
    }
    // Two keys of the same format, the certificate of one: no pair either.
    let (_, stranger) = pair(folder, "stranger", &["genrsa", "-traditional", "2048"]);
    assert_eq!(status(&pairs[0].1, &stranger), "key-pair-mismatch");
}

#[test]
fn switched_encrypted_missing_and_invalid_files_are_told_apart() {
    let folder = tempfile::tempdir().unwrap();
    let folder = folder.path();
    let (certificate, key) = pair(folder, "node", &["genrsa", "-traditional", "2048"]);
    assert_eq!(status(&key, &certificate), "key-pair-switched");
    assert_eq!(
        status(&certificate, &folder.join("absent.key")),
        "key-pair-missing"
    );
    assert_eq!(status(&folder.join("absent.crt"), &key), "key-pair-missing");
    // An encrypted key, in both of openssl's forms: PKCS#8 ("ENCRYPTED PRIVATE KEY") and the
    // traditional PEM header ("Proc-Type: 4,ENCRYPTED").
    let (encrypted_certificate, encrypted) = pair(
        folder,
        "locked",
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-aes256",
            "-pass",
            "pass:secret",
        ],
    );
    assert_eq!(
        status(&encrypted_certificate, &encrypted),
        "key-pair-encrypted"
    );
    let traditional = folder.join("locked-traditional.key");
    openssl(
        folder,
        &[
            "rsa",
            "-in",
            "node.key",
            "-traditional",
            "-aes256",
            "-passout",
            "pass:secret",
            "-out",
            "locked-traditional.key",
        ],
    );
    assert_eq!(status(&certificate, &traditional), "key-pair-encrypted");
    // Not PEM at all, and a certificate cut short (its DER ends mid-way).
    let garbage = folder.join("garbage");
    fs_err::write(&garbage, "not a certificate\n").unwrap();
    assert_eq!(status(&garbage, &key), "key-pair-invalid");
    assert_eq!(status(&certificate, &garbage), "key-pair-invalid");
    let text = fs_err::read_to_string(&certificate).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let damaged = folder.join("damaged.crt");
    fs_err::write(
        &damaged,
        format!(
            "{}\n{}\n",
            lines[..lines.len() / 2].join("\n"),
            lines[lines.len() - 1]
        ),
    )
    .unwrap();
    assert_eq!(status(&damaged, &key), "key-pair-invalid");
}
