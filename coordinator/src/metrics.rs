//! Metric names (Prometheus conventions: base units, `_total` counters).

/// Decided proposals (replays not counted), by `verdict` and first refusal `reason` (`none`
/// when approved).
pub const PROPOSALS: &str = "flink_autoscale_coordinator_proposals_total";
/// Every refusal reason, by `gate` and `code`.
pub const REFUSAL_REASONS: &str = "flink_autoscale_coordinator_refusal_reasons_total";
/// HTTP request latency, by `route`, `method` and `status`.
pub const REQUEST_DURATION: &str = "flink_autoscale_coordinator_http_request_duration_seconds";
/// Store operation latency, by `operation`.
pub const STORE_DURATION: &str = "flink_autoscale_coordinator_store_operation_duration_seconds";
/// Proposals decided per transaction.
pub const BATCH_SIZE: &str = "flink_autoscale_coordinator_store_batch_proposals";
/// Requests refused for a missing or wrong token, by `reason`.
pub const AUTH_FAILURES: &str = "flink_autoscale_coordinator_auth_failures_total";

/// Registers descriptions so `/metrics` documents each series.
pub fn describe() {
    metrics::describe_counter!(
        PROPOSALS,
        "Proposals decided, by verdict and first refusal reason"
    );
    metrics::describe_counter!(REFUSAL_REASONS, "Refusal reasons, by gate and code");
    metrics::describe_histogram!(
        REQUEST_DURATION,
        metrics::Unit::Seconds,
        "HTTP request latency"
    );
    metrics::describe_histogram!(
        STORE_DURATION,
        metrics::Unit::Seconds,
        "Store operation latency"
    );
    metrics::describe_histogram!(BATCH_SIZE, "Proposals decided per store transaction");
    metrics::describe_counter!(
        AUTH_FAILURES,
        "Requests refused for a missing or wrong token"
    );
}
