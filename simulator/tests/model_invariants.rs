//! Invariants of the dataflow model, observed through the REST API over loopback.

mod common;

use common::{agg, chain_toml, plain, Sim};

async fn vertex_metrics(sim: &Sim, v: usize, names: &str) -> serde_json::Value {
    sim.get_ok(&format!(
        "/jobs/{}/vertices/{}/subtasks/metrics?get={names}",
        sim.job(),
        sim.vertex(v)
    ))
    .await
}

async fn pending(sim: &Sim) -> f64 {
    let v = vertex_metrics(sim, 0, "Source__Kafka_Source.pendingRecords").await;
    agg(&v, "Source__Kafka_Source.pendingRecords", "sum")
}

#[tokio::test]
async fn busy_never_exceeds_1000_and_time_adds_up() {
    for file in [
        "three-vertex.toml",
        "sink-limited.toml",
        "session-cluster.toml",
    ] {
        let sim = Sim::from_file(file).await;
        for m in [0.3, 1.0, 3.0, 10.0] {
            for job in sim.control.job_ids() {
                sim.control.set_rate_multiplier(&job, m);
                sim.advance_s(20);
                for (v, vid) in sim.control.vertex_ids(&job).iter().enumerate() {
                    let p = sim.control.parallelism(&job)[vid];
                    for i in 0..p {
                        let path = format!("/jobs/{job}/vertices/{vid}/subtasks/{i}/metrics?get=busyTimeMsPerSecond,idleTimeMsPerSecond,backPressuredTimeMsPerSecond");
                        let s = sim.get_ok(&path).await;
                        let busy = plain(&s, "busyTimeMsPerSecond");
                        assert!(
                            (0.0..=1000.0).contains(&busy),
                            "{file} x{m} vertex {v} subtask {i}: busy {busy}"
                        );
                        let total = busy
                            + plain(&s, "idleTimeMsPerSecond")
                            + plain(&s, "backPressuredTimeMsPerSecond");
                        assert!(
                            (total - 1000.0).abs() <= 1.5,
                            "{file} x{m} vertex {v} subtask {i}: split adds to {total}"
                        );
                    }
                }
            }
        }
        sim.stop().await;
    }
}

