//! The pause file of local gates (`control.pause_file`): the coordinator's pause switches for
//! an agent without a coordinator, for example a Kubernetes ConfigMap mounted as a file.
//!
//! ```toml
//! [[pause]]
//! scope = "fleet"                      # or "region/R", "cluster/C", "job/<job id>"
//! reason = "INC-4711: storage incident"
//! set_by = "alice"                     # optional
//! expires_at = 2026-03-01T18:00:00Z    # optional, with a time zone
//! ```
//!
//! The file is read again whenever its modification time or size changes, so an edit (or a
//! ConfigMap update) applies to the next proposal without a restart. No file means no pause.
//! A file that cannot be read or parsed pauses everything (fail closed) and says why.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use flink_autoscale_core::pause::PauseScope;
use flink_autoscale_core::protocol::{validate_message, Pause};
use serde::Deserialize;

/// Who a pause is attributed to when the file does not say.
const DEFAULT_SET_BY: &str = "pause file";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    #[serde(default)]
    pause: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    scope: String,
    reason: String,
    #[serde(default)]
    set_by: Option<String>,
    #[serde(default)]
    expires_at: Option<toml::value::Datetime>,
}

/// Parses a pause file; the error names the entry and field (`pause[1].scope`).
pub fn parse(text: &str) -> Result<Vec<Pause>, String> {
    let file: FileFormat = toml::from_str(text).map_err(|e| e.to_string())?;
    file.pause
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let field = |name: &str| format!("pause[{i}].{name}");
            let scope = PauseScope::parse(&e.scope)
                .map_err(|err| format!("{}: {}", field("scope"), err.message))?;
            if e.reason.trim().is_empty() {
                return Err(format!("{}: must not be empty", field("reason")));
            }
            validate_message(&field("reason"), &e.reason).map_err(|err| err.to_string())?;
            let expires_at = e
                .expires_at
                .map(|d| unix_ms(&d).map_err(|m| format!("{}: {m}", field("expires_at"))))
                .transpose()?;
            Ok(Pause {
                scope: scope.to_string(),
                reason: e.reason,
                set_by: e.set_by.unwrap_or_else(|| DEFAULT_SET_BY.to_string()),
                since: 0,
                expires_at,
            })
        })
        .collect()
}

