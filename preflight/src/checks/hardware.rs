//! The machine: its CPUs, memory and block devices.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::host_facts::{tool_output, uname};
use super::{Collected, Compare, Kind, Limits, Matched, first_match, quantity, words};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

pub const CPU: Kind = Kind::new(
    "cpu",
    "Number of CPUs",
    ResultFile::System("cpu.json"),
    collect_cpu,
    analyze_cpu,
);

fn collect_cpu(_: &Map<String, Value>, _: &Limits) -> Collected {
    let text = fs_err::read_to_string("/proc/cpuinfo").map_err(|error| error.to_string())?;
    let mut logical = 0u64;
    let mut cores = BTreeSet::new();
    let mut flags = BTreeSet::new();
    let mut physical_id = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "processor" => logical += 1,
            "physical id" => physical_id = value.trim().to_string(),
            "core id" => {
                cores.insert(format!("{physical_id}/{}", value.trim()));
            }
            "flags" | "Features" => flags.extend(value.split_whitespace().map(str::to_string)),
            _ => {}
        }
    }
    // Where the kernel's view is narrower than cpuinfo's (a CPU set), the usable count.
    if let Ok(usable) = std::thread::available_parallelism() {
        logical = logical.min(usable.get() as u64).max(1);
    }
    let physical = if cores.is_empty() {
        logical
    } else {
        cores.len() as u64
    };
    let arch = uname().map(|(_, machine)| machine).unwrap_or_default();
    Ok(json!({
        "logicalCount": logical,
        "physicalCount": physical,
        "flags": flags,
        "machineArch": arch,
    }))
}

