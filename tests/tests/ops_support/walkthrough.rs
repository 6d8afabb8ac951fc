//! The demo-like walk-through the dashboard and alert tests observe: a simulated JobManager
//! whose job needs more parallelism, a coordinator and an agent that proposes to it and
//! rescales through the adaptive-scheduler API, taken through JobManager errors, a coordinator
//! outage (the agent fails closed), a refusal (disk gate, through a cluster override), an
//! approval, an applied rescale and an unauthenticated request.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{binary, Daemon, AGENT_BIN, COORDINATOR_BIN, SIMULATOR_BIN};

/// A scenario whose aggregation runs far above its capacity, so the agent proposes a
/// scale-up within seconds; its job uses short windows and checkpoints often (the disk gate
/// needs a checkpoint size).
const SCENARIO: &str = r#"
[cluster]
slots_per_taskmanager = 4

[[job]]
name = "ops-overloaded"
downtime_ms = 1000
checkpoint_interval_ms = 500
state_size_bytes = 1_000_000

[job.config]
"job.autoscaler.enabled" = "true"
"job.autoscaler.metrics.window" = "4s"
"job.autoscaler.stabilization.interval" = "0s"

[[job.vertex]]
name = "Source: Orders"
parallelism = 2
max_parallelism = 64
capacity = 20000
source = { partitions = 8, topic = "orders", rate = { kind = "constant", value = 8000 } }

[[job.vertex]]
name = "Aggregate"
parallelism = 2
max_parallelism = 64
capacity = 1000

[[job.edge]]
from = "Source: Orders"
to = "Aggregate"
ship_strategy = "HASH"
"#;

/// The cluster the test agent reports, for coordinator overrides.
const CLUSTER: &str = "ops-test";

/// The daemons, still running after the walk-through, and the directory of their files.
pub struct Walkthrough {
    pub agent: Daemon,
    pub coordinator: Daemon,
    pub sim: Daemon,
    pub dir: tempfile::TempDir,
}

/// Polls `check` every 200 ms until it holds; panics with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether a scrape of `daemon` has a series named `name` (optionally with `label="value"`).
pub fn has_series(daemon: &Daemon, name: &str, label: Option<(&str, &str)>) -> bool {
    daemon.get("/metrics").body.lines().any(|line| {
        line.starts_with(name)
            && line[name.len()..].starts_with(['{', ' '])
            && match label {
                None => true,
                Some((k, v)) => line.contains(&format!("{k}=\"{v}\"")),
            }
    })
}

/// Starts the coordinator of the test on `port` with the token files and SQLite in `dir`.
fn start_coordinator(dir: &Path, port: u16, jobmanager: SocketAddr) -> Daemon {
    Daemon::start(
        COORDINATOR_BIN,
        Command::new(binary(COORDINATOR_BIN))
            .args(["run", "--config"])
            .arg(dir.join("coordinator.toml"))
            .envs(super::daemon_test_env("coordinator", dir, jobmanager))
            .env(
                "FLINK_AUTOSCALE_COORDINATOR__LISTEN",
                format!("127.0.0.1:{port}"),
            ),
        Duration::from_secs(30),
    )
    .expect("start the coordinator")
}

