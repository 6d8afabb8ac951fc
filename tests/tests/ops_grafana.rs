//! `packaging/grafana/flink-autoscale.json` against what the daemons really export. The
//! test runs a simulated JobManager whose job needs more parallelism, a coordinator and an
//! agent that proposes to it and rescales through the adaptive-scheduler API, walks them
//! through the events the dashboard shows, scrapes both `/metrics` until every series the
//! dashboard queries has appeared, and checks the label names the queries use. It also checks
//! the dashboard's structure and that it covers what operators need.

#[allow(dead_code)]
mod ops_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use ops_support::{binary, read_repo_file, Daemon, AGENT_BIN, COORDINATOR_BIN, SIMULATOR_BIN};
use serde_json::Value;

const DASHBOARD: &str = "packaging/grafana/flink-autoscale.json";

/// The prefix every series of ours carries.
const PREFIX: &str = "flink_autoscale_";

/// How long the daemons get, after the scripted events, to export every queried series.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(20);

fn dashboard() -> Value {
    serde_json::from_str(&read_repo_file(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// Every panel, rows' nested panels included.
fn panels(dash: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        out.push(panel);
        if let Some(nested) = panel["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

/// Every PromQL expression: panel targets, annotations and template variable queries.
fn expressions(dash: &Value) -> Vec<String> {
    let mut out: Vec<String> = panels(dash)
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    for annotation in dash["annotations"]["list"].as_array().into_iter().flatten() {
        if let Some(expr) = annotation["expr"].as_str() {
            out.push(expr.to_string());
        }
    }
    for var in dash["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(query) = var["query"]["query"].as_str().or(var["query"].as_str()) {
            if var["type"] == "query" {
                out.push(query.to_string());
            }
        }
    }
    out
}

/// Series names of ours in an expression, each with the label names of the selector that
/// directly follows it (`name{a="x", b=~"y"}`).
fn series_in(expr: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(PREFIX) {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].to_string();
        let mut labels = Vec::new();
        if let Some(selector) = tail[end..].strip_prefix('{') {
            let body = &selector[..selector.find('}').unwrap_or(selector.len())];
            for matcher in body.split(',') {
                let label: String = matcher
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !label.is_empty() {
                    labels.push(label);
                }
            }
        }
        out.push((name, labels));
        rest = &tail[end..];
    }
    out
}

/// Label names of `by (...)` clauses.
fn grouping_labels(expr: &str) -> Vec<String> {
    expr.split("by (")
        .skip(1)
        .flat_map(|after| after[..after.find(')').unwrap_or(0)].split(','))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Series name → label names seen, from a Prometheus text exposition.
fn exported(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..end].to_string()).or_default();
        if let Some(body) = line[end..].strip_prefix('{') {
            let body = &body[..body.rfind('}').unwrap_or(body.len())];
            for pair in body.split("\",") {
                if let Some((label, _)) = pair.split_once('=') {
                    labels.insert(label.trim().to_string());
                }
            }
        }
    }
    out
}

#[test]
fn dashboard_is_well_formed_and_covers_the_operators_questions() {
    let dash = dashboard();
    assert!(dash["uid"].as_str().is_some_and(|u| !u.is_empty()), "a uid");
    let mut ids = BTreeSet::new();
    for panel in panels(&dash) {
        let id = panel["id"].as_u64().expect("panel id");
        assert!(ids.insert(id), "duplicate panel id {id}");
        let grid = &panel["gridPos"];
        let (x, w) = (
            grid["x"].as_u64().expect("x"),
            grid["w"].as_u64().expect("w"),
        );
        assert!(x + w <= 24, "panel {id} is wider than the grid");
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "panel {id} must use the datasource variable"
            );
            assert!(
                panel["targets"].as_array().is_some_and(|t| !t.is_empty()),
                "panel {id} has no query"
            );
        }
    }
    let exprs = expressions(&dash);
    let queried: BTreeSet<String> = exprs
        .iter()
        .flat_map(|e| series_in(e))
        .map(|(name, _)| name)
        .collect();
    // What the issue asks the dashboard to show.
    for needed in [
        "flink_autoscale_agent_vertex_busy_ratio",
        "flink_autoscale_agent_vertex_true_processing_rate_records_per_second",
        "flink_autoscale_agent_vertex_input_records_per_second",
        "flink_autoscale_agent_vertex_parallelism",
        "flink_autoscale_agent_actuations_total",
        "flink_autoscale_coordinator_proposals_total",
        "flink_autoscale_agent_poll_duration_seconds_bucket",
        "flink_autoscale_agent_jobmanager_requests_total",
        "flink_autoscale_agent_jobmanager_response_bytes_total",
        "flink_autoscale_coordinator_http_request_duration_seconds_bucket",
    ] {
        assert!(
            queried.contains(needed),
            "{DASHBOARD} does not query {needed}"
        );
    }
    let proposals_by_verdict_and_reason = exprs.iter().any(|e| {
        e.contains("flink_autoscale_coordinator_proposals_total")
            && grouping_labels(e).iter().any(|l| l == "verdict")
            && grouping_labels(e).iter().any(|l| l == "reason")
    });
    assert!(
        proposals_by_verdict_and_reason,
        "proposals by verdict and reason"
    );
    let rescale_marks = dash["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| {
            a["enable"] == true
                && a["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains("actuations_total"))
        });
    assert!(rescale_marks, "an enabled annotation marks rescales");
}

