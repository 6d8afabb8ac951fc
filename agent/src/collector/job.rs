//! The collector of one job: incarnation tracking, the name cache, one filtered request per
//! vertex, usability checks, and the bounded window. One [`JobCollector::poll`] is one poll.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::history::SampleWindow;
use super::names::{resolve, ResolvedNames, Selection};
use super::query::{aggregates, build_queries, reporting_subtasks, vertex_sample};
use super::slices::{SlicePlan, SlicedAnswers};
use super::usability::Unusable;
use crate::config::{window_capacity, BusyAggregator, Config};
use crate::flink::model::{AggregatedMetric, JobDetails, JobOverview};
use crate::flink::{FlinkClient, FlinkError};
use crate::telemetry::{self, VertexFigures};
use crate::window::{Input, Sample, VertexSample, VertexSpec};

const RUNNING: &str = "RUNNING";
const AUTOSCALER_PREFIX: &str = "job.autoscaler.";
/// Hard cap on samples per job, whatever a job's own window asks for.
const MAX_WINDOW_SAMPLES: usize = 100_000;
/// Reporting-only metrics (non-source backpressure) are read on every this many polls.
const REPORTING_EVERY: u64 = 4;

/// The collector's knobs, derived from the configuration.
#[derive(Debug, Clone)]
pub struct CollectorSettings {
    pub busy_aggregator: BusyAggregator,
    pub max_request_line_bytes: usize,
    pub names_refresh_ms: u64,
    pub slow_refresh_ms: u64,
    pub fetcher_interval_ms: u64,
    pub window_ms: u64,
    pub window_capacity: usize,
    pub poll_interval_ms: u64,
    /// Jobs with more subtasks are read in slices (see [`super::slices`]).
    pub slice_above_subtasks: u32,
    pub slice_passes_per_window: u32,
}

impl CollectorSettings {
    pub fn from_config(c: &Config) -> Self {
        let ms = |d: crate::config::Dur| u64::try_from(d.0.as_millis()).unwrap_or(u64::MAX);
        CollectorSettings {
            busy_aggregator: c.collector.busy_time_aggregator,
            max_request_line_bytes: c.jobmanager.max_request_line_bytes,
            names_refresh_ms: ms(c.collector.names_refresh_interval),
            slow_refresh_ms: ms(c.collector.slow_refresh_interval),
            fetcher_interval_ms: ms(c.jobmanager.fetcher_update_interval),
            window_ms: c
                .metrics_window()
                .map(|d| d.as_millis() as u64)
                .unwrap_or(15 * 60_000),
            window_capacity: c.window_capacity(),
            poll_interval_ms: ms(c.collector.poll_interval),
            slice_above_subtasks: c.collector.slice_above_subtasks,
            slice_passes_per_window: c.collector.slice_passes_per_window,
        }
    }

    /// Reads every job whole, whatever its size: for one-shot reads such as `collect --once`.
    pub fn without_slicing(mut self) -> Self {
        self.slice_above_subtasks = u32::MAX;
        self
    }

    /// Slices per vertex for a job of `subtasks` whose window is `window_ms` long: the polls
    /// in one window over the passes wanted, or 1 (whole) for jobs up to the threshold.
    pub fn slices_for(&self, subtasks: u64, window_ms: u64) -> u32 {
        if subtasks <= u64::from(self.slice_above_subtasks) {
            return 1;
        }
        let polls = window_ms / self.poll_interval_ms.max(1);
        let slices = polls / u64::from(self.slice_passes_per_window.max(1));
        u32::try_from(slices).unwrap_or(u32::MAX).max(1)
    }
}

/// What one poll produced, for the daemon, `collect` and the benchmark.
#[derive(Debug, Clone, Default)]
pub struct PollReport {
    /// JobManager requests this poll sent.
    pub requests: u64,
    /// The job restarted, was rescaled or changed topology since the previous poll.
    pub new_incarnation: bool,
    /// Why this poll's data must not be used, if so.
    pub unusable: Option<Unusable>,
}

/// The latest state of one job, as published to the HTTP server and printed by `collect`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobSnapshot {
    pub job_id: String,
    pub name: String,
    pub state: String,
    pub running_since_ms: Option<i64>,
    pub polled_at_ms: u64,
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
    /// The raw aggregated answers per vertex, served by the Flink-compatible read.
    #[serde(skip)]
    pub values: BTreeMap<String, Vec<AggregatedMetric>>,
}

