//! Where troubleshoot puts each host collector's result in a bundle (`pkg/collect/host_*.go`),
//! and collector names made safe to be part of a path.

/// `host-collectors/…` for a value collector of `kind`, named `name` where it names one.
pub fn result_path(kind: &str, name: Option<&str>) -> Option<String> {
    let named = |folder: &str, default: &str| {
        format!(
            "host-collectors/{folder}/{}.json",
            safe_name(name.filter(|name| !name.is_empty()).unwrap_or(default))
        )
    };
    let system = |file: &str| format!("host-collectors/system/{file}");
    Some(match kind {
        "hostOS" => system("hostos_info.json"),
        "cpu" => system("cpu.json"),
        "memory" => system("memory.json"),
        "time" => system("time.json"),
        "hostServices" => system("systemctl_services.json"),
        "kernelModules" => system("kernel_modules.json"),
        "ipv4Interfaces" => system("ipv4Interfaces.json"),
        "blockDevices" => system("block_devices.json"),
        "systemPackages" => system(&format!(
            "{}-packages.json",
            safe_name(name.filter(|name| !name.is_empty()).unwrap_or("packages"))
        )),
        "diskUsage" => named("diskUsage", "diskUsage"),
        "tcpPortStatus" => named("tcpPortStatus", "tcpPortStatus"),
        "udpPortStatus" => named("udpPortStatus", "udpPortStatus"),
        "tcpConnect" => named("connect", "connect"),
        "tcpLoadBalancer" => named("tcpLoadBalancer", "tcpLoadBalancer"),
        "http" => named("http", "result"),
        "filesystemPerformance" => named("filesystemPerformance", "filesystemPerformance"),
        "certificate" => named("certificate", "certificate"),
        _ => return None,
    })
}

/// A collector name as one path component: troubleshoot joins it in as written; Berth keeps
/// letters, digits, space, `.`, `_` and `-`, and never yields `.` or `..`.
pub fn safe_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .take(200)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() || safe.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        safe
    }
}

/// A collector name that may hold folders (`berth/logs`): each part made safe as
/// [`safe_name`] makes it, empty parts left out.
pub fn safe_path(name: &str) -> String {
    let parts: Vec<String> = name
        .split('/')
        .filter(|part| !part.is_empty())
        .take(8)
        .map(safe_name)
        .collect();
    if parts.is_empty() {
        "_".to_string()
    } else {
        parts.join("/")
    }
}

/// A relative bundle path with no empty, `.` or `..` component.
pub fn is_safe_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_leave_their_folder() {
        assert_eq!(
            result_path("diskUsage", Some("../../etc/passwd")).unwrap(),
            "host-collectors/diskUsage/.._.._etc_passwd.json"
        );
        assert_eq!(safe_name(".."), "_");
        assert_eq!(
            result_path("cpu", None).unwrap(),
            "host-collectors/system/cpu.json"
        );
        assert_eq!(safe_path("berth/logs"), "berth/logs");
        assert_eq!(safe_path("../x//y/"), "_/x/y");
        assert_eq!(safe_path("/"), "_");
        assert!(!is_safe_relative("a/../b") && !is_safe_relative("/a") && is_safe_relative("a/b"));
    }
}
