//! The modeled JobManager CPU in `/_sim/stats` (`jobmanager_cpu_ms` and its parts): a
//! MetricFetcher refresh is charged only when a request finds the store stale, and it costs
//! more the more entries it fetches.

mod common;

use common::Sim;
use flink_autoscale_simulator::CostModel;
use serde_json::Value;

/// A sequence source (one split per subtask, as Flink's), a map and a sink, `p` subtasks each.
fn job(p: u32) -> String {
    format!(
        r#"
[[job]]
name = "wide"
[[job.vertex]]
name = "Source: datagen-source"
parallelism = {p}
max_parallelism = 1024
capacity = 100000
source = {{ splits = {p}, rate = {{ kind = "constant", value = 100 }} }}
[[job.vertex]]
name = "stage-1"
parallelism = {p}
max_parallelism = 1024
capacity = 100000
[[job.vertex]]
name = "discard-sink"
parallelism = {p}
max_parallelism = 1024
capacity = 100000
[[job.edge]]
from = "Source: datagen-source"
to = "stage-1"
ship_strategy = "FORWARD"
[[job.edge]]
from = "stage-1"
to = "discard-sink"
ship_strategy = "FORWARD"
"#
    )
}

const REFRESH_ONLY: &str = "/jobmanager/metrics?get=taskSlotsTotal";

fn ms(stats: &Value, key: &str) -> f64 {
    stats["jobmanager_cpu"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("jobmanager_cpu.{key} in {stats}"))
}

/// One request after `after_s` simulated seconds, alone in the accounting.
async fn cost_of(sim: &Sim, after_s: u64, path: &str) -> Value {
    sim.advance_s(after_s);
    sim.control.reset_stats();
    sim.get_ok(path).await;
    sim.get_ok("/_sim/stats").await
}

#[tokio::test]
async fn a_refresh_is_charged_only_when_the_store_is_stale() {
    let sim = Sim::from_toml(&job(4)).await;
    let values = format!(
        "/jobs/{}/vertices/{}/subtasks/metrics?get=busyTimeMsPerSecond&agg=max",
        sim.job(),
        sim.vertex(1)
    );

    let first = cost_of(&sim, 5, &values).await;
    assert_eq!(first["fetcher_refreshes"], 1, "{first}");
    assert!(ms(&first, "refresh_ms") > 0.0, "{first}");

    // 5 s later the store is fresh: the request's own work only.
    let fresh = cost_of(&sim, 5, &values).await;
    assert_eq!(fresh["fetcher_refreshes"], 0, "{fresh}");
    assert_eq!(ms(&fresh, "refresh_ms"), 0.0, "{fresh}");
    let own = fresh["jobmanager_cpu_ms"].as_f64().expect("a number");
    assert!(own > 0.0, "the request touched entries: {fresh}");
    assert!(
        own < ms(&first, "refresh_ms") / 10.0,
        "a request costs far less than a refresh: {fresh} vs {first}"
    );

    // Past the 10 s interval since the last refresh: stale again.
    let stale = cost_of(&sim, 6, &values).await;
    assert_eq!(stale["fetcher_refreshes"], 1, "{stale}");
    assert_eq!(ms(&stale, "refresh_ms"), ms(&first, "refresh_ms"));

    // The figures are the calibrated model's, in total and per endpoint.
    let counts = sim.control.stats().counts();
    let expected = CostModel::CALIBRATED.cpu(&counts).jobmanager_cpu_ms;
    assert!((stale["jobmanager_cpu_ms"].as_f64().unwrap() - expected).abs() < 1e-9);
    let by = &stale["by_endpoint"]["GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics"];
    assert!(
        (by["jobmanager_cpu_ms"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{by}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn the_modeled_cost_grows_with_the_entries_a_refresh_fetches() {
    let mut last: Option<(u64, f64)> = None;
    for p in [4, 40, 400] {
        let sim = Sim::from_toml(&job(p)).await;
        let stats = cost_of(&sim, 5, REFRESH_ONLY).await;
        let fetched = stats["fetched_entries"].as_u64().expect("a number");
        let cpu = stats["jobmanager_cpu_ms"].as_f64().expect("a number");
        assert_eq!(stats["fetcher_refreshes"], 1, "{stats}");
        if let Some((f0, c0)) = last {
            // 10 times the subtasks; the JobManager's and TaskManagers' own metrics are fixed.
            assert!(fetched > 8 * f0, "{p} subtasks: {fetched} vs {f0}");
            assert!(cpu > 8.0 * c0, "{p} subtasks: {cpu} ms vs {c0} ms");
        }
        last = Some((fetched, cpu));
        sim.stop().await;
    }
}

/// Per subtask, as a real Flink 2.3 subtask of a one-operator vertex holds (75 names in
/// `flink-rest-samples/adaptive-scheduler`), plus a source's 7 watermark metrics per split.
#[tokio::test]
async fn subtasks_hold_as_many_metrics_as_real_ones() {
    let sim = Sim::from_toml(&job(3)).await;
    sim.advance_s(5);
    let (job, source, map) = (sim.job(), sim.vertex(0), sim.vertex(1));
    let count = |v: Value| v.as_array().map_or(0, Vec::len);
    for (vertex, per_subtask) in [(&source, 82), (&map, 75)] {
        for i in 0..3 {
            let names = sim
                .get_ok(&format!(
                    "/jobs/{job}/vertices/{vertex}/subtasks/{i}/metrics"
                ))
                .await;
            assert_eq!(count(names), per_subtask, "{vertex} subtask {i}");
        }
    }
    // A listing of the whole source shows every split's names.
    let all = sim
        .get_ok(&format!("/jobs/{job}/vertices/{source}/subtasks/metrics"))
        .await;
    assert_eq!(count(all), 75 + 3 * 7);
    sim.stop().await;
}