/// What changes on `/jobs/overview` when a job restarts or rescales.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OverviewMark {
    state: String,
    last_modification: Option<i64>,
    total_tasks: Option<i64>,
}

/// One incarnation of a job: the RUNNING timestamp and the topology with parallelism.
#[derive(Debug, Clone, PartialEq)]
struct Incarnation {
    running_since_ms: Option<i64>,
    topology: Vec<VertexSpec>,
}

#[derive(Debug, Clone)]
struct CachedNames {
    names: Arc<ResolvedNames>,
    listed_at_ms: u64,
}

/// What reading one vertex gave: its names, its (merged) values, and for a sliced vertex how
/// many of its slices have been read since its names were listed.
struct VertexRead {
    names: Arc<ResolvedNames>,
    values: Vec<AggregatedMetric>,
    slices_read: Option<u32>,
}

/// Per-poll counters.
#[derive(Debug, Default)]
struct PollCounters {
    requests: u64,
    hits: u64,
    misses: u64,
    resolutions: u64,
}

/// The collector state of one job.
pub struct JobCollector {
    job_id: String,
    settings: Arc<CollectorSettings>,
    mark: Option<OverviewMark>,
    incarnation: Option<Incarnation>,
    force_details: bool,
    names: HashMap<String, CachedNames>,
    /// Large jobs: each vertex's latest answer per slice of subtasks.
    slices: HashMap<String, SlicedAnswers>,
    window: SampleWindow,
    previous: Option<Sample>,
    next_slow_refresh_ms: u64,
    polls: u64,
    snapshot: JobSnapshot,
}

impl JobCollector {
    pub fn new(job_id: impl Into<String>, settings: Arc<CollectorSettings>) -> Self {
        let job_id = job_id.into();
        JobCollector {
            window: SampleWindow::new(settings.window_ms, settings.window_capacity),
            snapshot: JobSnapshot {
                job_id: job_id.clone(),
                ..Default::default()
            },
            job_id,
            settings,
            mark: None,
            incarnation: None,
            force_details: false,
            names: HashMap::new(),
            slices: HashMap::new(),
            previous: None,
            next_slow_refresh_ms: 0,
            polls: 0,
        }
    }

    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The window of usable samples.
    pub fn window(&self) -> &SampleWindow {
        &self.window
    }

    /// Starts the window over (for example after an actuation).
    pub fn reset_window(&mut self) {
        self.window.clear();
        self.previous = None;
    }

    /// The latest published state.
    pub fn snapshot(&self) -> &JobSnapshot {
        &self.snapshot
    }

    /// Polls the job once. `overview` is this job's entry of the latest `/jobs/overview`.
    /// Errors abort the poll (the daemon backs off); data problems do not, they make the
    /// poll unusable and say why.
    pub async fn poll(
        &mut self,
        client: &FlinkClient,
        overview: &JobOverview,
        now_ms: u64,
    ) -> Result<PollReport, FlinkError> {
        let mut counters = PollCounters::default();
        let result = self
            .poll_inner(client, overview, now_ms, &mut counters)
            .await;
        telemetry::record_name_cache(counters.hits, counters.misses, counters.resolutions);
        let (new_incarnation, verdict) = result?;
        let unusable = verdict.as_ref().map(|(reason, _)| *reason);
        if let Some((reason, detail)) = &verdict {
            tracing::info!(job_id = %self.job_id, reason = reason.label(), "poll data unusable: {detail}");
        }
        self.snapshot.name.clone_from(&overview.name);
        self.snapshot.polled_at_ms = now_ms;
        self.snapshot.usable = verdict.is_none();
        self.snapshot.unusable_reason = unusable;
        self.snapshot.unusable_detail = verdict.map(|(_, d)| d);
        self.snapshot.window_samples = self.window.len();
        self.snapshot.window_full = self.window.is_full();
        telemetry::record_usability(
            &self.job_id,
            unusable.map(Unusable::label),
            self.window.len(),
        );
        telemetry::record_last_poll(&self.job_id, now_ms);
        Ok(PollReport {
            requests: counters.requests,
            new_incarnation,
            unusable,
        })
    }

