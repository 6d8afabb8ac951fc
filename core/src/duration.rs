//! The duration of both daemons' configuration files: written as a string with a unit
//! (`"500ms"`, `"15s"`, `"10min"`, `"2h"`, `"1d"`), at most [`Dur::MAX`].
//!
//! A bare whole number of seconds (`15` or `"15"`) is still read for one release; the
//! daemons' loaders warn about it, because a bare number means milliseconds in Flink's own
//! keys (`[autoscaler]`) and seconds here.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A configured duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub Duration);

impl Dur {
    /// The longest duration any key accepts: longer ones are typing mistakes, and adding them
    /// to a clock reading could overflow it.
    pub const MAX: Dur = Dur(Duration::from_secs(365 * 24 * 3600));

    pub const fn secs(s: u64) -> Self {
        Dur(Duration::from_secs(s))
    }

    pub const fn millis(ms: u64) -> Self {
        Dur(Duration::from_millis(ms))
    }

    /// Whole milliseconds, saturating.
    pub fn as_millis_u64(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for Dur {
    /// The largest unit that writes the duration exactly: `500ms`, `15s`, `10min`, `2h`, `1d`.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let ms = self.0.as_millis();
        for (unit, per) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("min", 60_000),
            ("s", 1_000),
        ] {
            if ms >= per && ms.is_multiple_of(per) {
                return write!(f, "{}{unit}", ms / per);
            }
        }
        if ms == 0 {
            return write!(f, "0s");
        }
        write!(f, "{ms}ms")
    }
}

impl std::str::FromStr for Dur {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let d = Dur(parse_duration(text)?);
        if d > Dur::MAX {
            return Err(format!("{text:?} is longer than {}", Dur::MAX));
        }
        Ok(d)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        let expected = || {
            serde::de::Error::custom("expected a duration such as \"15s\", \"500ms\" or \"10min\"")
        };
        match Raw::deserialize(d).map_err(|_| expected())? {
            Raw::Secs(s) if s <= Dur::MAX.0.as_secs() => Ok(Dur::secs(s)),
            Raw::Secs(s) => Err(serde::de::Error::custom(format!(
                "{s} seconds is longer than {}",
                Dur::MAX
            ))),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Parses a configuration duration: Flink's syntax (`500ms`, `15 s`, `10min`, `2h`, `1d`),
/// except that a bare number means seconds here.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("{text:?} is too long a duration"));
    }
    crate::engine::parse_duration_ms(t).map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_through_display() {
        for (text, ms) in [
            ("500ms", 500),
            ("15s", 15_000),
            ("10min", 600_000),
            ("2h", 7_200_000),
            ("1d", 86_400_000),
            ("0s", 0),
            ("90s", 90_000),
        ] {
            let d: Dur = text.parse().unwrap();
            assert_eq!(d.as_millis_u64(), ms, "{text}");
            assert_eq!(d.to_string(), text);
        }
        assert_eq!("15 min".parse::<Dur>().unwrap(), Dur::secs(900));
        assert_eq!("20".parse::<Dur>().unwrap(), Dur::secs(20));
    }

    #[test]
    fn nonsense_and_huge_values_are_refused() {
        for text in [
            "",
            "x",
            "5 weeks",
            "-1s",
            "1.5s",
            "366d",
            "99999999999999999999s",
        ] {
            assert!(text.parse::<Dur>().is_err(), "{text:?}");
        }
        assert_eq!("365d".parse::<Dur>().unwrap(), Dur::MAX);
        let too_long: Result<Dur, _> = serde_json::from_str("99999999999");
        assert!(too_long
            .unwrap_err()
            .to_string()
            .contains("longer than 365d"));
        let whole: Dur = serde_json::from_str("60").unwrap();
        assert_eq!(whole, Dur::secs(60));
        let wrong: Result<Dur, _> = serde_json::from_str("true");
        assert!(wrong
            .unwrap_err()
            .to_string()
            .contains("expected a duration"));
    }
}
