//! The collectors and analyzers Berth runs, by the part of the host they look at. Each kind
//! collects into troubleshoot's result shape (so `--json` and message templates see what
//! troubleshoot's would) and analyzes with troubleshoot's `when` grammar for that kind.

mod certificate;
mod clock;
mod hardware;
mod host_facts;
mod host_os;
mod network;
mod packages;
mod services;
mod storage;
mod time;

use std::time::Duration;

use serde_json::{Map, Value};

use crate::document::Item;
use crate::report::Outcome;
use crate::support_bundle::paths::ResultFile;

/// What a collector found, or why it found nothing.
pub type Collected = Result<Value, String>;

/// A field of the kernel's /proc/meminfo in KiB (`MemTotal`, `MemAvailable`).
pub fn meminfo_kib(field: &str) -> Result<u64, String> {
    let text = fs_err::read_to_string("/proc/meminfo").map_err(|error| error.to_string())?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse::<u64>().ok())
        .ok_or_else(|| format!("/proc/meminfo has no {field}"))
}

/// The kinds Berth runs, each with its default title and where its result goes in a support
/// bundle (which also says whether `collectorName` names its result, or one is kept per run).
/// A new kind is a new row of [`KINDS`]; [`Kind::new`] asks for each fact.
pub struct Kind {
    pub name: &'static str,
    pub title: &'static str,
    pub result: ResultFile,
    collect: fn(&Map<String, Value>, &Limits) -> Collected,
    analyze: fn(&Item, &Value) -> Result<Vec<Matched>, String>,
    /// What the analyzer gives when its collector gathered nothing.
    missing: fn(&Item) -> Result<Vec<Matched>, String>,
    /// Its collector binds the port it checks: collectors of one port run one after another,
    /// so two never see each other as the process in the way.
    binds_port: bool,
    /// Its default title names its collector (`Disk Usage /var/lib/kubelet`).
    pub titled_by_collector: bool,
}

/// Bounds every collector keeps to.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Whether filesystemPerformance runs (`--skip-filesystem-performance` turns it off).
    pub filesystem_performance: bool,
    /// The longest any one network collector waits, whatever its spec says.
    pub network_timeout_cap: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            filesystem_performance: true,
            network_timeout_cap: Duration::from_secs(600),
        }
    }
}

/// One outcome an analyzer chose.
#[derive(Debug, Clone)]
pub struct Matched {
    pub outcome: Outcome,
    pub message: String,
    pub uri: String,
    /// Set where one analyzer gives several results (one per package).
    pub title_suffix: Option<String>,
}

pub const KINDS: &[Kind] = &[
    host_os::HOST_OS,
    hardware::CPU,
    hardware::MEMORY,
    time::TIME,
    services::HOST_SERVICES,
    services::KERNEL_MODULES,
    packages::SYSTEM_PACKAGES,
    network::IPV4_INTERFACES,
    hardware::BLOCK_DEVICES,
    network::TCP_PORT_STATUS,
    network::UDP_PORT_STATUS,
    network::TCP_CONNECT,
    network::TCP_LOAD_BALANCER,
    network::HTTP,
    storage::DISK_USAGE,
    storage::FILESYSTEM_PERFORMANCE,
    certificate::CERTIFICATE,
];

pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|kind| kind.name == name)
}

impl Kind {
    /// A kind whose analyzer gives no outcome when nothing was collected, that binds no port and
    /// whose title is its own.
    pub(crate) const fn new(
        name: &'static str,
        title: &'static str,
        result: ResultFile,
        collect: fn(&Map<String, Value>, &Limits) -> Collected,
        analyze: fn(&Item, &Value) -> Result<Vec<Matched>, String>,
    ) -> Kind {
        Kind {
            name,
            title,
            result,
            collect,
            analyze,
            missing: no_outcome,
            binds_port: false,
            titled_by_collector: false,
        }
    }

    /// The key the result is kept under: the kind, and the collector name where it names one.
    pub fn result_key(&self, collector_name: Option<&str>) -> (String, String) {
        let name = if self.result.is_named() {
            collector_name.unwrap_or("").to_string()
        } else {
            String::new()
        };
        (self.name.to_string(), name)
    }

