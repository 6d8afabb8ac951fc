//! The per-vertex decision with upstream semantics (reference section 5): scale factor,
//! observed scalability, max-factor clamps, parallelism bounds and alignment, then the
//! damping of delayed scale-down and ineffective scale-up detection.

use super::alignment::{align, AlignmentInput};
use super::config::AutoscalerConfig;
use super::effectiveness::last_scale_up_ineffective;
use super::model::Limit;
use super::numeric::ceil_to_i32;
use super::scalability::scalability_coefficient;
use super::scale_down_delay::{delay_scale_down, DelayOutcome};
use super::source_cap::source_cap;
use super::state::{DelayedScaleDown, HistoryEntry};
use super::thresholds::{capacity, Rates};

/// The static facts of a vertex that its decision needs.
#[derive(Debug, Clone, Copy)]
pub struct VertexFacts<'a> {
    pub current: u32,
    pub max_parallelism: u32,
    pub source_partitions: u32,
    pub has_hash_input: bool,
    pub history: &'a [HistoryEntry],
}

/// Steps 1 to 8: the parallelism the figures ask for, without damping.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Equal to `current` when there is no change.
    pub parallelism: u32,
    pub limits: Vec<Limit>,
}

/// The highest parallelism the bounds allow for a vertex.
pub fn parallelism_cap(current: u32, max_parallelism: u32, config: &AutoscalerConfig) -> u32 {
    max_parallelism.min(current.max(config.vertex_max_parallelism))
}

/// The most subtasks a source with known partitions or splits can use ([`source_cap`]),
/// with the same lower bound as [`target_parallelism`].
pub fn usable_source_cap(
    current: u32,
    source_partitions: u32,
    config: &AutoscalerConfig,
) -> Option<u32> {
    source_cap(
        source_partitions,
        current.min(config.vertex_min_parallelism.max(1)),
    )
}

pub fn target_parallelism(facts: &VertexFacts, rates: &Rates, config: &AutoscalerConfig) -> Target {
    let p = facts.current;
    let no_change = |limit: Limit| Target {
        parallelism: p,
        limits: vec![limit],
    };
    let tpr = rates.true_processing_rate;
    if tpr.is_nan() {
        return no_change(Limit::MissingMetrics);
    }
    let needed = capacity(config.utilization_target, true, rates, config);
    if needed.is_nan() {
        return no_change(Limit::MissingMetrics);
    }
    let mut limits = Vec::new();
    let mut factor = needed / tpr;
    if config.observed_scalability_enabled {
        let alpha = scalability_coefficient(
            facts.history,
            config.observed_scalability_min_observations,
            config.observed_scalability_coefficient_min,
        );
        if alpha < 1.0 {
            factor /= alpha;
            limits.push(Limit::ObservedScalability);
        }
    }
    let min_factor = 1.0 - config.scale_down_max_factor;
    let max_factor = 1.0 + config.scale_up_max_factor;
    let unclamped = factor;
    if factor < min_factor {
        factor = min_factor;
    } else if factor > max_factor {
        factor = max_factor;
    }
    // `max(1)` guards configurations built in code, which skip `parse_config`'s validation.
    let lower = p.min(config.vertex_min_parallelism.max(1));
    let upper = p.max(config.vertex_max_parallelism);
    let raw = ceil_to_i32(factor * f64::from(p));
    let cap = facts.max_parallelism.min(upper);
    let bounded = i64::from(raw).max(i64::from(lower)).min(i64::from(cap)) as u32;
    if factor != unclamped && ceil_to_i32(unclamped * f64::from(p)) != raw {
        limits.push(Limit::MaxFactor);
    }
    if i64::from(raw) != i64::from(bounded) {
        limits.push(Limit::Bounds);
    }
    let mut parallelism = bounded;
    if parallelism != p {
        parallelism = align(
            config.alignment_mode,
            &AlignmentInput {
                current: p,
                new: bounded,
                max_parallelism: facts.max_parallelism,
                source_partitions: facts.source_partitions,
                has_hash_input: facts.has_hash_input,
                lower,
                upper,
            },
        );
        if parallelism != bounded {
            limits.push(Limit::Alignment);
        }
        if let Some(cap) = source_cap(facts.source_partitions, lower) {
            if parallelism > cap {
                parallelism = cap;
                limits.push(Limit::SourcePartitions);
            }
        }
    }
    Target {
        parallelism,
        limits,
    }
}

/// The vertex-level result with upstream semantics, and the updated delayed-scale-down state.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexOutcome {
    pub recommended: u32,
    /// Whether this vertex counts as outside its band for the job-level gate.
    pub outside_band: bool,
    /// `TPR / current * recommended`.
    pub expected_processing_rate: f64,
    pub limits: Vec<Limit>,
    /// Set when the last scale-up was ineffective (reported even when not blocking).
    pub ineffective_scale_up: bool,
}

