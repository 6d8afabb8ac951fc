//! With every extension switched off, `decide` gives upstream's answer, byte for byte: the
//! fixture holds decisions made by the engine as it was before the cost-aware scale-down and
//! prediction existed (commit 18cbfb0), on generated jobs, configurations and states that
//! reach every upstream rule (band gate, delayed scale-down, max factors, bounds, alignment,
//! effectiveness detection, observed scalability, exclusions, disabled scaling). The same
//! inputs must give the same output today, apart from the `prediction` report, which did
//! not exist then.
//!
//! Re-recorded once since (2026-12-06), for an upstream change: operator 1.16 caps a source at
//! its partitions or splits (FLINK-40389). 55 of the 450 decisions changed parallelism: in
//! each, a source is now limited by `source_partitions`, and the other changes are vertices
//! downstream of it or a band gate it no longer passes; 16 more changed only in their reason
//! text, which now names the cap.
//!
//! Regenerate the fixture only from an engine without our extensions' later changes:
//! `PARITY_FIXTURE_WRITE=1 cargo test -p flink-autoscale-core --test engine_upstream_parity`.

use flink_autoscale_core::engine::{decide, DecideInput};
use serde_json::{json, Value};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/upstream_parity.json"
);

/// Our extensions, each switched off (prediction is added below: the old engine did not
/// know the key).
fn extensions_off() -> Value {
    json!({
        "flink-autoscale.forward-groups.enabled": false,
        "flink-autoscale.sink-limits.enabled": false,
        "flink-autoscale.scale-down-caution.enabled": false
    })
}

/// A small deterministic generator (xorshift), so the cases need no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    /// Uniform in `[lo, hi)`, rounded to three decimals so the JSON is short.
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        let x = lo + (hi - lo) * (self.below(1_000_000) as f64 / 1e6);
        (x * 1000.0).round() / 1000.0
    }
}

fn config(rng: &mut Rng, ids: &[String]) -> Value {
    let mut c = extensions_off();
    let mut set = |k: &str, v: Value| c[format!("job.autoscaler.{k}")] = v;
    set("enabled", json!(!rng.chance(5)));
    if rng.chance(5) {
        set("scaling.enabled", json!(false));
    }
    set("utilization.target", json!(rng.range(0.4, 0.85)));
    if rng.chance(40) {
        set("target.utilization.boundary", json!(rng.range(0.05, 0.35)));
    }
    set(
        "scale-down.interval",
        json!(rng.pick(&["0s", "0s", "30min", "1h"])),
    );
    if rng.chance(40) {
        set("scale-down.max-factor", json!(rng.range(0.2, 1.0)));
    }
    if rng.chance(30) {
        set("scale-up.max-factor", json!(rng.range(0.3, 4.0)));
    }
    if rng.chance(25) {
        set("vertex.min-parallelism", json!(1 + rng.below(3)));
    }
    if rng.chance(25) {
        set("vertex.max-parallelism", json!(8 + rng.below(120)));
    }
    set(
        "catch-up.duration",
        json!(rng.pick(&["0s", "5min", "30min"])),
    );
    set("restart.time", json!(rng.pick(&["1min", "5min"])));
    set(
        "scaling.parallelism-alignment.mode",
        json!(rng.pick(&["BALANCED", "EVENLY_SPREAD", "OFF"])),
    );
    if rng.chance(30) {
        set("scaling.effectiveness.detection.enabled", json!(true));
    }
    if rng.chance(30) {
        set("observed-scalability.enabled", json!(true));
        set("observed-scalability.min-observations", json!(2));
    }
    if rng.chance(10) {
        let id = rng.pick(ids).clone();
        set("vertex.exclude.ids", json!(id));
    }
    c
}

fn vertices(rng: &mut Rng) -> Vec<Value> {
    let n = 2 + rng.below(5) as usize;
    (0..n)
        .map(|i| {
            let p = 1 + rng.below(40) as u32;
            let above = p + rng.below(20) as u32;
            let max = *rng.pick(&[p, above, 128, 720, 32768]);
            let inputs: Vec<Value> = if i == 0 || (i < n - 1 && rng.chance(15)) {
                Vec::new()
            } else {
                let mut from = vec![rng.below(i as u64)];
                if rng.chance(25) {
                    from.push(rng.below(i as u64));
                }
                from.sort_unstable();
                from.dedup();
                from.iter()
                    .map(|f| {
                        let ship = *rng.pick(&["HASH", "REBALANCE", "FORWARD"]);
                        json!({"id": format!("v{f}"), "ship_strategy": ship})
                    })
                    .collect()
            };
            let tpr = rng.range(50.0, 50_000.0);
            let tdr = tpr * rng.range(0.02, 1.6);
            let mut v = json!({
                "id": format!("v{i}"), "name": format!("vertex {i}"),
                "parallelism": p, "max_parallelism": max, "inputs": inputs,
                "true_processing_rate": if rng.chance(3) { json!("NaN") } else { json!(tpr) },
                "target_data_rate": (tdr * 1000.0).round() / 1000.0,
                "catch_up_data_rate": if rng.chance(30) { rng.range(0.0, tdr) } else { 0.0 },
            });
            if inputs_empty(&v) && rng.chance(40) {
                v["source_partitions"] = json!(rng.pick(&[7, 24, 32, 100]));
            }
            if i == n - 1 && rng.chance(15) {
                v["sink_limit_rate"] = json!(rng.range(10.0, tdr.max(20.0)));
            }
            v
        })
        .collect()
}

