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
    pub config: Vec<(String, String)>,
}

/// A source vertex's external input.
#[derive(Debug, Clone)]
pub(crate) struct SourceSpec {
    /// Kafka-style partitions; when set, the source reports `pendingRecords` and
    /// per-partition offset metrics, and subtasks beyond the partition count stay idle.
    pub partitions: Option<u32>,
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
    #[serde(default)]
    job: Vec<RawJob>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    flink_version: Option<String>,
    taskmanagers: Option<u32>,
    slots_per_taskmanager: Option<u32>,
    scheduler: Option<String>,
    start_epoch_ms: Option<u64>,
    #[serde(default)]
    config: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    entry_delay_us: Option<u64>,
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

#[derive(Deserialize)]
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

#[derive(Deserialize)]
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    partitions: Option<u32>,
    topic: Option<String>,
    initial_lag: Option<f64>,
    lazy_pending_records: Option<bool>,
    rate: RawRate,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    write_capacity: Option<f64>,
}

#[derive(Deserialize)]
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at_s: f64,
    rate: f64,
}

#[derive(Deserialize)]
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
    let cluster = ClusterSpec {
        flink_version: rc
            .as_ref()
            .and_then(|c| c.flink_version.clone())
            .unwrap_or_else(|| "2.3.0".into()),
        taskmanagers: rc.as_ref().and_then(|c| c.taskmanagers),
        slots_per_taskmanager: slots,
        adaptive_scheduler,
        start_epoch_ms: rc.as_ref().and_then(|c| c.start_epoch_ms),
        config: config_pairs("cluster.config", rc.map(|c| c.config).unwrap_or_default())?,
    };
    let staleness = validate_staleness(raw.staleness)?;
    if raw.job.is_empty() {
        return Err(ScenarioError::invalid(
            "job",
            "a scenario needs at least one [[job]]",
        ));
    }
    let mut jobs = Vec::with_capacity(raw.job.len());
    let mut job_ids = HashMap::new();
    for (ji, rj) in raw.job.into_iter().enumerate() {
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
        entry_delay_us: raw.server.and_then(|s| s.entry_delay_us).unwrap_or(0),
        jobs,
    })
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
        } => {
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
            RateProfile::Diurnal {
                min,
                max,
                period_s: check_finite(&rf("period_s"), period_s.unwrap_or(86_400.0), 0.0, false)?,
                peak_at_s: check_finite(
                    &rf("peak_at_s"),
                    peak_at_s.unwrap_or(50_400.0),
                    0.0,
                    true,
                )?,
                noise,
                noise_interval_s: check_finite(
                    &rf("noise_interval_s"),
                    noise_interval_s.unwrap_or(60.0),
                    0.0,
                    false,
                )?,
                seed: seed.unwrap_or(1),
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
}
