//! rpm repositories made by a test: packages built with `rpmbuild` from a minimal spec,
//! indexed with `createrepo_c`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::{require, run};

/// Builds `<repo>/Packages/<name>-<version>.<arch>.rpm`. `evr` is `[epoch:]version-release`;
/// `fields` are spec tags (`Requires`, `Provides`, `Conflicts`, `Obsoletes`, …), and `File`
/// adds a file at that path; `License` replaces the default MIT. Every package holds `/usr/share/doc/<name>/README`.
pub fn rpm(repo: &Path, name: &str, evr: &str, arch: &str, fields: &[(&str, &str)]) {
    let rpmbuild = require("rpmbuild", "rpm");
    let (epoch, version_release) = match evr.split_once(':') {
        Some((epoch, rest)) => (Some(epoch), rest),
        None => (None, evr),
    };
    let (version, release) = version_release
        .rsplit_once('-')
        .expect("evr is [epoch:]version-release");
    let licence = fields
        .iter()
        .find(|(field, _)| *field == "License")
        .map_or("MIT", |(_, value)| *value);
    let mut spec = format!(
        "Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: a test package\nLicense: {licence}\nBuildArch: {arch}\nAutoReqProv: no\n"
    );
    if let Some(epoch) = epoch {
        writeln!(spec, "Epoch: {epoch}").unwrap();
    }
    let mut files = vec![format!("/usr/share/doc/{name}/README")];
    for (field, value) in fields {
        if *field == "File" {
            files.push(value.to_string());
        } else if *field != "License" {
            writeln!(spec, "{field}: {value}").unwrap();
        }
    }
    spec.push_str("\n%description\na test package\n\n%install\n");
    for file in &files {
        let parent = Path::new(file).parent().unwrap().display().to_string();
        writeln!(
            spec,
            "mkdir -p %{{buildroot}}{parent}\necho {name} > %{{buildroot}}{file}"
        )
        .unwrap();
    }
    spec.push_str("\n%files\n");
    for file in &files {
        writeln!(spec, "{file}").unwrap();
    }
    let top = tempfile::tempdir().unwrap();
    let spec_path = top.path().join(format!("{name}.spec"));
    fs_err::write(&spec_path, spec).unwrap();
    let packages = repo.join("Packages");
    fs_err::create_dir_all(&packages).unwrap();
    run(Command::new(rpmbuild)
        .arg("-bb")
        .arg("--quiet")
        .args(["--define", &format!("_topdir {}", top.path().display())])
        .args(["--define", &format!("_rpmdir {}", packages.display())])
        .args([
            "--define",
            "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm",
        ])
        .args(["--define", "debug_package %{nil}"])
        .args(["--define", "_build_id_links none"])
        .arg(&spec_path));
}

/// Writes `<repo>/repodata/` for every rpm under `<repo>`, with `createrepo_c`; `compression`
/// is its `--general-compress-type` (`gz`, `xz`, `zstd`).
pub fn createrepo(repo: &Path, compression: &str) {
    let createrepo = require("createrepo_c", "createrepo-c");
    run(Command::new(createrepo)
        .args([
            "--quiet",
            "--no-database",
            "--general-compress-type",
            compression,
        ])
        .arg(repo));
}
