//! What the test dists share: `berth-build build` over a repository folder for Debian
//! releases whose packages all come from one apt mirror (a loopback server of the test's).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use crate::printed;

/// Writes a distros file (`berth-build --distros`) at `path` naming each (distro, Debian
/// suite) of `releases`, every one read from `mirror`, for amd64.
pub fn distros_file(path: &Path, mirror: &str, releases: &[(&str, &str)]) -> Result<(), String> {
    let mut text = String::from("distros:\n");
    for (name, suite) in releases {
        text.push_str(&format!(
            "  - name: {name}\n    format: deb\n    mirrors: [{mirror}]\n    suite: {suite}\n    components: [main]\n    architecture: amd64\n    directives: [apt]\n"
        ));
    }
    fs_err::write(path, text).map_err(|error| error.to_string())
}

/// Runs `builder build REPOSITORY --out DIST --cache-dir CACHE --distros DISTROS OPTIONS…`;
/// fails with what the builder printed.
pub fn build<Option: AsRef<OsStr>>(
    builder: &Path,
    repository: &Path,
    dist: &Path,
    cache: &Path,
    distros: &Path,
    options: impl IntoIterator<Item = Option>,
) -> Result<(), String> {
    let output = Command::new(builder)
        .arg("build")
        .arg(repository)
        .arg("--out")
        .arg(dist)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--distros")
        .arg(distros)
        .args(options)
        .output()
        .map_err(|error| error.to_string())?;
    if !output.status.success() {
        return Err(format!("berth-build: {}", printed(&output)));
    }
    Ok(())
}
