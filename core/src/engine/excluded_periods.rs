//! `excluded.periods`: periods in which nothing is applied. Each period is a Quartz cron
//! expression, a daily `HH:mm:ss-HH:mm:ss` range, or both joined with `&&` (both must match).
//! Times are UTC.

use super::cron::CronExpression;

#[derive(Debug, Clone, PartialEq)]
pub struct ExcludedPeriod {
    daily: Option<DailyRange>,
    cron: Option<CronExpression>,
}

/// Seconds of the day, both ends inclusive; `start > end` wraps around midnight.
#[derive(Debug, Clone, Copy, PartialEq)]
struct DailyRange {
    start: u32,
    end: u32,
}

impl ExcludedPeriod {
    pub fn parse(text: &str) -> Result<ExcludedPeriod, String> {
        let mut period = ExcludedPeriod {
            daily: None,
            cron: None,
        };
        for part in text.split("&&").map(str::trim) {
            if let Some(range) = parse_daily_range(part)? {
                if period.daily.replace(range).is_some() {
                    return Err(format!("`{text}` has more than one daily range"));
                }
            } else if period.cron.replace(CronExpression::parse(part)?).is_some() {
                return Err(format!("`{text}` has more than one cron expression"));
            }
        }
        Ok(period)
    }

    pub fn contains(&self, now_ms: u64) -> bool {
        let second_of_day = (now_ms / 1000 % 86_400) as u32;
        let daily_ok = self.daily.is_none_or(|r| {
            if r.start <= r.end {
                (r.start..=r.end).contains(&second_of_day)
            } else {
                second_of_day >= r.start || second_of_day <= r.end
            }
        });
        let cron_ok = self.cron.as_ref().is_none_or(|c| c.matches(now_ms));
        daily_ok && cron_ok
    }
}

/// `Ok(None)` when `text` is not shaped like a daily range (so it may be a cron expression).
fn parse_daily_range(text: &str) -> Result<Option<DailyRange>, String> {
    let Some((start, end)) = text.split_once('-') else {
        return Ok(None);
    };
    let looks_like_time = |t: &str| t.trim().len() == 8 && t.trim().as_bytes()[2] == b':';
    if !looks_like_time(start) || !looks_like_time(end) {
        return Ok(None);
    }
    Ok(Some(DailyRange {
        start: parse_time_of_day(start.trim())?,
        end: parse_time_of_day(end.trim())?,
    }))
}

fn parse_time_of_day(text: &str) -> Result<u32, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let parsed: Option<Vec<u32>> = parts.iter().map(|p| p.parse::<u32>().ok()).collect();
    match parsed.as_deref() {
        Some([h, m, s]) if *h < 24 && *m < 60 && *s < 60 => Ok(h * 3600 + m * 60 + s),
        _ => Err(format!("`{text}` is not a time of day HH:mm:ss")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;
    const HOUR_MS: u64 = 3_600_000;

    #[test]
    fn daily_ranges_include_both_ends_and_wrap() {
        let day = ExcludedPeriod::parse("09:00:00-17:00:00").unwrap();
        assert!(day.contains(DAY_MS * 3 + 9 * HOUR_MS));
        assert!(day.contains(DAY_MS * 3 + 17 * HOUR_MS));
        assert!(!day.contains(DAY_MS * 3 + 17 * HOUR_MS + 1000));
        let night = ExcludedPeriod::parse("22:00:00-02:00:00").unwrap();
        assert!(night.contains(DAY_MS + 23 * HOUR_MS));
        assert!(night.contains(DAY_MS + HOUR_MS));
        assert!(!night.contains(DAY_MS + 12 * HOUR_MS));
    }

    #[test]
    fn combined_periods_need_both() {
        // 1970-01-05 was a Monday.
        let p = ExcludedPeriod::parse("09:00:00-17:00:00 && * * * ? * MON").unwrap();
        assert!(p.contains(4 * DAY_MS + 10 * HOUR_MS));
        assert!(!p.contains(5 * DAY_MS + 10 * HOUR_MS));
        assert!(!p.contains(4 * DAY_MS + 20 * HOUR_MS));
    }

    #[test]
    fn invalid_periods_are_rejected() {
        for bad in [
            "25:00:00-26:00:00",
            "nonsense",
            "09:00:00-10:00:00 && 09:00:00-10:00:00",
        ] {
            assert!(ExcludedPeriod::parse(bad).is_err(), "{bad}");
        }
    }
}
