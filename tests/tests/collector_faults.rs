//! Bad input from the JobManager: each case becomes a counted error (by kind) and the next
//! poll goes ahead once the JobManager behaves again. The agent runs in-process against the
//! simulated JobManager over loopback; the counters are scraped from its `/metrics`.

mod collector_support;

use std::time::Duration;

use collector_support::*;
use flink_autoscale_simulator::Fault;

const ERRORS: &str = "flink_autoscale_agent_errors_total";
const LAST_POLL: &str = "flink_autoscale_agent_last_successful_poll_timestamp_seconds";

async fn scrape(agent: &Agent) -> String {
    let (status, body) = get(&agent.url("/metrics")).await;
    assert_eq!(status, 200);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_answer_is_a_counted_error_and_polling_recovers() {
    let sim = start_sim(&job_toml("faults", 2, 2, 300.0), false).await;
    let ctl = sim.control();
    let job = ctl.job_ids()[0].clone();
    let cfg = config(
        &sim.url(),
        "[jobmanager]\nrequest_timeout = \"300ms\"\n[collector]\npoll_interval = \"500ms\"\npoll_deadline = \"500ms\"\nbackoff_initial = \"100ms\"\nbackoff_max = \"200ms\"",
    );
    let agent = start_agent(cfg).await;
    let last_poll = |text: &str| metric(text, LAST_POLL, &[("job_id", &job)]);
    wait_until(Duration::from_secs(5), "first successful poll", || async {
        last_poll(&scrape(&agent).await).is_some()
    })
    .await;

    let cases = [
        (Fault::Status(500), "http_5xx"),
        (Fault::Status(503), "http_5xx"),
        (Fault::Html, "html"),
        (Fault::MalformedJson, "malformed_json"),
        (Fault::Truncated, "truncated"),
        (Fault::HugeBody(3 << 20), "body_too_large"),
        (Fault::Redirect, "redirect"),
        (Fault::Hang, "timeout"),
        (Fault::Delay(Duration::from_secs(2)), "timeout"),
    ];
    for (fault, kind) in cases {
        let before = metric_sum(&scrape(&agent).await, ERRORS, &[("kind", kind)]);
        ctl.set_fault(None, Some(fault.clone()));
        wait_until(
            Duration::from_secs(5),
            &format!("{fault:?} counted as {kind}"),
            || async { metric_sum(&scrape(&agent).await, ERRORS, &[("kind", kind)]) > before },
        )
        .await;
        ctl.set_fault(None, None);
        let cleared = last_poll(&scrape(&agent).await).unwrap_or(0.0);
        wait_until(
            Duration::from_secs(5),
            &format!("polling recovers after {fault:?}"),
            || async { last_poll(&scrape(&agent).await).unwrap_or(0.0) > cleared },
        )
        .await;
    }
    let (status, _) = get(&agent.url("/readyz")).await;
    assert_eq!(status, 200, "readiness never depends on the JobManager");
    agent.stop().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_jobmanager_is_counted_and_the_agent_stays_ready() {
    // Bind then drop a listener: the port is free and refuses connections.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let agent = start_agent(config(&format!("http://127.0.0.1:{port}"), "")).await;
    wait_until(Duration::from_secs(5), "connect errors counted", || async {
        metric_sum(
            &get(&agent.url("/metrics")).await.1,
            ERRORS,
            &[("kind", "connect")],
        ) >= 2.0
    })
    .await;
    assert_eq!(get(&agent.url("/readyz")).await.0, 200);
    assert_eq!(get(&agent.url("/healthz")).await.0, 200);
    let (status, body) = get(&agent.url("/jobs/overview")).await;
    assert_eq!(status, 503, "nothing cached yet: {body}");
    assert!(body.contains("errors"));
    agent.stop().await;
}
