//! Response bodies of the JobManager endpoints the agent reads, with only the fields it uses.
//! Unknown fields are ignored (Flink adds fields between versions); fields that vary between
//! versions are optional. Integers accept numeric strings, doubles accept `"NaN"`/`"Infinity"`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lenient;
use flink_autoscale_core::samples::FlinkF64;

/// `GET /jobs/overview`.
#[derive(Debug, Clone, Deserialize)]
pub struct JobsOverview {
    pub jobs: Vec<JobOverview>,
}

/// One job of `GET /jobs/overview`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct JobOverview {
    pub jid: String,
    #[serde(default)]
    pub name: String,
    pub state: String,
    #[serde(rename = "start-time", default, deserialize_with = "lenient::opt_i64")]
    pub start_time: Option<i64>,
    #[serde(
        rename = "last-modification",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub last_modification: Option<i64>,
    #[serde(default)]
    pub tasks: Option<TaskCounts>,
    /// `Default`, `Adaptive` or `AdaptiveBatch`; Flink 2.3 and later.
    #[serde(rename = "schedulerType", default)]
    pub scheduler_type: Option<String>,
}

/// The lowercase task-state counts of `/jobs/overview` (the total, and how many FINISHED).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskCounts {
    #[serde(default, deserialize_with = "lenient::opt_i64")]
    pub total: Option<i64>,
    #[serde(default, deserialize_with = "lenient::opt_i64")]
    pub finished: Option<i64>,
}

/// `GET /jobs/:jobid`: state, timestamps, vertices with parallelism and IO counters, and the
/// plan with the edges.
#[derive(Debug, Clone, Deserialize)]
pub struct JobDetails {
    pub jid: String,
    #[serde(default)]
    pub name: String,
    pub state: String,
    #[serde(default)]
    pub timestamps: BTreeMap<String, Option<FlinkF64>>,
    pub vertices: Vec<JobVertex>,
    #[serde(default)]
    pub plan: Option<Plan>,
    /// `Default`, `Adaptive` or `AdaptiveBatch`; Flink 2.3 and later.
    #[serde(rename = "schedulerType", default)]
    pub scheduler_type: Option<String>,
    /// `STREAMING` or `BATCH`.
    #[serde(rename = "job-type", default)]
    pub job_type: Option<String>,
}

impl JobDetails {
    /// When the job last switched to RUNNING (epoch ms); changes on every restart.
    pub fn running_since_ms(&self) -> Option<i64> {
        self.timestamps
            .get("RUNNING")
            .copied()
            .flatten()
            .map(|v| v.0)
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(|v| v as i64)
    }
}

/// One vertex of `GET /jobs/:jobid`.
#[derive(Debug, Clone, Deserialize)]
pub struct JobVertex {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(deserialize_with = "lenient::u32")]
    pub parallelism: u32,
    #[serde(rename = "maxParallelism", deserialize_with = "lenient::u32")]
    pub max_parallelism: u32,
    #[serde(default)]
    pub status: String,
    /// Subtasks per execution state (upper-case keys).
    #[serde(default)]
    pub tasks: Option<VertexTaskCounts>,
    #[serde(default)]
    pub metrics: Option<IoMetrics>,
}

impl JobVertex {
    /// How many of its subtasks FINISHED: all of them when the vertex itself is FINISHED.
    pub fn finished_subtasks(&self) -> u32 {
        if self.status == "FINISHED" {
            return self.parallelism;
        }
        let counted = self.tasks.as_ref().and_then(|t| t.finished).unwrap_or(0);
        u32::try_from(counted.max(0))
            .unwrap_or(u32::MAX)
            .min(self.parallelism)
    }
}

/// The per-state subtask counts of a vertex in `/jobs/:jobid` (only FINISHED is used).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VertexTaskCounts {
    #[serde(rename = "FINISHED", default, deserialize_with = "lenient::opt_i64")]
    pub finished: Option<i64>,
}

