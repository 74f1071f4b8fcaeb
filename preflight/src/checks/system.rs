//! The host itself: its OS, CPUs, memory, clock, services, kernel modules, packages,
//! interfaces and block devices.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::{Map, Value, json};

use super::{
    Collected, Compare, Kind, Limits, Matched, first_match, first_match_rendered, outcomes,
    quantity, words,
};
use crate::document::Item;
use crate::report::Outcome;
use crate::semver_range::parse_version;

pub const HOST_OS: Kind = Kind::new(
    "hostOS",
    "Host OS Info",
    false,
    collect_host_os,
    analyze_host_os,
);

/// gopsutil's reading of the OS, as troubleshoot reports it: the platform from os-release's
/// ID (amzn, rhel and ol spelt as gopsutil spells them), its family, VERSION_ID, the kernel.
fn collect_host_os(_: &Map<String, Value>, _: &Limits) -> Collected {
    let release = os_release()?;
    let id = release.get("ID").cloned().unwrap_or_default();
    let platform = match id.as_str() {
        "amzn" => "amazon",
        "rhel" => "redhat",
        "ol" => "oracle",
        other => other,
    }
    .to_string();
    let family = match platform.as_str() {
        "debian" | "ubuntu" | "linuxmint" | "raspbian" => "debian",
        "fedora" => "fedora",
        "oracle" | "centos" | "redhat" | "scientific" | "amazon" | "xenserver" | "cloudlinux"
        | "rocky" | "almalinux" => "rhel",
        "suse" | "opensuse" | "opensuse-leap" | "opensuse-tumbleweed" | "sles" | "sled" => "suse",
        "gentoo" => "gentoo",
        "arch" | "archlinux" | "manjaro" => "arch",
        "alpine" => "alpine",
        _ => "",
    };
    let (kernel, _) = uname()?;
    let hostname = nix::unistd::gethostname()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(json!({
        "name": hostname,
        "kernelVersion": kernel,
        "platformVersion": release.get("VERSION_ID").cloned().unwrap_or_default(),
        "platform": platform,
        "platformFamily": family,
    }))
}

/// What a host tool prints, or why it printed nothing useful (its error output).
fn tool_output(program: &str, arguments: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(arguments)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {}: {}",
            arguments.first().unwrap_or(&""),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The kernel's `uname`: its release (`6.1.0-13-amd64`) and machine (`x86_64`).
fn uname() -> Result<(String, String), String> {
    let name = nix::sys::utsname::uname().map_err(|error| format!("uname: {error}"))?;
    Ok((
        name.release().to_string_lossy().into_owned(),
        name.machine().to_string_lossy().into_owned(),
    ))
}

/// `/etc/os-release` (or `/usr/lib/os-release`) as keys and unquoted values.
pub fn os_release() -> Result<BTreeMap<String, String>, String> {
    let text = fs_err::read_to_string("/etc/os-release")
        .or_else(|_| fs_err::read_to_string("/usr/lib/os-release"))
        .map_err(|error| error.to_string())?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| {
            (
                key.trim().to_string(),
                value.trim().trim_matches(['"', '\'']).to_string(),
            )
        })
        .collect())
}

/// troubleshoot's version reading for hostOS: leading zeros of each part dropped, anything
/// after the numbers dropped (`20.04` is 20.4.0, `5.15.0-91-generic` is 5.15.0).
fn os_version(text: &str) -> Option<semver::Version> {
    let numeric: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let cleaned: Vec<String> = numeric
        .split('.')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let trimmed = part.trim_start_matches('0');
            if trimmed.is_empty() { "0" } else { trimmed }.to_string()
        })
        .collect();
    parse_version(&cleaned.join("."))
}

