//! Resolving the exact metric names a vertex reports (from one name listing) into the
//! logical metrics the agent needs. Pure; the listing itself is done by the job collector.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::config::BusyAggregator;

pub const BUSY: &str = "busyTimeMsPerSecond";
pub const BACKPRESSURED: &str = "backPressuredTimeMsPerSecond";
pub const IDLE: &str = "idleTimeMsPerSecond";
pub const ACCUMULATED_BUSY: &str = "accumulateBusyTimeMs";
pub const RECORDS_IN: &str = "numRecordsIn";
pub const RECORDS_IN_RATE: &str = "numRecordsInPerSecond";
pub const RECORDS_OUT: &str = "numRecordsOut";
pub const RECORDS_OUT_RATE: &str = "numRecordsOutPerSecond";
const SOURCE_PREFIX: &str = "Source__";
const PENDING_SUFFIX: &str = ".pendingRecords";

/// Java regexes (full match; no commas, since Flink splits `regex=` on them) that keep every
/// name [`resolve`] reads. The batch name listing asks only for these, so a Kafka source's
/// hundreds of client metrics never travel.
pub const LISTING_FILTER: [&str; 6] = [
    "busyTimeMsPerSecond|backPressuredTimeMsPerSecond|idleTimeMsPerSecond|accumulateBusyTimeMs",
    "numRecords(In|Out)(PerSecond)?",
    "Source__.+[.]numRecords(In|Out)(PerSecond)?",
    ".*[.]pendingRecords",
    ".*KafkaSourceReader[.]topic[.].+[.]partition[.].+[.]currentOffset",
    ".*[.]PulsarConsumer[.].+[.]numMsgsReceived",
];

/// What one poll asks a vertex for, beyond its resolved names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    pub busy_aggregator: BusyAggregator,
    /// The vertex feeds no other vertex, so its records-out counter is not needed.
    pub sink: bool,
    /// Include reporting-only metrics (the backpressured time of a non-source).
    pub reporting: bool,
    /// Include a source's `pendingRecords`. Subtasks without assigned partitions may not
    /// report it, so a slice of only such subtasks must be read without it.
    pub backlog: bool,
}

/// The names a vertex reports for each logical metric. Lists hold every match (for example
/// several chained source operators); their values are summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResolvedNames {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backpressured: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_busy: Option<String>,
    pub records_in: Vec<String>,
    pub records_in_per_second: Vec<String>,
    pub records_out: Vec<String>,
    pub records_out_per_second: Vec<String>,
    pub pending_records: Vec<String>,
    /// Sources: the source operators' own records-out counters. Some sources (the FLIP-27
    /// datagen source, for one) never count records in; as upstream does, their records out
    /// then stand for the records in.
    pub source_records_out: Vec<String>,
    /// Distinct Kafka/Pulsar partitions seen in the names; 0 = unknown.
    pub source_partitions: u32,
    /// Resolved for a source vertex (no inputs).
    pub source: bool,
}

impl ResolvedNames {
    /// The names a poll asks for, each once, in a stable order: what the decision engine
    /// uses, plus the reporting-only backpressure of non-sources when `sel.reporting`.
    /// Sources add their backlog and own input rate; sinks need no records-out counter;
    /// the accumulated busy time is only needed by the AVG busy-time aggregator. Idle time
    /// and the rates of non-sources are resolved (shown by `collect`) but not polled: the
    /// gauges derive rates from the counters.
    pub fn requested(&self, sel: Selection) -> Vec<&str> {
        let mut seen = BTreeSet::new();
        let mut singles = vec![&self.busy];
        if self.source || sel.reporting {
            singles.push(&self.backpressured);
        }
        if sel.busy_aggregator == BusyAggregator::Avg {
            singles.push(&self.accumulated_busy);
        }
        let mut lists = vec![&self.records_in];
        if !sel.sink {
            lists.push(&self.records_out);
        }
        if self.source {
            lists.push(&self.records_in_per_second);
            if sel.backlog {
                lists.push(&self.pending_records);
            }
            lists.push(&self.source_records_out);
        }
        singles
            .into_iter()
            .flatten()
            .chain(lists.into_iter().flatten())
            .map(String::as_str)
            .filter(|n| seen.insert(*n))
            .collect()
    }

