//! Per-job state carried from one decision to the next: the scaling history (for ineffective
//! scale-up detection and observed scalability) and the delayed scale-down records. Plain
//! serde data; the caller persists it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::samples::FlinkF64;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScalingState {
    /// Applied scalings per vertex id, oldest first.
    pub history: BTreeMap<String, Vec<HistoryEntry>>,
    /// Pending scale-downs per vertex id.
    pub delayed_scale_down: BTreeMap<String, DelayedScaleDown>,
    /// *Our addition.* Since when a scale-down on its own has been held because it saved
    /// less than it would cost (or since when the load was low, if earlier).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_held_since_ms: Option<u64>,
}

/// One applied scaling of a vertex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryEntry {
    pub time_ms: u64,
    /// Parallelism before the scaling.
    pub current: u32,
    /// Parallelism after the scaling.
    pub new: u32,
    /// True processing rate when the decision was made.
    pub true_processing_rate: FlinkF64,
    /// What the new parallelism was expected to process.
    pub expected_processing_rate: FlinkF64,
}

impl HistoryEntry {
    pub fn is_scale_up(&self) -> bool {
        self.new > self.current
    }
}

/// Scale-down recommendations of one vertex since the first one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayedScaleDown {
    pub first_trigger_ms: u64,
    /// Parallelism strictly decreases from front to back.
    pub recommendations: Vec<DelayedRecommendation>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayedRecommendation {
    pub time_ms: u64,
    pub parallelism: u32,
    pub outside_band: bool,
}

/// Trims a vertex history as upstream does on load: entries older than `max_age_ms` go, then
/// only the newest `max_count` stay. Entries are kept sorted by time.
pub fn trim_history(entries: &mut Vec<HistoryEntry>, now_ms: u64, max_age_ms: u64, max_count: u32) {
    entries.sort_by_key(|e| e.time_ms);
    let oldest_kept = now_ms.saturating_sub(max_age_ms);
    entries.retain(|e| e.time_ms >= oldest_kept);
    let excess = entries.len().saturating_sub(max_count as usize);
    entries.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time_ms: u64) -> HistoryEntry {
        HistoryEntry {
            time_ms,
            current: 1,
            new: 2,
            true_processing_rate: FlinkF64(1.0),
            expected_processing_rate: FlinkF64(2.0),
        }
    }

    #[test]
    fn trimming_drops_old_and_excess_entries() {
        // (entry times, now, max age, max count, kept times)
        type Case<'a> = (&'a [u64], u64, u64, u32, &'a [u64]);
        let cases: [Case; 4] = [
            (&[1, 2, 3, 4], 10, 100, 3, &[2, 3, 4]),
            (&[1, 5, 9], 10, 5, 3, &[5, 9]),
            (&[9, 1, 5], 10, 100, 2, &[5, 9]),
            (&[1, 2], 10, 100, 0, &[]),
        ];
        for (times, now, age, count, expected) in cases {
            let mut entries: Vec<_> = times.iter().map(|t| entry(*t)).collect();
            trim_history(&mut entries, now, age, count);
            let kept: Vec<u64> = entries.iter().map(|e| e.time_ms).collect();
            assert_eq!(
                kept, expected,
                "{times:?} now={now} age={age} count={count}"
            );
        }
    }
}
