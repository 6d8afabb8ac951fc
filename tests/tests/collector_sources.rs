//! The two metric sources over real HTTP against the simulator: the batch endpoints proposed
//! in FLINK-39617 (served when the scenario switches them on) read the same numbers as the
//! per-vertex requests with fewer requests and the same JobManager work; a JobManager without
//! them is probed once and read per vertex; and the choice is made again after the
//! JobManager restarts.

mod collector_support;

use std::sync::Arc;
use std::time::Duration;

use collector_support::{
    client_and_settings, config, get, metric_sum, overview_of, start_agent, start_sim, wait_until,
};
use flink_autoscale_agent::collector::{JobCollector, SourceKind};
use flink_autoscale_agent::flink::FlinkClient;
use flink_autoscale_simulator::{start, RunningSim, Scenario, SimOptions};

const BATCH_NAMES: &str = "GET /jobs/:jobid/vertices/subtasks/metrics/names";
const BATCH_VALUES: &str = "GET /jobs/:jobid/vertices/subtasks/metrics/values";
const PER_VERTEX: &str = "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics";

/// A scenario of `jobs`, with or without the batch endpoints.
fn scenario(batch: bool, jobs: &[String]) -> String {
    format!("[server]\nbatch_metrics = {batch}\n{}", jobs.concat())
}

/// A five-vertex chain: a source, three processing vertices asking for the same names, a
/// sink. Per vertex that is five requests a poll; batched, three (one per kind of vertex).
fn chain(name: &str) -> String {
    let mut toml = String::new();
    toml.push_str(&format!(
        r#"
[[job]]
name = "{name}"
[[job.vertex]]
name = "Source: {name}"
parallelism = 3
capacity = 5000.0
[job.vertex.source]
partitions = 6
topic = "{name}"
rate = {{ kind = "constant", value = 900.0 }}
"#
    ));
    let stages = ["parse", "enrich", "score", "Sink: out"];
    for (i, stage) in stages.iter().enumerate() {
        toml.push_str(&format!(
            "[[job.vertex]]\nname = \"{stage}\"\nparallelism = {}\ncapacity = 4000.0\n",
            2 + i
        ));
    }
    let mut from = format!("Source: {name}");
    for stage in stages {
        toml.push_str(&format!(
            "[[job.edge]]\nfrom = \"{from}\"\nto = \"{stage}\"\nship_strategy = \"REBALANCE\"\n"
        ));
        from = stage.to_string();
    }
    toml
}