    /// The first metric a usable sample needs that this vertex does not report.
    pub fn missing_required(&self) -> Option<&'static str> {
        if self.busy.is_none() {
            Some(BUSY)
        } else if self.source && self.backpressured.is_none() {
            Some(BACKPRESSURED)
        } else if self.records_in.is_empty() {
            Some(RECORDS_IN)
        } else if self.source && self.records_in_per_second.is_empty() {
            Some(RECORDS_IN_RATE)
        } else {
            None
        }
    }
}

/// Picks the needed names out of a vertex's name listing. For sources, records in are the
/// source operators' own counters (the task-level ones count network input, which is 0).
pub fn resolve<'a>(names: impl IntoIterator<Item = &'a str>, is_source: bool) -> ResolvedNames {
    let mut r = ResolvedNames {
        source: is_source,
        ..Default::default()
    };
    let mut partitions = BTreeSet::new();
    for name in names {
        match name {
            BUSY => r.busy = Some(name.into()),
            BACKPRESSURED => r.backpressured = Some(name.into()),
            IDLE => r.idle = Some(name.into()),
            ACCUMULATED_BUSY => r.accumulated_busy = Some(name.into()),
            RECORDS_OUT => r.records_out.push(name.into()),
            RECORDS_OUT_RATE => r.records_out_per_second.push(name.into()),
            RECORDS_IN if !is_source => r.records_in.push(name.into()),
            RECORDS_IN_RATE if !is_source => r.records_in_per_second.push(name.into()),
            _ => {}
        }
        if is_source {
            if let Some(op_metric) = name.strip_prefix(SOURCE_PREFIX) {
                if let Some((_, metric)) = op_metric.rsplit_once('.') {
                    match metric {
                        RECORDS_IN => r.records_in.push(name.into()),
                        RECORDS_IN_RATE => r.records_in_per_second.push(name.into()),
                        RECORDS_OUT => r.source_records_out.push(name.into()),
                        _ => {}
                    }
                }
            }
            if name.ends_with(PENDING_SUFFIX) {
                r.pending_records.push(name.into());
            }
            if let Some(p) = partition_of(name) {
                partitions.insert(p);
            }
        }
    }
    for list in [
        &mut r.records_in,
        &mut r.records_in_per_second,
        &mut r.records_out,
        &mut r.records_out_per_second,
        &mut r.pending_records,
        &mut r.source_records_out,
    ] {
        list.sort();
        list.dedup();
    }
    r.source_partitions = u32::try_from(partitions.len()).unwrap_or(u32::MAX);
    r
}