/// A scenario whose aggregation runs far above its capacity, so the agent proposes a
/// scale-up within seconds; its job uses short windows and checkpoints often (the disk gate
/// needs a checkpoint size).
const SCENARIO: &str = r#"
[cluster]
slots_per_taskmanager = 4

[[job]]
name = "ops-grafana-overloaded"
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

/// Polls `check` every 200 ms until it holds; panics with `what` after `timeout`.
fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
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
fn has_series(daemon: &Daemon, name: &str, label: Option<(&str, &str)>) -> bool {
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
fn start_coordinator(dir: &std::path::Path, port: u16, jobmanager: std::net::SocketAddr) -> Daemon {
    Daemon::start(
        COORDINATOR_BIN,
        Command::new(binary(COORDINATOR_BIN))
            .args(["run", "--config"])
            .arg(dir.join("coordinator.toml"))
            .envs(ops_support::daemon_test_env("coordinator", dir, jobmanager))
            .env(
                "FLINK_AUTOSCALE_COORDINATOR_LISTEN",
                format!("127.0.0.1:{port}"),
            ),
        Duration::from_secs(30),
    )
}

fn agent_config(
    jobmanager: std::net::SocketAddr,
    coordinator_port: u16,
    dir: &std::path::Path,
) -> String {
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

/// Drives the system through the events the dashboard shows, then checks every queried
/// series: JobManager errors, the coordinator down (the agent fails closed), a refusal (disk
/// gate, through a cluster override), an approval and an applied rescale, an unauthenticated
/// request.
#[test]
fn every_queried_series_is_exported_by_the_running_daemons() {
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
    );
    ops_support::daemon_test_config("coordinator", dir.path());
    std::fs::write(
        dir.path().join("agent.token"),
        format!("{}\n", ops_support::AGENT_TOKEN),
    )
    .expect("agent token");
    let admin = Some(ops_support::ADMIN_TOKEN);
    let overrides = format!("/v1/clusters/{CLUSTER}/overrides");

    // A coordinator that will refuse this cluster's plans for lack of disk; then it goes down.
    let mut coordinator = start_coordinator(dir.path(), 0, sim.addr);
    let port = coordinator.addr.port();
    let set = ops_support::http_request(
        coordinator.addr,
        "PUT",
        &overrides,
        admin,
        Some(r#"{"disk_bytes_per_task_manager": 1}"#),
    );
    assert_eq!(set.status, 200, "setting the disk override: {}", set.body);
    let stopped = coordinator.terminate(Duration::from_secs(30));
    assert!(
        stopped.is_some_and(|s| s.success()),
        "coordinator stop: {stopped:?}"
    );

    // The JobManager fails at first; the agent counts the errors.
    let fault = ops_support::http_request(
        sim.addr,
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
    std::fs::write(&agent_toml, agent_config(sim.addr, port, dir.path())).expect("agent config");
    let agent = Daemon::start(
        AGENT_BIN,
        Command::new(binary(AGENT_BIN))
            .args(["run", "--config"])
            .arg(&agent_toml),
        Duration::from_secs(30),
    );
    let agent_stderr = || agent.stderr();
    wait_until("agent JobManager errors", Duration::from_secs(20), || {
        has_series(&agent, "flink_autoscale_agent_errors_total", None)
    });
    let cleared = ops_support::http_request(sim.addr, "DELETE", "/_sim/faults", None, None);
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
    let coordinator = start_coordinator(dir.path(), port, sim.addr);
    wait_until("a refusal", Duration::from_secs(30), || {
        has_series(
            &coordinator,
            "flink_autoscale_coordinator_refusal_reasons_total",
            None,
        )
    });
    let unset = ops_support::http_request(coordinator.addr, "DELETE", &overrides, admin, None);
    assert!(unset.status < 300, "clearing the override: {}", unset.body);
    wait_until("an applied rescale", Duration::from_secs(40), || {
        has_series(
            &agent,
            "flink_autoscale_agent_actuations_total",
            Some(("result", "applied")),
        )
    });
    let unauthorized = ops_support::http_get(coordinator.addr, "/v1/regions");
    assert_eq!(unauthorized.status, 401, "GET /v1/regions without a token");

    let dash = dashboard();
    let exprs = expressions(&dash);
    let deadline = Instant::now() + SCRAPE_DEADLINE;
    let (missing, seen) = loop {
        let mut seen = exported(&agent.get("/metrics").body);
        seen.extend(exported(&coordinator.get("/metrics").body));
        let missing: BTreeSet<String> = exprs
            .iter()
            .flat_map(|e| series_in(e))
            .map(|(name, _)| name)
            .filter(|name| !seen.contains_key(name))
            .collect();
        if missing.is_empty() || Instant::now() >= deadline {
            break (missing, seen);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        missing.is_empty(),
        "{DASHBOARD} queries series that were not exported within {SCRAPE_DEADLINE:?}: {missing:?}\nexported: {:?}\nagent stderr:\n{}",
        seen.keys().filter(|k| k.starts_with(PREFIX)).collect::<Vec<_>>(),
        agent_stderr()
    );

    // Label names in selectors and `by (...)` exist on the series they refer to.
    for expr in &exprs {
        let series = series_in(expr);
        for (name, labels) in &series {
            for label in labels {
                assert!(
                    seen[name].contains(label),
                    "{DASHBOARD}: {name} has no label {label} (it has {:?}) in: {expr}",
                    seen[name]
                );
            }
        }
        for label in grouping_labels(expr) {
            let known = label == "le" || series.iter().any(|(name, _)| seen[name].contains(&label));
            assert!(
                known,
                "{DASHBOARD}: no series in `{expr}` has the label {label}"
            );
        }
    }
}

#[test]
fn series_and_labels_are_extracted() {
    let expr = r#"sum by (job_id, result) (increase(flink_autoscale_agent_actuations_total{result="applied", job_id=~"$job_id"}[1m])) / flink_autoscale_x_total"#;
    assert_eq!(
        series_in(expr),
        vec![
            (
                "flink_autoscale_agent_actuations_total".to_string(),
                vec!["result".to_string(), "job_id".to_string()]
            ),
            ("flink_autoscale_x_total".to_string(), vec![]),
        ]
    );
    assert_eq!(grouping_labels(expr), ["job_id", "result"]);
    let text = "# HELP a x\na_total{job_id=\"j\",verdict=\"approved\"} 1\nb 2\n";
    let seen = exported(text);
    assert_eq!(
        seen["a_total"],
        BTreeSet::from(["job_id".to_string(), "verdict".to_string()])
    );
    assert!(seen["b"].is_empty());
}
