//! The MetricFetcher model: which requests refresh the JobManager's metric store, how often,
//! and what a refresh costs (`fetcher_refreshes` and `fetched_entries` in `/_sim/stats`).

mod common;

use common::{chain_toml, Sim};
use flink_autoscale_simulator::Scenario;
use serde_json::Value;

const TEMPLATE_VALUES: &str = "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics";

/// Two copies of the chain job (so a refresh has more than one job to fetch), `extra` first.
fn two_jobs(extra: &str) -> String {
    let one = chain_toml(100.0, 1000.0, extra);
    let other = chain_toml(100.0, 1000.0, "").replace("name = \"chain\"", "name = \"other\"");
    format!("{one}\n{other}")
}

async fn refreshes(sim: &Sim) -> u64 {
    sim.get_ok("/_sim/stats").await["fetcher_refreshes"]
        .as_u64()
        .expect("fetcher_refreshes is a number")
}

/// Entries touched by listing every name of a store (a listing reads every entry once).
async fn listed_entries(sim: &Sim, path: &str) -> u64 {
    let before = sim.control.stats();
    let listing = sim.get_ok(path).await;
    assert!(
        listing.as_array().is_some_and(|a| !a.is_empty()),
        "{path} lists names: {listing}"
    );
    let after = sim.control.stats();
    assert_eq!(
        after.fetcher_refreshes, before.fetcher_refreshes,
        "no refresh inside the interval ({path})"
    );
    after.entries_touched - before.entries_touched
}

#[tokio::test]
async fn a_refresh_fetches_every_metric_of_every_subtask_of_every_job() {
    let sim = Sim::from_toml(&two_jobs("")).await;
    sim.advance_s(30);
    sim.control.reset_stats();

    let (job, source) = (sim.job(), sim.vertex(0));
    sim.get_ok(&format!(
        "/jobs/{job}/vertices/{source}/subtasks/metrics?get=busyTimeMsPerSecond&agg=max"
    ))
    .await;
    let stats = sim.get_ok("/_sim/stats").await;
    assert_eq!(stats["fetcher_refreshes"], 1, "{stats}");
    assert_eq!(
        stats["entries_touched"], 2,
        "the request itself: 2 subtasks x 1 name"
    );
    let fetched = stats["fetched_entries"].as_u64().expect("a number");
    let by = &stats["by_endpoint"][TEMPLATE_VALUES];
    assert_eq!(by["fetcher_refreshes"], 1, "{stats}");
    assert_eq!(by["fetched_entries"], fetched, "{stats}");

    // The same time, so no second refresh: list every store and add up what the listings
    // touched (a whole-vertex listing reads every metric of every subtask once).
    let mut expected = 0;
    for job in sim.control.job_ids() {
        for vertex in sim.control.vertex_ids(&job) {
            expected += listed_entries(
                &sim,
                &format!("/jobs/{job}/vertices/{vertex}/subtasks/metrics"),
            )
            .await;
        }
        expected += listed_entries(&sim, &format!("/jobs/{job}/metrics")).await;
    }
    expected += listed_entries(&sim, "/jobmanager/metrics").await;
    expected += listed_entries(&sim, "/taskmanagers/metrics").await;
    assert_eq!(fetched, expected, "one refresh fetches every store whole");
    assert!(
        fetched > 10 * 2,
        "far more than the request asked for: {fetched}"
    );

    // A job that is restarting has no running subtasks to fetch.
    sim.advance_s(11);
    sim.send("POST", &format!("/_sim/jobs/{job}/restart"), "")
        .await;
    sim.control.reset_stats();
    sim.get_ok("/jobmanager/metrics?get=taskSlotsTotal").await;
    let during_restart = sim.control.stats().fetched_entries;
    assert!(
        during_restart > 0 && during_restart < fetched,
        "{during_restart} vs {fetched}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn refreshes_follow_the_update_interval_strictly() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let path = format!("/jobs/{}", sim.job());
    sim.advance_s(5);
    sim.control.reset_stats();
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 1, "the first request refreshes");
    sim.get_ok(&path).await;
    sim.advance_s(5);
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 1, "within the 10 s default");
    sim.advance_s(5);
    sim.get_ok(&path).await;
    assert_eq!(
        refreshes(&sim).await,
        1,
        "exactly 10 s after the refresh started the store still counts as fresh"
    );
    sim.control.advance(std::time::Duration::from_millis(1));
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 2);
    // Nobody asking: no refresh, however long; then one.
    sim.advance_s(300);
    assert_eq!(refreshes(&sim).await, 2);
    sim.get_ok(&path).await;
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 3);
    sim.stop().await;
}