/// `IOMetricsInfo`: counters summed over subtasks. A `*-complete: false` flag means some
/// running subtask had no value, so the sum is an undercount.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IoMetrics {
    #[serde(rename = "read-records", default)]
    pub read_records: Option<FlinkF64>,
    #[serde(rename = "read-records-complete", default)]
    pub read_records_complete: Option<bool>,
    #[serde(rename = "write-records", default)]
    pub write_records: Option<FlinkF64>,
    #[serde(rename = "write-records-complete", default)]
    pub write_records_complete: Option<bool>,
    #[serde(rename = "read-bytes-complete", default)]
    pub read_bytes_complete: Option<bool>,
    #[serde(rename = "write-bytes-complete", default)]
    pub write_bytes_complete: Option<bool>,
    #[serde(rename = "accumulated-busy-time", default)]
    pub accumulated_busy_time: Option<FlinkF64>,
}

impl IoMetrics {
    /// The first counter flagged incomplete, if any.
    pub fn incomplete_field(&self) -> Option<&'static str> {
        [
            ("read-records-complete", self.read_records_complete),
            ("write-records-complete", self.write_records_complete),
            ("read-bytes-complete", self.read_bytes_complete),
            ("write-bytes-complete", self.write_bytes_complete),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(false))
        .map(|(k, _)| k)
    }
}

/// The job graph (`plan` in `/jobs/:jobid`).
#[derive(Debug, Clone, Deserialize)]
pub struct Plan {
    #[serde(default)]
    pub nodes: Vec<PlanNode>,
}

/// One node of the plan. `inputs` is absent or empty for sources.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanNode {
    pub id: String,
    #[serde(default)]
    pub inputs: Option<Vec<PlanInput>>,
}

/// An input edge of a plan node.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanInput {
    pub id: String,
    #[serde(default)]
    pub ship_strategy: Option<String>,
}

/// One entry of a metric-name listing (`.../subtasks/metrics` without `get`).
#[derive(Debug, Clone, Deserialize)]
pub struct MetricName {
    pub id: String,
}

/// One entry of an aggregated value query (`.../subtasks/metrics?get=..&agg=..`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AggregatedMetric {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<FlinkF64>,
}

/// One vertex of a batch answer (FLINK-39617's `/jobs/:jobid/vertices/subtasks/metrics/names`
/// and `/values`): the names (entries with only `id`) or the aggregates of that vertex, with
/// the per-vertex semantics of `.../subtasks/metrics` (all-or-nothing per vertex).
#[derive(Debug, Clone, Deserialize)]
pub struct VertexMetrics {
    #[serde(rename = "vertexId")]
    pub vertex_id: String,
    pub metrics: Vec<AggregatedMetric>,
}

/// One `{"key":..,"value":..}` entry of `/jobmanager/config` or `/jobs/:jobid/jobmanager/config`.
#[derive(Debug, Clone, Deserialize)]
pub struct ConfigEntry {
    pub key: String,
    pub value: String,
}

/// One rescale of Flink 2.3's rescale history: an entry of `/jobs/:jobid/rescales/history`
/// (newest first, `vertices` empty) or `/jobs/:jobid/rescales/details/:rescaleuuid`. The
/// terminal fields are `null` while it is in progress.
#[derive(Debug, Clone, Deserialize)]
pub struct Rescale {
    #[serde(rename = "rescaleUuid")]
    pub rescale_uuid: String,
    #[serde(
        rename = "startTimestampInMillis",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub start_ms: Option<i64>,
    #[serde(
        rename = "endTimestampInMillis",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub end_ms: Option<i64>,
    /// `COMPLETED`, `FAILED` or `IGNORED`.
    #[serde(rename = "terminalState", default)]
    pub terminal_state: Option<String>,
    /// `INITIAL_SCHEDULE`, `UPDATE_REQUIREMENT`, `NEW_RESOURCE_AVAILABLE` or
    /// `RECOVERABLE_FAILOVER`.
    #[serde(rename = "triggerCause", default)]
    pub trigger_cause: Option<String>,
    /// `SUCCEEDED`, `EXCEPTION_OCCURRED`, `RESOURCE_REQUIREMENTS_UPDATED`,
    /// `NO_RESOURCES_OR_PARALLELISMS_CHANGE`, `JOB_FINISHED`, `JOB_FAILED`, `JOB_CANCELED`
    /// or `JOB_FAILOVER_RESTARTING`.
    #[serde(rename = "terminatedReason", default)]
    pub terminated_reason: Option<String>,
    /// Per vertex id (details only).
    #[serde(default)]
    pub vertices: BTreeMap<String, RescaleVertex>,
    /// The scheduler states the rescale went through (details only).
    #[serde(rename = "schedulerStates", default)]
    pub scheduler_states: Vec<SchedulerStateSpan>,
}

