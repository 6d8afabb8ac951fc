//! The evaluate stage through the public API: window rates, busy-time and observed true
//! processing rates, target data rates through the DAG with edge ratios, catch-up, backlog,
//! thresholds, NaN and infinity, and our sink-limit detection.

use flink_autoscale_core::engine::{
    evaluate, evaluate_and_decide, EngineError, EvaluateInput, Evaluated, EvaluatedVertex,
};
use serde_json::{json, Value};

fn config(extra: Value) -> Value {
    let mut c = json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.utilization.target": 0.5,
        "job.autoscaler.catch-up.duration": "0s",
        "job.autoscaler.stabilization.interval": "0s",
        "job.autoscaler.metrics.window": "10s",
        "job.autoscaler.scale-down.interval": "0s"
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn spec(id: &str, p: u32, inputs: &[(&str, &str)]) -> Value {
    json!({"id": id, "name": id, "parallelism": p, "max_parallelism": 128,
           "inputs": inputs.iter().map(|(i, s)| json!({"id": i, "ship_strategy": s})).collect::<Vec<_>>()})
}

fn input(now_ms: u64, config: Value, vertices: Vec<Value>, samples: Vec<Value>) -> EvaluateInput {
    serde_json::from_value(
        json!({"now_ms": now_ms, "config": config, "job_running_since_ms": 0,
                                  "vertices": vertices, "samples": samples}),
    )
    .expect("valid test input")
}

fn figures<'a>(e: &'a Evaluated, id: &str) -> &'a EvaluatedVertex {
    &e.vertices[id]
}

/// src (p2) -HASH-> map (p4, emits two records per input) -REBALANCE-> sink (p2), 10 s apart:
/// 1000 rec/s into map, 2000 rec/s into the sink.
fn pipeline_samples() -> Vec<Value> {
    let at = |t: u64, k: f64| {
        json!({"time_ms": t, "vertices": {
            "src": {"busy_time_ms_per_second": {"max": 500, "min": 100, "avg": 300},
                    "num_records_in": 10000.0 * k, "num_records_out": 10000.0 * k,
                    "num_records_in_per_second": 1000, "pending_records": 0,
                    "backpressured_time_ms_per_second": 0},
            "map": {"busy_time_ms_per_second": {"max": 900}, "num_records_in": 10000.0 * k,
                    "num_records_out": 20000.0 * k, "num_records_in_per_second": 1000},
            "sink": {"busy_time_ms_per_second": {"max": 250}, "num_records_in": 20000.0 * k,
                     "num_records_in_per_second": 2000}}})
    };
    vec![at(0, 0.0), at(5_000, 0.5), at(10_000, 1.0)]
}

fn pipeline() -> Vec<Value> {
    vec![
        spec("src", 2, &[]),
        spec("map", 4, &[("src", "HASH")]),
        spec("sink", 2, &[("map", "REBALANCE")]),
    ]
}

#[test]
fn figures_of_a_simple_pipeline() {
    let e = evaluate(&input(
        10_000,
        config(json!({})),
        pipeline(),
        pipeline_samples(),
    ))
    .unwrap();
    assert!(!e.processing_backlog);
    assert!(e.window_complete);
    // (id, load, TPR, TDR, scale-up threshold, scale-down threshold)
    let expected = [
        ("src", 0.5, 2000.0, 1000.0, 1250.0, 5000.0),
        ("map", 0.9, 1111.111, 1000.0, 1250.0, 5000.0),
        ("sink", 0.25, 8000.0, 2000.0, 2500.0, 10000.0),
    ];
    for (id, load, tpr, tdr, up, down) in expected {
        let f = figures(&e, id);
        assert_eq!(f.load.0, load, "{id} load");
        assert_eq!(f.true_processing_rate.0, tpr, "{id} TPR");
        assert_eq!(f.target_data_rate.0, tdr, "{id} TDR");
        assert_eq!(f.catch_up_data_rate.0, 0.0, "{id} catch-up");
        assert_eq!(
            (f.scale_up_rate_threshold.0, f.scale_down_rate_threshold.0),
            (up, down),
            "{id} band"
        );
    }
}

