//! flink-autoscale agent: a sidecar that watches one Flink JobManager, decides with Flink
//! Autoscaler semantics, asks the coordinator, and rescales approved jobs.

pub mod window;
pub mod engine;
pub mod commands;
pub mod config;
pub mod flink;
pub mod telemetry;
pub mod collector;
pub mod daemon;
pub mod http;
pub mod control;
pub mod actuation;
pub mod coordinator_client;
pub mod state_store;
