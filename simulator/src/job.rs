//! One simulated job over time: its lifecycle (running, restarting, finished), rescales,
//! checkpoints and savepoints, and the metric views the REST layer reads.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::ids::stable_id;
use crate::model::JobRuntime;
use crate::rescales::{Ending, RescaleLog, Trigger};
use crate::scenario::{JobSpec, Staleness};
use crate::view::{reported_view, CounterHistory, JobView, ViewSource};

/// Longest integration step; rates are re-evaluated at least this often.
const MAX_STEP_MS: u64 = 1_000;
/// Completed checkpoints kept for `/checkpoints` history (Flink's `web.checkpoints.history`).
const CHECKPOINT_HISTORY: usize = 10;

fn target_of(phase: &Phase) -> Vec<u32> {
    match phase {
        Phase::Restarting { target, .. } => target.clone(),
        _ => Vec::new(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    Running,
    /// Tasks are down; at `until_ms` the job runs again at `target` parallelism.
    Restarting {
        until_ms: u64,
        target: Vec<u32>,
        rescale: bool,
    },
    /// Stopped with a savepoint (`canceled: false`) or canceled.
    Finished {
        at_ms: u64,
        canceled: bool,
    },
}

impl Phase {
    pub fn job_status(&self) -> &'static str {
        match self {
            Phase::Running => "RUNNING",
            Phase::Restarting { .. } => "RESTARTING",
            Phase::Finished {
                canceled: false, ..
            } => "FINISHED",
            Phase::Finished { canceled: true, .. } => "CANCELED",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CheckpointRecord {
    pub id: u64,
    pub trigger_ms: u64,
    pub duration_ms: u64,
    pub state_size: u64,
    pub checkpointed_size: u64,
    pub is_savepoint: bool,
    pub external_path: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct CheckpointLog {
    /// Newest last.
    pub history: Vec<CheckpointRecord>,
    pub completed: u64,
    pub next_id: u64,
    pub latest_savepoint: Option<CheckpointRecord>,
    pub restored: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
pub(crate) struct SavepointOp {
    pub trigger_id: String,
    pub done_at_ms: u64,
    pub location: String,
    pub stop: bool,
}

#[derive(Debug, Clone, Default)]
struct JmCache {
    visible: Option<Arc<JobView>>,
    in_flight: Option<Arc<JobView>>,
    last_trigger_ms: Option<u64>,
}

/// A rescale accepted by `PUT /resource-requirements` and not finished yet.
#[derive(Debug, Clone)]
pub(crate) struct PendingRescale {
    pub restart_at_ms: u64,
    pub target: Vec<u32>,
}

pub(crate) struct JobSim {
    pub spec: Arc<JobSpec>,
    pub catalogs: Vec<Arc<Catalog>>,
    pub rt: JobRuntime,
    pub phase: Phase,
    pub t_ms: u64,
    sim_start_ms: u64,
    pub submitted_ms: u64,
    pub running_since_ms: u64,
    pub last_modification_ms: u64,
    /// (lower, upper) bounds per vertex, as `GET /resource-requirements` shows them.
    pub requirements: Vec<(u32, u32)>,
    pub rescale: Option<PendingRescale>,
    pub restarts: u64,
    pub rescales: u64,
    /// Flink 2.3's rescale history (empty when the scenario does not switch it on).
    pub rescale_log: RescaleLog,
    pub rate_multiplier: f64,
    pub savepoints: Vec<SavepointOp>,
    pub checkpoints: CheckpointLog,
    staleness: Staleness,
    history: CounterHistory,
    tm_view: Option<Arc<JobView>>,
    jm: JmCache,
    live_cache: Option<(u64, u64, Arc<JobView>)>,
    /// Bumped on every change that alters what a view at the same time would show.
    epoch: u64,
}

impl JobSim {
    /// A job submitted at `start_ms`; `history_size` rescales are kept in its rescale
    /// history (0: none, the history is off).
    pub fn new(spec: JobSpec, start_ms: u64, staleness: Staleness, history_size: u32) -> Self {
        let catalogs = (0..spec.vertices.len())
            .map(|v| Arc::new(Catalog::for_vertex(&spec, v)))
            .collect();
        let rt = JobRuntime::new(&spec);
        let requirements: Vec<(u32, u32)> =
            spec.vertices.iter().map(|v| (1, v.parallelism)).collect();
        let parallelism: Vec<u32> = spec.vertices.iter().map(|v| v.parallelism).collect();
        let mut rescale_log = RescaleLog::new(&spec.id, history_size);
        rescale_log.instant(
            Trigger::InitialSchedule,
            start_ms,
            &requirements,
            None,
            Ending::Succeeded,
            Some(&parallelism),
        );
        let mut job = JobSim {
            spec: Arc::new(spec),
            catalogs,
            rt,
            phase: Phase::Running,
            t_ms: start_ms,
            sim_start_ms: start_ms,
            submitted_ms: start_ms,
            running_since_ms: start_ms,
            last_modification_ms: start_ms,
            requirements,
            rescale: None,
            restarts: 0,
            rescales: 0,
            rescale_log,
            rate_multiplier: 1.0,
            savepoints: Vec::new(),
            checkpoints: CheckpointLog {
                next_id: 1,
                ..CheckpointLog::default()
            },
            staleness,
            history: CounterHistory::default(),
            tm_view: None,
            jm: JmCache::default(),
            live_cache: None,
            epoch: 0,
        };
        job.on_incarnation_start();
        job
    }

    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn parallelism(&self) -> Vec<u32> {
        self.rt.parallelism()
    }

    /// Slots this job occupies (slot sharing: the largest vertex parallelism).
    pub fn slots_used(&self) -> u32 {
        match self.phase {
            Phase::Finished { .. } => 0,
            _ => self.parallelism().into_iter().max().unwrap_or(0),
        }
    }

    fn input_rates(&self, t_ms: u64) -> Vec<f64> {
        let t_s = t_ms.saturating_sub(self.sim_start_ms) as f64 / 1000.0;
        self.spec
            .vertices
            .iter()
            .map(|v| match &v.source {
                // A bounded source that has read all its splits gets nothing more.
                Some(s) if s.splits == Some(0) => 0.0,
                Some(s) => s.rate.rate_at(t_s) * self.rate_multiplier,
                None => 0.0,
            })
            .collect()
    }

    /// How many subtasks of vertex `v` are FINISHED now (0 unless the job runs).
    pub fn finished_subtasks(&self, v: usize) -> u32 {
        if self.phase != Phase::Running {
            return 0;
        }
        let elapsed = self.t_ms.saturating_sub(self.running_since_ms);
        self.rt.vertices[v].finished_subtasks(elapsed).unwrap_or(0)
    }

    /// When the job's state last changed, including subtasks that FINISHED since it began
    /// running (`last-modification` in `/jobs/overview`).
    pub fn last_modification(&self) -> u64 {
        let finished = (0..self.spec.vertices.len()).any(|v| self.finished_subtasks(v) > 0);
        if finished {
            let at = self.running_since_ms + crate::model::SPLITLESS_FINISH_MS;
            self.last_modification_ms.max(at)
        } else {
            self.last_modification_ms
        }
    }

    /// The input rate of each source vertex right now (records/s), by vertex index.
    pub fn current_input_rates(&self) -> Vec<f64> {
        self.input_rates(self.t_ms)
    }

    fn sample_every_ms(&self) -> Option<u64> {
        if self.staleness.tm_update_interval_ms > 0 {
            Some(self.staleness.tm_update_interval_ms)
        } else if self.staleness.rate_window_ms > 0 {
            Some(MAX_STEP_MS)
        } else {
            None
        }
    }

    fn next_event_ms(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| next = Some(next.map_or(t, |n| n.min(t)));
        if let Some(r) = &self.rescale {
            if self.phase == Phase::Running {
                consider(r.restart_at_ms);
            }
        }
        match &self.phase {
            Phase::Restarting { until_ms, .. } => consider(*until_ms),
            Phase::Running => {
                if let Some(c) = self.next_checkpoint_ms() {
                    consider(c);
                }
            }
            Phase::Finished { .. } => {}
        }
        for sp in &self.savepoints {
            if sp.done_at_ms > self.t_ms {
                consider(sp.done_at_ms);
            }
        }
        next
    }

    fn next_checkpoint_ms(&self) -> Option<u64> {
        let every = self.spec.checkpoint_interval_ms;
        if every == 0 {
            return None;
        }
        let elapsed = self.t_ms.saturating_sub(self.running_since_ms);
        Some(self.running_since_ms + (elapsed / every + 1) * every)
    }

    /// Integrates the model up to `target_ms`, firing lifecycle events on the way.
    pub fn advance_to(&mut self, target_ms: u64) {
        while self.t_ms < target_ms {
            let mut next = target_ms.min(self.t_ms + MAX_STEP_MS);
            if let Some(e) = self.next_event_ms() {
                next = next.min(e.max(self.t_ms + 1));
            }
            if let Some(every) = self.sample_every_ms() {
                next = next.min((self.t_ms / every + 1) * every);
            }
            let t_s = self.t_ms.saturating_sub(self.sim_start_ms) as f64 / 1000.0;
            for v in &self.spec.vertices {
                if let Some(jump) = v.source.as_ref().and_then(|s| s.rate.next_jump_after(t_s)) {
                    let jump_ms = self.sim_start_ms + (jump * 1000.0).ceil() as u64;
                    next = next.min(jump_ms.max(self.t_ms + 1));
                }
            }
            let dt_s = (next - self.t_ms) as f64 / 1000.0;
            let rates = self.input_rates(self.t_ms + (next - self.t_ms) / 2);
            match self.phase {
                Phase::Running => self.rt.integrate(&self.spec, dt_s, &rates),
                _ => self.rt.integrate_stopped(&self.spec, dt_s, &rates),
            }
            self.t_ms = next;
            self.fire_events();
            if let Some(every) = self.sample_every_ms() {
                if self.t_ms.is_multiple_of(every) {
                    self.take_sample();
                }
            }
        }
    }

    fn fire_events(&mut self) {
        let now = self.t_ms;
        if self.phase == Phase::Running {
            if let Some(c) = self.next_checkpoint_ms_at_or_before(now) {
                self.complete_checkpoint(c, false);
            }
        }
        let due_rescale = self
            .rescale
            .as_ref()
            .filter(|r| r.restart_at_ms <= now && self.phase == Phase::Running)
            .map(|r| r.target.clone());
        if let Some(target) = due_rescale {
            self.begin_restart(target, true);
        }
        if let Phase::Restarting {
            until_ms,
            target,
            rescale,
        } = &self.phase
        {
            if *until_ms <= now {
                let (target, rescale) = (target.clone(), *rescale);
                self.finish_restart(&target, rescale);
            }
        }
        let mut stopped = false;
        let mut completed = Vec::new();
        for sp in &self.savepoints {
            if sp.done_at_ms == now {
                completed.push(sp.location.clone());
                stopped |= sp.stop;
            }
        }
        for location in completed {
            self.record_savepoint(location);
        }
        if stopped && self.phase == Phase::Running {
            self.phase = Phase::Finished {
                at_ms: now,
                canceled: false,
            };
            self.rescale = None;
            self.rescale_log.end_open(now, Ending::JobFinished, None);
            self.last_modification_ms = now;
            self.on_state_change();
        }
    }

    fn next_checkpoint_ms_at_or_before(&self, now: u64) -> Option<u64> {
        let every = self.spec.checkpoint_interval_ms;
        let elapsed = now.checked_sub(self.running_since_ms)?;
        (every > 0 && elapsed > 0 && elapsed.is_multiple_of(every)).then_some(now)
    }

    /// Full state size at `t_ms`, growing linearly from submission.
    pub fn state_size_at(&self, t_ms: u64) -> u64 {
        let secs = t_ms.saturating_sub(self.submitted_ms) as f64 / 1000.0;
        (self.spec.state_size_bytes + self.spec.state_growth_bytes_per_s * secs).round() as u64
    }

    fn complete_checkpoint(&mut self, at_ms: u64, is_savepoint: bool) {
        let id = self.checkpoints.next_id;
        self.checkpoints.next_id += 1;
        let state_size = self.state_size_at(at_ms);
        let duration_ms = 80 + (id * 37) % 150;
        let previous = self.checkpoints.history.last().map_or(0, |c| c.state_size);
        let record = CheckpointRecord {
            id,
            trigger_ms: at_ms.saturating_sub(duration_ms),
            duration_ms,
            state_size,
            // Incremental: what changed since the previous checkpoint (at least a small delta).
            checkpointed_size: state_size
                .saturating_sub(previous)
                .max(state_size / 20)
                .min(state_size),
            is_savepoint,
            external_path: format!("file:/tmp/flink-sim/checkpoints/{}/chk-{id}", self.spec.id),
        };
        self.checkpoints.completed += 1;
        self.checkpoints.history.push(record);
        if self.checkpoints.history.len() > CHECKPOINT_HISTORY {
            self.checkpoints.history.remove(0);
        }
    }

    fn record_savepoint(&mut self, location: String) {
        self.complete_checkpoint(self.t_ms, true);
        if let Some(last) = self.checkpoints.history.last_mut() {
            last.external_path = location;
            self.checkpoints.latest_savepoint = Some(last.clone());
        }
    }

    fn begin_restart(&mut self, target: Vec<u32>, rescale: bool) {
        self.live_cache = None;
        if !rescale {
            let current = self.parallelism();
            self.rescale_log.begin(
                Trigger::RecoverableFailover,
                self.t_ms,
                &self.requirements,
                Some(&current),
            );
        }
        self.rescale_log.restarting(self.t_ms);
        self.phase = Phase::Restarting {
            until_ms: self.t_ms + self.spec.downtime_ms,
            target,
            rescale,
        };
        self.last_modification_ms = self.t_ms;
        self.on_state_change();
        if self.spec.downtime_ms == 0 {
            let target = target_of(&self.phase);
            self.finish_restart(&target, rescale);
        }
    }

    fn finish_restart(&mut self, target: &[u32], rescale: bool) {
        self.rescale_log
            .end_open(self.t_ms, Ending::Succeeded, Some(target));
        self.rt = self.rt.restarted(&self.spec, target);
        self.phase = Phase::Running;
        self.restarts += 1;
        if rescale {
            self.rescales += 1;
            self.rescale = None;
        }
        if let Some(last) = self.checkpoints.history.last() {
            self.checkpoints.restored = Some((last.id, self.t_ms));
        }
        self.running_since_ms = self.t_ms;
        self.last_modification_ms = self.t_ms;
        self.on_incarnation_start();
    }

    fn on_incarnation_start(&mut self) {
        self.history.clear();
        self.on_state_change();
    }

    fn on_state_change(&mut self) {
        self.epoch += 1;
        if self.sample_every_ms().is_some() {
            self.take_sample();
        }
    }

    fn take_sample(&mut self) {
        let keep = self.staleness.rate_window_ms + self.sample_every_ms().unwrap_or(0);
        if self.phase == Phase::Running {
            self.history.record(self.t_ms, &self.rt, keep);
        }
        if self.staleness.tm_update_interval_ms > 0 {
            self.tm_view = Some(Arc::new(self.compute_view()));
        }
    }

    fn compute_view(&self) -> JobView {
        let flows = self.rt.flows(&self.spec, &self.input_rates(self.t_ms));
        let src = ViewSource {
            spec: &self.spec,
            rt: &self.rt,
            flows: &flows,
            t_ms: self.t_ms,
            running_since_ms: self.running_since_ms,
            running: self.phase == Phase::Running,
        };
        reported_view(&src, &self.history, &self.staleness)
    }

    /// What the TaskManagers report now (before the JobManager cache).
    fn reported(&mut self) -> Arc<JobView> {
        if self.staleness.tm_update_interval_ms > 0 {
            if let Some(v) = &self.tm_view {
                return v.clone();
            }
        }
        if let Some((t, epoch, v)) = &self.live_cache {
            if *t == self.t_ms && *epoch == self.epoch {
                return v.clone();
            }
        }
        let v = Arc::new(self.compute_view());
        self.live_cache = Some((self.t_ms, self.epoch, v.clone()));
        v
    }

    /// The metric snapshot a REST handler sees. With the JobManager cache on, a request that
    /// finds the cache older than the fetch interval starts a fetch but still gets the old
    /// snapshot (none at all right after start); the fetched one is visible to the next request.
    pub fn metrics_view(&mut self) -> Option<Arc<JobView>> {
        let interval = self.staleness.fetcher_interval_ms;
        if interval == 0 {
            return Some(self.reported());
        }
        if let Some(v) = self.jm.in_flight.take() {
            self.jm.visible = Some(v);
        }
        if self
            .jm
            .last_trigger_ms
            .is_none_or(|l| self.t_ms.saturating_sub(l) >= interval)
        {
            self.jm.in_flight = Some(self.reported());
            self.jm.last_trigger_ms = Some(self.t_ms);
        }
        self.jm.visible.clone()
    }

    /// The model's own current values, unaffected by staleness (for tests and control).
    pub fn live_view(&mut self) -> Arc<JobView> {
        if let Some((t, epoch, v)) = &self.live_cache {
            if *t == self.t_ms && *epoch == self.epoch && self.staleness == Staleness::default() {
                return v.clone();
            }
        }
        let flows = self.rt.flows(&self.spec, &self.input_rates(self.t_ms));
        Arc::new(crate::view::live_view(
            &self.spec,
            &self.rt,
            &flows,
            self.t_ms,
            self.running_since_ms,
            self.phase == Phase::Running,
        ))
    }

    pub fn set_rate_multiplier(&mut self, m: f64) {
        self.rate_multiplier = m.max(0.0);
        self.epoch += 1;
    }

    /// A failover: tasks go down for the downtime and come back as a new incarnation.
    pub fn restart(&mut self) {
        if matches!(self.phase, Phase::Finished { .. }) {
            return;
        }
        let target = match &self.phase {
            Phase::Restarting { target, .. } => target.clone(),
            _ => self.parallelism(),
        };
        let rescale = matches!(self.phase, Phase::Restarting { rescale: true, .. });
        self.begin_restart(target, rescale);
    }

    /// Accepts validated requirements; returns false when nothing changes.
    pub fn accept_rescale(&mut self, requirements: Vec<(u32, u32)>, available_slots: u32) -> bool {
        let target: Vec<u32> = requirements
            .iter()
            .map(|&(lower, upper)| upper.min(available_slots.max(lower)))
            .collect();
        let changed = requirements != self.requirements;
        self.requirements = requirements;
        self.epoch += 1;
        let current = self.parallelism();
        if target == current {
            if changed {
                self.rescale_log.instant(
                    Trigger::UpdateRequirement,
                    self.t_ms,
                    &self.requirements,
                    Some(&current),
                    Ending::NoChange,
                    None,
                );
            }
            return false;
        }
        self.rescale_log.begin(
            Trigger::UpdateRequirement,
            self.t_ms,
            &self.requirements,
            Some(&current),
        );
        if self.spec.rescale_delay_ms == 0 {
            self.rescale = Some(PendingRescale {
                restart_at_ms: self.t_ms,
                target: target.clone(),
            });
            self.begin_restart(target, true);
        } else {
            self.rescale = Some(PendingRescale {
                restart_at_ms: self.t_ms + self.spec.rescale_delay_ms,
                target,
            });
        }
        true
    }

    pub fn rescale_in_flight(&self) -> bool {
        self.rescale.is_some()
    }

    /// Starts a savepoint (optionally stopping the job when it completes); returns the trigger id.
    pub fn trigger_savepoint(
        &mut self,
        target_dir: &str,
        stop: bool,
        trigger_id: Option<String>,
    ) -> String {
        let n = self.savepoints.len().to_string();
        let trigger_id = trigger_id.unwrap_or_else(|| stable_id(&["savepoint", &self.spec.id, &n]));
        let suffix = &stable_id(&["savepoint-path", &self.spec.id, &n])[..12];
        let location = format!(
            "{}/savepoint-{}-{suffix}",
            target_dir.trim_end_matches('/'),
            &self.spec.id[..6]
        );
        self.savepoints.push(SavepointOp {
            trigger_id: trigger_id.clone(),
            done_at_ms: self.t_ms + self.spec.savepoint_ms.max(1),
            location,
            stop,
        });
        trigger_id
    }
}

impl JobSim {
    /// Cancels the job: it stops processing at once and reports CANCELED.
    pub fn cancel(&mut self) {
        if !matches!(self.phase, Phase::Finished { .. }) {
            self.phase = Phase::Finished {
                at_ms: self.t_ms,
                canceled: true,
            };
            self.rescale = None;
            self.rescale_log
                .end_open(self.t_ms, Ending::JobCanceled, None);
            self.last_modification_ms = self.t_ms;
            self.on_state_change();
        }
    }
}

impl JobSim {
    /// The model's current per-vertex values, without any staleness.
    pub fn vertex_models(&mut self) -> Vec<crate::VertexModel> {
        let view = self.live_view();
        let rates = self.current_input_rates();
        self.spec
            .vertices
            .iter()
            .zip(&view.vertices)
            .zip(rates)
            .map(|((vs, vv), rate)| crate::VertexModel {
                id: vs.id.clone(),
                name: vs.name.clone(),
                parallelism: vv.parallelism,
                max_parallelism: vs.max_parallelism,
                input_rate: vs.source.as_ref().map(|_| rate),
                in_rate: vv.true_in_rate,
                out_rate: vv.true_in_rate * vs.selectivity,
                max_busy: vv.subtasks.iter().map(|s| s.busy).fold(0.0, f64::max),
                backpressured: vv.backpressured,
                lag: vv.lag,
            })
            .collect()
    }
}
