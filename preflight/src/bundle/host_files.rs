//! The host collectors that write files: `run` (a program's output), `copy` (files and
//! folders, by glob) and `journald` (the journal of units), each where troubleshoot writes it.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::fields::{flag, strings, text};
use super::{Staging, command, paths};
use crate::checks;
use crate::document::Item;

pub const KINDS: [&str; 3] = ["run", "copy", "journald"];
/// The most files one `copy` collector takes.
const MAX_COPIED_FILES: usize = 10_000;
/// Inherited variables whose values a run's record shows; the others show their name alone.
const SHOWN_VARIABLES: [&str; 6] = ["PATH", "KUBECONFIG", "PWD", "HOME", "LANG", "TZ"];

pub fn collect(item: &Item, staging: &Staging) -> Result<(), String> {
    match item.kind.as_str() {
        "run" => run(&item.fields, staging),
        "copy" => copy(item, staging),
        "journald" => journald(&item.fields, staging),
        other => Err(format!("{other} is not a file collector")),
    }
}

/// The spec's timeout (a Go duration), never past the bundle's bound.
fn timeout(
    fields: &Map<String, Value>,
    default: Duration,
    cap: Duration,
) -> Result<Duration, String> {
    let given = match text(fields, "timeout") {
        Some(text) => checks::duration(text)?,
        None => default,
    };
    Ok(if given.is_zero() { cap } else { given.min(cap) })
}

/// troubleshoot's `HostRunInfo`.
fn info(command: &str, exit_code: &str, error: &str, env: Value) -> Vec<u8> {
    json!({
        "command": command,
        "exitCode": exit_code,
        "error": error,
        "outputDir": "",
        "input": "",
        "env": env,
    })
    .to_string()
    .into_bytes()
}

/// `run`: `host-collectors/run-host/<name>.txt` (stdout), `<name>-info.json`, and
/// `<name>-stderr.txt` when it wrote any; with `outputDir`, the files it left there.
fn run(fields: &Map<String, Value>, staging: &Staging) -> Result<(), String> {
    let name = paths::safe_path(text(fields, "collectorName").unwrap_or("run-host"));
    let program = text(fields, "command").ok_or("`command` is required")?;
    let args = strings(fields, "args")?;
    let limits = staging.limits();
    let timeout = timeout(fields, limits.collector_timeout, limits.collector_timeout)?;
    let work = tempfile::Builder::new()
        .prefix("berth-bundle-run-")
        .tempdir()
        .map_err(|error| error.to_string())?;
    let resolved = which::which(program)
        .map(|path| path.display().to_string())
        .unwrap_or_else(|_| program.to_string());
    let mut command = Command::new(&resolved);
    command.args(&args).current_dir(work.path());
    let inherit = strings(fields, "inheritEnvs")?;
    let ignore_parent = flag(fields, "ignoreParentEnvs");
    let mut shown: Vec<String> = Vec::new();
    if ignore_parent || !inherit.is_empty() {
        command.env_clear();
        let kept = inherit
            .iter()
            .map(String::as_str)
            .filter(|_| !ignore_parent)
            .chain(["PATH", "KUBECONFIG", "PWD"]);
        for key in kept {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, &value);
                shown.push(key.to_string());
            }
        }
    } else {
        shown.extend(std::env::vars_os().filter_map(|(key, _)| key.into_string().ok()));
    }
    let mut shown: Vec<String> = shown
        .into_iter()
        .map(|key| match std::env::var(&key) {
            Ok(value) if SHOWN_VARIABLES.contains(&key.as_str()) => format!("{key}={value}"),
            _ => format!("{key}={}", super::redact::MASK),
        })
        .collect();
    for entry in strings(fields, "env")? {
        match entry.split_once('=') {
            Some((key, value)) if !key.is_empty() && !value.is_empty() => {
                command.env(key, value);
                shown.push(format!("{key}={value}"));
            }
            _ => return Err(format!("env entry `{entry}` is not KEY=VALUE")),
        }
    }
    let output_dir = text(fields, "outputDir").map(paths::safe_name);
    if let Some(dir) = &output_dir {
        let path = work.path().join(dir);
        fs_err::create_dir_all(&path).map_err(|error| error.to_string())?;
        command.env("TS_OUTPUT_DIR", &path);
    }
    if let Some(Value::Object(input)) = fields.get("input") {
        let dir = work.path().join("input");
        fs_err::create_dir_all(&dir).map_err(|error| error.to_string())?;
        for (file, content) in input {
            if file.contains('/') || file == ".." || file == "." || file.is_empty() {
                return Err(format!("input file `{file}` is not a plain file name"));
            }
            let content = content.as_str().unwrap_or_default();
            fs_err::write(dir.join(file), content).map_err(|error| error.to_string())?;
        }
        command.env("TS_INPUT_DIR", &dir);
    }
    let described = std::iter::once(resolved.as_str())
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let ran = command::run(&mut command, timeout, limits.file_bytes)
        .map_err(|error| format!("{described}: {error}"))?;
    let folder = "host-collectors/run-host";
    staging.write(&format!("{folder}/{name}.txt"), &ran.stdout)?;
    let error = if ran.exit_code == "0" {
        String::new()
    } else {
        String::from_utf8_lossy(&ran.stderr).into_owned()
    };
    staging.write(
        &format!("{folder}/{name}-info.json"),
        &info(&described, &ran.exit_code, &error, json!(shown)),
    )?;
    if !ran.stderr.is_empty() {
        staging.write(&format!("{folder}/{name}-stderr.txt"), &ran.stderr)?;
    }
    if let Some(dir) = &output_dir {
        copy_tree(
            &work.path().join(dir),
            &format!("{folder}/{name}/{dir}"),
            staging,
            &mut Vec::new(),
            &mut 0,
        );
    }
    if ran.timed_out {
        return Err(format!(
            "{described} ran past its {}s and was killed",
            timeout.as_secs()
        ));
    }
    if ran.dropped > 0 {
        return Err(format!(
            "{described} wrote {} bytes past the {} kept",
            ran.dropped, limits.file_bytes
        ));
    }
    Ok(())
}

