//! Load forecasting for predictive pre-scaling. Pure: time is an input, nothing here reads
//! a clock or a file.
//!
//! - [`LoadProfile`] learns each source's input rate by time of day (96 buckets of 15
//!   minutes), and by day of week once a week of history exists (7 × 96 buckets); it decays
//!   old observations so a changed pattern is relearned within a few days, and it remembers
//!   how well it predicted the last day.
//! - [`Forecast`] is what the profile expects over the coming day, and whether it is
//!   confident enough to act on. The decision engine takes it as plain input.

mod profile;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use profile::{LoadProfile, BUCKET_MS, PROFILE_VERSION};

/// The expected input rate of each source over the coming hours, in equal steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forecast {
    /// Start of the first step (ms).
    pub start_ms: u64,
    /// Length of every step (ms).
    pub step_ms: u64,
    /// Per source vertex id: the expected average input rate (records/s) of each step.
    pub sources: BTreeMap<String, Vec<f64>>,
    /// The profile explained the recent past well enough to act on.
    pub confident: bool,
    /// In words: the model used and its recent error, or why it is not confident.
    pub detail: String,
}

impl Forecast {
    /// The steps overlapping `[from_ms, to_ms]`, as indexes into the rate vectors.
    pub fn steps_between(&self, from_ms: u64, to_ms: u64) -> std::ops::Range<usize> {
        let len = self.sources.values().map(Vec::len).min().unwrap_or(0);
        if self.step_ms == 0 || to_ms < self.start_ms {
            return 0..0;
        }
        let first = (from_ms.saturating_sub(self.start_ms) / self.step_ms) as usize;
        let last = ((to_ms - self.start_ms) / self.step_ms) as usize;
        first.min(len)..(last + 1).min(len)
    }

    /// Start time of step `i`.
    pub fn step_start_ms(&self, i: usize) -> u64 {
        self.start_ms + i as u64 * self.step_ms
    }

    /// End of the last step.
    pub fn end_ms(&self) -> u64 {
        let len = self.sources.values().map(Vec::len).min().unwrap_or(0);
        self.step_start_ms(len)
    }
}

/// `HH:MM` (UTC) of a Unix time in milliseconds.
pub fn clock_time(ms: u64) -> String {
    let minutes = (ms / 60_000) % (24 * 60);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_overlapping_a_range() {
        let f = Forecast {
            start_ms: 1_000,
            step_ms: 100,
            sources: [("s".to_string(), vec![1.0; 10])].into(),
            confident: true,
            detail: String::new(),
        };
        assert_eq!(f.steps_between(1_000, 1_000), 0..1);
        assert_eq!(f.steps_between(1_150, 1_350), 1..4);
        assert_eq!(f.steps_between(500, 5_000), 0..10);
        assert_eq!(f.steps_between(0, 500), 0..0);
        assert_eq!(f.end_ms(), 2_000);
    }

    #[test]
    fn clock_time_is_utc_hours_and_minutes() {
        assert_eq!(clock_time(0), "00:00");
        assert_eq!(clock_time((13 * 60 + 45) * 60_000 + 59_999), "13:45");
        assert_eq!(clock_time(86_400_000 + 60_000), "00:01");
    }
}
