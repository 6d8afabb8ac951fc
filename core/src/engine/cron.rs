//! Quartz cron expressions (`sec min hour day-of-month month day-of-week [year]`), as used by
//! `excluded.periods`, evaluated for "is this second matched" (Quartz `isSatisfiedBy`).
//! Times are UTC.

/// A parsed Quartz cron expression.
#[derive(Debug, Clone, PartialEq)]
pub struct CronExpression {
    seconds: u64,
    minutes: u64,
    hours: u64,
    day_of_month: DayOfMonth,
    months: u64,
    day_of_week: DayOfWeek,
    /// Bit i = year 1970 + i; `None` = every year.
    years: Option<u128>,
}

#[derive(Debug, Clone, PartialEq)]
enum DayOfMonth {
    Unspecified,
    Days(u64),
    /// `L` or `L-n`: n days before the last day of the month.
    Last(u32),
    /// `LW`: the last weekday of the month.
    LastWeekday,
    /// `nW`: the weekday nearest to day n, within the month.
    NearestWeekday(u32),
}

#[derive(Debug, Clone, PartialEq)]
enum DayOfWeek {
    Unspecified,
    /// Bit d for day d (1 = Sunday .. 7 = Saturday).
    Days(u64),
    /// `dL`: the last day d of the month.
    Last(u32),
    /// `d#n`: the n-th day d of the month.
    Nth(u32, u32),
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl CronExpression {
    pub fn parse(text: &str) -> Result<CronExpression, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if !(6..=7).contains(&fields.len()) {
            return Err(format!(
                "cron expression `{text}` needs 6 or 7 fields (sec min hour day-of-month month day-of-week [year])"
            ));
        }
        let field_err = |name: &str, e: String| format!("cron expression `{text}`, {name}: {e}");
        let seconds = parse_set(fields[0], 0, 59, &[]).map_err(|e| field_err("seconds", e))?;
        let minutes = parse_set(fields[1], 0, 59, &[]).map_err(|e| field_err("minutes", e))?;
        let hours = parse_set(fields[2], 0, 23, &[]).map_err(|e| field_err("hours", e))?;
        let day_of_month =
            parse_day_of_month(fields[3]).map_err(|e| field_err("day-of-month", e))?;
        let months = parse_set(fields[4], 1, 12, &MONTHS).map_err(|e| field_err("month", e))?;
        let day_of_week = parse_day_of_week(fields[5]).map_err(|e| field_err("day-of-week", e))?;
        let years = fields
            .get(6)
            .map(|f| parse_years(f).map_err(|e| field_err("year", e)))
            .transpose()?;
        let dom_unspecified = day_of_month == DayOfMonth::Unspecified;
        let dow_unspecified = day_of_week == DayOfWeek::Unspecified;
        if dom_unspecified == dow_unspecified {
            return Err(format!(
                "cron expression `{text}`: exactly one of day-of-month and day-of-week must be `?`"
            ));
        }
        Ok(CronExpression {
            seconds,
            minutes,
            hours,
            day_of_month,
            months,
            day_of_week,
            years,
        })
    }

    /// Whether the second containing `epoch_ms` (UTC) matches.
    pub fn matches(&self, epoch_ms: u64) -> bool {
        let secs = epoch_ms / 1000;
        let days = secs / 86_400;
        let second_of_day = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        let hour = second_of_day / 3600;
        let minute = second_of_day / 60 % 60;
        let second = second_of_day % 60;
        // 1970-01-01 was a Thursday (5 in Quartz's 1 = Sunday numbering).
        let weekday = ((days + 4) % 7 + 1) as u32;
        let year_ok = match self.years {
            None => true,
            Some(bits) => (1970..1970 + 128).contains(&year) && bits & (1 << (year - 1970)) != 0,
        };
        year_ok
            && bit(self.seconds, second as u32)
            && bit(self.minutes, minute as u32)
            && bit(self.hours, hour as u32)
            && bit(self.months, month)
            && self.day_of_month_matches(year, month, day)
            && self.day_of_week_matches(year, month, day, weekday)
    }

    fn day_of_month_matches(&self, year: u64, month: u32, day: u32) -> bool {
        let last = days_in_month(year, month);
        match self.day_of_month {
            DayOfMonth::Unspecified => true,
            DayOfMonth::Days(bits) => bit(bits, day),
            DayOfMonth::Last(offset) => last.checked_sub(offset) == Some(day),
            DayOfMonth::LastWeekday => nearest_weekday(year, month, last) == day,
            DayOfMonth::NearestWeekday(target) => {
                nearest_weekday(year, month, target.min(last)) == day
            }
        }
    }

