//! flink-autoscale coordinator: approves or refuses every rescale proposal behind the
//! region-failover, disk-capacity, standby and rate-limit gates, and keeps a durable audit.
//!
//! The gates themselves are pure functions in `flink_autoscale_core::gates`; this crate is
//! the I/O around them: configuration, HTTP API, authentication and the store.

pub mod api;
pub mod auth;
pub mod config;
pub mod console;
pub mod metrics;
pub mod notify;
pub mod route;
pub mod server;
pub mod store;
pub mod tls;
