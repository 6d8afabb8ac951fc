//! The HTTP client the agent uses for the coordinator and the JobManager's writes; it lives
//! in `flink-autoscale-shared`, which the coordinator's webhooks use too.

pub use flink_autoscale_shared::http_client::*;
