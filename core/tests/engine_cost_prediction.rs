//! Our two decision extensions through the public API: the cost-aware scale-down (a
//! scale-down on its own waits until it saves more than the restart costs, at most
//! `max-hold` without a forecast) and predictive scaling (scale up ahead of a confident
//! forecast, never scale down below what the horizon needs, reactive above the forecast).

use flink_autoscale_core::engine::{
    decide, DecideInput, Decision, Limit, PredictionStatus, VertexDecision,
};
use serde_json::{json, Value};

const MIN: u64 = 60_000;

fn with(mut config: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    config
}

fn run(now_ms: u64, config: Value, vertices: &[Value], extra: Value) -> Decision {
    let mut input = json!({ "now_ms": now_ms, "config": config, "vertices": vertices });
    for (k, v) in extra.as_object().unwrap() {
        input[k] = v.clone();
    }
    let input: DecideInput = serde_json::from_value(input).expect("valid test input");
    decide(&input).expect("decision")
}

/// The decision on vertex `id`.
fn decided<'a>(d: &'a Decision, id: &str) -> &'a VertexDecision {
    d.vertices
        .iter()
        .find(|v| v.id == id)
        .expect("vertex in the decision")
}

fn vertex(id: &str, p: u32, input: Option<&str>, tpr: f64, tdr: f64) -> Value {
    json!({
        "id": id, "name": id, "parallelism": p, "max_parallelism": 128,
        "inputs": input.map(|i| vec![json!({"id": i, "ship_strategy": "HASH"})]).unwrap_or_default(),
        "true_processing_rate": tpr, "target_data_rate": tdr, "catch_up_data_rate": 0.0
    })
}

/// The job: five vertices at parallelism 10 under steady load, four near the target
/// (upstream keeps them at 10), one at a quarter of its capacity (upstream recommends
/// 10 -> 4: 6 of 50 subtasks).
fn five_vertices() -> Vec<Value> {
    let mut vs = vec![vertex("v0", 10, None, 10_000.0, 6_000.0)];
    for i in 1..5 {
        let tdr = if i == 3 { 2_500.0 } else { 6_000.0 };
        vs.push(vertex(
            &format!("v{i}"),
            10,
            Some(&format!("v{}", i - 1)),
            10_000.0,
            tdr,
        ));
    }
    vs
}

fn steady_config() -> Value {
    json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.scale-down.interval": "0s",
        "job.autoscaler.scaling.parallelism-alignment.mode": "OFF"
    })
}

#[test]
fn a_steadily_over_provisioned_vertex_scales_down_once_the_saving_pays_for_the_restart() {
    let vs = five_vertices();
    let mut state = json!({});
    let mut applied_at = None;
    for minute in (0..=60).step_by(6) {
        let d = run(
            minute * MIN,
            steady_config(),
            &vs,
            json!({ "state": state }),
        );
        let v3 = decided(&d, "v3");
        assert_eq!(v3.recommended, 4, "upstream's recommendation stays");
        if d.scale {
            assert_eq!(d.parallelism["v3"], 4);
            assert!(
                v3.reason
                    .contains("scale-down applied: freeing 6 of 50 subtasks"),
                "{}",
                v3.reason
            );
            applied_at = Some(minute);
            break;
        }
        assert_eq!(v3.limited_by, vec![Limit::ScaleDownCost], "{}", v3.reason);
        assert!(
            v3.reason.contains("saves") && v3.reason.contains("less than the rescale's 4.17"),
            "{}",
            v3.reason
        );
        state = serde_json::to_value(&d.state).unwrap();
        assert_eq!(state["scale_down_held_since_ms"], 0);
    }
    // restart.time 5 min x 50 subtasks = 6 subtasks x 2,500 s: applied at the 42nd minute.
    assert_eq!(applied_at, Some(42));
}

