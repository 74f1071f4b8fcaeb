//! The bundle as troubleshoot writes one: `version.yaml`, `analysis.json` and
//! `execution-data/summary.txt` beside the collectors' files, all under one top folder named
//! as the archive, in a gzip'd tar of regular files (USTAR headers, no folder entries).

use std::io::Write as _;
use std::path::Path;

use super::{CollectorRun, Staging};
use crate::report::Report;

/// The troubleshoot version a bundle says it was made by is Berth's own.
pub fn version_yaml(version: &str) -> String {
    format!(
        "apiVersion: troubleshoot.sh/v1beta2\nkind: SupportBundle\nspec:\n  versionNumber: {version}\n"
    )
}

/// troubleshoot's `execution-data/summary.txt`.
pub fn summary(
    collectors: &[CollectorRun],
    redactions: usize,
    analyzers: usize,
    milliseconds: u64,
) -> String {
    let mut out = String::from(
        "============ Collectors summary =============\nSucceeded (S), eXcluded (X), Failed (F)\n=============================================\n",
    );
    let mut sorted = collectors.to_vec();
    sorted.sort_by_key(|run| std::cmp::Reverse(run.milliseconds));
    let width = sorted
        .iter()
        .map(|run| run.title.chars().count())
        .max()
        .unwrap_or(0);
    if sorted.is_empty() {
        out.push_str("No collectors executed\n");
    }
    for run in &sorted {
        out.push_str(&format!(
            "{:<width$} ({}) : {}ms\n",
            run.title,
            run.status,
            thousands(run.milliseconds)
        ));
    }
    out.push_str("\n============ Redactors summary =============\n");
    if redactions == 0 {
        out.push_str("No redactors executed\n");
    } else {
        out.push_str(&format!(
            "{redactions} values hidden (see execution-data/redactions.json)\n"
        ));
    }
    out.push_str("\n============= Analyzers summary =============\n");
    if analyzers == 0 {
        out.push_str("No analyzers executed\n");
    } else {
        out.push_str(&format!(
            "{analyzers} analyzer results (see analysis.json)\n"
        ));
    }
    out.push_str(&format!("\nDuration: {}ms\n", thousands(milliseconds)));
    out
}

fn thousands(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Writes the files that close a bundle into `staging`: version, analysis, summaries.
pub fn close(staging: &Staging, report: &Report, version: &str) -> Result<(), String> {
    staging.write_closing("version.yaml", version_yaml(version).as_bytes())?;
    let analysis = super::analysis(report);
    let text = serde_json::to_string_pretty(&analysis).map_err(|error| error.to_string())?;
    staging.write_closing("analysis.json", text.as_bytes())?;
    let redactions = staging.redactions();
    let listed = serde_json::to_vec_pretty(&redactions).map_err(|error| error.to_string())?;
    let summary = summary(
        &staging.collectors(),
        redactions.count(),
        analysis.len(),
        report.milliseconds,
    );
    staging.write_closing("execution-data/summary.txt", summary.as_bytes())?;
    staging.write_closing("execution-data/redactions.json", &listed)?;
    Ok(())
}

/// A gzip'd tar being written: regular files under one top folder.
pub struct ArchiveWriter {
    builder: tar::Builder<flate2::write::GzEncoder<std::fs::File>>,
    top: String,
    mtime: u64,
}

impl ArchiveWriter {
    /// An archive written to `file`, its entries under `top/`.
    fn new(file: std::fs::File, top: &str) -> Self {
        let encoder = flate2::GzBuilder::new()
            .operating_system(255)
            .write(file, flate2::Compression::default());
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        Self {
            builder: tar::Builder::new(encoder),
            top: top.to_string(),
            mtime,
        }
    }

    fn header(&self, size: u64, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(size);
        header.set_mode(mode);
        header.set_mtime(self.mtime);
        header.set_uid(0);
        header.set_gid(0);
        let _ = header.set_username("root");
        let _ = header.set_groupname("root");
        header
    }

    /// Adds a file's bytes at `path` under the top folder.
    pub fn add_bytes(&mut self, path: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let mut header = self.header(bytes.len() as u64, mode);
        let name = format!("{}/{path}", self.top);
        self.builder.append_data(&mut header, name, bytes)
    }

    /// Adds `size` bytes read from `reader` at `path` under the top folder.
    pub fn add_reader(
        &mut self,
        path: &str,
        reader: impl std::io::Read,
        size: u64,
        mode: u32,
    ) -> std::io::Result<()> {
        let mut header = self.header(size, mode);
        let name = format!("{}/{path}", self.top);
        self.builder
            .append_data(&mut header, name, reader.take(size))
    }

    /// Adds a file from disk at `path` under the top folder.
    pub fn add_file(&mut self, path: &str, source: &Path, mode: u32) -> std::io::Result<()> {
        let file = fs_err::File::open(source)?;
        let size = file.metadata()?.len();
        let mut header = self.header(size, mode);
        let name = format!("{}/{path}", self.top);
        self.builder.append_data(&mut header, name, file)
    }

    /// Adds every file of `staging`, by path.
    pub fn add_staging(&mut self, staging: &Staging, under: &str) -> std::io::Result<()> {
        for (path, written) in staging.files() {
            let inside = if under.is_empty() {
                path.clone()
            } else {
                format!("{under}/{path}")
            };
            self.add_file(&inside, &staging.root().join(&path), written.mode)?;
        }
        Ok(())
    }

    fn finish(self) -> std::io::Result<()> {
        let encoder = self.builder.into_inner()?;
        let mut file = encoder.finish()?;
        file.flush()?;
        file.sync_all()
    }
}

/// Writes an archive to `output` whose entries `fill` adds under `top/`: into a new file
/// beside it (0600: it holds a host's logs; never a file or link already there), renamed over
/// `output` once whole, removed if anything fails.
pub fn write_archive(
    output: &Path,
    top: &str,
    fill: impl FnOnce(&mut ArchiveWriter) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let folder = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let partial = tempfile::Builder::new()
        .prefix(".support-bundle-")
        .suffix(".partial")
        .tempfile_in(folder)
        .map_err(|error| {
            std::io::Error::new(error.kind(), format!("{}: {error}", folder.display()))
        })?;
    let mut writer = ArchiveWriter::new(partial.as_file().try_clone()?, top);
    fill(&mut writer)?;
    writer.finish()?;
    partial.persist(output).map(|_| ()).map_err(|error| {
        std::io::Error::new(
            error.error.kind(),
            format!("{}: {}", output.display(), error.error),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_take_separators_as_troubleshoots_do() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