/// One vertex of a rescale's details.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RescaleVertex {
    #[serde(
        rename = "desiredParallelism",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub desired: Option<i64>,
    #[serde(
        rename = "sufficientParallelism",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub sufficient: Option<i64>,
    #[serde(
        rename = "preRescaleParallelism",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub pre: Option<i64>,
    #[serde(
        rename = "postRescaleParallelism",
        default,
        deserialize_with = "lenient::opt_i64"
    )]
    pub post: Option<i64>,
}

/// One scheduler state a rescale passed through.
#[derive(Debug, Clone, Deserialize)]
pub struct SchedulerStateSpan {
    pub state: String,
    #[serde(rename = "stringifiedException", default)]
    pub exception: Option<String>,
}

/// `GET /jobs/:jobid/checkpoints`, reduced to the latest completed checkpoint's size.
#[derive(Debug, Clone, Deserialize)]
pub struct Checkpoints {
    #[serde(default)]
    pub latest: Option<LatestCheckpoints>,
}

/// `latest` of the checkpoint statistics.
#[derive(Debug, Clone, Deserialize)]
pub struct LatestCheckpoints {
    #[serde(default)]
    pub completed: Option<CompletedCheckpoint>,
}

/// A completed checkpoint (only sizes).
#[derive(Debug, Clone, Deserialize)]
pub struct CompletedCheckpoint {
    #[serde(default)]
    pub state_size: Option<FlinkF64>,
    #[serde(default)]
    pub checkpointed_size: Option<FlinkF64>,
}

