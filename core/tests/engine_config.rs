//! `job.autoscaler.*` keys: upstream defaults, Flink value syntax, the legacy prefix,
//! deprecated aliases, validation ranges and contradictions, and our extension keys.

use std::collections::BTreeMap;

use flink_autoscale_core::engine::{
    parse_config, AlignmentMode, AutoscalerConfig, BusyTimeAggregator, ConfigValue,
};

fn config(pairs: &[(&str, ConfigValue)]) -> Result<AutoscalerConfig, String> {
    let map: BTreeMap<String, ConfigValue> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    parse_config(&map).map_err(|e| e.to_string())
}

fn s(v: &str) -> ConfigValue {
    ConfigValue::String(v.to_owned())
}

#[test]
fn defaults_are_upstream_defaults() {
    let c = config(&[]).unwrap();
    let min = 60_000;
    assert!(!c.enabled);
    assert!(c.scaling_enabled);
    assert_eq!(c.metrics_window_ms, 15 * min);
    assert_eq!(c.stabilization_interval_ms, 5 * min);
    assert_eq!(c.utilization_target, 0.7);
    assert_eq!(c.utilization_boundary, 0.3);
    assert_eq!((c.utilization_min, c.utilization_max), (None, None));
    assert_eq!(c.scale_down_interval_ms, 60 * min);
    assert_eq!(
        (c.vertex_min_parallelism, c.vertex_max_parallelism),
        (1, 200)
    );
    assert_eq!(
        (c.scale_down_max_factor, c.scale_up_max_factor),
        (0.6, 100_000.0)
    );
    assert_eq!(c.catch_up_duration_ms, 30 * min);
    assert_eq!(c.restart_time_ms, 5 * min);
    assert_eq!(c.backlog_lag_threshold_ms, 5 * min);
    assert_eq!(c.observed_tpr_lag_threshold_ms, 30_000);
    assert_eq!(c.observed_tpr_switch_threshold, 0.15);
    assert_eq!(c.observed_tpr_min_observations, 2);
    assert_eq!(c.busy_time_aggregator, BusyTimeAggregator::Max);
    assert!(!c.effectiveness_detection_enabled);
    assert_eq!(c.effectiveness_threshold, 0.1);
    assert_eq!(
        (c.history_max_count, c.history_max_age_ms),
        (3, 24 * 60 * min)
    );
    assert_eq!(c.alignment_mode, AlignmentMode::Balanced);
    assert!(!c.observed_scalability_enabled);
    assert_eq!(c.observed_scalability_min_observations, 3);
    assert_eq!(c.observed_scalability_coefficient_min, 0.5);
    assert!(c.extensions.forward_groups_enabled);
    assert!(c.extensions.sink_limits_enabled && c.extensions.sink_detection_enabled);
    assert!(c.extensions.scale_down_caution_enabled);
    assert_eq!(c, AutoscalerConfig::default());
}