#[tokio::test]
async fn records_are_conserved_through_selectivity() {
    let sim = Sim::from_toml(&chain_toml(800.0, 1000.0, "")).await;
    sim.advance_s(30);
    let job = sim.get_ok(&format!("/jobs/{}", sim.job())).await;
    let m = |v: usize, k: &str| job["vertices"][v]["metrics"][k].as_f64().unwrap();
    assert_eq!(
        m(0, "read-records"),
        0.0,
        "a source's task-level input is 0"
    );
    assert!((m(0, "write-records") - 24_000.0).abs() <= 2.0, "{job}");
    assert!((m(0, "write-records") - m(1, "read-records")).abs() <= 2.0);
    assert!((m(1, "read-records") * 0.5 - m(1, "write-records")).abs() <= 2.0);
    assert!((m(1, "write-records") - m(2, "read-records")).abs() <= 2.0);
    assert!(job["vertices"][0]["metrics"]["write-records-complete"]
        .as_bool()
        .unwrap());
    // Operator-scoped source counters carry what the task level leaves out.
    let src = vertex_metrics(
        &sim,
        0,
        "Source__Kafka_Source.numRecordsIn,Source__Kafka_Source.numRecordsOutPerSecond",
    )
    .await;
    assert!(
        (agg(&src, "Source__Kafka_Source.numRecordsIn", "sum") - 24_000.0).abs() <= 2.0,
        "{src}"
    );
    assert!(
        (agg(&src, "Source__Kafka_Source.numRecordsOutPerSecond", "sum") - 800.0).abs() < 1e-6,
        "{src}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn lag_grows_exactly_when_input_exceeds_capacity() {
    // Map: 2 subtasks x 300 records/s = 600 records/s; input 1000 records/s.
    let sim = Sim::from_toml(&chain_toml(1000.0, 300.0, "")).await;
    sim.advance_s(10);
    assert_eq!(pending(&sim).await, 4000.0);
    sim.advance_s(5);
    assert_eq!(pending(&sim).await, 6000.0);
    // Input 500 < 600: the backlog drains at exactly 100 records/s.
    sim.control.set_rate_multiplier(&sim.job(), 0.5);
    sim.advance_s(10);
    assert_eq!(pending(&sim).await, 5000.0);
    // Input 200: drains at 400/s, reaches zero after 12.5 s and stays there.
    sim.control.set_rate_multiplier(&sim.job(), 0.2);
    sim.advance_s(20);
    assert_eq!(pending(&sim).await, 0.0);
    let model = sim.control.model(&sim.job());
    assert!((model[0].in_rate - 200.0).abs() < 1e-9, "{model:?}");
    // Just below capacity: no lag at all.
    sim.control.set_rate_multiplier(&sim.job(), 0.599);
    sim.advance_s(30);
    assert_eq!(pending(&sim).await, 0.0);
    sim.stop().await;
}

#[tokio::test]
async fn backpressure_shows_upstream_of_the_bottleneck() {
    let sim = Sim::from_toml(&chain_toml(1000.0, 300.0, "")).await;
    sim.advance_s(10);
    let names = "busyTimeMsPerSecond,backPressuredTimeMsPerSecond,idleTimeMsPerSecond";
    let src = vertex_metrics(&sim, 0, names).await;
    let map = vertex_metrics(&sim, 1, names).await;
    let sink = vertex_metrics(&sim, 2, names).await;
    assert!(
        agg(&src, "backPressuredTimeMsPerSecond", "min") > 900.0,
        "source is blocked on output: {src}"
    );
    assert_eq!(agg(&src, "idleTimeMsPerSecond", "max"), 0.0);
    assert_eq!(
        agg(&map, "busyTimeMsPerSecond", "max"),
        1000.0,
        "the bottleneck is saturated: {map}"
    );
    assert_eq!(agg(&map, "backPressuredTimeMsPerSecond", "max"), 0.0);
    assert_eq!(agg(&sink, "backPressuredTimeMsPerSecond", "max"), 0.0);
    assert!(agg(&sink, "idleTimeMsPerSecond", "min") > 0.0);
    // Throughput is the bottleneck's: 600 records/s out of the source.
    let src_rate = vertex_metrics(&sim, 0, "Source__Kafka_Source.numRecordsOutPerSecond").await;
    assert!(
        (agg(
            &src_rate,
            "Source__Kafka_Source.numRecordsOutPerSecond",
            "sum"
        ) - 600.0)
            .abs()
            < 1e-6
    );
    // Underloaded: no backpressure anywhere once the backlog is gone.
    sim.control.set_rate_multiplier(&sim.job(), 0.1);
    sim.advance_s(60);
    for v in 0..3 {
        let m = vertex_metrics(&sim, v, names).await;
        assert_eq!(
            agg(&m, "backPressuredTimeMsPerSecond", "max"),
            0.0,
            "vertex {v}: {m}"
        );
    }
    sim.stop().await;
}

#[tokio::test]
async fn a_write_limited_sink_does_not_speed_up_when_scaled() {
    let sim = Sim::from_file("sink-limited.toml").await;
    sim.advance_s(10);
    let job = sim.job();
    let model = sim.control.model(&job);
    assert!((model[2].in_rate - 3000.0).abs() < 1e-6, "{model:?}");
    assert_eq!(model[2].max_busy, 1000.0);
    assert!(model[0].backpressured && model[1].backpressured && !model[2].backpressured);
    let rr = sim
        .get_ok(&format!("/jobs/{job}/resource-requirements"))
        .await;
    let mut body = rr.clone();
    body[&model[2].id]["parallelism"]["upperBound"] = 8.into();
    let (status, _) = sim
        .send(
            "PUT",
            &format!("/jobs/{job}/resource-requirements"),
            &body.to_string(),
        )
        .await;
    assert_eq!(status, 200);
    sim.advance_s(30);
    let after = sim.control.model(&job);
    assert_eq!(after[2].parallelism, 8);
    assert!(
        (after[2].in_rate - 3000.0).abs() < 1e-6,
        "still limited by the external system: {after:?}"
    );
    assert_eq!(after[2].max_busy, 1000.0);
    sim.stop().await;
}

#[tokio::test]
async fn source_rate_follows_the_profile() {
    let sim = Sim::from_file("diurnal.toml").await;
    let job = sim.job();
    let input = |s: &Sim| s.control.model(&job)[0].input_rate.unwrap();
    sim.advance_s(2 * 3600);
    let night = input(&sim);
    sim.advance_s(12 * 3600);
    let peak = input(&sim);
    assert!(
        night < 2200.0 && peak > 18_000.0,
        "night {night}, peak {peak}"
    );
    // At the peak the aggregation (6 x 2,500 records/s, skewed) cannot keep up: lag builds.
    let model = sim.control.model(&job);
    assert!(
        model[0].lag > 0.0 && model[1].max_busy == 1000.0,
        "{model:?}"
    );
    sim.stop().await;

    let sim = Sim::from_file("demo.toml").await;
    let job = sim.job();
    assert_eq!(sim.control.model(&job)[1].input_rate, Some(0.0));
    sim.advance_s(31);
    assert_eq!(sim.control.model(&job)[1].input_rate, Some(10_000.0));
    sim.advance_s(450);
    assert_eq!(sim.control.model(&job)[1].input_rate, Some(0.0));
    sim.stop().await;
}

#[tokio::test]
async fn checkpoint_state_grows_over_time() {
    let sim = Sim::from_file("three-vertex.toml").await;
    sim.advance_s(30);
    let c1 = sim
        .get_ok(&format!("/jobs/{}/checkpoints", sim.job()))
        .await;
    sim.advance_s(100);
    let c2 = sim
        .get_ok(&format!("/jobs/{}/checkpoints", sim.job()))
        .await;
    let size = |c: &serde_json::Value| c["latest"]["completed"]["state_size"].as_u64().unwrap();
    assert_eq!(c1["counts"]["completed"], 3);
    assert_eq!(c2["counts"]["completed"], 13);
    // 5 MB + 200 B/s.
    assert_eq!(size(&c1), 5_000_000 + 200 * 30);
    assert_eq!(size(&c2), 5_000_000 + 200 * 130);
    assert_eq!(c2["history"].as_array().unwrap().len(), 10);
    sim.stop().await;
}
