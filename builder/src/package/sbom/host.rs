//! What a host package says of itself for its BOM entry: its source package and its licences.
//! A `.deb` is read as dpkg lays it out (an `ar` archive of `control.tar.*` then `data.tar.*`):
//! `Source` from its control file, the licences from the machine-readable
//! `/usr/share/doc/<package>/copyright` it installs. An rpm's come from the primary metadata
//! the package ships beside it (`<rpm:license>`, `<rpm:sourcerpm>`).

use std::collections::BTreeMap;
use std::io::{Read, Write};

use crate::host_packages::control;

/// A host package's source package and licences, where it names them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HostFacts {
    pub source: Option<String>,
    pub licences: Vec<String>,
}

/// The most bytes of a control member, or of a copyright file, read.
const MAX_TEXT: u64 = 1 << 20;

/// The facts of a `.deb`; none that cannot be read (the package itself was checked by
/// digest; its BOM entry just says less).
pub fn deb_facts(reader: &mut dyn Read) -> HostFacts {
    let mut facts = HostFacts::default();
    let _ = read_deb(reader, &mut facts);
    facts
}

fn read_deb(reader: &mut dyn Read, facts: &mut HostFacts) -> std::io::Result<()> {
    let mut magic = [0u8; 8];
    reader.read_exact(&mut magic)?;
    if &magic != b"!<arch>\n" {
        return Ok(());
    }
    let mut package = String::new();
    loop {
        let mut header = [0u8; 60];
        if reader.read_exact(&mut header).is_err() {
            return Ok(());
        }
        let name = String::from_utf8_lossy(&header[..16])
            .trim_end()
            .trim_end_matches('/')
            .to_string();
        let size: u64 = String::from_utf8_lossy(&header[48..58])
            .trim()
            .parse()
            .unwrap_or(0);
        let mut member = (&mut *reader).take(size);
        if let Some(compression) = name.strip_prefix("control.tar") {
            let mut tar = Vec::new();
            let mut bounded = Bounded {
                out: &mut tar,
                left: 4 * MAX_TEXT,
            };
            let _ = decompress(compression, &mut member, &mut bounded);
            if let Some(text) = tar_file(&tar, "control") {
                let text = String::from_utf8_lossy(&text).into_owned();
                if let Some(paragraph) = control::parse(&text).ok().and_then(|p| p.first().cloned())
                {
                    package = paragraph.get("Package").unwrap_or("").trim().to_string();
                    facts.source = paragraph
                        .get("Source")
                        .and_then(|source| source.split_whitespace().next())
                        .map(str::to_string)
                        .filter(|source| source != &package);
                }
            }
        } else if let Some(compression) = name.strip_prefix("data.tar") {
            if package.is_empty() {
                return Ok(());
            }
            let mut finder = TarFinder::new(format!("usr/share/doc/{package}/copyright"));
            let _ = decompress(compression, &mut member, &mut finder);
            if let Some(text) = finder.found {
                facts.licences = copyright_licences(&String::from_utf8_lossy(&text));
            }
            return Ok(());
        }
        std::io::copy(&mut member, &mut std::io::sink())?;
        if size % 2 == 1 {
            reader.read_exact(&mut [0u8; 1])?;
        }
    }
}

/// Decompresses a member (`.gz`, `.xz`, `.zst` or none) into `out`, which may stop it early
/// by failing.
fn decompress(suffix: &str, input: &mut dyn Read, out: &mut dyn Write) -> std::io::Result<()> {
    let mut buffered = std::io::BufReader::new(input);
    match suffix {
        "" => std::io::copy(&mut buffered, out).map(drop),
        ".gz" => std::io::copy(&mut flate2::read::GzDecoder::new(buffered), out).map(drop),
        ".zst" => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(buffered)?;
            std::io::copy(&mut decoder, out).map(drop)
        }
        ".xz" => lzma_rs::xz_decompress(&mut buffered, &mut { out })
            .map_err(|error| std::io::Error::other(error.to_string())),
        _ => Ok(()),
    }
}

/// A file of a small tar held in memory.
fn tar_file(tar: &[u8], wanted: &str) -> Option<Vec<u8>> {
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().ok()? {
        let entry = entry.ok()?;
        let path = entry.path().ok()?.to_string_lossy().into_owned();
        if path.trim_start_matches("./") == wanted {
            let mut bytes = Vec::new();
            entry.take(MAX_TEXT).read_to_end(&mut bytes).ok()?;
            return Some(bytes);
        }
    }
    None
}

