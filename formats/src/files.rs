//! How Berth writes its own files: so that a crash leaves either the old file or the
//! new one, and, where they may hold a secret, readable by root alone; and how it reads a
//! file someone else wrote: never more of it than it can hold.

use std::io::Write as _;
use std::path::Path;

/// Reads the text of `path`, refusing a file of more than `max` bytes (read no further) or one
/// that is not UTF-8.
pub fn read_to_string_at_most(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    fs_err::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    let invalid = |problem: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {problem}", path.display()),
        )
    };
    if bytes.len() as u64 > max {
        return Err(invalid(format!("more than {max} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))
}

/// Room kept free on a node's disk when Berth writes something large there: a package
/// downloaded or unpacked, a node's support bundle received.
pub const DISK_RESERVE: u64 = 64 << 20;

/// Bytes free for an unprivileged writer on the filesystem holding `path` (all of them when
/// it cannot be told).
pub fn free_space(path: &Path) -> u64 {
    nix::sys::statvfs::statvfs(path).map_or(u64::MAX, |stats| {
        stats.blocks_available() * stats.fragment_size()
    })
}

/// Creates `dir` if needed and makes it 0700: what is in it is root's alone.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    fs_err::create_dir_all(dir)?;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one; a file
/// that already holds them is left alone.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with_mode(path, bytes, 0o666)
}

/// The same, the file created with `mode` (less the umask): 0o600 keeps secrets from other
/// users, even while the file is written.
pub fn write_atomically_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, bytes, mode, true)
}

/// Replaces `path` with `bytes` as [`write_atomically`] does, without waiting for the disk:
/// readers see the old file or the new one, never a mix, but a crash may lose the new one
/// (or, on some filesystems, leave it empty). For a record of what happened last that may be
/// lost, written on every run: a sync waits for whatever else the disk has to write.
pub fn replace_unsynced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, 0o666, false)
}

fn replace(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> std::io::Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    // The same bytes already there, with no permission beyond `mode`, are left as they are: an
    // unchanged run syncs nothing to disk.
    if let Ok(existing) = fs_err::symlink_metadata(path)
        && existing.is_file()
        && existing.len() == bytes.len() as u64
        && existing.permissions().mode() & 0o7777 & !mode == 0
        && fs_err::read(path).is_ok_and(|old| old == bytes)
    {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    fs_err::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    // A leftover temporary file would keep its own mode: it goes first.
    let _ = fs_err::remove_file(&temporary);
    let mut file = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    fs_err::rename(&temporary, path)?;
    if sync {
        fs_err::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("last.json");
        for (text, synced) in [
            ("one", true),
            ("two", false),
            ("three", false),
            ("four", true),
        ] {
            if synced {
                write_atomically(&path, text.as_bytes()).unwrap();
            } else {
                replace_unsynced(&path, text.as_bytes()).unwrap();
            }
            assert_eq!(fs_err::read_to_string(&path).unwrap(), text);
            let names: Vec<_> = fs_err::read_dir(dir.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name())
                .collect();
            assert_eq!(names, ["last.json"]);
        }
    }
}
