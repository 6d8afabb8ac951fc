//! Snapshots of a job's per-subtask metric values, and Flink's staleness layers applied to
//! them: TaskManager update interval, moving-average rates and the post-restart warm-up.
//! The JobManager cache is in `world` because it is driven by requests.

use std::collections::VecDeque;

use crate::model::{Flows, JobRuntime, SubtaskCounters};
use crate::scenario::{JobSpec, Staleness};

/// What one subtask reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SubtaskView {
    pub busy: f64,
    pub idle: f64,
    pub backpressured: f64,
    pub in_rate: f64,
    pub out_rate: f64,
    pub counters: SubtaskCounters,
}

/// What one vertex reports; `subtasks` is empty while no task is running.
#[derive(Debug, Clone, Default)]
pub(crate) struct VertexView {
    pub parallelism: u32,
    pub subtasks: Vec<SubtaskView>,
    pub backpressured: bool,
    /// Source backlog in records (whole vertex).
    pub lag: f64,
    /// Records read from the external system since submission (whole vertex).
    pub consumed: f64,
    /// Vertex input rate (records/s) in the model, unaffected by staleness.
    pub true_in_rate: f64,
}

/// A consistent snapshot of a job's metrics at `t_ms`.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobView {
    pub t_ms: u64,
    pub running_since_ms: u64,
    pub vertices: Vec<VertexView>,
}

/// The live values of a running (or, with `running == false`, silent) job.
pub(crate) fn live_view(
    spec: &JobSpec,
    rt: &JobRuntime,
    flows: &Flows,
    t_ms: u64,
    running_since_ms: u64,
    running: bool,
) -> JobView {
    let vertices = (0..spec.vertices.len())
        .map(|v| {
            let vr = &rt.vertices[v];
            let sel = spec.vertices[v].selectivity;
            // Subtasks that FINISHED report nothing (their metrics are gone).
            let reporting = vr.running_subtasks(t_ms.saturating_sub(running_since_ms));
            let subtasks = if running {
                (0..reporting)
                    .map(|i| {
                        let split = rt.time_split(flows, v, i);
                        let rate = flows.in_rate[v] * vr.weights[i];
                        SubtaskView {
                            busy: split.busy,
                            idle: split.idle,
                            backpressured: split.backpressured,
                            in_rate: rate,
                            out_rate: rate * sel,
                            counters: vr.counters[i],
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            VertexView {
                parallelism: vr.parallelism,
                subtasks,
                backpressured: running && flows.backpressured[v],
                lag: rt.lag[v],
                consumed: rt.consumed[v],
                true_in_rate: if running { flows.in_rate[v] } else { 0.0 },
            }
        })
        .collect();
    JobView {
        t_ms,
        running_since_ms,
        vertices,
    }
}

/// Counter snapshots of the current incarnation, for moving averages.
#[derive(Debug, Clone, Default)]
pub(crate) struct CounterHistory {
    samples: VecDeque<(u64, Vec<Vec<SubtaskCounters>>)>,
}

impl CounterHistory {
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    pub fn record(&mut self, t_ms: u64, rt: &JobRuntime, keep_ms: u64) {
        let counters = rt.vertices.iter().map(|v| v.counters.clone()).collect();
        self.samples.push_back((t_ms, counters));
        while self.samples.len() > 2 && self.samples.get(1).is_some_and(|s| s.0 + keep_ms <= t_ms) {
            self.samples.pop_front();
        }
    }

    /// The newest sample taken at or before `t_ms`.
    fn at_or_before(&self, t_ms: u64) -> Option<&(u64, Vec<Vec<SubtaskCounters>>)> {
        self.samples.iter().rev().find(|s| s.0 <= t_ms)
    }
}

/// Replaces instantaneous rates and time splits with averages over `window_ms`, computed from
/// counter differences the way Flink's MeterView and TimerGauge do. Before the incarnation is
/// a window old, rates divide by the full window (the ramp seen after a restart) while time
/// splits average over the time that has passed.
pub(crate) fn apply_moving_average(view: &mut JobView, history: &CounterHistory, window_ms: u64) {
    if window_ms == 0 {
        return;
    }
    let window_s = window_ms as f64 / 1000.0;
    let base_t = view.t_ms.saturating_sub(window_ms);
    let base = history
        .at_or_before(base_t)
        .filter(|s| s.0 >= view.running_since_ms);
    let span_ms = match base {
        Some(b) => view.t_ms - b.0,
        None => view
            .t_ms
            .saturating_sub(view.running_since_ms)
            .min(window_ms),
    };
    if span_ms == 0 {
        return;
    }
    let span_s = span_ms as f64 / 1000.0;
    let rate_span_s = if base.is_some() { span_s } else { window_s };
    for (v, vv) in view.vertices.iter_mut().enumerate() {
        for (i, sv) in vv.subtasks.iter_mut().enumerate() {
            let b = base
                .and_then(|b| b.1.get(v))
                .and_then(|c| c.get(i))
                .copied()
                .unwrap_or_default();
            let c = sv.counters;
            sv.in_rate = (c.rec_in - b.rec_in) / rate_span_s;
            sv.out_rate = (c.rec_out - b.rec_out) / rate_span_s;
            sv.busy = ((c.busy_ms - b.busy_ms) / span_s).clamp(0.0, 1000.0);
            sv.idle = ((c.idle_ms - b.idle_ms) / span_s).clamp(0.0, 1000.0);
            sv.backpressured =
                ((c.backpressured_ms - b.backpressured_ms) / span_s).clamp(0.0, 1000.0);
        }
    }
}

/// Right after a (re)start Flink reports busy 1000 and zero rates for a while.
pub(crate) fn apply_warmup(view: &mut JobView, warmup_ms: u64) {
    if view.t_ms >= view.running_since_ms.saturating_add(warmup_ms) {
        return;
    }
    for sv in view.vertices.iter_mut().flat_map(|v| v.subtasks.iter_mut()) {
        sv.busy = 1000.0;
        sv.idle = 0.0;
        sv.backpressured = 0.0;
        sv.in_rate = 0.0;
        sv.out_rate = 0.0;
    }
}

/// The model state a view is taken from.
pub(crate) struct ViewSource<'a> {
    pub spec: &'a JobSpec,
    pub rt: &'a JobRuntime,
    pub flows: &'a Flows,
    pub t_ms: u64,
    pub running_since_ms: u64,
    pub running: bool,
}

/// Builds the view a TaskManager would report under `staleness`.
pub(crate) fn reported_view(
    src: &ViewSource,
    history: &CounterHistory,
    staleness: &Staleness,
) -> JobView {
    let mut view = live_view(
        src.spec,
        src.rt,
        src.flows,
        src.t_ms,
        src.running_since_ms,
        src.running,
    );
    apply_moving_average(&mut view, history, staleness.rate_window_ms);
    apply_warmup(&mut view, staleness.warmup_ms);
    view
}
