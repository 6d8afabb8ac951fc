//! Flink's metric staleness layers, each switched on alone: the JobManager cache, the
//! TaskManager update interval, moving-average rates and the post-(re)start warm-up.

mod common;

use std::time::Duration;

use common::{agg, chain_toml, Sim};

/// The chain job at 1,000 records/s (map: 2 x 5,000 records/s) with one staleness setting.
async fn stale_sim(setting: &str) -> Sim {
    Sim::from_toml(&chain_toml(
        1000.0,
        5000.0,
        &format!("[staleness]\n{setting}"),
    ))
    .await
}

/// An aggregate of one metric over the map vertex, `None` when the endpoint answers `[]`.
async fn map_metric(sim: &Sim, name: &str, aggregation: &str) -> Option<f64> {
    let path = format!(
        "/jobs/{}/vertices/{}/subtasks/metrics?get={name}",
        sim.job(),
        sim.vertex(1)
    );
    let v = sim.get_ok(&path).await;
    (v != serde_json::json!([])).then(|| agg(&v, name, aggregation))
}

async fn records_in(sim: &Sim) -> Option<f64> {
    map_metric(sim, "numRecordsIn", "sum").await
}

async fn rate_in(sim: &Sim) -> f64 {
    map_metric(sim, "numRecordsInPerSecond", "sum")
        .await
        .expect("rates are reported")
}

#[tokio::test]
async fn jobmanager_cache_serves_the_previous_fetch() {
    let sim = stale_sim("fetcher_interval_ms = 10000").await;
    // The very first request only starts a fetch: nothing is cached yet.
    assert_eq!(records_in(&sim).await, None);
    assert_eq!(records_in(&sim).await, Some(0.0));
    let job = sim.get_ok(&format!("/jobs/{}", sim.job())).await;
    assert_eq!(job["vertices"][1]["metrics"]["read-records"], 0);
    sim.advance_s(20);
    // The request that triggers a refresh still gets the old snapshot; the next one the new.
    assert_eq!(records_in(&sim).await, Some(0.0));
    assert_eq!(records_in(&sim).await, Some(20_000.0));
    sim.advance_s(9);
    assert_eq!(
        records_in(&sim).await,
        Some(20_000.0),
        "cached for the interval"
    );
    let cfg = sim
        .get_ok(&format!("/jobs/{}/jobmanager/config", sim.job()))
        .await;
    let interval = cfg
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "metrics.fetcher.update-interval");
    assert_eq!(interval.unwrap()["value"], "10000");
    sim.stop().await;
}

#[tokio::test]
async fn taskmanager_values_change_every_five_seconds() {
    let sim = stale_sim("tm_update_interval_ms = 5000").await;
    sim.control.advance(Duration::from_millis(12_000));
    assert_eq!(records_in(&sim).await, Some(10_000.0));
    sim.control.advance(Duration::from_millis(2_900));
    assert_eq!(records_in(&sim).await, Some(10_000.0));
    sim.control.advance(Duration::from_millis(100));
    assert_eq!(records_in(&sim).await, Some(15_000.0));
    sim.stop().await;
}

#[tokio::test]
async fn rates_are_sixty_second_moving_averages() {
    let sim = stale_sim("rate_window_ms = 60000").await;
    sim.advance_s(30);
    // After a start the rate ramps: 30 s of 1,000 records/s over a 60 s window.
    assert!((rate_in(&sim).await - 500.0).abs() < 1e-6);
    sim.advance_s(90);
    assert!((rate_in(&sim).await - 1000.0).abs() < 1e-6);
    sim.control.set_rate_multiplier(&sim.job(), 2.0);
    sim.advance_s(30);
    // Half the window at 1,000/s and half at 2,000/s, while the model has moved on.
    assert!((rate_in(&sim).await - 1500.0).abs() < 1e-6);
    assert!((sim.control.model(&sim.job())[1].in_rate - 2000.0).abs() < 1e-6);
    sim.stop().await;
}

#[tokio::test]
async fn busy_reads_1000_and_rates_0_right_after_a_start() {
    let sim = stale_sim("warmup_ms = 10000").await;
    sim.advance_s(5);
    assert_eq!(
        map_metric(&sim, "busyTimeMsPerSecond", "min").await,
        Some(1000.0)
    );
    assert_eq!(rate_in(&sim).await, 0.0);
    sim.advance_s(6);
    assert_eq!(
        map_metric(&sim, "busyTimeMsPerSecond", "max").await,
        Some(100.0)
    );
    assert!((rate_in(&sim).await - 1000.0).abs() < 1e-6);
    // And again after a restart.
    sim.control.restart_job(&sim.job());
    sim.advance_s(3);
    assert_eq!(
        map_metric(&sim, "busyTimeMsPerSecond", "min").await,
        Some(1000.0)
    );
    sim.stop().await;
}

#[tokio::test]
async fn the_flink_preset_switches_everything_on() {
    let text = chain_toml(1.0, 1.0, "[staleness]\npreset = \"flink\"");
    let s = flink_autoscale_simulator::Scenario::from_toml_str(&text)
        .unwrap()
        .staleness();
    let layers = (
        s.tm_update_interval_ms,
        s.rate_window_ms,
        s.fetcher_interval_ms,
        s.warmup_ms,
    );
    assert_eq!(layers, (5000, 60000, 10000, 10000));
}
