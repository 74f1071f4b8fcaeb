//! The metadata of the subset a package ships: `repomd.xml`, primary metadata with each
//! package's element as the repository wrote it (its location pointed at the shipped file),
//! and `filelists` and `other` with the files the primary metadata lists and no changelogs.

use std::io::Write as _;

use berth_formats::Sha256Digest;

use crate::host_packages::rpm::RpmPackage;

/// The `repodata/` files of a repository holding `packages`, each shipped under its file
/// name beside `repodata/`: `(path, bytes)`, `repodata/repomd.xml` last. `timestamp` is the
/// time recorded for each file, so equal inputs give equal bytes.
pub fn write(packages: &[&RpmPackage], timestamp: u64) -> Vec<(String, Vec<u8>)> {
    let count = packages.len();
    let mut primary = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"{count}\">\n"
    );
    let mut filelists = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<filelists xmlns=\"http://linux.duke.edu/metadata/filelists\" packages=\"{count}\">\n"
    );
    let mut other = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<otherdata xmlns=\"http://linux.duke.edu/metadata/other\" packages=\"{count}\">\n"
    );
    for package in packages {
        primary.push_str(&relocated(&package.xml, package.file_name()));
        primary.push('\n');
        let head = format!(
            "<package pkgid=\"{}\" name=\"{}\" arch=\"{}\">\n  <version epoch=\"{}\" ver=\"{}\" rel=\"{}\"/>\n",
            package.sha256,
            quick_xml::escape::escape(&package.name),
            quick_xml::escape::escape(&package.arch),
            quick_xml::escape::escape(if package.evr.epoch.is_empty() {
                "0"
            } else {
                &package.evr.epoch
            }),
            quick_xml::escape::escape(&package.evr.version),
            quick_xml::escape::escape(&package.evr.release),
        );
        filelists.push_str(&head);
        for file in &package.files {
            filelists.push_str(&format!(
                "  <file>{}</file>\n",
                quick_xml::escape::escape(file)
            ));
        }
        filelists.push_str("</package>\n");
        other.push_str(&head);
        other.push_str("</package>\n");
    }
    primary.push_str("</metadata>\n");
    filelists.push_str("</filelists>\n");
    other.push_str("</otherdata>\n");

    let mut files = Vec::new();
    let mut repomd = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n",
    );
    repomd.push_str(&format!("  <revision>{timestamp}</revision>\n"));
    for (kind, xml) in [
        ("primary", primary),
        ("filelists", filelists),
        ("other", other),
    ] {
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(xml.as_bytes())
            .expect("writing to memory cannot fail");
        let compressed = gzip.finish().expect("writing to memory cannot fail");
        let path = format!("repodata/{kind}.xml.gz");
        repomd.push_str(&format!(
            "  <data type=\"{kind}\">\n    <checksum type=\"sha256\">{}</checksum>\n    <open-checksum type=\"sha256\">{}</open-checksum>\n    <location href=\"{path}\"/>\n    <timestamp>{timestamp}</timestamp>\n    <size>{}</size>\n    <open-size>{}</open-size>\n  </data>\n",
            Sha256Digest::of(&compressed).hex(),
            Sha256Digest::of(xml.as_bytes()).hex(),
            compressed.len(),
            xml.len(),
        ));
        files.push((path, compressed));
    }
    repomd.push_str("</repomd>\n");
    files.push(("repodata/repomd.xml".to_string(), repomd.into_bytes()));
    files
}

/// A `<package>` element with its `<location …/>` pointing at `file_name` beside `repodata/`.
fn relocated(xml: &str, file_name: &str) -> String {
    let location = format!(
        "<location href=\"{}\"/>",
        quick_xml::escape::escape(file_name)
    );
    match xml.find("<location").and_then(|start| {
        xml[start..]
            .find("/>")
            .map(|length| (start, start + length + 2))
    }) {
        Some((start, end)) => format!("{}{location}{}", &xml[..start], &xml[end..]),
        None => xml.to_string(),
    }
}
