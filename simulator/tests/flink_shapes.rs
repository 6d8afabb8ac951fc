//! The simulator's responses have the shapes of real Flink 2.3 responses (captured samples in
//! `tests/flink-samples/`): same keys, same JSON types, values as strings where Flink uses
//! strings, and Flink's quirks for unknown ids and names.

mod common;

use common::{plain, Sim};
use serde_json::Value;

fn sample(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/flink-samples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Collects differences in keys and JSON types. A `null` in the sample means "optional".
/// Objects keyed by ids (`id_keyed`) compare every value against the sample's first value.
fn diff(sample: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    match (sample, ours) {
        (Value::Null, _) => {}
        (Value::Object(a), Value::Object(b)) => {
            let id_keyed = a
                .keys()
                .chain(b.keys())
                .all(|k| k.len() == 32 && k.bytes().all(|c| c.is_ascii_hexdigit()));
            if id_keyed && !a.is_empty() {
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
            // Compare element-wise where the sample has an element (plan nodes line up with the
            // captured job's), else against the sample's first element.
            if let Some(first) = a.first() {
                for (i, w) in b.iter().enumerate() {
                    diff(a.get(i).unwrap_or(first), w, &format!("{path}[{i}]"), out);
                }
            }
        }
        (a, b) if kind(a) != kind(b) => out.push(format!(
            "{path}: sample is {} ({a}), simulator gives {} ({b})",
            kind(a),
            kind(b)
        )),
        _ => {}
    }
}

fn assert_same_shape(sample_file: &str, ours: &Value) {
    let mut out = Vec::new();
    diff(&sample(sample_file), ours, "$", &mut out);
    assert!(out.is_empty(), "{sample_file} differs:\n{}", out.join("\n"));
}

/// The forward-chain scenario models the captured job (source, cpu-map, filter, keyed-sum, sink).
async fn load_job() -> (Sim, String, String) {
    let sim = Sim::from_file("forward-chain.toml").await;
    sim.advance_s(90);
    let (jid, cpu_map) = (sim.job(), sim.vertex(1));
    (sim, jid, cpu_map)
}

#[tokio::test]
async fn cluster_endpoints_match_flink() {
    let (sim, _, _) = load_job().await;
    for (path, file) in [
        ("/overview", "overview.json"),
        ("/config", "config.json"),
        ("/jobs", "jobs.json"),
        ("/jobs/overview", "jobs_overview.json"),
        ("/jobmanager/config", "jobmanager_config.json"),
        ("/taskmanagers", "taskmanagers.json"),
        ("/jobmanager/metrics", "jobmanager_metrics.json"),
        ("/taskmanagers/metrics?get=Status.JVM.CPU.Load,Status.JVM.Memory.Heap.Used,Status.JVM.Memory.Heap.Max&agg=min,max,avg,sum", "taskmanagers_metrics__get_agg.json"),
    ] {
        assert_same_shape(file, &sim.get_ok(path).await);
        assert_same_shape(file, &sim.get_ok(&format!("/v1{path}")).await);
    }
    sim.stop().await;
}

#[tokio::test]
async fn job_endpoints_match_flink() {
    let (sim, jid, cpu_map) = load_job().await;
    for (path, file) in [
        (format!("/jobs/{jid}"), "jobs_JID.json"),
        (format!("/jobs/{jid}/plan"), "jobs_JID_plan.json"),
        (
            format!("/jobs/{jid}/checkpoints"),
            "jobs_JID_checkpoints.json",
        ),
        (
            format!("/jobs/{jid}/resource-requirements"),
            "jobs_JID_resource-requirements.json",
        ),
        (
            format!("/jobs/{jid}/jobmanager/config"),
            "jobs_JID_jobmanager_config.json",
        ),
        (
            format!("/jobs/{jid}/vertices/{cpu_map}"),
            "jobs_JID_vertices_VID-cpu-map.json",
        ),
        (
            format!("/jobs/{jid}/vertices/{cpu_map}/backpressure"),
            "jobs_JID_vertices_VID-cpu-map_backpressure.json",
        ),
    ] {
        assert_same_shape(file, &sim.get_ok(&path).await);
        assert_same_shape(file, &sim.get_ok(&format!("/v1{path}")).await);
    }
    sim.stop().await;
}

const FIVE: &str = "busyTimeMsPerSecond,numRecordsInPerSecond,numRecordsOutPerSecond,backPressuredTimeMsPerSecond,idleTimeMsPerSecond";

#[tokio::test]
async fn metric_endpoints_match_flink() {
    let (sim, jid, cpu_map) = load_job().await;
    let base = format!("/jobs/{jid}/vertices/{cpu_map}");
    let agg_all = sim
        .get_ok(&format!("{base}/subtasks/metrics?get={FIVE}"))
        .await;
    assert_same_shape(
        "jobs_JID_vertices_VID-cpu-map_subtasks_metrics__get.json",
        &agg_all,
    );
    assert_eq!(agg_all.as_array().unwrap().len(), 5, "{agg_all}");
    let agg4 = sim
        .get_ok(&format!(
            "{base}/subtasks/metrics?get={FIVE}&agg=min,max,avg,sum"
        ))
        .await;
    assert_same_shape(
        "jobs_JID_vertices_VID-cpu-map_subtasks_metrics__get_agg.json",
        &agg4,
    );
    assert!(
        agg4[0].get("skew").is_none(),
        "skew only when asked: {agg4}"
    );
    let one = sim
        .get_ok(&format!("{base}/subtasks/0/metrics?get={FIVE}"))
        .await;
    assert_same_shape(
        "jobs_JID_vertices_VID-cpu-map_subtasks_0_metrics__get.json",
        &one,
    );
    let prefixed: Vec<String> = FIVE.split(',').map(|n| format!("0.{n}")).collect();
    let task = sim
        .get_ok(&format!("{base}/metrics?get={}", prefixed.join(",")))
        .await;
    assert_same_shape("jobs_JID_vertices_VID-cpu-map_metrics__get.json", &task);
    let job = sim.get_ok(&format!("/jobs/{jid}/metrics?get=numberOfFailedCheckpoints,numberOfCompletedCheckpoints,lastCheckpointSize,totalNumberOfCheckpoints,numRestarts,lastCheckpointFullSize,lastCheckpointDuration,numRescales,uptime")).await;
    assert_same_shape("jobs_JID_metrics__get.json", &job);
    assert_eq!(job.as_array().unwrap().len(), 9);
    // Plain values are strings; per-subtask values are the model's (cpu-map: 1000 rec/s each).
    assert!(one
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["value"].is_string()));
    assert!(
        (plain(&one, "numRecordsInPerSecond") - 1000.0).abs() < 1e-6,
        "{one}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn name_lists_cover_flinks_task_scope_names() {
    let (sim, jid, cpu_map) = load_job().await;
    let ours = sim
        .get_ok(&format!("/jobs/{jid}/vertices/{cpu_map}/subtasks/metrics"))
        .await;
    let ours: Vec<&str> = ours
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(ours.iter().all(|n| !n.is_empty()));
    let real = sample("jobs_JID_vertices_VID-cpu-map_subtasks_metrics.json");
    for name in real
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
    {
        assert!(
            ours.contains(&name),
            "real Flink lists {name}, the simulator does not"
        );
    }
    // Operator-scoped names use the filtered operator name, like `Source__datagen-source.x`.
    let src = sim
        .get_ok(&format!(
            "/jobs/{jid}/vertices/{}/subtasks/metrics",
            sim.vertex(0)
        ))
        .await;
    assert!(
        src.as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "Source__datagen-source.numRecordsOutPerSecond"),
        "{src}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn unknown_ids_and_names_behave_like_flink() {
    let (sim, jid, cpu_map) = load_job().await;
    let zero = "00000000000000000000000000000000";
    let (status, body) = sim.get(&format!("/jobs/{zero}")).await;
    assert_eq!(status, 404);
    assert_same_shape("errors_GET_jobs_unknown.json", &body);
    for path in [
        format!("/jobs/{zero}/plan"),
        format!("/jobs/{zero}/checkpoints"),
        format!("/jobs/{jid}/vertices/{zero}"),
    ] {
        let (status, body) = sim.get(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body["errors"][0].is_string());
    }
    // Metric endpoints never 404.
    for path in [
        format!("/jobs/{jid}/vertices/{zero}/subtasks/metrics?get=busyTimeMsPerSecond"),
        format!("/jobs/{zero}/metrics"),
        format!("/jobs/{zero}/vertices/{cpu_map}/subtasks/metrics"),
        format!("/jobs/{jid}/vertices/{cpu_map}/subtasks/99/metrics"),
        format!("/jobs/{jid}/vertices/{cpu_map}/subtasks/metrics?get=busyTimeMsPerSecond,doesNotExist&agg=max"),
    ] {
        let (status, body) = sim.get(&path).await;
        assert_eq!((status, body.clone()), (200, Value::Array(vec![])), "{path}");
    }
    let one = sim.get_ok(&format!("/jobs/{jid}/vertices/{cpu_map}/subtasks/0/metrics?get=busyTimeMsPerSecond,doesNotExist")).await;
    assert_same_shape(
        "errors_GET_subtask0_metrics_get_with_one_unknown_name.json",
        &one,
    );
    assert_eq!(one.as_array().unwrap().len(), 1);
    // Malformed ids and aggregations are 400s with Flink's message.
    let (status, body) = sim.get("/jobs/not-a-job-id").await;
    assert_eq!(status, 400);
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .contains("Cannot resolve path parameter (jobid)"),
        "{body}"
    );
    let (status, body) = sim
        .get(&format!(
            "/jobs/{jid}/vertices/{cpu_map}/subtasks/metrics?get=busyTimeMsPerSecond&agg=median"
        ))
        .await;
    assert_eq!(status, 400);
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .contains("Cannot resolve query parameter (agg) from value \"median\""),
        "{body}"
    );
    let (status, body) = sim.get("/no/such/route").await;
    assert_eq!(status, 404);
    assert!(body["errors"].is_array());
    sim.stop().await;
}

