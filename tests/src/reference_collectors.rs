//! The collectors the benchmarks compare the agent's with, written against the agent's
//! [`FlinkClient`] so that requests and bytes are counted the same way. Both work against the
//! simulator and against a real Flink 2.x JobManager:
//!
//! - [`naive_poll`]: per subtask, list the metric names and read the needed values;
//! - [`OperatorLike`]: the Flink Kubernetes Operator's collector in steady state
//!   (`ScalingMetricCollector` + `RestApiMetricsCollector`, `/work/shared/reference/
//!   flink-rest-api.md` §5.2): job details, every source's names listed twice, one value query
//!   per vertex without `agg`, slot and TaskManager metrics.

use std::collections::{HashMap, HashSet};

use flink_autoscale_agent::flink::{Endpoint, FlinkClient, FlinkError};
use serde_json::Value;

/// Why a reference collector's poll failed.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error(transparent)]
    Flink(#[from] FlinkError),
    /// An answer that is not the JSON expected.
    #[error("GET {path}: not the JSON expected: {detail}")]
    Json { path: String, detail: String },
    /// A metric the operator requires is not listed for a vertex (its
    /// `MetricNotFoundException`, which Flink's empty start-up listings cause).
    #[error("vertex {vertex} does not list the required metric {metric}")]
    MetricNotFound { vertex: String, metric: String },
}

async fn get_json(
    client: &FlinkClient,
    endpoint: Endpoint,
    path: &str,
) -> Result<Value, ReferenceError> {
    let body = client.get(endpoint, path).await?;
    serde_json::from_slice(&body).map_err(|e| ReferenceError::Json {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// One job vertex as `/jobs/:jobid` describes it.
#[derive(Debug, Clone)]
struct VertexRef {
    id: String,
    parallelism: u32,
    source: bool,
    finished: bool,
}

/// The vertices of `/jobs/:jobid`; a source is a plan node without inputs (real Flink leaves
/// `inputs` out for sources).
fn vertices_of(details: &Value) -> Vec<VertexRef> {
    let mut with_inputs = HashSet::new();
    for node in details["plan"]["nodes"].as_array().into_iter().flatten() {
        if node["inputs"].as_array().is_some_and(|i| !i.is_empty()) {
            with_inputs.insert(node["id"].as_str().unwrap_or_default().to_string());
        }
    }
    details["vertices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let id = v["id"].as_str().unwrap_or_default().to_string();
            VertexRef {
                parallelism: v["parallelism"].as_u64().unwrap_or(0) as u32,
                source: !with_inputs.contains(&id),
                finished: v["status"] == "FINISHED",
                id,
            }
        })
        .collect()
}

/// Per subtask: list its metric names, then read the needed ones; aggregate here.
pub async fn naive_poll(client: &FlinkClient, job: &str) -> Result<(), ReferenceError> {
    let details = get_json(client, Endpoint::JobDetails, &format!("/jobs/{job}")).await?;
    let wanted = |n: &str| {
        matches!(
            n,
            "busyTimeMsPerSecond"
                | "backPressuredTimeMsPerSecond"
                | "numRecordsIn"
                | "numRecordsOut"
        ) || (n.starts_with("Source__")
            && (n.ends_with(".numRecordsIn") || n.ends_with(".numRecordsInPerSecond")))
            || n.ends_with(".pendingRecords")
    };
    for vertex in vertices_of(&details) {
        let mut sums: HashMap<String, f64> = HashMap::new();
        for i in 0..vertex.parallelism {
            let path = format!("/jobs/{job}/vertices/{}/subtasks/{i}/metrics", vertex.id);
            let names = get_json(client, Endpoint::MetricNames, &path).await?;
            let get: Vec<&str> = names
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n["id"].as_str())
                .filter(|n| wanted(n))
                .collect();
            let values = get_json(
                client,
                Endpoint::MetricValues,
                &format!("{path}?get={}", get.join(",")),
            )
            .await?;
            for v in values.as_array().into_iter().flatten() {
                let x: f64 = v["value"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0);
                *sums
                    .entry(v["id"].as_str().unwrap_or_default().to_string())
                    .or_default() += x;
            }
        }
        std::hint::black_box(&sums);
    }
    Ok(())
}

/// The operator's collector for one job. Steady state is `3 + V + 2·S` requests per poll;
/// the first poll (and every poll after a failed name discovery) lists every vertex.
///
/// As the operator does: finished vertices are neither listed nor queried, and a missing
/// required metric (`busyTimeMsPerSecond`; on sources also `backPressuredTimeMsPerSecond`,
/// `Source__*.numRecordsInPerSecond` and `Source__*.numRecordsIn`) fails the poll without
/// caching any names. Beyond the operator it also asks for `numRecordsInPerSecond` on
/// non-sources (one more name per value query). Connections are kept alive between requests.
#[derive(Debug)]
pub struct OperatorLike {
    job: String,
    /// vertex -> filtered names (cached; sources re-listed every poll).
    names: HashMap<String, Vec<String>>,
}

impl OperatorLike {
    pub fn new(job: &str) -> Self {
        Self {
            job: job.to_owned(),
            names: HashMap::new(),
        }
    }

    async fn list(&self, client: &FlinkClient, vid: &str) -> Result<Vec<String>, ReferenceError> {
        let v = get_json(
            client,
            Endpoint::MetricNames,
            &format!("/jobs/{}/vertices/{vid}/subtasks/metrics", self.job),
        )
        .await?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["id"].as_str().map(str::to_string))
            .collect())
    }

    /// One poll of the job.
    pub async fn poll(&mut self, client: &FlinkClient) -> Result<(), ReferenceError> {
        let job = self.job.clone();
        let details = get_json(client, Endpoint::JobDetails, &format!("/jobs/{job}")).await?;
        let vertices: Vec<VertexRef> = vertices_of(&details)
            .into_iter()
            .filter(|v| !v.finished)
            .collect();
        // Partition discovery: every source's names, every poll.
        for vertex in vertices.iter().filter(|v| v.source) {
            let names = self.list(client, &vertex.id).await?;
            let partitions = names
                .iter()
                .filter(|n| n.ends_with(".currentOffset"))
                .count();
            std::hint::black_box(partitions);
        }
        // Name discovery: all vertices on first sight, then sources again every poll.
        let same_topology = vertices.iter().all(|v| self.names.contains_key(&v.id));
        let mut discovered = HashMap::new();
        for vertex in &vertices {
            if vertex.source || !same_topology {
                let listed = self.list(client, &vertex.id).await?;
                let filtered = filter_names(listed, vertex.source);
                if let Some(metric) = missing_required(&filtered, vertex.source) {
                    return Err(ReferenceError::MetricNotFound {
                        vertex: vertex.id.clone(),
                        metric: metric.to_owned(),
                    });
                }
                discovered.insert(vertex.id.clone(), filtered);
            }
        }
        self.names.extend(discovered);
        // One value query per vertex, no `agg` (all aggregates computed and shipped).
        for vertex in &vertices {
            let get = self.names[&vertex.id].join(",");
            let v = get_json(
                client,
                Endpoint::MetricValues,
                &format!(
                    "/jobs/{job}/vertices/{}/subtasks/metrics?get={get}",
                    vertex.id
                ),
            )
            .await?;
            std::hint::black_box(v);
        }
        get_json(
            client,
            Endpoint::JobManagerConfig,
            "/jobmanager/metrics?get=taskSlotsTotal,taskSlotsAvailable",
        )
        .await?;
        get_json(
            client,
            Endpoint::JobManagerConfig,
            "/taskmanagers/metrics?get=Status.JVM.Memory.Heap.Max,Status.JVM.Memory.Heap.Used,Status.Flink.Memory.Managed.Used,Status.JVM.Memory.Metaspace.Used&agg=min,max,avg",
        )
        .await?;
        Ok(())
    }
}

