//! Scenario files: the TOML description of a cluster and its jobs, parsed into a validated
//! model. Every error names the offending field (`job[0].vertex[2].capacity: ...`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ids::{is_flink_id, stable_id};
use crate::naming::operator_scope;
use crate::rate::RateProfile;

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("scenario is not valid TOML for the scenario format: {0}")]
    Syntax(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl ScenarioError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field the error is about, when it is about one field.
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// How an edge distributes records (Flink's partitioner names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShipStrategy {
    Forward,
    Hash,
    Rebalance,
    Rescale,
    Broadcast,
}

impl ShipStrategy {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "FORWARD" => ShipStrategy::Forward,
            "HASH" => ShipStrategy::Hash,
            "REBALANCE" => ShipStrategy::Rebalance,
            "RESCALE" => ShipStrategy::Rescale,
            "BROADCAST" => ShipStrategy::Broadcast,
            _ => return None,
        })
    }

    /// The name `/plan` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ShipStrategy::Forward => "FORWARD",
            ShipStrategy::Hash => "HASH",
            ShipStrategy::Rebalance => "REBALANCE",
            ShipStrategy::Rescale => "RESCALE",
            ShipStrategy::Broadcast => "BROADCAST",
        }
    }
}

/// Which of Flink's metric staleness layers are simulated (all off by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Staleness {
    /// TaskManager metric values only change every this many ms (Flink: 5000). 0 = live.
    pub tm_update_interval_ms: u64,
    /// Rates and busy time are moving averages over this window (Flink: 60000). 0 = instant.
    pub rate_window_ms: u64,
    /// The JobManager metric cache (`metrics.fetcher.update-interval`, Flink: 10000). 0 = off.
    pub fetcher_interval_ms: u64,
    /// After a start or rescale, busy reads 1000 and rates read 0 for this long. 0 = off.
    pub warmup_ms: u64,
}

/// The cluster around the jobs.
#[derive(Debug, Clone)]
pub(crate) struct ClusterSpec {
    pub flink_version: String,
    pub taskmanagers: Option<u32>,
    pub slots_per_taskmanager: u32,
    pub adaptive_scheduler: bool,
    pub start_epoch_ms: Option<u64>,
    /// `metrics.fetcher.update-interval`: how often the MetricFetcher may refresh (see
    /// `fetcher.rs`). Flink's default 10 s, or `[staleness] fetcher_interval_ms` when set.
    pub fetcher_update_interval_ms: u64,
    pub config: Vec<(String, String)>,
    /// `web.adaptive-scheduler.rescale-history.size` from `config` (0: off, Flink's default).
    pub rescale_history_size: u32,
}

/// The config key that switches Flink 2.3's rescale history on.
pub(crate) const RESCALE_HISTORY_SIZE: &str = "web.adaptive-scheduler.rescale-history.size";

impl ClusterSpec {
    /// Whether `flink_version` is at least `major.minor` (unparsable versions count as new).
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self.flink_version.split('.').map(|p| p.parse::<u32>());
        match (parts.next(), parts.next()) {
            (Some(Ok(a)), Some(Ok(b))) => (a, b) >= (major, minor),
            _ => true,
        }
    }

    /// Flink 2.3 adds `schedulerType` to `/jobs/overview` and `/jobs/:jid`.
    pub fn reports_scheduler_type(&self) -> bool {
        self.at_least(2, 3)
    }

    /// Flink 2.3's rescale history is served (adaptive scheduler and a size above 0).
    pub fn serves_rescale_history(&self) -> bool {
        self.at_least(2, 3) && self.adaptive_scheduler && self.rescale_history_size > 0
    }
}

/// A source vertex's external input.
#[derive(Debug, Clone)]
pub(crate) struct SourceSpec {
    /// Kafka-style partitions; when set, the source reports `pendingRecords` and
    /// per-partition offset metrics, and subtasks beyond the partition count stay idle.
    pub partitions: Option<u32>,
    /// A bounded number of splits (as Flink's data generator source has): split `n` goes to
    /// subtask `n mod p`; a subtask that gets none FINISHES shortly after the start, and so
    /// does the subtask it feeds through a FORWARD edge. 0: the source has read everything
    /// and all its subtasks are FINISHED.
    pub splits: Option<u32>,
    pub topic: String,
    pub rate: RateProfile,
    pub initial_lag: f64,
    /// `pendingRecords` appears only once a subtask has read a record (Kafka's behaviour).
    pub lazy_pending_records: bool,
}

/// One job vertex (an operator chain).
#[derive(Debug, Clone)]
pub(crate) struct VertexSpec {
    pub id: String,
    pub name: String,
    /// Metric scope names of the chained operators (first receives, last emits).
    pub operator_scopes: Vec<String>,
    pub parallelism: u32,
    pub max_parallelism: u32,
    /// Records per second one subtask processes at 100 % busy.
    pub capacity: f64,
    pub selectivity: f64,
    pub skew: f64,
    pub record_bytes: f64,
    pub extra_metrics: u32,
    /// Report `busyTimeMsPerSecond` as NaN, as Flink's legacy (non-FLIP-27) sources do.
    pub busy_time_nan: bool,
    pub source: Option<SourceSpec>,
    /// Total records per second the external system accepts (sinks only).
    pub write_capacity: Option<f64>,
}