    fn day_of_week_matches(&self, year: u64, month: u32, day: u32, weekday: u32) -> bool {
        match self.day_of_week {
            DayOfWeek::Unspecified => true,
            DayOfWeek::Days(bits) => bit(bits, weekday),
            DayOfWeek::Last(d) => weekday == d && day + 7 > days_in_month(year, month),
            DayOfWeek::Nth(d, n) => weekday == d && (day - 1) / 7 + 1 == n,
        }
    }
}

fn bit(bits: u64, i: u32) -> bool {
    i < 64 && bits & (1 << i) != 0
}

/// A comma-separated list of `*`, `v`, `a-b` (wrapping when a > b), each with an optional
/// `/step`; `names` map to `min..` (months, days of week).
fn parse_set(field: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, String> {
    let mut bits = 0u64;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, parse_number(s, 1, max.max(1), names, min)?),
            None => (item, 0),
        };
        let (start, end) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (
                parse_number(a, min, max, names, min)?,
                parse_number(b, min, max, names, min)?,
            )
        } else {
            let v = parse_number(range, min, max, names, min)?;
            // `v/step` runs to the end of the range, like Quartz.
            (v, if step > 0 { max } else { v })
        };
        let step = step.max(1);
        let span = max - min + 1;
        let length = if end >= start {
            end - start
        } else {
            end + span - start
        };
        let mut offset = 0;
        while offset <= length {
            let v = (start - min + offset) % span + min;
            bits |= 1 << v;
            offset += step;
        }
    }
    Ok(bits)
}

fn parse_number(text: &str, min: u32, max: u32, names: &[&str], first: u32) -> Result<u32, String> {
    let upper = text.trim().to_ascii_uppercase();
    let value = match names.iter().position(|n| *n == upper) {
        Some(i) => i as u32 + first,
        None => upper
            .parse::<u32>()
            .map_err(|_| format!("`{text}` is not a number or name"))?,
    };
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is outside {min}..={max}"))
    }
}

fn parse_day_of_month(field: &str) -> Result<DayOfMonth, String> {
    let upper = field.to_ascii_uppercase();
    if upper == "?" {
        return Ok(DayOfMonth::Unspecified);
    }
    if upper == "LW" {
        return Ok(DayOfMonth::LastWeekday);
    }
    if let Some(rest) = upper.strip_prefix('L') {
        let offset = match rest.strip_prefix('-') {
            Some(n) => parse_number(n, 0, 30, &[], 0)?,
            None if rest.is_empty() => 0,
            None => return Err(format!("`{field}` is not `L` or `L-n`")),
        };
        return Ok(DayOfMonth::Last(offset));
    }
    if let Some(day) = upper.strip_suffix('W') {
        return Ok(DayOfMonth::NearestWeekday(parse_number(
            day,
            1,
            31,
            &[],
            1,
        )?));
    }
    parse_set(&upper, 1, 31, &[]).map(DayOfMonth::Days)
}

fn parse_day_of_week(field: &str) -> Result<DayOfWeek, String> {
    let upper = field.to_ascii_uppercase();
    if upper == "?" {
        return Ok(DayOfWeek::Unspecified);
    }
    if upper == "L" {
        return Ok(DayOfWeek::Days(1 << 7));
    }
    if let Some(day) = upper.strip_suffix('L') {
        return Ok(DayOfWeek::Last(parse_number(day, 1, 7, &DAYS, 1)?));
    }
    if let Some((day, n)) = upper.split_once('#') {
        return Ok(DayOfWeek::Nth(
            parse_number(day, 1, 7, &DAYS, 1)?,
            parse_number(n, 1, 5, &[], 1)?,
        ));
    }
    parse_set(&upper, 1, 7, &DAYS).map(DayOfWeek::Days)
}

fn parse_years(field: &str) -> Result<u128, String> {
    let mut bits = 0u128;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<u64>().map_err(|_| format!("bad step `{s}`"))?),
            None => (item, 1),
        };
        let (start, end) = if range == "*" {
            (1970, 2097)
        } else if let Some((a, b)) = range.split_once('-') {
            (parse_year(a)?, parse_year(b)?)
        } else {
            let y = parse_year(range)?;
            (y, if item.contains('/') { 2097 } else { y })
        };
        let mut y = start;
        while y <= end {
            bits |= 1 << (y - 1970);
            y += step.max(1);
        }
    }
    Ok(bits)
}

fn parse_year(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|y| (1970..=2097).contains(y))
        .ok_or_else(|| format!("`{text}` is not a year between 1970 and 2097"))
}

/// Unix milliseconds as `2026-11-01 12:30:05 UTC` (times before 1970 read as 1970).
pub fn utc_text(ms: i64) -> String {
    const DAY_MS: i64 = 86_400_000;
    let ms = ms.max(0);
    let (y, m, d) = civil_from_days((ms / DAY_MS) as u64);
    let secs = ms % DAY_MS / 1000;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
pub fn civil_from_days(days: u64) -> (u64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u64;
    (year, month, day)
}

/// (year, month, day) in the proleptic Gregorian calendar to days since 1970-01-01; the
/// inverse of [`civil_from_days`]. `None` before 1970 or for a day the month lacks.
pub fn days_from_civil(year: u64, month: u32, day: u32) -> Option<u64> {
    if year < 1970 || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let y = year as i64 - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    u64::try_from(era * 146_097 + doe - 719_468).ok()
}

fn days_in_month(year: u64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        _ => 28,
    }
}

