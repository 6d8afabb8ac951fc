//! A session cluster of many copies of one job (`[fleet]`): every copy is listed and served
//! with its own ids, a job can be forgotten (`DELETE /_sim/jobs/:jid`), and every read of
//! a job's metric values is recorded for the server-side poll gaps (`GET /_sim/polls`).

mod common;

use std::time::Duration;

use common::{chain_toml, Sim};

#[tokio::test]
async fn a_fleet_is_listed_and_served_job_by_job() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "[fleet]\njobs = 1000")).await;
    sim.advance_s(5);
    let ids = sim.control.job_ids();
    assert_eq!(ids.len(), 1000);
    let overview = sim.get_ok("/jobs/overview").await;
    let listed = overview["jobs"].as_array().unwrap();
    assert_eq!(listed.len(), 1000);
    assert_eq!(listed[999]["name"], "chain-999");
    assert!(listed.iter().all(|j| j["state"] == "RUNNING"));

    let last = &ids[999];
    let vertex = &sim.control.vertex_ids(last)[1];
    assert_ne!(vertex, &sim.control.vertex_ids(&ids[0])[1]);
    let values = sim
        .get_ok(&format!(
            "/jobs/{last}/vertices/{vertex}/subtasks/metrics?get=numRecordsInPerSecond&agg=sum"
        ))
        .await;
    assert!(values[0]["sum"].as_f64().unwrap() > 0.0, "{values}");
    sim.stop().await;
}

#[tokio::test]
async fn a_forgotten_job_leaves_the_overview_and_its_endpoints() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "[fleet]\njobs = 3")).await;
    let ids = sim.control.job_ids();
    let (status, _) = sim
        .send("DELETE", &format!("/_sim/jobs/{}", ids[1]), "")
        .await;
    assert_eq!(status, 200);
    let overview = sim.get_ok("/jobs/overview").await;
    let listed: Vec<&str> = overview["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jid"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![ids[0].as_str(), ids[2].as_str()]);
    assert_eq!(sim.get(&format!("/jobs/{}", ids[1])).await.0, 404);
    assert_eq!(sim.get(&format!("/jobs/{}", ids[2])).await.0, 200);
    let (status, _) = sim
        .send("DELETE", &format!("/_sim/jobs/{}", ids[1]), "")
        .await;
    assert_eq!(status, 404, "already forgotten");
    assert!(sim.control.remove_job(&ids[0]));
    assert_eq!(sim.control.job_ids(), vec![ids[2].clone()]);
    sim.stop().await;
}

#[tokio::test]
async fn reads_of_metric_values_are_recorded_per_job() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "[fleet]\njobs = 2")).await;
    sim.advance_s(5);
    let ids = sim.control.job_ids();
    let read = |job: &str| {
        let vertex = sim.control.vertex_ids(job)[0].clone();
        format!("/jobs/{job}/vertices/{vertex}/subtasks/metrics?get=busyTimeMsPerSecond")
    };
    sim.get_ok(&read(&ids[0])).await;
    tokio::time::sleep(Duration::from_millis(40)).await;
    sim.get_ok(&read(&ids[0])).await;
    // Name listings and job details are not reads of values.
    let vertex = sim.control.vertex_ids(&ids[1])[0].clone();
    sim.get_ok(&format!(
        "/jobs/{}/vertices/{vertex}/subtasks/metrics",
        ids[1]
    ))
    .await;
    sim.get_ok(&format!("/jobs/{}", ids[1])).await;

    let polls = sim.get_ok("/_sim/polls").await;
    let first = &polls["jobs"][&ids[0]];
    assert_eq!(first["reads"], 2, "{polls}");
    assert!(first["max_gap_ms"].as_u64().unwrap() >= 40, "{polls}");
    assert!(polls["jobs"].get(&ids[1]).is_none(), "{polls}");
    let report = sim.control.poll_gaps();
    assert!(report.longest_wait_ms(&ids[0]).unwrap() >= 40);
    assert_eq!(report.longest_wait_ms(&ids[1]), None);

    sim.send("DELETE", "/_sim/stats", "").await;
    assert_eq!(
        sim.get_ok("/_sim/polls").await["jobs"],
        serde_json::json!({})
    );
    sim.stop().await;
}
