//! `berth-build check`: the lint a vendor's CI runs on every pull request. Every Manifest under
//! the given paths is parsed and its local paths resolved; every `fields.yaml` declaration and
//! `health.yaml` file is read; every `install.sh` is checked with `bash -n`. All problems are reported, each with its
//! file and line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use berth_formats::manifest::{Manifest, ReadError};

use crate::process::{self, ProcessError};
use crate::source::repository;

/// What `check` looked at and found.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub manifests: usize,
    pub scripts: usize,
    /// One message per problem, each starting with `file:line:` where there is a line.
    pub problems: Vec<String>,
}

/// Checks every Manifest and `install.sh` below `paths` (files or folders).
pub fn check(paths: &[PathBuf]) -> Result<CheckReport, ProcessError> {
    let bash = process::find_program("bash", "bash")?;
    let mut report = CheckReport::default();
    for path in paths {
        if !path.exists() {
            report
                .problems
                .push(format!("{}: no such file or folder", path.display()));
            continue;
        }
        for root in repository::package_roots(path) {
            check_below(&root, &bash, &mut report);
        }
    }
    Ok(report)
}

/// Checks every Manifest and `install.sh` below `path`, but for kURL's `template/` folders.
fn check_below(path: &Path, bash: &Path, report: &mut CheckReport) {
    let mut walk = walkdir::WalkDir::new(path).sort_by_file_name().into_iter();
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                report.problems.push(format!("{}: {error}", path.display()));
                continue;
            }
        };
        // kURL's generators of new add-on versions are templates, not packages.
        if entry.file_type().is_dir() && repository::is_template(entry.path()) {
            walk.skip_current_dir();
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        match entry.file_name().to_str() {
            Some("Manifest") => {
                report.manifests += 1;
                check_manifest(entry.path(), &mut report.problems);
            }
            Some(berth_formats::fields::FIELDS_FILE) => {
                let folder = entry.path().parent().unwrap_or(Path::new("."));
                if let Err(error) = crate::source::addon::read_fields(folder) {
                    report.problems.push(berth_formats::report::render(&error));
                }
            }
            Some(berth_formats::health::HEALTH_FILE) => {
                let folder = entry.path().parent().unwrap_or(Path::new("."));
                if let Err(error) = crate::source::addon::check_health(folder) {
                    report.problems.push(berth_formats::report::render(&error));
                }
            }
            Some("install.sh") => {
                report.scripts += 1;
                let arguments: Vec<OsString> = vec!["-n".into(), entry.path().into()];
                if let Err(error) = process::run(bash, arguments) {
                    let message = match error {
                        ProcessError::Failed { tail, .. } => tail,
                        other => other.to_string(),
                    };
                    report.problems.push(message.trim().to_string());
                }
            }
            _ => {}
        }
    }
}

fn check_manifest(path: &Path, problems: &mut Vec<String>) {
    let manifest = match Manifest::read(path) {
        Ok(manifest) => manifest,
        Err(ReadError::Invalid(errors)) => {
            problems.extend(errors.0.iter().map(ToString::to_string));
            return;
        }
        Err(ReadError::Io(error)) => {
            problems.push(format!("{}: {error}", path.display()));
            return;
        }
    };
    let folder = path.parent().unwrap_or(Path::new("."));
    match repository::locate(folder) {
        Ok(location) => {
            if let Err(errors) = manifest.check_paths(&location.repository_root) {
                problems.extend(errors.0.iter().map(ToString::to_string));
            }
        }
        Err(_) => problems.push(format!(
            "{}: not inside a package folder (`addons/<name>/<version>/`, `packages/kubernetes/<version>/`, `packages/host/<name>/`), so its paths cannot be resolved\nhint: move the add-on to addons/<name>/<version>/",
            path.display()
        )),
    }
}
