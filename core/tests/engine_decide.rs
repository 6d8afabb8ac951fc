//! Job-level decisions through the public API: upstream per-vertex semantics, the band gate,
//! disabled scaling, exclusions, state carried between calls, and our extensions.

use flink_autoscale_core::engine::{
    decide, DecideInput, Decision, EngineError, Limit, VertexDecision,
};
use serde_json::{json, Value};

/// Target 0.5 with the default boundary 0.3 (band 0.2..0.8), no catch-up or restart terms,
/// immediate scale-down, no alignment: needed capacity = 2 * TDR.
fn base_config() -> Value {
    json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.utilization.target": 0.5,
        "job.autoscaler.catch-up.duration": "0s",
        "job.autoscaler.scale-down.interval": "0s",
        "job.autoscaler.scaling.parallelism-alignment.mode": "OFF"
    })
}

fn with(mut config: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    config
}

fn vertex(id: &str, p: u32, inputs: &[(&str, &str)], tpr: f64, tdr: f64) -> Value {
    json!({
        "id": id, "name": format!("{id}-name"), "parallelism": p, "max_parallelism": 128,
        "inputs": inputs.iter().map(|(i, s)| json!({"id": i, "ship_strategy": s})).collect::<Vec<_>>(),
        "true_processing_rate": tpr, "target_data_rate": tdr, "catch_up_data_rate": 0.0
    })
}

fn input(now_ms: u64, config: Value, vertices: Vec<Value>, state: Value) -> DecideInput {
    serde_json::from_value(
        json!({ "now_ms": now_ms, "config": config, "vertices": vertices, "state": state }),
    )
    .expect("valid test input")
}

fn run(now_ms: u64, config: Value, vertices: Vec<Value>, state: Value) -> Decision {
    decide(&input(now_ms, config, vertices, state)).expect("decision")
}

fn v<'a>(d: &'a Decision, id: &str) -> &'a VertexDecision {
    d.vertices.iter().find(|x| x.id == id).unwrap()
}