#[tokio::test]
async fn every_metric_reading_handler_refreshes_and_no_other_does() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let (job, v) = (sim.job(), sim.vertex(1));
    sim.advance_s(5);
    let tm = sim.get_ok("/taskmanagers").await["taskmanagers"][0]["id"]
        .as_str()
        .expect("a TaskManager id")
        .to_owned();
    let unknown = "0".repeat(32);
    let reading = [
        format!("/jobs/{job}"),
        format!("/v1/jobs/{job}"),
        format!("/jobs/{job}/vertices/{v}"),
        format!("/jobs/{job}/vertices/{v}/backpressure"),
        format!("/jobs/{job}/vertices/{v}/metrics"),
        format!("/jobs/{job}/vertices/{v}/subtasks/metrics"),
        format!("/jobs/{job}/vertices/{v}/subtasks/metrics?get=busyTimeMsPerSecond&agg=max"),
        format!("/jobs/{job}/vertices/{v}/subtasks/0/metrics?get=busyTimeMsPerSecond"),
        format!("/jobs/{job}/metrics?get=numRestarts"),
        format!("/jobs/{unknown}/vertices/{v}/subtasks/metrics"),
        "/jobs/metrics?get=numRestarts".to_owned(),
        "/jobmanager/metrics?get=taskSlotsTotal".to_owned(),
        "/taskmanagers/metrics?get=Status.JVM.Memory.Heap.Used".to_owned(),
        format!("/taskmanagers/{tm}/metrics"),
    ];
    let other = [
        "/overview".to_owned(),
        "/config".to_owned(),
        "/jobs".to_owned(),
        "/jobs/overview".to_owned(),
        "/jobmanager/config".to_owned(),
        "/taskmanagers".to_owned(),
        format!("/jobs/{job}/status"),
        format!("/jobs/{job}/plan"),
        format!("/jobs/{job}/checkpoints"),
        format!("/jobs/{job}/jobmanager/config"),
        format!("/jobs/{job}/resource-requirements"),
        // Refused before a handler runs: an unknown job, a bad parameter.
        format!("/jobs/{unknown}"),
        format!("/jobs/{job}/vertices/{v}/subtasks/metrics?get=busyTimeMsPerSecond&agg=median"),
    ];
    for (paths, expected) in [(&reading[..], 1), (&other[..], 0)] {
        for path in paths {
            sim.advance_s(11);
            sim.control.reset_stats();
            let (status, _, body) = sim.request("GET", path, None).await;
            assert!(status < 500, "GET {path}: {status} {body}");
            let stats = sim.get_ok("/_sim/stats").await;
            assert_eq!(
                stats["fetcher_refreshes"], expected,
                "GET {path} ({status}): {stats}"
            );
            if expected == 0 {
                assert_eq!(stats["fetched_entries"], 0, "GET {path}");
            }
        }
    }
    sim.stop().await;
}

#[tokio::test]
async fn the_batch_metric_endpoints_refresh_too() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "[server]\nbatch_metrics = true")).await;
    let (job, a, b) = (sim.job(), sim.vertex(0), sim.vertex(1));
    for path in [
        format!("/jobs/{job}/vertices/subtasks/metrics/names?vertices={a},{b}"),
        format!(
            "/jobs/{job}/vertices/subtasks/metrics/values?vertices={a},{b}&get=busyTimeMsPerSecond&agg=max"
        ),
    ] {
        sim.advance_s(11);
        sim.control.reset_stats();
        sim.get_ok(&path).await;
        assert_eq!(refreshes(&sim).await, 1, "GET {path}");
    }
    sim.stop().await;
}

#[tokio::test]
async fn the_update_interval_is_a_scenario_setting_with_flinks_default() {
    let config_interval = |config: &Value| {
        config
            .as_array()
            .and_then(|entries| {
                entries
                    .iter()
                    .find(|e| e["key"] == "metrics.fetcher.update-interval")
            })
            .and_then(|e| e["value"].as_str())
            .map(str::to_owned)
    };
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    assert_eq!(
        config_interval(&sim.get_ok("/jobmanager/config").await).as_deref(),
        Some("10000")
    );
    sim.stop().await;

    let sim = Sim::from_toml(&chain_toml(
        100.0,
        1000.0,
        "[cluster]\nfetcher_update_interval_ms = 30000",
    ))
    .await;
    assert_eq!(
        config_interval(&sim.get_ok("/jobmanager/config").await).as_deref(),
        Some("30000")
    );
    let path = format!("/jobs/{}/metrics?get=numRestarts", sim.job());
    sim.advance_s(5);
    sim.control.reset_stats();
    sim.get_ok(&path).await;
    sim.advance_s(20);
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 1, "20 s < 30 s");
    sim.advance_s(11);
    sim.get_ok(&path).await;
    assert_eq!(refreshes(&sim).await, 2);
    sim.stop().await;

    // The value-staleness layer's interval is the same Flink setting.
    let sim = Sim::from_toml(&chain_toml(
        100.0,
        1000.0,
        "[staleness]\nfetcher_interval_ms = 5000",
    ))
    .await;
    assert_eq!(
        config_interval(&sim.get_ok("/jobmanager/config").await).as_deref(),
        Some("5000")
    );
    sim.stop().await;

    for (extra, message) in [
        (
            "[cluster]\nfetcher_update_interval_ms = 0",
            "cluster.fetcher_update_interval_ms",
        ),
        (
            "[cluster]\nfetcher_update_interval_ms = 10000\n[staleness]\nfetcher_interval_ms = 5000",
            "one Flink setting",
        ),
    ] {
        let err = Scenario::from_toml_str(&chain_toml(100.0, 1000.0, extra))
            .expect_err("refused")
            .to_string();
        assert!(err.contains(message), "{err}");
    }
}
