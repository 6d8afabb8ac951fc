//! Baselines from the model's true capacities, never from what the loop chose: a static job
//! sized for the peak, the oracle (every vertex at its ideal parallelism every minute, free
//! rescales) and the best plan with a given number of rescales (perfect foresight, found by
//! dynamic programming over the load curve). All in subtask-hours: one slot per subtask.

use flink_autoscale_simulator::JobTruth;
use serde::Serialize;

/// Each vertex's ideal parallelism at the target utilization, minute by minute.
#[derive(Debug, Clone)]
pub struct NeedCurve {
    /// Per minute: per vertex (topological order).
    pub minutes: Vec<Vec<u32>>,
}

impl NeedCurve {
    /// The model's needs over `[from_s, to_s)` seconds since the start.
    pub fn of(truth: &JobTruth, from_s: f64, to_s: f64, utilization: f64) -> NeedCurve {
        let n = truth.vertex_ids().len();
        let mut minutes = Vec::new();
        let mut t = from_s;
        while t < to_s {
            // The largest flow within the minute (the curve moves little within one).
            let flows = truth.flows(&truth.input_rates(t));
            let later = truth.flows(&truth.input_rates((t + 59.0).min(to_s)));
            minutes.push(
                (0..n)
                    .map(|v| truth.ideal_parallelism(v, flows[v].max(later[v]), utilization))
                    .collect(),
            );
            t += 60.0;
        }
        NeedCurve { minutes }
    }

    pub fn hours(&self) -> f64 {
        self.minutes.len() as f64 / 60.0
    }

    pub fn oracle_subtask_hours(&self) -> f64 {
        self.minutes
            .iter()
            .map(|m| f64::from(m.iter().sum::<u32>()))
            .sum::<f64>()
            / 60.0
    }

    /// Every vertex at the largest parallelism it ever needs.
    pub fn peak_parallelism(&self) -> Vec<u32> {
        let n = self.minutes.first().map_or(0, Vec::len);
        (0..n)
            .map(|v| self.minutes.iter().map(|m| m[v]).max().unwrap_or(1))
            .collect()
    }

    pub fn static_subtask_hours(&self) -> f64 {
        f64::from(self.peak_parallelism().iter().sum::<u32>()) * self.hours()
    }

    /// The cheapest plan with at most `rescales` changes that never runs a vertex below its
    /// need, over blocks of `block_min` minutes (a block needs its largest minute).
    pub fn best_plan(&self, rescales: usize, block_min: usize) -> BestPlan {
        let block_min = block_min.max(1);
        let blocks: Vec<Vec<u32>> = self
            .minutes
            .chunks(block_min)
            .map(|c| {
                (0..c[0].len())
                    .map(|v| c.iter().map(|m| m[v]).max().unwrap_or(1))
                    .collect()
            })
            .collect();
        let lengths: Vec<f64> = self
            .minutes
            .chunks(block_min)
            .map(|c| c.len() as f64 / 60.0)
            .collect();
        let t = blocks.len();
        if t == 0 {
            return BestPlan {
                rescales: 0,
                subtask_hours: 0.0,
                block_minutes: block_min,
            };
        }
        // cost[i][j]: blocks i..=j at one level, each vertex at its largest need there.
        let mut cost = vec![0.0f64; t * t];
        for i in 0..t {
            let mut level = blocks[i].clone();
            let mut hours = 0.0;
            for j in i..t {
                for (l, n) in level.iter_mut().zip(&blocks[j]) {
                    *l = (*l).max(*n);
                }
                hours += lengths[j];
                cost[i * t + j] = f64::from(level.iter().sum::<u32>()) * hours;
            }
        }
        // best[j]: the cheapest plan of blocks 0..=j with s segments so far.
        let mut best: Vec<f64> = (0..t).map(|j| cost[j]).collect();
        for _ in 0..rescales.min(t - 1) {
            let mut next = best.clone();
            for j in 1..t {
                for i in 1..=j {
                    let c = best[i - 1] + cost[i * t + j];
                    if c < next[j] {
                        next[j] = c;
                    }
                }
            }
            best = next;
        }
        BestPlan {
            rescales,
            subtask_hours: best[t - 1],
            block_minutes: block_min,
        }
    }
}

/// The best plan with a rescale budget.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BestPlan {
    pub rescales: usize,
    pub subtask_hours: f64,
    /// Resolution of the plan's changes.
    pub block_minutes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(needs: &[u32]) -> NeedCurve {
        NeedCurve {
            minutes: needs.iter().map(|n| vec![*n]).collect(),
        }
    }

    #[test]
    fn oracle_static_and_best_plans() {
        // 60 minutes at 1, 60 at 5, 60 at 1.
        let c = curve(&[[1; 60], [5; 60], [1; 60]].concat());
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} != {b}");
        close(c.oracle_subtask_hours(), 7.0);
        close(c.static_subtask_hours(), 15.0);
        close(c.best_plan(0, 5).subtask_hours, 15.0);
        // One change: 1 then 5 for two hours, or 5 for two hours then 1: 11 either way.
        close(c.best_plan(1, 5).subtask_hours, 11.0);
        close(c.best_plan(2, 5).subtask_hours, 7.0);
        close(c.best_plan(10, 5).subtask_hours, 7.0);
    }
}
