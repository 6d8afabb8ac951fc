//! Invariants of the decision engine, checked with generated jobs (proptest).

use std::collections::BTreeMap;

use flink_autoscale_core::engine::{decide, DecideInput, Decision};
use proptest::prelude::*;
use serde_json::{json, Value};

fn config(mode: &str, vertex_max: u32, extra: Value) -> Value {
    let mut c = json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.scale-down.interval": "0s",
        "job.autoscaler.scale-down.max-factor": 1.0,
        "job.autoscaler.vertex.max-parallelism": vertex_max,
        "job.autoscaler.scaling.parallelism-alignment.mode": mode
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A source feeding a keyed vertex `map`; `map` is the vertex under test.
#[derive(Debug, Clone)]
struct KeyedJob {
    mode: &'static str,
    vertex_max: u32,
    current: u32,
    key_groups: u32,
    tpr: f64,
    tdr: f64,
    catch_up_duration: &'static str,
}

fn keyed_job() -> impl Strategy<Value = KeyedJob> {
    (
        prop_oneof![Just("BALANCED"), Just("EVENLY_SPREAD"), Just("OFF")],
        1u32..300,
        1u32..200,
        1u32..1000,
        1u32..100_000,
        0u32..200_000,
        prop_oneof![Just("0s"), Just("30 min")],
    )
        .prop_filter_map(
            "current within key groups",
            |(mode, vertex_max, current, key_groups, tpr, tdr, catch_up)| {
                (current <= key_groups).then_some(KeyedJob {
                    mode,
                    vertex_max,
                    current,
                    key_groups,
                    tpr: f64::from(tpr),
                    tdr: f64::from(tdr),
                    catch_up_duration: catch_up,
                })
            },
        )
}

fn run_keyed(job: &KeyedJob, current: u32, tpr: f64, tdr: f64) -> Decision {
    let input: DecideInput = serde_json::from_value(json!({
        "now_ms": 0,
        "config": config(job.mode, job.vertex_max, json!({"job.autoscaler.catch-up.duration": job.catch_up_duration})),
        "vertices": [
            {"id": "src", "parallelism": 1, "max_parallelism": 1, "inputs": [],
             "true_processing_rate": "Infinity", "target_data_rate": 0, "catch_up_data_rate": 0},
            {"id": "map", "parallelism": current, "max_parallelism": job.key_groups,
             "inputs": [{"id": "src", "ship_strategy": "HASH"}],
             "true_processing_rate": tpr, "target_data_rate": tdr, "catch_up_data_rate": 0}
        ]
    }))
    .unwrap();
    decide(&input).unwrap()
}

fn map_of(d: &Decision) -> (u32, u32) {
    let v = d.vertices.iter().find(|v| v.id == "map").unwrap();
    (v.recommended, d.parallelism["map"])
}

/// A random DAG of up to 8 vertices; vertex i takes inputs from earlier vertices.
#[derive(Debug, Clone)]
struct Dag {
    vertices: Vec<Value>,
    forward_edges: Vec<(String, String)>,
}

fn dag() -> impl Strategy<Value = Dag> {
    (2usize..8)
        .prop_flat_map(|n| {
            (
                proptest::collection::vec((1u32..50, 0u32..3, 1u32..100_000, 0u32..100_000), n),
                proptest::collection::vec((0usize..n, 0u8..4), n),
            )
        })
        .prop_map(|(specs, edges)| {
            let mut vertices = Vec::new();
            let mut forward_edges = Vec::new();
            for (i, (p, kg_choice, tpr, tdr)) in specs.iter().enumerate() {
                let key_groups = [64u32, 128, 720][*kg_choice as usize];
                let mut inputs = Vec::new();
                if i > 0 {
                    let (from, strategy) = edges[i];
                    let from = from % i;
                    let strategy = ["FORWARD", "HASH", "REBALANCE", "FORWARD"][strategy as usize];
                    if strategy == "FORWARD" {
                        forward_edges.push((format!("v{from}"), format!("v{i}")));
                    }
                    inputs.push(json!({"id": format!("v{from}"), "ship_strategy": strategy}));
                }
                vertices.push(json!({
                    "id": format!("v{i}"), "parallelism": p, "max_parallelism": key_groups, "inputs": inputs,
                    "true_processing_rate": f64::from(*tpr), "target_data_rate": f64::from(*tdr), "catch_up_data_rate": 0
                }));
            }
            Dag { vertices, forward_edges }
        })
}

fn run_dag(dag: &Dag, vertex_max: u32) -> Decision {
    let input: DecideInput = serde_json::from_value(json!({
        "now_ms": 0, "config": config("BALANCED", vertex_max, json!({})), "vertices": dag.vertices
    }))
    .unwrap();
    decide(&input).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Never above the key groups, nor above `vertex.max-parallelism` unless the vertex
    /// already runs above it.
    #[test]
    fn results_respect_max_parallelism(job in keyed_job()) {
        let d = run_keyed(&job, job.current, job.tpr, job.tdr);
        let (recommended, applied) = map_of(&d);
        for p in [recommended, applied] {
            prop_assert!(p <= job.key_groups, "{job:?}: {p}");
            prop_assert!(p <= job.vertex_max.max(job.current), "{job:?}: {p}");
            prop_assert!(p >= 1);
        }
    }

    /// A job running at the recommended parallelism, at the same load (so its true
    /// processing rate scaled linearly), gets no further change.
    #[test]
    fn no_oscillation_at_the_recommended_parallelism(job in keyed_job()) {
        let first = run_keyed(&job, job.current, job.tpr, job.tdr);
        let (recommended, _) = map_of(&first);
        prop_assume!(recommended != job.current);
        let tpr_there = job.tpr / f64::from(job.current) * f64::from(recommended);
        let second = run_keyed(&job, recommended, tpr_there, job.tdr);
        let (again, applied) = map_of(&second);
        prop_assert_eq!(again, recommended, "{:?}", job);
        prop_assert_eq!(applied, recommended, "{:?}", job);
    }

    /// More load never lowers the recommendation nor the applied parallelism.
    #[test]
    fn monotone_in_load(job in keyed_job(), extra in 0u32..200_000) {
        let low = run_keyed(&job, job.current, job.tpr, job.tdr);
        let high = run_keyed(&job, job.current, job.tpr, job.tdr + f64::from(extra));
        let (low_rec, low_applied) = map_of(&low);
        let (high_rec, high_applied) = map_of(&high);
        prop_assert!(low_rec <= high_rec, "{job:?} +{extra}: {low_rec} > {high_rec}");
        prop_assert!(low_applied <= high_applied, "{job:?} +{extra}: {low_applied} > {high_applied}");
    }

    /// FORWARD-connected vertices come out with one parallelism whenever a scaling applies,
    /// and every vertex respects its bounds.
    #[test]
    fn forward_groups_come_out_equal(dag in dag(), vertex_max in 1u32..300) {
        let d = run_dag(&dag, vertex_max);
        if d.scale {
            for (u, v) in &dag.forward_edges {
                prop_assert_eq!(d.parallelism[u], d.parallelism[v], "{:?}", d.parallelism);
            }
        }
        let specs: BTreeMap<String, (u32, u32)> = dag
            .vertices
            .iter()
            .map(|v| (v["id"].as_str().unwrap().to_owned(),
                      (v["parallelism"].as_u64().unwrap() as u32, v["max_parallelism"].as_u64().unwrap() as u32)))
            .collect();
        for (id, p) in &d.parallelism {
            let (current, key_groups) = specs[id];
            prop_assert!(*p <= key_groups.max(current), "{id}: {p}");
            prop_assert!(*p <= vertex_max.max(current), "{id}: {p}");
        }
    }

    /// Odd numbers (NaN, infinities, negatives, zeros) and every alignment mode never make
    /// the engine panic, and the bounds still hold.
    #[test]
    fn odd_numbers_never_panic(
        mode in prop_oneof![Just("BALANCED"), Just("EVENLY_SPREAD"), Just("OFF")],
        legacy in prop_oneof![Just(None), Just(Some("EVENLY_SPREAD")), Just(Some("MAXIMIZE_UTILISATION"))],
        current in 1u32..100,
        key_groups in 1u32..200,
        partitions in 0u32..50,
        tpr in odd_number(),
        tdr in odd_number(),
        catch_up in odd_number(),
        max_factor in 0.0f64..3.0,
    ) {
        let mut cfg = config(mode, 50, json!({"job.autoscaler.scale-down.max-factor": max_factor}));
        if let Some(legacy) = legacy {
            cfg.as_object_mut().unwrap().remove("job.autoscaler.scaling.parallelism-alignment.mode");
            cfg["job.autoscaler.scaling.key-group.partitions.adjust.mode"] = json!(legacy);
        }
        // NaN and infinities travel as the strings Flink writes.
        let number = |x: f64| match x {
            x if x.is_nan() => json!("NaN"),
            f64::INFINITY => json!("Infinity"),
            f64::NEG_INFINITY => json!("-Infinity"),
            x => json!(x),
        };
        let input: DecideInput = serde_json::from_value(json!({
            "now_ms": 0, "config": cfg,
            "vertices": [{"id": "v", "parallelism": current, "max_parallelism": key_groups,
                          "source_partitions": partitions, "inputs": [],
                          "true_processing_rate": number(tpr), "target_data_rate": number(tdr),
                          "catch_up_data_rate": number(catch_up)}]
        }))
        .unwrap();
        let d = decide(&input).unwrap();
        let p = d.parallelism["v"];
        prop_assert!(p >= 1);
        prop_assert!(p <= key_groups.max(current) && p <= 50u32.max(current), "{p}");
    }
}

fn odd_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-1.0),
        -1.0e6f64..1.0e6,
        0.0f64..1.0e-6,
    ]
}