/// `copy`: each match of `path` (a glob) under `host-collectors/<name>/<its base name>`,
/// folders whole; what could not be read in `errors.json` beside them.
fn copy(item: &Item, staging: &Staging) -> Result<(), String> {
    let fields = &item.fields;
    let name = paths::safe_path(
        item.collector_name()
            .filter(|name| !name.is_empty())
            .unwrap_or("copy"),
    );
    let pattern = text(fields, "path").ok_or("`path` is required")?;
    let matches =
        glob::glob(pattern).map_err(|error| format!("`{pattern}` is not a glob: {error}"))?;
    let mut errors = Vec::new();
    let mut count = 0usize;
    for found in matches {
        let path = match found {
            Ok(path) => path,
            Err(error) => {
                errors.push(error.to_string());
                continue;
            }
        };
        let kept = kept_path(pattern, &path);
        copy_tree(
            &path,
            &format!("host-collectors/{name}/{kept}"),
            staging,
            &mut errors,
            &mut count,
        );
    }
    if errors.is_empty() {
        return Ok(());
    }
    let listed = serde_json::to_vec_pretty(&errors).unwrap_or_default();
    let _ = staging.write(&format!("host-collectors/{name}/errors.json"), &listed);
    Err(errors.join("; "))
}

/// Where a match goes under the collector's folder: its base name, as troubleshoot puts it;
/// but where the glob has a wildcard in a folder (`/var/lib/berth/*/*.log`), its path from
/// that folder on (`demo/container.log`), so two matches of one base name do not collide.
fn kept_path(pattern: &str, found: &Path) -> String {
    let parts: Vec<&str> = pattern.split('/').collect();
    let wild = |part: &&str| part.contains(['*', '?', '[']);
    let first_wild = parts.iter().position(wild);
    let relative = match first_wild {
        Some(index) if index + 1 < parts.len() => {
            let fixed: std::path::PathBuf = parts[..index].join("/").into();
            found.strip_prefix(&fixed).ok().map(Path::to_path_buf)
        }
        _ => None,
    };
    let relative =
        relative.unwrap_or_else(|| found.file_name().map(Into::into).unwrap_or_default());
    paths::safe_path(&relative.to_string_lossy())
}

/// Files no collector copies, whoever asks: keys (Berth's fleet key, kubeadm's), join
/// secrets, kubeconfigs with client keys, and the kernel's files that never end.
fn never_copied(path: &Path) -> Option<&'static str> {
    let text = path.to_string_lossy();
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if text.starts_with("/proc/") || text.starts_with("/sys/") || text.starts_with("/dev/") {
        return Some("a kernel file");
    }
    if name == "fleet.key"
        || name == "join.json"
        || name.ends_with(".key")
        || name.ends_with(".pem")
    {
        return Some("a key or secret of its own");
    }
    if text.contains("/etc/kubernetes/") && name.ends_with(".conf") {
        return Some("a kubeconfig with a client key");
    }
    let compressed = [".gz", ".tgz", ".zst", ".xz", ".bz2", ".zip", ".tar"];
    if compressed.iter().any(|suffix| name.ends_with(suffix)) {
        return Some("compressed, so its contents could not be redacted");
    }
    None
}