#[test]
fn without_a_forecast_a_held_scale_down_is_applied_after_max_hold() {
    let vs = five_vertices();
    // A job whose rescales take three hours never pays for freeing 6 of 50 subtasks ...
    let slow = json!({"restart_ms": 3 * 3_600_000, "catch_up_ms": 0});
    let held = run(
        359 * MIN,
        steady_config(),
        &vs,
        json!({"observed_rescale": slow, "state": {"scale_down_held_since_ms": 0}}),
    );
    assert!(!held.scale);
    // ... but after max-hold (6 h) the scale-down goes through.
    let d = run(
        360 * MIN,
        steady_config(),
        &vs,
        json!({"observed_rescale": slow, "state": {"scale_down_held_since_ms": 0}}),
    );
    assert!(d.scale);
    let v3 = decided(&d, "v3");
    assert!(v3.reason.contains("max-hold (6.0 h)"), "{}", v3.reason);
    // A shorter max-hold releases it sooner.
    let short = with(
        steady_config(),
        json!({"flink-autoscale.scale-down-caution.max-hold": "1h"}),
    );
    let d = run(
        60 * MIN,
        short,
        &vs,
        json!({"observed_rescale": slow, "state": {"scale_down_held_since_ms": 0}}),
    );
    assert!(d.scale);
}

#[test]
fn with_scale_down_caution_off_the_scale_down_is_immediate_as_upstream() {
    let config = with(
        steady_config(),
        json!({"flink-autoscale.scale-down-caution.enabled": false}),
    );
    let d = run(0, config, &five_vertices(), json!({}));
    assert!(d.scale);
    assert_eq!(d.parallelism["v3"], 4);
    assert_eq!(d.prediction.status, PredictionStatus::NoForecast);
}

#[test]
fn the_replaced_min_saving_key_is_an_error_that_says_so() {
    let config = with(
        steady_config(),
        json!({"flink-autoscale.scale-down-caution.min-saving": 0.4}),
    );
    let input = json!({"now_ms": 0, "config": config, "vertices": five_vertices()});
    let e = serde_json::from_value::<DecideInput>(input)
        .unwrap_err()
        .to_string();
    assert!(e.contains("replaced by the cost-aware scale-down"), "{e}");
}

/// Target 0.5, band 0.2..0.8, no catch-up (so no restart term), immediate scale-down, no
/// alignment: a vertex needs `ceil(2 * TDR / TPR * p)`.
fn prediction_config() -> Value {
    json!({
        "job.autoscaler.enabled": true,
        "job.autoscaler.utilization.target": 0.5,
        "job.autoscaler.catch-up.duration": "0s",
        "job.autoscaler.scale-down.interval": "0s",
        "job.autoscaler.scaling.parallelism-alignment.mode": "OFF"
    })
}

/// A source at `src_tdr` and a keyed map at 0.4 of it; each at 40 % of its capacity when
/// the source reads 400 rec/s.
fn two_vertices(src_tdr: f64) -> Vec<Value> {
    vec![
        vertex("src", 2, None, 1000.0, src_tdr),
        vertex("map", 4, Some("src"), 400.0, 0.4 * src_tdr),
    ]
}

fn forecast(rates: &[f64], confident: bool) -> Value {
    json!({"forecast": {"start_ms": 0, "step_ms": 15 * MIN, "sources": {"src": rates},
                         "confident": confident, "detail": "test profile"}})
}

#[test]
fn a_confident_forecast_scales_up_ahead_of_the_rise() {
    // 400 rec/s now, 900 in 15 minutes (map above its band within the lead time of
    // 5 + 5 + 15 min), 1,000 at 01:00.
    let rising = [
        400.0, 900.0, 950.0, 980.0, 1000.0, 990.0, 950.0, 900.0, 850.0, 800.0,
    ];
    let reactive = run(0, prediction_config(), &two_vertices(400.0), json!({}));
    assert!(!reactive.scale, "within its band, reactive scaling waits");
    let d = run(
        0,
        prediction_config(),
        &two_vertices(400.0),
        forecast(&rising, true),
    );
    assert!(d.scale);
    assert_eq!(d.prediction.status, PredictionStatus::Used);
    // Sized for the peak within the 2 h horizon: src 2 * 1000/1000 * 2 = 4, map 2 * 400/400 * 4 = 8.
    assert_eq!((d.parallelism["src"], d.parallelism["map"]), (4, 8));
    let map = decided(&d, "map");
    assert!(
        map.reason
            .contains("predicted peak 1000 rec/s at 01:00 UTC"),
        "{}",
        map.reason
    );
    assert!(map.reason.contains("scaled up ahead"), "{}", map.reason);
    // Not confident: purely reactive, and it says so.
    let d = run(
        0,
        prediction_config(),
        &two_vertices(400.0),
        forecast(&rising, false),
    );
    assert!(!d.scale);
    assert_eq!(d.prediction.status, PredictionStatus::NotConfident);
    assert!(
        d.prediction
            .detail
            .starts_with("purely reactive: test profile"),
        "{}",
        d.prediction.detail
    );
    // Switched off: the same as no forecast.
    let off = with(
        prediction_config(),
        json!({"flink-autoscale.prediction.enabled": false}),
    );
    let d = run(0, off, &two_vertices(400.0), forecast(&rising, true));
    assert!(!d.scale);
    assert_eq!(d.prediction.status, PredictionStatus::Off);
}

