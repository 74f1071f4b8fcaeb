//! Disks: how full the disk under a path is, and how fast it makes a write durable.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{
    Collected, Compare, Kind, Limits, Matched, duration_field, first_match, first_match_rendered,
    go_duration, quantity, text_field, words,
};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

pub const DISK_USAGE: Kind = Kind {
    titled_by_collector: true,
    ..Kind::new(
        "diskUsage",
        "Disk Usage",
        ResultFile::named("diskUsage", "diskUsage"),
        collect_disk_usage,
        analyze_disk_usage,
    )
};

pub const FILESYSTEM_PERFORMANCE: Kind = Kind {
    missing: file_not_collected,
    ..Kind::new(
        "filesystemPerformance",
        "Filesystem Performance",
        ResultFile::named("filesystemPerformance", "filesystemPerformance"),
        collect_filesystem_performance,
        analyze_filesystem_performance,
    )
};

/// `path`, or its nearest ancestor that exists (a disk check runs before the folder is made).
fn existing(path: &str) -> PathBuf {
    let mut path = PathBuf::from(if path.is_empty() { "." } else { path });
    for _ in 0..50 {
        if path.exists() {
            break;
        }
        if !path.pop() {
            break;
        }
    }
    if path.as_os_str().is_empty() {
        PathBuf::from("/")
    } else {
        path
    }
}

fn collect_disk_usage(fields: &Map<String, Value>, _: &Limits) -> Collected {
    let path = existing(text_field(fields, "path"));
    let stats = nix::sys::statvfs::statvfs(&path)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    let unit = stats.fragment_size() as u64;
    let total = stats.blocks() as u64 * unit;
    let used = total.saturating_sub(stats.blocks_free() as u64 * unit);
    Ok(json!({ "total_bytes": total, "used_bytes": used, "path": path }))
}