#[derive(Debug, Clone)]
pub(crate) struct EdgeSpec {
    pub from: usize,
    pub to: usize,
    pub ship: ShipStrategy,
}

/// One job: vertices in topological order and the edges between them.
#[derive(Debug, Clone)]
pub(crate) struct JobSpec {
    pub id: String,
    pub name: String,
    pub downtime_ms: u64,
    pub rescale_delay_ms: u64,
    pub savepoint_ms: u64,
    pub checkpoint_interval_ms: u64,
    pub state_size_bytes: f64,
    pub state_growth_bytes_per_s: f64,
    pub config: Vec<(String, String)>,
    pub vertices: Vec<VertexSpec>,
    pub edges: Vec<EdgeSpec>,
}

impl JobSpec {
    pub fn vertex_index(&self, id: &str) -> Option<usize> {
        self.vertices.iter().position(|v| v.id == id)
    }

    pub fn inputs_of(&self, v: usize) -> impl Iterator<Item = &EdgeSpec> {
        self.edges.iter().filter(move |e| e.to == v)
    }

    pub fn has_outputs(&self, v: usize) -> bool {
        self.edges.iter().any(|e| e.from == v)
    }
}

/// A parsed and validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub(crate) cluster: ClusterSpec,
    pub(crate) staleness: Staleness,
    pub(crate) entry_delay_us: u64,
    /// Serve the batch metric endpoints proposed in FLINK-39617 (`[server] batch_metrics`).
    pub(crate) batch_metrics: bool,
    pub(crate) jobs: Vec<JobSpec>,
}

impl Scenario {
    /// Parses a scenario; relative trace paths resolve against the current directory.
    pub fn from_toml_str(s: &str) -> Result<Scenario, ScenarioError> {
        Self::parse(s, Path::new("."))
    }

    /// Reads and parses a scenario file; relative trace paths resolve against its folder.
    pub fn from_file(p: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(p).map_err(|source| ScenarioError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let base = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Self::parse(&text, base)
    }

    fn parse(text: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario =
            toml::from_str(text).map_err(|e| ScenarioError::Syntax(e.to_string()))?;
        validate(raw, base)
    }

    /// Job names in scenario order.
    pub fn job_names(&self) -> Vec<String> {
        self.jobs.iter().map(|j| j.name.clone()).collect()
    }

    /// Job ids in scenario order.
    pub fn job_ids(&self) -> Vec<String> {
        self.jobs.iter().map(|j| j.id.clone()).collect()
    }

    /// The staleness layers this scenario switches on.
    pub fn staleness(&self) -> Staleness {
        self.staleness
    }

    /// Total number of subtasks over all jobs at their initial parallelism.
    pub fn total_subtasks(&self) -> u64 {
        self.jobs
            .iter()
            .flat_map(|j| &j.vertices)
            .map(|v| u64::from(v.parallelism))
            .sum()
    }
}

// ---- raw TOML shape -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    cluster: Option<RawCluster>,
    server: Option<RawServer>,
    staleness: Option<RawStaleness>,
    fleet: Option<RawFleet>,
    #[serde(default)]
    job: Vec<RawJob>,
}