#[test]
fn no_scale_down_below_what_the_horizon_needs() {
    // The load dips to 100 rec/s and returns to 400 in an hour.
    let dip = [
        100.0, 100.0, 100.0, 100.0, 400.0, 400.0, 400.0, 400.0, 400.0,
    ];
    let cheap = json!({"restart_ms": 1000, "catch_up_ms": 0});
    let reactive = run(
        0,
        prediction_config(),
        &two_vertices(100.0),
        json!({"observed_rescale": cheap}),
    );
    assert_eq!(
        (reactive.parallelism["src"], reactive.parallelism["map"]),
        (1, 2)
    );
    let mut extra = forecast(&dip, true);
    extra["observed_rescale"] = cheap.clone();
    let d = run(0, prediction_config(), &two_vertices(100.0), extra.clone());
    assert!(!d.scale, "{:?}", d.parallelism);
    let map = decided(&d, "map");
    assert!(map.limited_by.contains(&Limit::Forecast), "{}", map.reason);
    assert!(
        map.reason.contains("the forecast needs 4 within"),
        "{}",
        map.reason
    );
    // With a 30-minute horizon the dip is worth it: it lasts an hour by the forecast.
    let short = with(
        prediction_config(),
        json!({"flink-autoscale.prediction.horizon": "30min"}),
    );
    let d = run(0, short, &two_vertices(100.0), extra);
    assert!(d.scale);
    assert_eq!((d.parallelism["src"], d.parallelism["map"]), (1, 2));
    let map = decided(&d, "map");
    assert!(
        map.reason.contains("until the forecast needs them again"),
        "{}",
        map.reason
    );
}

#[test]
fn load_above_the_forecast_is_handled_reactively_as_without_it() {
    let flat = [400.0; 12];
    let spike = two_vertices(900.0);
    let reactive = run(0, prediction_config(), &spike, json!({}));
    let predicted = run(0, prediction_config(), &spike, forecast(&flat, true));
    assert!(reactive.scale);
    assert_eq!(predicted.parallelism, reactive.parallelism);
}

#[test]
fn a_forecast_never_makes_a_vertex_smaller_than_the_reactive_decision() {
    // Everything within its band. The forecast's rise of `src` passes the band gate, but the
    // in-band scale-down of the other branch (3 would do for `other`), which the gate
    // blocks for the reactive decision, must not ride along.
    let mut vs = two_vertices(400.0);
    vs.push(vertex("other-src", 4, None, 1000.0, 300.0));
    let mut extra = forecast(&[400.0, 900.0, 1000.0, 1000.0], true);
    extra["forecast"]["sources"]["other-src"] = json!([300.0, 300.0, 300.0, 300.0]);
    let reactive = run(0, prediction_config(), &vs, json!({}));
    let predicted = run(0, prediction_config(), &vs, extra);
    assert!(!reactive.scale && predicted.scale);
    assert_eq!(predicted.parallelism["other-src"], 4);
    for (id, p) in &reactive.parallelism {
        assert!(
            predicted.parallelism[id] >= *p,
            "{id}: {} < {p}",
            predicted.parallelism[id]
        );
    }
}

#[test]
fn a_scale_down_follows_the_forecasts_plan_within_its_rescale_budget() {
    // An hour's dip to 100 rec/s, then a rise to 900 that the current 2/4 just covers within
    // its band. With four rescales a day the dip is worth a scale-down and a scale-up; with
    // one, the plan keeps 2/4 and meets the rise with its single rescale.
    let mut rates = vec![100.0; 4];
    rates.extend([900.0; 8]);
    let mut extra = forecast(&rates, true);
    extra["observed_rescale"] = json!({"restart_ms": 1000, "catch_up_ms": 0});
    let config = |budget: u32| {
        with(
            prediction_config(),
            json!({"flink-autoscale.prediction.horizon": "30min",
                   "flink-autoscale.prediction.max-rescales-per-day": budget}),
        )
    };
    let d = run(0, config(4), &two_vertices(100.0), extra.clone());
    assert!(d.scale, "{:?}", d.parallelism);
    assert_eq!(d.parallelism["src"], 1);
    let d = run(0, config(1), &two_vertices(100.0), extra);
    assert!(!d.scale, "{:?}", d.parallelism);
    let src = decided(&d, "src");
    assert!(src.limited_by.contains(&Limit::Forecast), "{}", src.reason);
    assert!(
        src.reason
            .contains("scale-down held: the forecast's plan (at most 1 rescales a day) keeps 2/4 until 00:30 UTC, then 3/5"),
        "{}",
        src.reason
    );
}

