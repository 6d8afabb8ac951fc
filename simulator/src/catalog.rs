//! The metric names each subtask of a vertex registers, and how each value is derived from
//! the model. Values are computed on request from a `JobView`; nothing is stored per name,
//! so a 10,000-subtask vertex with hundreds of names costs only its per-subtask numbers.

use std::collections::HashMap;

use crate::ids::unit_hash;
use crate::model::{owns_partition, partitions_owned};
use crate::naming::group_component;
use crate::scenario::{JobSpec, VertexSpec};
use crate::view::{SubtaskView, VertexView};

/// A metric value as Flink's MetricStore holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Long(i64),
    Double(f64),
    Text(&'static str),
}

impl Val {
    /// The plain (string) form served by non-aggregated endpoints.
    pub fn to_plain(&self) -> String {
        match self {
            Val::Long(l) => l.to_string(),
            Val::Double(d) => crate::format::java_double(*d),
            Val::Text(t) => (*t).to_string(),
        }
    }

    /// The number aggregated endpoints use; `None` for non-numeric gauges, which Flink skips.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Val::Long(l) => Some(*l as f64),
            Val::Double(d) => Some(*d),
            Val::Text(t) => t.parse().ok(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpMetric {
    RecIn,
    RecOut,
    RecInRate,
    RecOutRate,
    BytesIn,
    BytesOut,
    BytesInRate,
    BytesOutRate,
    InputWatermark,
    OutputWatermark,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Busy,
    Idle,
    BackPressured,
    SoftBackPressured,
    HardBackPressured,
    MaxSoftBackPressure,
    MaxHardBackPressure,
    AccBusy,
    AccIdle,
    AccBackPressured,
    RecIn,
    RecOut,
    RecInRate,
    RecOutRate,
    BytesIn,
    BytesOut,
    BytesInRate,
    BytesOutRate,
    IsBackPressured,
    OutPoolUsage,
    InPoolUsage,
    InputWatermark,
    InitializationTime,
    /// A metric the model does not drive (buffers, mailbox, timers): a small steady value.
    Filler(u32),
    Histogram(u32),
    Op(u16, OpMetric),
    PendingRecords,
    FetchEventTimeLag,
    EmitEventTimeLag,
    SourceIdleTime,
    RecordsInErrors,
    CommitsSucceeded,
    CommitsFailed,
    CurrentOffset(u32),
    CommittedOffset(u32),
    /// One of a split's watermark metrics (`SPLIT_WATERMARK_METRICS[k]` of split `n`).
    SplitWatermark(u32, u8),
    RecordsSend,
    BytesSend,
    RecordsSendErrors,
    CurrentSendTime,
    Extra(u32),
}

/// Task-scope names a streaming subtask registers in Flink 2.3 (from a live capture), with
/// the model quantity each one reports.
const TASK_METRICS: &[(&str, Metric)] = &[
    ("busyTimeMsPerSecond", Metric::Busy),
    ("idleTimeMsPerSecond", Metric::Idle),
    ("backPressuredTimeMsPerSecond", Metric::BackPressured),
    (
        "softBackPressuredTimeMsPerSecond",
        Metric::SoftBackPressured,
    ),
    (
        "hardBackPressuredTimeMsPerSecond",
        Metric::HardBackPressured,
    ),
    ("maxSoftBackPressureTimeMs", Metric::MaxSoftBackPressure),
    ("maxHardBackPressureTimeMs", Metric::MaxHardBackPressure),
    ("accumulateBusyTimeMs", Metric::AccBusy),
    ("accumulateIdleTimeMs", Metric::AccIdle),
    ("accumulateBackPressuredTimeMs", Metric::AccBackPressured),
    ("numRecordsIn", Metric::RecIn),
    ("numRecordsOut", Metric::RecOut),
    ("numRecordsInPerSecond", Metric::RecInRate),
    ("numRecordsOutPerSecond", Metric::RecOutRate),
    ("numBytesIn", Metric::BytesIn),
    ("numBytesOut", Metric::BytesOut),
    ("numBytesInPerSecond", Metric::BytesInRate),
    ("numBytesOutPerSecond", Metric::BytesOutRate),
    ("isBackPressured", Metric::IsBackPressured),
    (
        "Shuffle.Netty.Output.Buffers.outPoolUsage",
        Metric::OutPoolUsage,
    ),
    (
        "Shuffle.Netty.Input.Buffers.inPoolUsage",
        Metric::InPoolUsage,
    ),
    ("initializationTime", Metric::InitializationTime),
];

/// Task-scope names the model does not drive (network buffers, mailbox, timers): they report
/// small steady values.
const FILLER_METRICS: &[&str] = &[
    "checkpointStartDelayNanos",
    "changelogBusyTimeMsPerSecond",
    "mailboxMailsPerSecond",
    "mailboxQueueSize",
    "numBytesInLocal",
    "numBytesInLocalPerSecond",
    "numBytesInRemote",
    "numBytesInRemotePerSecond",
    "numBuffersOut",
    "numBuffersOutPerSecond",
    "numBuffersInLocal",
    "numBuffersInLocalPerSecond",
    "numBuffersInRemote",
    "numBuffersInRemotePerSecond",
    "numFiredTimers",
    "numFiredTimersPerSecond",
    "Shuffle.Netty.Input.numBytesInLocal",
    "Shuffle.Netty.Input.numBytesInLocalPerSecond",
    "Shuffle.Netty.Input.numBytesInRemote",
    "Shuffle.Netty.Input.numBytesInRemotePerSecond",
    "Shuffle.Netty.Input.numBuffersInLocal",
    "Shuffle.Netty.Input.numBuffersInLocalPerSecond",
    "Shuffle.Netty.Input.numBuffersInRemote",
    "Shuffle.Netty.Input.numBuffersInRemotePerSecond",
    "Shuffle.Netty.Input.Buffers.inputQueueLength",
    "Shuffle.Netty.Input.Buffers.inputQueueSize",
    "Shuffle.Netty.Input.Buffers.inputExclusiveBuffersUsage",
    "Shuffle.Netty.Input.Buffers.inputFloatingBuffersUsage",
    "Shuffle.Netty.Output.Buffers.outputQueueLength",
    "Shuffle.Netty.Output.Buffers.outputQueueSize",
];

/// What a FLIP-27 source registers per split it reads, as `<source>.split.<id>.watermark.*`
/// (Flink 2.3's data generator source, from a live capture: 7 per split, on the subtask that
/// reads it; a name listing of the vertex shows every split's).
const SPLIT_WATERMARK_METRICS: &[&str] = &[
    "accumulatedActiveTimeMs",
    "accumulatedIdleTimeMs",
    "accumulatedPausedTimeMs",
    "activeTimeMsPerSecond",
    "currentWatermark",
    "idleTimeMsPerSecond",
    "pausedTimeMsPerSecond",
];

const HISTOGRAM_SUFFIXES: &[&str] = &[
    "min", "max", "mean", "median", "stddev", "p75", "p90", "p95", "p98", "p99", "p999",
];

/// Kafka consumer client metrics, used to name a Kafka source's extra metrics.
const KAFKA_CLIENT_METRICS: &[&str] = &[
    "records-lag-max",
    "records-consumed-rate",
    "records-consumed-total",
    "bytes-consumed-rate",
    "bytes-consumed-total",
    "fetch-rate",
    "fetch-total",
    "fetch-latency-avg",
    "fetch-latency-max",
    "fetch-size-avg",
    "fetch-size-max",
    "fetch-throttle-time-avg",
    "fetch-throttle-time-max",
    "records-per-request-avg",
    "commit-rate",
    "commit-total",
    "commit-latency-avg",
    "commit-latency-max",
    "connection-count",
    "connection-creation-rate",
    "connection-close-rate",
    "incoming-byte-rate",
    "outgoing-byte-rate",
    "io-ratio",
    "io-wait-ratio",
    "io-time-ns-avg",
    "io-wait-time-ns-avg",
    "network-io-rate",
    "request-rate",
    "request-size-avg",
    "request-size-max",
    "response-rate",
    "select-rate",
    "heartbeat-rate",
    "heartbeat-response-time-max",
    "join-rate",
    "join-time-avg",
    "sync-rate",
    "sync-time-avg",
    "last-heartbeat-seconds-ago",
];

/// Everything a value computation needs besides the catalog.
pub(crate) struct ValueCtx<'a> {
    pub spec: &'a VertexSpec,
    pub is_sink: bool,
    pub view: &'a VertexView,
    pub t_ms: u64,
    pub running_since_ms: u64,
}

/// The metric names of one vertex and how to compute each.
#[derive(Debug)]
pub(crate) struct Catalog {
    names: Vec<String>,
    metrics: Vec<Metric>,
    index: HashMap<String, usize>,
    /// How many entries are present on every subtask (the rest depend on partitions).
    partition_metric_count: usize,
}

impl Catalog {
    pub fn for_vertex(job: &JobSpec, v: usize) -> Catalog {
        let spec = &job.vertices[v];
        let is_source = spec.source.is_some();
        let is_sink = !job.has_outputs(v);
        let mut entries: Vec<(String, Metric)> = TASK_METRICS
            .iter()
            .map(|(n, m)| ((*n).to_string(), *m))
            .chain(
                FILLER_METRICS
                    .iter()
                    .enumerate()
                    .map(|(i, n)| ((*n).to_string(), Metric::Filler(i as u32))),
            )
            .collect();
        if !is_source {
            entries.push(("currentInputWatermark".into(), Metric::InputWatermark));
            entries.push((
                "checkpointAlignmentTime".into(),
                Metric::Filler(FILLER_METRICS.len() as u32),
            ));
        }
        for (i, suffix) in HISTOGRAM_SUFFIXES.iter().enumerate() {
            entries.push((
                format!("mailboxLatencyMs_{suffix}"),
                Metric::Histogram(i as u32),
            ));
        }
        let ops = &spec.operator_scopes;
        for (j, scope) in ops.iter().enumerate() {
            let j16 = j as u16;
            let mut add = |suffix: &str, m: OpMetric| {
                entries.push((format!("{scope}.{suffix}"), Metric::Op(j16, m)))
            };
            add("numRecordsIn", OpMetric::RecIn);
            add("numRecordsOut", OpMetric::RecOut);
            add("numRecordsInPerSecond", OpMetric::RecInRate);
            add("numRecordsOutPerSecond", OpMetric::RecOutRate);
            add("numBytesIn", OpMetric::BytesIn);
            add("numBytesOut", OpMetric::BytesOut);
            add("numBytesInPerSecond", OpMetric::BytesInRate);
            add("numBytesOutPerSecond", OpMetric::BytesOutRate);
            add("currentOutputWatermark", OpMetric::OutputWatermark);
            if !(is_source && j == 0) {
                add("currentInputWatermark", OpMetric::InputWatermark);
            }
        }
        let first = &ops[0];
        let last = &ops[ops.len() - 1];
        let mut partition_metric_count = 0;
        if let Some(src) = &spec.source {
            entries.push((
                format!("{first}.numRecordsInErrors"),
                Metric::RecordsInErrors,
            ));
            entries.push((format!("{first}.sourceIdleTime"), Metric::SourceIdleTime));
            entries.push((
                format!("{first}.currentEmitEventTimeLag"),
                Metric::EmitEventTimeLag,
            ));
            if let Some(parts) = src.partitions {
                entries.push((format!("{first}.pendingRecords"), Metric::PendingRecords));
                entries.push((
                    format!("{first}.currentFetchEventTimeLag"),
                    Metric::FetchEventTimeLag,
                ));
                entries.push((
                    format!("{first}.KafkaSourceReader.commitsSucceeded"),
                    Metric::CommitsSucceeded,
                ));
                entries.push((
                    format!("{first}.KafkaSourceReader.commitsFailed"),
                    Metric::CommitsFailed,
                ));
                let topic = group_component(&src.topic);
                for n in 0..parts {
                    let prefix = format!("{first}.KafkaSourceReader.topic.{topic}.partition.{n}");
                    entries.push((format!("{prefix}.currentOffset"), Metric::CurrentOffset(n)));
                    entries.push((
                        format!("{prefix}.committedOffset"),
                        Metric::CommittedOffset(n),
                    ));
                }
                partition_metric_count = 4 + 2 * parts as usize;
            }
            if let Some(splits) = src.splits {
                for n in 0..splits {
                    for (k, suffix) in SPLIT_WATERMARK_METRICS.iter().enumerate() {
                        entries.push((
                            format!("{first}.split.{}.watermark.{suffix}", n + 1),
                            Metric::SplitWatermark(n, k as u8),
                        ));
                    }
                }
                partition_metric_count += SPLIT_WATERMARK_METRICS.len() * splits as usize;
            }
        }
        if is_sink {
            entries.push((format!("{last}.numRecordsSend"), Metric::RecordsSend));
            entries.push((format!("{last}.numBytesSend"), Metric::BytesSend));
            entries.push((
                format!("{last}.numRecordsSendErrors"),
                Metric::RecordsSendErrors,
            ));
            entries.push((format!("{last}.currentSendTime"), Metric::CurrentSendTime));
        }
        let kafka = spec.source.as_ref().is_some_and(|s| s.partitions.is_some());
        for i in 0..spec.extra_metrics {
            let name = if kafka {
                let base = KAFKA_CLIENT_METRICS[i as usize % KAFKA_CLIENT_METRICS.len()];
                let round = i as usize / KAFKA_CLIENT_METRICS.len();
                if round == 0 {
                    format!("{first}.KafkaSourceReader.KafkaConsumer.{base}")
                } else {
                    format!("{first}.KafkaSourceReader.KafkaConsumer.node-{round}.{base}")
                }
            } else {
                format!("{last}.user.metric_{i}")
            };
            entries.push((name, Metric::Extra(i)));
        }
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        let (names, metrics) = entries.into_iter().unzip();
        Catalog {
            names,
            metrics,
            index,
            partition_metric_count,
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn name(&self, m: usize) -> &str {
        &self.names[m]
    }

    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether metric `m` appears only after a subtask's first record.
    pub fn registered_lazily(&self, m: usize, spec: &VertexSpec) -> bool {
        self.metrics[m] == Metric::PendingRecords
            && spec.source.as_ref().is_some_and(|s| s.lazy_pending_records)
    }

    /// Whether subtask `i` of `vv` registers metric `m`: partition metrics live on the
    /// partition's reader, and a lazily registered `pendingRecords` appears with the
    /// subtask's first record (as Kafka's source reader does).
    pub fn present(&self, m: usize, spec: &VertexSpec, vv: &VertexView, i: u32) -> bool {
        let p = vv.parallelism;
        let source = spec.source.as_ref();
        let parts = source.and_then(|s| s.partitions).unwrap_or(0);
        match self.metrics[m] {
            Metric::CurrentOffset(n)
            | Metric::CommittedOffset(n)
            | Metric::SplitWatermark(n, _) => owns_partition(p, i, n),
            Metric::PendingRecords if source.is_some_and(|s| s.lazy_pending_records) => {
                partitions_owned(parts, p, i) > 0
                    && vv
                        .subtasks
                        .get(i as usize)
                        .is_some_and(|s| s.counters.rec_in > 0.0)
            }
            Metric::PendingRecords
            | Metric::FetchEventTimeLag
            | Metric::CommitsSucceeded
            | Metric::CommitsFailed => partitions_owned(parts, p, i) > 0,
            _ => true,
        }
    }

    /// Entries one subtask holds (what a name listing touches per subtask, on average).
    pub fn entries_per_subtask(&self, p: u32) -> u64 {
        let fixed = (self.names.len() - self.partition_metric_count) as u64;
        let partitioned = self.partition_metric_count as u64 / u64::from(p.max(1));
        fixed + partitioned
    }

    /// The value of metric `m` on subtask `i`.
    pub fn value(&self, m: usize, ctx: &ValueCtx, i: usize) -> Val {
        let s: &SubtaskView = &ctx.view.subtasks[i];
        let spec = ctx.spec;
        let is_source = spec.source.is_some();
        let bytes = spec.record_bytes;
        let p = ctx.view.parallelism;
        let parts = spec.source.as_ref().and_then(|s| s.partitions).unwrap_or(0);
        let owned = f64::from(partitions_owned(parts, p, i as u32));
        let long = |x: f64| Val::Long(x.round() as i64);
        let task_in = if is_source { 0.0 } else { s.counters.rec_in };
        let task_in_rate = if is_source { 0.0 } else { s.in_rate };
        let task_out = if ctx.is_sink { 0.0 } else { s.counters.rec_out };
        let task_out_rate = if ctx.is_sink { 0.0 } else { s.out_rate };
        let elapsed_ms = ctx.t_ms.saturating_sub(ctx.running_since_ms) as f64;
        let watermark = Val::Long(ctx.t_ms as i64 - 2_000);
        let pending = || {
            if parts == 0 {
                0.0
            } else {
                ctx.view.lag * owned / f64::from(parts)
            }
        };
        match self.metrics[m] {
            Metric::Busy if spec.busy_time_nan => Val::Double(f64::NAN),
            Metric::Busy => Val::Double(s.busy.round()),
            Metric::Idle => long(s.idle),
            Metric::BackPressured | Metric::SoftBackPressured => long(s.backpressured),
            Metric::HardBackPressured => Val::Long(0),
            Metric::MaxSoftBackPressure => long(if s.backpressured > 0.0 {
                (s.backpressured * 0.2).max(1.0)
            } else {
                0.0
            }),
            Metric::MaxHardBackPressure => Val::Long(0),
            Metric::AccBusy => Val::Double(s.counters.busy_ms.round()),
            Metric::AccIdle => long(s.counters.idle_ms),
            Metric::AccBackPressured => long(s.counters.backpressured_ms),
            Metric::RecIn => long(task_in),
            Metric::RecOut => long(task_out),
            Metric::RecInRate => Val::Double(task_in_rate),
            Metric::RecOutRate => Val::Double(task_out_rate),
            Metric::BytesIn => long(task_in * bytes),
            Metric::BytesOut => long(task_out * bytes),
            Metric::BytesInRate => Val::Double(task_in_rate * bytes),
            Metric::BytesOutRate => Val::Double(task_out_rate * bytes),
            Metric::IsBackPressured => Val::Text(if s.backpressured > 0.0 {
                "true"
            } else {
                "false"
            }),
            Metric::OutPoolUsage => Val::Double(if s.backpressured > 0.0 {
                1.0
            } else {
                (s.busy / 10_000.0).min(0.1)
            }),
            Metric::InPoolUsage => Val::Double(if is_source {
                0.0
            } else {
                (s.busy / 1000.0).min(1.0)
            }),
            Metric::InputWatermark => watermark,
            Metric::InitializationTime => {
                Val::Long(250 + (unit_hash(1, i as u64, 0) * 200.0) as i64)
            }
            Metric::Filler(k) => Val::Long((unit_hash(u64::from(k), i as u64, 7) * 3.0) as i64),
            Metric::Histogram(k) => Val::Double(if k == 1 {
                12.0
            } else {
                f64::from(k % 5) * 0.25
            }),
            Metric::Op(j, om) => {
                let last = j as usize + 1 == spec.operator_scopes.len();
                let (rin, rin_rate) = (s.counters.rec_in, s.in_rate);
                let (rout, rout_rate) = if last {
                    (s.counters.rec_out, s.out_rate)
                } else {
                    (rin, rin_rate)
                };
                match om {
                    OpMetric::RecIn => long(rin),
                    OpMetric::RecOut => long(rout),
                    OpMetric::RecInRate => Val::Double(rin_rate),
                    OpMetric::RecOutRate => Val::Double(rout_rate),
                    OpMetric::BytesIn => long(rin * bytes),
                    OpMetric::BytesOut => long(rout * bytes),
                    OpMetric::BytesInRate => Val::Double(rin_rate * bytes),
                    OpMetric::BytesOutRate => Val::Double(rout_rate * bytes),
                    OpMetric::InputWatermark | OpMetric::OutputWatermark => watermark,
                }
            }
            Metric::PendingRecords => long(pending()),
            Metric::FetchEventTimeLag | Metric::EmitEventTimeLag => {
                let lag_ms = if s.in_rate > 0.0 {
                    pending() / s.in_rate * 1000.0
                } else {
                    0.0
                };
                long(50.0 + lag_ms)
            }
            Metric::SourceIdleTime => long(if s.in_rate > 0.0 { 0.0 } else { elapsed_ms }),
            Metric::RecordsInErrors | Metric::CommitsFailed | Metric::RecordsSendErrors => {
                Val::Long(0)
            }
            Metric::CommitsSucceeded => long((elapsed_ms / 10_000.0).floor()),
            Metric::CurrentOffset(n) | Metric::CommittedOffset(n) => {
                let per_partition = ctx.view.consumed / f64::from(parts.max(1));
                let base = 1_000_000.0 * f64::from(n);
                let behind = if matches!(self.metrics[m], Metric::CommittedOffset(_)) {
                    let rate = ctx.view.true_in_rate / f64::from(parts.max(1));
                    (rate * (elapsed_ms % 10_000.0) / 1000.0).min(per_partition)
                } else {
                    0.0
                };
                long(base + per_partition - behind)
            }
            // Active since the start: the accumulated active time grows, the rest stay 0.
            Metric::SplitWatermark(_, k) => match SPLIT_WATERMARK_METRICS[k as usize] {
                "accumulatedActiveTimeMs" => long(elapsed_ms),
                "activeTimeMsPerSecond" => Val::Long(1000),
                "currentWatermark" => watermark,
                _ => Val::Long(0),
            },
            Metric::RecordsSend => long(s.counters.rec_out),
            Metric::BytesSend => long(s.counters.rec_out * bytes),
            Metric::CurrentSendTime => {
                let util = match spec.write_capacity {
                    Some(w) => (ctx.view.true_in_rate / w).min(0.999),
                    None => 0.05,
                };
                long(20.0 / (1.0 - util))
            }
            Metric::Extra(k) => {
                Val::Double((unit_hash(u64::from(k) + 99, i as u64, 3) * 1000.0).round() / 10.0)
            }
        }
    }
}
