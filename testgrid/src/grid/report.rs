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
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Berth testgrid</title><style>{STYLE}</style></head><body>\n<h1>Berth testgrid</h1>\n<p id=\"summary\">{passed} of {} cells passed</p>\n<table id=\"grid\">\n<tr><th>test</th>",
        results.len()
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

/// Every cell result below `dir` (`cells/*/*/result.json`).
pub fn read_results(dir: &Path) -> anyhow::Result<Vec<CellResult>> {
    let mut results = Vec::new();
    let cells = dir.join("cells");
    if !cells.is_dir() {
        anyhow::bail!(
            "{} has no cells: is it a berth-testgrid report?",
            dir.display()
        );
    }
    for entry in walkdir::WalkDir::new(&cells).min_depth(3).max_depth(3) {
        let entry = entry?;
        if entry.file_name() == "result.json" {
            let bytes = fs_err::read(entry.path())?;
            let result: CellResult = serde_json::from_slice(&bytes)
                .map_err(|error| anyhow::anyhow!("{}: {error}", entry.path().display()))?;
            // A result names its own folder and files, which `merge` copies: only the folder
            // its test and OS make, and plain file names in it.
            if !super::specs::is_plain_id(&result.os_id)
                || result.folder != super::result::cell_folder(&result.test, &result.os_id)
                || !result
                    .files
                    .iter()
                    .all(|file| super::specs::is_plain_id(file))
            {
                anyhow::bail!(
                    "{}: its folder or files are not those of a cell",
                    entry.path().display()
                );
            }
            results.push(result);
        }
    }
    results.sort_by(|a, b| (&a.test, &a.os_id).cmp(&(&b.test, &b.os_id)));
    Ok(results)
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
        assert!(html.contains("1 of 2 cells passed"));
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
}