impl Checkpoints {
    /// Full state size of the latest completed checkpoint in bytes, if any.
    pub fn latest_state_size_bytes(&self) -> Option<f64> {
        let c = self.latest.as_ref()?.completed.as_ref()?;
        c.state_size
            .or(c.checkpointed_size)
            .map(|v| v.0)
            .filter(|v| v.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flink::client::parse_json;
    use crate::flink::Endpoint;

    const SAMPLES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/flink-rest-samples"
    );

    fn sample(path: &str) -> Vec<u8> {
        std::fs::read(format!("{SAMPLES}/{path}"))
            .unwrap_or_else(|e| panic!("fixture {SAMPLES}/{path}: {e}"))
    }

    #[test]
    fn parses_real_flink_responses() {
        for dir in ["adaptive-scheduler", "default-scheduler", "sql-job"] {
            let overview = sample(&format!("{dir}/jobs_overview.json"));
            let o: JobsOverview = parse_json(Endpoint::JobsOverview, &overview).unwrap();
            assert_eq!(o.jobs[0].state, "RUNNING");
            assert!(o.jobs[0].last_modification.is_some());
            let d: JobDetails = parse_json(
                Endpoint::JobDetails,
                &sample(&format!("{dir}/jobs_JID.json")),
            )
            .unwrap();
            assert!(d.running_since_ms().is_some(), "{dir}");
            assert!(!d.vertices.is_empty());
            let plan = d.plan.as_ref().unwrap();
            assert_eq!(plan.nodes.len(), d.vertices.len());
            assert!(d.vertices.iter().all(|v| v
                .metrics
                .as_ref()
                .unwrap()
                .incomplete_field()
                .is_none()));
            let c: Checkpoints = parse_json(
                Endpoint::Checkpoints,
                &sample(&format!("{dir}/jobs_JID_checkpoints.json")),
            )
            .unwrap();
            assert!(c.latest_state_size_bytes().is_some(), "{dir}");
            let cfg: Vec<ConfigEntry> = parse_json(
                Endpoint::JobConfig,
                &sample(&format!("{dir}/jobs_JID_jobmanager_config.json")),
            )
            .unwrap();
            assert!(cfg
                .iter()
                .any(|e| e.key == "metrics.fetcher.update-interval"));
        }
    }

    #[test]
    fn parses_nan_busy_time_and_empty_answers() {
        let body = sample(
            "sql-job/jobs_JID_vertices_VID-Source-src-1-Calc-2_subtasks_metrics__get_agg.json",
        );
        let v: Vec<AggregatedMetric> = parse_json(Endpoint::MetricValues, &body).unwrap();
        let busy = v.iter().find(|m| m.id == "busyTimeMsPerSecond").unwrap();
        assert!(busy.max.unwrap().0.is_nan());
        let empty = sample("errors/GET_subtasks_metrics_get_with_one_unknown_name.json");
        let v: Vec<AggregatedMetric> = parse_json(Endpoint::MetricValues, &empty).unwrap();
        assert!(v.is_empty());
    }

    #[test]
    fn parses_finished_subtasks_and_the_scheduler_type() {
        let o: JobsOverview = parse_json(
            Endpoint::JobsOverview,
            &sample("finished-subtasks/jobs_overview.json"),
        )
        .unwrap();
        let job = &o.jobs[0];
        assert_eq!(job.scheduler_type.as_deref(), Some("Adaptive"));
        assert_eq!(job.tasks.as_ref().unwrap().finished, Some(3));
        let d: JobDetails = parse_json(
            Endpoint::JobDetails,
            &sample("finished-subtasks/jobs_JID.json"),
        )
        .unwrap();
        assert_eq!(d.scheduler_type.as_deref(), Some("Adaptive"));
        assert_eq!(d.job_type.as_deref(), Some("STREAMING"));
        let finished: Vec<(u32, u32)> = d
            .vertices
            .iter()
            .map(|v| (v.parallelism, v.finished_subtasks()))
            .collect();
        // The datagen source chain rescaled 2 -> 4 -> 2 -> 3 with 2 splits left.
        assert_eq!(finished, vec![(3, 1), (3, 1), (3, 1), (3, 0), (1, 0)]);
        let old: JobDetails = parse_json(
            Endpoint::JobDetails,
            &sample("adaptive-scheduler/jobs_JID.json"),
        )
        .unwrap();
        assert!(old.vertices.iter().all(|v| v.finished_subtasks() == 0));
        let mut done = old.vertices[0].clone();
        done.status = "FINISHED".into();
        assert_eq!(done.finished_subtasks(), done.parallelism);
    }

    #[test]
    fn parses_the_rescale_history() {
        let h: Vec<Rescale> = parse_json(
            Endpoint::RescaleHistory,
            &sample("rescale-history/jobs_JID_rescales_history.json"),
        )
        .unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].terminal_state.as_deref(), Some("COMPLETED"));
        assert_eq!(h[0].trigger_cause.as_deref(), Some("UPDATE_REQUIREMENT"));
        assert_eq!(h[0].terminated_reason.as_deref(), Some("SUCCEEDED"));
        assert!(h[0].start_ms < h[0].end_ms);
        let running: Vec<Rescale> = parse_json(
            Endpoint::RescaleHistory,
            &sample("rescale-history/jobs_JID_rescales_history_in_progress.json"),
        )
        .unwrap();
        assert_eq!(running[0].terminal_state, None);
        assert_eq!(running[0].end_ms, None);
        let ignored: Vec<Rescale> = parse_json(
            Endpoint::RescaleHistory,
            &sample("rescale-history/jobs_JID_rescales_history_ignored.json"),
        )
        .unwrap();
        assert!(ignored
            .iter()
            .any(|r| r.terminal_state.as_deref() == Some("IGNORED")
                && r.terminated_reason.as_deref() == Some("RESOURCE_REQUIREMENTS_UPDATED")));
        let d: Rescale = parse_json(
            Endpoint::RescaleDetails,
            &sample("rescale-history/jobs_JID_rescales_details_UUID.json"),
        )
        .unwrap();
        let source = &d.vertices["193d851ed39da35c23cfb60b0bc854bf"];
        assert_eq!(
            (source.desired, source.pre, source.post),
            (Some(4), Some(2), Some(4))
        );
        assert_eq!(d.scheduler_states.last().unwrap().state, "Executing");
    }

    #[test]
    fn incomplete_counters_are_flagged() {
        let m: IoMetrics = serde_json::from_str(
            r#"{"read-records":"12","read-records-complete":false,"accumulated-busy-time":"NaN"}"#,
        )
        .unwrap();
        assert_eq!(m.incomplete_field(), Some("read-records-complete"));
        assert!(m.accumulated_busy_time.unwrap().0.is_nan());
    }
}
