//! time: the host's time zone and whether its clock is kept synchronized.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{Collected, Compare, Kind, Limits, Matched, first_match, words};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

pub const TIME: Kind = Kind::new(
    "time",
    "Time",
    ResultFile::System("time.json"),
    collect_time,
    analyze_time,
);

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