/// `[fleet]`: serve many copies of one job, for a session cluster of thousands of jobs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFleet {
    jobs: u32,
    template: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    flink_version: Option<String>,
    taskmanagers: Option<u32>,
    slots_per_taskmanager: Option<u32>,
    scheduler: Option<String>,
    start_epoch_ms: Option<u64>,
    fetcher_update_interval_ms: Option<u64>,
    #[serde(default)]
    config: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    entry_delay_us: Option<u64>,
    batch_metrics: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStaleness {
    preset: Option<String>,
    tm_update_interval_ms: Option<u64>,
    rate_window_ms: Option<u64>,
    fetcher_interval_ms: Option<u64>,
    warmup_ms: Option<u64>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: String,
    id: Option<String>,
    downtime_ms: Option<u64>,
    rescale_delay_ms: Option<u64>,
    savepoint_ms: Option<u64>,
    checkpoint_interval_ms: Option<u64>,
    state_size_bytes: Option<f64>,
    state_growth_bytes_per_s: Option<f64>,
    #[serde(default)]
    config: BTreeMap<String, toml::Value>,
    #[serde(default)]
    vertex: Vec<RawVertex>,
    #[serde(default)]
    edge: Vec<RawEdge>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVertex {
    name: String,
    id: Option<String>,
    operators: Option<Vec<String>>,
    parallelism: u32,
    max_parallelism: Option<u32>,
    capacity: f64,
    selectivity: Option<f64>,
    skew: Option<f64>,
    record_bytes: Option<f64>,
    extra_metrics: Option<u32>,
    busy_time_nan: Option<bool>,
    source: Option<RawSource>,
    sink: Option<RawSink>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    partitions: Option<u32>,
    splits: Option<u32>,
    topic: Option<String>,
    initial_lag: Option<f64>,
    lazy_pending_records: Option<bool>,
    rate: RawRate,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    write_capacity: Option<f64>,
}

#[derive(Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawRate {
    Constant {
        value: f64,
    },
    Steps {
        steps: Vec<RawStep>,
    },
    Diurnal {
        min: f64,
        max: f64,
        period_s: Option<f64>,
        peak_at_s: Option<f64>,
        noise: Option<f64>,
        noise_interval_s: Option<f64>,
        seed: Option<u64>,
    },
    Csv {
        path: String,
        repeat: Option<bool>,
    },
    /// A diurnal day scaled per day of the week.
    Weekly {
        min: f64,
        max: f64,
        peak_at_s: Option<f64>,
        noise: Option<f64>,
        noise_interval_s: Option<f64>,
        seed: Option<u64>,
        days: Vec<f64>,
    },
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at_s: f64,
    rate: f64,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEdge {
    from: String,
    to: String,
    ship_strategy: String,
}

// ---- validation ------------------------------------------------------------------------

fn config_pairs(
    field: &str,
    raw: BTreeMap<String, toml::Value>,
) -> Result<Vec<(String, String)>, ScenarioError> {
    raw.into_iter()
        .map(|(k, v)| {
            let s = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => {
                    return Err(ScenarioError::invalid(
                        format!("{field}.\"{k}\""),
                        "must be a string, number or boolean",
                    ))
                }
            };
            Ok((k, s))
        })
        .collect()
}

fn check_finite(field: &str, v: f64, min: f64, inclusive: bool) -> Result<f64, ScenarioError> {
    let ok = v.is_finite() && if inclusive { v >= min } else { v > min };
    if ok {
        Ok(v)
    } else {
        let rel = if inclusive {
            "at least"
        } else {
            "greater than"
        };
        Err(ScenarioError::invalid(
            field,
            format!("must be a finite number {rel} {min}, got {v}"),
        ))
    }
}

fn validate(raw: RawScenario, base: &Path) -> Result<Scenario, ScenarioError> {
    let rc = raw.cluster;
    let scheduler = rc
        .as_ref()
        .and_then(|c| c.scheduler.clone())
        .unwrap_or_else(|| "adaptive".into());
    let adaptive_scheduler = match scheduler.as_str() {
        "adaptive" => true,
        "default" => false,
        other => {
            return Err(ScenarioError::invalid(
                "cluster.scheduler",
                format!("must be \"adaptive\" or \"default\", got \"{other}\""),
            ))
        }
    };
    let slots = rc
        .as_ref()
        .and_then(|c| c.slots_per_taskmanager)
        .unwrap_or(8);
    if slots == 0 {
        return Err(ScenarioError::invalid(
            "cluster.slots_per_taskmanager",
            "must be at least 1",
        ));
    }
    if rc.as_ref().and_then(|c| c.taskmanagers) == Some(0) {
        return Err(ScenarioError::invalid(
            "cluster.taskmanagers",
            "must be at least 1",
        ));
    }
    let staleness = validate_staleness(raw.staleness)?;
    let fetcher_update_interval_ms = fetcher_update_interval(
        rc.as_ref().and_then(|c| c.fetcher_update_interval_ms),
        &staleness,
    )?;
    let cluster = ClusterSpec {
        flink_version: rc
            .as_ref()
            .and_then(|c| c.flink_version.clone())
            .unwrap_or_else(|| "2.3.0".into()),
        taskmanagers: rc.as_ref().and_then(|c| c.taskmanagers),
        slots_per_taskmanager: slots,
        adaptive_scheduler,
        start_epoch_ms: rc.as_ref().and_then(|c| c.start_epoch_ms),
        fetcher_update_interval_ms,
        config: config_pairs("cluster.config", rc.map(|c| c.config).unwrap_or_default())?,
        rescale_history_size: 0,
    };
    let history_size = cluster
        .config
        .iter()
        .find(|(k, _)| k == RESCALE_HISTORY_SIZE);
    let cluster = match history_size {
        None => cluster,
        Some((_, v)) => {
            let size = v.trim().parse::<u32>().map_err(|_| {
                ScenarioError::invalid(
                    format!("cluster.config.\"{RESCALE_HISTORY_SIZE}\""),
                    format!("must be a whole number of rescales to keep, got \"{v}\""),
                )
            })?;
            ClusterSpec {
                rescale_history_size: size,
                ..cluster
            }
        }
    };
    if raw.job.is_empty() {
        return Err(ScenarioError::invalid(
            "job",
            "a scenario needs at least one [[job]]",
        ));
    }
    let raw_jobs = match raw.fleet {
        Some(fleet) => expand_fleet(fleet, raw.job)?,
        None => raw.job,
    };
    let mut jobs = Vec::with_capacity(raw_jobs.len());
    let mut job_ids = HashMap::new();
    for (ji, rj) in raw_jobs.into_iter().enumerate() {
        let job = validate_job(ji, rj, base)?;
        if let Some(prev) = job_ids.insert(job.id.clone(), ji) {
            return Err(ScenarioError::invalid(
                format!("job[{ji}].name"),
                format!(
                    "job id {} is the same as job[{prev}]'s; job names (or ids) must be unique",
                    job.id
                ),
            ));
        }
        jobs.push(job);
    }
    Ok(Scenario {
        cluster,
        staleness,
        entry_delay_us: raw
            .server
            .as_ref()
            .and_then(|s| s.entry_delay_us)
            .unwrap_or(0),
        batch_metrics: raw
            .server
            .as_ref()
            .and_then(|s| s.batch_metrics)
            .unwrap_or(false),
        jobs,
    })
}

