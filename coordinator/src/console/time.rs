//! Times as the console shows and reads them: UTC, minute or second precision.

use flink_autoscale_core::engine::{civil_from_days, days_from_civil};

const DAY_MS: i64 = 86_400_000;

/// `2026-11-01 12:30:05 UTC`.
pub fn utc(ms: i64) -> String {
    flink_autoscale_core::engine::utc_text(ms)
}

/// `HH:MM` of a time, or `HH:MM:SS` with `seconds`, for chart axes.
pub fn clock(ms: i64, seconds: bool) -> String {
    let (_, secs) = split(ms);
    if seconds {
        format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    } else {
        format!("{:02}:{:02}", secs / 3600, secs / 60 % 60)
    }
}

fn split(ms: i64) -> (String, i64) {
    let ms = ms.max(0);
    let (y, m, d) = civil_from_days((ms / DAY_MS) as u64);
    (format!("{y:04}-{m:02}-{d:02}"), ms % DAY_MS / 1000)
}

/// Parses `YYYY-MM-DDTHH:MM` (or with `:SS`), as UTC, to Unix milliseconds.
pub fn parse_input(text: &str) -> Option<i64> {
    let (date, clock) = text.trim().split_once('T')?;
    let mut date = date.split('-').map(str::parse::<u64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let mut clock = clock.split(':').map(str::parse::<u32>);
    let hour = clock.next()?.ok()?;
    let minute = clock.next()?.ok()?;
    let second = clock.next().transpose().ok()?.unwrap_or(0);
    if date.next().is_some() || clock.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)?;
    let secs = days * 86_400 + u64::from(hour * 3600 + minute * 60 + second);
    i64::try_from(secs * 1000).ok()
}

/// "5 s", "3 min", "2 h", "4 d": how long ago `then` was.
pub fn ago(now: i64, then: i64) -> String {
    format!("{} ago", span(now - then))
}

/// "in 5 s", "in 3 min", ...: how long until `then`.
pub fn until(now: i64, then: i64) -> String {
    format!("in {}", span(then - now))
}

/// A duration in the largest unit that still reads as two or more of it.
fn span(ms: i64) -> String {
    match ms.max(0) / 1000 {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_and_parse_as_utc() {
        let ms = 1_793_536_205_000; // 2026-11-01 12:30:05 UTC
        assert_eq!(utc(ms), "2026-11-01 12:30:05 UTC");
        assert_eq!(clock(ms, false), "12:30");
        assert_eq!(clock(ms, true), "12:30:05");
        assert_eq!(parse_input("2026-11-01T12:30"), Some(ms - 5_000));
        assert_eq!(parse_input("2026-11-01T12:30:05"), Some(ms));
        for bad in [
            "",
            "2026-11-01",
            "2026-13-01T00:00",
            "2026-02-30T00:00",
            "2026-11-01T24:00",
            "x-y-zT1:2",
            "2026-11-01T12:30:05:01",
        ] {
            assert_eq!(parse_input(bad), None, "{bad}");
        }
        assert_eq!(ago(100_000, 40_000), "60 s ago");
        assert_eq!(ago(10_000_000, 0), "2 h ago");
        assert_eq!(until(0, 600_000), "in 10 min");
        assert_eq!(until(5, 0), "in 0 s");
    }
}
