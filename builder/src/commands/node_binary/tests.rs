use std::path::{Path, PathBuf};

use super::*;

/// A small ELF file whose `.gnu.version_r` needs `versions` of libc.so.6, as a linker
/// writes it: a string table, the version needs, and their section headers.
fn elf(wide: bool, little: bool, versions: &[&str]) -> Vec<u8> {
    let put16 = |out: &mut Vec<u8>, value: u16| {
        out.extend(if little {
            value.to_le_bytes()
        } else {
            value.to_be_bytes()
        })
    };
    let put32 = |out: &mut Vec<u8>, value: u32| {
        out.extend(if little {
            value.to_le_bytes()
        } else {
            value.to_be_bytes()
        })
    };
    let put_word = |out: &mut Vec<u8>, value: u64| {
        if wide {
            out.extend(if little {
                value.to_le_bytes()
            } else {
                value.to_be_bytes()
            });
        } else {
            put32(out, value as u32);
        }
    };
    let header_size: u64 = if wide { 64 } else { 52 };
    let mut strings = b"\0libc.so.6\0".to_vec();
    let mut names = Vec::new();
    for version in versions {
        names.push(strings.len() as u32);
        strings.extend(version.as_bytes());
        strings.push(0);
    }
    let mut needs = Vec::new();
    put16(&mut needs, 1);
    put16(&mut needs, versions.len() as u16);
    put32(&mut needs, 1);
    put32(&mut needs, 16);
    put32(&mut needs, 0);
    for (index, name) in names.iter().enumerate() {
        put32(&mut needs, 0);
        put16(&mut needs, 0);
        put16(&mut needs, index as u16 + 2);
        put32(&mut needs, *name);
        put32(&mut needs, if index + 1 == names.len() { 0 } else { 16 });
    }
    let strings_at = header_size;
    let needs_at = strings_at + strings.len() as u64;
    let sections_at = needs_at + needs.len() as u64;

    let mut out = b"\x7fELF".to_vec();
    out.extend([if wide { 2 } else { 1 }, if little { 1 } else { 2 }, 1]);
    out.resize(16, 0);
    put16(&mut out, 2); // e_type: an executable
    put16(&mut out, 0x3e); // e_machine: x86-64
    put32(&mut out, 1); // e_version
    put_word(&mut out, 0); // e_entry
    put_word(&mut out, 0); // e_phoff
    put_word(&mut out, sections_at); // e_shoff
    put32(&mut out, 0); // e_flags
    put16(&mut out, header_size as u16); // e_ehsize
    put16(&mut out, 0); // e_phentsize
    put16(&mut out, 0); // e_phnum
    put16(&mut out, if wide { 64 } else { 40 }); // e_shentsize
    put16(&mut out, 3); // e_shnum
    put16(&mut out, 0); // e_shstrndx
    assert_eq!(out.len() as u64, header_size);
    out.extend(&strings);
    out.extend(&needs);
    // (type, offset, size, link, info) of the null section, `.dynstr` and `.gnu.version_r`.
    let sections = [
        (0, 0, 0, 0, 0),
        (3, strings_at, strings.len() as u64, 0, 0),
        (SHT_GNU_VERNEED, needs_at, needs.len() as u64, 1, 1),
    ];
    for (kind, offset, size, link, info) in sections {
        put32(&mut out, 0); // sh_name
        put32(&mut out, kind);
        put_word(&mut out, 0); // sh_flags
        put_word(&mut out, 0); // sh_addr
        put_word(&mut out, offset);
        put_word(&mut out, size);
        put32(&mut out, link);
        put32(&mut out, info);
        put_word(&mut out, 1); // sh_addralign
        put_word(&mut out, 0); // sh_entsize
    }
    out
}

fn write(path: &Path, bytes: &[u8]) -> PathBuf {
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, bytes).unwrap();
    path.to_path_buf()
}

/// The portable build's place for a program in `target/debug`.
fn portable_in(target: &Path) -> PathBuf {
    target.join(format!(
        "{}-unknown-linux-gnu/release/berth",
        std::env::consts::ARCH
    ))
}

/// This test program: linked by `cargo build` against the build host's glibc, as the host's
/// `berth` is.
fn host_build() -> PathBuf {
    std::env::current_exe().unwrap()
}

#[test]
fn the_newest_glibc_version_a_file_needs_is_read_from_its_elf_sections() {
    let dir = tempfile::tempdir().unwrap();
    let versions = ["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_PRIVATE", "GLIBC_2.3"];
    for (wide, little) in [(true, true), (false, false), (false, true), (true, false)] {
        let file = write(&dir.path().join("berth"), &elf(wide, little, &versions));
        assert_eq!(
            newest_glibc(&file).unwrap(),
            Some(("GLIBC_2.17".to_string(), Glibc(2, 17))),
            "{}-bit, {} endian",
            if wide { 64 } else { 32 },
            if little { "little" } else { "big" }
        );
    }
    let relr = write(
        &dir.path().join("relr"),
        &elf(true, true, &["GLIBC_2.34", "GLIBC_ABI_DT_RELR"]),
    );
    assert_eq!(newest_glibc(&relr).unwrap().unwrap().1, Glibc(2, 36));
}

