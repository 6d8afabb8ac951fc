//! The metric collector: per job, discover the topology once per incarnation, resolve the
//! exact metric names once, then ask for one filtered, server-side-aggregated request per
//! vertex (one slice of subtasks per vertex for large jobs) and keep the results in a bounded
//! window of [`flink_autoscale_core::samples::Sample`]s.
//!
//! One concern per module: [`job`] orders a poll and holds a job's state; [`incarnation`]
//! tells restarts and rescales apart; [`name_cache`] and [`names`] keep and resolve metric
//! names; [`source`] fetches the numbers, per vertex or with Flink's proposed batch endpoints
//! ([`query`] builds the requests, [`slices`] merges sliced reads); [`usability`] rules on the data; [`gauges`] publishes it; [`window`] is
//! the sample window; [`window_override`] reads a job's own window length.

pub mod gauges;
pub mod incarnation;
pub mod job;
pub mod name_cache;
pub mod names;
pub mod query;
pub mod settings;
pub mod slices;
pub mod snapshot;
pub mod source;
pub mod usability;
pub mod window;
pub mod window_override;

pub use job::JobCollector;
pub use names::ResolvedNames;
pub use settings::CollectorSettings;
pub use snapshot::{JobSnapshot, PollReport};
pub use source::SourceKind;
pub use usability::Unusable;
pub use window::SampleWindow;
