//! Per-endpoint accounting at `/_sim/stats`, the per-entry delay, and injected faults.

mod common;

use std::time::{Duration, Instant};

use common::{chain_toml, Sim};
use flink_autoscale_simulator::Fault;
use serde_json::json;

#[tokio::test]
async fn stats_count_requests_bytes_and_entries() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let (job, map) = (sim.job(), sim.vertex(1));
    sim.advance_s(5);
    sim.control.reset_stats();

    let list_path = format!("/jobs/{job}/vertices/{map}/subtasks/metrics");
    let (_, _, names_body) = sim.request("GET", &list_path, None).await;
    let names: serde_json::Value = serde_json::from_str(&names_body).unwrap();
    let per_subtask = names.as_array().unwrap().len() as u64;
    let (_, _, get_body) = sim
        .request(
            "GET",
            &format!(
                "{list_path}?get=busyTimeMsPerSecond,numRecordsInPerSecond,idleTimeMsPerSecond"
            ),
            None,
        )
        .await;
    let (_, _, overview_body) = sim.request("GET", "/v1/overview", None).await;
    // Control endpoints are not accounted.
    sim.get_ok("/_sim/clock").await;

    let stats = sim.get_ok("/_sim/stats").await;
    assert_eq!(stats["requests"], 3, "{stats}");
    let bytes = (names_body.len() + get_body.len() + overview_body.len()) as u64;
    assert_eq!(stats["response_bytes"], bytes);
    let key = "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics";
    let e = &stats["by_endpoint"][key];
    assert_eq!(e["requests"], 2, "{stats}");
    // Listing names touches subtasks x metrics (2 x names); the get touches 2 x 3.
    assert_eq!(e["entries_touched"], 2 * per_subtask + 2 * 3, "{stats}");
    assert_eq!(stats["by_endpoint"]["GET /overview"]["requests"], 1);
    assert_eq!(sim.control.stats().requests, 3);

    let (status, _) = sim.send("DELETE", "/_sim/stats", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        sim.get_ok("/_sim/stats").await,
        json!({
            "requests": 0,
            "response_bytes": 0,
            "entries_touched": 0,
            "fetcher_refreshes": 0,
            "fetched_entries": 0,
            "jobmanager_cpu_ms": 0.0,
            "jobmanager_cpu": {
                "jobmanager_cpu_ms": 0.0,
                "refresh_ms": 0.0,
                "requests_ms": 0.0,
                "touched_ms": 0.0,
                "bytes_ms": 0.0
            },
            "by_endpoint": {}
        })
    );
    sim.stop().await;
}

#[tokio::test]
async fn per_entry_delay_makes_expensive_calls_slow() {
    let sim = Sim::from_toml(&chain_toml(
        100.0,
        1000.0,
        "[server]\nentry_delay_us = 1000",
    ))
    .await;
    let path = format!(
        "/jobs/{}/vertices/{}/subtasks/metrics",
        sim.job(),
        sim.vertex(1)
    );
    let t = Instant::now();
    sim.get_ok(&path).await;
    let entries = sim.control.stats().entries_touched;
    assert!(entries > 100);
    assert!(
        t.elapsed() >= Duration::from_micros(1000 * entries),
        "{:?} for {entries} entries",
        t.elapsed()
    );
    sim.stop().await;
}

#[tokio::test]
async fn injected_faults_break_responses_the_promised_way() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let job = sim.job();
    let jobs_path = format!("/jobs/{job}");

    sim.control.set_fault(None, Some(Fault::Status(503)));
    let (status, body) = sim.get("/overview").await;
    assert_eq!(status, 503);
    assert!(body["errors"][0].is_string());
    assert_eq!(
        sim.get_ok("/_sim/stats").await["requests"],
        0,
        "control paths are never faulted"
    );

    sim.control.set_fault(None, Some(Fault::Html));
    let (status, headers, text) = sim.request("GET", "/overview", None).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(text.starts_with("<!DOCTYPE html>"));

    sim.control.set_fault(None, Some(Fault::MalformedJson));
    let (_, _, text) = sim.request("GET", "/overview", None).await;
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());

    sim.control.set_fault(None, Some(Fault::HugeBody(200_000)));
    let (_, _, text) = sim.request("GET", "/overview", None).await;
    assert!(text.len() >= 199_000 && serde_json::from_str::<serde_json::Value>(&text).is_ok());

    sim.control.set_fault(None, Some(Fault::Redirect));
    let (status, headers, _) = sim.request("GET", "/overview", None).await;
    assert_eq!(status, 302);
    assert!(headers.contains_key("location"));

    sim.control
        .set_fault(None, Some(Fault::Delay(Duration::from_millis(200))));
    let t = Instant::now();
    assert_eq!(sim.get("/overview").await.0, 200);
    assert!(t.elapsed() >= Duration::from_millis(200));

    // Job-scoped faults only hit that job's paths.
    sim.control.set_fault(None, None);
    sim.control.set_fault(Some(&job), Some(Fault::Status(500)));
    assert_eq!(sim.get(&jobs_path).await.0, 500);
    assert_eq!(sim.get("/jobs").await.0, 200);
    sim.control.set_fault(Some(&job), None);
    assert_eq!(sim.get(&jobs_path).await.0, 200);
    sim.stop().await;
}

#[tokio::test]
async fn truncated_and_hanging_responses_fail_at_the_client() {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: http::Uri = format!("{}/jobs/{}", sim.url, sim.job()).parse().unwrap();

    sim.control.set_fault(None, Some(Fault::Truncated));
    let read = async {
        let resp = client.get(uri.clone()).await.map_err(|e| e.to_string())?;
        http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| e.to_string())
    };
    let outcome = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("truncation ends the response");
    assert!(outcome.is_err(), "the body must not arrive complete");

    sim.control.set_fault(None, Some(Fault::Hang));
    let hung = tokio::time::timeout(Duration::from_millis(300), client.get(uri.clone())).await;
    assert!(hung.is_err(), "a hanging request never answers");

    // Over HTTP: PUT installs, DELETE clears, bad kinds are 400.
    sim.control.set_fault(None, None);
    let (status, _) = sim
        .send("PUT", "/_sim/faults", r#"{"fault":"status","status":502}"#)
        .await;
    assert_eq!(status, 200);
    assert_eq!(sim.get("/config").await.0, 502);
    let (status, body) = sim
        .send("PUT", "/_sim/faults", r#"{"fault":"explode"}"#)
        .await;
    assert_eq!(status, 400);
    assert!(
        body["errors"][0].as_str().unwrap().contains("fault"),
        "{body}"
    );
    let (status, _) = sim.send("DELETE", "/_sim/faults", "").await;
    assert_eq!(status, 200);
    assert_eq!(sim.get("/config").await.0, 200);

    // Shutdown releases a request that is still hanging (bounded by the harness).
    sim.control.set_fault(None, Some(Fault::Hang));
    let pending = tokio::spawn({
        let client = client.clone();
        async move { client.get(uri).await.map(|r| r.status().as_u16()) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    sim.stop().await;
    let answered = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("released on shutdown");
    assert!(matches!(answered, Ok(Ok(503)) | Ok(Err(_))), "{answered:?}");
}
