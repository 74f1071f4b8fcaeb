//! Durations as every Berth command and script takes them: `90s`, `5m`, `1h30m`, `30d`, or a
//! bare number of seconds (as the older options took them), each within the bounds its use
//! allows, so that a typo is refused with the accepted form rather than read as something else.

use std::ops::RangeInclusive;
use std::time::Duration;

/// `text` as a duration within `bounds`; the error quotes `text` and says what is accepted.
pub fn parse(text: &str, bounds: RangeInclusive<Duration>) -> Result<Duration, String> {
    let trimmed = text.trim();
    let duration = match trimmed.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => humantime::parse_duration(trimmed).map_err(|error| {
            format!("`{trimmed}` is not a duration such as 90s, 5m or 2h (or seconds): {error}")
        })?,
    };
    if !bounds.contains(&duration) {
        return Err(format!(
            "`{trimmed}` is out of range: from {} to {}",
            humantime::format_duration(*bounds.start()),
            humantime::format_duration(*bounds.end())
        ));
    }
    Ok(duration)
}

/// A day: the bound of a run's waits and timeouts, past any machine's need.
pub const DAY: Duration = Duration::from_secs(24 * 3600);

/// clap's value parser for a timeout of a run: zero (where zero means "do not wait") to a day.
pub fn up_to_a_day(text: &str) -> Result<Duration, String> {
    parse(text, Duration::ZERO..=DAY)
}

/// clap's value parser for an interval or timeout that must be at least a second: one second
/// to a day.
pub fn a_second_to_a_day(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_secs(1)..=DAY)
}

/// clap's value parser for how far back to look (`--since`): one second to a year.
pub fn a_second_to_a_year(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_secs(1)..=366 * DAY)
}

/// clap's value parser for how long something lasts unused or stays current (`--installer-idle`,
/// `--expires-in`): one second to ten years.
pub fn a_second_to_ten_years(text: &str) -> Result<Duration, String> {
    parse(text, Duration::from_secs(1)..=10 * 366 * DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_bare_seconds_within_bounds() {
        assert_eq!(up_to_a_day("300"), Ok(Duration::from_secs(300)));
        assert_eq!(up_to_a_day("0"), Ok(Duration::ZERO));
        assert_eq!(up_to_a_day("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(up_to_a_day(" 1h30m "), Ok(Duration::from_secs(5400)));
        assert_eq!(up_to_a_day("24h"), Ok(DAY));
        assert_eq!(a_second_to_a_day("1"), Ok(Duration::from_secs(1)));
        for bad in [
            "",
            "soon",
            "-5",
            "5 parsecs",
            "25h",
            "86401",
            "18446744073709551615",
            "99999999999999999999",
        ] {
            let error = up_to_a_day(bad).expect_err(bad);
            assert!(
                error.starts_with(&format!("`{}`", bad.trim())),
                "{bad}: {error}"
            );
        }
        let error = a_second_to_a_day("0").unwrap_err();
        assert_eq!(error, "`0` is out of range: from 1s to 1day");
        assert!(
            up_to_a_day("soon")
                .unwrap_err()
                .contains("such as 90s, 5m or 2h")
        );
    }
}
