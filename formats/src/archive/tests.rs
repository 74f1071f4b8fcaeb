use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;

use super::*;
use crate::Sha256Digest;

fn sample(order_reversed: bool) -> ReproducibleArchive {
    let mut archive = ReproducibleArchive::new(0, crate::compression::Setting::gzip(6));
    let mut entries = vec![
        ("addons/demo/1.0.0/install.sh", b"echo hi\n".to_vec(), true),
        ("addons/demo/1.0.0/Manifest", b"apt fio\n".to_vec(), false),
        (
            "addons/demo/1.0.0/deep/er/file.yaml",
            b"a: 1\n".to_vec(),
            false,
        ),
    ];
    if order_reversed {
        entries.reverse();
    }
    for (path, data, executable) in entries {
        archive
            .insert(path, Source::Bytes { data, executable })
            .unwrap();
    }
    archive
}

fn write(archive: &ReproducibleArchive) -> Vec<u8> {
    archive.write(Vec::new(), &mut |_| {}).unwrap()
}

#[test]
fn same_entries_in_any_order_give_the_same_bytes() {
    let first = write(&sample(false));
    assert_eq!(first, write(&sample(true)));
    // gzip header: no mtime (bytes 4..8) and no file name flag.
    assert_eq!(&first[4..8], &[0, 0, 0, 0]);
    assert_eq!(first[3] & 0x08, 0);
}

#[test]
fn a_zstd_archive_is_reproducible_and_unpacks_to_what_the_gzip_one_does() {
    use crate::compression::{Compression as Format, Setting};
    let zstd = |reversed| {
        let mut archive = ReproducibleArchive::new(0, Setting::new(Format::Zstd, None).unwrap());
        for (path, source) in sample(reversed).entries() {
            if *source != Source::Directory {
                archive.insert(path, source.clone()).unwrap();
            }
        }
        write(&archive)
    };
    let bytes = zstd(false);
    assert_eq!(bytes, zstd(true));
    assert_eq!(Format::sniff(&bytes), Some(Format::Zstd));
    let (from_zstd, from_gzip) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let unpacked = extract(bytes.as_slice(), from_zstd.path()).unwrap();
    assert_eq!(
        unpacked,
        extract(write(&sample(false)).as_slice(), from_gzip.path()).unwrap()
    );
    for path in unpacked.iter().filter(|path| path.ends_with(".sh")) {
        assert_eq!(
            fs_err::read(from_zstd.path().join(path)).unwrap(),
            fs_err::read(from_gzip.path().join(path)).unwrap()
        );
    }
}

#[test]
fn entries_are_sorted_with_owners_and_modes_normalised() {
    let bytes = write(&sample(true));
    let mut archive = tar::Archive::new(GzDecoder::new(bytes.as_slice()));
    let mut listing = Vec::new();
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        let header = entry.header();
        assert_eq!(header.uid().unwrap(), 0);
        assert_eq!(header.gid().unwrap(), 0);
        assert_eq!(header.mtime().unwrap(), 0);
        assert_eq!(header.username().unwrap(), Some(""));
        listing.push(format!(
            "{:o} {}",
            header.mode().unwrap(),
            entry.path().unwrap().display()
        ));
    }
    assert_eq!(
        listing,
        [
            "755 addons/",
            "755 addons/demo/",
            "755 addons/demo/1.0.0/",
            "644 addons/demo/1.0.0/Manifest",
            "755 addons/demo/1.0.0/deep/",
            "755 addons/demo/1.0.0/deep/er/",
            "644 addons/demo/1.0.0/deep/er/file.yaml",
            "755 addons/demo/1.0.0/install.sh",
        ]
    );
}

