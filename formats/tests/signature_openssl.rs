//! Berth's signatures checked by an independent implementation, OpenSSL's: what Berth signs
//! OpenSSL verifies with Berth's public key, and what OpenSSL signs with a key it made Berth
//! verifies — so the format is the standard one (cosign's keyed blob signature: base64 of an
//! ASN.1 ECDSA P-256 SHA-256 signature, keys as PEM PKCS#8 and SubjectPublicKeyInfo).

use std::process::Command;

use base64::Engine as _;
use berth_formats::signature::{PublicKey, SigningKey, verify};

fn openssl(arguments: &[&str]) -> std::process::Output {
    Command::new("openssl")
        .args(arguments)
        .output()
        .expect("openssl is installed (scripts/test.sh installs it)")
}

#[test]
fn openssl_verifies_berths_signatures_and_berth_verifies_openssls() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let message = b"sha256:0123abcd  demo-1.0.0.tar.gz\n";
    fs_err::write(path("file"), message).unwrap();

    // Berth signs; OpenSSL verifies with the public key Berth wrote.
    let key = SigningKey::generate().unwrap();
    fs_err::write(path("berth.pub"), key.public().to_pem()).unwrap();
    let signature = key.sign("file", message).unwrap();
    let der = base64::engine::general_purpose::STANDARD
        .decode(&signature)
        .unwrap();
    fs_err::write(path("file.sig.der"), &der).unwrap();
    let checked = openssl(&[
        "dgst",
        "-sha256",
        "-verify",
        &path("berth.pub"),
        "-signature",
        &path("file.sig.der"),
        &path("file"),
    ]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // One byte changed: OpenSSL refuses too.
    fs_err::write(path("changed"), b"sha256:0123abce  demo-1.0.0.tar.gz\n").unwrap();
    let refused = openssl(&[
        "dgst",
        "-sha256",
        "-verify",
        &path("berth.pub"),
        "-signature",
        &path("file.sig.der"),
        &path("changed"),
    ]);
    assert!(!refused.status.success());

    // OpenSSL makes a key and signs; Berth reads both keys and verifies.
    assert!(
        openssl(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &path("openssl.key")
        ])
        .status
        .success()
    );
    assert!(
        openssl(&[
            "pkey",
            "-in",
            &path("openssl.key"),
            "-pubout",
            "-out",
            &path("openssl.pub")
        ])
        .status
        .success()
    );
    assert!(
        openssl(&[
            "dgst",
            "-sha256",
            "-sign",
            &path("openssl.key"),
            "-out",
            &path("openssl.sig"),
            &path("file")
        ])
        .status
        .success()
    );
    let public = PublicKey::from_pem(
        "openssl.pub",
        &fs_err::read_to_string(path("openssl.pub")).unwrap(),
    )
    .unwrap();
    let signature = base64::engine::general_purpose::STANDARD
        .encode(fs_err::read(path("openssl.sig")).unwrap());
    verify(
        std::slice::from_ref(&public),
        "file",
        message,
        "file.sig",
        &signature,
    )
    .unwrap();
    assert!(verify(&[key.public()], "file", message, "file.sig", &signature).is_err());
    // And signs with OpenSSL's private key as well.
    let imported = SigningKey::from_pem(
        "openssl.key",
        &fs_err::read_to_string(path("openssl.key")).unwrap(),
    )
    .unwrap();
    assert_eq!(imported.public(), public);
}
