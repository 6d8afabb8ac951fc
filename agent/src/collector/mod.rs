//! The metric collector: per job, discover the topology once per incarnation, resolve the
//! exact metric names once, then ask for one filtered, server-side-aggregated request per
//! vertex (one slice of subtasks per vertex for large jobs) and keep the results in a bounded
//! window of [`crate::window::Sample`]s.

pub mod history;
pub mod job;
pub mod names;
pub mod query;
pub mod slices;
pub mod usability;

pub use history::SampleWindow;
pub use job::{CollectorSettings, JobCollector, JobSnapshot, PollReport};
pub use names::ResolvedNames;
pub use usability::Unusable;