/// The distinct licences of a machine-readable copyright file (`License:` fields' first
/// lines), in the order they first appear.
pub fn copyright_licences(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Ok(paragraphs) = control::parse(text) else {
        return out;
    };
    for paragraph in paragraphs {
        if let Some(licence) = paragraph
            .get("License")
            .and_then(|value| value.lines().next())
            .map(str::trim)
            .filter(|licence| !licence.is_empty())
            && !out.iter().any(|known| known == licence)
        {
            out.push(licence.to_string());
        }
    }
    out
}

/// Each rpm's facts by file name, from a primary metadata file (gzip).
pub fn primary_facts(reader: &mut dyn Read) -> BTreeMap<String, HostFacts> {
    let mut xml = String::new();
    if flate2::read::GzDecoder::new(reader)
        .take(256 << 20)
        .read_to_string(&mut xml)
        .is_err()
    {
        return BTreeMap::new();
    }
    let Ok(packages) = crate::host_packages::repodata::read_primary("primary", "", &xml) else {
        return BTreeMap::new();
    };
    packages
        .into_iter()
        .map(|package| {
            let facts = HostFacts {
                source: (!package.source_rpm.is_empty()).then(|| package.source_rpm.clone()),
                licences: if package.license.is_empty() {
                    Vec::new()
                } else {
                    vec![package.license.clone()]
                },
            };
            (package.file_name().to_string(), facts)
        })
        .collect()
}

/// A writer that keeps at most `left` bytes and then fails, stopping what writes to it.
struct Bounded<'a> {
    out: &'a mut Vec<u8>,
    left: u64,
}

impl Write for Bounded<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() as u64 > self.left {
            return Err(std::io::Error::other("past the bound"));
        }
        self.left -= bytes.len() as u64;
        self.out.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A tar stream read as it is written to, keeping one file's content and stopping the writer
/// (by failing) once it has it: the decoders that write (xz) then stop early too.
struct TarFinder {
    wanted: String,
    state: TarState,
    pending: Vec<u8>,
    found: Option<Vec<u8>>,
    /// The next entry's name, from a GNU long-name entry or a PAX header before it.
    next_name: Option<String>,
}

enum TarState {
    Header,
    Skip(u64),
    Keep {
        data: Vec<u8>,
        left: u64,
    },
    /// A GNU long name (`L`) or PAX extended header (`x`) naming the next entry.
    Meta {
        kind: u8,
        data: Vec<u8>,
        size: u64,
        left: u64,
    },
}

/// The most bytes of a long name or PAX header read.
const MAX_META: u64 = 64 << 10;

impl TarFinder {
    fn new(wanted: String) -> Self {
        Self {
            wanted,
            state: TarState::Header,
            pending: Vec::with_capacity(512),
            found: None,
            next_name: None,
        }
    }

    /// The state after a whole header; `None` at the end of the archive (or past what a tar
    /// can say).
    fn after_header(&mut self, header: &[u8]) -> Option<TarState> {
        if header.iter().all(|&byte| byte == 0) {
            return None;
        }
        let field = |range: std::ops::Range<usize>| {
            let bytes = &header[range];
            let end = bytes
                .iter()
                .position(|&byte| byte == 0)
                .unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        };
        let mut name = field(0..100);
        let prefix = field(345..500);
        if &header[257..262] == b"ustar" && !prefix.is_empty() {
            name = format!("{prefix}/{name}");
        }
        // Sizes past the octal field's reach (base-256) are no copyright file: skipped whole.
        let size = if header[124] & 0x80 != 0 {
            header[128..136]
                .iter()
                .fold(0u64, |value, &byte| (value << 8) | u64::from(byte))
        } else {
            u64::from_str_radix(field(124..136).trim(), 8).ok()?
        };
        let padded = size.checked_next_multiple_of(512)?;
        if matches!(header[156], b'L' | b'x') && size <= MAX_META {
            return Some(TarState::Meta {
                kind: header[156],
                data: Vec::with_capacity(size as usize),
                size,
                left: padded,
            });
        }
        if let Some(long) = self.next_name.take() {
            name = long;
        }
        let regular = matches!(header[156], b'0' | 0);
        if regular && name.trim_start_matches("./") == self.wanted && size <= MAX_TEXT {
            Some(TarState::Keep {
                data: Vec::with_capacity(size as usize),
                left: padded,
            })
        } else {
            Some(TarState::Skip(padded))
        }
    }
}