#[test]
fn a_file_that_needs_no_glibc_version_needs_none_and_a_cut_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(&dir.path().join("script"), b"#!/bin/sh\necho berth\n");
    assert_eq!(newest_glibc(&script).unwrap(), None);
    let empty = write(&dir.path().join("empty"), b"");
    assert_eq!(newest_glibc(&empty).unwrap(), None);
    let none = write(&dir.path().join("static"), &elf(true, true, &[]));
    assert_eq!(newest_glibc(&none).unwrap(), None);

    let whole = elf(true, true, &["GLIBC_2.17"]);
    let cut = write(&dir.path().join("cut"), &whole[..whole.len() - 10]);
    let error = format!("{:#}", newest_glibc(&cut).unwrap_err());
    assert!(
        error.contains("failed to read") && error.contains("cut"),
        "{error}"
    );
}

#[test]
fn a_binary_cargo_links_on_this_host_needs_a_newer_glibc_than_the_oldest_target() {
    let (name, glibc) = newest_glibc(&host_build())
        .unwrap()
        .expect("GLIBC_ versions");
    assert!(name.starts_with("GLIBC_"), "{name}");
    assert!(glibc > OLDEST_GLIBC, "{name}");
}

#[test]
fn the_oldest_glibc_is_the_oldest_target_distros_and_every_target_has_one() {
    let builtin: Vec<String> = berth_build::host_packages::distros::DistrosFile::load(None)
        .unwrap()
        .distros
        .into_iter()
        .map(|distro| distro.name)
        .collect();
    let known: Vec<String> = DISTRO_GLIBC
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    assert_eq!(
        known, builtin,
        "DISTRO_GLIBC names builder/distros.yaml's targets"
    );
    assert_eq!(OLDEST_GLIBC, Glibc(2, 17));
}

#[test]
fn the_host_build_beside_is_refused_by_default_and_shipped_when_allowed() {
    let target = tempfile::tempdir().unwrap();
    let exe = target.path().join("debug/berth-build");
    fs_err::create_dir_all(exe.parent().unwrap()).unwrap();
    assert!(choose_in(Some(&exe), None, false).unwrap().is_none());
    let beside = exe.with_file_name("berth");
    fs_err::os::unix::fs::symlink(host_build(), &beside).unwrap();

    let error = choose_in(Some(&exe), None, false).unwrap_err();
    let said = berth_formats::report::render(error.as_ref());
    for part in [
        beside.to_str().unwrap(),
        "asks for GLIBC_2.",
        "ol-7 (glibc 2.17)",
        "refused",
        "hint: build the portable one with `scripts/portable.sh`",
        "--allow-new-glibc",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }

    let chosen = choose_in(Some(&exe), None, true).unwrap().unwrap();
    assert_eq!(chosen.path, beside);
    assert!(chosen.warnings.is_empty(), "{:?}", chosen.warnings);
}

#[test]
fn the_portable_build_is_shipped_by_default_when_there_is_one() {
    let target = tempfile::tempdir().unwrap();
    let exe = target.path().join("debug/berth-build");
    let portable = write(
        &portable_in(target.path()),
        &elf(true, true, &["GLIBC_2.2.5", "GLIBC_2.17"]),
    );
    // Alone, and before the host build beside (which is newer: it is then named as stale).
    let chosen = choose_in(Some(&exe), None, false).unwrap().unwrap();
    assert_eq!(chosen.path, portable);
    assert!(chosen.warnings.is_empty(), "{:?}", chosen.warnings);
    let beside = exe.with_file_name("berth");
    fs_err::create_dir_all(exe.parent().unwrap()).unwrap();
    fs_err::os::unix::fs::symlink(host_build(), &beside).unwrap();
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400);
    fs_err::OpenOptions::new()
        .write(true)
        .open(&portable)
        .unwrap()
        .file()
        .set_modified(old)
        .unwrap();
    let chosen = choose_in(Some(&exe), None, false).unwrap().unwrap();
    assert_eq!(chosen.path, portable);
    assert_eq!(chosen.warnings.len(), 1, "{:?}", chosen.warnings);
    assert!(
        chosen.warnings[0].contains(&format!("older than {}", beside.display())),
        "{:?}",
        chosen.warnings
    );

    // A portable build that is not portable is refused too.
    write(&portable, &elf(true, true, &["GLIBC_2.34"]));
    let error = format!("{:#}", choose_in(Some(&exe), None, false).unwrap_err());
    assert!(
        error.contains("(the portable build) asks for GLIBC_2.34"),
        "{error}"
    );
}

#[test]
fn a_named_binary_is_shipped_as_named_with_a_warning_if_it_needs_a_newer_glibc() {
    let target = tempfile::tempdir().unwrap();
    let exe = target.path().join("debug/berth-build");
    write(
        &portable_in(target.path()),
        &elf(true, true, &["GLIBC_2.17"]),
    );
    let chosen = choose_in(Some(&exe), Some(host_build()), false)
        .unwrap()
        .unwrap();
    assert_eq!(chosen.path, host_build());
    assert_eq!(chosen.warnings.len(), 1, "{:?}", chosen.warnings);
    assert!(
        chosen.warnings[0].contains("scripts/portable.sh"),
        "{:?}",
        chosen.warnings
    );
    let chosen = choose_in(Some(&exe), Some(host_build()), true)
        .unwrap()
        .unwrap();
    assert!(chosen.warnings.is_empty(), "{:?}", chosen.warnings);
}