fn analyze_disk_usage(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let usage = data;
    let total = usage
        .get("total_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(0) as f64;
    let used = usage.get("used_bytes").and_then(Value::as_u64).unwrap_or(0) as f64;
    let available = (total - used).max(0.0);
    first_match(item, |when| {
        let [stat, operator, value] = words(when)[..] else {
            return Err(
                "expected `<total|used|available|used/total|available/total> <op> <value>`, \
                 e.g. `used/total > 80%`"
                    .into(),
            );
        };
        let operator = Compare::parse(operator)?;
        let ratio = |part: f64| -> Result<bool, String> {
            let wanted = match value.strip_suffix('%') {
                Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
                None => value.parse::<f64>(),
            }
            .map_err(|_| format!("`{value}` is not a ratio such as 80% or 0.8"))?;
            let actual = if total > 0.0 { part / total } else { 0.0 };
            Ok(operator.holds(actual, wanted))
        };
        match stat.to_lowercase().as_str() {
            "total" => Ok(operator.holds(total, quantity(value)?)),
            "used" => Ok(operator.holds(used, quantity(value)?)),
            "available" => Ok(operator.holds(available, quantity(value)?)),
            "used/total" => ratio(used),
            "available/total" => ratio(available),
            other => Err(format!(
                "`{other}` is not total, used, available, used/total or available/total"
            )),
        }
    })
}

/// The percentiles troubleshoot reports, by their keyword and their place (0-100).
const PERCENTILES: [(&str, f64); 16] = [
    ("p1", 1.0),
    ("p5", 5.0),
    ("p10", 10.0),
    ("p20", 20.0),
    ("p30", 30.0),
    ("p40", 40.0),
    ("p50", 50.0),
    ("p60", 60.0),
    ("p70", 70.0),
    ("p80", 80.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p995", 99.5),
    ("p999", 99.9),
    ("p9995", 99.95),
];

/// Writes `fileSize` bytes in `operationSize` writes, each made durable with fdatasync, and
/// times every fdatasync (what fio's `--fdatasync=1` reports). With `enableBackgroundIOPS`,
/// paced 4 KiB writers and readers load the disk from the warm-up on. The file lives in the
/// directory, or its nearest existing ancestor, and is gone afterwards, whatever happens.
fn collect_filesystem_performance(fields: &Map<String, Value>, limits: &Limits) -> Collected {
    if !limits.filesystem_performance {
        return Err("not run: filesystem performance checks are turned off for this run".into());
    }
    let directory = text_field(fields, "directory");
    if directory.is_empty() {
        return Err("`directory` is required".into());
    }
    let number = |name: &str, default: f64| -> Result<f64, String> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Number(n)) => n.as_f64().ok_or_else(|| format!("{name}: not a number")),
            Some(Value::String(text)) => quantity(text).map_err(|e| format!("{name}: {e}")),
            Some(other) => Err(format!("{name}: {other} is not a number")),
        }
    };
    let operation = (number("operationSize", 1024.0)? as usize).clamp(1, 1 << 24);
    let file_size = (number("fileSize", 10.0 * 1024.0 * 1024.0)? as u64).min(1 << 34);
    let run_time = match fields.get("runTime") {
        None | Some(Value::Null) => Some(Duration::from_secs(120)),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|seconds| *seconds > 0)
            .map(Duration::from_secs),
        Some(other) => return Err(format!("runTime: {other} is not a whole number of seconds")),
    };
    let timeout = duration_field(fields, "timeout", Duration::from_secs(60))?;
    let deadline = Instant::now() + timeout;
    let folder = existing(directory);

    let stop = Arc::new(AtomicBool::new(false));
    let mut background = Vec::new();
    if fields.get("enableBackgroundIOPS").and_then(Value::as_bool) == Some(true) {
        let count =
            |name: &str, default: u64| fields.get(name).and_then(Value::as_u64).unwrap_or(default);
        let jobs = [
            (
                true,
                count("backgroundWriteIOPS", 0),
                count("backgroundWriteIOPSJobs", 0),
            ),
            (
                false,
                count("backgroundReadIOPS", 0),
                count("backgroundReadIOPSJobs", 0),
            ),
        ];
        for (write, iops, job_count) in jobs {
            let job_count = job_count.min(64);
            if iops == 0 || job_count == 0 {
                continue;
            }
            let per_job = (iops as f64 / job_count as f64).max(0.1);
            for _ in 0..job_count {
                let file = tempfile::tempfile_in(&folder)
                    .map_err(|error| format!("{}: {error}", folder.display()))?;
                let stop = stop.clone();
                background.push(std::thread::spawn(move || {
                    background_io(file, write, per_job, &stop)
                }));
            }
        }
        let warmup = Duration::from_secs(count("backgroundIOPSWarmupSeconds", 0).min(600));
        let until = (Instant::now() + warmup).min(deadline);
        while Instant::now() < until {
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200)),
            );
        }
    }
    let measured = measure(&folder, operation, file_size, run_time, deadline);
    stop.store(true, Ordering::Relaxed);
    for job in background {
        let _ = job.join();
    }
    let mut latencies = measured?;
    if latencies.is_empty() {
        return Err("no write finished".into());
    }
    latencies.sort_unstable();
    let at = |percent: f64| {
        let index = ((percent / 100.0) * latencies.len() as f64).ceil() as usize;
        latencies[index.saturating_sub(1).min(latencies.len() - 1)]
    };
    let sum: u128 = latencies.iter().map(|nanos| *nanos as u128).sum();
    let mut result = Map::new();
    result.insert("min".into(), latencies[0].into());
    result.insert("max".into(), latencies[latencies.len() - 1].into());
    result.insert(
        "average".into(),
        ((sum / latencies.len() as u128) as u64).into(),
    );
    for (name, percent) in PERCENTILES {
        result.insert(name.into(), at(percent).into());
    }
    result.insert("p9999".into(), at(99.99).into());
    result.insert("operations".into(), latencies.len().into());
    Ok(Value::Object(result))
}