/// Most jobs a `[fleet]` may serve.
const MAX_FLEET_JOBS: u32 = 100_000;

/// Replaces the template job by `fleet.jobs` copies named `<template>-<n>` (zero-padded, from
/// 0); each copy gets its own job and vertex ids, derived from its name as for any job.
fn expand_fleet(fleet: RawFleet, jobs: Vec<RawJob>) -> Result<Vec<RawJob>, ScenarioError> {
    if !(1..=MAX_FLEET_JOBS).contains(&fleet.jobs) {
        return Err(ScenarioError::invalid(
            "fleet.jobs",
            format!("must be 1..={MAX_FLEET_JOBS}, got {}", fleet.jobs),
        ));
    }
    let index = match &fleet.template {
        Some(name) => jobs.iter().position(|j| &j.name == name).ok_or_else(|| {
            ScenarioError::invalid("fleet.template", format!("no [[job]] named \"{name}\""))
        })?,
        None if jobs.len() == 1 => 0,
        None => {
            return Err(ScenarioError::invalid(
                "fleet.template",
                "the scenario has several jobs; name the one to copy",
            ))
        }
    };
    if jobs[index].id.is_some() {
        return Err(ScenarioError::invalid(
            format!("job[{index}].id"),
            "the [fleet] template must not set an id: each copy's id is derived from its name",
        ));
    }
    let width = (fleet.jobs - 1).max(1).ilog10() as usize + 1;
    let mut out = Vec::with_capacity(jobs.len() + fleet.jobs as usize - 1);
    for (i, job) in jobs.into_iter().enumerate() {
        if i != index {
            out.push(job);
            continue;
        }
        for n in 0..fleet.jobs {
            let mut copy = job.clone();
            copy.name = format!("{}-{n:0width$}", job.name);
            out.push(copy);
        }
    }
    Ok(out)
}

/// One `metrics.fetcher.update-interval` for the MetricFetcher's cost and the value
/// snapshots: `[cluster]`'s, else `[staleness]`'s when that layer is on, else Flink's 10 s.
fn fetcher_update_interval(
    cluster: Option<u64>,
    staleness: &Staleness,
) -> Result<u64, ScenarioError> {
    let field = "cluster.fetcher_update_interval_ms";
    let layer = staleness.fetcher_interval_ms;
    match cluster {
        Some(0) => Err(ScenarioError::invalid(
            field,
            "must be at least 1 (Flink refuses 0)",
        )),
        Some(ms) if layer > 0 && ms != layer => Err(ScenarioError::invalid(
            field,
            format!(
                "is {ms} but staleness.fetcher_interval_ms is {layer}; they are one Flink setting"
            ),
        )),
        Some(ms) => Ok(ms),
        None if layer > 0 => Ok(layer),
        None => Ok(crate::fetcher::DEFAULT_UPDATE_INTERVAL_MS),
    }
}

fn validate_staleness(raw: Option<RawStaleness>) -> Result<Staleness, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(Staleness::default());
    };
    let base = match raw.preset.as_deref() {
        None | Some("none") => Staleness::default(),
        Some("flink") => Staleness {
            tm_update_interval_ms: 5_000,
            rate_window_ms: 60_000,
            fetcher_interval_ms: 10_000,
            warmup_ms: 10_000,
        },
        Some(other) => {
            return Err(ScenarioError::invalid(
                "staleness.preset",
                format!("must be \"flink\" or \"none\", got \"{other}\""),
            ))
        }
    };
    Ok(Staleness {
        tm_update_interval_ms: raw
            .tm_update_interval_ms
            .unwrap_or(base.tm_update_interval_ms),
        rate_window_ms: raw.rate_window_ms.unwrap_or(base.rate_window_ms),
        fetcher_interval_ms: raw.fetcher_interval_ms.unwrap_or(base.fetcher_interval_ms),
        warmup_ms: raw.warmup_ms.unwrap_or(base.warmup_ms),
    })
}

