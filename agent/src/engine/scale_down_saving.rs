//! Part of our extension "scale-down caution": the minimum worthwhile scale-down
//! (`flink-autoscale.scale-down-caution.min-saving`). Every rescale of a stateful job costs
//! a restart, so a scale-down that frees only a small share of the job's parallelism is not
//! worth one. Held back, it is not lost: upstream's delayed scale-down keeps collecting, and
//! once the load has fallen far enough the steps merge into one worthwhile scale-down.

use super::config::AutoscalerConfig;
use super::thresholds::Rates;
use super::vertex_scaler::{target_parallelism, VertexFacts};

/// A job-level scale-down held back because it saves too little.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldScaleDown {
    /// Subtasks the scale-down would free.
    pub saved: u32,
    /// The job's current total parallelism.
    pub total: u32,
    /// The share (0..1) it had to reach: `min-saving`, or less if one step cannot free that
    /// much.
    pub min_saving: f64,
}

impl HeldScaleDown {
    /// The share of the job's parallelism the scale-down would free.
    pub fn share(&self) -> f64 {
        f64::from(self.saved) / f64::from(self.total.max(1))
    }
}

/// One vertex's planned change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub current: u32,
    pub planned: u32,
    /// The deepest this vertex can go in one step (see [`scale_down_floor`]).
    pub floor: u32,
}

/// The lowest parallelism one scale-down can reach from the vertex's current parallelism:
/// the vertex scaler's own steps (`scale-down.max-factor`, bounds, alignment) for a flow
/// of zero.
pub fn scale_down_floor(facts: &VertexFacts, config: &AutoscalerConfig) -> u32 {
    let no_flow = Rates {
        true_processing_rate: 1.0,
        target_data_rate: 0.0,
        catch_up_data_rate: 0.0,
    };
    target_parallelism(facts, &no_flow, config)
        .parallelism
        .min(facts.current)
}

