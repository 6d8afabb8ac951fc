//! The agent's one HTTP server: `/metrics`, `/healthz`, `/readyz`, and Flink-compatible reads
//! served from the agent's cache (`GET /jobs/overview` and
//! `GET /jobs/:jid/vertices/:vid/subtasks/metrics?get=..&agg=..`), so dashboards can read the
//! few numbers that matter without adding load on the JobManager. Nothing here calls Flink.

pub mod compat;

use std::sync::Arc;

use bytes::Bytes;
use flink_autoscale_shared::http::{self as shttp, Request, Response};
use hyper::{Method, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::daemon::StatusBoard;

/// What the handlers read.
pub struct HttpContext {
    pub state: Arc<StatusBoard>,
    pub prometheus: PrometheusHandle,
}

/// Routes one request.
pub async fn handle(req: Request, ctx: Arc<HttpContext>) -> Response {
    let path = req.uri().path();
    // Flink accepts an optional REST API version prefix.
    let path = path
        .strip_prefix("/v1")
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    let query = req.uri().query().unwrap_or("");
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return flink_error(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.");
    }
    match path {
        "/metrics" => shttp::with_type(
            StatusCode::OK,
            Bytes::from(flink_autoscale_shared::telemetry::render_prometheus(
                &ctx.prometheus,
            )),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        "/healthz" => shttp::text(StatusCode::OK, "ok\n"),
        "/readyz" if !ctx.state.is_ready() => shttp::text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the first poll has not been attempted yet\n",
        ),
        // Behind schedule is said, not failed: the agent shares the JobManager's pod, and a
        // 503 here would take the JobManager out of its Service. The keep-up gauges alert.
        "/readyz" => match ctx.state.keeping_up() {
            Ok(()) => shttp::text(StatusCode::OK, "ready\n"),
            Err(reason) => shttp::text(
                StatusCode::OK,
                &format!("ready, not keeping up: {reason}\n"),
            ),
        },
        "/jobs/overview" => match ctx.state.overview() {
            Some(body) => shttp::with_type(StatusCode::OK, body, "application/json; charset=UTF-8"),
            None => flink_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "The agent has not read the job overview yet.",
            ),
        },
        _ => match compat::parse_metrics_path(path) {
            Some((job_id, vertex_id)) => {
                compat::subtask_metrics(&ctx.state, job_id, vertex_id, query)
            }
            None => flink_error(StatusCode::NOT_FOUND, "Not found."),
        },
    }
}

/// Flink's error body: `{"errors":["..."]}`.
pub fn flink_error(status: StatusCode, message: &str) -> Response {
    shttp::json(status, &serde_json::json!({ "errors": [message] }))
}