    async fn poll_inner(
        &mut self,
        client: &FlinkClient,
        overview: &JobOverview,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<(bool, Option<(Unusable, String)>), FlinkError> {
        let mark = OverviewMark {
            state: overview.state.clone(),
            last_modification: overview.last_modification,
            total_tasks: overview.tasks.as_ref().and_then(|t| t.total),
        };
        self.snapshot.state.clone_from(&overview.state);
        if overview.state != RUNNING {
            self.mark = Some(mark);
            self.reset_window();
            return Ok((
                false,
                Some((Unusable::NotRunning, format!("job is {}", overview.state))),
            ));
        }

        let mut verdict: Option<(Unusable, String)> = None;
        let mut new_incarnation = false;
        if self.force_details || self.incarnation.is_none() || self.mark.as_ref() != Some(&mark) {
            counters.requests += 1;
            let details = client.job_details(&self.job_id).await?;
            self.force_details = false;
            self.mark = Some(mark);
            if details.state != RUNNING {
                self.snapshot.state.clone_from(&details.state);
                self.reset_window();
                return Ok((
                    false,
                    Some((Unusable::NotRunning, format!("job is {}", details.state))),
                ));
            }
            let incarnation = Incarnation {
                running_since_ms: details.running_since_ms(),
                topology: topology_of(&details),
            };
            if self.incarnation.as_ref() != Some(&incarnation) {
                if let Some(old) = &self.incarnation {
                    new_incarnation = true;
                    verdict = Some((Unusable::Restarted, describe_change(old, &incarnation)));
                }
                self.names.clear();
                self.slices.clear();
                self.snapshot.values.clear();
                self.reset_window();
                self.snapshot.running_since_ms = incarnation.running_since_ms;
                self.snapshot.topology.clone_from(&incarnation.topology);
                self.incarnation = Some(incarnation);
            }
            if verdict.is_none() {
                verdict = incomplete_flag(&details);
            }
        }

        let topology = self.snapshot.topology.clone();
        let feeding: HashSet<&str> = topology
            .iter()
            .flat_map(|v| v.inputs.iter().map(|i| i.id.as_str()))
            .collect();
        let subtasks: u64 = topology.iter().map(|v| u64::from(v.parallelism)).sum();
        let slices = self.settings.slices_for(subtasks, self.window.window_ms());
        // Reporting-only metrics would cost every slice's subtasks again; sliced jobs skip them.
        let reporting = slices == 1 && self.polls.is_multiple_of(REPORTING_EVERY);
        let slice = u32::try_from(self.polls % u64::from(slices)).unwrap_or(0);
        self.polls += 1;
        let mut sample = Sample {
            time_ms: now_ms,
            vertices: BTreeMap::new(),
        };
        let mut values_by_vertex = BTreeMap::new();
        for spec in &topology {
            let sel = Selection {
                busy_aggregator: self.settings.busy_aggregator,
                sink: !feeding.contains(spec.id.as_str()),
                reporting,
                backlog: true,
            };
            let plan = SlicePlan::new(spec.parallelism, slices);
            let VertexRead {
                names,
                values,
                slices_read,
            } = self
                .read_vertex(client, spec, sel, plan, slice, now_ms, counters)
                .await?;
            let vs = vertex_sample(&names, &values);
            if verdict.is_none() {
                verdict = match slices_read {
                    Some(read) if read < plan.count() => Some((
                        Unusable::Incomplete,
                        format!(
                            "vertex {} is read in {} slices of subtasks; {read} read so far",
                            spec.id,
                            plan.count()
                        ),
                    )),
                    _ => vertex_problem(spec, &names, &vs),
                };
            }
            sample.vertices.insert(spec.id.clone(), vs);
            // Keep the last value of metrics read less often, for the compatible reads.
            let mut merged = values;
            for old in self.snapshot.values.get(&spec.id).into_iter().flatten() {
                if !merged.iter().any(|m| m.id == old.id) {
                    merged.push(old.clone());
                }
            }
            values_by_vertex.insert(spec.id.clone(), merged);
        }
        self.fill_partitions();

        if verdict.is_none() {
            verdict = self.freshness(&sample);
        }
        let before = self.previous.take();
        self.publish_vertex_figures(&sample, before.as_ref());
        self.previous = before;
        match &verdict {
            None => {
                self.window.push(sample.clone());
                self.previous = Some(sample.clone());
            }
            Some((Unusable::Restarted, _)) => {
                // A counter went backwards without a visible incarnation change: start the
                // window over from this sample and re-read the job details next time.
                if !new_incarnation {
                    self.window.clear();
                    self.force_details = true;
                }
                self.previous = Some(sample.clone());
            }
            Some(_) => {}
        }
        self.snapshot.sample = Some(sample);
        self.snapshot.values = values_by_vertex;
        self.snapshot.names = self
            .names
            .iter()
            .map(|(k, v)| (k.clone(), (*v.names).clone()))
            .collect();

        if now_ms >= self.next_slow_refresh_ms {
            self.next_slow_refresh_ms = now_ms.saturating_add(self.settings.slow_refresh_ms);
            self.slow_refresh(client, counters).await;
        }
        Ok((new_incarnation, verdict))
    }

    /// Reads one vertex: cached (or freshly listed) names, then its values, whole or one
    /// slice merged with the other slices' latest answers.
    #[allow(clippy::too_many_arguments)]
    async fn read_vertex(
        &mut self,
        client: &FlinkClient,
        spec: &VertexSpec,
        mut sel: Selection,
        plan: SlicePlan,
        slice: u32,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<VertexRead, FlinkError> {
        let filter = plan.filter(slice);
        let (mut names, listed) = self.names_for(client, spec, now_ms, counters).await?;
        if plan.is_sliced() {
            // Newly listed names may differ from what earlier slices were asked for.
            let current = self.slices.get(&spec.id);
            if listed || current.is_none_or(|a| a.plan() != plan) {
                self.slices
                    .insert(spec.id.clone(), SlicedAnswers::new(plan));
            }
            sel.backlog = !self.slices[&spec.id].without_backlog(slice);
        } else {
            self.slices.remove(&spec.id);
        }
        let mut values = self
            .fetch_values(client, &spec.id, &names, sel, filter.as_deref(), counters)
            .await?;
        if values.is_empty() && plan.is_sliced() && sel.backlog && !names.pending_records.is_empty()
        {
            // A slice whose subtasks hold no partitions reports no backlog, and asking for it
            // empties the whole answer. Remembered for this slice until names are listed again.
            sel.backlog = false;
            values = self
                .fetch_values(client, &spec.id, &names, sel, filter.as_deref(), counters)
                .await?;
            if let (false, Some(answers)) = (values.is_empty(), self.slices.get_mut(&spec.id)) {
                answers.mark_without_backlog(slice);
            }
        }
        // A vertex is listed at most once per poll: a listing this poll is already fresh.
        if values.is_empty() && !listed && !names.requested(sel).is_empty() {
            // All-or-nothing: one requested name has no value any more. Resolve again.
            tracing::info!(job_id = %self.job_id, vertex_id = %spec.id, "filtered request returned []; resolving names again");
            names = self.list_names(client, spec, now_ms, counters).await?;
            if let Some(answers) = self.slices.get_mut(&spec.id) {
                *answers = SlicedAnswers::new(plan);
            }
            values = self
                .fetch_values(client, &spec.id, &names, sel, filter.as_deref(), counters)
                .await?;
        }
        let mut slices_read = None;
        if let Some(answers) = self.slices.get_mut(&spec.id) {
            answers.record(slice, values);
            values = answers.merged();
            slices_read = Some(answers.read());
        }
        Ok(VertexRead {
            names,
            values,
            slices_read,
        })
    }

    /// Cached names, listing them on a miss; also says whether this call listed them.
    /// A listing that lacks a required name is not final: right after a job (re)starts Flink
    /// lists no or only some names for a while, so such a vertex is listed again on its next
    /// poll until the listing is complete. Sources whose lazily registered metrics
    /// (`pendingRecords`, partition offsets) are still missing are re-listed on a slow timer.
    async fn names_for(
        &mut self,
        client: &FlinkClient,
        spec: &VertexSpec,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<(Arc<ResolvedNames>, bool), FlinkError> {
        let Some(cached) = self.names.get(&spec.id) else {
            counters.misses += 1;
            let names = self.list_names(client, spec, now_ms, counters).await?;
            return Ok((names, true));
        };
        let incomplete = cached.names.missing_required().is_some();
        let lazy_missing = spec.is_source()
            && (cached.names.pending_records.is_empty() || cached.names.source_partitions == 0);
        let due = now_ms.saturating_sub(cached.listed_at_ms) >= self.settings.names_refresh_ms;
        // An incomplete listing counts as a miss; the slow refresh of a complete one as a hit.
        if incomplete {
            counters.misses += 1;
        } else {
            counters.hits += 1;
        }
        if incomplete || (lazy_missing && due) {
            let names = self.list_names(client, spec, now_ms, counters).await?;
            return Ok((names, true));
        }
        Ok((Arc::clone(&cached.names), false))
    }

    async fn list_names(
        &mut self,
        client: &FlinkClient,
        spec: &VertexSpec,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<Arc<ResolvedNames>, FlinkError> {
        counters.requests += 1;
        counters.resolutions += 1;
        let listed = client.metric_names(&self.job_id, &spec.id).await?;
        let names = Arc::new(resolve(
            listed.iter().map(|m| m.id.as_str()),
            spec.is_source(),
        ));
        self.names.insert(
            spec.id.clone(),
            CachedNames {
                names: Arc::clone(&names),
                listed_at_ms: now_ms,
            },
        );
        Ok(names)
    }

    /// One request per vertex (more only when the names do not fit one request line), over
    /// the subtasks `filter` selects (all when `None`). An empty answer to any part means the
    /// whole answer is empty.
    async fn fetch_values(
        &self,
        client: &FlinkClient,
        vertex_id: &str,
        names: &ResolvedNames,
        sel: Selection,
        filter: Option<&str>,
        counters: &mut PollCounters,
    ) -> Result<Vec<AggregatedMetric>, FlinkError> {
        let all = names.requested(sel);
        let filter = filter.map(|f| format!("&{f}")).unwrap_or_default();
        let path_len = format!(
            "/jobs/{}/vertices/{vertex_id}/subtasks/metrics?",
            self.job_id
        )
        .len()
            + filter.len();
        let queries = build_queries(
            &all,
            aggregates(self.settings.busy_aggregator),
            self.settings.max_request_line_bytes,
            |q| client.request_line_len("") + path_len + q,
        );
        let mut values = Vec::with_capacity(all.len());
        for query in queries {
            counters.requests += 1;
            let part = client
                .metric_values(&self.job_id, vertex_id, &format!("{query}{filter}"))
                .await?;
            if part.is_empty() {
                return Ok(Vec::new());
            }
            values.extend(part);
        }
        Ok(values)
    }

    /// Staleness: a poll sooner than the fetcher interval, or values identical to the
    /// previous poll while records flow, means the JobManager has not refreshed.
    fn freshness(&self, sample: &Sample) -> Option<(Unusable, String)> {
        let prev = self.previous.as_ref()?;
        let elapsed = sample.time_ms.saturating_sub(prev.time_ms);
        if elapsed < self.settings.fetcher_interval_ms {
            return Some((Unusable::Stale, format!(
                "only {elapsed} ms since the previous sample; the JobManager refreshes metrics every {} ms",
                self.settings.fetcher_interval_ms
            )));
        }
        for (vid, now) in &sample.vertices {
            let Some(before) = prev.vertices.get(vid) else {
                continue;
            };
            if let (Some(a), Some(b)) = (before.num_records_in, now.num_records_in) {
                if b.0 < a.0 {
                    return Some((
                        Unusable::Restarted,
                        format!("records-in counter of vertex {vid} went backwards"),
                    ));
                }
            }
        }
        let flowing = sample.vertices.values().any(|v| {
            v.num_records_in_per_second.is_some_and(|r| r.0 > 0.0)
                || v.busy_time_ms_per_second
                    .and_then(|b| b.max)
                    .is_some_and(|b| b.0 > 0.0)
        });
        // The counters are what the fetcher refreshes; gauges may legitimately repeat.
        let key = |v: &VertexSample| {
            (
                v.num_records_in,
                v.num_records_out,
                v.busy_time_ms_per_second,
            )
        };
        let unchanged = !sample.vertices.is_empty()
            && sample
                .vertices
                .iter()
                .all(|(vid, now)| prev.vertices.get(vid).map(key) == Some(key(now)));
        (flowing && unchanged).then(|| {
            (
                Unusable::Stale,
                format!("values unchanged for {elapsed} ms while records flow"),
            )
        })
    }

    fn fill_partitions(&mut self) {
        for spec in &mut self.snapshot.topology {
            if let Some(cached) = self.names.get(&spec.id) {
                spec.source_partitions = cached.names.source_partitions;
            }
        }
    }

    /// Per-vertex gauges. Rates come from the counters' change since the previous sample
    /// (sources report their own input rate), so they need no extra metric per subtask.
    fn publish_vertex_figures(&self, sample: &Sample, previous: Option<&Sample>) {
        for spec in &self.snapshot.topology {
            let Some(v) = sample.vertices.get(&spec.id) else {
                continue;
            };
            let busy =
                v.busy_time_ms_per_second
                    .and_then(|b| match self.settings.busy_aggregator {
                        BusyAggregator::Max => b.max,
                        BusyAggregator::Avg => b.avg,
                        BusyAggregator::Min => b.min,
                    });
            let busy_ratio = busy.map(|b| b.0 / 1000.0).filter(|b| b.is_finite());
            let before = previous.and_then(|p| p.vertices.get(&spec.id).map(|b| (p.time_ms, b)));
            let rate = |counter: fn(&VertexSample) -> Option<crate::window::FlinkF64>| {
                let (t0, b) = before?;
                let dt = sample.time_ms.checked_sub(t0).filter(|d| *d > 0)? as f64 / 1000.0;
                let delta = counter(v)?.0 - counter(b)?.0;
                (delta >= 0.0).then_some(delta / dt)
            };
            let input_rate = if spec.is_source() {
                v.num_records_in_per_second.map(|r| r.0)
            } else {
                rate(|s| s.num_records_in)
            };
            let figures = VertexFigures {
                busy_ratio,
                backpressure_ratio: v.backpressured_time_ms_per_second.map(|b| b.0 / 1000.0),
                input_rate,
                output_rate: rate(|s| s.num_records_out),
                true_processing_rate: match (input_rate, busy_ratio) {
                    (Some(r), Some(b)) if b > 0.0 => Some(r / b),
                    _ => None,
                },
                lag: if spec.is_source() {
                    Some(v.pending_records.map_or(0.0, |p| p.0))
                } else {
                    None
                },
                parallelism: spec.parallelism,
            };
            telemetry::record_vertex(&self.job_id, &spec.id, &figures);
        }
    }

    /// Checkpoint size and the job's `job.autoscaler.*` overrides: read rarely. Failures are
    /// counted and logged; they never fail the poll.
    async fn slow_refresh(&mut self, client: &FlinkClient, counters: &mut PollCounters) {
        counters.requests += 2;
        match client.checkpoints(&self.job_id).await {
            Ok(c) => self.snapshot.state_size_bytes = c.latest_state_size_bytes(),
            // 404: checkpointing is not enabled for this job.
            Err(FlinkError::Status { status: 404, .. }) => self.snapshot.state_size_bytes = None,
            Err(err) => {
                telemetry::record_error(err.kind());
                tracing::warn!(job_id = %self.job_id, error = %err, "reading checkpoint statistics failed");
            }
        }
        match client.job_config(&self.job_id).await {
            Ok(entries) => {
                self.snapshot.autoscaler_overrides = entries
                    .into_iter()
                    .filter(|e| e.key.starts_with(AUTOSCALER_PREFIX))
                    .map(|e| (e.key, e.value))
                    .collect();
                self.apply_window_override();
            }
            Err(FlinkError::Status { status: 404, .. }) => {}
            Err(err) => {
                telemetry::record_error(err.kind());
                tracing::warn!(job_id = %self.job_id, error = %err, "reading the job configuration failed");
            }
        }
    }
}

impl JobCollector {
    /// A job's own `job.autoscaler.metrics.window` sizes its window; without one, or with an
    /// unreadable one (logged), the fleet default applies.
    fn apply_window_override(&mut self) {
        let key = format!("{AUTOSCALER_PREFIX}{}", crate::config::WINDOW_KEY);
        let window = match self.snapshot.autoscaler_overrides.get(&key) {
            None => Duration::from_millis(self.settings.window_ms),
            Some(raw) => match crate::config::parse_flink_duration(raw) {
                Ok(d) if d >= Duration::from_millis(self.settings.poll_interval_ms) => d,
                Ok(_) | Err(_) => {
                    tracing::warn!(job_id = %self.job_id, value = %raw, "ignoring the job's {key}: not a duration of at least one poll interval");
                    Duration::from_millis(self.settings.window_ms)
                }
            },
        };
        let capacity = window_capacity(
            window,
            Duration::from_millis(self.settings.poll_interval_ms),
        )
        .min(MAX_WINDOW_SAMPLES);
        if self.window.resize(window.as_millis() as u64, capacity) {
            tracing::info!(job_id = %self.job_id, window_ms = window.as_millis() as u64, "metric window resized");
        }
    }
}

/// The engine's view of the job graph: vertices with parallelism and input edges.
fn topology_of(details: &JobDetails) -> Vec<VertexSpec> {
    let inputs: HashMap<&str, Vec<Input>> = details
        .plan
        .iter()
        .flat_map(|p| p.nodes.iter())
        .map(|n| {
            let inputs = n
                .inputs
                .iter()
                .flatten()
                .map(|i| Input {
                    id: i.id.clone(),
                    ship_strategy: ship_strategy(i.ship_strategy.as_deref()),
                })
                .collect();
            (n.id.as_str(), inputs)
        })
        .collect();
    details
        .vertices
        .iter()
        .map(|v| VertexSpec {
            id: v.id.clone(),
            name: v.name.clone(),
            parallelism: v.parallelism,
            max_parallelism: v.max_parallelism,
            source_partitions: 0,
            inputs: inputs.get(v.id.as_str()).cloned().unwrap_or_default(),
        })
        .collect()
}

/// Known partitioner names, upper-cased; anything else is UNKNOWN (as the operator does).
fn ship_strategy(raw: Option<&str>) -> String {
    let s = raw.unwrap_or("").trim().to_ascii_uppercase();
    match s.as_str() {
        "FORWARD" | "HASH" | "REBALANCE" | "RESCALE" | "BROADCAST" | "GLOBAL" | "SHUFFLE"
        | "CUSTOM" => s,
        _ => "UNKNOWN".into(),
    }
}

fn describe_change(old: &Incarnation, new: &Incarnation) -> String {
    if old.running_since_ms != new.running_since_ms {
        return format!(
            "job restarted (RUNNING since {:?}, was {:?})",
            new.running_since_ms, old.running_since_ms
        );
    }
    let ids = |i: &Incarnation| i.topology.iter().map(|v| v.id.clone()).collect::<Vec<_>>();
    if ids(old) != ids(new) {
        return "topology changed".into();
    }
    let changed: Vec<String> = old
        .topology
        .iter()
        .zip(&new.topology)
        .filter(|(a, b)| a.parallelism != b.parallelism)
        .map(|(a, b)| format!("{} {}->{}", a.id, a.parallelism, b.parallelism))
        .collect();
    if changed.is_empty() {
        "job graph changed".into()
    } else {
        format!("rescaled: {}", changed.join(", "))
    }
}

fn incomplete_flag(details: &JobDetails) -> Option<(Unusable, String)> {
    details.vertices.iter().find_map(|v| {
        let field = v.metrics.as_ref()?.incomplete_field()?;
        Some((
            Unusable::Incomplete,
            format!("vertex {}: {field} is false", v.id),
        ))
    })
}

/// A vertex sample is unusable when a needed value is missing or covers too few subtasks.
fn vertex_problem(
    spec: &VertexSpec,
    names: &ResolvedNames,
    v: &VertexSample,
) -> Option<(Unusable, String)> {
    if let Some(metric) = names.missing_required() {
        return Some((
            Unusable::MissingValue,
            format!("vertex {} does not report {metric}", spec.id),
        ));
    }
    let missing = [
        ("busy time", v.busy_time_ms_per_second.is_none()),
        (
            "backpressured time",
            spec.is_source() && v.backpressured_time_ms_per_second.is_none(),
        ),
        (
            "records-in rate",
            spec.is_source() && v.num_records_in_per_second.is_none(),
        ),
        ("records-in counter", v.num_records_in.is_none()),
    ]
    .into_iter()
    .find(|(_, m)| *m);
    if let Some((what, _)) = missing {
        return Some((
            Unusable::MissingValue,
            format!("no {what} value for vertex {}", spec.id),
        ));
    }
    match reporting_subtasks(v) {
        Some(n) if n < f64::from(spec.parallelism) => Some((
            Unusable::Incomplete,
            format!(
                "vertex {}: {n} of {} subtasks report busy time",
                spec.id, spec.parallelism
            ),
        )),
        _ => None,
    }
}
