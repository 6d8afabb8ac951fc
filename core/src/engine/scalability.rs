//! Observed scalability (reference 7.3): from past decisions, how much of a linear speed-up
//! more parallelism actually bought. The scale factor is divided by this coefficient.

use super::numeric::ceil2;
use super::state::HistoryEntry;

/// The coefficient alpha in `[coefficient_min, 1]`; 1 when the history is too short or has
/// NaN rates.
pub fn scalability_coefficient(
    history: &[HistoryEntry],
    min_observations: u32,
    coefficient_min: f64,
) -> f64 {
    if history.is_empty() || history.len() < min_observations as usize {
        return 1.0;
    }
    let point = |e: &HistoryEntry| (f64::from(e.current), e.true_processing_rate.0);
    if history.iter().any(|e| e.true_processing_rate.0.is_nan()) {
        return 1.0;
    }
    // Baseline: the newest entry at parallelism 1, else the smallest parallelism (newest on ties).
    let baseline = match history.iter().rev().find(|e| e.current == 1) {
        Some(e) => e.true_processing_rate.0,
        None => {
            let smallest = history
                .iter()
                .rev()
                .min_by_key(|e| e.current)
                .map(point)
                .unwrap_or((1.0, 0.0));
            smallest.1 / smallest.0
        }
    };
    let weighted: f64 = history.iter().map(point).map(|(p, r)| p * r).sum();
    let squares: f64 = history.iter().map(point).map(|(p, _)| p * p).sum();
    let alpha = weighted / (squares * baseline);
    if alpha.is_nan() {
        return 1.0;
    }
    ceil2(alpha.clamp(coefficient_min, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::FlinkF64;

    fn entry(current: u32, tpr: f64) -> HistoryEntry {
        HistoryEntry {
            time_ms: 0,
            current,
            new: current + 1,
            true_processing_rate: FlinkF64(tpr),
            expected_processing_rate: FlinkF64(tpr),
        }
    }

    #[test]
    fn coefficient_cases() {
        let cases = [
            // Too few observations.
            (vec![entry(1, 100.0), entry(2, 200.0)], 1.0),
            // Perfectly linear.
            (vec![entry(1, 100.0), entry(2, 200.0), entry(4, 400.0)], 1.0),
            // Sub-linear: sum(pR) = 100 + 300 + 1000 = 1400, sum(p^2) = 21, b = 100 -> 0.667 -> 0.67.
            (
                vec![entry(1, 100.0), entry(2, 150.0), entry(4, 250.0)],
                0.67,
            ),
            // Baseline from the smallest p when none is 1: b = 200 / 2 = 100,
            // 4800 / (84 * 100) = 0.571 -> 0.58.
            (
                vec![entry(2, 200.0), entry(4, 300.0), entry(8, 400.0)],
                0.58,
            ),
            // Clamped at the minimum.
            (vec![entry(1, 100.0), entry(4, 100.0), entry(8, 100.0)], 0.5),
            // NaN rate: no adjustment.
            (
                vec![entry(1, f64::NAN), entry(2, 150.0), entry(4, 250.0)],
                1.0,
            ),
        ];
        for (i, (history, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                scalability_coefficient(&history, 3, 0.5),
                expected,
                "case {i}"
            );
        }
    }
}
