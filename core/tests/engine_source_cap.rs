//! Sources never get more subtasks than their partitions or splits (upstream's FLINK-40389),
//! in every alignment mode and through forward-connected groups; vertices whose subtasks all
//! FINISHED are not scaled (upstream's FLINK-32572).

use flink_autoscale_core::engine::{
    decide, evaluate, evaluate_and_decide, DecideInput, Decision, EvaluateInput, Limit,
    VertexDecision,
};
use serde_json::{json, Value};

/// Target 0.5, band 0.4..0.6, no catch-up or restart terms, immediate scale-down and no
/// limit on the scale-down factor: needed capacity = 2 * TDR.
fn config(extra: Value) -> Value {
    let mut c = json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.utilization.target": 0.5,
        "job.autoscaler.target.utilization.boundary": 0.1,
        "job.autoscaler.catch-up.duration": "0s",
        "job.autoscaler.scale-down.interval": "0s",
        "job.autoscaler.scale-down.max-factor": 1.0,
        "flink-autoscale.scale-down-caution.enabled": false
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[allow(clippy::too_many_arguments)]
fn vertex(
    id: &str,
    p: u32,
    max_p: u32,
    partitions: u32,
    inputs: &[(&str, &str)],
    tpr: f64,
    tdr: f64,
) -> Value {
    json!({
        "id": id, "name": format!("{id}-name"), "parallelism": p, "max_parallelism": max_p,
        "source_partitions": partitions,
        "inputs": inputs.iter().map(|(i, s)| json!({"id": i, "ship_strategy": s})).collect::<Vec<_>>(),
        "true_processing_rate": tpr, "target_data_rate": tdr, "catch_up_data_rate": 0.0
    })
}

fn run(config: Value, vertices: Vec<Value>) -> Decision {
    let input: DecideInput =
        serde_json::from_value(json!({ "now_ms": 0, "config": config, "vertices": vertices }))
            .expect("valid test input");
    decide(&input).expect("decision")
}

fn v<'a>(d: &'a Decision, id: &str) -> &'a VertexDecision {
    d.vertices.iter().find(|x| x.id == id).unwrap()
}

#[test]
fn a_source_is_capped_at_its_partitions_in_every_alignment_mode() {
    // FLINK-40389's reproduction: 15 partitions, parallelism 100, max parallelism 180, and
    // raw targets of 180 (scale-up), 50 and 10 (scale-downs): 2 * TDR / TPR * 100.
    let legacy = (
        "job.autoscaler.scaling.key-group.partitions.adjust.mode",
        "EVENLY_SPREAD",
    );
    let mode = "job.autoscaler.scaling.parallelism-alignment.mode";
    // (alignment key and value, TDR for raw 180/50/10, expected)
    let cases = [
        ((mode, "BALANCED"), 900.0, 15, true),
        ((mode, "BALANCED"), 250.0, 15, true),
        ((mode, "BALANCED"), 50.0, 15, false),
        ((mode, "EVENLY_SPREAD"), 900.0, 15, true),
        ((mode, "EVENLY_SPREAD"), 250.0, 15, true),
        ((mode, "EVENLY_SPREAD"), 50.0, 15, false),
        (legacy, 900.0, 15, true),
        (legacy, 250.0, 15, false),
        (legacy, 50.0, 15, false),
        // Without alignment a target under the cap is kept: 10 subtasks can read 15 partitions.
        ((mode, "OFF"), 900.0, 15, true),
        ((mode, "OFF"), 250.0, 15, true),
        ((mode, "OFF"), 50.0, 10, false),
    ];
    for ((key, value), tdr, expected, capped) in cases {
        let d = run(
            config(json!({ key: value })),
            vec![vertex("src", 100, 180, 15, &[], 1000.0, tdr)],
        );
        let src = v(&d, "src");
        let case = format!("{key}={value}, TDR {tdr}: {}", src.reason);
        assert_eq!(src.recommended, expected, "{case}");
        assert_eq!(d.parallelism["src"], expected, "{case}");
        assert!(d.scale, "{case}");
        assert_eq!(
            src.limited_by.contains(&Limit::SourcePartitions),
            capped,
            "{case}"
        );
        if capped {
            assert!(
                src.reason.contains(
                    "`src-name` can use at most 15 subtasks (it reads 15 partitions or splits)"
                ),
                "{case}"
            );
        }
    }
}

#[test]
fn unknown_partitions_or_an_unchanged_source_are_not_capped() {
    // Partitions unknown: upstream's result stands (BALANCED keeps 180).
    let d = run(
        config(json!({})),
        vec![vertex("src", 100, 180, 0, &[], 1000.0, 900.0)],
    );
    assert_eq!(d.parallelism["src"], 180);
    // Above its partitions but within its band: the cap does not force a change.
    let d = run(
        config(json!({})),
        vec![vertex("src", 100, 180, 15, &[], 1000.0, 500.0)],
    );
    assert!(!d.scale);
    assert_eq!(d.parallelism["src"], 100);
    assert!(
        v(&d, "src").limited_by.is_empty(),
        "{}",
        v(&d, "src").reason
    );
}

