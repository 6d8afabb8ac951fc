//! The agent's HTTP server, scraped over loopback: Prometheus output with per-job and
//! per-vertex (never per-subtask) series, health and readiness, and the Flink-compatible
//! reads served from the agent's cache.

mod collector_support;

use std::time::Duration;

use collector_support::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_health_and_flink_compatible_reads() {
    let sim = start_sim(&job_toml("shop", 3, 4, 900.0), false).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    let vertices = ctl.vertex_ids(&job);
    let agent = start_agent(config(&sim.url(), "")).await;
    assert_eq!(get(&agent.url("/healthz")).await.0, 200);
    wait_until(Duration::from_secs(5), "ready", || async {
        get(&agent.url("/readyz")).await.0 == 200
    })
    .await;
    wait_until(
        Duration::from_secs(5),
        "values cached for every vertex",
        || async {
            let (_, body) = get(&agent.url(&format!(
                "/jobs/{job}/vertices/{}/subtasks/metrics",
                vertices[2]
            )))
            .await;
            body.contains("busyTimeMsPerSecond")
        },
    )
    .await;

    // Rates come from counter changes, so they appear from the second poll on.
    wait_until(
        Duration::from_secs(5),
        "rates derived from two polls",
        || async {
            get(&agent.url("/metrics"))
                .await
                .1
                .contains("flink_autoscale_agent_vertex_output_records_per_second")
        },
    )
    .await;

    // Prometheus text: the agent's own figures and per-vertex gauges.
    let (status, text) = get(&agent.url("/metrics")).await;
    assert_eq!(status, 200);
    for name in [
        "flink_autoscale_agent_poll_duration_seconds_bucket",
        "flink_autoscale_agent_jobmanager_requests_total",
        "flink_autoscale_agent_jobmanager_response_bytes_total",
        "flink_autoscale_agent_name_cache_misses_total",
        "flink_autoscale_agent_name_resolutions_total",
        "flink_autoscale_agent_jobs_watched",
        "flink_autoscale_agent_vertex_busy_ratio",
        "flink_autoscale_agent_vertex_backpressure_ratio",
        "flink_autoscale_agent_vertex_input_records_per_second",
        "flink_autoscale_agent_vertex_output_records_per_second",
        "flink_autoscale_agent_vertex_lag_records",
        "flink_autoscale_agent_vertex_parallelism",
    ] {
        assert!(text.contains(name), "missing {name} in\n{text}");
    }
    // Without the engine nothing estimates a true processing rate: the one exported is the
    // engine's (tests/tests/collector_engine_figures.rs).
    assert!(
        !text.contains("flink_autoscale_agent_vertex_true_processing_rate_records_per_second{"),
        "{text}"
    );
    let labelled_by_subtask = text.lines().filter(|l| !l.starts_with('#')).any(|l| {
        let labels = l.split_once('{').map_or("", |(_, rest)| rest);
        labels.contains("subtask=")
            || labels.contains("subtask_index=")
            || labels.contains("subtask_id=")
    });
    assert!(!labelled_by_subtask, "no per-subtask series");
    let p = metric(
        &text,
        "flink_autoscale_agent_vertex_parallelism",
        &[("job_id", &job), ("vertex_id", &vertices[1])],
    );
    assert_eq!(p, Some(4.0));
    let source_rate = metric(
        &text,
        "flink_autoscale_agent_vertex_input_records_per_second",
        &[("job_id", &job), ("vertex_id", &vertices[0])],
    )
    .unwrap();
    assert!(
        (source_rate - 900.0).abs() < 45.0,
        "source rate {source_rate}"
    );
    wait_until(
        Duration::from_secs(5),
        "name cache hits after the first poll",
        || async {
            metric_sum(
                &get(&agent.url("/metrics")).await.1,
                "flink_autoscale_agent_name_cache_hits_total",
                &[],
            ) > 0.0
        },
    )
    .await;

    // Flink-compatible reads.
    let (status, body) = get(&agent.url("/jobs/overview")).await;
    assert_eq!(status, 200);
    let overview: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(overview["jobs"][0]["jid"], job.as_str());
    assert_eq!(get(&agent.url("/v1/jobs/overview")).await.0, 200);

    let base = format!("/jobs/{job}/vertices/{}/subtasks/metrics", vertices[1]);
    let (_, body) = get(&agent.url(&base)).await;
    let names: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(names.iter().any(|n| n["id"] == "numRecordsIn"));
    assert!(
        names.iter().all(|n| n.get("max").is_none()),
        "no get: names only"
    );

    let (_, body) = get(&agent.url(&format!(
        "{base}?get=busyTimeMsPerSecond,numRecordsIn&agg=max,sum"
    )))
    .await;
    let values: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(values[0]["id"], "busyTimeMsPerSecond");
    assert!(
        values[0]["max"].is_number() && values[0].get("avg").is_none(),
        "{body}"
    );
    assert!(values[1]["sum"].as_f64().unwrap() > 0.0);
    // Flink's all-or-nothing rule: one unknown name empties the answer.
    assert_eq!(
        get(&agent.url(&format!("{base}?get=busyTimeMsPerSecond,nope")))
            .await
            .1,
        "[]"
    );
    assert_eq!(
        get(&agent.url(&format!(
            "/jobs/{}/vertices/x/subtasks/metrics?get=a",
            "0".repeat(32)
        )))
        .await,
        (200, "[]".into())
    );
    let (status, body) =
        get(&agent.url(&format!("{base}?get=busyTimeMsPerSecond&agg=median"))).await;
    assert_eq!(status, 400);
    assert!(body.contains("agg"), "{body}");
    assert_eq!(get(&agent.url("/nope")).await.0, 404);
    let (status, _) = request(
        hyper::Method::POST,
        &agent.url("/jobs/overview"),
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(status, 405);

    agent.stop().await;
    sim.shutdown().await;
}