fn parallelism(d: &Decision) -> Vec<(String, u32)> {
    d.parallelism.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

fn pairs(items: &[(&str, u32)]) -> Vec<(String, u32)> {
    items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn scales_up_an_under_provisioned_keyed_vertex_with_balanced_alignment() {
    let config = with(
        base_config(),
        json!({"job.autoscaler.scaling.parallelism-alignment.mode": "BALANCED"}),
    );
    let d = run(
        0,
        config,
        vec![
            vertex("src", 2, &[], 1000.0, 500.0),
            vertex("map", 4, &[("src", "HASH")], 400.0, 500.0),
        ],
        json!({}),
    );
    assert!(d.scale);
    // map needs 2 * 500 / 400 * 4 = 10; BALANCED over 128 key groups takes 11 (fewer groups each).
    assert_eq!(parallelism(&d), pairs(&[("map", 11), ("src", 2)]));
    let map = v(&d, "map");
    assert_eq!(
        (map.current, map.recommended, map.outside_band),
        (4, 11, true)
    );
    assert_eq!(map.limited_by, vec![Limit::Alignment]);
    assert_eq!(map.expected_processing_rate.0, 1100.0);
    assert_eq!(
        (
            map.scale_up_rate_threshold.0,
            map.scale_down_rate_threshold.0
        ),
        (625.0, 2500.0)
    );
    assert!(map.reason.contains("map-name: 4 -> 11"), "{}", map.reason);
    // The applied scaling is recorded in the history.
    let h = &d.state.history["map"];
    assert_eq!(
        (h.len(), h[0].current, h[0].new, h[0].time_ms),
        (1, 4, 11, 0)
    );
    assert!(!d.state.history.contains_key("src"));
}

#[test]
fn band_gate_applies_nothing_unless_a_changed_vertex_is_outside() {
    // map wants 4 -> 5 (TPR 800 needs 1000 capacity) but is inside its band [625, 2500].
    let inside = run(
        0,
        base_config(),
        vec![
            vertex("src", 2, &[], 1000.0, 500.0),
            vertex("map", 4, &[("src", "REBALANCE")], 800.0, 500.0),
        ],
        json!({}),
    );
    assert!(!inside.scale);
    assert_eq!(parallelism(&inside), pairs(&[("map", 4), ("src", 2)]));
    let map = v(&inside, "map");
    assert_eq!(map.recommended, 5, "recommended is the vertex-level result");
    assert_eq!(map.limited_by, vec![Limit::BandGate]);
    assert!(inside.state.history.is_empty());
    // With another vertex outside, every changed vertex is applied, including map.
    let outside = run(
        0,
        base_config(),
        vec![
            vertex("src", 2, &[], 300.0, 500.0),
            vertex("map", 4, &[("src", "REBALANCE")], 800.0, 500.0),
        ],
        json!({}),
    );
    assert!(outside.scale);
    assert_eq!(parallelism(&outside), pairs(&[("map", 5), ("src", 7)]));
}

#[test]
fn disabled_scaling_recommends_but_applies_nothing() {
    let vertices = || vec![vertex("src", 2, &[], 100.0, 500.0)];
    // src needs 2 * 500 / 100 * 2 = 20.
    let metrics_only = run(
        0,
        with(
            base_config(),
            json!({"job.autoscaler.scaling.enabled": false}),
        ),
        vertices(),
        json!({}),
    );
    assert!(!metrics_only.scale);
    assert_eq!(v(&metrics_only, "src").recommended, 20);
    assert_eq!(
        v(&metrics_only, "src").limited_by,
        vec![Limit::ScalingDisabled]
    );
    assert_eq!(metrics_only.parallelism["src"], 2);
    let off = run(
        0,
        with(base_config(), json!({"job.autoscaler.enabled": false})),
        vertices(),
        json!({"history": {"src": [
        {"time_ms": 0, "current": 1, "new": 2, "true_processing_rate": 1.0, "expected_processing_rate": 2.0}]}}),
    );
    assert!(!off.scale);
    assert_eq!(
        off.state,
        Default::default(),
        "a disabled autoscaler keeps no state"
    );
    // An excluded period blocks too (1970-01-01 was a Thursday).
    let excluded = run(
        10 * 3_600_000,
        with(
            base_config(),
            json!({"job.autoscaler.excluded.periods": "* * 9-17 ? * THU"}),
        ),
        vertices(),
        json!({}),
    );
    assert!(!excluded.scale);
    let outside_period = run(
        20 * 3_600_000,
        with(
            base_config(),
            json!({"job.autoscaler.excluded.periods": "* * 9-17 ? * THU"}),
        ),
        vertices(),
        json!({}),
    );
    assert!(outside_period.scale);
}

#[test]
fn excluded_vertices_and_missing_metrics_keep_their_parallelism() {
    let d = run(
        0,
        with(
            base_config(),
            json!({"job.autoscaler.vertex.exclude.ids": "src"}),
        ),
        vec![
            vertex("src", 2, &[], 100.0, 500.0),
            json!({"id": "map", "parallelism": 3, "max_parallelism": 128,
                   "inputs": [{"id": "src", "ship_strategy": "HASH"}],
                   "true_processing_rate": "NaN", "target_data_rate": 500.0, "catch_up_data_rate": 0}),
            vertex("sink", 4, &[("map", "REBALANCE")], 100.0, 500.0),
        ],
        json!({}),
    );
    assert_eq!(v(&d, "src").limited_by, vec![Limit::Excluded]);
    assert_eq!(v(&d, "src").recommended, 2);
    assert_eq!(v(&d, "map").limited_by, vec![Limit::MissingMetrics]);
    assert!(v(&d, "map").true_processing_rate.0.is_nan());
    assert_eq!(
        parallelism(&d),
        pairs(&[("map", 3), ("sink", 40), ("src", 2)])
    );
    let text = serde_json::to_string(&d).unwrap();
    assert!(
        text.contains(r#""true_processing_rate":"NaN""#),
        "NaN is written as Flink writes it"
    );
}

#[test]
fn delayed_scale_down_carries_state_between_calls() {
    let config = with(
        base_config(),
        json!({"job.autoscaler.scale-down.interval": "1 min"}),
    );
    // src at 10 needs 2 * 100 / 1000 * 10 = 2, clamped by scale-down.max-factor 0.6 to 4.
    let vertices = || vec![vertex("src", 10, &[], 1000.0, 100.0)];
    let first = run(0, config.clone(), vertices(), json!({}));
    assert!(!first.scale);
    assert_eq!(v(&first, "src").recommended, 10);
    assert_eq!(
        v(&first, "src").limited_by,
        vec![Limit::MaxFactor, Limit::DelayedScaleDown]
    );
    let pending = &first.state.delayed_scale_down["src"];
    assert_eq!(
        (pending.first_trigger_ms, pending.recommendations.len()),
        (0, 1)
    );
    let state = serde_json::to_value(&first.state).unwrap();
    let early = run(30_000, config.clone(), vertices(), state);
    assert!(!early.scale);
    let state = serde_json::to_value(&early.state).unwrap();
    let due = run(60_000, config, vertices(), state);
    assert!(due.scale);
    assert_eq!(due.parallelism["src"], 4);
    assert!(
        due.state.delayed_scale_down.is_empty(),
        "an applied scaling clears pending scale-downs"
    );
    assert_eq!(due.state.history["src"][0].new, 4);
}

#[test]
fn ineffective_scale_up_is_blocked_when_detection_is_enabled() {
    let config = with(
        base_config(),
        json!({"job.autoscaler.scaling.effectiveness.detection.enabled": true}),
    );
    let history = json!({"history": {"src": [
        {"time_ms": 0, "current": 2, "new": 4, "true_processing_rate": 500.0, "expected_processing_rate": 1000.0}]}});
    let d = run(
        60_000,
        config.clone(),
        vec![vertex("src", 4, &[], 510.0, 1000.0)],
        history.clone(),
    );
    assert!(!d.scale);
    assert_eq!(v(&d, "src").limited_by, vec![Limit::IneffectiveScaling]);
    assert!(v(&d, "src").reason.contains("ineffective"));
    // An effective scale-up does not block the next one.
    let d = run(
        60_000,
        config,
        vec![vertex("src", 4, &[], 900.0, 1000.0)],
        history,
    );
    assert!(d.scale);
    assert_eq!(d.parallelism["src"], 9);
}

#[test]
fn history_is_trimmed_and_dropped_for_vanished_vertices() {
    let entry = |t: u64| json!({"time_ms": t, "current": 1, "new": 2, "true_processing_rate": 1.0, "expected_processing_rate": 2.0});
    let state = json!({
        "history": {"src": [entry(0), entry(10), entry(20), entry(30), entry(40)], "gone": [entry(40)]},
        "delayed_scale_down": {"gone": {"first_trigger_ms": 0, "recommendations": []}}
    });
    let config = with(
        base_config(),
        json!({"job.autoscaler.history.max.age": "35ms"}),
    );
    let d = run(
        50,
        config,
        vec![vertex("src", 2, &[], 2000.0, 1000.0)],
        state,
    );
    let kept: Vec<u64> = d.state.history["src"].iter().map(|e| e.time_ms).collect();
    assert_eq!(kept, vec![20, 30, 40]);
    assert!(!d.state.history.contains_key("gone"));
    assert!(d.state.delayed_scale_down.is_empty());
}

#[test]
fn forward_groups_get_one_parallelism_capped_by_the_smallest_max_parallelism() {
    // src -FORWARD-> map -HASH-> sink; map needs 10, src needs 4.
    let mut small = vertex("src", 2, &[], 500.0, 1000.0);
    small["max_parallelism"] = json!(8);
    let vertices = || {
        vec![
            small.clone(),
            vertex("map", 2, &[("src", "FORWARD")], 400.0, 1000.0),
            vertex("sink", 2, &[("map", "HASH")], 2000.0, 1000.0),
        ]
    };
    let d = run(0, base_config(), vertices(), json!({}));
    assert_eq!(v(&d, "map").recommended, 10);
    assert_eq!(v(&d, "src").recommended, 8);
    assert_eq!(
        parallelism(&d),
        pairs(&[("map", 8), ("sink", 2), ("src", 8)])
    );
    assert_eq!(v(&d, "map").limited_by, vec![Limit::ForwardGroup]);
    let off = run(
        0,
        with(
            base_config(),
            json!({"flink-autoscale.forward-groups.enabled": false}),
        ),
        vertices(),
        json!({}),
    );
    assert_eq!(
        parallelism(&off),
        pairs(&[("map", 10), ("sink", 2), ("src", 8)])
    );
}

#[test]
fn an_excluded_member_holds_its_forward_group() {
    // map needs 10, but src is excluded: the group stays at src's parallelism, while the
    // keyed sink (not in the group) still scales.
    let d = run(
        0,
        with(
            base_config(),
            json!({"job.autoscaler.vertex.exclude.ids": "src"}),
        ),
        vec![
            vertex("src", 2, &[], 500.0, 1000.0),
            vertex("map", 2, &[("src", "FORWARD")], 400.0, 1000.0),
            vertex("sink", 2, &[("map", "HASH")], 500.0, 1000.0),
        ],
        json!({}),
    );
    assert_eq!(
        parallelism(&d),
        pairs(&[("map", 2), ("sink", 8), ("src", 2)])
    );
    assert_eq!(v(&d, "map").recommended, 10);
    assert_eq!(v(&d, "map").limited_by, vec![Limit::ForwardGroup]);
}

#[test]
fn a_limited_sink_caps_scale_ups_of_what_flows_only_into_it() {
    // map needs 2 * 1000 / 200 * 2 = 20, but the sink takes at most 500 of its 1000 rec/s.
    let vertices = || {
        vec![
            vertex("src", 4, &[], 2000.0, 1000.0),
            vertex("map", 2, &[("src", "REBALANCE")], 200.0, 1000.0),
            vertex("sink", 2, &[("map", "REBALANCE")], 2000.0, 1000.0),
        ]
    };
    let config = with(
        base_config(),
        json!({"flink-autoscale.sink-limits.max-rates": "sink:500"}),
    );
    let d = run(0, config.clone(), vertices(), json!({}));
    assert_eq!(v(&d, "map").recommended, 20);
    assert_eq!(d.parallelism["map"], 10);
    assert_eq!(v(&d, "map").limited_by, vec![Limit::SinkLimit]);
    assert!(
        v(&d, "map")
            .reason
            .contains("`sink-name` absorbs at most 500 rec/s"),
        "{}",
        v(&d, "map").reason
    );
    let off = run(
        0,
        with(
            config,
            json!({"flink-autoscale.sink-limits.enabled": false}),
        ),
        vertices(),
        json!({}),
    );
    assert_eq!(off.parallelism["map"], 20);
    // A detected limit (as evaluate reports it) works the same way.
    let mut detected = vertices();
    detected[2]["sink_limit_rate"] = json!(500.0);
    let d = run(0, base_config(), detected, json!({}));
    assert_eq!(d.parallelism["map"], 10);
}

#[test]
fn a_sink_whose_last_scale_up_did_not_help_is_limited() {
    let history = json!({"history": {"sink": [
        {"time_ms": 0, "current": 1, "new": 2, "true_processing_rate": 500.0, "expected_processing_rate": 1000.0}]}});
    let vertices = vec![
        vertex("src", 4, &[], 4000.0, 1000.0),
        vertex("sink", 2, &[("src", "REBALANCE")], 500.0, 1000.0),
    ];
    let d = run(60_000, base_config(), vertices, history);
    // The sink's own scale-up (to 8) is capped at what it absorbs now: no change.
    assert_eq!(v(&d, "sink").recommended, 8);
    assert_eq!(d.parallelism["sink"], 2);
    assert!(v(&d, "sink").limited_by.contains(&Limit::SinkLimit));
}

#[test]
fn scale_down_caution_blocks_scale_downs_during_backlog_or_incomplete_windows() {
    // src at 10 needs 4 (a scale-down, outside its band unless there is a backlog).
    let cases = [
        // (backlog, window complete, caution enabled, applied, extra limit)
        (false, true, true, 4, None),
        (true, true, true, 10, Some(Limit::ScaleDownCaution)),
        (false, false, true, 10, Some(Limit::ScaleDownCaution)),
        (false, false, false, 4, None),
        // Without caution, upstream semantics: during a backlog the scale-down threshold is
        // infinite, so the band gate holds a lone scale-down back.
        (true, true, false, 10, Some(Limit::BandGate)),
    ];
    for (backlog, complete, caution, expected, limit) in cases {
        let config = with(
            base_config(),
            json!({"flink-autoscale.scale-down-caution.enabled": caution}),
        );
        let mut i = input(
            0,
            config,
            vec![vertex("src", 10, &[], 1000.0, 100.0)],
            json!({}),
        );
        i.processing_backlog = backlog;
        i.window_complete = complete;
        let d = decide(&i).unwrap();
        let case = format!("backlog={backlog} complete={complete} caution={caution}");
        assert_eq!(d.parallelism["src"], expected, "{case}");
        assert_eq!(v(&d, "src").recommended, 4, "{case}");
        assert_eq!(
            v(&d, "src")
                .limited_by
                .last()
                .copied()
                .filter(|l| *l != Limit::MaxFactor),
            limit,
            "{case}"
        );
    }
}

#[test]
fn invalid_input_is_rejected_naming_the_field() {
    let cases = [
        (
            vec![vertex("a", 1, &[], 1.0, 1.0), vertex("a", 1, &[], 1.0, 1.0)],
            "vertices[1].id",
        ),
        (
            vec![vertex("a", 1, &[("nope", "HASH")], 1.0, 1.0)],
            "vertices[0].inputs[0].id",
        ),
        (
            vec![vertex("a", 0, &[], 1.0, 1.0)],
            "vertices[0].parallelism",
        ),
        (
            vec![
                vertex("a", 1, &[("b", "HASH")], 1.0, 1.0),
                vertex("b", 1, &[("a", "HASH")], 1.0, 1.0),
            ],
            "vertices",
        ),
    ];
    for (vertices, field) in cases {
        match decide(&input(0, base_config(), vertices, json!({}))) {
            Err(EngineError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected an error on {field}, got {other:?}"),
        }
    }
}