/// The (cluster, topic, partition) a Kafka `currentOffset` or Pulsar `numMsgsReceived`
/// metric name is about.
fn partition_of(name: &str) -> Option<(String, String, String)> {
    const KAFKA: &str = "KafkaSourceReader.topic.";
    if let Some(rest) = name.strip_suffix(".currentOffset") {
        let at = rest.find(KAFKA)?;
        let (topic, partition) = rest[at + KAFKA.len()..].split_once(".partition.")?;
        let cluster = rest[..at]
            .rsplit_once(".kafkaCluster.")
            .map(|(_, c)| c.trim_end_matches('.').to_string())
            .unwrap_or_default();
        return Some((cluster, topic.to_string(), partition.to_string()));
    }
    if name.ends_with(".numMsgsReceived") {
        let (_, rest) = name.split_once(".PulsarConsumer.")?;
        let segment = rest.split('.').next()?;
        let (topic, partition) = segment.rsplit_once("-partition-")?;
        return Some((String::new(), topic.to_string(), partition.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_names(file: &str) -> Vec<String> {
        let path = format!(
            "{}/tests/fixtures/flink-rest-samples/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"));
        let v: Vec<crate::flink::model::MetricName> = serde_json::from_str(&text).unwrap();
        v.into_iter().map(|m| m.id).collect()
    }

    #[test]
    fn resolves_a_real_source_listing() {
        let names = fixture_names(
            "adaptive-scheduler/jobs_JID_vertices_VID-Source-datagen-source_subtasks_metrics.json",
        );
        if names.is_empty() {
            return; // fixtures not present on this machine
        }
        let r = resolve(names.iter().map(String::as_str), true);
        assert_eq!(r.busy.as_deref(), Some(BUSY));
        assert_eq!(r.records_in, vec!["Source__datagen-source.numRecordsIn"]);
        assert_eq!(
            r.records_in_per_second,
            vec!["Source__datagen-source.numRecordsInPerSecond"]
        );
        assert_eq!(r.records_out, vec![RECORDS_OUT]);
        assert_eq!(r.missing_required(), None);
        assert_eq!(
            r.requested(Selection {
                busy_aggregator: BusyAggregator::Max,
                sink: false,
                reporting: false,
                backlog: true,
            }),
            vec![
                BUSY,
                BACKPRESSURED,
                "Source__datagen-source.numRecordsIn",
                RECORDS_OUT,
                "Source__datagen-source.numRecordsInPerSecond",
                "Source__datagen-source.numRecordsOut"
            ]
        );
    }

    #[test]
    fn resolves_a_real_non_source_listing() {
        let names = fixture_names(
            "adaptive-scheduler/jobs_JID_vertices_VID-keyed-sum_subtasks_metrics.json",
        );
        if names.is_empty() {
            return;
        }
        let r = resolve(names.iter().map(String::as_str), false);
        assert_eq!(r.records_in, vec![RECORDS_IN]);
        assert_eq!(r.records_in_per_second, vec![RECORDS_IN_RATE]);
        assert!(r.pending_records.is_empty());
        assert_eq!(r.missing_required(), None);
        let sel = Selection {
            busy_aggregator: BusyAggregator::Avg,
            sink: false,
            reporting: true,
            backlog: true,
        };
        assert_eq!(
            r.requested(sel),
            vec![
                BUSY,
                BACKPRESSURED,
                ACCUMULATED_BUSY,
                RECORDS_IN,
                RECORDS_OUT
            ]
        );
        let quiet_sink = Selection {
            busy_aggregator: BusyAggregator::Max,
            sink: true,
            reporting: false,
            backlog: true,
        };
        assert_eq!(r.requested(quiet_sink), vec![BUSY, RECORDS_IN]);
    }

    /// Resolving only what the batch listing's filter keeps gives the same names.
    #[test]
    fn the_listing_filter_keeps_every_name_resolve_reads() {
        let filter = regex::Regex::new(&format!("^(?:{})$", LISTING_FILTER.join("|"))).unwrap();
        let mut listings: Vec<(Vec<String>, bool)> = vec![
            (
                fixture_names("adaptive-scheduler/jobs_JID_vertices_VID-Source-datagen-source_subtasks_metrics.json"),
                true,
            ),
            (
                fixture_names("adaptive-scheduler/jobs_JID_vertices_VID-keyed-sum_subtasks_metrics.json"),
                false,
            ),
        ];
        listings.push((SOURCE_NAMES.iter().map(|n| n.to_string()).collect(), true));
        for (names, is_source) in listings {
            let kept: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| filter.is_match(n))
                .collect();
            assert_eq!(
                resolve(kept, is_source),
                resolve(names.iter().map(String::as_str), is_source)
            );
        }
        assert!(!filter.is_match("Source__Kafka_Source.KafkaConsumer.records-lag-max"));
        assert!(LISTING_FILTER.iter().all(|r| !r.contains(',')));
    }

    const SOURCE_NAMES: [&str; 12] = [
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "numRecordsIn",
        "Source__Kafka_Source.numRecordsIn",
        "Source__Kafka_Source.numRecordsInPerSecond",
        "Source__Kafka_Source.pendingRecords",
        "Source__Kafka_Source.KafkaSourceReader.topic.orders.partition.0.currentOffset",
        "Source__Kafka_Source.KafkaSourceReader.topic.orders.partition.1.currentOffset",
        "Source__Kafka_Source.KafkaSourceReader.topic.orders.partition.1.committedOffset",
        "Source__Kafka_Source.kafkaCluster.east.KafkaSourceReader.topic.orders.partition.1.currentOffset",
        "Source__P.PulsarConsumer.t-partition-3.x.numMsgsReceived",
        "Source__Kafka_Source.KafkaConsumer.records-lag-max",
    ];

    #[test]
    fn sources_find_pending_records_and_partitions() {
        let names = SOURCE_NAMES;
        let r = resolve(names, true);
        assert_eq!(r.records_in, vec!["Source__Kafka_Source.numRecordsIn"]);
        assert_eq!(
            r.pending_records,
            vec!["Source__Kafka_Source.pendingRecords"]
        );
        assert_eq!(r.source_partitions, 4);
        let r = resolve(["numRecordsIn"], false);
        assert_eq!(r.missing_required(), Some(BUSY));
    }
}
