//! apt repositories made by a test: `.deb` files built with `dpkg-deb`, indexed with
//! `dpkg-scanpackages`, under `dists/<suite>/main/binary-amd64/` with an unsigned InRelease.

use std::path::Path;
use std::process::Command;

use berth_formats::Sha256Digest;

use crate::{require, run};

/// Builds `<repo>/pool/<name>_<version>_<arch>.deb` with these extra control fields and one
/// file, `/usr/share/doc/<name>/README`. A `License` field is no control field: it writes a
/// machine-readable `/usr/share/doc/<name>/copyright` naming that licence for every file.
pub fn deb(repo: &Path, name: &str, version: &str, arch: &str, fields: &[(&str, &str)]) {
    require("dpkg-deb", "dpkg");
    let root = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(root.path().join("DEBIAN")).unwrap();
    let mut control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: Berth tests <tests@berth.invalid>\nDescription: a test package\n"
    );
    let doc = root.path().join("usr/share/doc").join(name);
    fs_err::create_dir_all(&doc).unwrap();
    for (field, value) in fields {
        if *field == "License" {
            fs_err::write(
                doc.join("copyright"),
                format!("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: Berth tests\nLicense: {value}\n\nFiles: debian/*\nLicense: GPL-2+\n"),
            )
            .unwrap();
        } else {
            control.push_str(&format!("{field}: {value}\n"));
        }
    }
    fs_err::write(root.path().join("DEBIAN/control"), control).unwrap();
    fs_err::write(doc.join("README"), name).unwrap();
    fs_err::create_dir_all(repo.join("pool")).unwrap();
    run(Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(root.path())
        .arg(repo.join(format!("pool/{name}_{version}_{arch}.deb"))));
}

/// Writes suite `suite`'s Packages, Packages.gz (component `main`, amd64) and an unsigned
/// InRelease listing them, for every .deb under `<repo>/pool`.
pub fn index(repo: &Path, suite: &str) {
    require("dpkg-scanpackages", "dpkg-dev");
    let output = run(Command::new("dpkg-scanpackages")
        .args(["--multiversion", "pool", "/dev/null"])
        .current_dir(repo));
    let dir = repo.join(format!("dists/{suite}/main/binary-amd64"));
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(dir.join("Packages"), &output.stdout).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &output.stdout).unwrap();
    let gzipped = gz.finish().unwrap();
    fs_err::write(dir.join("Packages.gz"), &gzipped).unwrap();
    let mut release =
        format!("Origin: test\nSuite: {suite}\nArchitectures: amd64\nComponents: main\nSHA256:\n");
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
    fs_err::write(repo.join(format!("dists/{suite}/InRelease")), release).unwrap();
}