#[test]
fn a_hot_source_at_its_splits_stays_and_says_why() {
    // Two splits, parallelism 2, the load asks for 4.
    let d = run(
        config(json!({})),
        vec![
            vertex("src", 2, 128, 2, &[], 1000.0, 1000.0),
            vertex("sink", 2, 128, 0, &[("src", "REBALANCE")], 2000.0, 1000.0),
        ],
    );
    let src = v(&d, "src");
    assert_eq!(d.parallelism["src"], 2, "{}", src.reason);
    assert_eq!(src.limited_by, vec![Limit::SourcePartitions]);
    assert!(
        src.reason.contains("can use at most 2 subtasks"),
        "{}",
        src.reason
    );
}

#[test]
fn a_forward_group_is_capped_by_its_source_splits() {
    // The 1.20.5 case: src and map were scaled to 4 in place, but src has 2 splits, so
    // subtasks 2 and 3 of both FINISHED. map is overloaded and asks for 8: the group can use
    // 2 subtasks, so it goes to 2 (subtasks 2 and 3 did no work) and the reason says why.
    let vertices = || {
        vec![
            vertex("src", 4, 128, 2, &[], 4000.0, 1000.0),
            vertex("map", 4, 128, 0, &[("src", "FORWARD")], 1000.0, 1000.0),
            vertex("sink", 2, 128, 0, &[("map", "HASH")], 2000.0, 1000.0),
        ]
    };
    let d = run(
        config(json!({"job.autoscaler.scaling.parallelism-alignment.mode": "OFF"})),
        vertices(),
    );
    let map = v(&d, "map");
    assert_eq!(map.recommended, 8);
    assert_eq!(d.parallelism["map"], 2, "{}", map.reason);
    assert_eq!(d.parallelism["src"], 2);
    assert!(map.limited_by.contains(&Limit::ForwardGroup));
    assert!(
        map.reason
            .contains("forward group: `src-name` can use at most 2 subtasks"),
        "{}",
        map.reason
    );
    // Once at 2, the group stays there however much map asks for.
    let d = run(
        config(json!({"job.autoscaler.scaling.parallelism-alignment.mode": "OFF"})),
        vec![
            vertex("src", 2, 128, 2, &[], 4000.0, 1000.0),
            vertex("map", 2, 128, 0, &[("src", "FORWARD")], 500.0, 1000.0),
            vertex("sink", 2, 128, 0, &[("map", "HASH")], 2000.0, 1000.0),
        ],
    );
    assert!(!d.scale, "{:?}", d.parallelism);
    assert!(v(&d, "map").reason.contains("can use at most 2"));
}

fn evaluate_input(finished: u32) -> EvaluateInput {
    let at = |t: u64, k: f64| {
        json!({"time_ms": t, "vertices": {
            "bounded": {"busy_time_ms_per_second": {"max": 0, "avg": 0, "sum": 0},
                        "num_records_in": 500.0, "num_records_out": 500.0,
                        "num_records_in_per_second": 0, "pending_records": 0,
                        "backpressured_time_ms_per_second": 0},
            "src": {"busy_time_ms_per_second": {"max": 900, "avg": 900, "sum": 1800},
                    "num_records_in": 10000.0 * k, "num_records_out": 10000.0 * k,
                    "num_records_in_per_second": 1000, "pending_records": 0,
                    "backpressured_time_ms_per_second": 0},
            "join": {"busy_time_ms_per_second": {"max": 50, "avg": 50, "sum": 100},
                     "num_records_in": 10000.0 * k, "num_records_in_per_second": 1000}}})
    };
    let spec = |id: &str, p: u32, inputs: Value| json!({"id": id, "name": id, "parallelism": p, "max_parallelism": 128, "inputs": inputs});
    let mut bounded = spec("bounded", 2, json!([]));
    bounded["finished_subtasks"] = json!(finished);
    serde_json::from_value(json!({
        "now_ms": 10_000, "job_running_since_ms": 0,
        "config": config(json!({"job.autoscaler.stabilization.interval": "0s",
                                "job.autoscaler.metrics.window": "10s"})),
        "vertices": [bounded, spec("src", 2, json!([])),
                     spec("join", 2, json!([{"id": "bounded", "ship_strategy": "HASH"},
                                           {"id": "src", "ship_strategy": "HASH"}]))],
        "samples": [at(0, 0.0), at(10_000, 1.0)]
    }))
    .expect("valid test input")
}

#[test]
fn a_finished_vertex_is_excluded_and_feeds_nothing() {
    // A bounded source that FINISHED (its counters frozen, busy 0) next to a live one.
    let out = evaluate_and_decide(&evaluate_input(2)).unwrap();
    assert_eq!(out.evaluated.excluded_vertices, vec!["bounded".to_string()]);
    assert!(out.evaluated.window_complete);
    assert_eq!(out.evaluated.vertices["bounded"].target_data_rate.0, 0.0);
    let bounded = v(&out.decision, "bounded");
    assert_eq!(bounded.limited_by, vec![Limit::Excluded]);
    assert_eq!(out.decision.parallelism["bounded"], 2);
    // The join's target rate is what the live source sends.
    assert_eq!(out.evaluated.vertices["join"].target_data_rate.0, 1000.0);
    // With some of its subtasks still running, the vertex is evaluated as usual.
    let partly = evaluate(&evaluate_input(1)).unwrap();
    assert!(partly.excluded_vertices.is_empty());
}