fn filter_names(listed: Vec<String>, source: bool) -> Vec<String> {
    listed
        .into_iter()
        .filter(|n| {
            n == "busyTimeMsPerSecond"
                || (source && n == "backPressuredTimeMsPerSecond")
                || (!source && n == "numRecordsInPerSecond")
                || (n.starts_with("Source__")
                    && (n.ends_with(".numRecordsInPerSecond")
                        || n.ends_with(".numRecordsIn")
                        || n.ends_with(".numRecordsOut")))
                || n.ends_with(".pendingRecords")
        })
        .collect()
}

/// The first metric the operator requires that `names` lacks.
fn missing_required(names: &[String], source: bool) -> Option<&'static str> {
    let has = |pred: &dyn Fn(&str) -> bool| names.iter().any(|n| pred(n));
    let source_metric =
        |suffix: &'static str| move |n: &str| n.starts_with("Source__") && n.ends_with(suffix);
    if !has(&|n| n == "busyTimeMsPerSecond") {
        return Some("busyTimeMsPerSecond");
    }
    if source {
        if !has(&|n| n == "backPressuredTimeMsPerSecond") {
            return Some("backPressuredTimeMsPerSecond");
        }
        if !has(&source_metric(".numRecordsInPerSecond")) {
            return Some("Source__*.numRecordsInPerSecond");
        }
        if !has(&source_metric(".numRecordsIn")) {
            return Some("Source__*.numRecordsIn");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sources_are_plan_nodes_without_inputs_and_finished_vertices_are_marked() {
        // Real Flink 2.3 leaves `inputs` out for a source node.
        let details = json!({
            "vertices": [
                {"id": "src", "parallelism": 4, "status": "RUNNING"},
                {"id": "map", "parallelism": 2, "status": "FINISHED"}
            ],
            "plan": {"nodes": [
                {"id": "src"},
                {"id": "map", "inputs": [{"id": "src", "ship_strategy": "FORWARD"}]}
            ]}
        });
        let v = vertices_of(&details);
        assert_eq!(v.len(), 2);
        assert!(v[0].source && !v[0].finished && v[0].parallelism == 4);
        assert!(!v[1].source && v[1].finished);
    }

    #[test]
    fn real_datagen_source_names_satisfy_the_operator() {
        let listed: Vec<String> = [
            "busyTimeMsPerSecond",
            "backPressuredTimeMsPerSecond",
            "idleTimeMsPerSecond",
            "Source__datagen-source.numRecordsIn",
            "Source__datagen-source.numRecordsInPerSecond",
            "Source__datagen-source.numRecordsOut",
            "Source__datagen-source.numRecordsOutPerSecond",
            "Source__datagen-source.split.1.watermark.currentWatermark",
        ]
        .map(String::from)
        .to_vec();
        let filtered = filter_names(listed, true);
        assert_eq!(filtered.len(), 5, "{filtered:?}");
        assert_eq!(missing_required(&filtered, true), None);
    }

    #[test]
    fn an_empty_start_up_listing_is_a_missing_metric() {
        assert_eq!(missing_required(&[], false), Some("busyTimeMsPerSecond"));
        let busy_only = vec!["busyTimeMsPerSecond".to_owned()];
        assert_eq!(missing_required(&busy_only, false), None);
        assert_eq!(
            missing_required(&busy_only, true),
            Some("backPressuredTimeMsPerSecond")
        );
    }
}
