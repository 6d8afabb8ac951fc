//! The batch metric endpoints of FLINK-39617 (apache/flink PR #29012), behind
//! `[server] batch_metrics`: their shape, their errors, the per-vertex semantics inside, and
//! the same accounting of entries touched as asking each vertex on its own.

mod common;

use common::{chain_toml, Sim};
use serde_json::{json, Value};

const NAMES: &str = "GET /jobs/:jobid/vertices/subtasks/metrics/names";
const VALUES: &str = "GET /jobs/:jobid/vertices/subtasks/metrics/values";
const PER_VERTEX: &str = "GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics";

async fn batch_sim() -> Sim {
    let sim = Sim::from_toml(&chain_toml(100.0, 1000.0, "[server]\nbatch_metrics = true")).await;
    sim.advance_s(30);
    sim
}

async fn stats(sim: &Sim) -> Value {
    sim.get_ok("/_sim/stats").await
}

fn entries(stats: &Value, endpoint: &str) -> u64 {
    stats["by_endpoint"][endpoint]["entries_touched"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test]
async fn names_per_vertex_filtered_and_sorted_with_the_per_vertex_cost() {
    let sim = batch_sim().await;
    let job = sim.job();
    let ids = sim.control.vertex_ids(&job);
    let all = ids.join(",");
    sim.control.reset_stats();

    let batch = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/subtasks/metrics/names?vertices={all}"
        ))
        .await;
    let batch = batch.as_array().unwrap();
    assert_eq!(batch.len(), ids.len());
    for (entry, id) in batch.iter().zip(&ids) {
        assert_eq!(entry["vertexId"], id.as_str());
        let listed: Vec<&str> = entry["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(listed, sorted, "names are sorted");
        let single = sim
            .get_ok(&format!("/jobs/{job}/vertices/{id}/subtasks/metrics"))
            .await;
        let mut single: Vec<&str> = single
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        single.sort_unstable();
        assert_eq!(listed, single, "the per-vertex listing of {id}");
    }
    let stats = stats(&sim).await;
    assert_eq!(entries(&stats, NAMES), entries(&stats, PER_VERTEX));
    assert!(entries(&stats, NAMES) > 0);

    // Full-match regexes, any of several.
    let filtered = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/subtasks/metrics/names?vertices={}&regex=busy.*,.*%5C.pendingRecords,numRecords",
            ids[0]
        ))
        .await;
    let names: Vec<&str> = filtered[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"busyTimeMsPerSecond"), "{names:?}");
    assert!(
        !names.contains(&"numRecordsInPerSecond"),
        "full match only: {names:?}"
    );
    assert!(names
        .iter()
        .all(|n| n.starts_with("busy") || n.ends_with(".pendingRecords") || *n == "numRecords"));
    sim.stop().await;
}

#[tokio::test]
async fn values_are_the_per_vertex_answers_side_by_side() {
    let sim = batch_sim().await;
    let job = sim.job();
    let ids = sim.control.vertex_ids(&job);
    let unknown = "0".repeat(32);
    let query = "get=busyTimeMsPerSecond,numRecordsIn&agg=max,sum";
    sim.control.reset_stats();
    let batch = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/subtasks/metrics/values?vertices={},{unknown}&{query}",
            ids.join(",")
        ))
        .await;
    let batch_entries = entries(&stats(&sim).await, VALUES);
    sim.control.reset_stats();
    let mut expected = Vec::new();
    for id in &ids {
        let single = sim
            .get_ok(&format!(
                "/jobs/{job}/vertices/{id}/subtasks/metrics?{query}"
            ))
            .await;
        expected.push(json!({"vertexId": id, "metrics": single}));
    }
    expected.push(json!({"vertexId": unknown, "metrics": []}));
    assert_eq!(batch, Value::Array(expected));
    assert_eq!(batch_entries, entries(&stats(&sim).await, PER_VERTEX));

    // All-or-nothing per vertex: only the source reports its operator's records in.
    let mixed = sim
        .get_ok(&format!(
            "/jobs/{job}/vertices/subtasks/metrics/values?vertices={}&get=busyTimeMsPerSecond,Source__Kafka_Source.numRecordsIn",
            ids.join(",")
        ))
        .await;
    assert!(
        !mixed[0]["metrics"].as_array().unwrap().is_empty(),
        "{mixed}"
    );
    assert!(
        mixed[1]["metrics"].as_array().unwrap().is_empty(),
        "{mixed}"
    );
    sim.stop().await;
}

#[tokio::test]
async fn bad_batch_requests_are_400_and_released_flink_has_no_such_route() {
    let sim = batch_sim().await;
    let job = sim.job();
    let base = format!("/jobs/{job}/vertices/subtasks/metrics");
    let v = sim.vertex(0);
    for (path, message) in [
        (
            format!("{base}/names"),
            "At least one job vertex must be specified.",
        ),
        (
            format!("{base}/values?get=busyTimeMsPerSecond"),
            "At least one job vertex must be specified.",
        ),
        (
            format!("{base}/names?vertices={v}&regex=(unclosed"),
            "Invalid metric name regex.",
        ),
        (
            format!("{base}/values?vertices=x%3Fget%3D1"),
            "Cannot resolve query parameter (vertices)",
        ),
        (
            format!("{base}/values?vertices={v}&agg=median"),
            "Cannot resolve query parameter (agg)",
        ),
    ] {
        let (status, body) = sim.get(&path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.to_string().contains(message), "{path}: {body}");
    }
    sim.stop().await;

    let released = Sim::from_toml(&chain_toml(100.0, 1000.0, "")).await;
    let job = released.job();
    let v = released.vertex(0);
    for which in ["names", "values"] {
        let (status, _) = released
            .get(&format!(
                "/jobs/{job}/vertices/subtasks/metrics/{which}?vertices={v}"
            ))
            .await;
        assert_eq!(status, 404, "{which} without the switch");
    }
    released.stop().await;
}