    pub fn collect(&self, fields: &Map<String, Value>, limits: &Limits) -> Collected {
        (self.collect)(fields, limits)
    }

    /// The analyzer's results for what the collector gathered (`None`: no collector ran).
    pub fn analyze(&self, item: &Item, data: Option<&Collected>) -> Result<Vec<Matched>, String> {
        match data {
            Some(Ok(value)) => (self.analyze)(item, value),
            _ => (self.missing)(item),
        }
    }

    /// The port a collector binds, where it binds one.
    pub fn bound_port(&self, fields: &Map<String, Value>) -> Option<u64> {
        self.binds_port
            .then(|| fields.get("port").and_then(Value::as_u64))
            .flatten()
    }
}

/// One outcome as the spec writes it.
pub(crate) struct SpecOutcome {
    pub(crate) outcome: Outcome,
    pub(crate) when: String,
    pub(crate) message: String,
    pub(crate) uri: String,
}

impl SpecOutcome {
    /// This outcome as the analyzer's result, its message as written.
    fn matched(self) -> Matched {
        Matched {
            outcome: self.outcome,
            message: self.message,
            uri: self.uri,
            title_suffix: None,
        }
    }
}

/// The outcomes of an analyzer, in order.
pub(crate) fn outcomes(item: &Item) -> Result<Vec<SpecOutcome>, String> {
    let Some(list) = item.fields.get("outcomes") else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err("`outcomes` is not a list".into());
    };
    let mut out = Vec::new();
    for (index, entry) in list.iter().enumerate() {
        let Some(entry) = entry.as_object() else {
            return Err(format!("outcomes[{index}] is not a mapping"));
        };
        // troubleshoot looks at fail, then warn, then pass within one entry.
        for (key, outcome) in [
            ("fail", Outcome::Fail),
            ("warn", Outcome::Warn),
            ("pass", Outcome::Pass),
        ] {
            if let Some(single) = entry.get(key) {
                let text = |name: &str| {
                    single
                        .get(name)
                        .map(|value| match value {
                            Value::String(text) => text.clone(),
                            Value::Null => String::new(),
                            other => other.to_string(),
                        })
                        .unwrap_or_default()
                };
                out.push(SpecOutcome {
                    outcome,
                    when: text("when"),
                    message: text("message"),
                    uri: text("uri"),
                });
                break;
            }
        }
        if !["fail", "warn", "pass"]
            .iter()
            .any(|key| entry.contains_key(*key))
        {
            let keys: Vec<&String> = entry.keys().collect();
            return Err(format!(
                "outcomes[{index}] has {keys:?}; each outcome is `fail`, `warn` or `pass`"
            ));
        }
    }
    Ok(out)
}

/// troubleshoot's rule for most analyzers: the first outcome whose `when` holds (an empty
/// `when` always does); none when none holds. A `when` that cannot be read fails the analyzer.
fn first_match(
    item: &Item,
    holds: impl Fn(&str) -> Result<bool, String>,
) -> Result<Vec<Matched>, String> {
    first_match_rendered(item, holds, |message| message.to_string())
}

fn first_match_rendered(
    item: &Item,
    holds: impl Fn(&str) -> Result<bool, String>,
    render: impl Fn(&str) -> String,
) -> Result<Vec<Matched>, String> {
    for outcome in outcomes(item)? {
        let when = outcome.when.trim();
        if when.is_empty() || holds(when).map_err(|error| format!("when `{when}`: {error}"))? {
            let message = render(&outcome.message);
            return Ok(vec![Matched {
                message,
                ..outcome.matched()
            }]);
        }
    }
    Ok(Vec::new())
}

/// troubleshoot drops a check whose collector gathered nothing: no outcome (Berth shows it).
fn no_outcome(_: &Item) -> Result<Vec<Matched>, String> {
    Ok(Vec::new())
}

/// A comparison operator of troubleshoot's `when` grammars.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Compare {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    Equal,
    NotEqual,
}

