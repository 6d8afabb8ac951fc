//! The dataflow model of one job incarnation: how many records each subtask receives, how
//! busy that makes it, where backpressure builds up and how source lag evolves.
//!
//! Flows are a fluid approximation. Within an integration step every rate is constant, so
//! counters and lag integrate exactly; the caller splits steps at rate jumps and lifecycle
//! events. A vertex's throughput is limited by its hottest subtask (credit-based flow control
//! blocks the whole upstream when one channel is full), and every source upstream of an
//! overloaded vertex is slowed until nothing is overloaded.

use crate::scenario::{JobSpec, ShipStrategy, VertexSpec};

/// Counters of one subtask since its incarnation started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SubtaskCounters {
    /// Records received (for sources: records read from the external system).
    pub rec_in: f64,
    pub rec_out: f64,
    pub busy_ms: f64,
    pub idle_ms: f64,
    pub backpressured_ms: f64,
}

/// How long after an incarnation starts its subtasks without a split FINISH (a real data
/// generator source's did within a couple of seconds).
pub(crate) const SPLITLESS_FINISH_MS: u64 = 2_000;

/// Per-vertex state of the current incarnation.
#[derive(Debug, Clone)]
pub(crate) struct VertexRuntime {
    pub parallelism: u32,
    /// The last this many subtasks FINISH [`SPLITLESS_FINISH_MS`] after the start: a bounded
    /// source's subtasks without a split, and the subtasks only they feed through FORWARD
    /// edges. They read nothing from the start.
    pub finishing: u32,
    /// Share of the vertex's input that each subtask receives (sums to 1).
    pub weights: Vec<f64>,
    /// Records per second each subtask handles at 100 % busy.
    pub subtask_capacity: Vec<f64>,
    /// Records per second the vertex can take before its hottest subtask saturates.
    pub capacity: f64,
    pub counters: Vec<SubtaskCounters>,
}

/// The instantaneous flow through a job.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Flows {
    /// Records per second into each vertex (for sources: read from outside).
    pub in_rate: Vec<f64>,
    pub out_rate: Vec<f64>,
    /// The vertex is blocked on output by a saturated vertex downstream.
    pub backpressured: Vec<bool>,
}

/// Time split of one subtask, in ms per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TimeSplit {
    pub busy: f64,
    pub idle: f64,
    pub backpressured: f64,
}

/// Partitions owned by `subtask` when `partitions` are spread over `parallelism` readers.
pub(crate) fn partitions_owned(partitions: u32, parallelism: u32, subtask: u32) -> u32 {
    if subtask >= parallelism {
        return 0;
    }
    partitions / parallelism + u32::from(subtask < partitions % parallelism)
}

/// Whether partition `n` is read by `subtask` (round-robin assignment).
pub(crate) fn owns_partition(parallelism: u32, subtask: u32, n: u32) -> bool {
    n % parallelism == subtask
}

impl VertexRuntime {
    /// Subtasks still running (reporting metrics) `elapsed_ms` after the incarnation began.
    pub fn running_subtasks(&self, elapsed_ms: u64) -> usize {
        self.finished_subtasks(elapsed_ms)
            .map_or(self.counters.len(), |f| {
                self.counters.len().saturating_sub(f as usize)
            })
    }

    /// Subtasks FINISHED `elapsed_ms` after the incarnation began, if any.
    pub fn finished_subtasks(&self, elapsed_ms: u64) -> Option<u32> {
        (self.finishing > 0 && elapsed_ms >= SPLITLESS_FINISH_MS).then_some(self.finishing)
    }
}

