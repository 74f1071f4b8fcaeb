//! rpm repository metadata (`repodata/`): reading a repository's `repomd.xml` and primary
//! metadata here; writing the metadata of the subset a package ships in [`write`], so dnf or
//! yum on the node reads that subset as a repository of its own.

use std::io::Read;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::QName;

mod write;

pub use write::write;

use super::rpm::{Capability, Evr, Requirement, RpmError, RpmPackage, flags_operator};

/// One `<data>` entry of `repomd.xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataFile {
    /// `primary`, `filelists`, `other`, …
    pub kind: String,
    /// Path relative to the repository's root.
    pub href: String,
    pub checksum_type: String,
    pub checksum: String,
    pub size: Option<u64>,
}

fn metadata_error(origin: &str, problem: impl std::fmt::Display) -> RpmError {
    RpmError::Metadata {
        origin: origin.to_string(),
        problem: problem.to_string(),
    }
}

fn attribute(origin: &str, element: &BytesStart<'_>, name: &str) -> Result<String, RpmError> {
    Ok(
        match element
            .try_get_attribute(name)
            .map_err(|error| metadata_error(origin, error))?
        {
            Some(value) => value
                .unescape_value()
                .map_err(|error| metadata_error(origin, error))?
                .into_owned(),
            None => String::new(),
        },
    )
}

/// The text of the element just opened, unescaped.
fn text(origin: &str, reader: &mut Reader<&[u8]>, end: QName<'_>) -> Result<String, RpmError> {
    let raw = reader
        .read_text(end)
        .map_err(|error| metadata_error(origin, error))?;
    Ok(quick_xml::escape::unescape(raw.trim())
        .map_err(|error| metadata_error(origin, error))?
        .into_owned())
}

/// The metadata files `repomd.xml` lists.
pub fn read_repomd(origin: &str, xml: &str) -> Result<Vec<MetadataFile>, RpmError> {
    let mut reader = Reader::from_str(xml);
    let mut files = Vec::new();
    let mut current: Option<MetadataFile> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|error| metadata_error(origin, error))?;
        match event {
            Event::Start(element) if element.local_name().as_ref() == b"data" => {
                current = Some(MetadataFile {
                    kind: attribute(origin, &element, "type")?,
                    href: String::new(),
                    checksum_type: String::new(),
                    checksum: String::new(),
                    size: None,
                });
            }
            Event::Start(element) | Event::Empty(element) if current.is_some() => {
                let file = current.as_mut().expect("checked");
                match element.local_name().as_ref() {
                    b"checksum" => {
                        file.checksum_type = attribute(origin, &element, "type")?;
                        file.checksum = text(origin, &mut reader, element.name())?;
                    }
                    b"location" => file.href = attribute(origin, &element, "href")?,
                    b"size" => {
                        file.size = text(origin, &mut reader, element.name())?.parse().ok();
                    }
                    _ => {}
                }
            }
            Event::End(element) if element.local_name().as_ref() == b"data" => {
                files.extend(current.take());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if files.is_empty() {
        return Err(metadata_error(origin, "lists no metadata files"));
    }
    Ok(files)
}

/// Decompresses a metadata file by its name's suffix: `.gz`, `.xz`, `.zst` or none.
pub fn decompress(name: &str, compressed: impl Read) -> std::io::Result<String> {
    let mut text = String::new();
    let mut buffered = std::io::BufReader::new(compressed);
    if name.ends_with(".gz") {
        flate2::read::GzDecoder::new(buffered).read_to_string(&mut text)?;
    } else if name.ends_with(".xz") {
        let mut bytes = Vec::new();
        lzma_rs::xz_decompress(&mut buffered, &mut bytes)
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))?;
        text = String::from_utf8(bytes)
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))?;
    } else if name.ends_with(".zst") {
        zstd::stream::read::Decoder::with_buffer(buffered)?.read_to_string(&mut text)?;
    } else if name.ends_with(".xml") {
        buffered.read_to_string(&mut text)?;
    } else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("{name}: Berth reads metadata compressed with gzip, xz or zstd"),
        ));
    }
    Ok(text)
}

/// Which dependency list the entries being read belong to.
#[derive(Clone, Copy)]
enum List {
    Provides,
    Requires,
    Conflicts,
    Obsoletes,
    Other,
}

