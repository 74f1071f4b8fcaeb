//! Certificates made with openssl for the tests: authorities and the certificates they sign,
//! as kubeadm lays them out (`NAME.crt` and `NAME.key` in one folder).

use std::path::Path;
use std::process::Command;

use berth_testkit::run;

fn openssl(arguments: &[&str], folder: &Path) {
    run(Command::new("openssl").args(arguments).current_dir(folder));
}

/// A new P-256 key `name.key` and, from `openssl req` with `arguments` added (`-x509` for a
/// self-signed certificate, or a request), its certificate or request.
pub fn new_key(pki: &Path, name: &str, arguments: &[&str]) {
    let key = format!("{name}.key");
    let subject = format!("/CN={}", name.replace('/', "-"));
    let mut all = vec![
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
        "-subj",
        &subject,
    ];
    all.extend(arguments);
    openssl(&all, pki);
}

/// A certificate `name` signed by `issuer` (`etc/kubernetes/pki/<issuer>.{crt,key}`).
pub fn certificate(pki: &Path, name: &str, issuer: &str, extensions: &str) {
    let (request, certificate) = (format!("{name}.csr"), format!("{name}.crt"));
    new_key(pki, name, &["-out", &request]);
    fs_err::write(pki.join(format!("{name}.ext")), extensions).unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            &request,
            "-CA",
            &format!("{issuer}.crt"),
            "-CAkey",
            &format!("{issuer}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &certificate,
            "-extfile",
            &format!("{name}.ext"),
        ],
        pki,
    );
    for leftover in ["csr", "ext"] {
        fs_err::remove_file(pki.join(format!("{name}.{leftover}"))).unwrap();
    }
}

/// A self-signed authority `name.{crt,key}`.
pub fn authority(pki: &Path, name: &str) {
    new_key(
        pki,
        name,
        &["-x509", "-out", &format!("{name}.crt"), "-days", "2"],
    );
}