pub(crate) fn vertex_runtime(spec: &VertexSpec, p: u32) -> VertexRuntime {
    let n = p as usize;
    let owned = spec.source.as_ref().and_then(|s| s.partitions.or(s.splits));
    let mut weights: Vec<f64> = (0..p)
        .map(|i| {
            let base = match owned {
                Some(parts) => f64::from(partitions_owned(parts, p, i)),
                None => 1.0,
            };
            let tilt = if p > 1 {
                1.0 - 2.0 * f64::from(i) / f64::from(p - 1)
            } else {
                0.0
            };
            base * (1.0 + spec.skew * tilt)
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let splits = spec.source.as_ref().and_then(|s| s.splits);
    if total > 0.0 {
        weights.iter_mut().for_each(|w| *w /= total);
    } else if splits != Some(0) {
        weights = vec![1.0 / n as f64; n];
    }
    let per_subtask = match spec.write_capacity {
        Some(w) => spec.capacity.min(w / f64::from(p)),
        None => spec.capacity,
    };
    let subtask_capacity = vec![per_subtask; n];
    let capacity = weights
        .iter()
        .zip(&subtask_capacity)
        .filter(|(w, _)| **w > 0.0)
        .map(|(w, c)| c / w)
        .fold(f64::INFINITY, f64::min);
    VertexRuntime {
        parallelism: p,
        finishing: splits.map_or(0, |s| p.saturating_sub(s)),
        weights,
        subtask_capacity,
        capacity,
        counters: vec![SubtaskCounters::default(); n],
    }
}

/// One job incarnation plus the state that survives restarts (lag, consumed offsets).
#[derive(Debug, Clone)]
pub(crate) struct JobRuntime {
    pub vertices: Vec<VertexRuntime>,
    /// Records waiting in the external system, per vertex (sources only).
    pub lag: Vec<f64>,
    /// Records read from the external system since the job was submitted, per vertex.
    pub consumed: Vec<f64>,
    /// `reach[a][b]`: records flow from vertex a to vertex b (a != b).
    reach: Vec<Vec<bool>>,
}

impl JobRuntime {
    /// The first incarnation at the scenario's parallelism.
    pub fn new(spec: &JobSpec) -> Self {
        let parallelism: Vec<u32> = spec.vertices.iter().map(|v| v.parallelism).collect();
        let lag = spec
            .vertices
            .iter()
            .map(|v| v.source.as_ref().map_or(0.0, |s| s.initial_lag))
            .collect();
        let consumed = vec![0.0; spec.vertices.len()];
        Self::incarnation(spec, &parallelism, lag, consumed)
    }

    /// A new incarnation (restart or rescale): counters start at zero, lag carries over.
    pub fn restarted(&self, spec: &JobSpec, parallelism: &[u32]) -> Self {
        Self::incarnation(spec, parallelism, self.lag.clone(), self.consumed.clone())
    }

    fn incarnation(spec: &JobSpec, parallelism: &[u32], lag: Vec<f64>, consumed: Vec<f64>) -> Self {
        let mut vertices: Vec<VertexRuntime> = spec
            .vertices
            .iter()
            .zip(parallelism)
            .map(|(v, &p)| vertex_runtime(v, p))
            .collect();
        finish_forward_fed(spec, &mut vertices);
        JobRuntime {
            vertices,
            lag,
            consumed,
            reach: reachability(spec),
        }
    }

    pub fn parallelism(&self) -> Vec<u32> {
        self.vertices.iter().map(|v| v.parallelism).collect()
    }

    /// Flows when sources want to read `demand` records/s (infinite while catching up on lag).
    pub fn flows(&self, spec: &JobSpec, input_rate: &[f64]) -> Flows {
        let n = spec.vertices.len();
        let demand: Vec<f64> = (0..n)
            .map(|v| match spec.vertices[v].source {
                // A bounded source whose subtasks all finished reads nothing more.
                Some(_) if self.vertices[v].finishing >= self.vertices[v].parallelism => 0.0,
                Some(_) if self.lag[v] > 0.0 => f64::INFINITY,
                Some(_) => input_rate[v],
                None => 0.0,
            })
            .collect();
        let mut theta = vec![1.0; n];
        let mut limited_by = vec![false; n];
        let mut flows = self.propagate(spec, &demand, &theta);
        for _ in 0..64 {
            let overloaded: Vec<(usize, f64)> = (0..n)
                .filter(|&v| spec.vertices[v].source.is_none())
                .filter(|&v| flows.in_rate[v] > self.vertices[v].capacity * (1.0 + 1e-9))
                .map(|v| (v, self.vertices[v].capacity / flows.in_rate[v]))
                .collect();
            if overloaded.is_empty() {
                break;
            }
            for s in (0..n).filter(|&s| spec.vertices[s].source.is_some()) {
                let f = overloaded
                    .iter()
                    .filter(|(v, _)| self.reach[s][*v])
                    .map(|(_, f)| *f)
                    .fold(1.0, f64::min);
                theta[s] *= f;
            }
            for (v, _) in overloaded {
                limited_by[v] = true;
            }
            flows = self.propagate(spec, &demand, &theta);
        }
        let bottleneck: Vec<bool> = (0..n)
            .map(|v| limited_by[v] && flows.in_rate[v] >= self.vertices[v].capacity * (1.0 - 1e-6))
            .collect();
        flows.backpressured = (0..n)
            .map(|v| (0..n).any(|w| bottleneck[w] && self.reach[v][w]))
            .collect();
        flows
    }

    fn propagate(&self, spec: &JobSpec, demand: &[f64], theta: &[f64]) -> Flows {
        let n = spec.vertices.len();
        let mut in_rate = vec![0.0; n];
        let mut out_rate = vec![0.0; n];
        for v in 0..n {
            let vs = &spec.vertices[v];
            in_rate[v] = if vs.source.is_some() {
                demand[v].min(self.vertices[v].capacity) * theta[v]
            } else {
                spec.inputs_of(v)
                    .map(|e| {
                        let fan = if e.ship == ShipStrategy::Broadcast {
                            f64::from(self.vertices[v].parallelism)
                        } else {
                            1.0
                        };
                        out_rate[e.from] * fan
                    })
                    .sum()
            };
            out_rate[v] = in_rate[v] * vs.selectivity;
        }
        Flows {
            in_rate,
            out_rate,
            backpressured: vec![false; n],
        }
    }

    /// Busy / idle / backpressured ms per second of one subtask under `flows`.
    pub fn time_split(&self, flows: &Flows, v: usize, subtask: usize) -> TimeSplit {
        let vr = &self.vertices[v];
        let load = flows.in_rate[v] * vr.weights[subtask];
        if load <= 0.0 {
            return TimeSplit {
                busy: 0.0,
                idle: 1000.0,
                backpressured: 0.0,
            };
        }
        let busy = 1000.0 * (load / vr.subtask_capacity[subtask]).min(1.0);
        if flows.backpressured[v] {
            TimeSplit {
                busy,
                idle: 0.0,
                backpressured: 1000.0 - busy,
            }
        } else {
            TimeSplit {
                busy,
                idle: 1000.0 - busy,
                backpressured: 0.0,
            }
        }
    }

    /// Advances `dt_s` seconds with sources receiving `input_rate` records/s, splitting the
    /// step where a source finishes catching up (its demand drops from "all it can" to the
    /// input rate at that instant).
    pub fn integrate(&mut self, spec: &JobSpec, dt_s: f64, input_rate: &[f64]) {
        let mut remaining = dt_s;
        for _ in 0..16 {
            if remaining <= 1e-12 {
                return;
            }
            let flows = self.flows(spec, input_rate);
            let mut step = remaining;
            for v in self.source_indices(spec) {
                let drain = flows.in_rate[v] - input_rate[v];
                if self.lag[v] > 0.0 && drain > 0.0 {
                    step = step.min(self.lag[v] / drain);
                }
            }
            self.accumulate(spec, &flows, step, input_rate);
            remaining -= step;
        }
        if remaining > 1e-12 {
            let flows = self.flows(spec, input_rate);
            self.accumulate(spec, &flows, remaining, input_rate);
        }
    }

    /// Advances time while the job processes nothing (restarting or stopped): lag still grows.
    pub fn integrate_stopped(&mut self, spec: &JobSpec, dt_s: f64, input_rate: &[f64]) {
        for v in self.source_indices(spec) {
            self.lag[v] += input_rate[v] * dt_s;
        }
    }

    fn source_indices(&self, spec: &JobSpec) -> Vec<usize> {
        (0..spec.vertices.len())
            .filter(|&v| spec.vertices[v].source.is_some())
            .collect()
    }

    fn accumulate(&mut self, spec: &JobSpec, flows: &Flows, step: f64, input_rate: &[f64]) {
        for (v, vs) in spec.vertices.iter().enumerate() {
            let sel = vs.selectivity;
            for i in 0..self.vertices[v].counters.len() {
                let split = self.time_split(flows, v, i);
                let rec = flows.in_rate[v] * self.vertices[v].weights[i] * step;
                let c = &mut self.vertices[v].counters[i];
                c.rec_in += rec;
                c.rec_out += rec * sel;
                c.busy_ms += split.busy * step;
                c.idle_ms += split.idle * step;
                c.backpressured_ms += split.backpressured * step;
            }
            if vs.source.is_some() {
                let read = flows.in_rate[v] * step;
                self.consumed[v] += read;
                let next = self.lag[v] + input_rate[v] * step - read;
                // Snap tiny residues from the split step to exactly zero.
                self.lag[v] = if next.abs() < 1e-6 * (1.0 + read) {
                    0.0
                } else {
                    next.max(0.0)
                };
            }
        }
    }
}

/// A subtask fed only through FORWARD edges (equal parallelism, subtask i to subtask i) by
/// subtasks that finish gets no input and finishes too: the vertex's tail finishes as far
/// as all its inputs' tails do, and reads nothing there.
fn finish_forward_fed(spec: &JobSpec, vertices: &mut [VertexRuntime]) {
    for v in 0..vertices.len() {
        if spec.vertices[v].source.is_some() {
            continue;
        }
        let p = vertices[v].parallelism;
        let mut inputs = spec.inputs_of(v).peekable();
        if inputs.peek().is_none() {
            continue;
        }
        let finishing = inputs
            .map(|e| {
                let up = &vertices[e.from];
                if e.ship == ShipStrategy::Forward && up.parallelism == p {
                    up.finishing
                } else {
                    0
                }
            })
            .min()
            .unwrap_or(0);
        if finishing == 0 {
            continue;
        }
        let vr = &mut vertices[v];
        vr.finishing = finishing;
        let live = (p - finishing) as usize;
        vr.weights[live..].iter_mut().for_each(|w| *w = 0.0);
        let total: f64 = vr.weights.iter().sum();
        if total > 0.0 {
            vr.weights.iter_mut().for_each(|w| *w /= total);
        }
        vr.capacity = vr
            .weights
            .iter()
            .zip(&vr.subtask_capacity)
            .filter(|(w, _)| **w > 0.0)
            .map(|(w, c)| c / w)
            .fold(f64::INFINITY, f64::min);
    }
}

fn reachability(spec: &JobSpec) -> Vec<Vec<bool>> {
    let n = spec.vertices.len();
    let mut reach = vec![vec![false; n]; n];
    // Vertices are in topological order: walk backwards so successors are complete.
    for v in (0..n).rev() {
        for e in spec.edges.iter().filter(|e| e.from == v) {
            reach[v][e.to] = true;
            let (head, tail) = reach.split_at_mut(e.to);
            for (dst, &r) in head[v].iter_mut().zip(tail[0].iter()) {
                *dst |= r;
            }
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn chain(source_cap: f64, map_cap: f64, sink_cap: f64, rate: f64) -> JobSpec {
        let text = format!(
            r#"
[[job]]
name = "t"
[[job.vertex]]
name = "Source: S"
parallelism = 2
capacity = {source_cap}
source = {{ partitions = 4, rate = {{ kind = "constant", value = {rate} }} }}
[[job.vertex]]
name = "Map"
parallelism = 2
capacity = {map_cap}
selectivity = 0.5
[[job.vertex]]
name = "Sink: W"
parallelism = 1
capacity = {sink_cap}
[[job.edge]]
from = "Source: S"
to = "Map"
ship_strategy = "HASH"
[[job.edge]]
from = "Map"
to = "Sink: W"
ship_strategy = "REBALANCE"
"#
        );
        Scenario::from_toml_str(&text).unwrap().jobs.remove(0)
    }

    fn rates(spec: &JobSpec, rate: f64) -> Vec<f64> {
        spec.vertices
            .iter()
            .map(|v| if v.source.is_some() { rate } else { 0.0 })
            .collect()
    }

    #[test]
    fn underloaded_job_passes_input_through() {
        let spec = chain(1000.0, 1000.0, 1000.0, 400.0);
        let rt = JobRuntime::new(&spec);
        let f = rt.flows(&spec, &rates(&spec, 400.0));
        assert_eq!(f.in_rate, vec![400.0, 400.0, 200.0]);
        assert!(f.backpressured.iter().all(|b| !b));
        let s = rt.time_split(&f, 1, 0);
        assert!((s.busy - 200.0).abs() < 1e-9 && (s.idle - 800.0).abs() < 1e-9);
    }

    #[test]
    fn bottleneck_backpressures_upstream_and_builds_lag() {
        let spec = chain(1000.0, 100.0, 1000.0, 400.0);
        let mut rt = JobRuntime::new(&spec);
        let input = rates(&spec, 400.0);
        let f = rt.flows(&spec, &input);
        assert!((f.in_rate[1] - 200.0).abs() < 1e-6, "{f:?}");
        assert_eq!(f.backpressured, vec![true, false, false]);
        rt.integrate(&spec, 10.0, &input);
        assert!((rt.lag[0] - 2000.0).abs() < 1e-6, "lag {}", rt.lag[0]);
        let busy = rt.time_split(&f, 1, 0).busy;
        assert!((busy - 1000.0).abs() < 1e-9);
        let src = rt.time_split(&f, 0, 0);
        assert!(src.backpressured > 0.0 && src.idle == 0.0);
    }

    #[test]
    fn lag_drains_then_stops_at_zero() {
        let spec = chain(1000.0, 1000.0, 1000.0, 100.0);
        let mut rt = JobRuntime::new(&spec);
        rt.lag[0] = 500.0;
        rt.integrate(&spec, 10.0, &rates(&spec, 100.0));
        assert_eq!(rt.lag[0], 0.0);
        let read: f64 = rt.vertices[0].counters.iter().map(|c| c.rec_in).sum();
        assert!((read - 1500.0).abs() < 1e-6, "read {read}");
    }

    #[test]
    fn records_are_conserved_through_selectivity() {
        let spec = chain(1000.0, 1000.0, 1000.0, 300.0);
        let mut rt = JobRuntime::new(&spec);
        rt.integrate(&spec, 7.0, &rates(&spec, 300.0));
        let sum = |v: usize, f: fn(&SubtaskCounters) -> f64| {
            rt.vertices[v].counters.iter().map(f).sum::<f64>()
        };
        assert!((sum(0, |c| c.rec_out) - sum(1, |c| c.rec_in)).abs() < 1e-6);
        assert!((sum(1, |c| c.rec_in) * 0.5 - sum(1, |c| c.rec_out)).abs() < 1e-6);
        assert!((sum(1, |c| c.rec_out) - sum(2, |c| c.rec_in)).abs() < 1e-6);
    }

    #[test]
    fn partitions_spread_round_robin() {
        assert_eq!(
            (0..5)
                .map(|i| partitions_owned(16, 5, i))
                .collect::<Vec<_>>(),
            vec![4, 3, 3, 3, 3]
        );
        assert_eq!(partitions_owned(2, 4, 3), 0);
        assert!(owns_partition(5, 1, 6));
    }
}
