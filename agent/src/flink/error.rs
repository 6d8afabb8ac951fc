//! Everything that can go wrong talking to a JobManager, classified so that each case is
//! counted under a stable `kind` label and logged once.

use std::time::Duration;

/// A failed JobManager request. The display text is the one log line an operator sees.
#[derive(Debug, thiserror::Error)]
pub enum FlinkError {
    #[error("{endpoint}: no response within {timeout:?}")]
    Timeout {
        endpoint: &'static str,
        timeout: Duration,
    },
    #[error("{endpoint}: cannot connect to the JobManager: {detail}")]
    Connect {
        endpoint: &'static str,
        detail: String,
    },
    #[error("{endpoint}: transport error: {detail}")]
    Transport {
        endpoint: &'static str,
        detail: String,
    },
    #[error("{endpoint}: HTTP {status}: {detail}")]
    Status {
        endpoint: &'static str,
        status: u16,
        detail: String,
    },
    #[error("{endpoint}: HTTP {status} redirect to {location:?} (redirects are not followed)")]
    Redirect {
        endpoint: &'static str,
        status: u16,
        location: String,
    },
    #[error("{endpoint}: response body exceeds the {limit}-byte cap")]
    BodyTooLarge {
        endpoint: &'static str,
        limit: usize,
    },
    #[error("{endpoint}: response body ended early: {detail}")]
    Truncated {
        endpoint: &'static str,
        detail: String,
    },
    #[error("{endpoint}: got an HTML page instead of JSON (starts with {excerpt:?})")]
    Html {
        endpoint: &'static str,
        excerpt: String,
    },
    #[error("{endpoint}: malformed JSON: {detail}")]
    MalformedJson {
        endpoint: &'static str,
        detail: String,
    },
    #[error("{endpoint}: unexpected JSON at `{path}`: {detail}")]
    WrongShape {
        endpoint: &'static str,
        path: String,
        detail: String,
    },
    #[error("{endpoint}: `{path}` is not a Flink id (32 hex characters): {id}")]
    InvalidId {
        endpoint: &'static str,
        path: String,
        /// The refused id, escaped and cut for the log.
        id: String,
    },
    #[error("invalid JobManager URL {url:?}: {detail}")]
    InvalidUrl { url: String, detail: String },
}

impl FlinkError {
    /// A stable, low-cardinality label for the `errors_total{kind}` counter.
    pub fn kind(&self) -> &'static str {
        match self {
            FlinkError::Timeout { .. } => "timeout",
            FlinkError::Connect { .. } => "connect",
            FlinkError::Transport { .. } => "transport",
            FlinkError::Status { status, .. } if *status >= 500 => "http_5xx",
            FlinkError::Status { .. } => "http_4xx",
            FlinkError::Redirect { .. } => "redirect",
            FlinkError::BodyTooLarge { .. } => "body_too_large",
            FlinkError::Truncated { .. } => "truncated",
            FlinkError::Html { .. } => "html",
            FlinkError::MalformedJson { .. } => "malformed_json",
            FlinkError::WrongShape { .. } => "wrong_shape",
            FlinkError::InvalidId { .. } => "invalid_id",
            FlinkError::InvalidUrl { .. } => "invalid_url",
        }
    }

    /// The HTTP status, when the JobManager answered with a non-success one.
    pub fn status(&self) -> Option<u16> {
        match self {
            FlinkError::Status { status, .. } | FlinkError::Redirect { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

pub use flink_autoscale_shared::http_client::error_chain;