fn analyze_host_os(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let info = data;
    let field = |name: &str| info.get(name).and_then(Value::as_str).unwrap_or("");
    let (platform, family) = (field("platform"), field("platformFamily"));
    let (version, kernel) = (field("platformVersion"), field("kernelVersion"));
    first_match(item, |when| {
        let parts = words(when);
        if parts.len() < 3 || !parts.len().is_multiple_of(3) {
            return Err(
                "expected `<platform> <op> <version>`, e.g. `ubuntu = 22.04`, optionally \
                 followed by `&& <op> <version>` or `|| <op> <version>`"
                    .into(),
            );
        }
        let target = parts[0];
        let compared = if target == "kernelVersion" {
            kernel
        } else if let [name, release, "kernel"] = target.split('-').collect::<Vec<_>>()[..] {
            if name != platform || release != version {
                return Ok(false);
            }
            kernel
        } else if target == platform || (!family.is_empty() && target == family) {
            version
        } else {
            return Ok(false);
        };
        let actual = os_version(compared)
            .ok_or_else(|| format!("the host's version `{compared}` is not a version"))?;
        // `op version` groups joined by && (all) and || (any), left to right.
        let mut alternatives = vec![true];
        let mut index = 1;
        let mut joiner = "&&";
        while index + 1 < parts.len() {
            let operator = Compare::parse(parts[index])?;
            let wanted = os_version(parts[index + 1])
                .ok_or_else(|| format!("`{}` is not a version", parts[index + 1]))?;
            let holds = operator.holds(&actual, &wanted);
            if joiner == "||" {
                alternatives.push(holds);
            } else if let Some(last) = alternatives.last_mut() {
                *last = *last && holds;
            }
            index += 2;
            if index < parts.len() {
                joiner = parts[index];
                if joiner != "&&" && joiner != "||" {
                    return Err(format!("`{joiner}` is not && or ||"));
                }
                index += 1;
            }
        }
        Ok(alternatives.into_iter().any(|holds| holds))
    })
}

pub const CPU: Kind = Kind::new("cpu", "Number of CPUs", false, collect_cpu, analyze_cpu);

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
    false,
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

pub const TIME: Kind = Kind::new("time", "Time", false, collect_time, analyze_time);

/// The time zone and NTP state troubleshoot asks systemd's timedated for, read where timedated
/// reads them: no process started and no D-Bus call (one activates timedated on each run),
/// and the same answer where no systemd runs.
/// - zone: the link /etc/localtime (`…/zoneinfo/Europe/Berlin`); with none, `/etc/timezone`,
///   else UTC, as glibc assumes;
/// - synchronized: the kernel's maximum clock error under 16 s, timedated's own test, whatever
///   daemon keeps the clock;
/// - active: an NTP daemon runs (timedated asks whether its NTP service unit is active).
fn collect_time(_: &Map<String, Value>, _: &Limits) -> Collected {
    let mut timezone = fs_err::read_link("/etc/localtime")
        .ok()
        .and_then(|target| {
            let text = target.to_string_lossy().into_owned();
            text.split_once("zoneinfo/")
                .map(|(_, zone)| zone.to_string())
        })
        .or_else(|| {
            fs_err::read_to_string("/etc/timezone")
                .ok()
                .map(|zone| zone.trim().to_string())
        })
        .unwrap_or_else(|| "UTC".into());
    let synchronized = super::clock::synchronized();
    let running = process_names();
    let active = ["chronyd", "ntpd", "systemd-timesyn", "openntpd"]
        .iter()
        .any(|daemon| running.contains(*daemon));
    timezone = timezone.to_uppercase();
    if timezone == "ETC/UTC" {
        timezone = "UTC".into();
    }
    Ok(json!({
        "timezone": timezone,
        "ntp_synchronized": synchronized,
        "ntp_active": active,
    }))
}

/// The names (`comm`) of the processes running, read once from /proc.
fn process_names() -> BTreeSet<String> {
    fs_err::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| fs_err::read_to_string(entry.path().join("comm")).ok())
        .map(|comm| comm.trim().to_string())
        .collect()
}

fn analyze_time(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let info = data;
    let timezone = info.get("timezone").and_then(Value::as_str).unwrap_or("");
    let flag = |name: &str| info.get(name).and_then(Value::as_bool).unwrap_or(false);
    let ntp = format!(
        "{}+{}",
        if flag("ntp_synchronized") {
            "synchronized"
        } else {
            "unsynchronized"
        },
        if flag("ntp_active") {
            "active"
        } else {
            "inactive"
        }
    );
    first_match(item, |when| match words(when).as_slice() {
        ["timezone", operator, zone] => match Compare::parse(operator)? {
            Compare::Equal => Ok(timezone == *zone),
            Compare::NotEqual => Ok(timezone != *zone),
            _ => Err("timezone takes == or !=".into()),
        },
        ["ntp", operator, state] => match Compare::parse(operator)? {
            Compare::Equal => Ok(ntp == *state),
            _ => Err("ntp takes ==".into()),
        },
        _ => Err("expected `timezone == UTC` or `ntp == synchronized+active`".into()),
    })
}