#[test]
fn the_rescale_budget_is_checked() {
    let bad = with(
        prediction_config(),
        json!({"flink-autoscale.prediction.max-rescales-per-day": 0}),
    );
    let input = json!({"now_ms": 0, "config": bad, "vertices": two_vertices(100.0)});
    let err = serde_json::from_value::<DecideInput>(input)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("flink-autoscale.prediction.max-rescales-per-day"),
        "{err}"
    );
}

#[test]
fn a_step_much_shallower_than_the_plans_waits_for_the_deeper_one() {
    // The load has fallen to 100 rec/s, but the forecast expects 300 now, still falling (150
    // within the lead time, 100 from 00:45): the horizon keeps `src` at 2 and lets `map` go
    // only from 4 to 3, one of the three subtasks the plan frees. Spending a rescale on it
    // would leave the rest for another; it waits. Without the forecast's 300 the whole step
    // is taken.
    let cheap = json!({"restart_ms": 1000, "catch_up_ms": 0});
    let mut rates = vec![300.0, 150.0, 150.0];
    rates.extend([100.0; 12]);
    let mut extra = forecast(&rates, true);
    extra["observed_rescale"] = cheap.clone();
    let d = run(0, prediction_config(), &two_vertices(100.0), extra);
    assert!(!d.scale, "{:?}", d.parallelism);
    let map = decided(&d, "map");
    assert!(
        map.reason
            .contains("scale-down held: it frees 1 subtasks of the 3"),
        "{}",
        map.reason
    );
    let mut extra = forecast(&[100.0; 15], true);
    extra["observed_rescale"] = cheap;
    let d = run(0, prediction_config(), &two_vertices(100.0), extra);
    assert!(d.scale);
    // `map` only to 2: scale-down.max-factor (0.6) keeps it at 40 % of 4 at least.
    assert_eq!((d.parallelism["src"], d.parallelism["map"]), (1, 2));
}

#[test]
fn a_rise_longer_than_the_horizon_is_met_by_one_scale_up() {
    // 400 rec/s now, 900 in 15 minutes, rising to 2,000 at 04:00, then falling.
    let mut rates = vec![400.0];
    rates.extend((0..16).map(|i| 900.0 + 1100.0 * f64::from(i) / 15.0));
    rates.extend([1500.0; 8]);
    let d = run(
        0,
        prediction_config(),
        &two_vertices(400.0),
        forecast(&rates, true),
    );
    assert!(d.scale);
    // The 2 h horizon alone asks 6/12 (its highest step, 1,413 rec/s, at the target 0.5).
    // Halfway between the target and the band's upper edge (0.65) at the 2,000 rec/s peak:
    // src 2 * 2000/0.65/1000 -> 7, map 4 * 800/0.65/400 -> 13.
    assert_eq!((d.parallelism["src"], d.parallelism["map"]), (7, 13));
    let map = decided(&d, "map");
    assert!(
        map.reason
            .contains("to stay halfway within the band until the predicted rise ends at 04:15 UTC"),
        "{}",
        map.reason
    );
}

#[test]
fn vertices_within_their_band_do_not_hold_a_scale_down_under_a_flat_forecast() {
    // The job under a confident flat forecast: four vertices near the target (the
    // plan, sizing at the band's edge, would free some of theirs too) and one at a quarter of
    // its capacity. Only the one that recommends a scale-down counts: it is applied.
    let cheap = json!({"restart_ms": 1000, "catch_up_ms": 0});
    let mut extra = forecast(&[], true);
    extra["forecast"]["sources"] = json!({ "v0": vec![6000.0; 96] });
    extra["observed_rescale"] = cheap;
    let d = run(0, steady_config(), &five_vertices(), extra);
    assert_eq!(d.prediction.status, PredictionStatus::Used);
    assert!(d.scale, "{}", decided(&d, "v3").reason);
    assert!(d.parallelism["v3"] < 10, "{:?}", d.parallelism);
}
