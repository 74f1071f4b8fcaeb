//! A run's results as CI and people read them: JUnit XML (`junit.xml`) and a static HTML page
//! (`index.html`), a grid of tests × OSes like kURL's, each cell linking to a page of its
//! steps, logs, consoles and collected state. Everything nodes wrote is escaped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use super::result::{CellResult, StepStatus};

/// Text as HTML or XML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            // XML 1.0 has no place for other control characters.
            '\n' | '\t' | '\r' => escaped.push(c),
            c if c.is_control() => escaped.push('\u{FFFD}'),
            c => escaped.push(c),
        }
    }
    escaped
}

/// A link's target: a relative path of the report's own files, each part percent-encoded.
fn href(path: &str) -> String {
    path.split('/')
        .map(|part| url::form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>())
        .collect::<Vec<_>>()
        .join("/")
}

fn duration(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    if seconds >= 60 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{seconds}s")
    }
}

pub fn junit(results: &[CellResult]) -> String {
    let failures = results.iter().filter(|result| !result.passed).count();
    let total: f64 = results.iter().map(|result| result.seconds).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"berth-testgrid\" tests=\"{}\" failures=\"{failures}\" time=\"{total:.1}\">",
        results.len()
    );
    let mut by_os: BTreeMap<&str, Vec<&CellResult>> = BTreeMap::new();
    for result in results {
        by_os.entry(&result.os_id).or_default().push(result);
    }
    for (os, cells) in by_os {
        let failed = cells.iter().filter(|cell| !cell.passed).count();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">",
            escape(os),
            cells.len()
        );
        for cell in cells {
            let _ = write!(
                xml,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.1}\"",
                escape(&cell.os_id),
                escape(&cell.test),
                cell.seconds
            );
            match &cell.failure {
                None if cell.passed => xml.push_str("/>\n"),
                failure => {
                    let message = failure.as_deref().unwrap_or("no step ran");
                    let first = message.lines().next().unwrap_or_default();
                    let _ = writeln!(
                        xml,
                        ">\n      <failure message=\"{}\">{}</failure>\n      <system-out>logs: {}</system-out>\n    </testcase>",
                        escape(first),
                        escape(message),
                        escape(&cell.folder)
                    );
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #999;padding:.4em .7em;text-align:left;vertical-align:top}td.pass{background:#c8f0c8}td.fail{background:#f6c4c4}td.none{background:#eee;color:#777}pre{white-space:pre-wrap;max-width:70em}";

pub fn index_html(results: &[CellResult]) -> String {
    let tests: Vec<&str> = {
        let mut seen = BTreeSet::new();
        results
            .iter()
            .map(|result| result.test.as_str())
            .filter(|test| seen.insert(*test))
            .collect()
    };
    let oses: BTreeMap<&str, &str> = results
        .iter()
        .map(|result| (result.os_id.as_str(), result.os_title.as_str()))
        .collect();
    let passed = results.iter().filter(|result| result.passed).count();
    // And by OS: a failure that is one distribution's shows at a glance.
    let by_os: Vec<String> = oses
        .keys()
        .map(|id| {
            let cells: Vec<_> = results
                .iter()
                .filter(|result| result.os_id == *id)
                .collect();
            let passed = cells.iter().filter(|result| result.passed).count();
            format!("{}: {passed} of {}", escape(id), cells.len())
        })
        .collect();
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Berth testgrid</title><style>{STYLE}</style></head><body>\n<h1>Berth testgrid</h1>\n<p id=\"summary\">{passed} of {} cells passed ({})</p>\n<table id=\"grid\">\n<tr><th>test</th>",
        results.len(),
        by_os.join(", ")
    );
    for (id, title) in &oses {
        let _ = write!(html, "<th title=\"{}\">{}</th>", escape(id), escape(title));
    }
    html.push_str("</tr>\n");
    for test in tests {
        let _ = write!(html, "<tr><th>{}</th>", escape(test));
        for id in oses.keys() {
            match results
                .iter()
                .find(|result| result.test == test && result.os_id == *id)
            {
                Some(cell) => {
                    let (class, word) = if cell.passed {
                        ("pass", "PASS")
                    } else {
                        ("fail", "FAIL")
                    };
                    let _ = write!(
                        html,
                        "<td class=\"{class}\"><a href=\"{}/index.html\">{word}</a> {}",
                        href(&cell.folder),
                        duration(cell.seconds)
                    );
                    if let Some(failure) = &cell.failure {
                        let first = failure.lines().next().unwrap_or_default();
                        let _ = write!(html, "<br><small>{}</small>", escape(first));
                    }
                    html.push_str("</td>");
                }
                None => html.push_str("<td class=\"none\">not run</td>"),
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n</body></html>\n");
    html
}

pub fn cell_html(cell: &CellResult) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{} on {}</title><style>{STYLE}</style></head><body>\n<p><a href=\"{}index.html\">the grid</a></p>\n<h1>{} on {}</h1>\n<p id=\"verdict\">{} in {} ({} provider)</p>\n",
        escape(&cell.test),
        escape(&cell.os_title),
        "../".repeat(cell.folder.split('/').count()),
        escape(&cell.test),
        escape(&cell.os_title),
        if cell.passed { "PASSED" } else { "FAILED" },
        duration(cell.seconds),
        escape(&cell.provider),
    );
    if let Some(failure) = &cell.failure {
        let _ = writeln!(
            html,
            "<h2>Failure</h2>\n<pre id=\"failure\">{}</pre>",
            escape(failure)
        );
    }
    html.push_str("<h2>Steps</h2>\n<table id=\"steps\"><tr><th>step</th><th>node</th><th>result</th><th>time</th><th>message</th></tr>\n");
    for step in &cell.steps {
        let class = if step.status == StepStatus::Passed {
            "pass"
        } else {
            "fail"
        };
        let node = step.node.as_deref().unwrap_or("runner");
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td><a href=\"{}\">{}</a></td><td class=\"{class}\">{:?}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            escape(&step.name),
            href(&format!("{node}.log")),
            escape(node),
            step.status,
            duration(step.seconds),
            escape(&step.message)
        );
    }
    html.push_str("</table>\n<h2>Files</h2>\n<ul id=\"files\">\n");
    for file in &cell.files {
        let _ = writeln!(
            html,
            "<li><a href=\"{}\">{}</a></li>",
            href(file),
            escape(file)
        );
    }
    html.push_str("</ul>\n</body></html>\n");
    html
}

/// Writes `junit.xml`, `index.html` and each cell's page under `out`.
pub fn write(out: &Path, results: &[CellResult]) -> std::io::Result<()> {
    fs_err::create_dir_all(out)?;
    fs_err::write(out.join("junit.xml"), junit(results))?;
    fs_err::write(out.join("index.html"), index_html(results))?;
    for cell in results {
        let dir = out.join(&cell.folder);
        fs_err::create_dir_all(&dir)?;
        fs_err::write(dir.join("index.html"), cell_html(cell))?;
    }
    Ok(())
}

/// A `result.json` is a few KiB: a larger one was not written by a cell.
const MAX_RESULT_BYTES: u64 = 16 << 20;
/// The most files a cell may name: a few for each of its at most 16 nodes.
const MAX_CELL_FILES: usize = 256;
/// The most bytes `merge` copies of one file of a cell, and of all of them: a cell's logs,
/// consoles and collected state take a few MiB.
const MAX_FILE_BYTES: u64 = 256 << 20;
const MAX_CELL_BYTES: u64 = 1 << 30;

/// Opens `path`, a file of the folder `root` (canonical), to read: refused, saying why, when
/// it is a symbolic link, not a regular file, or the kernel finds it outside `root` (a link
/// among its folders); returns it with its size.
fn open_within(root: &Path, path: &Path) -> Result<(fs_err::File, u64), String> {
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::io::AsRawFd as _;
    let metadata = fs_err::symlink_metadata(path).map_err(|error| error.to_string())?;
    if metadata.is_symlink() {
        return Err("a symbolic link, which is never followed".to_string());
    }
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    // Not following a link put there since, nor waiting on a FIFO.
    let file = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| error.to_string())?;
    let metadata = file.metadata().map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    let resolved = fs_err::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| fs_err::canonicalize(path))
        .map_err(|error| error.to_string())?;
    if !resolved.starts_with(root) {
        return Err(format!(
            "it resolves to {}, outside {}",
            resolved.display(),
            root.display()
        ));
    }
    Ok((file, metadata.len()))
}

