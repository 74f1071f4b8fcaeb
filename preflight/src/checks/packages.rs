//! systemPackages: the host's packages of each name, as its package manager lists them.

use std::process::Command;

use serde_json::{Map, Value, json};

use super::host_facts::os_release;
use super::{Collected, Kind, Limits, Matched, first_match_rendered};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

pub const SYSTEM_PACKAGES: Kind = Kind::new(
    "systemPackages",
    "System Packages",
    ResultFile::Packages,
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