impl Write for TarFinder {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let stop = || std::io::Error::other("the file is found, or the archive ended");
        let mut rest = bytes;
        while !rest.is_empty() {
            match &mut self.state {
                TarState::Header => {
                    let take = (512 - self.pending.len()).min(rest.len());
                    self.pending.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if self.pending.len() == 512 {
                        let header = std::mem::take(&mut self.pending);
                        self.state = self.after_header(&header).ok_or_else(stop)?;
                    }
                }
                TarState::Skip(left) => {
                    let take = (*left).min(rest.len() as u64) as usize;
                    *left -= take as u64;
                    rest = &rest[take..];
                    if *left == 0 {
                        self.state = TarState::Header;
                    }
                }
                TarState::Meta {
                    kind,
                    data,
                    size,
                    left,
                } => {
                    let take = (*left).min(rest.len() as u64) as usize;
                    data.extend_from_slice(&rest[..take]);
                    *left -= take as u64;
                    rest = &rest[take..];
                    if *left == 0 {
                        data.truncate(*size as usize);
                        self.next_name = meta_name(*kind, data);
                        self.state = TarState::Header;
                    }
                }
                TarState::Keep { data, left } => {
                    let take = (*left).min(rest.len() as u64) as usize;
                    data.extend_from_slice(&rest[..take]);
                    *left -= take as u64;
                    rest = &rest[take..];
                    if *left == 0 {
                        let mut data = std::mem::take(data);
                        // The padding is not the file's.
                        while data.last() == Some(&0) {
                            data.pop();
                        }
                        self.found = Some(data);
                        return Err(stop());
                    }
                }
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The name a GNU long-name entry (`L`: the name, NUL-ended) or a PAX header (`x`: `<len>
/// path=<name>` records) gives the entry after it.
fn meta_name(kind: u8, data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    match kind {
        b'L' => Some(text.trim_end_matches('\0').to_string()),
        _ => text.lines().find_map(|record| {
            let (_, field) = record.split_once(' ')?;
            field.strip_prefix("path=").map(str::to_string)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A .deb as dpkg-deb lays it out, its members made with the tar crate (which writes a
    /// GNU long-name entry for a path past 100 bytes).
    fn deb(package: &str, copyright: &[u8]) -> Vec<u8> {
        let tar_of = |files: &[(&str, &[u8])]| {
            let mut builder = tar::Builder::new(Vec::new());
            for (path, data) in files {
                let mut header = tar::Header::new_gnu();
                header.set_size(data.len() as u64);
                header.set_mode(0o644);
                header.set_cksum();
                builder.append_data(&mut header, path, *data).unwrap();
            }
            builder.into_inner().unwrap()
        };
        let control_text = format!("Package: {package}\nSource: foo (1.2-1)\nVersion: 1.2-1+b1\n");
        let control = tar_of(&[("./control", control_text.as_bytes())]);
        let big = vec![7u8; 3000];
        let doc = format!("./usr/share/doc/{package}/copyright");
        let data = tar_of(&[("./usr/lib/libfoo.so.1", &big), (&doc, copyright)]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let data = gz.finish().unwrap();
        let mut deb = b"!<arch>\n".to_vec();
        for (name, bytes) in [
            ("debian-binary", &b"2.0\n"[..]),
            ("control.tar", &control),
            ("data.tar.gz", &data),
        ] {
            deb.extend_from_slice(
                format!(
                    "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                    0,
                    0,
                    0,
                    100644,
                    bytes.len()
                )
                .as_bytes(),
            );
            deb.extend_from_slice(bytes);
            if bytes.len() % 2 == 1 {
                deb.push(b'\n');
            }
        }
        deb
    }

    #[test]
    fn a_deb_names_its_source_and_licences() {
        let copyright = b"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nCopyright: 2020 Someone\nLicense: MIT\n\nFiles: debian/*\nLicense: GPL-2+\n Long text.\n\nLicense: MIT\n Permission is hereby granted.\n";
        let long_name = format!("lib{}", "x".repeat(100));
        for package in ["libfoo1", long_name.as_str()] {
            let deb = deb(package, copyright);
            let facts = deb_facts(&mut deb.as_slice());
            assert_eq!(facts.source.as_deref(), Some("foo"), "{package}");
            assert_eq!(facts.licences, ["MIT", "GPL-2+"], "{package}");
            // Damaged input says less, and never panics.
            for cut in [0, 7, 8, 70, deb.len() / 2] {
                deb_facts(&mut &deb[..cut]);
            }
        }
        // A header whose size is past what a tar can say stops the scan, without a panic.
        let mut finder = TarFinder::new("x".into());
        let mut header = [0u8; 512];
        header[0] = b'y';
        header[124] = 0x80;
        header[128..136].copy_from_slice(&[0xff; 8]);
        assert!(finder.write(&header).is_err());
    }
}