fn validate_job(ji: usize, rj: RawJob, base: &Path) -> Result<JobSpec, ScenarioError> {
    let f = |s: &str| format!("job[{ji}].{s}");
    if rj.name.trim().is_empty() {
        return Err(ScenarioError::invalid(f("name"), "must not be empty"));
    }
    let id = match rj.id {
        Some(id) if is_flink_id(&id) => id.to_ascii_lowercase(),
        Some(id) => {
            return Err(ScenarioError::invalid(
                f("id"),
                format!("must be 32 hex characters, got \"{id}\""),
            ))
        }
        None => stable_id(&["job", &rj.name]),
    };
    if rj.vertex.is_empty() {
        return Err(ScenarioError::invalid(
            f("vertex"),
            "a job needs at least one [[job.vertex]]",
        ));
    }
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut vertices = Vec::with_capacity(rj.vertex.len());
    for (vi, rv) in rj.vertex.into_iter().enumerate() {
        let v = validate_vertex(ji, vi, &rj.name, rv, base)?;
        if names.insert(v.name.clone(), vi).is_some() {
            return Err(ScenarioError::invalid(
                format!("job[{ji}].vertex[{vi}].name"),
                format!(
                    "\"{}\" is used by two vertices; vertex names must be unique",
                    v.name
                ),
            ));
        }
        vertices.push(v);
    }
    let mut edges = Vec::with_capacity(rj.edge.len());
    for (ei, re) in rj.edge.into_iter().enumerate() {
        let ef = |s: &str| format!("job[{ji}].edge[{ei}].{s}");
        let from = *names.get(&re.from).ok_or_else(|| {
            ScenarioError::invalid(ef("from"), format!("no vertex named \"{}\"", re.from))
        })?;
        let to = *names.get(&re.to).ok_or_else(|| {
            ScenarioError::invalid(ef("to"), format!("no vertex named \"{}\"", re.to))
        })?;
        let ship = ShipStrategy::parse(&re.ship_strategy).ok_or_else(|| {
            ScenarioError::invalid(
                ef("ship_strategy"),
                format!(
                    "must be one of FORWARD, HASH, REBALANCE, RESCALE, BROADCAST, got \"{}\"",
                    re.ship_strategy
                ),
            )
        })?;
        if from == to {
            return Err(ScenarioError::invalid(
                ef("to"),
                "an edge cannot connect a vertex to itself",
            ));
        }
        if ship == ShipStrategy::Forward && vertices[from].parallelism != vertices[to].parallelism {
            return Err(ScenarioError::invalid(
                ef("ship_strategy"),
                "FORWARD needs equal parallelism on both ends (Flink rejects such a job graph)",
            ));
        }
        if vertices[to].source.is_some() {
            return Err(ScenarioError::invalid(
                ef("to"),
                format!("\"{}\" is a source and cannot have inputs", re.to),
            ));
        }
        edges.push(EdgeSpec { from, to, ship });
    }
    for (vi, v) in vertices.iter().enumerate() {
        let has_input = edges.iter().any(|e| e.to == vi);
        if v.source.is_none() && !has_input {
            return Err(ScenarioError::invalid(
                format!("job[{ji}].vertex[{vi}].source"),
                format!("vertex \"{}\" has no input edge, so it must be a source (add [job.vertex.source])", v.name),
            ));
        }
        if v.write_capacity.is_some() && edges.iter().any(|e| e.from == vi) {
            return Err(ScenarioError::invalid(
                format!("job[{ji}].vertex[{vi}].sink"),
                format!(
                    "vertex \"{}\" has outgoing edges, so it is not a sink",
                    v.name
                ),
            ));
        }
    }
    let (vertices, edges) = topological(ji, vertices, edges)?;
    let non_negative = |name: &str, v: Option<f64>, default: f64| {
        check_finite(&f(name), v.unwrap_or(default), 0.0, true)
    };
    Ok(JobSpec {
        id,
        name: rj.name,
        downtime_ms: rj.downtime_ms.unwrap_or(3_000),
        rescale_delay_ms: rj.rescale_delay_ms.unwrap_or(0),
        savepoint_ms: rj.savepoint_ms.unwrap_or(400),
        checkpoint_interval_ms: rj.checkpoint_interval_ms.unwrap_or(10_000),
        state_size_bytes: non_negative("state_size_bytes", rj.state_size_bytes, 30_000.0)?,
        state_growth_bytes_per_s: non_negative(
            "state_growth_bytes_per_s",
            rj.state_growth_bytes_per_s,
            0.0,
        )?,
        config: config_pairs(&f("config"), rj.config)?,
        vertices,
        edges,
    })
}

