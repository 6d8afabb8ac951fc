//! What a poll learns about its job besides the numbers: FINISHED subtasks, the scheduler,
//! the checkpoint size, the job's own `job.autoscaler.*` overrides and the window they size.

use std::time::Duration;

use super::super::incarnation::finished_subtasks;
use super::super::source::PollCounters;
use super::super::window_override::{window_key, window_size, AUTOSCALER_PREFIX};
use super::JobCollector;
use crate::flink::model::JobDetails;
use crate::flink::scheduler::{self, Scheduler};
use crate::flink::{FlinkClient, FlinkError};
use crate::telemetry;

impl JobCollector {
    /// Records how many subtasks of each vertex FINISHED (they never report again), and
    /// logs when that changes.
    pub(super) fn note_finished(&mut self, details: &JobDetails) {
        let finished = finished_subtasks(details);
        for spec in &mut self.snapshot.topology {
            let now = finished.get(&spec.id).copied().unwrap_or(0);
            if now != spec.finished_subtasks {
                tracing::info!(job_id = %self.job_id, vertex_id = %spec.id, finished = now, parallelism = spec.parallelism, "subtasks FINISHED: {now} of {}; they are left out of the busy-time completeness rule{}", spec.parallelism, if now >= spec.parallelism { " and the vertex is not scaled" } else { "" });
            }
            spec.finished_subtasks = now;
        }
    }

    /// Keeps what is known about the job's scheduler, a more direct source winning.
    pub(super) fn learn_scheduler(&mut self, learned: Scheduler) {
        let rank = |s: &Scheduler| match s.source {
            "schedulerType" => 3,
            "job-type" => 2,
            _ => 1,
        };
        let keep = self
            .snapshot
            .scheduler
            .as_ref()
            .is_some_and(|known| rank(known) > rank(&learned));
        if !keep && self.snapshot.scheduler.as_ref() != Some(&learned) {
            if !learned.adaptive {
                tracing::info!(job_id = %self.job_id, scheduler = %learned.name, source = learned.source, "the job does not run the adaptive scheduler: it cannot be rescaled in place");
            }
            self.snapshot.scheduler = Some(learned);
        }
    }

    /// Checkpoint size and the job's `job.autoscaler.*` overrides: read rarely. Failures are
    /// counted and logged; they never fail the poll.
    pub(super) async fn slow_refresh(&mut self, client: &FlinkClient, counters: &mut PollCounters) {
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
                if let Some(configured) = scheduler::from_job_config(&entries) {
                    self.learn_scheduler(configured);
                }
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

    /// Sizes the window by the job's own `job.autoscaler.metrics.window`, if usable.
    fn apply_window_override(&mut self) {
        let size = window_size(
            &self.snapshot.autoscaler_overrides,
            Duration::from_millis(self.settings.window_ms),
            Duration::from_millis(self.settings.poll_interval_ms),
        );
        if size.ignored {
            let raw = &self.snapshot.autoscaler_overrides[&window_key()];
            tracing::warn!(job_id = %self.job_id, value = %raw, "ignoring the job's {}: not a duration of at least one poll interval", window_key());
        }
        let window_ms = size.window.as_millis() as u64;
        if self.window.resize(window_ms, size.capacity) {
            tracing::info!(job_id = %self.job_id, window_ms, "metric window resized");
        }
    }
}
