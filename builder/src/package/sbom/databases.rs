//! The OS packages an image's package databases list, as CycloneDX components: dpkg's
//! `status` (and distroless `status.d/`), apk's `installed`, and rpm's database (SQLite,
//! Berkeley DB or NDB, read by the `rpm` program itself, which knows all three), each package
//! URL namespaced by the image's `os-release`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::percent;

/// rpm's database files, by the backend that reads them.
const RPM_DATABASES: [(&str, &str); 3] = [
    ("rpmdb.sqlite", "sqlite"),
    ("Packages", "bdb_ro"),
    ("Packages.db", "ndb"),
];
/// The folders rpm keeps its database in.
const RPM_FOLDERS: [&str; 2] = ["var/lib/rpm/", "usr/lib/sysimage/rpm/"];

/// Whether `path` (in a layer) is a file of an rpm database.
pub(super) fn is_rpm_database(path: &str) -> bool {
    RPM_FOLDERS.iter().any(|folder| {
        path.strip_prefix(folder).is_some_and(|file| {
            RPM_DATABASES.iter().any(|(name, _)| *name == file)
                || file == "rpmdb.sqlite-wal"
                || file == "rpmdb.sqlite-shm"
        })
    })
}

/// The OS an image's `os-release` names: its `ID` (the package URLs' namespace) and
/// `ID-VERSION_ID` (their `distro` qualifier).
#[derive(Debug, Default, PartialEq)]
pub(super) struct OsRelease {
    pub id: String,
    pub distro: String,
}

pub(super) fn os_release(text: &str) -> OsRelease {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix('='))
            .map(|value| value.trim().trim_matches(['"', '\'']).to_string())
            .unwrap_or_default()
    };
    let (id, version) = (field("ID"), field("VERSION_ID"));
    OsRelease {
        distro: match (id.is_empty(), version.is_empty()) {
            (false, false) => format!("{id}-{version}"),
            _ => id.clone(),
        },
        id,
    }
}

/// The image's OS packages from its layers' files (by path, the last layer's file winning):
/// the components, and notes on what could not be read.
pub(super) fn os_packages(files: &BTreeMap<String, &Vec<u8>>) -> (Vec<Value>, Vec<String>) {
    let text = |path: &str| files.get(path).map(|bytes| String::from_utf8_lossy(bytes));
    let release = text("etc/os-release")
        .or_else(|| text("usr/lib/os-release"))
        .map(|text| os_release(&text))
        .unwrap_or_default();
    let mut notes = Vec::new();
    let mut dpkg = text("var/lib/dpkg/status")
        .map(|text| text.into_owned())
        .unwrap_or_default();
    for (path, bytes) in files {
        if path.starts_with("var/lib/dpkg/status.d/") {
            dpkg.push_str("\n\n");
            dpkg.push_str(&String::from_utf8_lossy(bytes));
        }
    }
    let mut packages = dpkg_packages(&dpkg, &release);
    if let Some(installed) = text("lib/apk/db/installed") {
        packages.extend(apk_packages(&installed, &release));
    }
    for folder in RPM_FOLDERS {
        let database: BTreeMap<&str, &Vec<u8>> = files
            .iter()
            .filter_map(|(path, bytes)| Some((path.strip_prefix(folder)?, *bytes)))
            .collect();
        if database.is_empty() {
            continue;
        }
        match rpm_packages(&database, &release) {
            Ok(found) => packages.extend(found),
            Err(why) => notes.push(format!("the rpm database in /{folder}: {why}")),
        }
    }
    (packages, notes)
}

/// A field of a package database's stanza (`Package: x` in dpkg's, `P:x` in apk's).
pub(super) fn stanza_field<'a>(stanza: &'a str, name: &str) -> &'a str {
    stanza
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map_or("", str::trim)
}

/// A package URL's qualifiers: `arch`, then `distro` where the OS is known.
fn qualifiers(arch: &str, release: &OsRelease, extra: &str) -> String {
    let mut out = format!("?arch={}", percent(arch));
    if !extra.is_empty() {
        out.push('&');
        out.push_str(extra);
    }
    if !release.distro.is_empty() {
        out.push_str(&format!("&distro={}", percent(&release.distro)));
    }
    out
}

fn namespace<'a>(release: &'a OsRelease, default: &'a str) -> &'a str {
    if release.id.is_empty() {
        default
    } else {
        &release.id
    }
}

/// A licence as CycloneDX takes any text: by name (an SPDX id is not assumed).
pub(super) fn licences(names: &[String]) -> Value {
    names
        .iter()
        .map(|name| json!({"license": {"name": name}}))
        .collect()
}

/// The installed packages of a dpkg `status` text.
pub(super) fn dpkg_packages(text: &str, release: &OsRelease) -> Vec<Value> {
    let mut out = Vec::new();
    for paragraph in text.split("\n\n") {
        let field = |name: &str| stanza_field(paragraph, name);
        let (name, version) = (field("Package"), field("Version"));
        let status = field("Status");
        if name.is_empty()
            || version.is_empty()
            || (!status.is_empty() && !status.ends_with(" installed"))
        {
            continue;
        }
        let arch = field("Architecture");
        let mut component = json!({
            "type": "library",
            "bom-ref": format!("deb:{name}@{version}:{arch}"),
            "name": name,
            "version": version,
            "purl": format!(
                "pkg:deb/{}/{name}@{}{}",
                namespace(release, "debian"),
                percent(version),
                qualifiers(arch, release, "")
            ),
        });
        let source = field("Source");
        if !source.is_empty() {
            component["properties"] = json!([{"name": "berth:source", "value": source}]);
        }
        out.push(component);
    }
    out
}