fn validate_vertex(
    ji: usize,
    vi: usize,
    job: &str,
    rv: RawVertex,
    base: &Path,
) -> Result<VertexSpec, ScenarioError> {
    let f = |s: &str| format!("job[{ji}].vertex[{vi}].{s}");
    if rv.name.trim().is_empty() {
        return Err(ScenarioError::invalid(f("name"), "must not be empty"));
    }
    let id = match rv.id {
        Some(id) if is_flink_id(&id) => id.to_ascii_lowercase(),
        Some(id) => {
            return Err(ScenarioError::invalid(
                f("id"),
                format!("must be 32 hex characters, got \"{id}\""),
            ))
        }
        None => stable_id(&["vertex", job, &rv.name]),
    };
    let max_parallelism = rv.max_parallelism.unwrap_or(128);
    if max_parallelism == 0 || max_parallelism > 32_768 {
        return Err(ScenarioError::invalid(
            f("max_parallelism"),
            "must be between 1 and 32768",
        ));
    }
    if rv.parallelism == 0 || rv.parallelism > max_parallelism {
        return Err(ScenarioError::invalid(
            f("parallelism"),
            format!(
                "must be between 1 and max_parallelism ({max_parallelism}), got {}",
                rv.parallelism
            ),
        ));
    }
    let operators = rv
        .operators
        .unwrap_or_else(|| rv.name.split(" -> ").map(str::to_string).collect());
    if operators.is_empty() || operators.iter().any(|o| o.trim().is_empty()) {
        return Err(ScenarioError::invalid(
            f("operators"),
            "must list at least one non-empty operator name",
        ));
    }
    let skew = check_finite(&f("skew"), rv.skew.unwrap_or(0.0), 0.0, true)?;
    if skew > 1.0 {
        return Err(ScenarioError::invalid(
            f("skew"),
            format!("must be between 0 and 1, got {skew}"),
        ));
    }
    let source = match rv.source {
        None => None,
        Some(rs) => Some(validate_source(&f("source"), rs, base)?),
    };
    let write_capacity = match rv.sink.and_then(|s| s.write_capacity) {
        None => None,
        Some(w) => Some(check_finite(&f("sink.write_capacity"), w, 0.0, false)?),
    };
    Ok(VertexSpec {
        id,
        name: rv.name,
        operator_scopes: operators.iter().map(|o| operator_scope(o)).collect(),
        parallelism: rv.parallelism,
        max_parallelism,
        capacity: check_finite(&f("capacity"), rv.capacity, 0.0, false)?,
        selectivity: check_finite(&f("selectivity"), rv.selectivity.unwrap_or(1.0), 0.0, true)?,
        skew,
        record_bytes: check_finite(
            &f("record_bytes"),
            rv.record_bytes.unwrap_or(100.0),
            0.0,
            true,
        )?,
        extra_metrics: rv.extra_metrics.unwrap_or(0),
        busy_time_nan: rv.busy_time_nan.unwrap_or(false),
        source,
        write_capacity,
    })
}

fn validate_source(f: &str, rs: RawSource, base: &Path) -> Result<SourceSpec, ScenarioError> {
    if rs.partitions == Some(0) {
        return Err(ScenarioError::invalid(
            format!("{f}.partitions"),
            "must be at least 1",
        ));
    }
    if rs.partitions.is_some() && rs.splits.is_some() {
        return Err(ScenarioError::invalid(
            format!("{f}.splits"),
            "a source has either Kafka-style partitions or a bounded number of splits, not both",
        ));
    }
    let rf = |s: &str| format!("{f}.rate.{s}");
    let rate = match rs.rate {
        RawRate::Constant { value } => {
            RateProfile::Constant(check_finite(&rf("value"), value, 0.0, true)?)
        }
        RawRate::Steps { steps } => {
            if steps.is_empty() {
                return Err(ScenarioError::invalid(
                    rf("steps"),
                    "must list at least one {at_s, rate}",
                ));
            }
            let mut out: Vec<(f64, f64)> = Vec::with_capacity(steps.len());
            for (i, s) in steps.iter().enumerate() {
                let at = check_finite(&rf(&format!("steps[{i}].at_s")), s.at_s, 0.0, true)?;
                let r = check_finite(&rf(&format!("steps[{i}].rate")), s.rate, 0.0, true)?;
                if out.last().is_some_and(|p| p.0 >= at) {
                    return Err(ScenarioError::invalid(
                        rf(&format!("steps[{i}].at_s")),
                        "steps must be in increasing at_s order",
                    ));
                }
                out.push((at, r));
            }
            RateProfile::Steps(out)
        }
        RawRate::Diurnal {
            min,
            max,
            period_s,
            peak_at_s,
            noise,
            noise_interval_s,
            seed,
        } => diurnal_rate(
            &rf,
            min,
            max,
            period_s,
            peak_at_s,
            noise,
            noise_interval_s,
            seed,
        )?,
        RawRate::Weekly {
            min,
            max,
            peak_at_s,
            noise,
            noise_interval_s,
            seed,
            days,
        } => {
            let daily = diurnal_rate(
                &rf,
                min,
                max,
                None,
                peak_at_s,
                noise,
                noise_interval_s,
                seed,
            )?;
            let factors: [f64; 7] = days.as_slice().try_into().map_err(|_| {
                ScenarioError::invalid(
                    rf("days"),
                    format!(
                        "must list 7 day factors (the first simulated day first), got {}",
                        days.len()
                    ),
                )
            })?;
            for (i, d) in factors.iter().enumerate() {
                check_finite(&format!("{}[{i}]", rf("days")), *d, 0.0, true)?;
            }
            RateProfile::Weekly {
                daily: Box::new(daily),
                days: factors,
            }
        }
        RawRate::Csv { path, repeat } => {
            let full = base.join(&path);
            let points = read_trace(&full).map_err(|m| {
                ScenarioError::invalid(rf("path"), format!("{}: {m}", full.display()))
            })?;
            RateProfile::Trace {
                points,
                repeat: repeat.unwrap_or(true),
            }
        }
    };
    Ok(SourceSpec {
        partitions: rs.partitions,
        splits: rs.splits,
        topic: rs.topic.unwrap_or_else(|| "input".into()),
        rate,
        lazy_pending_records: rs.lazy_pending_records.unwrap_or(false),
        initial_lag: check_finite(
            &format!("{f}.initial_lag"),
            rs.initial_lag.unwrap_or(0.0),
            0.0,
            true,
        )?,
    })
}