fn inputs_empty(v: &Value) -> bool {
    v["inputs"].as_array().is_some_and(Vec::is_empty)
}

fn state(rng: &mut Rng, vertices: &[Value], now_ms: u64) -> Value {
    let mut history = serde_json::Map::new();
    let mut delayed = serde_json::Map::new();
    for v in vertices {
        let id = v["id"].as_str().unwrap_or_default().to_string();
        let p = v["parallelism"].as_u64().unwrap_or(1);
        if rng.chance(35) {
            let entries: Vec<Value> = (0..1 + rng.below(3))
                .map(|k| {
                    let current = 1 + rng.below(p.max(2));
                    let tpr = rng.range(100.0, 20_000.0);
                    json!({
                        "time_ms": now_ms.saturating_sub((3 - k) * rng.range(600_000.0, 20_000_000.0) as u64),
                        "current": current, "new": p,
                        "true_processing_rate": tpr,
                        "expected_processing_rate": tpr / current as f64 * p as f64,
                    })
                })
                .collect();
            history.insert(id.clone(), json!(entries));
        }
        if rng.chance(25) && p > 1 {
            let first = now_ms.saturating_sub(rng.below(5_400_000));
            let mut level = p;
            let mut recs = Vec::new();
            let mut t = first;
            while level > 1 && recs.len() < 3 {
                level = 1 + rng.below(level - 1);
                recs.push(
                    json!({"time_ms": t, "parallelism": level, "outside_band": rng.chance(50)}),
                );
                t += rng.below(now_ms.saturating_sub(t) / 2 + 1);
            }
            delayed.insert(
                id,
                json!({"first_trigger_ms": first, "recommendations": recs}),
            );
        }
    }
    json!({"history": history, "delayed_scale_down": delayed})
}

/// Cases of three calls each, the state fed forward as a daemon would: every decision's
/// output (without the `prediction` report). `prediction_off` adds that key, which the engine
/// of the fixture did not know.
fn decisions(count: usize, prediction_off: bool) -> Vec<Value> {
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut outputs = Vec::new();
    for _ in 0..count {
        let mut vs = vertices(&mut rng);
        let ids: Vec<String> = vs
            .iter()
            .map(|v| v["id"].as_str().unwrap_or_default().to_string())
            .collect();
        let mut config = config(&mut rng, &ids);
        if prediction_off {
            config["flink-autoscale.prediction.enabled"] = json!(false);
        }
        let mut now_ms = 1_799_020_800_000 + rng.below(86_400_000);
        let mut st = state(&mut rng, &vs, now_ms);
        for _ in 0..3 {
            let input = json!({
                "now_ms": now_ms, "config": config, "vertices": vs, "state": st,
                "processing_backlog": rng.chance(15), "window_complete": !rng.chance(15),
            });
            let parsed: DecideInput = serde_json::from_value(input).expect("valid input");
            let decision = decide(&parsed).expect("decision");
            let mut output = serde_json::to_value(&decision).expect("serializable");
            if let Some(o) = output.as_object_mut() {
                o.remove("prediction");
            }
            st = output["state"].clone();
            for (v, id) in vs.iter_mut().zip(ids.iter()) {
                if let Some(n) = output["parallelism"][id].as_u64() {
                    v["parallelism"] = json!(n);
                }
                let tdr = v["target_data_rate"].as_f64().unwrap_or(1.0);
                let next = tdr * rng.range(0.7, 1.3);
                v["target_data_rate"] = json!((next * 1000.0).round() / 1000.0);
            }
            outputs.push(output);
            now_ms += *rng.pick(&[60_000, 600_000, 3_600_000]);
        }
    }
    outputs
}

/// JSON with object keys sorted, whatever serde_json's map order is.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// FNV-1a, 64 bits: the fixture keeps a fingerprint of each output, not the output.
fn fingerprint(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// What the fixture keeps of one decision: readable figures and the whole output's print.
fn summary(output: &Value) -> Value {
    json!({
        "scale": output["scale"],
        "parallelism": output["parallelism"],
        "fingerprint": fingerprint(&canonical(output)),
    })
}

const CASES: usize = 150;

#[test]
fn with_every_extension_off_decide_gives_the_recorded_upstream_answers() {
    if std::env::var_os("PARITY_FIXTURE_WRITE").is_some() {
        let lines: Vec<String> = decisions(CASES, false)
            .iter()
            .map(|o| canonical(&summary(o)))
            .collect();
        std::fs::write(FIXTURE, lines.join("\n") + "\n").expect("fixture written");
    }
    let text = std::fs::read_to_string(FIXTURE).expect("fixture");
    let expected: Vec<&str> = text.lines().collect();
    let outputs = decisions(CASES, true);
    assert_eq!(outputs.len(), expected.len());
    for (i, (output, line)) in outputs.iter().zip(&expected).enumerate() {
        assert_eq!(
            canonical(&summary(output)),
            *line,
            "decision {} differs from upstream's; it is now {}",
            i + 1,
            canonical(output)
        );
    }
    // The fixture reaches both answers, often.
    let scaled = outputs.iter().filter(|o| o["scale"] == json!(true)).count();
    assert!(
        scaled >= 80 && outputs.len() - scaled >= 80,
        "{} decisions, {scaled} scaled",
        outputs.len()
    );
}
