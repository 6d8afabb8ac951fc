//! The client side of the Flink JobManager REST API: one HTTP client with per-request
//! timeouts, a response-size cap and bounded concurrency, and the response types with
//! Flink's number quirks (numbers as strings, `"NaN"`, `"Infinity"`, `*-complete` flags).

pub mod client;
pub mod error;
pub mod features;
pub mod ids;
pub mod lenient;
pub mod model;
pub mod scheduler;
pub mod tls;

pub use client::{ClientOptions, Endpoint, FlinkClient};
pub use error::FlinkError;
