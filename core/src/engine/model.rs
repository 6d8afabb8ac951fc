//! The engine's plain-data inputs and outputs. They are also the JSON contract of the
//! `evaluate` and `decide` commands: unknown fields are errors, and NaN and infinities are
//! the strings Flink writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::config::{deserialize_config, AutoscalerConfig};
use super::state::ScalingState;
use crate::forecast::Forecast;
use crate::samples::{FlinkF64, Input, Sample, VertexSpec};

/// Input of [`super::evaluate`]: a job's topology and a captured metric window.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluateInput {
    pub now_ms: u64,
    #[serde(default, deserialize_with = "deserialize_config")]
    pub config: AutoscalerConfig,
    /// When the job last switched to RUNNING; earlier samples belong to a previous run.
    #[serde(default)]
    pub job_running_since_ms: u64,
    pub vertices: Vec<VertexSpec>,
    pub samples: Vec<Sample>,
    /// Carried over to the decide stage.
    #[serde(default)]
    pub state: ScalingState,
    /// Carried over to the decide stage.
    #[serde(default)]
    pub observed_rescale: Option<ObservedRescale>,
    /// Carried over to the decide stage.
    #[serde(default)]
    pub forecast: Option<Forecast>,
}

/// What was observed of the job's past rescales (our addition); the cost of a rescale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservedRescale {
    /// From triggering a rescale until the job ran at the new parallelism (ms).
    pub restart_ms: u64,
    /// From then until the source backlog was back to what it was before (ms).
    #[serde(default)]
    pub catch_up_ms: u64,
}

/// Output of [`super::evaluate`]: per-vertex figures of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluated {
    /// Some source's lag exceeds `backlog-processing.lag-threshold` worth of input.
    pub processing_backlog: bool,
    /// The window is full by upstream's timing rule and every vertex reported busy time in
    /// every sample (our scale-down caution needs this).
    pub window_complete: bool,
    pub vertices: BTreeMap<String, EvaluatedVertex>,
    /// Vertices without busy time in the newest sample, or whose subtasks all FINISHED: not
    /// scaled this cycle (as upstream).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_vertices: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EvaluatedVertex {
    pub load: FlinkF64,
    pub true_processing_rate: FlinkF64,
    pub target_data_rate: FlinkF64,
    pub catch_up_data_rate: FlinkF64,
    /// Sources: the newest pending records; 0 for other vertices.
    pub lag: FlinkF64,
    pub scale_up_rate_threshold: FlinkF64,
    pub scale_down_rate_threshold: FlinkF64,
    /// Sinks detected at capacity: the rate they absorb now (records/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_limit_rate: Option<FlinkF64>,
}

/// Input of [`super::decide`]: evaluated figures, per-job state and configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideInput {
    pub now_ms: u64,
    #[serde(default, deserialize_with = "deserialize_config")]
    pub config: AutoscalerConfig,
    #[serde(default)]
    pub processing_backlog: bool,
    /// Whether the metric window was full and complete; scale-down caution needs it.
    #[serde(default = "default_true")]
    pub window_complete: bool,
    pub vertices: Vec<DecideVertex>,
    #[serde(default)]
    pub state: ScalingState,
    /// *Our addition.* The job's observed rescale cost; without it, `restart.time` is assumed.
    #[serde(default)]
    pub observed_rescale: Option<ObservedRescale>,
    /// *Our addition.* The learned load forecast, for predictive scaling.
    #[serde(default)]
    pub forecast: Option<Forecast>,
}

fn default_true() -> bool {
    true
}

/// One vertex with its evaluated figures. It repeats the fields of [`VertexSpec`] rather
/// than flattening it, because serde cannot flatten under `deny_unknown_fields`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideVertex {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub parallelism: u32,
    pub max_parallelism: u32,
    /// 0 = unknown.
    #[serde(default)]
    pub source_partitions: u32,
    /// `[]` for sources.
    #[serde(default)]
    pub inputs: Vec<Input>,
    pub true_processing_rate: FlinkF64,
    pub target_data_rate: FlinkF64,
    pub catch_up_data_rate: FlinkF64,
    /// A sink's detected capacity (records/s), as `evaluate` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_limit_rate: Option<FlinkF64>,
}

