//! Logging and metrics set-up shared by both daemons.
//!
//! Logs go to stderr (stdout carries the `listening on` line and command output) as text or
//! JSON lines; `RUST_LOG` overrides the configured filter. Metrics use the `metrics` facade
//! with a Prometheus recorder whose text the daemon serves on `/metrics`.

use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use serde::{Deserialize, Serialize};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!(
                "unknown log format {other:?} (expected \"text\" or \"json\")"
            )),
        }
    }
}

/// Checks a log filter (`info`, `flink_autoscale_agent=debug,warn`) as [`init_tracing`]
/// will read it, so a bad one is a configuration error instead of a line at start.
pub fn check_log_filter(filter: &str) -> Result<(), String> {
    if filter.trim().is_empty() {
        return Err("must not be empty".to_string());
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .map(|_| ())
        .map_err(|e| {
            format!("{filter:?} is not a log filter such as \"info\" or \"my_crate=debug\": {e}")
        })
}

/// Installs the global tracing subscriber. `filter` is an `EnvFilter` directive such as
/// `info` (checked beforehand with [`check_log_filter`]); `RUST_LOG`, when set, wins.
/// Calling it twice is harmless (the first one stays).
pub fn init_tracing(format: LogFormat, filter: &str) {
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Histogram buckets for latencies in seconds: 0.5 ms to 60 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Why the metrics recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("failed to install the Prometheus recorder: {0}")]
pub struct TelemetryError(String);

static PROMETHEUS: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// Installs the process-wide Prometheus recorder (once) and returns its handle; later calls
/// return the same handle. Metrics ending in `_seconds` are exported as histograms.
pub fn install_prometheus() -> Result<PrometheusHandle, TelemetryError> {
    install_prometheus_expiring_gauges(None)
}

/// Like [`install_prometheus`], but gauges not set for `expiry` leave the output, so the
/// per-job series of a job that is gone do not linger. Counters and histograms never expire.
/// Only the first installation's `expiry` counts.
pub fn install_prometheus_expiring_gauges(
    expiry: Option<Duration>,
) -> Result<PrometheusHandle, TelemetryError> {
    let mut slot = PROMETHEUS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(handle) = slot.as_ref() {
        return Ok(handle.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_string()), SECONDS_BUCKETS)
        .map_err(|e| TelemetryError(e.to_string()))?
        .idle_timeout(MetricKindMask::GAUGE, expiry)
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|_| TelemetryError("another metrics recorder is already installed".into()))?;
    *slot = Some(handle.clone());
    Ok(handle)
}

/// Renders the Prometheus text exposition, first running the recorder's upkeep so that
/// histogram memory stays bounded.
pub fn render_prometheus(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    handle.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters_are_checked_as_they_will_be_read() {
        for good in ["info", "warn,flink_autoscale_agent=debug", "off"] {
            assert_eq!(check_log_filter(good), Ok(()), "{good}");
        }
        for bad in ["nonsense==", "", "  ", "a=b=c", "info,[=x"] {
            assert!(check_log_filter(bad).is_err(), "{bad:?}");
        }
    }
}
