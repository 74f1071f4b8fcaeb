//! hostOS: the distribution and kernel, and troubleshoot's version reading of them.

use serde_json::{Map, Value, json};

use super::host_facts::{os_release, uname};
use super::{Collected, Compare, Kind, Limits, Matched, first_match, words};
use crate::document::Item;
use crate::semver_range::parse_version;
use crate::support_bundle::paths::ResultFile;

pub const HOST_OS: Kind = Kind::new(
    "hostOS",
    "Host OS Info",
    ResultFile::System("hostos_info.json"),
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