#[tokio::test]
async fn non_numeric_and_nan_values_follow_flink() {
    let sim = Sim::from_toml(
        r#"
[[job]]
name = "legacy"
[[job.vertex]]
name = "Source: src[1] -> Calc[2]"
parallelism = 2
capacity = 1000
busy_time_nan = true
source = { rate = { kind = "constant", value = 100 } }
[[job.vertex]]
name = "snk[5]: Writer"
parallelism = 1
capacity = 1000
[[job.edge]]
from = "Source: src[1] -> Calc[2]"
to = "snk[5]: Writer"
ship_strategy = "REBALANCE"
"#,
    )
    .await;
    sim.advance_s(10);
    let base = format!("/jobs/{}/vertices/{}", sim.job(), sim.vertex(0));
    let v = sim.get_ok(&format!("{base}/subtasks/metrics?get=busyTimeMsPerSecond,idleTimeMsPerSecond&agg=min,max,avg,sum")).await;
    assert_eq!(v[0]["min"], "NaN", "{v}");
    assert_eq!(v[0]["sum"], "NaN", "{v}");
    assert!(v[1]["min"].is_f64(), "{v}");
    // A boolean gauge is not a number: aggregated endpoints skip it, plain ones show it.
    let v = sim
        .get_ok(&format!(
            "{base}/subtasks/metrics?get=isBackPressured,idleTimeMsPerSecond"
        ))
        .await;
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    let v = sim
        .get_ok(&format!(
            "{base}/subtasks/0/metrics?get=isBackPressured,busyTimeMsPerSecond"
        ))
        .await;
    assert!(
        v.as_array().unwrap().iter().any(|e| e["value"] == "false"),
        "{v}"
    );
    assert!(
        v.as_array().unwrap().iter().any(|e| e["value"] == "NaN"),
        "{v}"
    );
    let names = sim.get_ok(&format!("{base}/subtasks/metrics")).await;
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "Calc[2].numRecordsIn"),
        "{names}"
    );
    sim.stop().await;
}