#[test]
fn the_lead_entry_comes_first_after_its_folders() {
    let mut archive = sample(false);
    archive
        .insert_lead(
            "addons/demo/1.0.0/package.json",
            Source::Bytes {
                data: b"{}".to_vec(),
                executable: false,
            },
        )
        .unwrap();
    let bytes = write(&archive);
    let mut reader = tar::Archive::new(GzDecoder::new(bytes.as_slice()));
    let paths: Vec<String> = reader
        .entries()
        .unwrap()
        .map(|entry| entry.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(
        &paths[..5],
        [
            "addons/",
            "addons/demo/",
            "addons/demo/1.0.0/",
            "addons/demo/1.0.0/package.json",
            "addons/demo/1.0.0/Manifest",
        ]
    );
    assert_eq!(paths.len(), 9, "no entry written twice: {paths:?}");
}

#[test]
fn a_path_added_twice_is_refused() {
    let mut archive = sample(false);
    let error = archive
        .insert(
            "addons/demo/1.0.0/Manifest",
            Source::Bytes {
                data: vec![],
                executable: false,
            },
        )
        .unwrap_err();
    assert!(matches!(error, WriteError::Duplicate { .. }), "{error}");
}

#[test]
fn a_file_where_a_folder_is_needed_is_refused() {
    let mut archive = ReproducibleArchive::new(0, crate::compression::Setting::gzip(6));
    let file = || Source::Bytes {
        data: b"x".to_vec(),
        executable: false,
    };
    archive.insert("addon/images", file()).unwrap();
    let error = archive
        .insert("addon/images/oci-layout", file())
        .unwrap_err();
    assert!(matches!(error, WriteError::FileInTheWay { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "`addon/images` is a file, but `addon/images/oci-layout` needs it to be a folder"
    );
}

#[test]
fn a_file_that_does_not_match_its_expected_digest_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blob");
    fs_err::write(&file, b"actual").unwrap();
    let mut archive = ReproducibleArchive::new(0, crate::compression::Setting::gzip(6));
    archive
        .insert(
            "blob",
            Source::File {
                path: file,
                executable: false,
                expected: Some(Sha256Digest::of(b"expected")),
            },
        )
        .unwrap();
    let error = archive.write(Vec::new(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(error, WriteError::DigestMismatch { .. }),
        "{error}"
    );
}

#[test]
fn round_trip_restores_content_and_modes() {
    let dir = tempfile::tempdir().unwrap();
    let written = extract(write(&sample(false)).as_slice(), dir.path()).unwrap();
    assert!(written.contains(&"addons/demo/1.0.0/install.sh".to_string()));
    let script = dir.path().join("addons/demo/1.0.0/install.sh");
    assert_eq!(fs_err::read(&script).unwrap(), b"echo hi\n");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs_err::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let found = read_entry(write(&sample(false)).as_slice(), |path| {
        path.ends_with("/Manifest")
    })
    .unwrap();
    assert_eq!(
        found,
        Some((
            "addons/demo/1.0.0/Manifest".to_string(),
            b"apt fio
"
            .to_vec()
        ))
    );
}

/// A raw tar entry, written byte by byte so that names the `tar` crate would refuse get through.
enum Crafted<'a> {
    File(&'a str, &'a [u8]),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
}

fn crafted(entries: &[Crafted]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        Compression::fast(),
    ));
    for entry in entries {
        let mut header = tar::Header::new_old();
        let (name, kind, link, data): (&str, tar::EntryType, &str, &[u8]) = match entry {
            Crafted::File(name, data) => (name, tar::EntryType::Regular, "", data),
            Crafted::Symlink(name, target) => (name, tar::EntryType::Symlink, target, b""),
            Crafted::HardLink(name, target) => (name, tar::EntryType::Link, target, b""),
        };
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// Extracts into `<tmp>/dest` and returns the error plus everything that exists under `<tmp>`.
fn extract_crafted(entries: &[Crafted]) -> (ExtractError, Vec<String>) {
    let outer = tempfile::tempdir().unwrap();
    let destination = outer.path().join("dest");
    fs_err::create_dir(&destination).unwrap();
    let error = extract(crafted(entries).as_slice(), &destination).unwrap_err();
    let mut found: Vec<String> = walk(outer.path())
        .into_iter()
        .map(|path| {
            path.strip_prefix(outer.path())
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    found.sort();
    (error, found)
}

fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        out.push(path.clone());
        if fs_err::symlink_metadata(&path).unwrap().is_dir() {
            out.extend(walk(&path));
        }
    }
    out
}

#[test]
fn parent_traversal_is_refused_and_nothing_lands_outside() {
    let (error, found) = extract_crafted(&[Crafted::File("../escaped.txt", b"x")]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert_eq!(found, ["dest"]);
}

#[test]
fn absolute_paths_are_refused_and_nothing_is_written() {
    let marker = format!("/tmp/berth-absolute-{}", std::process::id());
    let (error, found) = extract_crafted(&[Crafted::File(&marker, b"x")]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert_eq!(found, ["dest"]);
    assert!(!Path::new(&marker).exists());
}

#[test]
fn a_symlink_pointing_out_is_refused() {
    for target in ["../..", "/etc", "a/../../.."] {
        let (error, found) = extract_crafted(&[Crafted::Symlink("link", target)]);
        assert!(
            matches!(error, ExtractError::Unsafe { .. }),
            "{target}: {error}"
        );
        assert_eq!(found, ["dest"], "{target}");
    }
}

#[test]
fn writing_through_a_symlink_is_refused() {
    // The link itself stays inside, but a later entry tries to write through it.
    let (error, found) = extract_crafted(&[
        Crafted::Symlink("inner", "."),
        Crafted::File("inner/../../escaped.txt", b"x"),
    ]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert_eq!(found, ["dest", "dest/inner"]);
    let (error, found) = extract_crafted(&[
        Crafted::Symlink("dir", "sub"),
        Crafted::File("dir/file.txt", b"x"),
    ]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert_eq!(found, ["dest", "dest/dir"]);
}

#[test]
fn a_hard_link_pointing_out_is_refused() {
    let (error, found) = extract_crafted(&[Crafted::HardLink("passwd", "../../../../etc/passwd")]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert_eq!(found, ["dest"]);
}

#[test]
fn a_chain_of_links_that_resolves_outside_is_refused() {
    // Each target, read as text, stays inside; followed through the real tree, `z` leads two
    // folders above the destination.
    let (error, found) = extract_crafted(&[
        Crafted::Symlink("d1/d2/d3/x", "../../.."),
        Crafted::Symlink("z", "d1/d2/d3/x/../.."),
        Crafted::File("escaped.txt", b"x"),
    ]);
    assert!(matches!(error, ExtractError::Unsafe { .. }), "{error}");
    assert!(error.to_string().contains("`z`"), "{error}");
    assert_eq!(
        found,
        [
            "dest",
            "dest/d1",
            "dest/d1/d2",
            "dest/d1/d2/d3",
            "dest/d1/d2/d3/x"
        ]
    );
    // A dangling link whose meaning a later link would change is refused as well.
    let (error, _) = extract_crafted(&[
        Crafted::Symlink("a/y", "q/../.."),
        Crafted::Symlink("a/q", "."),
    ]);
    assert!(error.to_string().contains("`a/y`"), "{error}");
}

#[test]
fn a_hard_link_through_a_link_is_refused() {
    let (error, found) = extract_crafted(&[
        Crafted::File("file.txt", b"x"),
        Crafted::Symlink("inner", "."),
        Crafted::HardLink("copy", "inner/file.txt"),
    ]);
    assert!(error.to_string().contains("`copy`"), "{error}");
    assert_eq!(found, ["dest", "dest/file.txt", "dest/inner"]);
}

#[test]
fn links_that_climb_then_descend_inside_are_kept() {
    let outer = tempfile::tempdir().unwrap();
    let archive = crafted(&[
        Crafted::File("usr/lib/libc.so", b"elf"),
        Crafted::Symlink("lib", "usr/lib"),
        Crafted::Symlink("usr/bin/lib", "../lib"),
        Crafted::Symlink("usr/bin/here", "./../lib/libc.so"),
        Crafted::HardLink("usr/libc.copy", "usr/lib/libc.so"),
    ]);
    extract(archive.as_slice(), outer.path()).unwrap();
    assert_eq!(
        fs_err::read(outer.path().join("usr/bin/lib/libc.so")).unwrap(),
        b"elf"
    );
    assert_eq!(
        fs_err::read(outer.path().join("usr/bin/here")).unwrap(),
        b"elf"
    );
    assert_eq!(
        fs_err::read(outer.path().join("usr/libc.copy")).unwrap(),
        b"elf"
    );
}

#[test]
fn an_entry_past_the_bound_is_refused_by_name_before_it_is_read() {
    let archive = write(&sample(false));
    let manifest = |path: &str| path.ends_with("/Manifest");
    let error = read_entry_within(archive.as_slice(), manifest, 4).unwrap_err();
    assert!(
        matches!(&error, ExtractError::EntryTooLarge { entry, limit: 4 } if entry == "addons/demo/1.0.0/Manifest"),
        "{error}"
    );
    assert!(
        read_entry_within(archive.as_slice(), manifest, 1 << 20)
            .unwrap()
            .is_some()
    );
}
