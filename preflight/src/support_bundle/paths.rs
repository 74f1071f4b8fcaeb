//! Where troubleshoot puts each host collector's result in a bundle (`pkg/collect/host_*.go`),
//! and collector names made safe to be part of a path.

/// Where a value collector's result goes in a bundle, below `host-collectors/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFile {
    /// One result per run: `system/<file>`.
    System(&'static str),
    /// One result per collector name: `<folder>/<name, else default>.json`.
    Named {
        folder: &'static str,
        default: &'static str,
    },
    /// systemPackages's, one per collector name: `system/<name, else packages>-packages.json`.
    Packages,
}

impl ResultFile {
    pub const fn named(folder: &'static str, default: &'static str) -> ResultFile {
        ResultFile::Named { folder, default }
    }

    /// Whether `collectorName` names the result (else one is kept per run).
    pub fn is_named(self) -> bool {
        !matches!(self, ResultFile::System(_))
    }

    /// `host-collectors/…` for the collector named `name`, where it names one.
    pub fn path(self, name: Option<&str>) -> String {
        let name =
            |default: &str| safe_name(name.filter(|name| !name.is_empty()).unwrap_or(default));
        match self {
            ResultFile::System(file) => format!("host-collectors/system/{file}"),
            ResultFile::Named { folder, default } => {
                format!("host-collectors/{folder}/{}.json", name(default))
            }
            ResultFile::Packages => {
                format!("host-collectors/system/{}-packages.json", name("packages"))
            }
        }
    }
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
            ResultFile::named("diskUsage", "diskUsage").path(Some("../../etc/passwd")),
            "host-collectors/diskUsage/.._.._etc_passwd.json"
        );
        assert_eq!(safe_name(".."), "_");
        assert_eq!(
            ResultFile::System("cpu.json").path(None),
            "host-collectors/system/cpu.json"
        );
        assert_eq!(
            ResultFile::Packages.path(Some("")),
            "host-collectors/system/packages-packages.json"
        );
        assert_eq!(safe_path("berth/logs"), "berth/logs");
        assert_eq!(safe_path("../x//y/"), "_/x/y");
        assert_eq!(safe_path("/"), "_");
        assert!(!is_safe_relative("a/../b") && !is_safe_relative("/a") && is_safe_relative("a/b"));
    }
}
