//! Why a poll's data must not be used by any decision: the rulings over one poll's plain
//! data (job details, resolved names, samples). Pure; the job collector applies them in
//! order and keeps the first problem found.

use serde::Serialize;

use super::names::ResolvedNames;
use super::query::reporting_subtasks;
use crate::flink::ids::printable;
use crate::flink::model::JobDetails;
use flink_autoscale_core::samples::{Sample, VertexSample, VertexSpec};

/// The reasons data is unusable, each with a stable metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unusable {
    /// The job is not RUNNING.
    NotRunning,
    /// The job restarted, was rescaled or changed topology: the window starts over.
    Restarted,
    /// The values did not change since the previous poll (the JobManager's metric fetcher
    /// has not refreshed), or the poll came sooner than the fetcher's interval.
    Stale,
    /// A needed value is missing for a vertex.
    MissingValue,
    /// A value covers fewer subtasks than the vertex has (`*-complete: false`, or a
    /// sliced vertex not read whole yet).
    Incomplete,
}

impl Unusable {
    pub fn label(self) -> &'static str {
        match self {
            Unusable::NotRunning => "not_running",
            Unusable::Restarted => "restarted",
            Unusable::Stale => "stale",
            Unusable::MissingValue => "missing_value",
            Unusable::Incomplete => "incomplete",
        }
    }
}

/// One reason to keep a poll's data out of the window, with the detail for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub reason: Unusable,
    pub detail: String,
    /// The data disagrees with the known parallelism: the job details should be read again.
    pub topology_suspect: bool,
}

impl Problem {
    pub fn new(reason: Unusable, detail: impl Into<String>) -> Self {
        Problem {
            reason,
            detail: detail.into(),
            topology_suspect: false,
        }
    }

    fn topology_suspect(mut self) -> Self {
        self.topology_suspect = true;
        self
    }
}

/// The job is in `state`, not RUNNING (the state as the JobManager wrote it, made printable).
pub fn not_running(state: &str) -> Problem {
    Problem::new(Unusable::NotRunning, format!("job is {}", printable(state)))
}

/// `/jobs/:jid` flags a counter `*-complete: false`: some running subtask had no value.
pub fn incomplete_flag(details: &JobDetails) -> Option<Problem> {
    details.vertices.iter().find_map(|v| {
        let field = v.metrics.as_ref()?.incomplete_field()?;
        Some(Problem::new(
            Unusable::Incomplete,
            format!("vertex {}: {field} is false", v.id),
        ))
    })
}

/// A sliced vertex whose slices have not all been read since its names were listed.
pub fn slices_unread(vertex_id: &str, read: u32, count: u32) -> Option<Problem> {
    (read < count).then(|| {
        Problem::new(
            Unusable::Incomplete,
            format!("vertex {vertex_id} is read in {count} slices of subtasks; {read} read so far"),
        )
    })
}

/// A vertex sample is unusable when a needed value is missing or covers too few subtasks.
pub fn vertex_problem(
    spec: &VertexSpec,
    names: &ResolvedNames,
    v: &VertexSample,
) -> Option<Problem> {
    if let Some(metric) = names.missing_required() {
        return Some(Problem::new(
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
        return Some(Problem::new(
            Unusable::MissingValue,
            format!("no {what} value for vertex {}", spec.id),
        ));
    }
    // FINISHED subtasks never report again: only the running ones must. A count off the
    // known parallelism may also mean the job was rescaled after its details were read.
    let running = spec.running_subtasks();
    match reporting_subtasks(v) {
        Some(n) if n < f64::from(running) => Some(
            Problem::new(
                Unusable::Incomplete,
                if spec.finished_subtasks > 0 {
                    format!(
                        "vertex {}: {n} of {running} running subtasks report busy time ({} FINISHED)",
                        spec.id, spec.finished_subtasks
                    )
                } else {
                    format!(
                        "vertex {}: {n} of {} subtasks report busy time",
                        spec.id, spec.parallelism
                    )
                },
            )
            .topology_suspect(),
        ),
        Some(n) if n > f64::from(spec.parallelism) => Some(
            Problem::new(
                Unusable::Incomplete,
                format!(
                    "vertex {}: {n} subtasks report busy time, more than its known parallelism {}",
                    spec.id, spec.parallelism
                ),
            )
            .topology_suspect(),
        ),
        _ => None,
    }
}

/// Staleness against the previous usable sample: a poll sooner than the fetcher interval,
/// or values identical to the previous poll while records flow, means the JobManager has
/// not refreshed. A records-in counter that went backwards means a restart the job details
/// did not show.
pub fn freshness(
    previous: Option<&Sample>,
    sample: &Sample,
    fetcher_interval_ms: u64,
) -> Option<Problem> {
    let prev = previous?;
    let elapsed = sample.time_ms.saturating_sub(prev.time_ms);
    if elapsed < fetcher_interval_ms {
        return Some(Problem::new(Unusable::Stale, format!(
            "only {elapsed} ms since the previous sample; the JobManager refreshes metrics every {fetcher_interval_ms} ms"
        )));
    }
    for (vid, now) in &sample.vertices {
        let Some(before) = prev.vertices.get(vid) else {
            continue;
        };
        if let (Some(a), Some(b)) = (before.num_records_in, now.num_records_in) {
            if b.0 < a.0 {
                return Some(Problem::new(
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
        Problem::new(
            Unusable::Stale,
            format!("values unchanged for {elapsed} ms while records flow"),
        )
    })
}

#[cfg(test)]
mod tests;
