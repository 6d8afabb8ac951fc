//! Every text parser of the core, fed generated input (proptest): none panics, each answers
//! a value or an error, and what the daemons print they read back unchanged.

use std::collections::BTreeMap;
use std::time::Duration;

use flink_autoscale_core::duration::{parse_duration, Dur};
use flink_autoscale_core::engine::{parse_config, parse_duration_ms, ConfigValue};
use proptest::prelude::*;

/// Keys whose values the engine parses with its own syntax (durations, lists, maps, cron
/// periods, numbers, booleans).
const KEYS: &[&str] = &[
    "job.autoscaler.metrics.window",
    "job.autoscaler.stabilization.interval",
    "job.autoscaler.target.utilization",
    "job.autoscaler.target.utilization.boundary",
    "job.autoscaler.scale-down.max-factor",
    "job.autoscaler.vertex.max-parallelism",
    "job.autoscaler.excluded.periods",
    "job.autoscaler.vertex.exclude.ids",
    "job.autoscaler.enabled",
    "job.autoscaler.scaling.parallelism-alignment.mode",
    "pipeline.jobvertex-parallelism-overrides",
    "flink-autoscale.prediction.horizon",
    "flink-autoscale.scale-down-caution.max-hold",
];

/// Text that looks like configuration values: digits, units, separators and some noise.
fn value_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,25}",
        "[0-9]{1,6} ?(ms|s|min|h|d|m|us|ns|days|x)?",
        "[0-9. ;:,*/-]{0,30}",
        "[a-z0-9 :;,.*-]{0,40}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn flink_durations_never_panic(text in value_text()) {
        let _ = parse_duration_ms(&text);
        let _ = parse_duration(&text);
        let _ = text.parse::<Dur>();
    }

    #[test]
    fn a_flink_duration_reads_back_in_any_unit(ms in 0u64..10_000_000_000, unit in 0usize..5) {
        let (per, names): (u64, &[&str]) = [
            (1, &["ms", "", " ms"][..]),
            (1_000, &["s", " s", "sec"][..]),
            (60_000, &["min", " min", "m"][..]),
            (3_600_000, &["h", " h", "hours"][..]),
            (86_400_000, &["d", " d", "days"][..]),
        ][unit];
        let n = ms / per;
        for name in names {
            prop_assert_eq!(parse_duration_ms(&format!("{n}{name}")), Ok(n * per));
        }
    }

    #[test]
    fn a_printed_dur_reads_back(ms in 0u64..=Dur::MAX.as_millis_u64()) {
        let d = Dur(Duration::from_millis(ms));
        let printed = d.to_string();
        prop_assert_eq!(printed.parse::<Dur>(), Ok(d), "{}", printed);
    }

    #[test]
    fn the_engine_configuration_parser_never_panics(
        entries in prop::collection::vec((0..KEYS.len(), value_text()), 0..6),
        numbers in prop::collection::vec((0..KEYS.len(), any::<f64>()), 0..3),
    ) {
        let mut map = BTreeMap::new();
        for (k, v) in entries {
            map.insert(KEYS[k].to_string(), ConfigValue::String(v));
        }
        for (k, v) in numbers {
            map.insert(KEYS[k].to_string(), ConfigValue::Number(v));
        }
        if let Err(e) = parse_config(&map) {
            // An error names a key that was given.
            prop_assert!(map.contains_key(&e.key), "{e:?} names no given key");
        }
    }
}