/// Checks that `folder` (relative) is a folder of `dir`'s own: each of its parts a folder, none
/// a symbolic link, and it resolves below `root` (`dir`, canonical). Returns it, canonical.
fn folder_within(dir: &Path, root: &Path, folder: &str) -> anyhow::Result<std::path::PathBuf> {
    let mut path = dir.to_path_buf();
    for part in folder.split('/') {
        path.push(part);
        let metadata = fs_err::symlink_metadata(&path)?;
        if metadata.is_symlink() || !metadata.is_dir() {
            anyhow::bail!(
                "{} is {}; a report's cells are folders of its own and links are never followed",
                path.display(),
                if metadata.is_symlink() {
                    "a symbolic link"
                } else {
                    "not a folder"
                }
            );
        }
    }
    let resolved = fs_err::canonicalize(&path)?;
    if !resolved.starts_with(root) {
        anyhow::bail!(
            "{} resolves to {}, outside {}",
            path.display(),
            resolved.display(),
            root.display()
        );
    }
    Ok(resolved)
}

/// Every cell result below `dir` (`cells/*/*/result.json`), each in the folder its test and
/// OS make. Symbolic links are never followed, and a shard's `result.json` that is one is
/// refused, as is one in another cell's folder.
pub fn read_results(dir: &Path) -> anyhow::Result<Vec<CellResult>> {
    let mut results = Vec::new();
    let cells = dir.join("cells");
    match fs_err::symlink_metadata(&cells) {
        Ok(metadata) if metadata.is_symlink() => anyhow::bail!(
            "{} is a symbolic link: a report's cells are a folder of its own",
            cells.display()
        ),
        Ok(metadata) if metadata.is_dir() => {}
        _ => anyhow::bail!(
            "{} has no cells: is it a berth-testgrid report?",
            dir.display()
        ),
    }
    let root = fs_err::canonicalize(dir)?;
    for entry in walkdir::WalkDir::new(&cells)
        .follow_links(false)
        .follow_root_links(false)
        .min_depth(3)
        .max_depth(3)
    {
        let entry = entry?;
        if entry.file_name() != "result.json" {
            continue;
        }
        let path = entry.path();
        let (file, size) =
            open_within(&root, path).map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
        if size > MAX_RESULT_BYTES {
            anyhow::bail!(
                "{} is {size} bytes; a cell's result has at most {MAX_RESULT_BYTES}",
                path.display()
            );
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_RESULT_BYTES), &mut bytes)?;
        let result: CellResult = serde_json::from_slice(&bytes)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        // A result names its own folder and files, which `merge` copies: only the folder
        // its test and OS make, the one it is in, and plain file names in it.
        let found = path.strip_prefix(dir).ok().and_then(Path::parent);
        if !super::specs::is_plain_id(&result.os_id)
            || result.folder != super::result::cell_folder(&result.test, &result.os_id)
            || found != Some(Path::new(&result.folder))
            || result.files.len() > MAX_CELL_FILES
            || !result
                .files
                .iter()
                .all(|file| super::specs::is_plain_id(file))
        {
            anyhow::bail!(
                "{}: its folder or files are not those of a cell",
                path.display()
            );
        }
        results.push(result);
    }
    results.sort_by(|a, b| (&a.test, &a.os_id).cmp(&(&b.test, &b.os_id)));
    Ok(results)
}

