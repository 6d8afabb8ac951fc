//! Delayed scale-down (`scale-down.interval`, reference 7.1): scale-down recommendations are
//! collected, and once the interval has passed since the first one, the largest
//! recommendation of the last interval is applied.

use super::state::{DelayedRecommendation, DelayedScaleDown};

/// What to do with a scale-down recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayOutcome {
    /// Apply this parallelism; `outside_band` is the flag stored with the recommendation.
    Apply {
        parallelism: u32,
        outside_band: bool,
    },
    /// Keep the current parallelism for now.
    Wait,
}

/// Records a scale-down recommendation of `new` (below `current`) at `now_ms` and decides.
/// `entry` is the vertex's delayed state; it is created on the first recommendation.
pub fn delay_scale_down(
    entry: &mut Option<DelayedScaleDown>,
    now_ms: u64,
    interval_ms: u64,
    current: u32,
    new: u32,
    outside_band: bool,
) -> DelayOutcome {
    if interval_ms == 0 {
        *entry = None;
        return DelayOutcome::Apply {
            parallelism: new,
            outside_band,
        };
    }
    let state = entry.get_or_insert_with(|| DelayedScaleDown {
        first_trigger_ms: now_ms,
        recommendations: Vec::new(),
    });
    // Keep parallelism strictly decreasing from front to back.
    while state
        .recommendations
        .last()
        .is_some_and(|r| r.parallelism <= new)
    {
        state.recommendations.pop();
    }
    state.recommendations.push(DelayedRecommendation {
        time_ms: now_ms,
        parallelism: new,
        outside_band,
    });
    if now_ms < state.first_trigger_ms.saturating_add(interval_ms) {
        return DelayOutcome::Wait;
    }
    let window_start = now_ms - interval_ms;
    let expired = state
        .recommendations
        .iter()
        .take_while(|r| r.time_ms < window_start)
        .count();
    state.recommendations.drain(..expired);
    // The record just pushed is never expired, so the front exists: the interval's maximum.
    match state.recommendations.first() {
        Some(front) if front.parallelism != current => DelayOutcome::Apply {
            parallelism: front.parallelism,
            outside_band: front.outside_band,
        },
        _ => DelayOutcome::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    /// Runs a sequence of (time, recommendation, outside) for a vertex at parallelism 10 with
    /// a 60-minute interval and returns the outcomes.
    fn run(steps: &[(u64, u32, bool)]) -> Vec<DelayOutcome> {
        let mut entry = None;
        steps
            .iter()
            .map(|&(t, new, outside)| {
                delay_scale_down(&mut entry, t * MIN, 60 * MIN, 10, new, outside)
            })
            .collect()
    }

    fn apply(parallelism: u32, outside_band: bool) -> DelayOutcome {
        DelayOutcome::Apply {
            parallelism,
            outside_band,
        }
    }

    #[test]
    fn delayed_scale_down_sequences() {
        use DelayOutcome::Wait;
        type Steps = Vec<(u64, u32, bool)>;
        let cases: Vec<(&str, Steps, Vec<DelayOutcome>)> = vec![
            (
                "waits for the interval, then applies",
                vec![(0, 5, true), (30, 5, true), (60, 5, true)],
                vec![Wait, Wait, apply(5, true)],
            ),
            (
                "applies the largest recommendation of the last interval",
                vec![(0, 5, true), (10, 8, false), (20, 4, true), (60, 6, true)],
                vec![Wait, Wait, Wait, apply(8, false)],
            ),
            (
                "older maxima expire",
                vec![(0, 8, true), (10, 5, true), (75, 6, true)],
                vec![Wait, Wait, apply(6, true)],
            ),
            (
                "a smaller later recommendation keeps the earlier larger one",
                vec![(0, 7, false), (30, 3, true), (60, 3, true)],
                vec![Wait, Wait, apply(7, false)],
            ),
            (
                "a window maximum equal to p is no change",
                vec![(0, 10, true), (60, 4, true)],
                vec![Wait, Wait],
            ),
        ];
        for (name, steps, expected) in cases {
            assert_eq!(run(&steps), expected, "{name}");
        }
    }

    #[test]
    fn zero_interval_applies_immediately_and_keeps_no_state() {
        let mut entry = None;
        assert_eq!(
            delay_scale_down(&mut entry, 0, 0, 10, 4, false),
            apply(4, false)
        );
        assert!(entry.is_none());
    }

    #[test]
    fn recommendations_stay_strictly_decreasing() {
        let mut entry = None;
        for (t, p) in [(0, 5), (1, 7), (2, 6), (3, 6), (4, 2)] {
            delay_scale_down(&mut entry, t, 1000 * MIN, 10, p, true);
        }
        let ps: Vec<u32> = entry
            .unwrap()
            .recommendations
            .iter()
            .map(|r| r.parallelism)
            .collect();
        assert_eq!(ps, vec![7, 6, 2]);
    }
}
