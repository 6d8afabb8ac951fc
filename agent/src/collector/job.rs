//! The collector of one job. One [`JobCollector::poll`] is one poll: note the job's
//! incarnation, read this poll's numbers, rule on their usability, publish the gauges and
//! keep a usable sample in the window. Each step lives in its own module; this one orders
//! them and holds the job's state between polls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::gauges;
use super::incarnation::{Change, IncarnationTracker, OverviewMark};
use super::name_cache::NameCache;
use super::names::Selection;
use super::query::{finished_vertex_sample, vertex_sample};
use super::settings::CollectorSettings;
use super::snapshot::{JobSnapshot, PollReport};
use super::source::{PollCounters, ReadContext, SourceKind, Sources, VertexAsk};
use super::usability::{
    freshness, incomplete_flag, not_running, slices_unread, vertex_problem, Problem, Unusable,
};
use super::window::SampleWindow;
use crate::flink::model::{AggregatedMetric, JobDetails, JobOverview};
use crate::flink::scheduler;
use crate::flink::{FlinkClient, FlinkError};
use crate::telemetry;
use flink_autoscale_core::samples::Sample;

mod facts;

const RUNNING: &str = "RUNNING";
/// Reporting-only metrics (non-source backpressure) are read on every this many polls.
const REPORTING_EVERY: u64 = 4;

/// What one poll's data amounts to: whether it began a new incarnation, and the first
/// problem found (none: the sample is usable).
#[derive(Debug, Default)]
struct Outcome {
    new_incarnation: bool,
    source: SourceKind,
    problem: Option<Problem>,
}

/// One poll's reading: the sample, the raw answers per vertex, the first vertex problem,
/// and the source that read them.
struct Reading {
    source: SourceKind,
    sample: Sample,
    values: BTreeMap<String, Vec<AggregatedMetric>>,
    problem: Option<Problem>,
}

