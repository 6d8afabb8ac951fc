//! Name resolution against the simulated JobManager over loopback: names are listed once per
//! incarnation and vertex, each later poll is one filtered request per vertex, and restarts
//! and rescales invalidate the cache. Long `get` lists are split under the request-line limit.

mod collector_support;

use std::time::Duration;

use bytes::Bytes;
use collector_support::*;
use flink_autoscale_agent::collector::{JobCollector, Unusable};
use flink_autoscale_core::samples::Sample;

const VERTICES: u64 = 3;
const SLOW_READS: u64 = 2;
/// The one probe of the batch metric endpoints per JobManager (404 here: per vertex).
const PROBE: u64 = 1;

fn rate_in(sample: &Sample, vertex: &str) -> f64 {
    sample.vertices[vertex]
        .num_records_in_per_second
        .expect("records-in rate")
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_listed_once_then_one_request_per_vertex() {
    let (sim, ctl, job, client, mut collector) = setup(&job_toml("orders", 4, 4, 2000.0)).await;

    let overview = overview_of(&client, &job).await;
    ctl.reset_stats();
    let first = collector.poll(&client, &overview, 100_000).await.unwrap();
    assert_eq!(
        first.requests,
        1 + PROBE + VERTICES + VERTICES + SLOW_READS,
        "details, the probe, listings, values, slow reads"
    );
    assert_eq!(
        ctl.stats().requests,
        first.requests,
        "the JobManager saw exactly what the agent counted"
    );
    assert_eq!(first.unusable, None);
    let snap = collector.snapshot();
    assert_eq!(
        snap.topology
            .iter()
            .map(|v| v.parallelism)
            .collect::<Vec<_>>(),
        vec![4, 4, 2]
    );
    let source = &snap.topology[0];
    assert!(source.is_source());
    assert_eq!(source.source_partitions, 8);
    assert_eq!(snap.topology[1].inputs[0].ship_strategy, "REBALANCE");
    assert_eq!(snap.topology[2].inputs[0].ship_strategy, "HASH");
    let names = &snap.names[&source.id];
    assert!(
        names.records_in.iter().all(|n| n.starts_with("Source__")),
        "{names:?}"
    );
    assert_eq!(names.pending_records.len(), 1);

    for round in 1..=3u64 {
        ctl.advance(Duration::from_secs(15));
        ctl.reset_stats();
        let report = collector
            .poll(&client, &overview, 100_000 + round * 15_000)
            .await
            .unwrap();
        assert_eq!(
            report.requests, VERTICES,
            "round {round}: one filtered request per vertex"
        );
        assert_eq!(ctl.stats().requests, VERTICES);
        assert_eq!(
            report.unusable,
            None,
            "round {round}: {:?}",
            collector.snapshot().unusable_detail
        );
    }
    let snap = collector.snapshot();
    let sample = snap.sample.as_ref().unwrap();
    let r = rate_in(sample, &snap.topology[0].id);
    assert!((r - 2000.0).abs() < 20.0, "source rate {r}");
    assert!(sample.vertices[&snap.topology[0].id]
        .pending_records
        .is_some());
    assert_eq!(collector.window().len(), 4);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_invalidates_names_and_the_window() {
    let (sim, ctl, job, client, mut collector) = setup(&job_toml("clicks", 2, 3, 500.0)).await;
    let mut now = 1_000_000;
    for _ in 0..3 {
        ctl.advance(Duration::from_secs(15));
        now += 15_000;
        collector
            .poll(&client, &overview_of(&client, &job).await, now)
            .await
            .unwrap();
    }
    assert_eq!(collector.window().len(), 3);
    let before = collector.snapshot().running_since_ms;

    ctl.restart_job(&job);
    let during = overview_of(&client, &job).await;
    if during.state != "RUNNING" {
        now += 15_000;
        let r = collector.poll(&client, &during, now).await.unwrap();
        assert_eq!(r.unusable, Some(Unusable::NotRunning));
        assert_eq!(r.requests, 0, "a job that is not running costs no requests");
        assert_eq!(collector.window().len(), 0);
    }
    wait_running(&ctl, &job).await;
    ctl.advance(Duration::from_secs(15));
    now += 15_000;
    let r = collector
        .poll(&client, &overview_of(&client, &job).await, now)
        .await
        .unwrap();
    assert!(
        r.new_incarnation || during.state != "RUNNING",
        "restart detected"
    );
    assert_eq!(r.unusable.is_some(), r.new_incarnation);
    assert!(
        r.requests > VERTICES,
        "names listed again after the restart ({} requests)",
        r.requests
    );
    assert_ne!(collector.snapshot().running_since_ms, before);
    assert!(collector.window().len() <= 1);

    ctl.advance(Duration::from_secs(15));
    now += 15_000;
    let r = collector
        .poll(&client, &overview_of(&client, &job).await, now)
        .await
        .unwrap();
    assert_eq!(
        r.requests, VERTICES,
        "the new incarnation's names are cached"
    );
    assert_eq!(r.unusable, None);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescale_invalidates_names() {
    let (sim, ctl, job, client, mut collector) = setup(&job_toml("payments", 2, 2, 500.0)).await;
    let mut now = 2_000_000;
    collector
        .poll(&client, &overview_of(&client, &job).await, now)
        .await
        .unwrap();
    let map_id = collector.snapshot().topology[1].id.clone();

    // Rescale the map vertex to 5 through the adaptive scheduler's REST call.
    let requirements: serde_json::Value = serde_json::from_str(
        &get(&format!("{}/jobs/{job}/resource-requirements", sim.url()))
            .await
            .1,
    )
    .unwrap();
    let mut body = requirements.clone();
    body[&map_id]["parallelism"]["upperBound"] = serde_json::json!(5);
    let (status, text) = request(
        hyper::Method::PUT,
        &format!("{}/jobs/{job}/resource-requirements", sim.url()),
        Bytes::from(body.to_string()),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    for _ in 0..40 {
        if ctl.parallelism(&job).get(&map_id) == Some(&5)
            && ctl.job_status(&job).as_deref() == Some("RUNNING")
        {
            break;
        }
        ctl.advance(Duration::from_secs(5));
    }
    assert_eq!(ctl.parallelism(&job)[&map_id], 5);
    ctl.advance(Duration::from_secs(15));
    now += 60_000;
    let r = collector
        .poll(&client, &overview_of(&client, &job).await, now)
        .await
        .unwrap();
    assert!(r.new_incarnation);
    assert_eq!(r.unusable, Some(Unusable::Restarted));
    assert!(
        r.requests > 2 * VERTICES,
        "details and listings again ({} requests)",
        r.requests
    );
    assert_eq!(collector.snapshot().topology[1].parallelism, 5);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_get_lists_are_split_under_the_request_line_limit() {
    let long = "a".repeat(70);
    let toml = job_toml(&long, 2, 2, 700.0);
    let sim = start_sim(&toml, true).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    ctl.advance(Duration::from_secs(30));

    let roomy = config(&sim.url(), "");
    let tight = config(&sim.url(), "[jobmanager]\nmax_request_line_bytes = 300");
    let (client, roomy_settings) = client_and_settings(&roomy);
    let (_, tight_settings) = client_and_settings(&tight);
    let mut whole = JobCollector::new(job.clone(), roomy_settings);
    let mut split = JobCollector::new(job.clone(), tight_settings);
    let overview = overview_of(&client, &job).await;
    whole.poll(&client, &overview, 10_000).await.unwrap();
    split.poll(&client, &overview, 10_000).await.unwrap();
    ctl.advance(Duration::from_secs(15));
    let a = whole.poll(&client, &overview, 25_000).await.unwrap();
    let b = split.poll(&client, &overview, 25_000).await.unwrap();
    assert_eq!(a.requests, VERTICES);
    assert!(
        b.requests > VERTICES,
        "the source's long names need more than one request"
    );
    assert_eq!(b.unusable, None, "{:?}", split.snapshot().unusable_detail);
    assert_eq!(
        whole.snapshot().sample,
        split.snapshot().sample,
        "split requests give the same values"
    );
    sim.shutdown().await;
}

/// A simulator on a manual clock with one job, 30 simulated seconds in, and a collector.
async fn setup(
    toml: &str,
) -> (
    flink_autoscale_simulator::RunningSim,
    flink_autoscale_simulator::SimControl,
    String,
    flink_autoscale_agent::flink::FlinkClient,
    JobCollector,
) {
    let sim = start_sim(toml, true).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    let (client, settings) = client_and_settings(&config(&sim.url(), ""));
    let collector = JobCollector::new(job.clone(), settings);
    ctl.advance(Duration::from_secs(30));
    (sim, ctl, job, client, collector)
}

async fn wait_running(ctl: &flink_autoscale_simulator::SimControl, job: &str) {
    for _ in 0..100 {
        if ctl.job_status(job).as_deref() == Some("RUNNING") {
            return;
        }
        ctl.advance(Duration::from_secs(5));
    }
    panic!("job {job} did not come back to RUNNING");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_own_metrics_window_sizes_its_window() {
    let toml = job_toml("tuned", 2, 2, 300.0)
        + "[job.config]\n\"job.autoscaler.metrics.window\" = \"30 s\"\n";
    let (sim, ctl, job, client, mut collector) = setup(&toml).await;
    let mut now = 5_000_000;
    for _ in 0..6 {
        ctl.advance(Duration::from_secs(15));
        now += 15_000;
        let r = collector
            .poll(&client, &overview_of(&client, &job).await, now)
            .await
            .unwrap();
        assert_eq!(r.unusable, None);
    }
    let overrides = &collector.snapshot().autoscaler_overrides;
    assert_eq!(
        overrides
            .get("job.autoscaler.metrics.window")
            .map(String::as_str),
        Some("30 s")
    );
    assert_eq!(collector.window().window_ms(), 30_000);
    assert_eq!(
        collector.window().len(),
        3,
        "30 s at one sample per 15 s, both ends included"
    );
    assert!(collector.window().is_full());
    sim.shutdown().await;
}
