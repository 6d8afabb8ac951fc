//! Reading a large job's vertices in rotating slices of subtasks. Flink aggregates a filtered
//! request by visiting every requested name in every selected subtask's store, so the
//! JobManager's work per poll is (names × subtasks). A job above the configured size is read
//! one slice per vertex per poll (`subtasks=a-b`), and every slice's latest answer is merged
//! into whole-vertex aggregates. Counters summed over the latest reads still rise at the
//! vertex's rate, so rates over a window spanning several passes stay right; the price is that
//! a slice's values are up to one pass old. Pure.

use crate::flink::model::AggregatedMetric;
use flink_autoscale_core::samples::FlinkF64;

/// How one vertex's subtasks are cut into slices of near-equal size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlicePlan {
    parallelism: u32,
    count: u32,
}

impl SlicePlan {
    /// `wanted` slices, at most one per subtask and at least one.
    pub fn new(parallelism: u32, wanted: u32) -> Self {
        SlicePlan {
            parallelism,
            count: wanted.clamp(1, parallelism.max(1)),
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn is_sliced(&self) -> bool {
        self.count > 1
    }

    /// The inclusive subtask range of slice `k` (taken modulo the slice count).
    pub fn range(&self, k: u32) -> (u32, u32) {
        let k = u64::from(k % self.count);
        let (p, n) = (u64::from(self.parallelism), u64::from(self.count));
        let first = k * p / n;
        let end = (k + 1) * p / n;
        (first as u32, end.saturating_sub(1).max(first) as u32)
    }

    /// Subtasks in slice `k`.
    pub fn size(&self, k: u32) -> u32 {
        let (first, last) = self.range(k);
        last - first + 1
    }

    /// The `subtasks=` query parameter selecting slice `k`; `None` when the vertex is read
    /// whole.
    pub fn filter(&self, k: u32) -> Option<String> {
        self.is_sliced().then(|| {
            let (first, last) = self.range(k);
            format!("subtasks={first}-{last}")
        })
    }
}

/// The latest aggregated answer of each slice of one vertex.
#[derive(Debug, Clone)]
pub struct SlicedAnswers {
    plan: SlicePlan,
    latest: Vec<Option<Vec<AggregatedMetric>>>,
    /// Slices none of whose subtasks report the source backlog (`pendingRecords`): asking
    /// for it there would empty the whole answer (all-or-nothing), so it is left out.
    without_backlog: Vec<bool>,
}

impl SlicedAnswers {
    pub fn new(plan: SlicePlan) -> Self {
        SlicedAnswers {
            plan,
            latest: vec![None; plan.count as usize],
            without_backlog: vec![false; plan.count as usize],
        }
    }

    pub fn plan(&self) -> SlicePlan {
        self.plan
    }

    /// Keeps `answer` as slice `k`'s latest.
    pub fn record(&mut self, k: u32, answer: Vec<AggregatedMetric>) {
        let k = (k % self.plan.count) as usize;
        self.latest[k] = Some(answer);
    }

    /// Whether slice `k` is read without the source backlog.
    pub fn without_backlog(&self, k: u32) -> bool {
        self.without_backlog[(k % self.plan.count) as usize]
    }

    pub fn mark_without_backlog(&mut self, k: u32) {
        self.without_backlog[(k % self.plan.count) as usize] = true;
    }

    /// Slices read at least once.
    pub fn read(&self) -> u32 {
        self.latest.iter().filter(|a| a.is_some()).count() as u32
    }

    /// Whole-vertex aggregates over the slices read so far: min of mins, max of maxes, sum
    /// of sums, and the average weighted by how many subtasks each slice averaged over. As
    /// in Flink's own aggregation, a name counts over the subtasks that report it: slices
    /// without it are left out of its aggregates (a required metric's gap then shows as too
    /// few reporting subtasks). NaN in any slice stays NaN.
    pub fn merged(&self) -> Vec<AggregatedMetric> {
        let read: Vec<(u32, &Vec<AggregatedMetric>)> = self
            .latest
            .iter()
            .enumerate()
            .filter_map(|(k, a)| a.as_ref().map(|a| (self.plan.size(k as u32), a)))
            .collect();
        let mut ids: Vec<&str> = Vec::new();
        for (_, answer) in &read {
            for m in answer.iter() {
                if !ids.contains(&m.id.as_str()) {
                    ids.push(&m.id);
                }
            }
        }
        ids.into_iter()
            .map(|id| {
                let parts: Vec<(u32, &AggregatedMetric)> = read
                    .iter()
                    .filter_map(|(size, answer)| {
                        answer.iter().find(|x| x.id == id).map(|x| (*size, x))
                    })
                    .collect();
                merge(id, &parts)
            })
            .collect()
    }
}

/// One name's aggregates over several slices; `(size, aggregates)` per slice.
fn merge(id: &str, parts: &[(u32, &AggregatedMetric)]) -> AggregatedMetric {
    let all = |pick: fn(&AggregatedMetric) -> Option<FlinkF64>| -> Option<Vec<f64>> {
        parts.iter().map(|(_, m)| pick(m).map(|v| v.0)).collect()
    };
    let fold = |values: Vec<f64>, keep_first: fn(f64, f64) -> bool| {
        values.into_iter().reduce(|a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else if keep_first(a, b) {
                a
            } else {
                b
            }
        })
    };
    let min = all(|m| m.min).and_then(|v| fold(v, |a, b| a <= b));
    let max = all(|m| m.max).and_then(|v| fold(v, |a, b| a >= b));
    let sum = all(|m| m.sum).map(|v| v.into_iter().sum::<f64>());
    // Each slice's count of reporting subtasks is sum/avg when that can be told, else its size.
    let avg = all(|m| m.avg).map(|avgs| {
        let (mut total, mut count) = (0.0, 0.0);
        for ((size, m), avg) in parts.iter().zip(avgs) {
            let n = match m.sum {
                Some(s) if avg.is_finite() && avg != 0.0 && s.0.is_finite() => (s.0 / avg).round(),
                _ => f64::from(*size),
            };
            total += avg * n;
            count += n;
        }
        total / count
    });
    AggregatedMetric {
        id: id.to_string(),
        min: min.map(FlinkF64),
        max: max.map(FlinkF64),
        avg: avg.map(FlinkF64),
        sum: sum.map(FlinkF64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn aggregate(id: &str, values: &[f64]) -> AggregatedMetric {
        let sum: f64 = values.iter().sum();
        AggregatedMetric {
            id: id.into(),
            min: Some(FlinkF64(
                values.iter().copied().fold(f64::INFINITY, f64::min),
            )),
            max: Some(FlinkF64(
                values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )),
            avg: Some(FlinkF64(sum / values.len() as f64)),
            sum: Some(FlinkF64(sum)),
        }
    }

    #[test]
    fn slices_cover_every_subtask_once() {
        for (p, wanted) in [(300, 30), (7, 3), (5, 9), (1, 30), (10_000, 30), (31, 30)] {
            let plan = SlicePlan::new(p, wanted);
            assert_eq!(plan.count(), wanted.min(p));
            let mut next = 0;
            for k in 0..plan.count() {
                let (first, last) = plan.range(k);
                assert_eq!(first, next, "p={p} k={k}");
                assert!(last >= first);
                next = last + 1;
            }
            assert_eq!(next, p, "p={p}");
        }
        assert_eq!(
            SlicePlan::new(300, 30).filter(1).as_deref(),
            Some("subtasks=10-19")
        );
        assert_eq!(SlicePlan::new(300, 1).filter(0), None);
        assert_eq!(
            SlicePlan::new(300, 30).range(31),
            (10, 19),
            "taken modulo the count"
        );
    }

    #[test]
    fn nothing_is_merged_before_a_slice_is_read_and_partial_reads_are_counted() {
        let mut s = SlicedAnswers::new(SlicePlan::new(10, 5));
        assert!(s.merged().is_empty());
        s.record(2, vec![aggregate("busy", &[1.0, 2.0])]);
        s.record(4, vec![aggregate("busy", &[3.0, 4.0])]);
        assert_eq!(s.read(), 2);
        let m = &s.merged()[0];
        assert_eq!(m.sum, Some(FlinkF64(10.0)));
        assert_eq!(m.avg, Some(FlinkF64(2.5)));
    }

    #[test]
    fn a_name_counts_over_the_slices_that_report_it_and_nan_stays_nan() {
        let mut s = SlicedAnswers::new(SlicePlan::new(4, 2));
        s.record(
            0,
            vec![aggregate("a", &[1.0, 2.0]), aggregate("b", &[5.0, 7.0])],
        );
        let mut nan = aggregate("a", &[f64::NAN, 2.0]);
        nan.max = Some(FlinkF64(f64::NAN)); // as Flink's aggregation reports it
        s.record(1, vec![nan]);
        let merged = s.merged();
        assert_eq!(merged.len(), 2);
        assert!(merged[0].max.unwrap().0.is_nan());
        assert!(merged[0].sum.unwrap().0.is_nan());
        assert_eq!(merged[1].id, "b");
        assert_eq!(merged[1].sum, Some(FlinkF64(12.0)));
        assert_eq!(
            merged[1].avg,
            Some(FlinkF64(6.0)),
            "over the subtasks reporting it"
        );
    }

    #[test]
    fn slices_remember_that_they_lack_the_backlog() {
        let mut s = SlicedAnswers::new(SlicePlan::new(10, 5));
        assert!(!s.without_backlog(3));
        s.mark_without_backlog(3);
        assert!(s.without_backlog(3) && s.without_backlog(8) && !s.without_backlog(2));
    }

    #[test]
    fn zero_averages_are_weighted_by_slice_size() {
        let mut s = SlicedAnswers::new(SlicePlan::new(6, 2));
        s.record(0, vec![aggregate("x", &[0.0, 0.0, 0.0])]);
        s.record(1, vec![aggregate("x", &[6.0, 6.0, 6.0])]);
        assert_eq!(s.merged()[0].avg, Some(FlinkF64(3.0)));
    }

    proptest! {
        /// Merging every slice's aggregates gives the aggregates of the whole vertex.
        #[test]
        fn merging_all_slices_equals_aggregating_the_whole(
            values in proptest::collection::vec(1.0f64..1000.0, 1..200),
            wanted in 1u32..40,
        ) {
            let plan = SlicePlan::new(values.len() as u32, wanted);
            let mut s = SlicedAnswers::new(plan);
            for k in 0..plan.count() {
                let (first, last) = plan.range(k);
                s.record(k, vec![aggregate("m", &values[first as usize..=last as usize])]);
            }
            let whole = aggregate("m", &values);
            let merged = &s.merged()[0];
            let close = |a: Option<FlinkF64>, b: Option<FlinkF64>| {
                (a.unwrap().0 - b.unwrap().0).abs() <= 1e-9 * b.unwrap().0.abs().max(1.0)
            };
            prop_assert!(close(merged.min, whole.min));
            prop_assert!(close(merged.max, whole.max));
            prop_assert!(close(merged.sum, whole.sum));
            prop_assert!(close(merged.avg, whole.avg));
        }
    }
}
