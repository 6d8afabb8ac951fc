//! Runtime plumbing the daemons share: HTTP serving, an HTTP client, telemetry, lifecycle,
//! the configuration dialect (file, environment, flags) and bounded reads of the files
//! operators name. The pure shared part (protocol, gates, engine) is `flink-autoscale-core`.

pub mod config_layers;
pub mod files;
pub mod http;
pub mod http_client;
pub mod lifecycle;
pub mod telemetry;
