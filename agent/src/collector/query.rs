//! Building the filtered value requests (`get=` the resolved names, `agg=` only the used
//! aggregates, split under the request-line limit) and turning the answers into a
//! [`VertexSample`]. Pure.

use std::collections::HashMap;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::names::ResolvedNames;
use crate::config::BusyAggregator;
use crate::flink::model::AggregatedMetric;
use flink_autoscale_core::samples::{Aggregates, FlinkF64, Sample, VertexSample, VertexSpec};

/// Characters kept literal in a metric name inside the query (RFC 3986 unreserved).
const NAME_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` percent-encoded for a query value (RFC 3986 unreserved characters stay literal).
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, NAME_ENCODE).collect()
}

/// The aggregates to ask for: `avg` (backpressure, idle, and the reporting-subtask count),
/// `sum` (rates and counters), and the busy-time aggregator's own.
pub fn aggregates(busy: BusyAggregator) -> &'static str {
    match busy {
        BusyAggregator::Max => "max,avg,sum",
        BusyAggregator::Avg => "avg,sum",
        BusyAggregator::Min => "min,avg,sum",
    }
}

/// Splits `names` into query strings `get=a,b,..&agg=..` whose request line (computed by
/// `line_len` from the query) stays within `max_line`. A single name longer than the limit
/// still gets its own request: nothing shorter can ask for it.
pub fn build_queries(
    names: &[&str],
    agg: &str,
    max_line: usize,
    line_len: impl Fn(usize) -> usize,
) -> Vec<String> {
    let suffix = format!("&agg={agg}");
    let mut queries = Vec::new();
    let mut current = String::from("get=");
    for name in names {
        let encoded = encode(name);
        let sep = if current.len() > 4 { 1 } else { 0 };
        if current.len() > 4
            && line_len(current.len() + sep + encoded.len() + suffix.len()) > max_line
        {
            current.push_str(&suffix);
            queries.push(std::mem::replace(&mut current, String::from("get=")));
        }
        if current.len() > 4 {
            current.push(',');
        }
        current.push_str(&encoded);
    }
    if current.len() > 4 {
        current.push_str(&suffix);
        queries.push(current);
    }
    queries
}

/// Folds the answers for one vertex into a sample. Logical metrics with several names are
/// summed; a name missing from the answer leaves its logical metric unset.
pub fn vertex_sample(names: &ResolvedNames, values: &[AggregatedMetric]) -> VertexSample {
    let by_name: HashMap<&str, &AggregatedMetric> =
        values.iter().map(|m| (m.id.as_str(), m)).collect();
    let get = |n: &Option<String>| n.as_deref().and_then(|n| by_name.get(n).copied());
    let sum_of = |list: &[String]| -> Option<FlinkF64> {
        if list.is_empty() {
            return None;
        }
        let mut total = 0.0;
        for n in list {
            total += by_name.get(n.as_str())?.sum?.0;
        }
        Some(FlinkF64(total))
    };
    VertexSample {
        busy_time_ms_per_second: get(&names.busy).map(|m| Aggregates {
            min: m.min,
            max: m.max,
            avg: m.avg,
            sum: m.sum,
        }),
        backpressured_time_ms_per_second: get(&names.backpressured).and_then(|m| m.avg),
        idle_time_ms_per_second: get(&names.idle).and_then(|m| m.avg),
        num_records_in: records_in(names, sum_of(&names.records_in), || {
            sum_of(&names.source_records_out)
        }),
        num_records_out: sum_of(&names.records_out),
        num_records_in_per_second: sum_of(&names.records_in_per_second),
        num_records_out_per_second: sum_of(&names.records_out_per_second),
        pending_records: sum_of(&names.pending_records),
        accumulated_busy_time_ms: get(&names.accumulated_busy).and_then(|m| m.sum),
    }
}

/// The records-in counter. A source whose own records-in counters are missing or 0 uses
/// its source operators' records-out counters instead (as upstream does): the FLIP-27
/// datagen source, for one, never counts records in.
fn records_in(
    names: &ResolvedNames,
    counted: Option<FlinkF64>,
    source_out: impl FnOnce() -> Option<FlinkF64>,
) -> Option<FlinkF64> {
    if names.source && counted.is_none_or(|c| c.0 == 0.0) {
        source_out().or(counted)
    } else {
        counted
    }
}

/// What a vertex whose subtasks all FINISHED stands for: no work and no input (upstream's
/// `FINISHED_METRICS`: busy 0, no backlog), with its counters held at their last value in
/// `previous`, so that rates over the window fall to 0 instead of going negative.
pub fn finished_vertex_sample(spec: &VertexSpec, previous: Option<&Sample>) -> VertexSample {
    let last = previous.and_then(|p| p.vertices.get(&spec.id));
    let zero = Some(FlinkF64(0.0));
    VertexSample {
        busy_time_ms_per_second: Some(Aggregates {
            min: zero,
            max: zero,
            avg: zero,
            sum: zero,
        }),
        backpressured_time_ms_per_second: zero,
        idle_time_ms_per_second: None,
        num_records_in: last.and_then(|v| v.num_records_in).or(zero),
        num_records_out: last.and_then(|v| v.num_records_out).or(zero),
        num_records_in_per_second: zero,
        num_records_out_per_second: zero,
        pending_records: spec.is_source().then_some(FlinkF64(0.0)),
        accumulated_busy_time_ms: last.and_then(|v| v.accumulated_busy_time_ms),
    }
}

/// How many subtasks reported busy time (`sum / avg`), when that can be told.
pub fn reporting_subtasks(sample: &VertexSample) -> Option<f64> {
    let b = sample.busy_time_ms_per_second?;
    let (sum, avg) = (b.sum?.0, b.avg?.0);
    (avg.is_finite() && sum.is_finite() && avg > 0.0).then(|| (sum / avg).round())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::names::resolve;

    #[test]
    fn splits_under_the_request_line_limit() {
        let names: Vec<String> = (0..50)
            .map(|i| format!("Source__op.metric_number_{i}"))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let line = |q: usize| 100 + q;
        let queries = build_queries(&refs, "max,avg,sum", 400, line);
        assert!(queries.len() > 1);
        for q in &queries {
            assert!(line(q.len()) <= 400, "{q}");
            assert!(q.starts_with("get=") && q.ends_with("&agg=max,avg,sum"));
        }
        let rejoined: Vec<&str> = queries
            .iter()
            .flat_map(|q| {
                q.trim_start_matches("get=")
                    .split('&')
                    .next()
                    .unwrap()
                    .split(',')
            })
            .collect();
        assert_eq!(rejoined, refs);
        assert_eq!(build_queries(&refs, "sum", 100_000, line).len(), 1);
        assert!(build_queries(&[], "sum", 4096, line).is_empty());
    }

    #[test]
    fn encodes_reserved_characters() {
        let q = build_queries(&["Source__src[1].numRecordsIn", "a,b"], "sum", 4096, |q| q);
        assert_eq!(q, vec!["get=Source__src%5B1%5D.numRecordsIn,a%2Cb&agg=sum"]);
    }

    #[test]
    fn folds_values_into_a_sample() {
        let names = resolve(
            [
                "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond",
                "Source__a.numRecordsIn",
                "Source__b.numRecordsIn",
                "Source__a.numRecordsInPerSecond",
                "Source__a.pendingRecords",
            ],
            true,
        );
        let m = |id: &str, avg: f64, sum: f64| AggregatedMetric {
            id: id.into(),
            avg: Some(FlinkF64(avg)),
            sum: Some(FlinkF64(sum)),
            ..Default::default()
        };
        let values = vec![
            AggregatedMetric {
                max: Some(FlinkF64(f64::NAN)),
                ..m("busyTimeMsPerSecond", 500.0, 2000.0)
            },
            m("backPressuredTimeMsPerSecond", 10.0, 40.0),
            m("Source__a.numRecordsIn", 1.0, 100.0),
            m("Source__b.numRecordsIn", 1.0, 50.0),
            m("Source__a.numRecordsInPerSecond", 1.0, 7.0),
        ];
        let s = vertex_sample(&names, &values);
        assert!(s.busy_time_ms_per_second.unwrap().max.unwrap().0.is_nan());
        assert_eq!(s.backpressured_time_ms_per_second, Some(FlinkF64(10.0)));
        assert_eq!(s.num_records_in, Some(FlinkF64(150.0)));
        assert_eq!(s.num_records_in_per_second, Some(FlinkF64(7.0)));
        assert_eq!(s.pending_records, None);
        assert_eq!(reporting_subtasks(&s), Some(4.0));
    }

    #[test]
    fn a_source_without_records_in_counts_its_records_out() {
        let names = resolve(
            [
                "busyTimeMsPerSecond",
                "numRecordsOut",
                "Source__gen.numRecordsIn",
                "Source__gen.numRecordsOut",
            ],
            true,
        );
        assert_eq!(names.source_records_out, vec!["Source__gen.numRecordsOut"]);
        let sum = |id: &str, sum: f64| AggregatedMetric {
            id: id.into(),
            sum: Some(FlinkF64(sum)),
            ..Default::default()
        };
        let counted = [
            sum("Source__gen.numRecordsIn", 40.0),
            sum("Source__gen.numRecordsOut", 90.0),
        ];
        assert_eq!(
            vertex_sample(&names, &counted).num_records_in,
            Some(FlinkF64(40.0))
        );
        let never_counted = [
            sum("Source__gen.numRecordsIn", 0.0),
            sum("Source__gen.numRecordsOut", 90.0),
        ];
        assert_eq!(
            vertex_sample(&names, &never_counted).num_records_in,
            Some(FlinkF64(90.0))
        );
        let not_a_source = resolve(["numRecordsIn", "numRecordsOut"], false);
        assert_eq!(
            vertex_sample(&not_a_source, &[sum("numRecordsIn", 0.0)]).num_records_in,
            Some(FlinkF64(0.0))
        );
    }
    #[test]
    fn a_finished_vertex_stands_still_at_its_last_counters() {
        let spec = VertexSpec {
            id: "v".into(),
            name: "v".into(),
            parallelism: 2,
            max_parallelism: 128,
            source_partitions: 0,
            inputs: Vec::new(),
            finished_subtasks: 2,
        };
        let previous = Sample {
            time_ms: 1,
            vertices: [(
                "v".to_string(),
                VertexSample {
                    num_records_in: Some(FlinkF64(700.0)),
                    num_records_out: Some(FlinkF64(690.0)),
                    ..Default::default()
                },
            )]
            .into(),
        };
        let s = finished_vertex_sample(&spec, Some(&previous));
        assert_eq!(s.num_records_in, Some(FlinkF64(700.0)));
        assert_eq!(s.num_records_out, Some(FlinkF64(690.0)));
        assert_eq!(s.busy_time_ms_per_second.unwrap().max, Some(FlinkF64(0.0)));
        assert_eq!(s.num_records_in_per_second, Some(FlinkF64(0.0)));
        assert_eq!(
            s.pending_records,
            Some(FlinkF64(0.0)),
            "a source has no backlog"
        );
        let fresh = finished_vertex_sample(&spec, None);
        assert_eq!(fresh.num_records_in, Some(FlinkF64(0.0)));
    }
}
