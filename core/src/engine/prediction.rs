//! Our extension "prediction": what the learned load forecast asks of each vertex. A source's
//! forecast input rate, divided by its current target data rate, scales the flow of every
//! vertex downstream of it (the largest factor when a vertex has several sources); the
//! vertex scaler then sizes that flow at the target utilization, as it sizes today's. The
//! forecast only ever raises a parallelism: it scales up ahead of a predicted rise and keeps
//! scale-downs above what the next hours need. Reactive scaling decides everything else.

use super::config::AutoscalerConfig;
use super::forecast_plan::PlanProblem;
use super::thresholds::{band, capacity, Rates};
use super::topology::Topology;
use super::vertex_scaler::{target_parallelism, VertexFacts};
use crate::forecast::{clock_time, Forecast};

/// What the forecast asks of every vertex, step by step.
pub struct ForecastNeeds<'a> {
    pub forecast: &'a Forecast,
    /// Per vertex and step: the parallelism needed at the target utilization (None: unknown).
    need: Vec<Vec<Option<u32>>>,
    /// Per vertex and step: at its current parallelism the vertex would be above its band.
    over_band: Vec<Vec<bool>>,
    /// Per vertex and step: the least parallelism that keeps the vertex within its band.
    band_need: Vec<Vec<Option<u32>>>,
    /// Per vertex and step: the least parallelism that keeps the vertex at most halfway
    /// between the target utilization and its band's upper edge.
    headroom_need: Vec<Vec<Option<u32>>>,
    /// Per step: the summed forecast input of the job's sources (records/s).
    total_input: Vec<f64>,
}

/// A peak of the forecast input, for reasons.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    pub rate: f64,
    pub at_ms: u64,
}

impl Peak {
    pub fn describe(&self) -> String {
        format!(
            "predicted peak {:.0} rec/s at {} UTC",
            self.rate,
            clock_time(self.at_ms)
        )
    }
}