fn analyze_cpu(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let info = data;
    let number = |name: &str| info.get(name).and_then(Value::as_u64).unwrap_or(0);
    let (logical, physical) = (number("logicalCount"), number("physicalCount"));
    let flags: BTreeSet<String> = info
        .get("flags")
        .and_then(Value::as_array)
        .map(|flags| {
            flags
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let arch = info
        .get("machineArch")
        .and_then(Value::as_str)
        .unwrap_or("");
    first_match(item, |when| {
        let parts = words(when);
        let count = |operator: &str, value: &str, actual: u64| -> Result<bool, String> {
            let wanted: u64 = value
                .parse()
                .map_err(|_| format!("`{value}` is not a whole number"))?;
            Ok(Compare::parse(operator)?.holds(actual, wanted))
        };
        if let Some(level) = parts
            .iter()
            .position(|word| word.eq_ignore_ascii_case("supports"))
            .and_then(|at| parts.get(at + 1))
        {
            let needed: &[&str] = match *level {
                "x86-64" => &[
                    "cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2",
                ],
                "x86-64-v2" => &["cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"],
                "x86-64-v3" => &[
                    "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave",
                ],
                "x86-64-v4" => &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
                other => return Err(format!("`{other}` is not x86-64, x86-64-v2, -v3 or -v4")),
            };
            return Ok(needed.iter().all(|flag| flags.contains(*flag)));
        }
        match parts.as_slice() {
            [keyword, list] if keyword.eq_ignore_ascii_case("hasFlags") => {
                Ok(list.split(',').all(|flag| flags.contains(flag)))
            }
            [operator, value] => count(operator, value, logical.max(physical)),
            [what, operator, value] => match what.to_lowercase().as_str() {
                "logical" => count(operator, value, logical),
                "physical" => count(operator, value, physical),
                "count" => count(operator, value, logical.max(physical)),
                "machinearch" => match Compare::parse(operator)? {
                    Compare::Equal => Ok(arch == *value),
                    Compare::NotEqual => Ok(arch != *value),
                    _ => Err("machineArch takes == or !=".into()),
                },
                other => Err(format!(
                    "`{other}` is not logical, physical, count or machineArch"
                )),
            },
            _ => Err(
                "expected e.g. `count < 4`, `logical >= 2`, `machineArch == x86_64`, \
                 `hasFlags a,b` or `supports x86-64-v2`"
                    .into(),
            ),
        }
    })
}

pub const MEMORY: Kind = Kind::new(
    "memory",
    "Amount of Memory",
    ResultFile::System("memory.json"),
    collect_memory,
    analyze_memory,
);

fn collect_memory(_: &Map<String, Value>, _: &Limits) -> Collected {
    let kib = super::meminfo_kib("MemTotal")?;
    Ok(json!({ "total": kib * 1024 }))
}

fn analyze_memory(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let total = data.get("total").and_then(Value::as_u64).unwrap_or(0) as f64;
    first_match(item, |when| match words(when).as_slice() {
        [operator, value] => Ok(Compare::parse(operator)?.holds(total, quantity(value)?)),
        _ => Err("expected `<op> <quantity>`, e.g. `< 8Gi`".into()),
    })
}

pub const BLOCK_DEVICES: Kind = Kind::new(
    "blockDevices",
    "Block Devices",
    ResultFile::System("block_devices.json"),
    collect_block_devices,
    analyze_block_devices,
);

/// lsblk's view of the block devices, the columns troubleshoot asks for.
fn collect_block_devices(_: &Map<String, Value>, _: &Limits) -> Collected {
    let listed = tool_output(
        "lsblk",
        &[
            "--noheadings",
            "--bytes",
            "--pairs",
            "-o",
            "NAME,KNAME,PKNAME,TYPE,MAJ:MIN,SIZE,FSTYPE,MOUNTPOINT,SERIAL,RO,RM",
        ],
    )?;
    let pattern = regex::Regex::new(r#"([A-Z:]+)="([^"]*)""#).map_err(|e| e.to_string())?;
    let devices: Vec<Value> = listed
        .lines()
        .map(|line| {
            let pairs: BTreeMap<&str, &str> = pattern
                .captures_iter(line)
                .filter_map(|captures| Some((captures.get(1)?.as_str(), captures.get(2)?.as_str())))
                .collect();
            let get = |key: &str| pairs.get(key).copied().unwrap_or("");
            let (major, minor) = get("MAJ:MIN").split_once(':').unwrap_or(("0", "0"));
            json!({
                "name": get("NAME"),
                "kernel_name": get("KNAME"),
                "parent_kernel_name": get("PKNAME"),
                "type": get("TYPE"),
                "major": major.parse::<u64>().unwrap_or(0),
                "minor": minor.parse::<u64>().unwrap_or(0),
                "size": get("SIZE").parse::<u64>().unwrap_or(0),
                "filesystem_type": get("FSTYPE"),
                "mountpoint": get("MOUNTPOINT"),
                "serial": get("SERIAL"),
                "read_only": get("RO") == "1",
                "removable": get("RM") == "1",
            })
        })
        .collect();
    Ok(Value::Array(devices))
}

fn analyze_block_devices(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let devices = data.as_array().cloned().unwrap_or_default();
    let minimum = item
        .fields
        .get("minimumAcceptableSize")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let partitions = item
        .fields
        .get("includeUnmountedPartitions")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let additional: Vec<String> = item
        .fields
        .get("additionalDeviceTypes")
        .and_then(Value::as_array)
        .map(|kinds| {
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let text = |device: &Value, key: &str| {
        device
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let parents: BTreeSet<String> = devices
        .iter()
        .map(|device| text(device, "parent_kernel_name"))
        .filter(|parent| !parent.is_empty())
        .collect();
    first_match(item, |when| {
        let [pattern, operator, count] = words(when)[..] else {
            return Err("expected `<name regex> <op> <count>`, e.g. `.* >= 1`".into());
        };
        let pattern = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|error| format!("`{pattern}` is not a regular expression: {error}"))?;
        let wanted: u64 = count
            .parse()
            .map_err(|_| format!("`{count}` is not a whole number"))?;
        let eligible = devices
            .iter()
            .filter(|device| {
                let kind = text(device, "type");
                pattern.is_match(&text(device, "name"))
                    && (kind == "disk"
                        || (partitions && kind == "part")
                        || additional.contains(&kind))
                    && device.get("size").and_then(Value::as_u64).unwrap_or(0) >= minimum
                    && text(device, "mountpoint").is_empty()
                    && text(device, "filesystem_type").is_empty()
                    && device.get("read_only") != Some(&Value::Bool(true))
                    && device.get("removable") != Some(&Value::Bool(true))
                    && !parents.contains(&text(device, "kernel_name"))
            })
            .count() as u64;
        Ok(Compare::parse(operator)?.holds(eligible, wanted))
    })
}
