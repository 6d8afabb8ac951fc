//! `packaging/grafana/flink-autoscale.json` against what the daemons really export. The
//! test walks a simulator, a coordinator and an agent through the events the dashboard shows
//! (`ops_support/walkthrough.rs`), scrapes both `/metrics` until every series the dashboard
//! queries has appeared, and checks the label names the queries use. It also checks the
//! dashboard's structure and that it covers what operators need. `ops_prometheus.rs` has a
//! real Prometheus evaluate the same queries.

#[allow(dead_code)]
mod ops_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ops_support::dashboard::{dashboard, expressions, panels, DASHBOARD};
use ops_support::walkthrough;

/// The prefix every series of ours carries.
const PREFIX: &str = "flink_autoscale_";

/// How long the daemons get, after the scripted events, to export every queried series.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(20);

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

/// Drives the system through the events the dashboard shows (see
/// [`ops_support::walkthrough`]), then checks every queried series and label.
#[test]
fn every_queried_series_is_exported_by_the_running_daemons() {
    let walk = walkthrough::run(&mut |_, _| {});
    let (agent, coordinator) = (&walk.agent, &walk.coordinator);
    let agent_stderr = || agent.stderr();

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