/// Weekday (1 = Sunday) of a date.
fn weekday_of(year: u64, month: u32, day: u32) -> u32 {
    // Sakamoto's algorithm; 0 = Sunday.
    const T: [u64; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    let y = if month < 3 { year - 1 } else { year };
    ((y + y / 4 - y / 100 + y / 400 + T[month as usize - 1] + u64::from(day)) % 7) as u32 + 1
}

/// The weekday nearest to `day` without leaving the month (Quartz `W`).
fn nearest_weekday(year: u64, month: u32, day: u32) -> u32 {
    let last = days_in_month(year, month);
    match weekday_of(year, month, day) {
        7 if day == 1 => 3,          // Saturday the 1st: Monday the 3rd
        7 => day - 1,                // Saturday: Friday before
        1 if day == last => day - 2, // Sunday the last: Friday before
        1 => day + 1,                // Sunday: Monday after
        _ => day,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds since the epoch of a UTC date and time.
    fn at(year: u64, month: u32, day: u32, h: u64, m: u64, s: u64) -> u64 {
        let mut days = 0u64;
        for y in 1970..year {
            days += if days_in_month(y, 2) == 29 { 366 } else { 365 };
        }
        for mo in 1..month {
            days += u64::from(days_in_month(year, mo));
        }
        days += u64::from(day - 1);
        ((days * 86_400) + h * 3600 + m * 60 + s) * 1000
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        let ms = at(2026, 11, 30, 10, 0, 0);
        assert_eq!(civil_from_days(ms / 86_400_000), (2026, 11, 30));
        for days in [0, 58, 59, 60, 365, 10_956, 20_000, 47_540] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), Some(days), "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(2026, 2, 29), None);
        assert_eq!(days_from_civil(1969, 12, 31), None);
        assert_eq!(weekday_of(2026, 11, 30), 2); // a Monday
        assert_eq!(
            utc_text(at(2026, 11, 30, 10, 5, 9) as i64),
            "2026-11-30 10:05:09 UTC"
        );
        assert_eq!(utc_text(-5), "1970-01-01 00:00:00 UTC");
    }

    #[test]
    fn cron_expressions_match_like_quartz() {
        let cases = [
            ("* * 9-17 ? * MON-FRI", at(2026, 11, 30, 10, 5, 0), true),
            ("* * 9-17 ? * MON-FRI", at(2026, 11, 29, 10, 5, 0), false), // Sunday
            ("* * 9-17 ? * MON-FRI", at(2026, 11, 30, 18, 0, 0), false),
            ("0 0/15 * * * ?", at(2026, 1, 1, 3, 45, 0), true),
            ("0 0/15 * * * ?", at(2026, 1, 1, 3, 46, 0), false),
            ("* * 22-2 * * ?", at(2026, 1, 1, 1, 0, 0), true),
            ("* * 22-2 * * ?", at(2026, 1, 1, 3, 0, 0), false),
            ("* * * L * ?", at(2026, 2, 28, 0, 0, 0), true),
            ("* * * L-1 * ?", at(2026, 2, 27, 0, 0, 0), true),
            ("* * * LW * ?", at(2026, 5, 29, 0, 0, 0), true), // May 31 2026 is a Sunday
            ("* * * 1W * ?", at(2026, 8, 3, 0, 0, 0), true),  // Aug 1 2026 is a Saturday
            ("* * * ? * 6L", at(2026, 11, 27, 0, 0, 0), true), // last Friday
            ("* * * ? * 6#3", at(2026, 11, 20, 0, 0, 0), true), // third Friday
            ("* * * ? * 6#3", at(2026, 11, 27, 0, 0, 0), false),
            ("* * * * DEC ? 2026", at(2026, 12, 24, 0, 0, 0), true),
            ("* * * * DEC ? 2027", at(2026, 12, 24, 0, 0, 0), false),
        ];
        for (expr, ms, expected) in cases {
            let cron = CronExpression::parse(expr).expect(expr);
            assert_eq!(cron.matches(ms), expected, "{expr}");
        }
    }

    #[test]
    fn invalid_cron_expressions_are_rejected() {
        for bad in [
            "* * *",
            "* * * * * *",
            "61 * * ? * *",
            "* * * ? FOO *",
            "* * * 5 * MON",
        ] {
            assert!(CronExpression::parse(bad).is_err(), "{bad}");
        }
    }
}