impl DecideVertex {
    /// Joins a vertex of the topology with its evaluated figures.
    pub fn new(spec: &VertexSpec, figures: &EvaluatedVertex) -> DecideVertex {
        DecideVertex {
            id: spec.id.clone(),
            name: spec.name.clone(),
            parallelism: spec.parallelism,
            max_parallelism: spec.max_parallelism,
            source_partitions: spec.source_partitions,
            inputs: spec.inputs.clone(),
            true_processing_rate: figures.true_processing_rate,
            target_data_rate: figures.target_data_rate,
            catch_up_data_rate: figures.catch_up_data_rate,
            sink_limit_rate: figures.sink_limit_rate,
        }
    }
}

/// Output of [`super::decide`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Whether anything would be applied.
    pub scale: bool,
    pub vertices: Vec<VertexDecision>,
    /// What would be applied, for every vertex.
    pub parallelism: BTreeMap<String, u32>,
    /// The updated state; feed it to the next call.
    pub state: ScalingState,
    /// Whether predictive scaling took part, and why (not).
    pub prediction: PredictionReport,
}

/// How predictive scaling stood in a decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionReport {
    pub status: PredictionStatus,
    /// In words: the forecast's recent error, or why the decision is purely reactive.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictionStatus {
    /// `flink-autoscale.prediction.enabled` is false.
    Off,
    /// No forecast was given (the commands without one, or no load history yet).
    NoForecast,
    /// The forecast erred too much recently, or is still learning: purely reactive.
    NotConfident,
    /// The forecast was acted on (it may not have changed anything).
    Used,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexDecision {
    pub id: String,
    pub current: u32,
    /// Upstream's per-vertex result, before our extensions and the job-level band gate.
    pub recommended: u32,
    pub outside_band: bool,
    pub expected_processing_rate: FlinkF64,
    pub true_processing_rate: FlinkF64,
    pub target_data_rate: FlinkF64,
    pub scale_up_rate_threshold: FlinkF64,
    pub scale_down_rate_threshold: FlinkF64,
    pub limited_by: Vec<Limit>,
    pub reason: String,
}

/// What held a vertex back from the parallelism its load asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `scale-up.max-factor` or `scale-down.max-factor`.
    MaxFactor,
    /// `vertex.min-parallelism`, `vertex.max-parallelism` or the key-group maximum.
    Bounds,
    /// Key-group or partition alignment.
    Alignment,
    /// A source never gets more subtasks than its partitions or splits (FLINK-40389).
    SourcePartitions,
    /// Delayed scale-down (`scale-down.interval`).
    DelayedScaleDown,
    /// The previous scale-up did not help (`scaling.effectiveness.detection.enabled`).
    IneffectiveScaling,
    /// Observed scalability lowered the expected gain of more parallelism.
    ObservedScalability,
    /// Our extension: no scale-down on an incomplete window or during a backlog.
    ScaleDownCaution,
    /// Our extension: the job-level scale-down saves less than the rescale costs.
    ScaleDownCost,
    /// Our extension: the forecast needs this much within `flink-autoscale.prediction.horizon`,
    /// or its plan holds a scale-down for a deeper one (`prediction.max-rescales-per-day`).
    Forecast,
    /// Our extension: a downstream sink cannot absorb more.
    SinkLimit,
    /// Our extension: a FORWARD-connected vertex needs another parallelism.
    ForwardGroup,
    /// No changed vertex is outside its utilization band.
    BandGate,
    /// Listed in `vertex.exclude.ids` or without metrics this cycle.
    Excluded,
    /// No true processing rate or target capacity (NaN).
    MissingMetrics,
    /// `enabled` or `scaling.enabled` is false, or an `excluded.periods` period is active.
    ScalingDisabled,
}

/// Output of the `evaluate` command: both stages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluateOutput {
    pub evaluated: Evaluated,
    pub decision: Decision,
}
