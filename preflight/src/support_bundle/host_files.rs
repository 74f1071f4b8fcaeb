//! The host collectors that write files: `run` (a program's output), `copy` (files and
//! folders, by glob) and `journald` (the journal of units), each where troubleshoot writes it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
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
        let written = work.path().join(dir);
        copy_tree(
            &written,
            &written,
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
/// folders whole; what could not be read in `errors.json` beside them. Nothing outside what
/// the path names is read: the folder the glob lists (`/var/log/berth` for
/// `/var/log/berth/*`), or the path itself when it has no wildcard (its link followed, as the
/// spec named it: `/etc/os-release`). A link that leads out of it is left out, and said to be.
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
    let listed = listed_folder(pattern);
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
            listed.as_deref().unwrap_or(&path),
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

/// The folder a glob lists: its part before the first wildcard (`/var/lib/berth` for
/// `/var/lib/berth/*/*.log`); `None` for a path with no wildcard.
fn listed_folder(pattern: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = pattern.split('/').collect();
    let first_wild = parts
        .iter()
        .position(|part| part.contains(['*', '?', '[']))?;
    let fixed = parts[..first_wild].join("/");
    Some(PathBuf::from(match fixed.as_str() {
        "" if pattern.starts_with('/') => "/",
        "" => ".",
        _ => &fixed,
    }))
}

/// The kernel's filesystem a file or folder is on, by the filesystem's type (wherever it is
/// mounted): its files are the kernel's state, never a node's records; some never end, some
/// block, some change the kernel as they are read.
fn kernel_filesystem(stats: &nix::sys::statfs::Statfs) -> Option<&'static str> {
    use nix::sys::statfs::{self as fs, FsType};
    let kinds = [
        (fs::PROC_SUPER_MAGIC, "proc"),
        (fs::SYSFS_MAGIC, "sysfs"),
        (fs::DEVPTS_SUPER_MAGIC, "devpts"),
        (fs::DEBUGFS_MAGIC, "debugfs"),
        (fs::TRACEFS_MAGIC, "tracefs"),
        (fs::SECURITYFS_MAGIC, "securityfs"),
        (fs::CGROUP_SUPER_MAGIC, "cgroup"),
        (fs::CGROUP2_SUPER_MAGIC, "cgroup2"),
        (fs::BPF_FS_MAGIC, "bpf"),
        (fs::SELINUX_MAGIC, "selinuxfs"),
        (fs::SMACK_MAGIC, "smackfs"),
        (fs::NSFS_MAGIC, "nsfs"),
        (fs::RDTGROUP_SUPER_MAGIC, "resctrl"),
        (FsType(0x6265_6570), "configfs"),
        (FsType(0xde5e_81e4), "efivarfs"),
        (FsType(0x6165_676c), "pstore"),
    ];
    let kind = stats.filesystem_type();
    kinds
        .into_iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| name)
}

/// Files no collector copies, whoever asks: keys (Berth's fleet key, kubeadm's), join
/// secrets, kubeconfigs with client keys. (The kernel's files are told by their filesystem:
/// [`kernel_filesystem`].)
fn never_copied(path: &Path) -> Option<&'static str> {
    let text = path.to_string_lossy();
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
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