pub const HOST_SERVICES: Kind = Kind::new(
    "hostServices",
    "Host Services",
    false,
    collect_host_services,
    analyze_host_services,
);

fn collect_host_services(_: &Map<String, Value>, _: &Limits) -> Collected {
    let listed = tool_output(
        "systemctl",
        &[
            "list-units",
            "--type=service",
            "--no-legend",
            "--all",
            "--plain",
        ],
    )?;
    let services: Vec<Value> = listed
        .lines()
        .map(|line| line.trim_start_matches(['●', '*', ' ']))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().take(4).collect();
            (fields.len() == 4).then(|| {
                json!({"Unit": fields[0], "Load": fields[1], "Active": fields[2], "Sub": fields[3]})
            })
        })
        .collect();
    Ok(Value::Array(services))
}

fn analyze_host_services(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let services = data.as_array().cloned().unwrap_or_default();
    first_match(item, |when| {
        let [unit, operator, states] = words(when)[..] else {
            return Err(
                "expected `<unit> <op> <active>[,<sub>[,<load>]]`, e.g. `ufw = active`".into(),
            );
        };
        let operator = Compare::parse(operator)?;
        let Some(service) = services.iter().find(|service| {
            service
                .get("Unit")
                .and_then(Value::as_str)
                .is_some_and(|name| name == unit || name.starts_with(unit))
        }) else {
            return Ok(false);
        };
        let mut wanted = states.split(',');
        let mut differs = false;
        for field in ["Active", "Sub", "Load"] {
            let want = wanted.next().unwrap_or("*");
            if want.is_empty() || want == "*" {
                continue;
            }
            differs |= service.get(field).and_then(Value::as_str) != Some(want);
        }
        match operator {
            Compare::Equal => Ok(!differs),
            Compare::NotEqual => Ok(differs),
            _ => Err("services take = or !=".into()),
        }
    })
}

pub const KERNEL_MODULES: Kind = Kind::new(
    "kernelModules",
    "Kernel Modules",
    false,
    collect_kernel_modules,
    analyze_kernel_modules,
);

fn collect_kernel_modules(_: &Map<String, Value>, _: &Limits) -> Collected {
    let (release, _) = uname()?;
    let mut modules = Map::new();
    let base = ["/lib/modules", "/usr/lib/modules"]
        .iter()
        .map(|base| std::path::Path::new(base).join(&release))
        .find(|path| path.is_dir());
    if let Some(base) = &base {
        let mut stack = vec![base.clone()];
        let mut visited = 0usize;
        while let Some(dir) = stack.pop() {
            for entry in fs_err::read_dir(&dir).into_iter().flatten().flatten() {
                visited += 1;
                if visited > 200_000 {
                    break;
                }
                let path = entry.path();
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    stack.push(path);
                } else if let Some(name) = path.file_name().and_then(|name| name.to_str())
                    && let Some((module, _)) = name.split_once(".ko")
                {
                    modules.insert(
                        module.to_string(),
                        json!({"size": 0, "instances": 0, "status": "loadable"}),
                    );
                }
            }
        }
        if let Ok(builtin) = fs_err::read_to_string(base.join("modules.builtin")) {
            for line in builtin.lines() {
                if let Some(name) = line.rsplit('/').next().and_then(|n| n.split_once(".ko")) {
                    modules.insert(
                        name.0.to_string(),
                        json!({"size": 0, "instances": 0, "status": "loaded"}),
                    );
                }
            }
        }
    }
    let loaded = fs_err::read_to_string("/proc/modules").map_err(|error| error.to_string())?;
    for line in loaded.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 {
            continue;
        }
        let status = match fields[4] {
            "Live" => "loaded",
            "Loading" => "loading",
            "Unloading" => "unloading",
            _ => "unknown",
        };
        modules.insert(
            fields[0].to_string(),
            json!({
                "size": fields[1].parse::<u64>().unwrap_or(0),
                "instances": fields[2].parse::<u64>().unwrap_or(0),
                "status": status,
            }),
        );
    }
    Ok(Value::Object(modules))
}