/// Copies a file, or a folder's files (links followed), to bundle path `to`.
fn copy_tree(
    from: &Path,
    to: &str,
    staging: &Staging,
    errors: &mut Vec<String>,
    count: &mut usize,
) {
    for entry in walkdir::WalkDir::new(from)
        .follow_links(true)
        .sort_by_file_name()
    {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                errors.push(error.to_string());
                continue;
            }
        };
        if !entry.file_type().is_file() {
            continue;
        }
        let real =
            fs_err::canonicalize(entry.path()).unwrap_or_else(|_| entry.path().to_path_buf());
        if let Some(why) = never_copied(&real).or_else(|| never_copied(entry.path())) {
            errors.push(format!("{} left out: {why}", entry.path().display()));
            continue;
        }
        if *count >= MAX_COPIED_FILES {
            errors.push(format!(
                "more than {MAX_COPIED_FILES} files; the rest left out"
            ));
            return;
        }
        let old_log = staging.limits().since.is_some_and(|since| {
            entry
                .path()
                .extension()
                .is_some_and(|extension| extension == "log")
                && entry
                    .metadata()
                    .ok()
                    .and_then(|metadata| metadata.modified().ok())
                    .is_some_and(|modified| modified < since)
        });
        if old_log {
            continue;
        }
        *count += 1;
        let relative = entry.path().strip_prefix(from).unwrap_or(Path::new(""));
        let mut target = to.to_string();
        for part in relative.components() {
            target.push('/');
            target.push_str(&paths::safe_name(&part.as_os_str().to_string_lossy()));
        }
        match read_tail(entry.path(), staging.limits().file_bytes) {
            Ok((bytes, cut)) => {
                if let Err(error) = staging.write(&target, &bytes) {
                    errors.push(error);
                }
                if cut > 0 {
                    errors.push(format!(
                        "{}: its first {cut} bytes left out (files keep their last {})",
                        entry.path().display(),
                        staging.limits().file_bytes
                    ));
                }
            }
            Err(error) => errors.push(format!("{}: {error}", entry.path().display())),
        }
    }
}

/// A file's last `bound` bytes (logs grow at their end) from its first whole line, and how
/// many were left out. Opened without blocking: a file that turned into a pipe is refused.
fn read_tail(path: &Path, bound: u64) -> std::io::Result<(Vec<u8>, u64)> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let length = metadata.len();
    let mut cut = length.saturating_sub(bound);
    file.seek(SeekFrom::Start(cut))?;
    let mut bytes = Vec::new();
    file.take(bound).read_to_end(&mut bytes)?;
    if cut > 0 {
        // The first line, cut, could hold part of a secret the redactors would not know.
        let start = bytes
            .iter()
            .position(|byte| *byte == b'\n')
            .map_or(bytes.len(), |at| at + 1);
        bytes.drain(..start);
        cut += start as u64;
    }
    Ok((bytes, cut))
}

/// `journald`: `journalctl` for the units asked, in `host-collectors/journald/<name>.txt`.
fn journald(fields: &Map<String, Value>, staging: &Staging) -> Result<(), String> {
    let name = text(fields, "collectorName").ok_or("collector name is required")?;
    let name = paths::safe_path(name);
    let flag = |key: &str| flag(fields, key);
    let mut args: Vec<String> = Vec::new();
    if flag("system") {
        args.push("--system".into());
    }
    if flag("dmesg") {
        args.push("--dmesg".into());
    }
    for unit in strings(fields, "units")? {
        args.extend(["-u".into(), unit]);
    }
    for (key, option) in [
        ("since", "--since"),
        ("until", "--until"),
        ("output", "--output"),
    ] {
        if let Some(value) = text(fields, key) {
            args.extend([option.into(), value.into()]);
        }
    }
    if let Some(lines) = fields
        .get("lines")
        .and_then(Value::as_i64)
        .filter(|lines| *lines > 0)
    {
        args.extend(["-n".into(), lines.to_string()]);
    }
    if flag("reverse") {
        args.push("--reverse".into());
    }
    if flag("utc") {
        args.push("--utc".into());
    }
    args.push("--no-pager".into());
    let limits = staging.limits();
    let timeout = timeout(fields, Duration::from_secs(30), limits.collector_timeout)?;
    let program = which::which("journalctl")
        .map(|path| path.display().to_string())
        .map_err(|_| "journalctl is not installed on this host".to_string())?;
    let described = format!("{program} {}", args.join(" "));
    let ran = command::run(
        Command::new(&program).args(&args),
        timeout,
        limits.file_bytes,
    )
    .map_err(|error| format!("{described}: {error}"))?;
    let exit_code = if ran.timed_out {
        "-1".to_string()
    } else {
        ran.exit_code.clone()
    };
    let folder = "host-collectors/journald";
    staging.write(&format!("{folder}/{name}.txt"), &ran.stdout)?;
    let error = if exit_code == "0" {
        String::new()
    } else {
        String::from_utf8_lossy(&ran.stderr).into_owned()
    };
    staging.write(
        &format!("{folder}/{name}-info.json"),
        &info(&described, &exit_code, &error, Value::Null),
    )?;
    if !ran.stderr.is_empty() {
        staging.write(&format!("{folder}/{name}-stderr.txt"), &ran.stderr)?;
    }
    if ran.timed_out {
        return Err(format!(
            "{described} ran past its {}s and was killed",
            timeout.as_secs()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_keep_their_base_name_unless_a_folder_was_a_wildcard() {
        assert_eq!(
            kept_path("/var/log/berth/*", Path::new("/var/log/berth/hooks.log")),
            "hooks.log"
        );
        assert_eq!(
            kept_path(
                "/r/var/lib/berth/*/*.log",
                Path::new("/r/var/lib/berth/demo/container.log")
            ),
            "demo/container.log"
        );
        assert_eq!(
            kept_path("/etc/os-release", Path::new("/etc/os-release")),
            "os-release"
        );
    }
}
