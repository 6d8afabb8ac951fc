//! `flink-autoscale-agent collect --jobmanager URL --once` against a scripted JobManager on
//! loopback: one JSON object with topology, resolved names and values.

mod support;

use std::process::Command;

use support::{start_scripted, Batch, JOB, PENDING, VERTEX};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_once_prints_topology_names_and_values() {
    let (url, _script, stop) = start_scripted().await;
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_flink-autoscale-agent"))
            .args(["collect", "--once", "--jobmanager", &url])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["job_id"], JOB);
    assert_eq!(job["state"], "RUNNING");
    assert_eq!(job["topology"][0]["id"], VERTEX);
    assert_eq!(job["topology"][0]["parallelism"], 2);
    assert_eq!(job["names"][VERTEX]["pending_records"][0], PENDING);
    let values = &job["sample"]["vertices"][VERTEX];
    assert!(
        values["busy_time_ms_per_second"]["max"].is_number(),
        "{values}"
    );
    assert!(values["pending_records"].is_number(), "{values}");
    assert_eq!(job["usable"], true, "{job}");
    assert_eq!(job["metric_source"], "per_vertex");
    assert!(
        v["requests"].as_u64().unwrap() >= 4,
        "overview, details, listing, values"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_once_shows_the_batch_source_when_the_jobmanager_serves_it() {
    let (url, script, stop) = start_scripted().await;
    script.lock().unwrap().batch = Batch::Served;
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_flink-autoscale-agent"))
            .args(["collect", "--once", "--jobmanager", &url])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["metric_source"], "batch", "{job}");
    assert_eq!(job["usable"], true, "{job}");
    assert_eq!(job["names"][VERTEX]["pending_records"][0], PENDING);
    assert!(
        script.lock().unwrap().listings == 0,
        "no per-vertex listing"
    );
    stop.cancel();
}

#[test]
fn collect_reports_an_unreachable_jobmanager() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_flink-autoscale-agent"))
        .args([
            "collect",
            "--once",
            "--jobmanager",
            &format!("http://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect"), "{err}");
}