#[test]
fn busy_time_aggregator_selects_the_subtask_aggregate() {
    // MIN: src load 0.1 -> TPR 1000 / 0.1; AVG: accumulated busy time rate / parallelism.
    let min = evaluate(&input(
        10_000,
        config(json!({"job.autoscaler.metrics.busy-time.aggregator": "MIN"})),
        pipeline(),
        pipeline_samples(),
    ))
    .unwrap();
    assert_eq!(figures(&min, "src").true_processing_rate.0, 10000.0);
    let samples = vec![
        json!({"time_ms": 0, "vertices": {"src": {"num_records_in": 0, "accumulated_busy_time_ms": 0, "busy_time_ms_per_second": {"avg": 1}}}}),
        json!({"time_ms": 10_000, "vertices": {"src": {"num_records_in": 5000, "accumulated_busy_time_ms": 8000, "busy_time_ms_per_second": {"avg": 1}}}}),
    ];
    let avg = evaluate(&input(
        10_000,
        config(json!({"job.autoscaler.metrics.busy-time.aggregator": "AVG"})),
        vec![spec("src", 2, &[])],
        samples,
    ))
    .unwrap();
    // 800 ms/s over 2 subtasks = 400 ms/s busy: TPR = 500 / 0.4.
    assert_eq!(figures(&avg, "src").load.0, 0.4);
    assert_eq!(figures(&avg, "src").true_processing_rate.0, 1250.0);
}

#[test]
fn true_processing_rate_is_rounded_half_up_to_three_decimals() {
    let samples = vec![
        json!({"time_ms": 0, "vertices": {"src": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 850}}}}),
        json!({"time_ms": 1_000, "vertices": {"src": {"num_records_in": 500, "busy_time_ms_per_second": {"max": 850}}}}),
    ];
    let e = evaluate(&input(
        1_000,
        config(json!({})),
        vec![spec("src", 1, &[])],
        samples,
    ))
    .unwrap();
    assert_eq!(figures(&e, "src").true_processing_rate.0, 588.235);
}

/// Edge ratios for a join `j` of `a` and `b` (reference 4.2).
#[test]
fn edge_ratios_use_the_consumers_own_counters() {
    let sample = |t: u64, k: f64, b_out_extra: bool| {
        let mut v = json!({"time_ms": t, "vertices": {
            "a": {"num_records_in": 1000.0 * k, "num_records_out": 1000.0 * k, "busy_time_ms_per_second": {"max": 100}},
            "b": {"num_records_in": 3000.0 * k, "num_records_out": 3000.0 * k, "busy_time_ms_per_second": {"max": 100}},
            "j": {"num_records_in": 4000.0 * k, "num_records_out": 0, "busy_time_ms_per_second": {"max": 100}}}});
        if b_out_extra {
            // b also feeds `other`, so its output is no longer j's input from b.
            v["vertices"]["b"]["num_records_out"] = json!(6000.0 * k);
            v["vertices"]["other"] =
                json!({"num_records_in": 3000.0 * k, "busy_time_ms_per_second": {"max": 100}});
        }
        v
    };
    // Case 2: every other input of j has one output: e(a->j) = in(j) - out(b) = 400 - 300.
    let vertices = vec![
        spec("a", 1, &[]),
        spec("b", 1, &[]),
        spec("j", 1, &[("a", "HASH"), ("b", "HASH")]),
    ];
    let e = evaluate(&input(
        10_000,
        config(json!({})),
        vertices.clone(),
        vec![sample(0, 0.0, false), sample(10_000, 1.0, false)],
    ))
    .unwrap();
    assert_eq!(figures(&e, "a").target_data_rate.0, 100.0);
    assert_eq!(figures(&e, "b").target_data_rate.0, 300.0);
    assert_eq!(figures(&e, "j").target_data_rate.0, 400.0);
    // Case 3: b also feeds `other`. For a -> j the other input b has two outputs, so the
    // edge rate falls back to out(a) = 100; for b -> j the other input a has one output, so
    // it is in(j) - out(a) = 300.
    let mut vertices = vertices;
    vertices.push(spec("other", 1, &[("b", "REBALANCE")]));
    let e = evaluate(&input(
        10_000,
        config(json!({})),
        vertices,
        vec![sample(0, 0.0, true), sample(10_000, 1.0, true)],
    ))
    .unwrap();
    assert_eq!(figures(&e, "j").target_data_rate.0, 400.0);
    // b -> other: one input, in(other) / in(b) = 1.
    assert_eq!(figures(&e, "other").target_data_rate.0, 300.0);
}

