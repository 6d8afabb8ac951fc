//! flink-autoscale agent: a sidecar that watches one Flink JobManager, decides with Flink
//! Autoscaler semantics, asks the coordinator, and rescales approved jobs.

pub mod actuation;
pub mod collector;
pub mod commands;
pub mod config;
pub mod control;
pub mod daemon;
pub mod flink;
pub mod gatekeeper;
pub mod http;
pub mod state_store;
pub mod telemetry;