async fn collector_for(sim: &RunningSim) -> (FlinkClient, JobCollector, String) {
    let (client, settings) = client_and_settings(&config(&sim.url(), ""));
    let job = sim.control().job_ids()[0].clone();
    (
        client,
        JobCollector::new(job.clone(), Arc::clone(&settings)),
        job,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sources_read_the_same_numbers_and_batch_needs_fewer_requests() {
    let per_vertex_sim = start_sim(&scenario(false, &[chain("same")]), true).await;
    let batch_sim = start_sim(&scenario(true, &[chain("same")]), true).await;
    let (pv_client, mut pv, job) = collector_for(&per_vertex_sim).await;
    let (b_client, mut b, b_job) = collector_for(&batch_sim).await;
    assert_eq!(job, b_job, "the same scenario gives the same ids");
    let sims = [per_vertex_sim.control(), batch_sim.control()];
    for ctl in &sims {
        ctl.advance(Duration::from_secs(120));
    }
    let mut now_ms = 1_000_000;
    for poll in 0..6 {
        for ctl in &sims {
            ctl.advance(Duration::from_secs(15));
            ctl.reset_stats();
        }
        now_ms += 15_000;
        let r_pv = pv
            .poll(&pv_client, &overview_of(&pv_client, &job).await, now_ms)
            .await
            .unwrap();
        let r_b = b
            .poll(&b_client, &overview_of(&b_client, &job).await, now_ms)
            .await
            .unwrap();
        assert_eq!(r_pv.source, SourceKind::PerVertex);
        assert_eq!(r_b.source, SourceKind::Batch, "poll {poll}");
        assert_eq!(b.snapshot().metric_source, SourceKind::Batch);
        assert_eq!(pv.snapshot().sample, b.snapshot().sample, "poll {poll}");
        assert_eq!(pv.snapshot().names, b.snapshot().names, "poll {poll}");
        assert_eq!(pv.snapshot().usable, b.snapshot().usable, "poll {poll}");
        if poll >= 1 {
            // Steady state: names cached, one value request per vertex or per group.
            assert!(b.snapshot().usable, "{:?}", b.snapshot().unusable_detail);
            let (pv_stats, b_stats) = (sims[0].stats(), sims[1].stats());
            assert_eq!(r_pv.requests, 5);
            assert_eq!(r_b.requests, 3, "source, three alike, sink");
            assert_eq!(b_stats.by_endpoint[BATCH_VALUES].requests, 3);
            assert!(!b_stats.by_endpoint.contains_key(PER_VERTEX));
            assert_eq!(
                pv_stats.entries_touched, b_stats.entries_touched,
                "the JobManager does the same work either way (poll {poll})"
            );
        } else {
            // The first poll: the probe, then one listing for all five vertices.
            assert_eq!(sims[1].stats().by_endpoint[BATCH_NAMES].requests, 2);
            assert_eq!(sims[0].stats().by_endpoint[PER_VERTEX].requests, 10);
        }
    }
    per_vertex_sim.shutdown().await;
    batch_sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobmanager_without_batch_endpoints_is_probed_once_and_read_per_vertex() {
    let toml = scenario(false, &[chain("first"), chain("second")]);
    let sim = start_sim(&toml, true).await;
    let ctl = sim.control();
    ctl.advance(Duration::from_secs(120));
    let (client, settings) = client_and_settings(&config(&sim.url(), ""));
    let mut collectors: Vec<JobCollector> = ctl
        .job_ids()
        .into_iter()
        .map(|j| JobCollector::new(j, Arc::clone(&settings)))
        .collect();
    assert_eq!(collectors.len(), 2);
    ctl.reset_stats();
    let mut now_ms = 1_000_000;
    for _ in 0..3 {
        ctl.advance(Duration::from_secs(15));
        now_ms += 15_000;
        for c in &mut collectors {
            let overview = overview_of(&client, c.job_id()).await;
            let r = c.poll(&client, &overview, now_ms).await.unwrap();
            assert_eq!(r.source, SourceKind::PerVertex);
            assert_eq!(c.snapshot().metric_source, SourceKind::PerVertex);
        }
    }
    let stats = ctl.stats();
    assert_eq!(
        stats.by_endpoint[BATCH_NAMES].requests, 1,
        "one probe for the JobManager, not one per job or poll"
    );
    assert!(collectors.iter().all(|c| c.snapshot().usable));
    sim.shutdown().await;
}

/// The simulated JobManager on `port`, with or without the batch endpoints.
async fn sim_on(port: u16, batch: bool) -> RunningSim {
    let scenario = Scenario::from_toml_str(&scenario(batch, &[chain("restart")])).unwrap();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match start(scenario.clone(), addr, SimOptions::default()).await {
            Ok(sim) => return sim,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("port {port} not free yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("cannot listen on {port} again: {e}"),
        }
    }
}

/// Requests `sim` answered at `endpoint`.
fn answered(sim: &RunningSim, endpoint: &str) -> u64 {
    sim.control()
        .stats()
        .by_endpoint
        .get(endpoint)
        .map_or(0, |e| e.requests)
}

/// Connect errors the agents of this test binary counted (no other test here has any).
async fn connect_errors(agent: &collector_support::Agent) -> f64 {
    metric_sum(
        &get(&agent.url("/metrics")).await.1,
        "flink_autoscale_agent_errors_total",
        &[("kind", "connect")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_chooses_again_after_the_jobmanager_restarts() {
    let old = start_sim(&scenario(false, &[chain("restart")]), false).await;
    let port = old.addr().port();
    let agent = start_agent(config(&old.url(), "")).await;
    wait_until(Duration::from_secs(10), "per-vertex polls", || async {
        answered(&old, PER_VERTEX) >= 20
    })
    .await;
    assert_eq!(answered(&old, BATCH_NAMES), 1, "one probe");
    assert_eq!(answered(&old, BATCH_VALUES), 0);

    // The JobManager goes away and comes back as a version with the batch endpoints.
    let errors = connect_errors(&agent).await;
    old.shutdown().await;
    wait_until(
        Duration::from_secs(10),
        "the agent sees the JobManager gone",
        || async { connect_errors(&agent).await > errors },
    )
    .await;
    let new = sim_on(port, true).await;
    wait_until(
        Duration::from_secs(15),
        "batch polls after the restart",
        || async { answered(&new, BATCH_VALUES) >= 6 },
    )
    .await;
    assert_eq!(
        answered(&new, PER_VERTEX),
        0,
        "no per-vertex reads once the batch endpoints answer"
    );

    // And back to a released Flink: per vertex again.
    let errors = connect_errors(&agent).await;
    new.shutdown().await;
    wait_until(
        Duration::from_secs(10),
        "the agent sees it gone again",
        || async { connect_errors(&agent).await > errors },
    )
    .await;
    let released = sim_on(port, false).await;
    wait_until(
        Duration::from_secs(15),
        "per-vertex polls again",
        || async { answered(&released, PER_VERTEX) >= 10 },
    )
    .await;
    assert_eq!(answered(&released, BATCH_VALUES), 0);
    assert_eq!(answered(&released, BATCH_NAMES), 1, "probed once more");
    agent.stop().await;
    released.shutdown().await;
}