fn measure(
    folder: &Path,
    operation: usize,
    file_size: u64,
    run_time: Option<Duration>,
    deadline: Instant,
) -> Result<Vec<u64>, String> {
    let mut file =
        tempfile::tempfile_in(folder).map_err(|error| format!("{}: {error}", folder.display()))?;
    let block = vec![0x5au8; operation];
    let started = Instant::now();
    let mut written = 0u64;
    let mut latencies = Vec::new();
    while written < file_size {
        if Instant::now() >= deadline {
            return Err("timeout".into());
        }
        if run_time.is_some_and(|limit| started.elapsed() >= limit) {
            break;
        }
        file.write_all(&block)
            .map_err(|error| format!("writing in {}: {error}", folder.display()))?;
        let before = Instant::now();
        file.sync_data()
            .map_err(|error| format!("fdatasync in {}: {error}", folder.display()))?;
        latencies.push(before.elapsed().as_nanos() as u64);
        written += operation as u64;
    }
    Ok(latencies)
}

/// One background job: 4 KiB writes (each made durable) or reads at `per_second`.
fn background_io(mut file: std::fs::File, write: bool, per_second: f64, stop: &AtomicBool) {
    const SPAN: u64 = 16 << 20;
    let block = vec![0xa5u8; 4096];
    let mut buffer = vec![0u8; 4096];
    let interval = Duration::from_secs_f64(1.0 / per_second);
    let mut next = Instant::now();
    let mut offset = 0u64;
    if !write {
        let _ = file.set_len(SPAN);
    }
    while !stop.load(Ordering::Relaxed) {
        offset = (offset + 7 * 4096 + 4096) % SPAN;
        let _ = file.seek(SeekFrom::Start(offset));
        if write {
            let _ = file.write_all(&block);
            let _ = file.sync_data();
        } else {
            let _ = file.read(&mut buffer);
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
    }
}

/// The measured latencies as troubleshoot's message templates see them (`{{ .P99 }}` prints
/// `8.123ms`; `{{ .String }}` the whole summary).
fn template_data(result: &Value) -> gotmpl::Value {
    let duration = |name: &str| {
        go_duration(Duration::from_nanos(
            result.get(name).and_then(Value::as_u64).unwrap_or(0),
        ))
    };
    let mut data = Map::new();
    let mut summary = vec![
        format!("Min: {}", duration("min")),
        format!("Max: {}", duration("max")),
        format!("Average: {}", duration("average")),
    ];
    for name in ["min", "max", "average"] {
        data.insert(crate::context::upper_first(name), duration(name).into());
    }
    for name in PERCENTILES
        .iter()
        .map(|(name, _)| *name)
        .chain(std::iter::once("p9999"))
    {
        data.insert(crate::context::upper_first(name), duration(name).into());
        summary.push(format!(
            "{}: {}",
            crate::context::upper_first(name),
            duration(name)
        ));
    }
    data.insert("String".into(), summary.join("\n").into());
    crate::context::json_value(&Value::Object(data))
}

/// `fileNotCollected` speaks for a benchmark that gathered nothing, as its first outcome.
fn file_not_collected(item: &Item) -> Result<Vec<Matched>, String> {
    Ok(super::outcomes(item)?
        .into_iter()
        .next()
        .filter(|first| first.when.trim() == "fileNotCollected")
        .map(|first| vec![first.matched()])
        .unwrap_or_default())
}

fn analyze_filesystem_performance(item: &Item, result: &Value) -> Result<Vec<Matched>, String> {
    let data = template_data(result);
    first_match_rendered(
        item,
        |when| {
            if when == "fileNotCollected" {
                return Ok(false);
            }
            let [keyword, operator, value] = words(when)[..] else {
                return Err(
                    "expected `<p99|average|min|max|pN> <op> <duration>`, e.g. `p99 < 10ms`".into(),
                );
            };
            let keyword = keyword.to_lowercase();
            let actual = result
                .get(&keyword)
                .and_then(Value::as_u64)
                .filter(|_| keyword != "operations")
                .ok_or_else(|| {
                    format!("`{keyword}` is not min, max, average or a percentile such as p99")
                })?;
            let wanted = super::duration(value)?;
            Ok(Compare::parse(operator)?.holds(Duration::from_nanos(actual), wanted))
        },
        |message| crate::template::render_message(message, &data),
    )
}