#[test]
fn values_accept_strings_numbers_and_booleans_in_flink_syntax() {
    let c = config(&[
        ("job.autoscaler.enabled", ConfigValue::Bool(true)),
        (
            "job.autoscaler.utilization.target",
            ConfigValue::Number(0.8),
        ),
        ("job.autoscaler.metrics.window", s("5 min")),
        ("job.autoscaler.stabilization.interval", s("0s")),
        ("job.autoscaler.restart.time", s("100ms")),
        ("job.autoscaler.catch-up.duration", s("1h")),
        (
            "job.autoscaler.vertex.max-parallelism",
            ConfigValue::Number(64.0),
        ),
        ("job.autoscaler.vertex.exclude.ids", s("a; b")),
        ("job.autoscaler.metrics.busy-time.aggregator", s("avg")),
        ("job.autoscaler.scaling.enabled", s("FALSE")),
        ("job.autoscaler.quota.memory", s("4 gb")),
        (
            "flink-autoscale.sink-limits.max-rates",
            s("sink:1000,other:2.5"),
        ),
        ("taskmanager.numberOfTaskSlots", s("4")), // other Flink keys are ignored
    ])
    .unwrap();
    assert!(c.enabled && !c.scaling_enabled);
    assert_eq!(c.utilization_target, 0.8);
    assert_eq!(c.metrics_window_ms, 300_000);
    assert_eq!(c.stabilization_interval_ms, 0);
    assert_eq!(c.restart_time_ms, 100);
    assert_eq!(
        c.restart_time_s(),
        0.0,
        "durations truncate to whole seconds in formulas"
    );
    assert_eq!(c.catch_up_duration_ms, 3_600_000);
    assert_eq!(c.vertex_max_parallelism, 64);
    assert_eq!(c.vertex_exclude_ids.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(c.busy_time_aggregator, BusyTimeAggregator::Avg);
    assert_eq!(c.memory.quota_memory_bytes, Some(4 << 30));
    assert_eq!(c.extensions.sink_max_rates.get("other"), Some(&2.5));
}

#[test]
fn legacy_prefix_is_a_fallback_and_the_new_prefix_wins() {
    let legacy = config(&[(
        "kubernetes.operator.job.autoscaler.utilization.target",
        s("0.6"),
    )])
    .unwrap();
    assert_eq!(legacy.utilization_target, 0.6);
    let both = config(&[
        (
            "kubernetes.operator.job.autoscaler.utilization.target",
            s("0.6"),
        ),
        ("job.autoscaler.utilization.target", s("0.9")),
    ])
    .unwrap();
    assert_eq!(both.utilization_target, 0.9);
}

#[test]
fn deprecated_aliases_apply_when_the_current_key_is_absent() {
    let c = config(&[
        ("job.autoscaler.target.utilization", s("0.5")),
        ("job.autoscaler.scale-up.grace-period", s("10 min")),
    ])
    .unwrap();
    assert_eq!(c.utilization_target, 0.5);
    assert_eq!(c.scale_down_interval_ms, 600_000);
    let c = config(&[
        ("job.autoscaler.target.utilization", s("0.5")),
        ("job.autoscaler.utilization.target", s("0.6")),
    ])
    .unwrap();
    assert_eq!(c.utilization_target, 0.6);
}

#[test]
fn alignment_mode_keys() {
    let cases = [
        (vec![], AlignmentMode::Balanced),
        (
            vec![(
                "job.autoscaler.scaling.parallelism-alignment.mode",
                "EVENLY_SPREAD",
            )],
            AlignmentMode::EvenlySpread,
        ),
        (
            vec![("job.autoscaler.scaling.parallelism-alignment.mode", "off")],
            AlignmentMode::Off,
        ),
        (
            vec![(
                "job.autoscaler.scaling.key-group.partitions.adjust.mode",
                "EVENLY_SPREAD",
            )],
            AlignmentMode::LegacyEvenlySpread,
        ),
        (
            vec![(
                "job.autoscaler.scaling.key-group.partitions.adjust.mode",
                "MAXIMIZE_UTILISATION",
            )],
            AlignmentMode::LegacyMaximizeUtilisation,
        ),
        (
            vec![
                (
                    "job.autoscaler.scaling.key-group.partitions.adjust.mode",
                    "MAXIMIZE_UTILISATION",
                ),
                (
                    "job.autoscaler.scaling.parallelism-alignment.mode",
                    "BALANCED",
                ),
            ],
            AlignmentMode::Balanced,
        ),
    ];
    for (pairs, expected) in cases {
        let pairs: Vec<(&str, ConfigValue)> = pairs.iter().map(|(k, v)| (*k, s(v))).collect();
        assert_eq!(
            config(&pairs).unwrap().alignment_mode,
            expected,
            "{pairs:?}"
        );
    }
}

#[test]
fn invalid_values_are_rejected_naming_the_key() {
    let cases = [
        (
            "job.autoscaler.utilization.target",
            s("1.5"),
            "between 0 and 1",
        ),
        (
            "job.autoscaler.utilization.target",
            s("abc"),
            "not a finite number",
        ),
        (
            "job.autoscaler.target.utilization.boundary",
            s("-0.1"),
            "at least 0",
        ),
        (
            "job.autoscaler.scale-down.max-factor",
            s("-1"),
            "at least 0",
        ),
        ("job.autoscaler.scale-up.max-factor", s("-1"), "at least 0"),
        (
            "job.autoscaler.metrics.window",
            s("5 fortnights"),
            "unknown time unit",
        ),
        (
            "job.autoscaler.metrics.window",
            s("1.5 min"),
            "not a duration",
        ),
        ("job.autoscaler.enabled", s("yes"), "not a boolean"),
        (
            "job.autoscaler.vertex.max-parallelism",
            s("-3"),
            "whole number",
        ),
        (
            "job.autoscaler.vertex.min-parallelism",
            s("0"),
            "at least 1",
        ),
        (
            "job.autoscaler.history.max.count",
            ConfigValue::Number(2.5),
            "whole number",
        ),
        (
            "job.autoscaler.metrics.busy-time.aggregator",
            s("MEDIAN"),
            "MAX, MIN, AVG",
        ),
        (
            "job.autoscaler.scaling.parallelism-alignment.mode",
            s("com.example.Custom"),
            "not one of",
        ),
        (
            "job.autoscaler.excluded.periods",
            s("25:00:00-26:00:00"),
            "time of day",
        ),
        (
            "job.autoscaler.excluded.periods",
            s("0 0 * * * MON"),
            "exactly one of",
        ),
        ("job.autoscaler.utilizaton.target", s("0.8"), "unknown key"),
        (
            "kubernetes.operator.job.autoscaler.bogus",
            s("1"),
            "unknown key",
        ),
        (
            "flink-autoscale.sink-limits.max-rates",
            s("sink:-5"),
            "above 0",
        ),
        (
            "flink-autoscale.sink-limits.detection.busy-threshold",
            s("2"),
            "between 0 and 1",
        ),
        (
            "flink-autoscale.forward-groups.enabled",
            s("maybe"),
            "not a boolean",
        ),
        (
            "kubernetes.operator.job.autoscaler.utilization.target",
            s("7"),
            "between 0 and 1",
        ),
    ];
    for (key, value, fragment) in cases {
        let err = config(&[(key, value.clone())]).expect_err(key);
        assert!(
            err.starts_with(&format!("{key}: ")),
            "{key}={value:?}: {err}"
        );
        assert!(
            err.contains(fragment),
            "{key}={value:?}: `{err}` lacks `{fragment}`"
        );
    }
}

#[test]
fn ranges_that_depend_on_other_keys() {
    let cases: [(&[(&str, &str)], &str); 6] = [
        (
            &[("job.autoscaler.utilization.max", "0.5")],
            "job.autoscaler.utilization.max",
        ),
        (
            &[("job.autoscaler.utilization.min", "0.8")],
            "job.autoscaler.utilization.min",
        ),
        (
            &[
                ("job.autoscaler.vertex.min-parallelism", "10"),
                ("job.autoscaler.vertex.max-parallelism", "5"),
            ],
            "job.autoscaler.vertex.min-parallelism",
        ),
        (
            &[
                (
                    "job.autoscaler.scaling.effectiveness.detection.enabled",
                    "true",
                ),
                ("job.autoscaler.scaling.effectiveness.threshold", "1.5"),
            ],
            "job.autoscaler.scaling.effectiveness.threshold",
        ),
        (
            &[
                ("job.autoscaler.observed-scalability.enabled", "true"),
                ("job.autoscaler.observed-scalability.coefficient-min", "0"),
            ],
            "job.autoscaler.observed-scalability.coefficient-min",
        ),
        (
            &[("job.autoscaler.vertex.min-parallelism", "300")],
            "job.autoscaler.vertex.min-parallelism",
        ),
    ];
    for (pairs, key) in cases {
        let pairs: Vec<(&str, ConfigValue)> = pairs.iter().map(|(k, v)| (*k, s(v))).collect();
        let err = config(&pairs).expect_err(key);
        assert!(err.starts_with(key), "{pairs:?}: {err}");
    }
    // Without detection or observed scalability, their ranges are not enforced (as upstream).
    assert!(config(&[("job.autoscaler.scaling.effectiveness.threshold", s("1.5"))]).is_ok());
    assert!(config(&[(
        "job.autoscaler.observed-scalability.coefficient-min",
        s("0")
    )])
    .is_ok());
    // Utilization max/min within range relative to the target.
    assert!(config(&[
        ("job.autoscaler.utilization.max", s("0.9")),
        ("job.autoscaler.utilization.min", s("0.3"))
    ])
    .is_ok());
}

#[test]
fn excluded_periods_are_evaluated_in_utc() {
    let c = config(&[(
        "job.autoscaler.excluded.periods",
        s("09:00:00-17:00:00;* * * ? * SUN"),
    )])
    .unwrap();
    let hour = 3_600_000;
    let day = 24 * hour;
    // 1970-01-01 was a Thursday; 1970-01-04 a Sunday.
    assert!(c.in_excluded_period(10 * hour));
    assert!(!c.in_excluded_period(18 * hour));
    assert!(c.in_excluded_period(3 * day + 18 * hour));
}
