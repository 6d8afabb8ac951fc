//! flink-autoscale agent: a sidecar that watches one Flink JobManager, decides with Flink
//! Autoscaler semantics, asks the coordinator, and rescales approved jobs.

pub mod window;
pub mod commands;
