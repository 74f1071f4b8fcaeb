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
        let mut header = tar::Header::new_gnu();
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
        header.set_uid(0);
        header.set_gid(0);
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

/// One entry of a tar written by hand: its header as given, its data padded to a block.
fn raw_entry(path: &str, data: &[u8], edit: impl FnOnce(&mut tar::Header)) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_path(path).unwrap();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(data.len() as u64);
    edit(&mut header);
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(data);
    bytes.resize(bytes.len().next_multiple_of(512), 0);
    bytes
}

fn gzip_member(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// The paths GNU tar lists in a compressed archive, or its complaint.
fn tar_lists(archive: &[u8]) -> Result<Vec<String>, String> {
    let file = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(file.path(), archive).unwrap();
    let output = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(file.path())
        .output()
        .expect("GNU tar runs");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

#[test]
fn every_gzip_member_is_read_as_tar_reads_it() {
    // A first member whose tar has no end blocks, then a second member with another file:
    // `tar xzf` extracts both, so Berth must see both.
    let mut first = raw_entry("install.sh", b"echo vendor\n", |_| {});
    first.extend(raw_entry("lock.json", b"{}\n", |_| {}));
    let mut second = raw_entry("appended.sh", b"echo appended\n", |_| {});
    second.extend([0u8; 1024]);
    let mut archive = gzip_member(&first);
    archive.extend(gzip_member(&second));
    assert_eq!(
        tar_lists(&archive).unwrap(),
        ["install.sh", "lock.json", "appended.sh"]
    );
    let dir = tempfile::tempdir().unwrap();
    let written = extract(archive.as_slice(), dir.path()).unwrap();
    assert_eq!(written, ["install.sh", "lock.json", "appended.sh"]);
    let found = read_entry(archive.as_slice(), |path| path == "appended.sh").unwrap();
    assert_eq!(found.unwrap().1, b"echo appended\n");
}

#[test]
fn a_path_given_twice_across_members_is_refused() {
    // `tar` keeps the second `install.sh`; a reader keeping the first would check another.
    let first = raw_entry("install.sh", b"echo vendor\n", |_| {});
    let mut second = raw_entry("install.sh", b"echo attacker\n", |_| {});
    second.extend([0u8; 1024]);
    let mut archive = gzip_member(&first);
    archive.extend(gzip_member(&second));
    let dir = tempfile::tempdir().unwrap();
    let error = extract(archive.as_slice(), dir.path()).unwrap_err();
    assert!(error.to_string().contains("twice"), "{error}");
}

#[test]
fn data_after_the_end_of_the_tar_is_refused_naming_its_offset() {
    let mut tar = raw_entry("install.sh", b"echo vendor\n", |_| {});
    tar.extend([0u8; 1024]);
    let end = tar.len();
    // Padding to a record is what `tar` writes: accepted.
    let mut padded = tar.clone();
    padded.resize(10240, 0);
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        extract(gzip_member(&padded).as_slice(), dir.path()).unwrap(),
        ["install.sh"]
    );
    // Another tar after the end blocks, in the same member or in a second one.
    let appended = raw_entry("other.sh", b"echo other\n", |_| {});
    let mut same_member = tar.clone();
    same_member.extend(&appended);
    let mut second_member = gzip_member(&tar);
    second_member.extend(gzip_member(&appended));
    for archive in [gzip_member(&same_member), second_member] {
        let dir = tempfile::tempdir().unwrap();
        let error = extract(archive.as_slice(), dir.path()).unwrap_err();
        let said = crate::report::chain(&error);
        // The tar reader stops at the first of the two end blocks.
        let offset = end - 1024 + 512;
        assert!(
            said.contains(&format!("at byte {offset} "))
                || said.contains(&format!("at byte {end} ")),
            "{said}"
        );
    }
    // Garbage after the gzip member is not another member: refused too.
    let mut garbage = gzip_member(&tar);
    garbage.extend(b"not gzip");
    let dir = tempfile::tempdir().unwrap();
    assert!(extract(garbage.as_slice(), dir.path()).is_err());
}

#[test]
fn modes_and_owners_berth_never_writes_are_refused_on_every_read() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("setuid", raw_entry("berth", b"x", |h| h.set_mode(0o4755))),
        ("setgid", raw_entry("berth", b"x", |h| h.set_mode(0o2755))),
        ("sticky", raw_entry("berth", b"x", |h| h.set_mode(0o1755))),
        (
            "world-writable",
            raw_entry("install.sh", b"x", |h| h.set_mode(0o757)),
        ),
        (
            "group-writable",
            raw_entry("install.sh", b"x", |h| h.set_mode(0o775)),
        ),
        (
            "foreign uid",
            raw_entry("install.sh", b"x", |h| h.set_uid(1000)),
        ),
        (
            "foreign gid",
            raw_entry("install.sh", b"x", |h| h.set_gid(1000)),
        ),
        (
            "foreign user name",
            raw_entry("install.sh", b"x", |h| h.set_username("nobody").unwrap()),
        ),
        ("pax uid", {
            let mut bytes = raw_entry("././@PaxHeader", b"14 uid=100000\n", |h| {
                h.set_entry_type(tar::EntryType::XHeader)
            });
            bytes.extend(raw_entry("install.sh", b"x", |_| {}));
            bytes
        }),
        ("global pax header", {
            let mut bytes = raw_entry("pax_global_header", b"12 uid=1000\n", |h| {
                h.set_entry_type(tar::EntryType::XGlobalHeader)
            });
            bytes.extend(raw_entry("install.sh", b"x", |_| {}));
            bytes
        }),
    ];
    for (what, mut tar) in cases {
        tar.extend([0u8; 1024]);
        let archive = gzip_member(&tar);
        let dir = tempfile::tempdir().unwrap();
        let error = extract(archive.as_slice(), dir.path()).unwrap_err();
        assert!(
            matches!(error, ExtractError::Unsafe { .. }),
            "{what}: {error}"
        );
        assert!(
            !dir.path().join("install.sh").exists() && !dir.path().join("berth").exists(),
            "{what}: written before it was refused"
        );
        assert!(
            read_entry(archive.as_slice(), |_| true).is_err(),
            "{what}: read"
        );
    }
    // What Berth writes passes: root's files at 0644 and 0755, a link at 0777.
    let mut fine = raw_entry("install.sh", b"x", |h| h.set_mode(0o755));
    fine.extend(raw_entry("root-named", b"x", |h| {
        h.set_username("root").unwrap();
        h.set_groupname("root").unwrap();
    }));
    fine.extend(raw_entry("link", b"", |h| {
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_link_name("install.sh").unwrap();
        h.set_mode(0o777);
    }));
    fine.extend([0u8; 1024]);
    let dir = tempfile::tempdir().unwrap();
    extract(gzip_member(&fine).as_slice(), dir.path()).unwrap();
}
