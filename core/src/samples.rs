//! The sample format shared by the collector (which produces samples) and the
//! decision engine's `evaluate` stage (which consumes them). It is also the JSON contract of
//! `flink-autoscale-agent evaluate`, so a window captured from a live job can be replayed.
//!
//! Floats that may be NaN or infinite use [`FlinkF64`], which reads and writes them as the
//! strings `"NaN"`, `"Infinity"` and `"-Infinity"`, as Flink does.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An `f64` that round-trips NaN and infinities through JSON the way Flink writes them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FlinkF64(pub f64);

impl From<f64> for FlinkF64 {
    fn from(v: f64) -> Self {
        FlinkF64(v)
    }
}

impl From<FlinkF64> for f64 {
    fn from(v: FlinkF64) -> Self {
        v.0
    }
}

impl Serialize for FlinkF64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if v == f64::INFINITY {
            s.serialize_str("Infinity")
        } else if v == f64::NEG_INFINITY {
            s.serialize_str("-Infinity")
        } else {
            s.serialize_f64(v)
        }
    }
}

impl<'de> Deserialize<'de> for FlinkF64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = FlinkF64;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"a number or one of "NaN", "Infinity", "-Infinity""#)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<FlinkF64, E> {
                Ok(FlinkF64(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FlinkF64, E> {
                Ok(FlinkF64(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FlinkF64, E> {
                Ok(FlinkF64(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FlinkF64, E> {
                parse_flink_number(v)
                    .map(FlinkF64)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses a Flink metric value string: a decimal number, `NaN`, `Infinity` or `-Infinity`.
pub fn parse_flink_number(s: &str) -> Option<f64> {
    match s.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        t => t.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// Server-side aggregates of one metric over a vertex's subtasks (`agg=min,max,avg,sum`).
/// Any subset may be present.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg: Option<FlinkF64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<FlinkF64>,
}

/// One vertex's values in one sample. Every field is optional: missing means NaN, except a
/// source's missing `pending_records`, which means lag 0 (as upstream).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VertexSample {
    /// Busy time per second across subtasks (ms/s, 0..=1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_time_ms_per_second: Option<Aggregates>,
    /// Average backpressured time per second across subtasks (ms/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backpressured_time_ms_per_second: Option<FlinkF64>,
    /// Average idle time per second across subtasks (ms/s). Reporting only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_time_ms_per_second: Option<FlinkF64>,
    /// Records-in counter, summed over subtasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records_in: Option<FlinkF64>,
    /// Records-out counter, summed over subtasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records_out: Option<FlinkF64>,
    /// Records-in rate, summed over subtasks; for sources, the source operator's own rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records_in_per_second: Option<FlinkF64>,
    /// Records-out rate, summed over subtasks. Reporting only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_records_out_per_second: Option<FlinkF64>,
    /// Sources: the source's `pendingRecords`, summed over subtasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_records: Option<FlinkF64>,
    /// Accumulated busy time (ms), summed over subtasks, when Flink reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_busy_time_ms: Option<FlinkF64>,
}

/// One poll of one job, stamped with the agent's clock.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    pub time_ms: u64,
    pub vertices: BTreeMap<String, VertexSample>,
}

/// An input edge of a vertex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub id: String,
    pub ship_strategy: String,
}

/// A vertex of the job graph, as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VertexSpec {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub parallelism: u32,
    pub max_parallelism: u32,
    /// Sources: how many partitions or splits it reads, so how many subtasks it can use;
    /// 0 = unknown.
    #[serde(default)]
    pub source_partitions: u32,
    /// `[]` for sources.
    #[serde(default)]
    pub inputs: Vec<Input>,
    /// Subtasks in state FINISHED (a bounded source's subtask that got no split, or one fed
    /// only by finished subtasks); they never report metrics again. 0 when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub finished_subtasks: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl VertexSpec {
    pub fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Every subtask has FINISHED: the vertex does no work any more.
    pub fn is_finished(&self) -> bool {
        self.finished_subtasks > 0 && self.finished_subtasks >= self.parallelism
    }

    /// Subtasks that still run (and report metrics).
    pub fn running_subtasks(&self) -> u32 {
        self.parallelism.saturating_sub(self.finished_subtasks)
    }
}
