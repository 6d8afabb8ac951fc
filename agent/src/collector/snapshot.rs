//! What a poll hands back: the report for the daemon, `collect` and the benchmark, and the
//! job's latest state as published to the HTTP server and printed by `collect`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::names::ResolvedNames;
use super::source::SourceKind;
use super::usability::Unusable;
use crate::flink::model::AggregatedMetric;
use crate::flink::scheduler::Scheduler;
use flink_autoscale_core::samples::{Sample, VertexSpec};

/// What one poll produced, for the daemon, `collect` and the benchmark.
#[derive(Debug, Clone, Default)]
pub struct PollReport {
    /// JobManager requests this poll sent.
    pub requests: u64,
    /// The job restarted, was rescaled or changed topology since the previous poll.
    pub new_incarnation: bool,
    /// Why this poll's data must not be used, if so.
    pub unusable: Option<Unusable>,
    /// How this poll's numbers were fetched.
    pub source: SourceKind,
}

/// The latest state of one job, as published to the HTTP server and printed by `collect`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobSnapshot {
    pub job_id: String,
    pub name: String,
    pub state: String,
    pub running_since_ms: Option<i64>,
    pub polled_at_ms: u64,
    /// How the latest poll's numbers were fetched: `per_vertex` or `batch`.
    pub metric_source: SourceKind,
    pub topology: Vec<VertexSpec>,
    pub names: BTreeMap<String, ResolvedNames>,
    pub sample: Option<Sample>,
    pub usable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable_reason: Option<Unusable>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unusable_detail: Option<String>,
    pub window_samples: usize,
    pub window_full: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_size_bytes: Option<f64>,
    pub autoscaler_overrides: BTreeMap<String, String>,
    /// The job's scheduler, when the JobManager said (see [`crate::flink::scheduler`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,
    /// The raw aggregated answers per vertex, served by the Flink-compatible read.
    #[serde(skip)]
    pub values: BTreeMap<String, Vec<AggregatedMetric>>,
}
