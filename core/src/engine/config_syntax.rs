//! Flink's textual syntax for configuration values: durations (`100ms`, `5 min`, `1h`),
//! memory sizes (`512mb`, `2 g`), `;`-separated lists and `k:v,k:v` maps.

/// Parses a Flink duration into milliseconds. Like Flink's `TimeUtils.parseDuration`, the
/// number is a non-negative integer, an absent unit means milliseconds, and units are
/// case-insensitive.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number_and_unit(text, "a duration", "ms, s, min, h, d")?;
    let nanos_per_unit: u128 = match unit.as_str() {
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "µs" | "us" | "micro" | "micros" | "microsecond" | "microseconds" => 1_000,
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        other => {
            return Err(format!(
                "`{text}` has an unknown time unit `{other}`; use ns, us, ms, s, min, h or d"
            ))
        }
    };
    value
        .checked_mul(nanos_per_unit)
        .and_then(|nanos| u64::try_from(nanos / 1_000_000).ok())
        .ok_or_else(|| format!("`{text}` is too long a duration"))
}

/// Parses a Flink memory size (binary units, as Flink's `MemorySize`) into bytes.
pub fn parse_memory_bytes(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number_and_unit(text, "a memory size", "b, kb, mb, gb, tb")?;
    let multiplier: u128 = match unit.as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        "t" | "tb" | "tebibytes" => 1 << 40,
        other => {
            return Err(format!(
                "`{text}` has an unknown memory unit `{other}`; use b, kb, mb, gb or tb"
            ))
        }
    };
    value
        .checked_mul(multiplier)
        .and_then(|bytes| u64::try_from(bytes).ok())
        .ok_or_else(|| format!("`{text}` is too large a memory size"))
}

/// Splits `<whole number>[ ]<unit>` as Flink's duration and memory parsers do; the unit is
/// returned lower-cased.
fn split_number_and_unit(text: &str, what: &str, units: &str) -> Result<(u128, String), String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not {what}; expected a whole number with an optional unit ({units})"
        ));
    }
    if unit.starts_with(['.', ',']) {
        return Err(format!(
            "`{text}` is not {what}: Flink takes whole numbers here (write 1500ms, not 1.5s)"
        ));
    }
    let value = number
        .parse()
        .map_err(|_| format!("`{text}` is not {what}: number out of range"))?;
    Ok((value, unit.trim().to_ascii_lowercase()))
}

/// Splits a Flink list value (`a;b;c`), dropping empty items and surrounding blanks.
pub fn parse_list(text: &str) -> Vec<String> {
    text.split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Splits a Flink map value (`k1:v1,k2:v2`) into pairs.
pub fn parse_map(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.rsplit_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .ok_or_else(|| format!("`{item}` is not a `key:value` pair"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_flink_syntax() {
        let cases = [
            ("0s", 0),
            ("100ms", 100),
            ("100", 100),
            ("5 min", 300_000),
            ("5min", 300_000),
            ("1h", 3_600_000),
            ("2 d", 172_800_000),
            ("30 S", 30_000),
            ("1 m", 60_000),
            ("1500 us", 1),
            ("10 seconds", 10_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration_ms(text), Ok(ms), "{text}");
        }
        for bad in [
            "",
            "min",
            "1.5 min",
            "-1s",
            "5 fortnights",
            "99999999999999999999999999999999999 d",
        ] {
            assert!(parse_duration_ms(bad).is_err(), "{bad} must be rejected");
        }
    }

    #[test]
    fn memory_sizes_are_binary() {
        assert_eq!(parse_memory_bytes("1kb"), Ok(1024));
        assert_eq!(parse_memory_bytes("2 g"), Ok(2 << 30));
        assert_eq!(parse_memory_bytes("512"), Ok(512));
        assert!(parse_memory_bytes("1 furlong").is_err());
    }

    #[test]
    fn lists_and_maps() {
        assert_eq!(parse_list(" a; b ;;c "), vec!["a", "b", "c"]);
        assert_eq!(
            parse_map("s1:100, s2:2.5"),
            Ok(vec![
                ("s1".into(), "100".into()),
                ("s2".into(), "2.5".into())
            ])
        );
        assert!(parse_map("s1").is_err());
    }
}