/// troubleshoot's kernelModules rule: every outcome that holds gives a result; then the
/// first default that applies (fail only if nothing passed, warn if nothing passed or
/// failed, pass if nothing failed).
fn analyze_kernel_modules(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let modules = data.as_object().cloned().unwrap_or_default();
    let status = |name: &str| {
        modules
            .get(name)
            .and_then(|module| module.get("status"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut results: Vec<Matched> = Vec::new();
    let mut defaults = Vec::new();
    for outcome in outcomes(item)? {
        let when = outcome.when.trim();
        if when.is_empty() {
            defaults.push(outcome);
            continue;
        }
        let [names, operator, states] = words(when)[..] else {
            return Err(format!(
                "when `{when}`: expected `<module,…> <op> <status,…>`, e.g. `ip_vs = loaded,loadable`"
            ));
        };
        let states: Vec<&str> = states.split(',').collect();
        let holds = match Compare::parse(operator).map_err(|e| format!("when `{when}`: {e}"))? {
            Compare::Equal => names
                .split(',')
                .all(|name| status(name).is_some_and(|status| states.contains(&status.as_str()))),
            Compare::NotEqual => names.split(',').all(|name| match status(name) {
                None => true,
                Some(status) => !states.contains(&status.as_str()),
            }),
            _ => return Err(format!("when `{when}`: modules take = or !=")),
        };
        if holds {
            results.push(outcome.matched());
        }
    }
    let passed = results.iter().any(|r| r.outcome == Outcome::Pass);
    let failed = results.iter().any(|r| r.outcome == Outcome::Fail);
    if let Some(default) = defaults.into_iter().find(|default| match default.outcome {
        Outcome::Fail => !passed,
        Outcome::Warn => !passed && !failed,
        _ => !failed,
    }) {
        results.push(default.matched());
    }
    if results.is_empty() {
        results.push(Matched {
            outcome: Outcome::Warn,
            message: "no results".into(),
            uri: String::new(),
            title_suffix: None,
        });
    }
    Ok(results)
}

pub const SYSTEM_PACKAGES: Kind = Kind::new(
    "systemPackages",
    "System Packages",
    true,
    collect_system_packages,
    analyze_system_packages,
);

/// Each package the spec lists for this distribution (its general list and its major
/// version's), asked of dpkg or rpm.
fn collect_system_packages(fields: &Map<String, Value>, _: &Limits) -> Collected {
    let release = os_release()?;
    let id = release.get("ID").cloned().unwrap_or_default();
    let version = release.get("VERSION_ID").cloned().unwrap_or_default();
    let major = version.split('.').next().unwrap_or("").to_string();
    let (dpkg, keys) = match id.as_str() {
        "ubuntu" | "debian" => (true, vec![id.clone(), format!("{id}{major}")]),
        "centos" | "rhel" | "ol" | "rocky" | "amzn" => {
            (false, vec![id.clone(), format!("{id}{major}")])
        }
        other => {
            return Err(format!(
                "systemPackages has no package lists for `{other}` (ubuntu, debian, centos, \
                 rhel, ol, rocky, amzn)"
            ));
        }
    };
    let mut packages = Vec::new();
    for key in keys {
        for name in fields
            .get(&key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let output = if dpkg {
                Command::new("dpkg").args(["-s", name]).output()
            } else {
                Command::new("rpm").args(["-qi", name]).output()
            };
            let (details, error, code) = match output {
                Ok(output) => (
                    String::from_utf8_lossy(&output.stdout).into_owned(),
                    String::from_utf8_lossy(&output.stderr).into_owned(),
                    output.status.code().unwrap_or(-1),
                ),
                Err(error) => (String::new(), error.to_string(), -1),
            };
            packages.push(json!({
                "name": name, "details": details, "exitCode": code.to_string(), "error": error,
            }));
        }
    }
    Ok(json!({ "os": id, "osVersion": version, "packages": packages }))
}

/// One result per package: the first outcome whose `when` (a template rendering `true` or
/// `false`) holds, its message rendered with the package's details.
fn analyze_system_packages(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let info = data;
    let text = |name: &str| info.get(name).and_then(Value::as_str).unwrap_or("");
    let version = text("osVersion");
    let mut numbers = version
        .split('.')
        .map(|part| part.parse::<i64>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let mut results = Vec::new();
    for package in info
        .get("packages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |name: &str| package.get(name).and_then(Value::as_str).unwrap_or("");
        let details = field("details");
        let installed = field("error").is_empty()
            && field("exitCode") == "0"
            && !details.contains("not installed")
            && !details.contains("No matching Packages");
        let mut data = Map::new();
        for line in details.lines() {
            if let Some((key, value)) = line.split_once(':')
                && key.starts_with(|c: char| c.is_ascii_uppercase())
            {
                data.insert(key.replace([' ', '-'], ""), value.trim().into());
            }
        }
        data.insert("OS".into(), text("os").into());
        data.insert("OSVersion".into(), version.into());
        data.insert("OSVersionMajor".into(), major.into());
        data.insert("OSVersionMinor".into(), minor.into());
        data.insert("Name".into(), field("name").into());
        data.insert("Error".into(), field("error").into());
        data.insert("ExitCode".into(), field("exitCode").into());
        data.insert("IsInstalled".into(), installed.into());
        let data = crate::context::json_value(&Value::Object(data));
        let matched = first_match_rendered(
            item,
            |when| {
                let rendered = gotmpl::Template::new("when")
                    .parse(when)
                    .and_then(|template| template.execute_to_string(&data))
                    .map_err(|error| error.to_string())?;
                match rendered.trim() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => Err(format!("renders `{other}`, not true or false")),
                }
            },
            |message| crate::template::render_message(message, &data),
        )?;
        results.extend(matched.into_iter().map(|mut matched| {
            matched.title_suffix = Some(field("name").to_string());
            matched
        }));
    }
    Ok(results)
}

pub const IPV4_INTERFACES: Kind = Kind::new(
    "ipv4Interfaces",
    "IPv4 Interfaces",
    false,
    collect_ipv4_interfaces,
    analyze_ipv4_interfaces,
);

fn collect_ipv4_interfaces(_: &Map<String, Value>, _: &Limits) -> Collected {
    use nix::net::if_::InterfaceFlags;
    let addresses =
        nix::ifaddrs::getifaddrs().map_err(|error| format!("listing interfaces: {error}"))?;
    let mut interfaces = BTreeMap::new();
    for address in addresses {
        let up = address.flags.contains(InterfaceFlags::IFF_UP);
        let loopback = address.flags.contains(InterfaceFlags::IFF_LOOPBACK);
        let ipv4 = address
            .address
            .as_ref()
            .and_then(|address| address.as_sockaddr_in())
            .is_some();
        if up && !loopback && ipv4 {
            interfaces.insert(
                address.interface_name.clone(),
                json!({"Name": address.interface_name, "Flags": address.flags.bits()}),
            );
        }
    }
    Ok(Value::Array(interfaces.into_values().collect()))
}

fn analyze_ipv4_interfaces(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let count = data.as_array().map_or(0, Vec::len) as u64;
    first_match(item, |when| match words(when).as_slice() {
        ["count", operator, value] => {
            let wanted: u64 = value
                .parse()
                .map_err(|_| format!("`{value}` is not a whole number"))?;
            Ok(Compare::parse(operator)?.holds(count, wanted))
        }
        _ => Err("expected `count <op> <n>`, e.g. `count == 0`".into()),
    })
}

pub const BLOCK_DEVICES: Kind = Kind::new(
    "blockDevices",
    "Block Devices",
    false,
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

#[cfg(test)]
mod tests {
    use super::os_version;

    #[test]
    fn os_versions_read_as_troubleshoot_reads_them() {
        assert_eq!(os_version("20.04").unwrap().to_string(), "20.4.0");
        assert_eq!(
            os_version("5.15.0-91-generic").unwrap().to_string(),
            "5.15.0"
        );
        assert_eq!(os_version("2023").unwrap().to_string(), "2023.0.0");
    }
}