/// A validated diurnal curve; `rf` names the fields.
#[allow(clippy::too_many_arguments)]
fn diurnal_rate(
    rf: &dyn Fn(&str) -> String,
    min: f64,
    max: f64,
    period_s: Option<f64>,
    peak_at_s: Option<f64>,
    noise: Option<f64>,
    noise_interval_s: Option<f64>,
    seed: Option<u64>,
) -> Result<RateProfile, ScenarioError> {
    let min = check_finite(&rf("min"), min, 0.0, true)?;
    let max = check_finite(&rf("max"), max, 0.0, true)?;
    if max < min {
        return Err(ScenarioError::invalid(
            rf("max"),
            format!("must be at least min ({min})"),
        ));
    }
    let noise = check_finite(&rf("noise"), noise.unwrap_or(0.0), 0.0, true)?;
    if noise >= 1.0 {
        return Err(ScenarioError::invalid(
            rf("noise"),
            "must be below 1 (a relative amplitude)",
        ));
    }
    Ok(RateProfile::Diurnal {
        min,
        max,
        period_s: check_finite(&rf("period_s"), period_s.unwrap_or(86_400.0), 0.0, false)?,
        peak_at_s: check_finite(&rf("peak_at_s"), peak_at_s.unwrap_or(50_400.0), 0.0, true)?,
        noise,
        noise_interval_s: check_finite(
            &rf("noise_interval_s"),
            noise_interval_s.unwrap_or(60.0),
            0.0,
            false,
        )?,
        seed: seed.unwrap_or(1),
    })
}

/// Reads a `seconds,rate` CSV (a header row is allowed) into sorted points.
fn read_trace(path: &Path) -> Result<Vec<(f64, f64)>, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_path(path)
        .map_err(|e| e.to_string())?;
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| e.to_string())?;
        let (Some(a), Some(b)) = (rec.get(0), rec.get(1)) else {
            return Err(format!(
                "line {}: expected two columns: seconds,rate",
                i + 1
            ));
        };
        let (Ok(t), Ok(r)) = (a.parse::<f64>(), b.parse::<f64>()) else {
            if i == 0 {
                continue; // header row
            }
            return Err(format!("line {}: \"{a},{b}\" is not two numbers", i + 1));
        };
        if !t.is_finite() || !r.is_finite() || r < 0.0 || t < 0.0 {
            return Err(format!(
                "line {}: seconds and rate must be finite and non-negative",
                i + 1
            ));
        }
        if points.last().is_some_and(|p| p.0 >= t) {
            return Err(format!("line {}: seconds must increase", i + 1));
        }
        points.push((t, r));
    }
    if points.is_empty() {
        return Err("the trace has no data rows".into());
    }
    Ok(points)
}