impl<'a> ForecastNeeds<'a> {
    /// `facts[i]` and `rates[i]` describe vertex `i`; `pinned` vertices are not sized.
    pub fn new(
        forecast: &'a Forecast,
        topology: &Topology,
        source_ids: &[&str],
        facts: &[VertexFacts],
        rates: &[Rates],
        config: &AutoscalerConfig,
    ) -> ForecastNeeds<'a> {
        let n = facts.len();
        let steps = forecast.steps_between(forecast.start_ms, u64::MAX).len();
        // Per source vertex: its forecast over its current target data rate, per step.
        let factors: Vec<Option<Vec<f64>>> = (0..n)
            .map(|i| {
                if !topology.is_source(i) {
                    return None;
                }
                let curve = forecast.sources.get(source_ids[i])?;
                let tdr = rates[i].target_data_rate;
                (tdr.is_finite() && tdr > 0.0)
                    .then(|| curve.iter().take(steps).map(|r| r / tdr).collect())
            })
            .collect();
        // Per vertex: the sources upstream of it (itself, for a source).
        let mut upstream: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &v in &topology.order {
            if topology.is_source(v) {
                upstream[v].push(v);
            }
            let mut from: Vec<usize> = topology.inputs[v]
                .iter()
                .flat_map(|(u, _)| upstream[*u].clone())
                .collect();
            upstream[v].append(&mut from);
            upstream[v].sort_unstable();
            upstream[v].dedup();
        }
        let mut need = vec![vec![None; steps]; n];
        let mut over_band = vec![vec![false; steps]; n];
        let mut band_need = vec![vec![None; steps]; n];
        let mut headroom_need = vec![vec![None; steps]; n];
        for v in 0..n {
            let tpr = rates[v].true_processing_rate;
            if !tpr.is_finite() || tpr <= 0.0 {
                continue;
            }
            for step in 0..steps {
                let factor = upstream[v]
                    .iter()
                    .filter_map(|s| factors[*s].as_ref().map(|f| f[step]))
                    .fold(f64::NAN, f64::max);
                if !factor.is_finite() {
                    continue;
                }
                let scaled = Rates {
                    target_data_rate: rates[v].target_data_rate * factor,
                    ..rates[v]
                };
                need[v][step] = Some(target_parallelism(&facts[v], &scaled, config).parallelism);
                let threshold = band(&scaled, false, config).scale_up_rate_threshold;
                over_band[v][step] = tpr < threshold;
                // Halfway between the target and the band's upper edge: within the band with
                // room for noise.
                let (_, upper) = config.utilization_band();
                let halfway = (config.utilization_target + upper) / 2.0;
                let current = facts[v].current;
                let max = facts[v].max_parallelism;
                band_need[v][step] = least_parallelism(threshold, tpr, current, max);
                headroom_need[v][step] =
                    least_parallelism(capacity(halfway, false, &scaled, config), tpr, current, max);
            }
        }
        let total_input = (0..steps)
            .map(|step| {
                forecast
                    .sources
                    .values()
                    .filter_map(|c| c.get(step))
                    .filter(|r| r.is_finite())
                    .sum()
            })
            .collect();
        ForecastNeeds {
            forecast,
            need,
            over_band,
            band_need,
            headroom_need,
            total_input,
        }
    }

    /// The most vertex `v` needs in `[from_ms, to_ms]`.
    pub fn max_need(&self, v: usize, from_ms: u64, to_ms: u64) -> Option<u32> {
        self.forecast
            .steps_between(from_ms, to_ms)
            .filter_map(|s| self.need[v][s])
            .max()
    }

    /// The least parallelism that keeps vertex `v` at most halfway between the target
    /// utilization and its band's upper edge through `[from_ms, to_ms]`.
    pub fn max_headroom_need(&self, v: usize, from_ms: u64, to_ms: u64) -> Option<u32> {
        self.forecast
            .steps_between(from_ms, to_ms)
            .filter_map(|s| self.headroom_need[v][s])
            .max()
    }

    /// When the predicted rise from `from_ms` ends: the first step at which the summed
    /// forecast input has fallen a tenth below its highest so far (a fall, not noise), or the
    /// forecast's end.
    pub fn rise_end_ms(&self, from_ms: u64) -> u64 {
        let mut highest = f64::MIN;
        for s in self.forecast.steps_between(from_ms, u64::MAX) {
            let input = self.total_input[s];
            if input < 0.9 * highest {
                return self.forecast.step_start_ms(s).max(from_ms);
            }
            highest = highest.max(input);
        }
        self.forecast.end_ms()
    }

    /// Whether some vertex would leave its band upwards in `[from_ms, to_ms]`, and when first.
    pub fn first_over_band(&self, from_ms: u64, to_ms: u64) -> Option<u64> {
        self.forecast
            .steps_between(from_ms, to_ms)
            .find(|s| self.over_band.iter().any(|v| v[*s]))
            .map(|s| self.forecast.step_start_ms(s).max(from_ms))
    }

    /// The first time after `from_ms` at which some vertex needs more than `planned[v]`;
    /// `None` if not within the forecast's range.
    pub fn first_need_above(&self, planned: &[u32], from_ms: u64) -> Option<u64> {
        self.forecast
            .steps_between(from_ms, u64::MAX)
            .find(|s| {
                planned
                    .iter()
                    .enumerate()
                    .any(|(v, p)| self.need[v][*s].is_some_and(|n| n > *p))
            })
            .map(|s| self.forecast.step_start_ms(s).max(from_ms))
    }

    /// The plan's problem from `now_ms` on. A level covers a step when it keeps every vertex
    /// within its band (where reactive scaling would act) through the lead time after it: a
    /// change made at a step shows only `lead_ms` later. Keeping the current parallelism and
    /// changing it are judged alike; vertices without a known need (or `fixed`) keep `current`.
    pub fn plan_problem(
        &self,
        now_ms: u64,
        lead_ms: u64,
        current: &[u32],
        fixed: &[bool],
        rescale_cost: f64,
        budget: usize,
    ) -> PlanProblem {
        let steps = self.forecast.steps_between(now_ms, u64::MAX);
        let lead_steps = lead_ms.div_ceil(self.forecast.step_ms.max(1)) as usize;
        let end = steps.end;
        let need: Vec<Vec<u32>> = (0..current.len())
            .map(|v| {
                steps
                    .clone()
                    .map(|s| {
                        if fixed[v] {
                            return current[v];
                        }
                        self.band_need[v][s..(s + lead_steps + 1).min(end)]
                            .iter()
                            .map(|n| n.unwrap_or(current[v]))
                            .max()
                            .unwrap_or(current[v])
                    })
                    .collect()
            })
            .collect();
        let current_covers = (0..steps.len())
            .position(|i| (0..current.len()).any(|v| need[v][i] > current[v]))
            .unwrap_or(steps.len());
        PlanProblem {
            current: current.to_vec(),
            need,
            current_covers,
            rescale_cost,
            budget,
        }
    }

    /// Start time of the `i`-th step from `now_ms` on.
    pub fn step_from_now_ms(&self, now_ms: u64, i: usize) -> u64 {
        let first = self.forecast.steps_between(now_ms, u64::MAX).start;
        self.forecast.step_start_ms(first + i).max(now_ms)
    }

    /// Whether the summed forecast input at `later_ms` is at least a tenth below the one at
    /// `now_ms`: the load is still falling.
    pub fn still_falling(&self, now_ms: u64, later_ms: u64) -> bool {
        let at = |ms: u64| {
            self.forecast
                .steps_between(ms, ms)
                .next()
                .map(|s| self.total_input[s])
        };
        matches!((at(now_ms), at(later_ms)), (Some(now), Some(later)) if later < 0.9 * now)
    }

    /// The largest summed forecast input in `[from_ms, to_ms]`.
    pub fn peak(&self, from_ms: u64, to_ms: u64) -> Option<Peak> {
        self.forecast
            .steps_between(from_ms, to_ms)
            .map(|s| Peak {
                rate: self.total_input[s],
                at_ms: self.forecast.step_start_ms(s).max(from_ms),
            })
            .fold(None, |best: Option<Peak>, p| match best {
                Some(b) if b.rate >= p.rate => Some(b),
                _ => Some(p),
            })
    }
}

/// The least parallelism at which a vertex processing `tpr` at `current` reaches `needed`:
/// the processing rate grows with the parallelism, as the vertex scaler assumes.
fn least_parallelism(needed: f64, tpr: f64, current: u32, max_parallelism: u32) -> Option<u32> {
    let least = (needed / tpr * f64::from(current)).ceil();
    least
        .is_finite()
        .then(|| (least.max(1.0) as u32).min(max_parallelism.max(1)))
}
