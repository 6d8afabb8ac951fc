//! The numbers users see are the numbers the engine used: with the control loop running, the
//! per-vertex true processing rate, load, target rate and band on `/metrics` are the figures
//! of the engine's latest evaluation (over the window, with the observed-rate switch), not a
//! per-sample estimate of the collector's; without the engine the collector exports none.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flink_autoscale_agent::commands::run::run_agent;
use flink_autoscale_agent::control::{ControlLoop, LoopEvent};
use flink_autoscale_agent::daemon::{CancellationToken, ManualClock};
use flink_autoscale_tests::lockstep::{
    agent_config, local_control, scenario_text, start_manual_sim, SHORT_WINDOW,
};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const POLL: Duration = Duration::from_secs(15);

async fn get(url: &str) -> String {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let resp = tokio::time::timeout(Duration::from_secs(5), client.get(url.parse().unwrap()))
        .await
        .expect("answer in time")
        .expect("request");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// The value of `name{job_id=..,vertex_id=..}` in a Prometheus scrape.
fn gauge(text: &str, name: &str, job: &str, vertex: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (n, labels) = series.split_once('{')?;
        (n == name
            && labels.contains(&format!("job_id=\"{job}\""))
            && labels.contains(&format!("vertex_id=\"{vertex}\"")))
        .then(|| value.parse().ok())
        .flatten()
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exported_rates_are_the_engines() {
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

    // Poll until the engine evaluates a complete window; then time stands still, so the
    // gauges keep that evaluation's figures.
    let mut evaluated = None;
    for _ in 0..120 {
        control.advance(POLL);
        clock.advance(POLL);
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(e) = events.try_recv() {
            if let LoopEvent::Evaluated { decision, .. } = e {
                evaluated = Some(decision);
            }
        }
        if evaluated.is_some() {
            break;
        }
    }
    let mut decision = evaluated.expect("the engine evaluated a complete window");
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(e) = events.try_recv() {
        if let LoopEvent::Evaluated { decision: d, .. } = e {
            decision = d;
        }
    }
    let text = get(&format!("http://{addr}/metrics")).await;
    for v in &decision.vertices {
        let exported = |name: &str| gauge(&text, name, &job, &v.id);
        // Each figure as the engine had it; non-finite ones (no data) are not exported.
        for (name, engine) in [
            (
                "flink_autoscale_agent_vertex_true_processing_rate_records_per_second",
                v.true_processing_rate.0,
            ),
            (
                "flink_autoscale_agent_vertex_target_data_rate_records_per_second",
                v.target_data_rate.0,
            ),
            (
                "flink_autoscale_agent_vertex_scale_up_rate_threshold_records_per_second",
                v.scale_up_rate_threshold.0,
            ),
            (
                "flink_autoscale_agent_vertex_scale_down_rate_threshold_records_per_second",
                v.scale_down_rate_threshold.0,
            ),
        ] {
            match exported(name) {
                Some(value) => assert!(
                    close(value, engine),
                    "vertex {}: {name} {value}, the engine used {engine}",
                    v.id
                ),
                None => assert!(
                    !engine.is_finite(),
                    "vertex {}: {name} missing, the engine had {engine}",
                    v.id
                ),
            }
        }
        let tpr = exported("flink_autoscale_agent_vertex_true_processing_rate_records_per_second")
            .unwrap_or_else(|| panic!("vertex {}: no true processing rate in\n{text}", v.id));
        let load = exported("flink_autoscale_agent_vertex_load_ratio").expect("load");
        assert!((0.0..=1.0).contains(&load), "vertex {}: load {load}", v.id);
        // What a per-sample estimate (latest input rate / latest busy ratio) would show.
        let input = gauge(
            &text,
            "flink_autoscale_agent_vertex_input_records_per_second",
            &job,
            &v.id,
        );
        let busy = gauge(
            &text,
            "flink_autoscale_agent_vertex_busy_ratio",
            &job,
            &v.id,
        );
        if let (Some(input), Some(busy)) = (input, busy.filter(|b| *b > 0.0)) {
            eprintln!("vertex {}: engine {tpr}, per-sample {}", v.id, input / busy);
        }
    }
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), daemon)
        .await
        .expect("agent stops in time")
        .expect("task")
        .expect("agent ran");
    sim.shutdown().await;
}
