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

/// Webhook deliveries, by `webhook`, `event` and `result` (`queued`, `delivered`, `retried`
/// (an attempt failed, another is scheduled), `given_up` (after `max_attempts`), `dropped`
/// (queue over capacity, or a webhook no longer configured)).
pub const WEBHOOK_DELIVERIES: &str = "flink_autoscale_coordinator_webhook_deliveries_total";
/// Deliveries waiting in the store.
pub const WEBHOOK_QUEUE: &str = "flink_autoscale_coordinator_webhook_queue";
/// Proposals waiting for a person's approval.
pub const PENDING_PROPOSALS: &str = "flink_autoscale_coordinator_pending_proposals";
/// Admin actions, by `action`.
pub const ADMIN_ACTIONS: &str = "flink_autoscale_coordinator_admin_actions_total";

/// Counts one webhook delivery result.
pub fn webhook_delivery(webhook: &str, event: &str, result: &'static str) {
    metrics::counter!(
        WEBHOOK_DELIVERIES,
        "webhook" => webhook.to_string(),
        "event" => event.to_string(),
        "result" => result
    )
    .increment(1);
}

/// Open client connections.
pub const OPEN_CONNECTIONS: &str = "flink_autoscale_coordinator_http_connections";
/// Connections refused because `max_connections` were open.
pub const REFUSED_CONNECTIONS: &str = "flink_autoscale_coordinator_http_connections_refused_total";

/// Registers descriptions so `/metrics` documents each series.
pub fn describe() {
    metrics::describe_gauge!(OPEN_CONNECTIONS, "Open client connections");
    metrics::describe_counter!(
        REFUSED_CONNECTIONS,
        "Connections refused with 503 because max_connections were open"
    );
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
    metrics::describe_counter!(
        WEBHOOK_DELIVERIES,
        "Webhook deliveries, by webhook, event and result"
    );
    metrics::describe_gauge!(WEBHOOK_QUEUE, "Webhook deliveries waiting in the store");
    metrics::describe_gauge!(
        PENDING_PROPOSALS,
        "Proposals waiting for a person's approval"
    );
    metrics::describe_counter!(ADMIN_ACTIONS, "Admin actions, by action");
}
