//! What runs on the host: its systemd services and kernel modules.

use serde_json::{Map, Value, json};

use super::host_facts::{tool_output, uname};
use super::{Collected, Compare, Kind, Limits, Matched, first_match, outcomes, words};
use crate::document::Item;
use crate::report::Outcome;
use crate::support_bundle::paths::ResultFile;

pub const HOST_SERVICES: Kind = Kind::new(
    "hostServices",
    "Host Services",
    ResultFile::System("systemctl_services.json"),
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
    ResultFile::System("kernel_modules.json"),
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