/// Every package of a primary metadata file; `repository` is the root the packages'
/// locations are relative to.
pub fn read_primary(
    origin: &str,
    repository: &str,
    xml: &str,
) -> Result<Vec<RpmPackage>, RpmError> {
    let mut reader = Reader::from_str(xml);
    let mut packages = Vec::new();
    let mut current: Option<(usize, RpmPackage, String)> = None;
    let mut list = List::Other;
    loop {
        let start = reader.buffer_position() as usize;
        let event = reader
            .read_event()
            .map_err(|error| metadata_error(origin, error))?;
        let is_start = matches!(event, Event::Start(_));
        match event {
            Event::Start(element) if element.local_name().as_ref() == b"package" => {
                current = Some((
                    start,
                    RpmPackage {
                        name: String::new(),
                        arch: String::new(),
                        evr: Evr::default(),
                        sha256: String::new(),
                        size: 0,
                        url: String::new(),
                        provides: Vec::new(),
                        requires: Vec::new(),
                        conflicts: Vec::new(),
                        obsoletes: Vec::new(),
                        files: Vec::new(),
                        license: String::new(),
                        source_rpm: String::new(),
                        xml: String::new(),
                    },
                    String::new(),
                ));
            }
            Event::End(element) if element.local_name().as_ref() == b"package" => {
                let Some((start, mut package, checksum_type)) = current.take() else {
                    continue;
                };
                let end = reader.buffer_position() as usize;
                let shown = format!("{origin}: package `{}`", package.name);
                if checksum_type != "sha256" {
                    return Err(metadata_error(
                        &shown,
                        format!(
                            "its checksum is {checksum_type}; Berth checks packages by sha256 only"
                        ),
                    ));
                }
                package.xml = xml[start..end].trim().to_string();
                packages.push(package);
            }
            Event::Start(element) | Event::Empty(element) => {
                let Some((_, package, checksum_type)) = current.as_mut() else {
                    continue;
                };
                match element.local_name().as_ref() {
                    b"name" if is_start => {
                        package.name = text(origin, &mut reader, element.name())?;
                    }
                    b"arch" if is_start => {
                        package.arch = text(origin, &mut reader, element.name())?;
                    }
                    b"version" => package.evr = evr_of(origin, &element)?,
                    b"checksum" if is_start => {
                        *checksum_type = attribute(origin, &element, "type")?;
                        package.sha256 = text(origin, &mut reader, element.name())?;
                    }
                    b"size" => {
                        package.size =
                            attribute(origin, &element, "package")?
                                .parse()
                                .map_err(|_| {
                                    metadata_error(origin, "a package size is not a number")
                                })?;
                    }
                    b"location" => {
                        let href = attribute(origin, &element, "href")?;
                        let base = attribute(origin, &element, "xml:base")?;
                        let root = if base.is_empty() { repository } else { &base };
                        package.url = format!("{}/{href}", root.trim_end_matches('/'));
                    }
                    b"provides" => list = List::Provides,
                    b"requires" => list = List::Requires,
                    b"conflicts" => list = List::Conflicts,
                    b"obsoletes" => list = List::Obsoletes,
                    b"recommends" | b"suggests" | b"supplements" | b"enhances" => {
                        list = List::Other;
                    }
                    b"entry" => {
                        let entry = entry_of(origin, &element).map_err(|problem| {
                            metadata_error(
                                &format!("{origin}: package `{}`", package.name),
                                problem,
                            )
                        })?;
                        match (list, entry) {
                            (List::Provides, Requirement::Capability(capability)) => {
                                package.provides.push(capability);
                            }
                            (List::Requires, requirement) => package.requires.push(requirement),
                            (List::Conflicts, Requirement::Capability(capability)) => {
                                package.conflicts.push(capability);
                            }
                            (List::Obsoletes, Requirement::Capability(capability)) => {
                                package.obsoletes.push(capability);
                            }
                            _ => {}
                        }
                    }
                    b"license" if is_start => {
                        package.license = text(origin, &mut reader, element.name())?;
                    }
                    b"sourcerpm" if is_start => {
                        package.source_rpm = text(origin, &mut reader, element.name())?;
                    }
                    b"file" if is_start => {
                        package
                            .files
                            .push(text(origin, &mut reader, element.name())?);
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(packages)
}

fn evr_of(origin: &str, element: &BytesStart<'_>) -> Result<Evr, RpmError> {
    Ok(Evr {
        epoch: attribute(origin, element, "epoch")?,
        version: attribute(origin, element, "ver")?,
        release: attribute(origin, element, "rel")?,
    })
}

/// An `<rpm:entry name=… flags=… epoch=… ver=… rel=…/>`.
fn entry_of(origin: &str, element: &BytesStart<'_>) -> Result<Requirement, String> {
    let read = |name: &str| attribute(origin, element, name).map_err(|error| error.to_string());
    let name = read("name")?;
    let flags = read("flags")?;
    if name.starts_with('(') {
        return Requirement::parse(&name);
    }
    let constraint = if flags.is_empty() {
        None
    } else {
        let evr = evr_of(origin, element).map_err(|error| error.to_string())?;
        Some((flags_operator(&flags)?, evr))
    };
    Ok(Requirement::Capability(Capability { name, constraint }))
}

#[cfg(test)]
mod tests {
    use berth_formats::Sha256Digest;

    use super::*;

    const PRIMARY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="1">
<package type="rpm">
  <name>tool</name>
  <arch>x86_64</arch>
  <version epoch="1" ver="2.0" rel="3.el9"/>
  <checksum type="sha256" pkgid="YES">abc</checksum>
  <summary>A &amp; B</summary>
  <size package="1234" installed="5000" archive="6000"/>
  <location xml:base="http://mirror.invalid/other" href="Packages/t/tool-2.0-3.el9.x86_64.rpm"/>
  <format>
    <rpm:provides>
      <rpm:entry name="tool" flags="EQ" epoch="1" ver="2.0" rel="3.el9"/>
      <rpm:entry name="tool-api"/>
    </rpm:provides>
    <rpm:requires>
      <rpm:entry name="/bin/sh" pre="1"/>
      <rpm:entry name="libz" flags="GE" epoch="0" ver="1.2" pre="1"/>
      <rpm:entry name="(a or b &gt;= 2)"/>
    </rpm:requires>
    <rpm:recommends>
      <rpm:entry name="extra"/>
    </rpm:recommends>
    <rpm:conflicts>
      <rpm:entry name="old-tool" flags="LT" epoch="0" ver="1"/>
    </rpm:conflicts>
    <file>/usr/bin/tool</file>
    <file type="dir">/etc/tool</file>
  </format>
</package>
</metadata>
"#;

    #[test]
    fn primary_metadata_reads_versions_dependencies_and_files() {
        let packages = read_primary("primary.xml", "http://repo.invalid/os", PRIMARY).unwrap();
        assert_eq!(packages.len(), 1);
        let tool = &packages[0];
        assert_eq!(tool.name, "tool");
        assert_eq!(tool.evr.to_string(), "1:2.0-3.el9");
        assert_eq!(tool.size, 1234);
        assert_eq!(
            tool.url,
            "http://mirror.invalid/other/Packages/t/tool-2.0-3.el9.x86_64.rpm"
        );
        assert_eq!(
            tool.requires
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["/bin/sh", "libz >= 1.2", "(a or b >= 2)"]
        );
        assert_eq!(tool.provides.len(), 2);
        assert_eq!(tool.conflicts[0].to_string(), "old-tool < 1");
        assert_eq!(tool.files, ["/usr/bin/tool", "/etc/tool"]);
        assert!(tool.xml.starts_with("<package type=\"rpm\">"));
        assert!(tool.xml.ends_with("</package>"));
    }

    #[test]
    fn written_repodata_points_at_the_shipped_files_and_reads_back() {
        let packages = read_primary("primary.xml", "http://repo.invalid/os", PRIMARY).unwrap();
        let files = write(&packages.iter().collect::<Vec<_>>(), 0);
        let names: Vec<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            names,
            [
                "repodata/primary.xml.gz",
                "repodata/filelists.xml.gz",
                "repodata/other.xml.gz",
                "repodata/repomd.xml"
            ]
        );
        let repomd = read_repomd("repomd.xml", std::str::from_utf8(&files[3].1).unwrap()).unwrap();
        assert_eq!(repomd[0].kind, "primary");
        assert_eq!(repomd[0].checksum, Sha256Digest::of(&files[0].1).hex());
        let primary = decompress("primary.xml.gz", files[0].1.as_slice()).unwrap();
        let again = read_primary("subset", "/local", &primary).unwrap();
        assert_eq!(again[0].url, "/local/tool-2.0-3.el9.x86_64.rpm");
        assert_eq!(again[0].requires, packages[0].requires);
        // The same packages give the same bytes.
        assert_eq!(files, write(&packages.iter().collect::<Vec<_>>(), 0));
    }

    #[test]
    fn metadata_decompresses_by_its_suffix() {
        let zstd = zstd::stream::encode_all(PRIMARY.as_bytes(), 1).unwrap();
        assert_eq!(
            decompress("primary.xml.zst", zstd.as_slice()).unwrap(),
            PRIMARY
        );
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut PRIMARY.as_bytes(), &mut xz).unwrap();
        assert_eq!(
            decompress("primary.xml.xz", xz.as_slice()).unwrap(),
            PRIMARY
        );
        let error = decompress("primary.xml.bz2", PRIMARY.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("gzip, xz or zstd"), "{error}");
    }

    #[test]
    fn a_checksum_other_than_sha256_is_refused_by_name() {
        let sha1 = PRIMARY.replace("type=\"sha256\"", "type=\"sha1\"");
        let error = read_primary("primary.xml", "/", &sha1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "primary.xml: package `tool`: its checksum is sha1; Berth checks packages by sha256 only"
        );
    }
}