fn agent_config(jobmanager: SocketAddr, coordinator_port: u16, dir: &Path) -> String {
    format!(
        r#"[jobmanager]
url = "http://{jobmanager}"
fetcher_update_interval = "1s"
request_timeout = "1s"

[collector]
poll_interval = "1s"
poll_deadline = "1s"
backoff_initial = "1s"
backoff_max = "2s"
# The checkpoint size must be known for the disk gate to refuse.
slow_refresh_interval = "2s"

[server]
listen = "127.0.0.1:0"

# The window the agent keeps (and must fill before deciding) follows the job's short one.
[autoscaler]
"metrics.window" = "4s"
"stabilization.interval" = "0s"

[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
cluster_id = "{CLUSTER}"
region = "ops-test-region"
slots_per_task_manager = 4
disk_bytes_per_task_manager = 100000000000
verify_deadline = "30s"
refusal_backoff = "1s"
retry_initial = "1s"
retry_max = "2s"

[control.coordinator]
url = "http://127.0.0.1:{coordinator_port}"
token_file = "{token}"
"#,
        state = dir.join("agent-state.json").display(),
        token = dir.join("agent.token").display(),
    )
}

/// Runs the walk-through; `started(name, addr)` is called as soon as the coordinator
/// (`"coordinator"`, each start on the same address) and the agent (`"agent"`) serve.
pub fn run(started: &mut dyn FnMut(&str, SocketAddr)) -> Walkthrough {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let sim = Daemon::start(
        SIMULATOR_BIN,
        Command::new(binary(SIMULATOR_BIN))
            .arg("--scenario")
            .arg(&scenario)
            .args(["--listen", "127.0.0.1:0"]),
        Duration::from_secs(30),
    )
    .expect("start the simulator");
    super::daemon_test_config("coordinator", dir.path());
    flink_autoscale_testkit::write_private(
        &dir.path().join("agent.token"),
        &format!("{}\n", super::AGENT_TOKEN),
    )
    .expect("agent token");
    let admin = Some(super::ADMIN_TOKEN);
    let overrides = format!("/v1/clusters/{CLUSTER}/overrides");

    // A coordinator that will refuse this cluster's plans for lack of disk; then it goes down.
    let mut coordinator = start_coordinator(dir.path(), 0, sim.addr());
    started("coordinator", coordinator.addr());
    let port = coordinator.addr().port();
    let set = super::http_request(
        coordinator.addr(),
        "PUT",
        &overrides,
        admin,
        Some(r#"{"disk_bytes_per_task_manager": 1}"#),
    );
    assert_eq!(set.status, 200, "setting the disk override: {}", set.body);
    let stopped = coordinator.stop(Duration::from_secs(30));
    assert!(
        stopped.is_some_and(|s| s.success()),
        "coordinator stop: {stopped:?}"
    );

    // The JobManager fails at first; the agent counts the errors.
    let fault = super::http_request(
        sim.addr(),
        "PUT",
        "/_sim/faults",
        None,
        Some(r#"{"fault": "status", "status": 500}"#),
    );
    assert!(
        fault.status < 300,
        "sim fault: {} {}",
        fault.status,
        fault.body
    );
    let agent_toml = dir.path().join("agent.toml");
    std::fs::write(&agent_toml, agent_config(sim.addr(), port, dir.path())).expect("agent config");
    let agent = Daemon::start(
        AGENT_BIN,
        Command::new(binary(AGENT_BIN))
            .args(["run", "--config"])
            .arg(&agent_toml),
        Duration::from_secs(30),
    )
    .expect("start the agent");
    started("agent", agent.addr());
    wait_until("agent JobManager errors", Duration::from_secs(20), || {
        has_series(&agent, "flink_autoscale_agent_errors_total", None)
    });
    let cleared = super::http_request(sim.addr(), "DELETE", "/_sim/faults", None, None);
    assert!(cleared.status < 300, "sim fault clear: {}", cleared.body);

    // A full window, a proposal, no coordinator: the agent fails closed and says so.
    wait_until("agent coordinator errors", Duration::from_secs(40), || {
        has_series(
            &agent,
            "flink_autoscale_agent_gatekeeper_errors_total",
            None,
        )
    });

    // The coordinator comes back with its store: the disk gate refuses.
    let coordinator = start_coordinator(dir.path(), port, sim.addr());
    started("coordinator", coordinator.addr());
    wait_until("a refusal", Duration::from_secs(30), || {
        has_series(
            &coordinator,
            "flink_autoscale_coordinator_refusal_reasons_total",
            None,
        )
    });
    let unset = super::http_request(coordinator.addr(), "DELETE", &overrides, admin, None);
    assert!(unset.status < 300, "clearing the override: {}", unset.body);
    wait_until("an applied rescale", Duration::from_secs(40), || {
        has_series(
            &agent,
            "flink_autoscale_agent_actuations_total",
            Some(("result", "applied")),
        )
    });
    let unauthorized = super::http_get(coordinator.addr(), "/v1/regions");
    assert_eq!(unauthorized.status, 401, "GET /v1/regions without a token");
    Walkthrough {
        agent,
        coordinator,
        sim,
        dir,
    }
}
