//! The timestamps every record carries (state, health, locks, join parameters, the fleet's
//! registry and rollouts): RFC 3339 in UTC, to the second.

use std::time::SystemTime;

/// `time` as a record writes it.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

/// Now, as a record writes it.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}
