//! A job's own `job.autoscaler.metrics.window` (read with its configuration) sizes that
//! job's sample window; without one, or with an unreadable one, the fleet default applies.
//! Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{parse_flink_duration, window_capacity, WINDOW_KEY};

/// The job-level prefix of autoscaler keys in a job's configuration.
pub const AUTOSCALER_PREFIX: &str = "job.autoscaler.";
/// Hard cap on samples per job, whatever a job's own window asks for.
const MAX_WINDOW_SAMPLES: usize = 100_000;

/// The window length and sample cap a job gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    pub window: Duration,
    pub capacity: usize,
    /// The job's own value was present but unusable (logged by the caller).
    pub ignored: bool,
}

/// The job's window from its `job.autoscaler.*` overrides: its own `metrics.window` when it
/// is a duration of at least one poll interval, else `default`.
pub fn window_size(
    overrides: &BTreeMap<String, String>,
    default: Duration,
    poll_interval: Duration,
) -> WindowSize {
    let (window, ignored) = match overrides.get(&window_key()) {
        None => (default, false),
        Some(raw) => match parse_flink_duration(raw) {
            Ok(d) if d >= poll_interval => (d, false),
            Ok(_) | Err(_) => (default, true),
        },
    };
    WindowSize {
        window,
        capacity: window_capacity(window, poll_interval).min(MAX_WINDOW_SAMPLES),
        ignored,
    }
}

/// `job.autoscaler.metrics.window`.
pub fn window_key() -> String {
    format!("{AUTOSCALER_PREFIX}{WINDOW_KEY}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_own_window_or_the_default() {
        let s = Duration::from_secs;
        // (the job's value, expected window, ignored)
        let cases = [
            (None, s(900), false),
            (Some("5 min"), s(300), false),
            (Some("120000"), s(120), false), // a bare number is milliseconds, as Flink reads it
            (Some("10s"), s(10), false),
            (Some("9s"), s(900), true), // shorter than one poll interval
            (Some("soon"), s(900), true),
        ];
        for (value, window, ignored) in cases {
            let overrides: BTreeMap<String, String> = value
                .map(|v| (window_key(), v.to_string()))
                .into_iter()
                .collect();
            let got = window_size(&overrides, s(900), s(10));
            assert_eq!((got.window, got.ignored), (window, ignored), "{value:?}");
            assert_eq!(got.capacity, window_capacity(window, s(10)));
        }
        let huge = [(window_key(), "365d".to_string())].into();
        assert_eq!(
            window_size(&huge, s(900), Duration::from_millis(1)).capacity,
            MAX_WINDOW_SAMPLES
        );
    }
}
