//! Reading the JobManager's answers the way the tests need them: job and vertex states,
//! plan edges, metric values (numbers, strings and `"NaN"`).

use std::collections::BTreeMap;

use serde_json::Value;

/// One vertex of `/jobs/:jid` as the tests need it.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexStatus {
    pub id: String,
    pub name: String,
    pub parallelism: u64,
    pub running_subtasks: u64,
}

/// The job's state and its vertices, from a `/jobs/:jid` answer.
pub fn job_status(details: &Value) -> (String, Vec<VertexStatus>) {
    let state = details["state"].as_str().unwrap_or_default().to_owned();
    let vertices = details["vertices"]
        .as_array()
        .map(|vertices| {
            vertices
                .iter()
                .map(|v| VertexStatus {
                    id: v["id"].as_str().unwrap_or_default().to_owned(),
                    name: v["name"].as_str().unwrap_or_default().to_owned(),
                    parallelism: v["parallelism"].as_u64().unwrap_or_default(),
                    running_subtasks: v["tasks"]["RUNNING"].as_u64().unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    (state, vertices)
}

/// True when the job is RUNNING and every subtask of every vertex is RUNNING.
pub fn fully_running(state: &str, vertices: &[VertexStatus]) -> bool {
    state == "RUNNING"
        && !vertices.is_empty()
        && vertices.iter().all(|v| v.running_subtasks == v.parallelism)
}

/// A metric value: aggregated answers carry JSON numbers, per-subtask answers strings, and
/// Flink writes `"NaN"` for undefined values (which give `None` here).
pub fn metric_number(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .or_else(|| value.as_str()?.parse().ok())
        .filter(|v: &f64| v.is_finite())
}

/// `agg` (`min`, `max`, `avg` or `sum`) of `metric` in a `subtasks/metrics?get=..&agg=..` answer.
pub fn aggregated(answer: &Value, metric: &str, agg: &str) -> Option<f64> {
    answer
        .as_array()?
        .iter()
        .find(|entry| entry["id"] == metric)
        .and_then(|entry| metric_number(&entry[agg]))
}

/// `metric`'s value in a `subtasks/:i/metrics?get=..` or `metrics?get=..` answer.
pub fn single(answer: &Value, metric: &str) -> Option<f64> {
    answer
        .as_array()?
        .iter()
        .find(|entry| entry["id"] == metric)
        .and_then(|entry| metric_number(&entry["value"]))
}

/// The metric names a `subtasks/metrics` listing holds.
pub fn listed_names(listing: &Value) -> Vec<String> {
    listing
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// (upstream vertex name, downstream vertex name) → ship strategy, from `/jobs/:jid/plan`;
/// names come from `vertices` (ids not among them show as `<unknown id>`).
pub fn plan_edges(plan: &Value, vertices: &[VertexStatus]) -> BTreeMap<(String, String), String> {
    let name_of = |id: &Value| {
        let id = id.as_str().unwrap_or_default();
        vertices
            .iter()
            .find(|v| v.id == id)
            .map_or_else(|| format!("<unknown {id}>"), |v| v.name.clone())
    };
    let mut edges = BTreeMap::new();
    let nodes = plan["plan"]["nodes"].as_array().into_iter().flatten();
    for node in nodes {
        for input in node["inputs"].as_array().into_iter().flatten() {
            edges.insert(
                (name_of(&input["id"]), name_of(&node["id"])),
                input["ship_strategy"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fully_running_needs_every_subtask() {
        let details = json!({"state": "RUNNING", "vertices": [
            {"id": "a", "name": "cpu-map", "parallelism": 2, "tasks": {"RUNNING": 2}},
            {"id": "b", "name": "filter", "parallelism": 3, "tasks": {"RUNNING": 2, "DEPLOYING": 1}}
        ]});
        let (state, vertices) = job_status(&details);
        assert!(!fully_running(&state, &vertices));
        assert_eq!(vertices[1].parallelism, 3);
        let (_, mut done) = job_status(&details);
        done[1].running_subtasks = 3;
        assert!(fully_running(&state, &done));
    }

    #[test]
    fn reads_numbers_strings_and_nan() {
        let answer = json!([{"id": "a", "sum": 3.5}, {"id": "b", "sum": "NaN"}]);
        assert_eq!(aggregated(&answer, "a", "sum"), Some(3.5));
        assert_eq!(aggregated(&answer, "b", "sum"), None);
        assert_eq!(
            single(&json!([{"id": "x", "value": "12.0"}]), "x"),
            Some(12.0)
        );
    }

    #[test]
    fn names_plan_edges_by_vertex() {
        let vertices = [
            VertexStatus {
                id: "s".into(),
                name: "src".into(),
                parallelism: 1,
                running_subtasks: 1,
            },
            VertexStatus {
                id: "m".into(),
                name: "map".into(),
                parallelism: 1,
                running_subtasks: 1,
            },
        ];
        let plan = json!({"plan": {"nodes": [
            {"id": "s"},
            {"id": "m", "inputs": [{"id": "s", "ship_strategy": "FORWARD"}]}
        ]}});
        let edges = plan_edges(&plan, &vertices);
        assert_eq!(edges[&("src".to_owned(), "map".to_owned())], "FORWARD");
    }
}