impl Compare {
    fn parse(text: &str) -> Result<Self, String> {
        Ok(match text {
            "<" => Compare::Less,
            "<=" => Compare::LessOrEqual,
            ">" => Compare::Greater,
            ">=" => Compare::GreaterOrEqual,
            "=" | "==" | "===" => Compare::Equal,
            "!=" | "!==" | "<>" => Compare::NotEqual,
            other => {
                return Err(format!(
                    "`{other}` is not an operator (<, <=, >, >=, ==, !=)"
                ));
            }
        })
    }

    fn holds<T: PartialOrd>(self, left: T, right: T) -> bool {
        match self {
            Compare::Less => left < right,
            Compare::LessOrEqual => left <= right,
            Compare::Greater => left > right,
            Compare::GreaterOrEqual => left >= right,
            Compare::Equal => left == right,
            Compare::NotEqual => left != right,
        }
    }
}

/// `when` split on single spaces, as troubleshoot splits it.
fn words(when: &str) -> Vec<&str> {
    when.split(' ').collect()
}

/// A Kubernetes quantity in bytes: `10Gi`, `4G`, `512Mi`, `2300`, `0.5Gi`.
pub fn quantity(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let suffixes: [(&str, f64); 13] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("m", 1e-3),
    ];
    let (number, factor) = suffixes
        .iter()
        .find_map(|(suffix, factor)| text.strip_suffix(suffix).map(|n| (n, *factor)))
        .unwrap_or((text, 1.0));
    number
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| n * factor)
        .ok_or_else(|| format!("`{text}` is not a quantity such as 10Gi or 4G"))
}

/// A Go duration: `10ms`, `2m`, `1h30m`, `1.5s`, `500us`.
pub fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration such as 10s, 2m or 100ms");
    let mut rest = text.trim();
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let units = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ];
        let (unit, factor) = units
            .iter()
            .filter(|(unit, _)| rest.starts_with(unit))
            .max_by_key(|(unit, _)| unit.len())
            .ok_or_else(bad)?;
        total += number * factor;
        rest = &rest[unit.len()..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// A duration field of a collector, its default when absent.
fn duration_field(
    fields: &Map<String, Value>,
    name: &str,
    default: Duration,
) -> Result<Duration, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(text)) if text.is_empty() => Ok(default),
        Some(Value::String(text)) => duration(text).map_err(|error| format!("{name}: {error}")),
        Some(other) => Err(format!("{name}: {other} is not a duration such as 10s")),
    }
}

fn text_field<'a>(fields: &'a Map<String, Value>, name: &str) -> &'a str {
    fields.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Go's rendering of a duration, as troubleshoot's messages print one: `8.123ms`, `1.5s`.
pub fn go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let trim = |value: f64, unit: &str| {
        let text = format!("{value:.9}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        format!("{text}{unit}")
    };
    if nanos < 1_000 {
        format!("{nanos}ns")
    } else if nanos < 1_000_000 {
        trim(nanos as f64 / 1e3, "µs")
    } else if nanos < 1_000_000_000 {
        trim(nanos as f64 / 1e6, "ms")
    } else {
        let seconds = duration.as_secs_f64();
        let hours = (seconds / 3600.0).floor();
        let minutes = ((seconds - hours * 3600.0) / 60.0).floor();
        let rest = seconds - hours * 3600.0 - minutes * 60.0;
        let mut out = String::new();
        if hours > 0.0 {
            out.push_str(&format!("{hours}h"));
        }
        if hours > 0.0 || minutes > 0.0 {
            out.push_str(&format!("{minutes}m"));
        }
        out.push_str(&trim(rest, "s"));
        out
    }
}

/// The analyzer for kinds whose result is a `status` word, matched exactly.
fn analyze_status(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let status = data.get("status").and_then(Value::as_str).unwrap_or("");
    first_match(item, |when| Ok(when == status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_durations_read_as_kubernetes_and_go_read_them() {
        assert_eq!(quantity("10Gi").unwrap(), 10.0 * 1024f64.powi(3));
        assert_eq!(quantity("4G").unwrap(), 4e9);
        assert_eq!(quantity("2300").unwrap(), 2300.0);
        assert!(quantity("ten").is_err());
        assert_eq!(duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(duration("5 seconds").is_err());
        assert_eq!(go_duration(Duration::from_micros(8123)), "8.123ms");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_nanos(1500)), "1.5µs");
    }
}
