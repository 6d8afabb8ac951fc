//! A small HTTP/1.1 client for JSON writes (coordinator calls, the adaptive scheduler's PUT):
//! one deadline per request, a capped response body, and errors that say whether the request
//! can have reached the server, which decides between "retry" and "find out what happened".

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Response bodies larger than this are refused (verdicts and Flink answers are small).
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Longest excerpt of an error body kept for a log line or an outcome.
const EXCERPT_CHARS: usize = 300;

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpError {
    /// No connection: the request certainly did not reach the server.
    #[error("cannot connect to {url}: {detail}")]
    Connect { url: String, detail: String },
    /// Sent (perhaps), but no complete answer in time: the server may have acted on it.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// The connection broke mid-exchange: the server may have acted on it.
    #[error("request to {url} failed: {detail}")]
    Transport { url: String, detail: String },
    #[error("invalid URL {url}: {detail}")]
    InvalidUrl { url: String, detail: String },
}

/// A complete answer.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Bytes,
}

impl HttpAnswer {
    /// A short, printable excerpt of the body for logs and outcome texts.
    pub fn excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
        if text.chars().count() > EXCERPT_CHARS {
            out.push('…');
        }
        out
    }
}

/// Cheap to clone; connections are pooled.
#[derive(Clone)]
pub struct JsonClient {
    http: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl JsonClient {
    pub fn new(timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        JsonClient {
            http: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(connector),
            timeout,
        }
    }

    /// Sends `body` as JSON with `method` to `url`, with an optional bearer token.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        bearer: Option<&str>,
        body: Vec<u8>,
    ) -> Result<HttpAnswer, HttpError> {
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| HttpError::InvalidUrl {
                url: url.to_string(),
                detail: e.to_string(),
            })?;
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json");
        if let Some(token) = bearer {
            builder = builder.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let req =
            builder
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| HttpError::InvalidUrl {
                    url: url.to_string(),
                    detail: e.to_string(),
                })?;
        match tokio::time::timeout(self.timeout, self.exchange(req, url)).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout {
                url: url.to_string(),
                timeout: self.timeout,
            }),
        }
    }

    async fn exchange(
        &self,
        req: Request<Full<Bytes>>,
        url: &str,
    ) -> Result<HttpAnswer, HttpError> {
        let resp = self.http.request(req).await.map_err(|e| {
            let detail = crate::flink::error::error_chain(&e);
            if e.is_connect() {
                HttpError::Connect {
                    url: url.to_string(),
                    detail,
                }
            } else {
                HttpError::Transport {
                    url: url.to_string(),
                    detail,
                }
            }
        })?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| HttpError::Transport {
                url: url.to_string(),
                detail: format!("reading the answer: {e}"),
            })?
            .to_bytes();
        Ok(HttpAnswer { status, body })
    }
}
