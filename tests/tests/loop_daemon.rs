//! The loop as `flink-autoscale-agent run` wires it: the daemon's job task polls on the
//! injected (manual) clock and calls the control loop after each poll; the rescale shows up
//! in the simulator and in the agent's Prometheus output, scraped over HTTP.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_agent::commands::run::run_agent;
use flink_autoscale_agent::control::{ControlLoop, LoopEvent};
use flink_autoscale_agent::daemon::{CancellationToken, ManualClock};
use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_tests::lockstep::{
    agent_config, local_control, scenario_text, start_manual_sim, SHORT_WINDOW,
};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const POLL: Duration = Duration::from_secs(15);

async fn get(url: &str) -> String {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let resp = tokio::time::timeout(
        Duration::from_secs(5),
        client.get(url.parse().expect("uri")),
    )
    .await
    .expect("answer in time")
    .expect("request");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_runs_the_loop_and_exports_its_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = start_manual_sim(&scenario_text("step-load.toml")).await;
    let control = sim.control();
    let job = control.job_ids()[0].clone();
    let extra = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"1s\"\n{SHORT_WINDOW}{}",
        local_control(dir.path())
    );
    let config = agent_config(&sim.url(), POLL, &extra);
    let clock = ManualClock::new(control.now_ms());
    let agent = Arc::new(ControlLoop::from_config(&config).expect("loop"));
    let mut events = agent.subscribe();
    let shutdown = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let daemon = tokio::spawn(run_agent(
        config,
        clock.clone(),
        agent.clone(),
        shutdown.clone(),
        move |addr| {
            let _ = tx.send(addr);
        },
    ));
    let addr = tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("agent serves in time")
        .expect("address");

    let mut applied = false;
    // Each step: one poll interval of simulated time, then real time for the poll to run.
    for _ in 0..80 {
        control.advance(POLL);
        clock.advance(POLL);
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(e) = events.try_recv() {
            if let LoopEvent::Outcome { outcome, .. } = &e {
                if outcome.status == OutcomeStatus::Applied {
                    assert!(outcome.restart_ms.is_some(), "{outcome:?}");
                    applied = true;
                }
            }
        }
        if applied {
            break;
        }
    }
    assert!(applied, "the daemon should have rescaled the job");
    let parallelism = control.parallelism(&job);
    assert!(parallelism.values().any(|p| *p > 1), "{parallelism:?}");

    // Let the outcome report and the gauges settle, then scrape.
    for _ in 0..3 {
        control.advance(POLL);
        clock.advance(POLL);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = get(&format!("http://{addr}/metrics")).await;
    for needle in [
        format!("flink_autoscale_agent_proposals_total{{job_id=\"{job}\",verdict=\"approved\"}} 1"),
        format!("flink_autoscale_agent_actuations_total{{job_id=\"{job}\",result=\"applied\"}} 1"),
        format!("flink_autoscale_agent_action_in_flight{{job_id=\"{job}\"}} 0"),
        format!("flink_autoscale_agent_last_action_age_seconds{{job_id=\"{job}\"}}"),
        format!("flink_autoscale_agent_rescaling_seconds_total{{job_id=\"{job}\"}}"),
        "flink_autoscale_agent_gatekeeper_up 1".to_string(),
    ] {
        assert!(metrics.contains(&needle), "missing {needle} in:\n{metrics}");
    }
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), daemon)
        .await
        .expect("agent stops in time")
        .expect("task")
        .expect("agent ran");
    sim.shutdown().await;
}