/// A TOML offset date-time as Unix milliseconds.
fn unix_ms(d: &toml::value::Datetime) -> Result<i64, String> {
    let (Some(date), Some(time), Some(offset)) = (d.date, d.time, d.offset) else {
        return Err("must be a date and time with a time zone, e.g. 2026-03-01T18:00:00Z".into());
    };
    let offset_minutes = match offset {
        toml::value::Offset::Z => 0,
        toml::value::Offset::Custom { minutes } => i64::from(minutes),
    };
    let days = days_from_civil(i64::from(date.year), date.month.into(), date.day.into());
    let seconds = days * 86_400
        + i64::from(time.hour) * 3600
        + i64::from(time.minute) * 60
        + i64::from(time.second)
        - offset_minutes * 60;
    Ok(seconds * 1000 + i64::from(time.nanosecond / 1_000_000))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (inverse of core's civil_from_days).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Checks the file at start (`check-config` and `run`): present and unusable is an error.
pub fn check(path: &Path) -> Result<(), String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map(|_| ()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The pause file, reread when it changes.
pub struct PauseFile {
    path: PathBuf,
    cache: Mutex<Option<Cached>>,
}

struct Cached {
    /// Modification time and size of the file read (`None`: no file).
    stamp: Option<(SystemTime, u64)>,
    pauses: Vec<Pause>,
}

impl PauseFile {
    pub fn new(path: PathBuf) -> Self {
        PauseFile {
            path,
            cache: Mutex::new(None),
        }
    }

    /// The pauses the file holds now.
    pub fn pauses(&self) -> Vec<Pause> {
        let stamp = match std::fs::metadata(&self.path) {
            Ok(m) => Some((m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return vec![self.unusable(format!("cannot read it: {e}"))],
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.as_ref().filter(|c| c.stamp == stamp) {
            return c.pauses.clone();
        }
        let pauses = match stamp {
            None => Vec::new(),
            Some(_) => match std::fs::read_to_string(&self.path)
                .map_err(|e| format!("cannot read it: {e}"))
                .and_then(|text| parse(&text))
            {
                Ok(pauses) => {
                    tracing::warn!(path = %self.path.display(), pauses = pauses.len(), "pause file read");
                    pauses
                }
                Err(e) => vec![self.unusable(e)],
            },
        };
        *cache = Some(Cached {
            stamp,
            pauses: pauses.clone(),
        });
        pauses
    }

    /// A fleet-wide pause standing in for a file that cannot be used.
    fn unusable(&self, why: String) -> Pause {
        tracing::error!(path = %self.path.display(), error = %why, "control.pause_file is unusable; pausing every rescale until it is fixed");
        Pause {
            scope: "fleet".into(),
            reason: format!(
                "control.pause_file {} is unusable ({why})",
                self.path.display()
            ),
            set_by: DEFAULT_SET_BY.into(),
            since: 0,
            expires_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_with_defaults_and_times() {
        let text = r#"
            [[pause]]
            scope = "cluster/c1"
            reason = "INC-4711"
            set_by = "alice"
            expires_at = 2026-03-01T18:00:00Z

            [[pause]]
            scope = "fleet"
            reason = "freeze"
            expires_at = 2026-03-01T19:30:00+01:30
        "#;
        let pauses = parse(text).unwrap();
        assert_eq!(pauses.len(), 2);
        assert_eq!(pauses[0].scope, "cluster/c1");
        assert_eq!(pauses[0].set_by, "alice");
        // 2026-03-01T18:00:00Z
        assert_eq!(pauses[0].expires_at, Some(1_772_388_000_000));
        assert_eq!(pauses[1].expires_at, pauses[0].expires_at);
        assert_eq!(pauses[1].set_by, DEFAULT_SET_BY);
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let cases = [
            (
                "[[pause]]\nscope = \"team/a\"\nreason = \"x\"",
                "pause[0].scope",
            ),
            (
                "[[pause]]\nscope = \"fleet\"\nreason = \" \"",
                "pause[0].reason",
            ),
            (
                "[[pause]]\nscope = \"fleet\"\nreason = \"x\"\nexpires_at = 2026-03-01T18:00:00",
                "pause[0].expires_at",
            ),
            (
                "[[pause]]\nscope = \"fleet\"\nreason = \"x\"\nby = \"a\"",
                "by",
            ),
            ("[[pause]]\nreason = \"x\"", "scope"),
        ];
        for (text, field) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(field), "{text}: {err}");
        }
    }

    #[test]
    fn the_file_is_reread_on_change_and_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pauses.toml");
        let file = PauseFile::new(path.clone());
        assert!(file.pauses().is_empty(), "no file, no pause");
        std::fs::write(
            &path,
            "[[pause]]\nscope = \"region/r\"\nreason = \"drill\"\n",
        )
        .unwrap();
        assert_eq!(file.pauses()[0].scope, "region/r");
        std::fs::write(
            &path,
            "[[pause]]\nscope = \"region/r\"\nreason = \"drill, longer\"\n",
        )
        .unwrap();
        assert_eq!(file.pauses()[0].reason, "drill, longer");
        std::fs::write(&path, "[[pause]\n").unwrap();
        let closed = file.pauses();
        assert_eq!(closed[0].scope, "fleet");
        assert!(
            closed[0].reason.contains("unusable"),
            "{}",
            closed[0].reason
        );
        std::fs::write(&path, "").unwrap();
        assert!(file.pauses().is_empty());
        assert!(check(&path).is_ok());
        std::fs::write(&path, "[[pause]]\nscope = \"x\"\nreason = \"r\"\n").unwrap();
        assert!(check(&path).unwrap_err().contains("pause[0].scope"));
        assert!(check(&dir.path().join("absent")).is_ok());
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 3, 1), 20_513);
    }
}
