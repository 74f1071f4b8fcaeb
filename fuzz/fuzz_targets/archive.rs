//! The archive reader: whatever the bytes, nothing lands outside the destination.
#![no_main]
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

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let outer = tempfile::tempdir().unwrap();
    let destination = outer.path().join("dest");
    std::fs::create_dir(&destination).unwrap();
    let limits = berth_formats::archive::ExtractLimits {
        max_bytes: 16 << 20,
        max_entries: 10_000,
    };
    let _ = berth_formats::archive::extract_within(bytes, &destination, limits);
    let _ = berth_formats::archive::read_entry(bytes, |path| path.ends_with("package.json"));
    // Only the destination itself may be beside it, and every link in it resolves inside.
    let beside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().flatten().collect();
    assert_eq!(beside.len(), 1);
    let mut found = Vec::new();
    everything_below(&destination, &mut found);
    let root = destination.canonicalize().unwrap();
    for path in found {
        if let Ok(resolved) = path.canonicalize() {
            assert!(resolved.starts_with(&root), "{} leads to {}", path.display(), resolved.display());
        }
    }
});
