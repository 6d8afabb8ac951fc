//! The per-vertex gauges a poll publishes: what was observed. Rates come from the counters'
//! change since the previous sample (sources report their own input rate), so they need no
//! extra metric per subtask. The figures are computed here, purely; `telemetry` only sets
//! them. What the engine derived from the window (true processing rate, load, target rate)
//! is exported by the control loop after each evaluation, never estimated here.

use crate::config::BusyAggregator;
use crate::telemetry::{self, VertexFigures};
use flink_autoscale_core::samples::{FlinkF64, Sample, VertexSample, VertexSpec};

/// One vertex's figures from this poll's sample and the previous one, `None` when the
/// sample has no entry for the vertex.
pub fn vertex_figures(
    spec: &VertexSpec,
    sample: &Sample,
    previous: Option<&Sample>,
    busy_aggregator: BusyAggregator,
) -> Option<VertexFigures> {
    let v = sample.vertices.get(&spec.id)?;
    let busy = v
        .busy_time_ms_per_second
        .and_then(|b| match busy_aggregator {
            BusyAggregator::Max => b.max,
            BusyAggregator::Avg => b.avg,
            BusyAggregator::Min => b.min,
        });
    let busy_ratio = busy.map(|b| b.0 / 1000.0).filter(|b| b.is_finite());
    let before = previous.and_then(|p| p.vertices.get(&spec.id).map(|b| (p.time_ms, b)));
    let rate = |counter: fn(&VertexSample) -> Option<FlinkF64>| {
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
    Some(VertexFigures {
        busy_ratio,
        backpressure_ratio: v.backpressured_time_ms_per_second.map(|b| b.0 / 1000.0),
        input_rate,
        output_rate: rate(|s| s.num_records_out),
        lag: if spec.is_source() {
            Some(v.pending_records.map_or(0.0, |p| p.0))
        } else {
            None
        },
        parallelism: spec.parallelism,
    })
}

/// Sets every vertex's gauges for one poll.
pub fn publish(
    job_id: &str,
    topology: &[VertexSpec],
    sample: &Sample,
    previous: Option<&Sample>,
    busy_aggregator: BusyAggregator,
) {
    for spec in topology {
        if let Some(figures) = vertex_figures(spec, sample, previous, busy_aggregator) {
            telemetry::record_vertex(job_id, &spec.id, &figures);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::samples::{Aggregates, Input};

    fn spec(source: bool) -> VertexSpec {
        VertexSpec {
            id: "v".into(),
            name: "v".into(),
            parallelism: 3,
            max_parallelism: 128,
            source_partitions: 0,
            finished_subtasks: 0,
            inputs: if source {
                vec![]
            } else {
                vec![Input {
                    id: "up".into(),
                    ship_strategy: "HASH".into(),
                }]
            },
        }
    }

    fn sample(t: u64, records_in: f64, records_out: f64, busy_max: f64) -> Sample {
        let v = VertexSample {
            busy_time_ms_per_second: Some(Aggregates {
                min: Some(FlinkF64(100.0)),
                max: Some(FlinkF64(busy_max)),
                avg: Some(FlinkF64(250.0)),
                sum: None,
            }),
            backpressured_time_ms_per_second: Some(FlinkF64(100.0)),
            num_records_in: Some(FlinkF64(records_in)),
            num_records_out: Some(FlinkF64(records_out)),
            num_records_in_per_second: Some(FlinkF64(42.0)),
            pending_records: None,
            ..Default::default()
        };
        Sample {
            time_ms: t,
            vertices: [("v".to_string(), v)].into(),
        }
    }

    #[test]
    fn figures_from_two_samples() {
        let before = sample(10_000, 1_000.0, 2_000.0, 500.0);
        let now = sample(12_000, 1_200.0, 2_100.0, 500.0);
        let f = vertex_figures(&spec(false), &now, Some(&before), BusyAggregator::Max).unwrap();
        assert_eq!(f.busy_ratio, Some(0.5));
        assert_eq!(f.backpressure_ratio, Some(0.1));
        assert_eq!(f.input_rate, Some(100.0));
        assert_eq!(f.output_rate, Some(50.0));
        assert_eq!(f.lag, None);
        assert_eq!(f.parallelism, 3);
        let avg = vertex_figures(&spec(false), &now, Some(&before), BusyAggregator::Avg).unwrap();
        assert_eq!(avg.busy_ratio, Some(0.25));
    }

    #[test]
    fn first_samples_counters_going_back_and_sources() {
        let now = sample(12_000, 1_200.0, 2_100.0, f64::NAN);
        let first = vertex_figures(&spec(false), &now, None, BusyAggregator::Max).unwrap();
        assert_eq!((first.input_rate, first.output_rate), (None, None));
        assert_eq!(first.busy_ratio, None, "NaN busy time is no ratio");
        let later = sample(14_000, 1_100.0, 2_100.0, 500.0);
        let back = vertex_figures(&spec(false), &later, Some(&now), BusyAggregator::Max).unwrap();
        assert_eq!(
            back.input_rate, None,
            "a counter going backwards gives no rate"
        );
        assert_eq!(back.output_rate, Some(0.0));
        let source = vertex_figures(&spec(true), &now, None, BusyAggregator::Max).unwrap();
        assert_eq!(source.input_rate, Some(42.0));
        assert_eq!(
            source.lag,
            Some(0.0),
            "no pendingRecords reported: no backlog"
        );
        let missing = Sample {
            time_ms: 1,
            vertices: Default::default(),
        };
        assert!(vertex_figures(&spec(true), &missing, None, BusyAggregator::Max).is_none());
    }
}