/// Checks a job's planned change. Only a pure scale-down (something goes down, nothing goes
/// up) can be held: a scale-up pays the restart anyway, and whatever scales down with it
/// rides along for free. The bar is `min_saving`, or what one step could free at most if
/// that is less, so a job whose deepest step is small still gets it.
pub fn hold_small_scale_down(
    changes: impl Iterator<Item = Change>,
    min_saving: f64,
) -> Option<HeldScaleDown> {
    let (mut total, mut saved, mut reachable) = (0u32, 0u32, 0u32);
    for c in changes {
        if c.planned > c.current {
            return None;
        }
        total = total.saturating_add(c.current);
        saved = saved.saturating_add(c.current - c.planned);
        reachable = reachable.saturating_add(c.current - c.floor.min(c.current));
    }
    let bar = min_saving.min(f64::from(reachable) / f64::from(total.max(1)));
    let held = HeldScaleDown {
        saved,
        total,
        min_saving: bar,
    };
    (saved > 0 && held.share() < bar).then_some(held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::config::AlignmentMode;

    #[test]
    fn small_pure_scale_downs_are_held() {
        // (changes as (current, planned, floor), min saving, held as (saved, total))
        type Case = (&'static [(u32, u32, u32)], f64, Option<(u32, u32)>);
        let cases: [Case; 9] = [
            (&[(6, 6, 3), (13, 12, 6), (1, 1, 1)], 0.4, Some((1, 20))),
            (&[(6, 4, 3), (13, 8, 6), (1, 1, 1)], 0.4, Some((7, 20))),
            (&[(6, 4, 3), (13, 6, 6), (1, 1, 1)], 0.4, None),
            // Exactly the minimum is worthwhile.
            (&[(5, 3, 2)], 0.4, None),
            // A scale-up anywhere pays the restart; the scale-down rides along.
            (&[(6, 7, 3), (13, 12, 6)], 0.4, None),
            // No change at all is nothing to hold.
            (&[(6, 6, 3), (13, 13, 6)], 0.4, None),
            // 0 turns the check off.
            (&[(100, 99, 40)], 0.0, None),
            // One step frees at most 2 of 6 here: the bar drops to that.
            (&[(4, 2, 2), (1, 1, 1), (1, 1, 1)], 0.4, None),
            (&[(4, 3, 2), (1, 1, 1), (1, 1, 1)], 0.4, Some((1, 6))),
        ];
        for (i, (changes, min_saving, expected)) in cases.into_iter().enumerate() {
            let changes = changes.iter().map(|&(current, planned, floor)| Change {
                current,
                planned,
                floor,
            });
            let held = hold_small_scale_down(changes, min_saving);
            assert_eq!(held.map(|h| (h.saved, h.total)), expected, "case {i}");
        }
    }

    #[test]
    fn floor_follows_max_factor_bounds_and_alignment() {
        // (current, max parallelism, keyed input, scale-down.max-factor,
        //  vertex.min-parallelism, alignment, floor)
        let cases = [
            (13, 128, false, 0.6, 1, AlignmentMode::Balanced, 6),
            (1, 128, false, 0.6, 1, AlignmentMode::Balanced, 1),
            (10, 128, false, 0.2, 1, AlignmentMode::Off, 8),
            (10, 128, false, 1.0, 3, AlignmentMode::Off, 3),
            // 16 * 0.4 = 6.4 -> 7, aligned to 8 key groups of 128.
            (16, 128, true, 0.6, 1, AlignmentMode::Balanced, 8),
            (16, 128, true, 0.6, 1, AlignmentMode::Off, 7),
            (2, 128, false, 1.0, 4, AlignmentMode::Off, 2),
        ];
        for (current, max_parallelism, keyed, max_factor, min_parallelism, mode, floor) in cases {
            let config = AutoscalerConfig {
                scale_down_max_factor: max_factor,
                vertex_min_parallelism: min_parallelism,
                alignment_mode: mode,
                ..AutoscalerConfig::default()
            };
            let facts = VertexFacts {
                current,
                max_parallelism,
                source_partitions: 0,
                has_hash_input: keyed,
                history: &[],
            };
            assert_eq!(
                scale_down_floor(&facts, &config),
                floor,
                "{current} {max_factor} {min_parallelism} {mode:?}"
            );
        }
    }

    #[test]
    fn share_is_saved_over_total() {
        let held = HeldScaleDown {
            saved: 1,
            total: 20,
            min_saving: 0.4,
        };
        assert_eq!(held.share(), 0.05);
    }

    /// Through `decide`: target 0.5, band 0.45..0.8, immediate scale-down, no alignment, so
    /// a vertex needs `ceil(2 * TDR / TPR * p)` and the job has 6 + 13 + 1 = 20 subtasks.
    #[test]
    fn decide_holds_small_scale_downs_and_applies_large_ones() {
        use crate::engine::{decide, DecideInput, Limit};
        use serde_json::json;
        let run = |src_tdr: f64, agg_tdr: f64, extra: serde_json::Value| {
            let mut config = json!({
                "job.autoscaler.enabled": true,
                "job.autoscaler.utilization.target": 0.5,
                "job.autoscaler.utilization.min": 0.45,
                "job.autoscaler.catch-up.duration": "0s",
                "job.autoscaler.scale-down.interval": "0s",
                "job.autoscaler.scaling.parallelism-alignment.mode": "OFF"
            });
            for (k, v) in extra.as_object().unwrap() {
                config[k] = v.clone();
            }
            let vertex = |id: &str, p: u32, input: Option<&str>, tpr: f64, tdr: f64| {
                json!({"id": id, "parallelism": p, "max_parallelism": 128,
                       "inputs": input.map(|i| vec![json!({"id": i, "ship_strategy": "HASH"})])
                           .unwrap_or_default(),
                       "true_processing_rate": tpr, "target_data_rate": tdr,
                       "catch_up_data_rate": 0})
            };
            let input: DecideInput = serde_json::from_value(json!({
                "now_ms": 0, "config": config,
                "vertices": [
                    vertex("src", 6, None, 1000.0, src_tdr),
                    vertex("agg", 13, Some("src"), 1300.0, agg_tdr),
                    vertex("sink", 1, Some("agg"), 100.0, 50.0),
                ]
            }))
            .unwrap();
            decide(&input).unwrap()
        };
        let no_extra = || json!({});
        // agg: 2 * 560 / 1300 * 13 = 11.2 -> 12, outside its band: frees 1 of 20.
        let small = run(500.0, 560.0, no_extra());
        let agg = small.vertices.iter().find(|v| v.id == "agg").unwrap();
        assert_eq!(agg.recommended, 12, "recommended keeps upstream semantics");
        assert!(!small.scale);
        assert_eq!(small.parallelism["agg"], 13);
        assert_eq!(agg.limited_by, vec![Limit::ScaleDownSaving]);
        assert!(
            agg.reason
                .contains("would free 1 of 20 subtasks, 5.0 %, below 40.0 %"),
            "{}",
            agg.reason
        );
        // Switched off, by 0 or with the caution extension: upstream's step is applied.
        for extra in [
            json!({"flink-autoscale.scale-down-caution.min-saving": 0}),
            json!({"flink-autoscale.scale-down-caution.enabled": false}),
        ] {
            assert_eq!(run(500.0, 560.0, extra).parallelism["agg"], 12);
        }
        // agg alone as deep as scale-down.max-factor allows (13 -> 6): 7 of 20, held,
        // because src could go down too (the job could free 10 of 20 in one step).
        assert_eq!(run(500.0, 260.0, no_extra()).parallelism["agg"], 13);
        // src 6 -> 3 and agg 13 -> 6: 10 of 20, applied.
        let large = run(200.0, 260.0, no_extra());
        assert!(large.scale);
        assert_eq!((large.parallelism["src"], large.parallelism["agg"]), (3, 6));
    }
}