/// Steps 1 to 13 for one vertex. `delayed` is the vertex's delayed scale-down entry.
pub fn scale_vertex(
    facts: &VertexFacts,
    rates: &Rates,
    outside_band: bool,
    delayed: &mut Option<DelayedScaleDown>,
    now_ms: u64,
    config: &AutoscalerConfig,
) -> VertexOutcome {
    let p = facts.current;
    let tpr = rates.true_processing_rate;
    let Target {
        parallelism: new,
        mut limits,
    } = target_parallelism(facts, rates, config);
    let mut outcome = VertexOutcome {
        recommended: p,
        outside_band,
        expected_processing_rate: tpr,
        limits: Vec::new(),
        ineffective_scale_up: false,
    };
    if new == p {
        *delayed = None;
        outcome.limits = limits;
        return outcome;
    }
    if new > p {
        *delayed = None;
        let ineffective =
            last_scale_up_ineffective(facts.history, p, tpr, config.effectiveness_threshold)
                .unwrap_or(false);
        outcome.ineffective_scale_up = ineffective;
        if ineffective && config.effectiveness_detection_enabled {
            limits.push(Limit::IneffectiveScaling);
            outcome.limits = limits;
            return outcome;
        }
        outcome.recommended = new;
    } else {
        match delay_scale_down(
            delayed,
            now_ms,
            config.scale_down_interval_ms,
            p,
            new,
            outside_band,
        ) {
            DelayOutcome::Apply {
                parallelism,
                outside_band,
            } => {
                if parallelism != new {
                    limits.push(Limit::DelayedScaleDown);
                }
                outcome.recommended = parallelism;
                outcome.outside_band = outside_band;
            }
            DelayOutcome::Wait => {
                limits.push(Limit::DelayedScaleDown);
                outcome.limits = limits;
                return outcome;
            }
        }
    }
    outcome.expected_processing_rate = tpr / f64::from(p) * f64::from(outcome.recommended);
    outcome.limits = limits;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::config::AlignmentMode;
    use crate::samples::FlinkF64;

    fn facts(current: u32, max_parallelism: u32) -> VertexFacts<'static> {
        VertexFacts {
            current,
            max_parallelism,
            source_partitions: 0,
            has_hash_input: false,
            history: &[],
        }
    }

    fn rates(tpr: f64, tdr: f64) -> Rates {
        Rates {
            true_processing_rate: tpr,
            target_data_rate: tdr,
            catch_up_data_rate: 0.0,
        }
    }

    /// target 0.5, no restart or catch-up terms: needed capacity = 2 * TDR.
    fn config() -> AutoscalerConfig {
        AutoscalerConfig {
            utilization_target: 0.5,
            catch_up_duration_ms: 0,
            scale_down_interval_ms: 0,
            ..AutoscalerConfig::default()
        }
    }

    #[test]
    fn target_parallelism_rules() {
        let base = config();
        let with = |f: fn(&mut AutoscalerConfig)| {
            let mut c = config();
            f(&mut c);
            c
        };
        // (name, config, current, key groups, tpr, tdr, expected parallelism, limits)
        type Case = (
            &'static str,
            AutoscalerConfig,
            u32,
            u32,
            f64,
            f64,
            u32,
            Vec<Limit>,
        );
        let cases: Vec<Case> = vec![
            (
                "scale up by the factor",
                base.clone(),
                4,
                128,
                1000.0,
                1000.0,
                8,
                vec![],
            ),
            (
                "ceil of f * p",
                base.clone(),
                4,
                128,
                1000.0,
                1100.0,
                9,
                vec![],
            ),
            (
                "no change at the target",
                base.clone(),
                4,
                128,
                1000.0,
                500.0,
                4,
                vec![],
            ),
            (
                "scale-down clamp 0.6",
                base.clone(),
                10,
                128,
                1000.0,
                10.0,
                4,
                vec![Limit::MaxFactor],
            ),
            (
                "scale-up clamp",
                with(|c| c.scale_up_max_factor = 0.5),
                4,
                128,
                1000.0,
                2000.0,
                6,
                vec![Limit::MaxFactor],
            ),
            (
                "key groups cap",
                base.clone(),
                4,
                10,
                1000.0,
                5000.0,
                10,
                vec![Limit::Bounds],
            ),
            (
                "vertex.max-parallelism cap",
                with(|c| c.vertex_max_parallelism = 12),
                4,
                128,
                1000.0,
                5000.0,
                12,
                vec![Limit::Bounds],
            ),
            (
                "vertex.min-parallelism floor",
                with(|c| {
                    c.vertex_min_parallelism = 3;
                    c.scale_down_max_factor = 1.0;
                }),
                10,
                128,
                1000.0,
                10.0,
                3,
                vec![Limit::Bounds],
            ),
            (
                "below min-parallelism is never forced up",
                with(|c| c.vertex_min_parallelism = 5),
                2,
                128,
                1000.0,
                500.0,
                2,
                vec![],
            ),
            (
                "above max-parallelism is never forced down",
                with(|c| c.vertex_max_parallelism = 5),
                8,
                128,
                1000.0,
                2000.0,
                8,
                vec![Limit::Bounds],
            ),
            (
                "infinite TPR with max-factor 1 goes to the lower bound",
                with(|c| c.scale_down_max_factor = 1.0),
                10,
                128,
                f64::INFINITY,
                100.0,
                1,
                vec![Limit::Bounds],
            ),
            (
                "infinite TPR: 60 % cut",
                base.clone(),
                10,
                128,
                f64::INFINITY,
                100.0,
                4,
                vec![Limit::MaxFactor],
            ),
            (
                "NaN TPR: no change",
                base.clone(),
                10,
                128,
                f64::NAN,
                100.0,
                10,
                vec![Limit::MissingMetrics],
            ),
            (
                "NaN TDR: no change",
                base.clone(),
                10,
                128,
                100.0,
                f64::NAN,
                10,
                vec![Limit::MissingMetrics],
            ),
            (
                "infinite TPR and infinite capacity: NaN factor gives the lower bound",
                with(|c| c.utilization_target = 0.0),
                10,
                128,
                f64::INFINITY,
                100.0,
                1,
                vec![Limit::Bounds],
            ),
        ];
        for (name, cfg, current, kg, tpr, tdr, expected, limits) in cases {
            let t = target_parallelism(&facts(current, kg), &rates(tpr, tdr), &cfg);
            assert_eq!(t.parallelism, expected, "{name}");
            assert_eq!(t.limits, limits, "{name}");
        }
    }

    #[test]
    fn alignment_applies_to_keyed_vertices() {
        let mut f = facts(4, 128);
        f.has_hash_input = true;
        let cfg = AutoscalerConfig {
            alignment_mode: AlignmentMode::EvenlySpread,
            ..config()
        };
        // needs 12 -> next divisor of 128 is 16
        let t = target_parallelism(&f, &rates(1000.0, 1500.0), &cfg);
        assert_eq!((t.parallelism, t.limits), (16, vec![Limit::Alignment]));
    }

    #[test]
    fn observed_scalability_raises_the_factor() {
        let history: Vec<HistoryEntry> = [(1, 100.0), (2, 150.0), (4, 250.0)]
            .iter()
            .map(|&(p, r)| HistoryEntry {
                time_ms: 0,
                current: p,
                new: p + 1,
                true_processing_rate: FlinkF64(r),
                expected_processing_rate: FlinkF64(r),
            })
            .collect();
        let mut f = facts(4, 128);
        f.history = &history;
        let cfg = AutoscalerConfig {
            observed_scalability_enabled: true,
            ..config()
        };
        // factor 2 / 0.67 = 2.985 -> ceil(11.94) = 12
        let t = target_parallelism(&f, &rates(1000.0, 1000.0), &cfg);
        assert_eq!(
            (t.parallelism, t.limits),
            (12, vec![Limit::ObservedScalability])
        );
    }

    fn history_scale_up(tpr: f64, expected: f64) -> Vec<HistoryEntry> {
        vec![HistoryEntry {
            time_ms: 0,
            current: 2,
            new: 4,
            true_processing_rate: FlinkF64(tpr),
            expected_processing_rate: FlinkF64(expected),
        }]
    }

    #[test]
    fn ineffective_scale_up_blocks_only_when_detection_is_enabled() {
        let history = history_scale_up(500.0, 1000.0);
        let mut f = facts(4, 128);
        f.history = &history;
        let r = rates(510.0, 1000.0); // rose by 10 of the expected 500
        let mut delayed = None;
        let off = scale_vertex(&f, &r, true, &mut delayed, 0, &config());
        assert_eq!(off.recommended, 16);
        assert!(off.ineffective_scale_up);
        let on_cfg = AutoscalerConfig {
            effectiveness_detection_enabled: true,
            ..config()
        };
        let on = scale_vertex(&f, &r, true, &mut delayed, 0, &on_cfg);
        assert_eq!(
            (on.recommended, on.limits),
            (4, vec![Limit::IneffectiveScaling])
        );
        // Scale-downs are never blocked.
        let down = scale_vertex(&f, &rates(5000.0, 500.0), false, &mut delayed, 0, &on_cfg);
        assert_eq!(down.recommended, 2);
    }

    #[test]
    fn scale_down_goes_through_the_delay_and_expected_rate_scales_linearly() {
        let cfg = AutoscalerConfig {
            scale_down_interval_ms: 60_000,
            ..config()
        };
        let f = facts(10, 128);
        let mut delayed = None;
        // Needs 8 (outside the band) at first, then 6 (inside).
        let first = scale_vertex(&f, &rates(1000.0, 400.0), true, &mut delayed, 0, &cfg);
        assert_eq!(
            (first.recommended, first.limits.clone()),
            (10, vec![Limit::DelayedScaleDown])
        );
        assert!(delayed.is_some());
        let later = scale_vertex(&f, &rates(1000.0, 300.0), false, &mut delayed, 60_000, &cfg);
        assert_eq!(
            later.recommended, 8,
            "the largest recommendation of the interval"
        );
        assert!(later.outside_band, "the stored outside flag is used");
        assert_eq!(later.expected_processing_rate, 800.0);
        // A scale-up clears the pending scale-down.
        scale_vertex(&f, &rates(1000.0, 5000.0), true, &mut delayed, 70_000, &cfg);
        assert!(delayed.is_none());
    }
}
