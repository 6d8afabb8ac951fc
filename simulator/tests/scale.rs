//! The 10,000-subtask scenario is served, and its big answers are complete. Speed is
//! measured by `cargo run --release -p flink-autoscale-simulator --example sim-bench`.

mod common;

use std::time::Instant;

use common::{agg, Sim};

#[tokio::test]
async fn ten_thousand_subtasks_are_served() {
    let sim = Sim::from_file("large-10k.toml").await;
    sim.advance_s(5);
    let (job, source) = (sim.job(), sim.vertex(0));
    let p = sim.control.parallelism(&job);
    assert_eq!(p.values().sum::<u32>(), 10_000);

    let t = Instant::now();
    let details = sim.get_ok(&format!("/jobs/{job}")).await;
    eprintln!("/jobs/:jobid for 10,000 subtasks: {:?}", t.elapsed());
    assert_eq!(details["vertices"].as_array().unwrap().len(), 4);
    assert!(
        details["vertices"][2]["metrics"]["read-records"]
            .as_u64()
            .unwrap()
            > 0
    );

    let t = Instant::now();
    let names = sim
        .get_ok(&format!("/jobs/{job}/vertices/{source}/subtasks/metrics"))
        .await;
    eprintln!("name list of a 1,000-subtask source: {:?}", t.elapsed());
    let names: Vec<&str> = names
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let offsets = names
        .iter()
        .filter(|n| n.ends_with(".currentOffset"))
        .count();
    assert_eq!(offsets, 1000, "one currentOffset name per partition");
    let per_subtask = sim
        .get_ok(&format!("/jobs/{job}/vertices/{source}/subtasks/7/metrics"))
        .await;
    let per_subtask = per_subtask.as_array().unwrap().len();
    assert!(
        (190..=230).contains(&per_subtask),
        "~200 metrics per subtask, got {per_subtask}"
    );

    let t = Instant::now();
    let v = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/{source}/subtasks/metrics?get=busyTimeMsPerSecond,Source__Kafka_Source.pendingRecords,Source__Kafka_Source.numRecordsInPerSecond&agg=max,sum"
        ))
        .await;
    eprintln!("filtered aggregate over 1,000 subtasks: {:?}", t.elapsed());
    assert!(
        (agg(&v, "Source__Kafka_Source.numRecordsInPerSecond", "sum") - 1_200_000.0).abs() < 1.0,
        "{v}"
    );
    let stats = sim.control.stats();
    assert!(
        stats.entries_touched >= 1000 * 200,
        "listing touched subtasks x metrics: {stats:?}"
    );
    sim.stop().await;
}