/// The packages of an apk `installed` database.
pub(super) fn apk_packages(text: &str, release: &OsRelease) -> Vec<Value> {
    let mut out = Vec::new();
    for paragraph in text.split("\n\n") {
        let field = |name: &str| stanza_field(paragraph, name);
        let (name, version, arch) = (field("P"), field("V"), field("A"));
        if name.is_empty() || version.is_empty() {
            continue;
        }
        let mut component = json!({
            "type": "library",
            "bom-ref": format!("apk:{name}@{version}:{arch}"),
            "name": name,
            "version": version,
            "purl": format!(
                "pkg:apk/{}/{name}@{}{}",
                namespace(release, "alpine"),
                percent(version),
                qualifiers(arch, release, "")
            ),
        });
        let licence = field("L");
        if !licence.is_empty() {
            component["licenses"] = licences(&[licence.to_string()]);
        }
        let origin = field("o");
        if !origin.is_empty() {
            component["properties"] = json!([{"name": "berth:source", "value": origin}]);
        }
        out.push(component);
    }
    out
}

/// The packages of an rpm database (its files by name), as `rpm` itself reads them.
fn rpm_packages(
    database: &BTreeMap<&str, &Vec<u8>>,
    release: &OsRelease,
) -> Result<Vec<Value>, String> {
    let backend = RPM_DATABASES
        .iter()
        .find(|(name, _)| database.contains_key(name))
        .map(|(_, backend)| *backend)
        .ok_or("no Packages or rpmdb.sqlite file")?;
    let rpm = crate::process::find_program("rpm", "rpm").map_err(|error| error.to_string())?;
    let folder = tempfile::tempdir().map_err(|error| error.to_string())?;
    for (name, bytes) in database {
        fs_err::write(folder.path().join(name), bytes).map_err(|error| error.to_string())?;
    }
    const FORMAT: &str =
        "%{NAME}\\t%{EPOCHNUM}\\t%{VERSION}\\t%{RELEASE}\\t%{ARCH}\\t%{LICENSE}\\t%{SOURCERPM}\\n";
    let arguments: Vec<std::ffi::OsString> = vec![
        "--dbpath".into(),
        folder.path().into(),
        "--define".into(),
        format!("_db_backend {backend}").into(),
        "-qa".into(),
        "--queryformat".into(),
        FORMAT.into(),
    ];
    let stdout = crate::process::run(&rpm, arguments)
        .map_err(|error| format!("rpm could not read it: {error}"))?;
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&stdout).lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, epoch, version, rpm_release, arch, licence, source] = fields[..] else {
            continue;
        };
        if name == "gpg-pubkey" {
            // A key rpm imported, not a package.
            continue;
        }
        let full = format!("{version}-{rpm_release}");
        let epoch_qualifier = if epoch == "0" {
            String::new()
        } else {
            format!("epoch={}", percent(epoch))
        };
        let mut component = json!({
            "type": "library",
            "bom-ref": format!("rpm:{name}@{epoch}:{full}:{arch}"),
            "name": name,
            "version": if epoch == "0" { full.clone() } else { format!("{epoch}:{full}") },
            "purl": format!(
                "pkg:rpm/{}/{name}@{}{}",
                namespace(release, "redhat"),
                percent(&full),
                qualifiers(arch, release, &epoch_qualifier)
            ),
        });
        if !licence.is_empty() && licence != "(none)" {
            component["licenses"] = licences(&[licence.to_string()]);
        }
        if !source.is_empty() && source != "(none)" {
            component["properties"] = json!([{"name": "berth:source", "value": source}]);
        }
        out.push(component);
    }
    out.sort_by(|a, b| a["bom-ref"].as_str().cmp(&b["bom-ref"].as_str()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn databases_read_as_their_tools_read_them() {
        let debian = os_release(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n",
        );
        assert_eq!(debian.distro, "debian-12");
        let dpkg = "Package: base-files\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.4+deb12u5\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n\nPackage: libc6\nStatus: install ok installed\nArchitecture: amd64\nSource: glibc\nVersion: 2.36-9+deb12u4\n";
        let packages = dpkg_packages(dpkg, &debian);
        assert_eq!(packages.len(), 2);
        assert_eq!(
            packages[1]["purl"],
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12"
        );
        let alpine = os_release("NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.19.1\n");
        let apk = "C:Q1x\nP:musl\nV:1.2.4-r2\nA:x86_64\nL:MIT\no:musl\n\nP:busybox\nV:1.36.1-r5\nA:x86_64\nL:GPL-2.0-only\n";
        let packages = apk_packages(apk, &alpine);
        assert_eq!(packages[0]["licenses"][0]["license"]["name"], "MIT");
        assert_eq!(
            packages[1]["purl"],
            "pkg:apk/alpine/busybox@1.36.1-r5?arch=x86_64&distro=alpine-3.19.1"
        );
        assert!(is_rpm_database("var/lib/rpm/rpmdb.sqlite"));
        assert!(is_rpm_database("usr/lib/sysimage/rpm/Packages"));
        assert!(!is_rpm_database("var/lib/rpm/Basenames"));
    }
}