/// Orders vertices so every edge points forward; rejects cycles.
fn topological(
    ji: usize,
    vertices: Vec<VertexSpec>,
    edges: Vec<EdgeSpec>,
) -> Result<(Vec<VertexSpec>, Vec<EdgeSpec>), ScenarioError> {
    let n = vertices.len();
    let mut indegree = vec![0usize; n];
    for e in &edges {
        indegree[e.to] += 1;
    }
    let mut order = Vec::with_capacity(n);
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).rev().collect();
    while let Some(v) = ready.pop() {
        order.push(v);
        let mut next: Vec<usize> = edges.iter().filter(|e| e.from == v).map(|e| e.to).collect();
        next.sort_unstable();
        for to in next.into_iter().rev() {
            indegree[to] -= 1;
            if indegree[to] == 0 {
                ready.push(to);
            }
        }
    }
    if order.len() != n {
        return Err(ScenarioError::invalid(
            format!("job[{ji}].edge"),
            "the edges form a cycle; a job graph must be acyclic",
        ));
    }
    let mut new_index = vec![0usize; n];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<VertexSpec>> = vertices.into_iter().map(Some).collect();
    let sorted = order
        .iter()
        .map(|&old| slots[old].take().expect("each vertex is placed once"))
        .collect();
    let edges = edges
        .into_iter()
        .map(|e| EdgeSpec {
            from: new_index[e.from],
            to: new_index[e.to],
            ship: e.ship,
        })
        .collect();
    Ok((sorted, edges))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
[[job]]
name = "j"
[[job.vertex]]
name = "Source: S"
parallelism = 2
capacity = 100
source = { partitions = 4, rate = { kind = "constant", value = 50 } }
[[job.vertex]]
name = "Sink: Writer"
parallelism = 1
capacity = 100
[[job.edge]]
from = "Source: S"
to = "Sink: Writer"
ship_strategy = "rebalance"
"#;

    #[test]
    fn parses_a_minimal_job() {
        let s = Scenario::from_toml_str(OK).unwrap();
        assert_eq!(s.jobs[0].vertices[0].operator_scopes, vec!["Source__S"]);
        assert_eq!(s.jobs[0].edges[0].ship, ShipStrategy::Rebalance);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = OK.replace("capacity = 100\nsource", "capacity = -1\nsource");
        let e = Scenario::from_toml_str(&bad).unwrap_err();
        assert_eq!(e.field(), Some("job[0].vertex[0].capacity"), "{e}");
        let bad = OK.replace("\"rebalance\"", "\"zigzag\"");
        let e = Scenario::from_toml_str(&bad).unwrap_err();
        assert_eq!(e.field(), Some("job[0].edge[0].ship_strategy"));
        let bad = OK.replace("capacity = 100\nsource", "capcity = 100\nsource");
        let e = Scenario::from_toml_str(&bad).unwrap_err().to_string();
        assert!(e.contains("capcity"), "{e}");
    }

    #[test]
    fn rejects_cycles() {
        let cyc = format!("{OK}\n[[job.edge]]\nfrom = \"Sink: Writer\"\nto = \"Source: S\"\nship_strategy = \"HASH\"\n");
        let e = Scenario::from_toml_str(&cyc).unwrap_err();
        assert_eq!(e.field(), Some("job[0].edge[1].to"));
    }

    #[test]
    fn a_fleet_serves_copies_of_the_template_with_their_own_ids() {
        let s = Scenario::from_toml_str(&format!("[fleet]\njobs = 12\n{OK}")).unwrap();
        assert_eq!(s.jobs.len(), 12);
        assert_eq!(s.jobs[0].name, "j-00");
        assert_eq!(s.jobs[11].name, "j-11");
        let ids: std::collections::HashSet<_> = s.jobs.iter().map(|j| j.id.clone()).collect();
        assert_eq!(ids.len(), 12, "distinct job ids");
        assert_ne!(s.jobs[0].vertices[0].id, s.jobs[1].vertices[0].id);
        assert_eq!(s.total_subtasks(), 12 * 3);
        let one = Scenario::from_toml_str(&format!("[fleet]\njobs = 1\n{OK}")).unwrap();
        assert_eq!(one.job_names(), vec!["j-0"]);
    }

    #[test]
    fn a_fleet_is_checked() {
        let two = format!("{OK}{}", OK.replace("name = \"j\"", "name = \"k\""));
        let e = Scenario::from_toml_str(&format!("[fleet]\njobs = 3\n{two}")).unwrap_err();
        assert_eq!(e.field(), Some("fleet.template"), "{e}");
        let s = Scenario::from_toml_str(&format!("[fleet]\njobs = 3\ntemplate = \"k\"\n{two}"))
            .unwrap();
        assert_eq!(s.job_names(), vec!["j", "k-0", "k-1", "k-2"]);
        let e = Scenario::from_toml_str(&format!("[fleet]\njobs = 3\ntemplate = \"x\"\n{OK}"))
            .unwrap_err();
        assert_eq!(e.field(), Some("fleet.template"), "{e}");
        let e = Scenario::from_toml_str(&format!("[fleet]\njobs = 0\n{OK}")).unwrap_err();
        assert_eq!(e.field(), Some("fleet.jobs"), "{e}");
        let with_id = OK.replace(
            "name = \"j\"",
            "name = \"j\"\nid = \"0123456789abcdef0123456789abcdef\"",
        );
        let e = Scenario::from_toml_str(&format!("[fleet]\njobs = 2\n{with_id}")).unwrap_err();
        assert_eq!(e.field(), Some("job[0].id"), "{e}");
    }
}
