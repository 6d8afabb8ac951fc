//! Ineffective scale-up detection (reference 7.2): after a scale-up to the current
//! parallelism, the true processing rate must have risen by at least
//! `scaling.effectiveness.threshold` of the expected increase.

use super::state::HistoryEntry;

/// Whether the last scale-up of a vertex now at `current` was ineffective. `None` when the
/// check does not apply (no history, or the last entry is not a scale-up to `current`).
pub fn last_scale_up_ineffective(
    history: &[HistoryEntry],
    current: u32,
    true_processing_rate: f64,
    threshold: f64,
) -> Option<bool> {
    let last = history.last()?;
    if !last.is_scale_up() || last.new != current {
        return None;
    }
    let before = last.true_processing_rate.0;
    let expected_increase = last.expected_processing_rate.0 - before;
    let actual_increase = true_processing_rate - before;
    let ratio = actual_increase / expected_increase;
    // A NaN ratio (for example no expected increase) counts as ineffective.
    Some(ratio.is_nan() || ratio < threshold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::FlinkF64;

    fn entry(current: u32, new: u32, tpr: f64, expected: f64) -> HistoryEntry {
        HistoryEntry {
            time_ms: 0,
            current,
            new,
            true_processing_rate: FlinkF64(tpr),
            expected_processing_rate: FlinkF64(expected),
        }
    }

    #[test]
    fn effectiveness_check_cases() {
        // (history, current, tpr now, expected outcome)
        let cases = [
            (vec![], 10, 100.0, None),
            (vec![entry(10, 5, 100.0, 50.0)], 5, 10.0, None), // last was a scale-down
            (vec![entry(5, 10, 100.0, 200.0)], 8, 100.0, None), // not at the scaled parallelism
            (vec![entry(5, 10, 100.0, 200.0)], 10, 105.0, Some(true)), // 5 % of expected
            (vec![entry(5, 10, 100.0, 200.0)], 10, 110.0, Some(false)), // exactly 10 %
            (vec![entry(5, 10, 100.0, 200.0)], 10, 190.0, Some(false)),
            (vec![entry(5, 10, 100.0, 100.0)], 10, 100.0, Some(true)), // 0/0 = NaN
            (vec![entry(5, 10, 100.0, 200.0)], 10, f64::NAN, Some(true)),
        ];
        for (i, (history, current, tpr, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                last_scale_up_ineffective(&history, current, tpr, 0.1),
                expected,
                "case {i}"
            );
        }
    }
}