/// The collector state of one job.
pub struct JobCollector {
    job_id: String,
    settings: Arc<CollectorSettings>,
    incarnation: IncarnationTracker,
    names: NameCache,
    sources: Sources,
    window: SampleWindow,
    previous: Option<Sample>,
    next_slow_refresh_ms: u64,
    polls: u64,
    snapshot: JobSnapshot,
    /// Sources seen running with FINISHED subtasks: how many subtasks got a split (the
    /// subtasks a bounded source can use). Kept for the job's life in this agent: once
    /// rescaled down to that count no subtask finishes, but the splits are still that many.
    source_splits: HashMap<String, u32>,
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
            incarnation: IncarnationTracker::default(),
            names: NameCache::default(),
            sources: Sources::default(),
            previous: None,
            next_slow_refresh_ms: 0,
            polls: 0,
            source_splits: HashMap::new(),
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
        let outcome = result?;
        let unusable = outcome.problem.as_ref().map(|p| p.reason);
        if let Some(p) = &outcome.problem {
            tracing::info!(job_id = %self.job_id, reason = p.reason.label(), "poll data unusable: {}", p.detail);
        }
        self.snapshot.name.clone_from(&overview.name);
        self.snapshot.polled_at_ms = now_ms;
        self.snapshot.usable = outcome.problem.is_none();
        self.snapshot.unusable_reason = unusable;
        self.snapshot.unusable_detail = outcome.problem.map(|p| p.detail);
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
            new_incarnation: outcome.new_incarnation,
            unusable,
            source: outcome.source,
        })
    }

    async fn poll_inner(
        &mut self,
        client: &FlinkClient,
        overview: &JobOverview,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<Outcome, FlinkError> {
        self.snapshot.state.clone_from(&overview.state);
        if let Some(kind) = &overview.scheduler_type {
            self.learn_scheduler(scheduler::from_scheduler_type(kind));
        }
        let mark = OverviewMark::of(overview);
        if overview.state != RUNNING {
            self.incarnation.note_mark(mark);
            self.reset_window();
            return Ok(Outcome {
                problem: Some(not_running(&overview.state)),
                ..Outcome::default()
            });
        }
        let mut outcome = Outcome::default();
        if self.incarnation.needs_details(&mark) {
            counters.requests += 1;
            let details = client.job_details(&self.job_id).await?;
            self.incarnation.note_mark(mark);
            if details.state != RUNNING {
                self.snapshot.state.clone_from(&details.state);
                self.reset_window();
                return Ok(Outcome {
                    problem: Some(not_running(&details.state)),
                    ..Outcome::default()
                });
            }
            outcome = self.adopt(&details);
        }

        let reading = self.read(client, now_ms, counters).await?;
        let problem = outcome.problem.take().or(reading.problem).or_else(|| {
            freshness(
                self.previous.as_ref(),
                &reading.sample,
                self.settings.fetcher_interval_ms,
            )
        });
        outcome.problem = problem;
        gauges::publish(
            &self.job_id,
            &self.snapshot.topology,
            &reading.sample,
            self.previous.as_ref(),
            self.settings.busy_aggregator,
        );
        self.snapshot.metric_source = reading.source;
        outcome.source = reading.source;
        if outcome.problem.as_ref().is_some_and(|p| p.topology_suspect) {
            self.incarnation.recheck_topology(now_ms);
        }
        self.keep(reading.sample, &outcome);
        self.snapshot.values = reading.values;
        self.snapshot.names = self.names.to_map();

        if now_ms >= self.next_slow_refresh_ms {
            self.next_slow_refresh_ms = now_ms.saturating_add(self.settings.slow_refresh_ms);
            self.slow_refresh(client, counters).await;
        }
        Ok(outcome)
    }

    /// Folds in the job details: a new incarnation drops the names, slices and window.
    fn adopt(&mut self, details: &JobDetails) -> Outcome {
        let mut outcome = Outcome::default();
        let change = self.incarnation.note_details(details);
        if change != Change::Same {
            if let Change::New(detail) = change {
                outcome.new_incarnation = true;
                outcome.problem = Some(Problem::new(Unusable::Restarted, detail));
            }
            self.names.clear();
            self.sources.clear();
            self.snapshot.values.clear();
            self.reset_window();
            if let Some(incarnation) = self.incarnation.current() {
                self.snapshot.running_since_ms = incarnation.running_since_ms;
                self.snapshot.topology.clone_from(&incarnation.topology);
            }
        }
        if outcome.problem.is_none() {
            outcome.problem = incomplete_flag(details);
        }
        self.note_finished(details);
        if let Some(kind) = &details.scheduler_type {
            self.learn_scheduler(scheduler::from_scheduler_type(kind));
        } else if let Some(batch) = details
            .job_type
            .as_deref()
            .and_then(scheduler::from_job_type)
        {
            self.learn_scheduler(batch);
        }
        outcome
    }

    /// Reads every vertex of the current topology, whole or one slice of subtasks each.
    async fn read(
        &mut self,
        client: &FlinkClient,
        now_ms: u64,
        counters: &mut PollCounters,
    ) -> Result<Reading, FlinkError> {
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
        let ctx = ReadContext {
            client,
            job_id: &self.job_id,
            settings: &self.settings,
            now_ms,
            slices,
            slice,
        };
        // Vertices whose subtasks all FINISHED report nothing: never asked (as upstream).
        let asks: Vec<VertexAsk> = topology
            .iter()
            .filter(|spec| !spec.is_finished())
            .map(|spec| VertexAsk {
                spec,
                sel: Selection {
                    busy_aggregator: self.settings.busy_aggregator,
                    sink: !feeding.contains(spec.id.as_str()),
                    reporting,
                    backlog: true,
                },
            })
            .collect();
        let (source, reads) = self
            .sources
            .read(&ctx, &mut self.names, &asks, counters)
            .await?;
        let mut reading = Reading {
            source,
            sample: Sample {
                time_ms: now_ms,
                vertices: BTreeMap::new(),
            },
            values: BTreeMap::new(),
            problem: None,
        };
        let mut reads = reads.into_iter();
        for spec in &topology {
            if spec.is_finished() {
                let vs = finished_vertex_sample(spec, self.previous.as_ref());
                reading.sample.vertices.insert(spec.id.clone(), vs);
                reading.values.insert(spec.id.clone(), Vec::new());
                continue;
            }
            let Some(read) = reads.next() else {
                break;
            };
            let vs = vertex_sample(&read.names, &read.values);
            if reading.problem.is_none() {
                reading.problem = read
                    .slices_read
                    .and_then(|(done, count)| slices_unread(&spec.id, done, count))
                    .or_else(|| vertex_problem(spec, &read.names, &vs));
            }
            reading.sample.vertices.insert(spec.id.clone(), vs);
            let values = self.with_rarely_read(&spec.id, read.values);
            reading.values.insert(spec.id.clone(), values);
        }
        for spec in &mut self.snapshot.topology {
            let partitions = self.names.source_partitions(&spec.id).unwrap_or(0);
            if partitions == 0
                && spec.is_source()
                && spec.finished_subtasks > 0
                && !spec.is_finished()
            {
                let usable = spec.running_subtasks();
                if self.source_splits.insert(spec.id.clone(), usable) != Some(usable) {
                    tracing::info!(job_id = %self.job_id, vertex_id = %spec.id, usable, parallelism = spec.parallelism, "source: {usable} of {} subtasks got a split, the others FINISHED; it is never scaled above {usable}", spec.parallelism);
                }
            }
            spec.source_partitions = if partitions > 0 {
                partitions
            } else {
                self.source_splits.get(&spec.id).copied().unwrap_or(0)
            };
        }
        Ok(reading)
    }

    /// This poll's answers plus the last value of metrics read less often, for the
    /// Flink-compatible reads.
    fn with_rarely_read(
        &self,
        vertex_id: &str,
        mut values: Vec<AggregatedMetric>,
    ) -> Vec<AggregatedMetric> {
        for old in self.snapshot.values.get(vertex_id).into_iter().flatten() {
            if !values.iter().any(|m| m.id == old.id) {
                values.push(old.clone());
            }
        }
        values
    }

    /// Keeps a usable sample in the window; a counter that went backwards without a
    /// visible incarnation change starts the window over from this sample and has the job
    /// details read again next time.
    fn keep(&mut self, sample: Sample, outcome: &Outcome) {
        match outcome.problem.as_ref().map(|p| p.reason) {
            None => {
                self.window.push(sample.clone());
                self.previous = Some(sample.clone());
            }
            Some(Unusable::Restarted) => {
                if !outcome.new_incarnation {
                    self.window.clear();
                    self.incarnation.force_details();
                }
                self.previous = Some(sample.clone());
            }
            Some(_) => {}
        }
        self.snapshot.sample = Some(sample);
    }
}