/// Copies a file, or a folder's files, to bundle path `to`, reading nothing outside `within`
/// (what the spec names: the folder a glob lists, or the path itself): a link is followed
/// only to a file inside it, and is left out (and said to be) when it leads out; nothing on
/// one of the kernel's filesystems is read.
fn copy_tree(
    from: &Path,
    within: &Path,
    to: &str,
    staging: &Staging,
    errors: &mut Vec<String>,
    count: &mut usize,
) {
    // A path the spec names is taken as its link leads (`/etc/os-release`), if root made the
    // link or its maker owns what it leads to: it shows nothing its maker could not read.
    if within == from
        && fs_err::symlink_metadata(from).is_ok_and(|link| link.is_symlink())
        && !trusted_link(from)
    {
        errors.push(format!(
            "{} left out: a link another user made to a file not theirs",
            from.display()
        ));
        return;
    }
    let (within, start) = match (fs_err::canonicalize(within), fs_err::canonicalize(from)) {
        (Ok(within), Ok(start)) => (within, start),
        (Err(error), _) | (_, Err(error)) => {
            errors.push(error.to_string());
            return;
        }
    };
    if !start.starts_with(&within) {
        errors.push(link_out(from, &start, &within));
        return;
    }
    let mut walk = walkdir::WalkDir::new(&start)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                errors.push(error.to_string());
                continue;
            }
        };
        let relative = entry.path().strip_prefix(&start).unwrap_or(Path::new(""));
        // As the spec named it.
        let shown = if relative.as_os_str().is_empty() {
            from.to_path_buf()
        } else {
            from.join(relative)
        };
        let file_type = entry.file_type();
        if file_type.is_dir() {
            if let Some(kind) = nix::sys::statfs::statfs(entry.path())
                .ok()
                .as_ref()
                .and_then(kernel_filesystem)
            {
                errors.push(format!(
                    "{} left out: the kernel's {kind} filesystem",
                    shown.display()
                ));
                walk.skip_current_dir();
            }
            continue;
        }
        let source = if file_type.is_symlink() {
            match fs_err::canonicalize(entry.path()) {
                Ok(target) if !target.starts_with(&within) => {
                    errors.push(link_out(&shown, &target, &within));
                    continue;
                }
                // A link to a folder inside: its files are collected as they are.
                Ok(target) if target.is_dir() => continue,
                Ok(target) => target,
                Err(error) => {
                    errors.push(format!("{}: {error}", shown.display()));
                    continue;
                }
            }
        } else if file_type.is_file() {
            entry.path().to_path_buf()
        } else {
            continue;
        };
        if let Some(why) = never_copied(&source).or_else(|| never_copied(&shown)) {
            errors.push(format!("{} left out: {why}", shown.display()));
            continue;
        }
        if *count >= MAX_COPIED_FILES {
            errors.push(format!(
                "more than {MAX_COPIED_FILES} files; the rest left out"
            ));
            return;
        }
        let old_log = staging.limits().since.is_some_and(|since| {
            shown
                .extension()
                .is_some_and(|extension| extension == "log")
                && fs_err::symlink_metadata(&source)
                    .ok()
                    .and_then(|metadata| metadata.modified().ok())
                    .is_some_and(|modified| modified < since)
        });
        if old_log {
            continue;
        }
        *count += 1;
        let mut target = to.to_string();
        for part in relative.components() {
            target.push('/');
            target.push_str(&paths::safe_name(&part.as_os_str().to_string_lossy()));
        }
        match read_tail(&source, &within, staging.limits().file_bytes) {
            Ok((bytes, cut)) => {
                if let Err(error) = staging.write(&target, &bytes) {
                    errors.push(error);
                }
                if cut > 0 {
                    errors.push(format!(
                        "{}: its first {cut} bytes left out (files keep their last {})",
                        shown.display(),
                        staging.limits().file_bytes
                    ));
                }
            }
            Err(error) => errors.push(format!("{}: {error}", shown.display())),
        }
    }
}

/// Whether the link `link` was made by root, or by the owner of what it leads to.
fn trusted_link(link: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (fs_err::symlink_metadata(link), fs_err::metadata(link)) {
        (Ok(made), Ok(target)) => made.uid() == 0 || made.uid() == target.uid(),
        _ => false,
    }
}

/// What is said of a link left out.
fn link_out(link: &Path, target: &Path, within: &Path) -> String {
    format!(
        "{} left out: a link to {}, outside {} (links are followed only inside what is collected)",
        link.display(),
        target.display(),
        within.display()
    )
}