#[test]
fn zero_input_gives_zero_ratio_and_infinite_processing_rate() {
    let samples = vec![
        json!({"time_ms": 0, "vertices": {"src": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 0}},
                                          "map": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 0}}}}),
        json!({"time_ms": 1_000, "vertices": {"src": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 0}},
                                              "map": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 0}}}}),
    ];
    let e = evaluate(&input(
        1_000,
        config(json!({})),
        vec![spec("src", 1, &[]), spec("map", 1, &[("src", "HASH")])],
        samples,
    ))
    .unwrap();
    for id in ["src", "map"] {
        assert_eq!(
            figures(&e, id).true_processing_rate.0,
            f64::INFINITY,
            "{id}"
        );
        assert_eq!(figures(&e, id).target_data_rate.0, 0.0, "{id}");
    }
    let text = serde_json::to_string(&e).unwrap();
    assert!(
        text.contains(r#""true_processing_rate":"Infinity""#),
        "{text}"
    );
}

#[test]
fn lag_drives_target_rate_catch_up_and_backlog() {
    // 1000 rec/s in, lag grows by 200 rec/s to 180000: TDR 1200; catch-up over 60 s: 3000;
    // 180000 / 1000 = 180 s of lag, below the default 5 min backlog threshold.
    let samples = |lag_end: f64| {
        vec![
            json!({"time_ms": 0, "vertices": {"src": {"num_records_in": 0, "pending_records": lag_end - 2000.0, "busy_time_ms_per_second": {"max": 500}}}}),
            json!({"time_ms": 10_000, "vertices": {"src": {"num_records_in": 10000, "pending_records": lag_end, "busy_time_ms_per_second": {"max": 500}}}}),
        ]
    };
    let cfg = config(
        json!({"job.autoscaler.catch-up.duration": "1 min", "job.autoscaler.restart.time": "30s"}),
    );
    let e = evaluate(&input(
        10_000,
        cfg.clone(),
        vec![spec("src", 1, &[])],
        samples(180_000.0),
    ))
    .unwrap();
    let f = figures(&e, "src");
    assert_eq!(
        (f.target_data_rate.0, f.catch_up_data_rate.0, f.lag.0),
        (1200.0, 3000.0, 180_000.0)
    );
    assert!(!e.processing_backlog);
    // up = round(3000 + 1200 / 0.8); down = round(3000 + 1200 * 30 / 60 + 1200 / 0.2).
    assert_eq!(
        (f.scale_up_rate_threshold.0, f.scale_down_rate_threshold.0),
        (4500.0, 9600.0)
    );
    // 400 s of lag: backlog, so the band becomes [1.0, 0.0] and nothing is over-provisioned.
    let e = evaluate(&input(
        10_000,
        cfg,
        vec![spec("src", 1, &[])],
        samples(400_000.0),
    ))
    .unwrap();
    assert!(e.processing_backlog);
    let f = figures(&e, "src");
    // up = round(6666.667 + 1200 / 1.0)
    assert_eq!(f.scale_up_rate_threshold.0, 7867.0);
    assert_eq!(f.scale_down_rate_threshold.0, f64::INFINITY);
}