/// A joined report: its cells, and the files of theirs left out, each with why.
#[derive(Debug)]
pub struct Merged {
    pub results: Vec<CellResult>,
    pub skipped: Vec<String>,
}

/// Joins the reports of `shards` into `out`: each cell's result, and the files it names copied
/// from its folder in its shard. Links are never followed: a cell whose folder is one, or
/// resolves outside its shard, is refused (`read_results`); a file that is a link, not a
/// regular file, outside its shard or too large is left out of the report, said in `skipped`.
/// A cell found in two shards, or two tests of one folder, are refused: neither overwrites the
/// other. Writes the joined `junit.xml` and pages.
pub fn merge(shards: &[std::path::PathBuf], out: &Path) -> anyhow::Result<Merged> {
    let mut cells: BTreeMap<String, (&Path, CellResult)> = BTreeMap::new();
    for shard in shards {
        for result in read_results(shard)? {
            if let Some((other, earlier)) = cells.get(&result.folder) {
                if earlier.test == result.test && earlier.os_id == result.os_id {
                    anyhow::bail!(
                        "`{}` on {} is in both {} and {}: a cell is merged from one shard",
                        result.test,
                        result.os_id,
                        other.display(),
                        shard.display()
                    );
                }
                anyhow::bail!(
                    "tests `{}` ({}) and `{}` ({}) would share the folder {}: rename one",
                    earlier.test,
                    other.display(),
                    result.test,
                    shard.display(),
                    result.folder
                );
            }
            cells.insert(result.folder.clone(), (shard.as_path(), result));
        }
    }
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for (shard, mut result) in cells.into_values() {
        let root = fs_err::canonicalize(shard)?;
        let from = folder_within(shard, &root, &result.folder)?;
        let to = out.join(&result.folder);
        // Merged into a shard of its own: its cells stay as they are.
        if fs_err::canonicalize(&to).is_ok_and(|to| to == from) {
            results.push(result);
            continue;
        }
        let _ = fs_err::remove_dir_all(&to);
        fs_err::create_dir_all(&to)?;
        let mut copied: Vec<String> = Vec::new();
        let mut total = 0;
        for name in &result.files {
            // Written here, from the result.
            if copied.contains(name) || name == "result.json" || name == "index.html" {
                continue;
            }
            let source = from.join(name);
            let opened = open_within(&root, &source).and_then(|(file, size)| {
                if size > MAX_FILE_BYTES {
                    Err(format!(
                        "{size} bytes; a cell's file may have at most {MAX_FILE_BYTES}"
                    ))
                } else if total + size > MAX_CELL_BYTES {
                    Err(format!(
                        "the cell's files would pass {MAX_CELL_BYTES} bytes"
                    ))
                } else {
                    Ok((file, size))
                }
            });
            match opened {
                Ok((file, size)) => {
                    let mut target = fs_err::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(to.join(name))?;
                    // What it held when opened, should it grow since.
                    total += std::io::copy(&mut std::io::Read::take(file, size), &mut target)?;
                    copied.push(name.clone());
                }
                Err(why) => skipped.push(format!(
                    "{}: {why}; left out of the report",
                    shard.join(&result.folder).join(name).display()
                )),
            }
        }
        result.files = copied;
        fs_err::write(
            to.join("result.json"),
            serde_json::to_vec_pretty(&result).expect("a result serialises"),
        )?;
        results.push(result);
    }
    results.sort_by(|a, b| (&a.test, &a.os_id).cmp(&(&b.test, &b.os_id)));
    write(out, &results)?;
    Ok(Merged { results, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::result::StepResult;

    fn cell(test: &str, os: &str, passed: bool) -> CellResult {
        CellResult {
            test: test.to_string(),
            os_id: os.to_string(),
            os_title: format!("Debian <{os}>"),
            provider: "qemu".to_string(),
            passed,
            failure: (!passed).then(|| "install on primary-1: exit 1\n<script>".to_string()),
            seconds: 75.0,
            steps: vec![StepResult {
                name: "install".to_string(),
                node: Some("primary-1".to_string()),
                status: if passed {
                    StepStatus::Passed
                } else {
                    StepStatus::Failed
                },
                message: "exit 1".to_string(),
                seconds: 3.0,
            }],
            folder: crate::grid::result::cell_folder(test, os),
            files: vec!["primary-1.log".to_string()],
        }
    }

    #[test]
    fn the_grid_escapes_what_nodes_wrote_and_links_each_cell() {
        let results = [
            cell("demo <b>", "debian-12", true),
            cell("broken", "debian-12", false),
        ];
        let html = index_html(&results);
        assert!(
            html.contains("1 of 2 cells passed (debian-12: 1 of 2)"),
            "{html}"
        );
        assert!(
            !html.contains("<b>") && !html.contains("<script>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"cells/broken/debian-12/index.html\""),
            "{html}"
        );
        let page = cell_html(&results[1]);
        assert!(page.contains("href=\"primary-1.log\"") && page.contains("&lt;script&gt;"));
        assert!(page.contains("href=\"../../../index.html\""), "{page}");
        let merged = tempfile::tempdir().unwrap();
        write(merged.path(), &results).unwrap();
        for result in &results {
            fs_err::write(
                merged.path().join(&result.folder).join("result.json"),
                serde_json::to_vec(result).unwrap(),
            )
            .unwrap();
        }
        assert_eq!(read_results(merged.path()).unwrap().len(), 2);
        // A result that names a folder or file of its own choosing is refused, not copied.
        let mut crafted = results[1].clone();
        crafted.files.push("../../../../etc/shadow".to_string());
        fs_err::write(
            merged.path().join(&crafted.folder).join("result.json"),
            serde_json::to_vec(&crafted).unwrap(),
        )
        .unwrap();
        let error = read_results(merged.path()).unwrap_err().to_string();
        assert!(error.contains("not those of a cell"), "{error}");
        let xml = junit(&results);
        assert!(
            xml.contains("failures=\"1\"")
                && xml.contains("<failure message=\"install on primary-1: exit 1\">"),
            "{xml}"
        );
    }

    /// A shard's report as `run` leaves it: pages, each cell's `result.json`, and a log
    /// saying whose it is for each file the cell names.
    fn shard(dir: &Path, results: &[CellResult]) {
        write(dir, results).unwrap();
        for result in results {
            let folder = dir.join(&result.folder);
            fs_err::write(
                folder.join("result.json"),
                serde_json::to_vec(result).unwrap(),
            )
            .unwrap();
            for file in &result.files {
                fs_err::write(
                    folder.join(file),
                    format!("{} on {}", result.test, result.os_id),
                )
                .unwrap();
            }
        }
    }

    #[test]
    fn merge_never_follows_a_link_out_of_a_shard() {
        let work = tempfile::tempdir().unwrap();
        let secret = work.path().join("secret");
        fs_err::write(&secret, "not for the report").unwrap();
        let (one, out) = (work.path().join("one"), work.path().join("out"));
        let mut linked = cell("linked", "debian-12", false);
        linked.files.push("secret.log".to_string());
        shard(&one, &[cell("plain", "debian-12", true), linked.clone()]);
        // A file the cell names is a link to a file outside the shard.
        let folder = one.join(&linked.folder);
        fs_err::remove_file(folder.join("secret.log")).unwrap();
        fs_err::os::unix::fs::symlink(&secret, folder.join("secret.log")).unwrap();
        let merged = merge(std::slice::from_ref(&one), &out).unwrap();
        assert_eq!(merged.results.len(), 2);
        let copied = out.join(&linked.folder);
        assert!(!copied.join("secret.log").exists(), "a link was followed");
        assert_eq!(
            fs_err::read_to_string(copied.join("primary-1.log")).unwrap(),
            "linked on debian-12"
        );
        assert!(
            merged.skipped.len() == 1 && merged.skipped[0].contains("symbolic link"),
            "{:?}",
            merged.skipped
        );
        // The merged result and page name only what was copied.
        let result: CellResult =
            serde_json::from_slice(&fs_err::read(copied.join("result.json")).unwrap()).unwrap();
        assert_eq!(result.files, ["primary-1.log"]);
        assert!(!cell_html(&result).contains("secret"));

        // A cell's folder that is a link to a folder outside the shard, holding a result of
        // its own, is refused: nothing of it is copied.
        let (two, out) = (work.path().join("two"), work.path().join("out-two"));
        let outside = work.path().join("outside");
        let elsewhere = cell("elsewhere", "debian-12", true);
        shard(&outside, std::slice::from_ref(&elsewhere));
        shard(&two, &[cell("plain", "debian-12", true)]);
        fs_err::os::unix::fs::symlink(
            outside.join(&elsewhere.folder).parent().unwrap(),
            two.join(&elsewhere.folder).parent().unwrap(),
        )
        .unwrap();
        // The walk does not enter the link: the cell is not there at all.
        let merged = merge(std::slice::from_ref(&two), &out).unwrap();
        assert_eq!(merged.results.len(), 1);
        assert!(!out.join(&elsewhere.folder).exists());
        // Its result placed in a folder of the shard's own, which names the linked folder as
        // its cell's: refused, nothing copied.
        let decoy = two.join("cells/decoy/debian-12");
        fs_err::create_dir_all(&decoy).unwrap();
        fs_err::copy(
            outside.join(&elsewhere.folder).join("result.json"),
            decoy.join("result.json"),
        )
        .unwrap();
        let out = work.path().join("out-decoy");
        let error = merge(std::slice::from_ref(&two), &out).unwrap_err();
        assert!(error.to_string().contains("not those of a cell"), "{error}");
        assert!(!out.join(&elsewhere.folder).join("primary-1.log").exists());
        // A result.json that is a link, and one placed in another cell's folder, are refused.
        let three = work.path().join("three");
        shard(&three, &[cell("plain", "debian-12", true)]);
        let result = three
            .join(cell("plain", "debian-12", true).folder)
            .join("result.json");
        fs_err::remove_file(&result).unwrap();
        fs_err::os::unix::fs::symlink(outside.join(&elsewhere.folder).join("result.json"), &result)
            .unwrap();
        let error = read_results(&three).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        fs_err::remove_file(&result).unwrap();
        fs_err::copy(outside.join(&elsewhere.folder).join("result.json"), &result).unwrap();
        let error = read_results(&three).unwrap_err().to_string();
        assert!(error.contains("not those of a cell"), "{error}");
        // The whole cells folder as a link.
        let four = work.path().join("four");
        fs_err::create_dir_all(&four).unwrap();
        fs_err::os::unix::fs::symlink(outside.join("cells"), four.join("cells")).unwrap();
        let error = read_results(&four).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
    }

    #[test]
    fn merge_keeps_tests_of_one_slug_apart_and_refuses_a_cell_twice() {
        let work = tempfile::tempdir().unwrap();
        let (one, two, out) = (
            work.path().join("one"),
            work.path().join("two"),
            work.path().join("out"),
        );
        // Names that make one slug, in two shards: each keeps its own logs.
        let long = "x".repeat(60);
        let spaced = cell("a b", "debian-12", true);
        let dashed = cell("a-b", "debian-12", false);
        let first = cell(&format!("{long} first"), "debian-12", true);
        let second = cell(&format!("{long} second"), "debian-12", true);
        shard(&one, &[spaced.clone(), first.clone()]);
        shard(&two, &[dashed.clone(), second.clone()]);
        let merged = merge(&[one.clone(), two.clone()], &out).unwrap();
        assert_eq!(merged.results.len(), 4);
        assert!(merged.skipped.is_empty(), "{:?}", merged.skipped);
        for result in [&spaced, &dashed, &first, &second] {
            let log = fs_err::read_to_string(out.join(&result.folder).join("primary-1.log"));
            assert_eq!(log.unwrap(), format!("{} on debian-12", result.test));
        }
        // The grid links each to its own folder.
        let html = fs_err::read_to_string(out.join("index.html")).unwrap();
        for result in [&spaced, &dashed, &first, &second] {
            assert!(
                html.contains(&format!("href=\"{}/index.html\"", href(&result.folder))),
                "{html}"
            );
        }
        // One cell in two shards is refused, not overwritten.
        let three = work.path().join("three");
        shard(&three, &[cell("a b", "debian-12", false)]);
        let error = merge(&[one, three], &work.path().join("out-two"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("in both"), "{error}");
    }

    #[test]
    fn merge_leaves_out_files_too_large_or_not_regular() {
        let work = tempfile::tempdir().unwrap();
        let (one, out) = (work.path().join("one"), work.path().join("out"));
        let mut odd = cell("odd", "debian-12", true);
        odd.files.push("folder.log".to_string());
        odd.files.push("large.log".to_string());
        shard(&one, std::slice::from_ref(&odd));
        let folder = one.join(&odd.folder);
        fs_err::remove_file(folder.join("folder.log")).unwrap();
        fs_err::create_dir(folder.join("folder.log")).unwrap();
        let large = fs_err::File::create(folder.join("large.log")).unwrap();
        large.set_len(MAX_FILE_BYTES + 1).unwrap();
        let merged = merge(std::slice::from_ref(&one), &out).unwrap();
        assert_eq!(merged.results[0].files, ["primary-1.log"]);
        assert_eq!(merged.skipped.len(), 2, "{:?}", merged.skipped);
        assert!(merged.skipped[0].contains("not a regular file"));
        assert!(merged.skipped[1].contains("at most"));
        assert!(!out.join(&odd.folder).join("large.log").exists());
        // Merged again, from the merged report: as it was.
        let again = merge(std::slice::from_ref(&out), &work.path().join("again")).unwrap();
        assert_eq!(again.results[0].files, ["primary-1.log"]);
        assert!(again.skipped.is_empty());
    }
}
