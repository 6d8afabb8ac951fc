//! Real Flink: an agent that starts watching the moment the job is RUNNING. For its first
//! seconds the JobManager lists no metric names (`[]`), then reports start-up values (busy
//! 1000 ms/s, rates 0). The agent must mark such polls unusable and get past them by itself,
//! without a restart, to a usable poll with every vertex's names resolved.

use std::time::{Duration, Instant};

use flink_autoscale_tests::flink_harness::{
    alongside, job_in_round, job_status, must, run_collect, start_agent_setup, AgentSetup,
    ClusterSettings, LoadJobSpec, Polls,
};
use serde_json::Value;

const TEST_BUDGET: Duration = Duration::from_secs(420);
/// At least Flink's `metrics.fetcher.update-interval` (10 s): faster polls are stale.
const POLL_INTERVAL: &str = "11s";
/// Flink lists a vertex's names ~8 s after RUNNING; the agent gets this long to catch up.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_2_3_0() {
    alongside(TEST_BUDGET, "the start-up scenario", scenario("2.3.0")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_1_20_5() {
    alongside(TEST_BUDGET, "the start-up scenario", scenario("1.20.5")).await;
}

async fn scenario(version: &str) {
    let spec = LoadJobSpec::at_rate(1000.0);
    let AgentSetup {
        agent,
        cluster,
        job,
    } = must(
        "start the cluster and the load job, locate the agent",
        start_agent_setup(ClusterSettings::on(version), &spec).await,
    );
    let running = Instant::now();
    let jid = job.job_id.clone();
    let details = must(
        "GET /jobs/:jid",
        cluster.rest().get(&format!("/jobs/{jid}")).await,
    );
    let (_, vertices) = job_status(&details);
    let vertex_ids: Vec<String> = vertices.iter().map(|v| v.id.clone()).collect();

    let usable_with_all_names = |round: &Value| {
        job_in_round(round, &jid).is_some_and(|view| {
            view["usable"] == true
                && vertex_ids
                    .iter()
                    .all(|id| view["names"][id]["busy"] == "busyTimeMsPerSecond")
        })
    };
    let done = |rounds: &[Value]| rounds.last().is_some_and(usable_with_all_names);
    let polls = Polls::Until {
        interval: POLL_INTERVAL,
        done: &done,
    };
    let rounds = must(
        "the agent, watching from job start, reaches a usable poll with all names resolved",
        run_collect(&agent, cluster.rest_url(), polls, RECOVERY_TIMEOUT).await,
    );
    for (i, round) in rounds.iter().enumerate() {
        let view = job_in_round(round, &jid).unwrap_or(&Value::Null);
        eprintln!(
            "[start-up] round {}: {} requests, usable {}, reason {}, {}",
            i + 1,
            round["requests"],
            view["usable"],
            view["unusable_reason"],
            view["unusable_detail"]
        );
    }
    eprintln!(
        "[timing] Flink {version}: RUNNING -> agent's first usable poll with all names: {:.1} s ({} polls)",
        running.elapsed().as_secs_f64(),
        rounds.len()
    );
    // Every poll before the usable one must say why it is not usable.
    for round in &rounds[..rounds.len() - 1] {
        let view = job_in_round(round, &jid).unwrap_or(&Value::Null);
        assert!(
            view["usable"] == false && view["unusable_reason"].is_string(),
            "a start-up poll without all names must be unusable, with a reason: {view}"
        );
    }
}
