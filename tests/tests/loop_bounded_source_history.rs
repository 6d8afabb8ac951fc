//! The agent and the simulator as operators run them, two binaries over loopback: a Flink 2.3
//! job whose bounded source has fewer splits than subtasks (the splitless subtask goes
//! FINISHED and never reports again) with the rescale history switched on
//! (`web.adaptive-scheduler.rescale-history.size`). The agent must still collect the job and
//! decide on it (FINISHED subtasks leave the busy-time completeness rule), never give the
//! source more subtasks than its splits, and its rescale's outcome must carry the history's
//! terminal state for that very rescale.

use std::process::Command;
use std::time::{Duration, Instant};

use flink_autoscale_testkit::{binary, Daemon};
use serde_json::Value;

const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Wall-clock time the agent gets to collect, decide, rescale and verify (1 s polls).
const DEADLINE: Duration = Duration::from_secs(120);

/// Source p3 with 2 splits (subtask 2 FINISHES), REBALANCE to a map whose one subtask is
/// 80 % busy at 1200 records/s, then a sink.
const SCENARIO: &str = r#"
[cluster]
fetcher_update_interval_ms = 1000
config = { "web.adaptive-scheduler.rescale-history.size" = "10" }

[[job]]
name = "bounded-datagen"
downtime_ms = 1000
rescale_delay_ms = 0

[[job.vertex]]
name = "Source: datagen-source"
parallelism = 3
capacity = 20000
source = { splits = 2, rate = { kind = "constant", value = 1200 } }

[[job.vertex]]
name = "cpu-map"
parallelism = 1
capacity = 1500

[[job.vertex]]
name = "Sink: discard"
parallelism = 1
capacity = 100000

[[job.edge]]
from = "Source: datagen-source"
to = "cpu-map"
ship_strategy = "REBALANCE"

[[job.edge]]
from = "cpu-map"
to = "Sink: discard"
ship_strategy = "REBALANCE"
"#;

fn agent_toml(sim: &str, dir: &std::path::Path) -> String {
    format!(
        r#"
[jobmanager]
url = "{sim}"
request_timeout = "1s"
connect_timeout = "500ms"
fetcher_update_interval = "1s"
[collector]
poll_interval = "1s"
poll_deadline = "1s"
backoff_initial = "1s"
backoff_max = "2s"
[server]
listen = "127.0.0.1:0"
shutdown_grace = "1s"
[log]
format = "json"
level = "info"
[autoscaler]
enabled = true
"metrics.window" = "10s"
"stabilization.interval" = "5s"
"utilization.target" = 0.5
"target.utilization.boundary" = 0.1
"restart.time" = "5s"
[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
region = "test-region"
disk_bytes_per_task_manager = 10737418240
verify_deadline = "1min"
[control.gates]
min_interval = "0s"
"#,
        state = dir.join("agent-state.json").display()
    )
}

fn json(daemon: &Daemon, path: &str) -> Value {
    let resp = daemon.get(path);
    assert_eq!(resp.status, 200, "GET {path}: {}", resp.body);
    serde_json::from_str(&resp.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", resp.body))
}

/// The agent's JSON log events with `message`.
fn events(agent: &Daemon, message: &str) -> Vec<Value> {
    format!("{}\n{}", agent.stdout(), agent.stderr())
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["message"] == message || e["fields"]["message"] == message)
        .map(|e| {
            if e["fields"].is_object() {
                e["fields"].clone()
            } else {
                e
            }
        })
        .collect()
}

#[test]
fn a_bounded_source_with_finished_subtasks_is_scaled_and_the_history_confirms_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("scenario.toml"), SCENARIO).expect("scenario");
    let sim = Daemon::start(
        "flink-sim",
        Command::new(binary("flink-sim").expect("flink-sim (cargo build --workspace --bins)"))
            .arg("--scenario")
            .arg(dir.path().join("scenario.toml"))
            .args(["--listen", "127.0.0.1:0"]),
        START_TIMEOUT,
    )
    .expect("start flink-sim")
    .stop_on_drop(Duration::from_secs(2));
    let jid = json(&sim, "/jobs")["jobs"][0]["id"]
        .as_str()
        .expect("a job")
        .to_string();
    std::fs::write(
        dir.path().join("agent.toml"),
        agent_toml(sim.url(), dir.path()),
    )
    .expect("agent config");
    let agent = Daemon::start(
        "agent",
        Command::new(binary("flink-autoscale-agent").expect("the agent binary"))
            .arg("run")
            .arg("--config")
            .arg(dir.path().join("agent.toml")),
        START_TIMEOUT,
    )
    .expect("start the agent")
    .stop_on_drop(Duration::from_secs(2));

    let started = Instant::now();
    let mut saw_finished = false;
    let reported = loop {
        let details = json(&sim, &format!("/jobs/{jid}"));
        saw_finished |= details["vertices"][0]["tasks"]["FINISHED"] == 1;
        if let Some(e) = events(&agent, "outcome reported").into_iter().next() {
            break e;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no outcome within {DEADLINE:?}; the agent's log:\n{}",
            agent.stderr()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!(
        "outcome after {:.1} s: {reported}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        saw_finished,
        "the source's splitless subtask never FINISHED"
    );
    // (a) Collected and decided on although one source subtask never reports again.
    assert_eq!(reported["status"], "applied", "{reported}");
    // And it stays usable at the new parallelism (the gauge shows the latest poll; a poll
    // that races the FINISH of a subtask may miss it once).
    let usable = format!("flink_autoscale_agent_job_data_usable{{job_id=\"{jid}\"}} 1");
    let until = Instant::now() + Duration::from_secs(10);
    while !agent.get("/metrics").body.contains(&usable) {
        assert!(
            Instant::now() < until,
            "the job's data is not usable: {}\n{}",
            agent.get("/metrics").body,
            agent.stderr()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let details = json(&sim, &format!("/jobs/{jid}"));
    let parallelism: Vec<u64> = details["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["parallelism"].as_u64().unwrap())
        .collect();
    assert!(parallelism[1] > 1, "cpu-map scaled up: {parallelism:?}");
    assert!(
        parallelism[0] <= 3,
        "the source never gets more subtasks than before (2 splits): {parallelism:?}"
    );

    // (b) The outcome carries the history's terminal state of that rescale.
    let history = json(&sim, &format!("/jobs/{jid}/rescales/history"));
    let ours = history
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rescaleUuid"] == reported["rescale_uuid"])
        .unwrap_or_else(|| {
            panic!("the outcome's rescale is not in the history: {reported} vs {history}")
        });
    assert_eq!(ours["triggerCause"], "UPDATE_REQUIREMENT", "{ours}");
    assert_eq!(reported["rescale_terminal_state"], ours["terminalState"]);
    assert_eq!(reported["rescale_terminal_state"], "COMPLETED");
    assert_eq!(reported["rescale_terminated_reason"], "SUCCEEDED");
    let details = json(
        &sim,
        &format!(
            "/jobs/{jid}/rescales/details/{}",
            ours["rescaleUuid"].as_str().unwrap()
        ),
    );
    let src = details["vertices"]
        .as_object()
        .unwrap()
        .values()
        .find(|v| v["jobVertexName"] == "Source: datagen-source");
    let post = src.and_then(|v| v["postRescaleParallelism"].as_u64());
    assert!(post.is_some_and(|p| p <= 3), "{details}");
    drop(agent);
    drop(sim);
}