/// A file's last `bound` bytes (logs grow at their end) from its first whole line, and how
/// many were left out. The file is taken as it is when opened, whatever changes after: opened
/// without following a link at its end and without reading it (`O_PATH`: a device is not
/// opened), it must be a regular file, on none of the kernel's filesystems, and (where
/// `/proc` tells) inside `within` (a folder on its way swapped for a link is caught); only
/// then is that file opened for reading, without blocking.
fn read_tail(path: &Path, within: &Path, bound: u64) -> std::io::Result<(Vec<u8>, u64)> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    use std::os::fd::AsRawFd as _;
    let pinned = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_NOFOLLOW)
        .open(path)?;
    let metadata = pinned.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    // (Kernels before 3.12 tell no filesystem of an `O_PATH` file: the path is asked then.)
    if let Some(kind) = nix::sys::statfs::fstatfs(pinned.file())
        .or_else(|_| nix::sys::statfs::statfs(path))
        .ok()
        .as_ref()
        .and_then(kernel_filesystem)
    {
        return Err(std::io::Error::other(format!(
            "on the kernel's {kind} filesystem"
        )));
    }
    let opened = PathBuf::from(format!("/proc/self/fd/{}", pinned.file().as_raw_fd()));
    if let Ok(real) = fs_err::read_link(&opened)
        && !real.starts_with(within)
    {
        return Err(std::io::Error::other(format!(
            "reached through a link to {}, outside {}",
            real.display(),
            within.display()
        )));
    }
    // The pinned file itself (through /proc), or where there is no /proc the path again,
    // taken only if it is still that file.
    let mut file = match fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&opened)
    {
        Ok(file) => file,
        Err(_) => fs_err::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
            .open(path)?,
    };
    let again = file.metadata()?;
    {
        use std::os::unix::fs::MetadataExt as _;
        if (again.dev(), again.ino()) != (metadata.dev(), metadata.ino()) {
            return Err(std::io::Error::other("it changed while it was read"));
        }
    }
    let length = again.len();
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
    use std::collections::BTreeMap;

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

    /// A `copy` collector over `pattern`, into a fresh staging folder: the files it wrote (by
    /// bundle path, with their text) and what it said.
    fn copied(pattern: &str) -> (BTreeMap<String, String>, String) {
        let folder = tempfile::tempdir().unwrap();
        let staging = Staging::new(
            &folder.path().join("bundle"),
            super::super::redact::Redactor::default(),
            super::super::BundleLimits::default(),
        )
        .unwrap();
        let item = Item {
            kind: "copy".into(),
            line: None,
            fields: json!({"collectorName": "c", "path": pattern})
                .as_object()
                .unwrap()
                .clone(),
        };
        let said = copy(&item, &staging).err().unwrap_or_default();
        let files = staging
            .files()
            .into_keys()
            .map(|path| {
                let text = fs_err::read_to_string(staging.root().join(&path)).unwrap();
                (path, text)
            })
            .collect();
        (files, said)
    }

    /// A writer of a collected folder cannot get a file from outside it (`/etc/shadow`, a
    /// credentials folder) into root's bundle through a link: links are followed only to files
    /// inside what is collected, and those that lead out are left out and said to be.
    #[test]
    fn copy_follows_no_link_out_of_what_it_collects() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs_err::create_dir_all(root.join("secret")).unwrap();
        fs_err::write(root.join("secret/creds"), "the-shadow-line\n").unwrap();
        let collected = root.join("collected");
        fs_err::create_dir_all(collected.join("sub")).unwrap();
        fs_err::write(collected.join("a.log"), "plain\n").unwrap();
        let link = |target: &str, at: &str| {
            fs_err::os::unix::fs::symlink(target, collected.join(at)).unwrap();
        };
        link("a.log", "inner.log");
        link("../secret/creds", "shadow");
        link("../secret", "credentials");
        link("../../secret/creds", "sub/deeper");
        link(root.join("secret/creds").to_str().unwrap(), "absolute");
        for pattern in [
            collected.display().to_string(),
            format!("{}/*", collected.display()),
        ] {
            let (files, said) = copied(&pattern);
            for (path, text) in &files {
                assert!(!text.contains("the-shadow-line"), "{pattern}: {path}");
            }
            let names: Vec<&str> = files.keys().map(String::as_str).collect();
            assert!(
                names.iter().any(|name| name.ends_with("/a.log"))
                    && names.iter().any(|name| name.ends_with("/inner.log")),
                "{pattern}: {names:?}"
            );
            assert_eq!(
                files
                    .iter()
                    .find(|(name, _)| name.ends_with("/inner.log"))
                    .unwrap()
                    .1,
                "plain\n"
            );
            for name in ["shadow", "credentials", "deeper", "absolute"] {
                assert!(
                    said.contains(&format!("{name} left out: a link to")),
                    "{pattern}: {name}: {said}"
                );
            }
        }
        // A link a glob matches that leads out is left out too.
        let (files, said) = copied(&format!("{}/sha*", collected.display()));
        assert!(files.is_empty() || !files.values().any(|text| text.contains("shadow-line")));
        assert!(said.contains("shadow left out: a link to"), "{said}");
        // A path the spec names is taken as its link leads (as /etc/os-release is a link),
        // unless another user made the link to a file not theirs.
        let named = collected.join("shadow").display().to_string();
        let (files, _) = copied(&named);
        assert_eq!(files.values().next().unwrap(), "the-shadow-line\n");
        if std::os::unix::fs::lchown(collected.join("shadow"), Some(4321), None).is_ok() {
            let (files, said) = copied(&named);
            assert!(
                files.keys().all(|name| name.ends_with("/errors.json")),
                "{files:?}"
            );
            assert!(said.contains("a link another user made"), "{said}");
        }
    }

    /// The kernel's filesystems are told by their type, wherever they are mounted.
    #[test]
    fn kernel_filesystems_are_told_by_their_type_not_their_path() {
        let kind = |path: &str| {
            nix::sys::statfs::statfs(path)
                .ok()
                .as_ref()
                .and_then(kernel_filesystem)
        };
        assert_eq!(kind("/proc"), Some("proc"));
        assert_eq!(kind("/sys"), Some("sysfs"));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(kind(dir.path().to_str().unwrap()), None);
        // A procfs mounted elsewhere (where this test may mount one).
        let collected = dir.path().join("collected");
        let kernel = collected.join("kernel");
        fs_err::create_dir_all(&kernel).unwrap();
        fs_err::write(collected.join("plain.txt"), "plain\n").unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "proc", "proc"])
            .arg(&kernel)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            eprintln!("no procfs could be mounted here (not root?): that part is not tried");
            return;
        }
        struct Unmount(PathBuf);
        impl Drop for Unmount {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(&self.0)
                    .status();
            }
        }
        let _unmount = Unmount(kernel.clone());
        assert_eq!(kind(kernel.to_str().unwrap()), Some("proc"));
        for pattern in [
            collected.display().to_string(),
            format!("{}/*", collected.display()),
            format!("{}/self/status", kernel.display()),
        ] {
            let (files, said) = copied(&pattern);
            assert!(
                files
                    .keys()
                    .all(|name| name.ends_with("/plain.txt") || name.ends_with("/errors.json")),
                "{pattern}: {:?}",
                files.keys().collect::<Vec<_>>()
            );
            assert!(
                said.contains("kernel's proc filesystem"),
                "{pattern}: {said}"
            );
        }
    }

    #[test]
    fn a_glob_lists_the_folder_before_its_first_wildcard() {
        assert_eq!(
            listed_folder("/var/lib/berth/*/*.log"),
            Some(PathBuf::from("/var/lib/berth"))
        );
        assert_eq!(
            listed_folder("/var/log/berth/*"),
            Some("/var/log/berth".into())
        );
        assert_eq!(listed_folder("/*"), Some("/".into()));
        assert_eq!(listed_folder("*.log"), Some(".".into()));
        assert_eq!(listed_folder("/etc/os-release"), None);
    }
}
