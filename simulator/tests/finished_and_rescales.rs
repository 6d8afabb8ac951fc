//! Flink versions' behaviours the simulator serves, checked against real Flink 2.3.0 samples
//! (`tests/flink-samples/finished-subtasks/`, `rescale-history/`): a bounded source with
//! fewer splits than subtasks, whose splitless subtasks (and those they feed through FORWARD
//! edges) go FINISHED; and the rescale history (`/jobs/:jid/rescales/*`) that a scenario
//! switches on with `web.adaptive-scheduler.rescale-history.size`.

mod common;

use common::Sim;
use serde_json::{json, Value};

fn sample(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/flink-samples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Keys and JSON kinds of `sample` that `ours` lacks or has with another kind (a `null` in the
/// sample is "optional"; objects keyed by 32-hex ids compare against the sample's first value).
fn diff(sample: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    let hex = |k: &String| k.len() == 32 && k.bytes().all(|c| c.is_ascii_hexdigit());
    match (sample, ours) {
        (Value::Null, _) => {}
        (Value::Object(a), Value::Object(b)) => {
            if !a.is_empty() && a.keys().chain(b.keys()).all(hex) {
                let first = a.values().next().unwrap();
                for (k, v) in b {
                    diff(first, v, &format!("{path}.<{k}>"), out);
                }
                return;
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                out.push(format!("{path}: missing key \"{k}\""));
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}: extra key \"{k}\""));
            }
            for (k, v) in a {
                if let Some(w) = b.get(k) {
                    diff(v, w, &format!("{path}.{k}"), out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let Some(first) = a.first() {
                for (i, w) in b.iter().enumerate() {
                    diff(a.get(i).unwrap_or(first), w, &format!("{path}[{i}]"), out);
                }
            }
        }
        (a, b) if std::mem::discriminant(a) != std::mem::discriminant(b) => {
            out.push(format!("{path}: sample has {a}, simulator gives {b}"));
        }
        _ => {}
    }
}

fn assert_same_shape(sample_file: &str, ours: &Value) {
    let mut out = Vec::new();
    diff(&sample(sample_file), ours, "$", &mut out);
    assert!(out.is_empty(), "{sample_file} differs:\n{}", out.join("\n"));
}

/// The captured probe job: a datagen source with `splits` splits at `p` subtasks, FORWARD to
/// cpu-map and filter (same `p`), HASH to keyed-sum p3, REBALANCE to the sink p1.
fn probe_toml(p: u32, splits: u32, cluster: &str) -> String {
    format!(
        r#"
{cluster}
[[job]]
name = "flink-load-probe"
downtime_ms = 1000
rescale_delay_ms = 0

[[job.vertex]]
name = "Source: datagen-source"
parallelism = {p}
capacity = 20000
source = {{ splits = {splits}, rate = {{ kind = "constant", value = 2000 }} }}

[[job.vertex]]
name = "cpu-map"
parallelism = {p}
capacity = 2600

[[job.vertex]]
name = "filter"
parallelism = {p}
capacity = 50000
selectivity = 0.9

[[job.vertex]]
name = "keyed-sum"
parallelism = 3
capacity = 30000

[[job.vertex]]
name = "discard-sink: Writer"
parallelism = 1
capacity = 100000

[[job.edge]]
from = "Source: datagen-source"
to = "cpu-map"
ship_strategy = "FORWARD"

[[job.edge]]
from = "cpu-map"
to = "filter"
ship_strategy = "FORWARD"

[[job.edge]]
from = "filter"
to = "keyed-sum"
ship_strategy = "HASH"

[[job.edge]]
from = "keyed-sum"
to = "discard-sink: Writer"
ship_strategy = "REBALANCE"
"#
    )
}

const HISTORY_ON: &str =
    "[cluster]\nconfig = { \"web.adaptive-scheduler.rescale-history.size\" = \"10\" }";

#[tokio::test]
async fn splitless_subtasks_finish_as_on_flink_2_3() {
    // The captured case: the source chain at 3 subtasks, 2 splits.
    let sim = Sim::from_toml(&probe_toml(3, 2, "")).await;
    let (jid, src, map, keyed) = (sim.job(), sim.vertex(0), sim.vertex(1), sim.vertex(3));
    let busy = "subtasks/metrics?get=busyTimeMsPerSecond&agg=min,max,avg,sum";
    sim.advance_s(1);
    // Right after the start every subtask runs.
    let details = sim.get_ok(&format!("/jobs/{jid}")).await;
    assert_eq!(details["vertices"][0]["tasks"]["FINISHED"], 0, "{details}");

    sim.advance_s(60);
    let overview = sim.get_ok("/jobs/overview").await;
    assert_same_shape("finished-subtasks/jobs_overview.json", &overview);
    let real = sample("finished-subtasks/jobs_overview.json");
    assert_eq!(overview["jobs"][0]["tasks"], real["jobs"][0]["tasks"]);

    let details = sim.get_ok(&format!("/jobs/{jid}")).await;
    assert_same_shape("finished-subtasks/jobs_JID.json", &details);
    let real = sample("finished-subtasks/jobs_JID.json");
    for v in 0..5 {
        assert_eq!(
            details["vertices"][v]["tasks"], real["vertices"][v]["tasks"],
            "vertex {v}"
        );
        assert_eq!(details["vertices"][v]["status"], "RUNNING");
    }
    assert_eq!(details["status-counts"]["RUNNING"], 5);

    // The last subtask of the source and of its forward chain FINISHED and reports nothing.
    for vid in [&src, &map] {
        let vertex = sim.get_ok(&format!("/jobs/{jid}/vertices/{vid}")).await;
        let states: Vec<&str> = vertex["subtasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["RUNNING", "RUNNING", "FINISHED"]);
        let gone = sim
            .get_ok(&format!(
                "/jobs/{jid}/vertices/{vid}/subtasks/2/metrics?get=busyTimeMsPerSecond"
            ))
            .await;
        assert_eq!(gone, json!([]), "a FINISHED subtask reports no metrics");
        sim.get_ok(&format!(
            "/jobs/{jid}/vertices/{vid}/subtasks/1/metrics?get=busyTimeMsPerSecond"
        ))
        .await
        .as_array()
        .filter(|a| a.len() == 1)
        .expect("a running subtask reports");
    }
    // The two running source subtasks carry the whole input (2000 rec/s between them).
    let out = sim
        .get_ok(&format!(
            "/jobs/{jid}/vertices/{src}/subtasks/metrics?get=numRecordsOutPerSecond&agg=sum"
        ))
        .await;
    let sum = out[0]["sum"].as_f64().unwrap();
    assert!((sum - 2000.0).abs() < 1.0, "{out}");
    // keyed-sum (HASH input) keeps its 3 running subtasks.
    let keyed_busy = sim
        .get_ok(&format!("/jobs/{jid}/vertices/{keyed}/{busy}"))
        .await;
    assert_eq!(keyed_busy.as_array().unwrap().len(), 1, "{keyed_busy}");
    sim.stop().await;
}

#[tokio::test]
async fn a_source_without_splits_left_finishes_with_its_forward_chain() {
    let sim = Sim::from_toml(&probe_toml(2, 0, "")).await;
    let jid = sim.job();
    sim.advance_s(30);
    let details = sim.get_ok(&format!("/jobs/{jid}")).await;
    let states: Vec<&str> = details["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["FINISHED", "FINISHED", "FINISHED", "RUNNING", "RUNNING"]
    );
    assert_eq!(details["status-counts"]["FINISHED"], 3);
    assert_eq!(details["state"], "RUNNING");
    let overview = sim.get_ok("/jobs/overview").await;
    assert_eq!(overview["jobs"][0]["tasks"]["finished"], 6);
    assert_eq!(overview["jobs"][0]["tasks"]["running"], 4);
    sim.stop().await;
}

#[tokio::test]
async fn splits_and_partitions_together_are_refused() {
    let text = probe_toml(2, 2, "").replace("splits = 2,", "splits = 2, partitions = 4,");
    let err = flink_autoscale_simulator::Scenario::from_toml_str(&text)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("splits"), "{err}");
    let bad = probe_toml(
        2,
        2,
        "[cluster]\nconfig = { \"web.adaptive-scheduler.rescale-history.size\" = \"ten\" }",
    );
    let err = flink_autoscale_simulator::Scenario::from_toml_str(&bad)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("rescale-history.size"), "{err}");
}

fn requirements(sim: &Sim, bounds: &[(u32, u32)]) -> String {
    let mut m = serde_json::Map::new();
    for (vid, (low, up)) in sim.control.vertex_ids(&sim.job()).iter().zip(bounds) {
        m.insert(
            vid.clone(),
            json!({ "parallelism": { "lowerBound": low, "upperBound": up } }),
        );
    }
    Value::Object(m).to_string()
}

#[tokio::test]
async fn the_rescale_history_follows_a_rescale_as_flink_2_3_reports_it() {
    let sim = Sim::from_toml(&probe_toml(2, 2, HISTORY_ON)).await;
    let (jid, src) = (sim.job(), sim.vertex(0));
    let base = format!("/jobs/{jid}/rescales");
    sim.advance_s(30);
    let history = sim.get_ok(&format!("{base}/history")).await;
    assert_same_shape("rescale-history/jobs_JID_rescales_history.json", &history);
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");
    assert_eq!(history[0]["triggerCause"], "INITIAL_SCHEDULE");
    assert_eq!(history[0]["terminalState"], "COMPLETED");

    // The source chain 2 -> 4: in progress until the downtime (1 s) is over.
    let rr = format!("/jobs/{jid}/resource-requirements");
    let up = [(1, 4), (1, 4), (1, 4), (1, 3), (1, 1)];
    let (status, _) = sim.send("PUT", &rr, &requirements(&sim, &up)).await;
    assert_eq!(status, 200);
    let history = sim.get_ok(&format!("{base}/history")).await;
    assert_same_shape(
        "rescale-history/jobs_JID_rescales_history_in_progress.json",
        &history,
    );
    assert_eq!(history[0]["terminalState"], Value::Null);
    assert_eq!(history[0]["triggerCause"], "UPDATE_REQUIREMENT");
    let overview = sim.get_ok(&format!("{base}/overview")).await;
    assert_eq!(overview["rescalesCounts"]["inProgress"], 1, "{overview}");

    sim.advance_s(5);
    let history = sim.get_ok(&format!("{base}/history")).await;
    assert_same_shape("rescale-history/jobs_JID_rescales_history.json", &history);
    let newest = &history[0];
    assert_eq!(
        (&newest["terminalState"], &newest["terminatedReason"]),
        (&json!("COMPLETED"), &json!("SUCCEEDED"))
    );
    let uuid = newest["rescaleUuid"].as_str().unwrap();
    let details = sim.get_ok(&format!("{base}/details/{uuid}")).await;
    assert_same_shape(
        "rescale-history/jobs_JID_rescales_details_UUID.json",
        &details,
    );
    let real = sample("rescale-history/jobs_JID_rescales_details_UUID.json");
    let names = |d: &Value| -> Vec<String> {
        d["schedulerStates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&details), names(&real));
    let source = &details["vertices"][&src];
    assert_eq!(
        (
            &source["preRescaleParallelism"],
            &source["postRescaleParallelism"]
        ),
        (&json!(2), &json!(4))
    );
    assert_eq!(
        details["endTimestampInMillis"],
        newest["endTimestampInMillis"]
    );

    // Requirements that change no parallelism are IGNORED at once.
    let (status, _) = sim
        .send(
            "PUT",
            &rr,
            &requirements(&sim, &[(2, 4), (1, 4), (1, 4), (1, 3), (1, 1)]),
        )
        .await;
    assert_eq!(status, 200);
    let overview = sim.get_ok(&format!("{base}/overview")).await;
    assert_same_shape("rescale-history/jobs_JID_rescales_overview.json", &overview);
    assert_eq!(
        overview["rescalesCounts"],
        json!({"ignored": 1, "inProgress": 0, "completed": 2, "failed": 0})
    );
    assert_eq!(
        overview["latest"]["ignored"]["terminatedReason"],
        "NO_RESOURCES_OR_PARALLELISMS_CHANGE"
    );
    assert_eq!(overview["latest"]["completed"]["rescaleUuid"], uuid);
    assert_eq!(overview["latest"]["failed"], Value::Null);

    // A failover restart is a rescale of its own, RECOVERABLE_FAILOVER, at the same parallelism.
    sim.control.restart_job(&jid);
    let history = sim.get_ok(&format!("{base}/history")).await;
    assert_eq!(
        history[0]["triggerCause"], "RECOVERABLE_FAILOVER",
        "{history}"
    );
    assert_eq!(history[0]["terminalState"], Value::Null);
    sim.advance_s(5);
    let history = sim.get_ok(&format!("{base}/history")).await;
    assert_eq!(history[0]["terminalState"], "COMPLETED", "{history}");
    let failover = history[0]["rescaleUuid"].as_str().unwrap();
    let details = sim.get_ok(&format!("{base}/details/{failover}")).await;
    assert_eq!(
        details["vertices"][&src]["postRescaleParallelism"], 4,
        "{details}"
    );

    // Unknown and malformed ids answer as Flink does.
    let (status, _) = sim
        .get(&format!("{base}/details/00000000000000000000000000000000"))
        .await;
    assert_eq!(status, 404);
    let (status, _) = sim.get(&format!("{base}/details/not-a-uuid")).await;
    assert_eq!(status, 400);
    sim.stop().await;
}

#[tokio::test]
async fn the_rescale_history_is_off_by_default_and_unknown_before_2_3() {
    let sim = Sim::from_toml(&probe_toml(2, 2, "")).await;
    let (status, body) = sim
        .get(&format!("/jobs/{}/rescales/overview", sim.job()))
        .await;
    assert_eq!(status, 404);
    assert!(
        body.to_string()
            .contains("web.adaptive-scheduler.rescale-history.size"),
        "{body}"
    );
    sim.stop().await;

    let old = "[cluster]\nflink_version = \"1.20.5\"\nconfig = { \"web.adaptive-scheduler.rescale-history.size\" = \"10\" }";
    let sim = Sim::from_toml(&probe_toml(2, 2, old)).await;
    let jid = sim.job();
    let (status, body) = sim.get(&format!("/jobs/{jid}/rescales/history")).await;
    assert_eq!(status, 404);
    assert!(body.to_string().contains("Not found"), "{body}");
    // Before 2.3, neither schedulerType nor jobType.
    let overview = sim.get_ok("/jobs/overview").await;
    assert!(
        overview["jobs"][0].get("schedulerType").is_none(),
        "{overview}"
    );
    let details = sim.get_ok(&format!("/jobs/{jid}")).await;
    assert!(details.get("schedulerType").is_none(), "{details}");
    sim.stop().await;
}
