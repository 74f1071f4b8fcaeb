//! The archive reader over several gzip members and what follows the tar's end: the input is
//! a tar (and more) cut into up to four members, with raw bytes after them. Whatever it holds,
//! nothing lands outside the destination, and nothing extracted keeps a mode Berth never writes
//! (setuid, setgid, sticky, writable by group or others).
#![no_main]
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

fn everything_below(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        out.push(path.clone());
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            everything_below(&path, out);
        }
    }
}

fn member(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let Some((&shape, rest)) = input.split_first() else {
        return;
    };
    // The low two bits: how many members (1 to 4); the next: whether raw bytes follow them
    // (the input's last eighth).
    let members = usize::from(shape & 3) + 1;
    let (tar, trailing) = if shape & 4 != 0 {
        rest.split_at(rest.len() - rest.len() / 8)
    } else {
        (rest, &[][..])
    };
    let mut archive = Vec::new();
    let size = tar.len().div_ceil(members).max(1);
    for chunk in tar.chunks(size) {
        archive.extend(member(chunk));
    }
    archive.extend_from_slice(trailing);

    let outer = tempfile::tempdir().unwrap();
    let destination = outer.path().join("dest");
    std::fs::create_dir(&destination).unwrap();
    let limits = berth_formats::archive::ExtractLimits {
        max_bytes: 16 << 20,
        max_entries: 10_000,
    };
    let extracted = berth_formats::archive::extract_within(archive.as_slice(), &destination, limits);
    let _ = berth_formats::archive::read_entry(archive.as_slice(), |path| path.ends_with("package.json"));
    let beside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().flatten().collect();
    assert_eq!(beside.len(), 1);
    let mut found = Vec::new();
    everything_below(&destination, &mut found);
    let root = destination.canonicalize().unwrap();
    for path in &found {
        if let Ok(resolved) = path.canonicalize() {
            assert!(resolved.starts_with(&root), "{} leads to {}", path.display(), resolved.display());
        }
        let metadata = std::fs::symlink_metadata(path).unwrap();
        if !metadata.file_type().is_symlink() {
            let mode = metadata.permissions().mode();
            assert_eq!(mode & 0o7022, 0, "{} has mode {mode:o}", path.display());
        }
    }
    // Bytes after the last member are read as gzip reads them: taken only as another member.
    if extracted.is_ok() && !trailing.is_empty() {
        assert!(trailing.starts_with(&[0x1f, 0x8b]), "trailing bytes that are not gzip were taken");
    }
});