#[test]
fn observed_true_processing_rate_replaces_an_inflated_busy_time_rate() {
    // The source is catching up (lag >= 30 s of input) at 1000 rec/s while backpressured half
    // the time: observed TPR 2000. Its busy time of 100 ms/s would claim 10000.
    let sample = |t: u64, k: f64| {
        json!({"time_ms": t, "vertices": {"src": {"num_records_in": 10000.0 * k, "pending_records": 100000,
            "num_records_in_per_second": 1000, "backpressured_time_ms_per_second": 500,
            "busy_time_ms_per_second": {"max": 100}}}})
    };
    let e = evaluate(&input(
        10_000,
        config(json!({})),
        vec![spec("src", 1, &[])],
        vec![sample(0, 0.0), sample(10_000, 1.0)],
    ))
    .unwrap();
    assert_eq!(figures(&e, "src").true_processing_rate.0, 2000.0);
    // With min-observations 3, two observations give no observed average, so the busy-time
    // rate stays.
    let cfg = config(json!({"job.autoscaler.observed-true-processing-rate.min-observations": 3}));
    let e = evaluate(&input(
        10_000,
        cfg,
        vec![spec("src", 1, &[])],
        vec![sample(0, 0.0), sample(10_000, 1.0)],
    ))
    .unwrap();
    assert_eq!(figures(&e, "src").true_processing_rate.0, 10000.0);
}

#[test]
fn observed_rate_falls_back_to_earlier_observations_once_caught_up() {
    // Two catching-up samples observe 2000 and 3000 rec/s; the third has no lag, so its
    // observation is the average of the earlier ones (2500). Window average: 2500.
    let sample = |t: u64, records: f64, per_second: f64, lag: f64| {
        json!({"time_ms": t, "vertices": {"src": {"num_records_in": records, "pending_records": lag,
            "num_records_in_per_second": per_second, "backpressured_time_ms_per_second": 0,
            "busy_time_ms_per_second": {"max": 100}}}})
    };
    let samples = vec![
        sample(0, 0.0, 2000.0, 100_000.0),
        sample(10_000, 20_000.0, 3000.0, 100_000.0),
        sample(20_000, 40_000.0, 1000.0, 0.0),
    ];
    let e = evaluate(&input(
        20_000,
        config(json!({})),
        vec![spec("src", 1, &[])],
        samples,
    ))
    .unwrap();
    // The busy-time rate would be 2000 / 0.1 = 20000; the observed 2500 wins.
    assert_eq!(figures(&e, "src").true_processing_rate.0, 2500.0);
}

#[test]
fn missing_metrics_follow_upstream() {
    // Without a source input counter the target data rate is NaN and evaluation fails.
    let samples = vec![
        json!({"time_ms": 0, "vertices": {"src": {"busy_time_ms_per_second": {"max": 100}}}}),
        json!({"time_ms": 1_000, "vertices": {"src": {"busy_time_ms_per_second": {"max": 100}}}}),
    ];
    let err = evaluate(&input(
        1_000,
        config(json!({})),
        vec![spec("src", 1, &[])],
        samples,
    ))
    .unwrap_err();
    assert_eq!(
        err,
        EngineError::NoTargetDataRate {
            vertex: "src".into()
        }
    );
    assert!(err.to_string().contains("num_records_in"));
    // Busy time as "NaN" in the newest sample: the vertex is excluded this cycle and the
    // window is not complete.
    let samples = vec![
        json!({"time_ms": 0, "vertices": {"src": {"num_records_in": 0, "busy_time_ms_per_second": {"max": 100}}}}),
        json!({"time_ms": 1_000, "vertices": {"src": {"num_records_in": 100, "busy_time_ms_per_second": {"max": "NaN"}}}}),
    ];
    let i = input(
        1_000,
        config(json!({"job.autoscaler.metrics.window": "0s"})),
        vec![spec("src", 1, &[])],
        samples,
    );
    let out = evaluate_and_decide(&i).unwrap();
    assert_eq!(out.evaluated.excluded_vertices, vec!["src".to_owned()]);
    assert!(!out.evaluated.window_complete);
    assert_eq!(
        out.evaluated.vertices["src"].load.0, 0.1,
        "the mean skips NaN"
    );
    assert!(out.decision.vertices[0]
        .limited_by
        .contains(&flink_autoscale_core::engine::Limit::Excluded));
}

#[test]
fn window_validation_and_timing() {
    let s = |t: u64| json!({"time_ms": t, "vertices": {"src": {"num_records_in": t, "busy_time_ms_per_second": {"max": 100}}}});
    let cases = [
        (vec![s(0), s(0)], 1_000, "samples[1].time_ms"),
        (vec![s(2_000), s(1_000)], 3_000, "samples[1].time_ms"),
        (vec![s(0), s(5_000)], 1_000, "samples[1].time_ms"),
        (vec![s(0)], 1_000, "samples"),
        (
            vec![s(0), json!({"time_ms": 1_000, "vertices": {"ghost": {}}})],
            1_000,
            "samples[1].vertices.ghost",
        ),
    ];
    for (samples, now, field) in cases {
        match evaluate(&input(
            now,
            config(json!({})),
            vec![spec("src", 1, &[])],
            samples,
        )) {
            Err(EngineError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected an error on {field}, got {other:?}"),
        }
    }
    // Samples before the job's last start belong to an earlier run and are ignored.
    let mut i = input(
        10_000,
        config(json!({})),
        vec![spec("src", 1, &[])],
        vec![s(0), s(6_000), s(10_000)],
    );
    i.job_running_since_ms = 5_000;
    let e = evaluate(&i).unwrap();
    assert_eq!(e.vertices["src"].target_data_rate.0, 1000.0);
    // The window is full only once metrics.window has passed since the first sample after
    // the stabilization interval.
    let full = |now: u64, stabilization: &str| {
        let cfg = config(
            json!({"job.autoscaler.stabilization.interval": stabilization, "job.autoscaler.metrics.window": "10s"}),
        );
        evaluate(&input(
            now,
            cfg,
            vec![spec("src", 1, &[])],
            vec![s(0), s(4_000), s(now)],
        ))
        .unwrap()
        .window_complete
    };
    assert!(full(10_000, "0s"));
    assert!(!full(9_999, "0s"));
    assert!(
        !full(10_000, "1s"),
        "the first stable sample is at 4 s, so the window fills at 14 s"
    );
    assert!(full(14_000, "1s"));
}

#[test]
fn a_sink_with_backpressured_upstream_and_little_busy_time_is_detected_as_limited() {
    let sample = |t: u64, k: f64, bp: f64| {
        json!({"time_ms": t, "vertices": {
            "src": {"num_records_in": 1000.0 * k, "num_records_out": 1000.0 * k, "busy_time_ms_per_second": {"max": 200},
                    "backpressured_time_ms_per_second": bp},
            "sink": {"num_records_in": 1000.0 * k, "busy_time_ms_per_second": {"max": 100}}}})
    };
    let vertices = vec![
        spec("src", 1, &[]),
        spec("sink", 1, &[("src", "REBALANCE")]),
    ];
    let e = evaluate(&input(
        10_000,
        config(json!({})),
        vertices.clone(),
        vec![sample(0, 0.0, 800.0), sample(10_000, 10.0, 800.0)],
    ))
    .unwrap();
    assert_eq!(
        figures(&e, "sink").sink_limit_rate.map(|r| r.0),
        Some(1000.0)
    );
    assert_eq!(figures(&e, "src").sink_limit_rate, None);
    let calm = evaluate(&input(
        10_000,
        config(json!({})),
        vertices.clone(),
        vec![sample(0, 0.0, 100.0), sample(10_000, 10.0, 100.0)],
    ))
    .unwrap();
    assert_eq!(figures(&calm, "sink").sink_limit_rate, None);
    let off = config(json!({"flink-autoscale.sink-limits.detection.enabled": false}));
    let e = evaluate(&input(
        10_000,
        off,
        vertices,
        vec![sample(0, 0.0, 800.0), sample(10_000, 10.0, 800.0)],
    ))
    .unwrap();
    assert_eq!(figures(&e, "sink").sink_limit_rate, None);
}

#[test]
fn evaluate_and_decide_runs_both_stages() {
    let out = evaluate_and_decide(&input(
        10_000,
        config(json!({})),
        pipeline(),
        pipeline_samples(),
    ))
    .unwrap();
    // map: TPR 1111.111 below its scale-up threshold 1250; needs 2 * 1000 / 1111.111 * 4 =
    // 7.2 -> 8, a divisor of its 128 key groups.
    assert!(out.decision.scale);
    assert_eq!(out.decision.parallelism["map"], 8);
    let text = serde_json::to_value(&out).unwrap();
    assert!(text["evaluated"]["vertices"]["src"]["true_processing_rate"].is_number());
    assert!(text["decision"]["vertices"].is_array());
}
