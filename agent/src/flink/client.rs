//! The one HTTP client the agent uses against its JobManager (hyper-util's pooled legacy
//! client). Every request has a deadline, a response-size cap, and holds one permit of a
//! semaphore shared by all jobs, so the agent never has more than a configured number of
//! requests in flight against the JobManager. Redirects are refused, not followed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;

use super::error::{error_chain, FlinkError};
use super::features::Features;
use super::ids::{is_flink_id, path_segment, printable};
use super::model::{
    AggregatedMetric, Checkpoints, ConfigEntry, JobDetails, JobsOverview, MetricName, VertexMetrics,
};
use crate::telemetry;

/// The endpoint families the agent calls; the label keeps metric cardinality bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    JobsOverview,
    JobDetails,
    MetricNames,
    MetricValues,
    BatchMetricNames,
    BatchMetricValues,
    JobConfig,
    Checkpoints,
    JobManagerConfig,
    RescaleHistory,
    RescaleDetails,
}

impl Endpoint {
    /// The templated route, used as the `endpoint` label.
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::JobsOverview => "/jobs/overview",
            Endpoint::JobDetails => "/jobs/:jobid",
            Endpoint::MetricNames => "/jobs/:jobid/vertices/:vertexid/subtasks/metrics (names)",
            Endpoint::MetricValues => "/jobs/:jobid/vertices/:vertexid/subtasks/metrics",
            Endpoint::BatchMetricNames => "/jobs/:jobid/vertices/subtasks/metrics/names",
            Endpoint::BatchMetricValues => "/jobs/:jobid/vertices/subtasks/metrics/values",
            Endpoint::JobConfig => "/jobs/:jobid/jobmanager/config",
            Endpoint::Checkpoints => "/jobs/:jobid/checkpoints",
            Endpoint::JobManagerConfig => "/jobmanager/config",
            Endpoint::RescaleHistory => "/jobs/:jobid/rescales/history",
            Endpoint::RescaleDetails => "/jobs/:jobid/rescales/details/:rescaleuuid",
        }
    }
}

/// How the client talks to the JobManager.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `http://host:port[/prefix]`.
    pub base_url: String,
    /// Deadline for one request, from sending it to the last byte of the body.
    pub request_timeout: Duration,
    /// Deadline for establishing a TCP connection.
    pub connect_timeout: Duration,
    /// Responses larger than this are refused.
    pub max_body_bytes: usize,
    /// Requests in flight against the JobManager, over all jobs.
    pub max_concurrent_requests: usize,
    /// For an `https://` base URL ([`super::tls::client_config`]); without it https
    /// handshakes fail (no trusted roots).
    pub tls: Option<rustls::ClientConfig>,
    /// Whether `tls` presents a client certificate (for the hint on a failed handshake).
    pub has_client_cert: bool,
}

/// Requests and response bytes this client has made, for `collect` and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub requests: u64,
    pub response_bytes: u64,
}

/// A cheap-to-clone handle on the JobManager client.
#[derive(Clone)]
pub struct FlinkClient {
    inner: Arc<Inner>,
}

struct Inner {
    base: String,
    http: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    opts: ClientOptions,
    permits: Semaphore,
    requests: AtomicU64,
    response_bytes: AtomicU64,
    features: Features,
    /// When jobs with invalid ids were last logged (at most one line per minute).
    invalid_ids_logged: Mutex<Option<Instant>>,
}

/// Longest error-body excerpt kept for a log line.
const ERROR_EXCERPT_CHARS: usize = 200;

impl FlinkClient {
    /// Builds a client; fails only on an unusable base URL.
    pub fn new(opts: ClientOptions) -> Result<Self, FlinkError> {
        let base = normalize_base_url(&opts.base_url)?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(opts.connect_timeout));
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let tls = match &opts.tls {
            Some(tls) => tls.clone(),
            None => crate::control::http_client::client_tls(rustls::RootCertStore::empty(), None)
                .expect("ring's default protocol versions are valid"),
        };
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(opts.max_concurrent_requests.max(1))
            .build(https);
        Ok(FlinkClient {
            inner: Arc::new(Inner {
                base,
                http,
                permits: Semaphore::new(opts.max_concurrent_requests.max(1)),
                opts,
                requests: AtomicU64::new(0),
                response_bytes: AtomicU64::new(0),
                features: Features::default(),
                invalid_ids_logged: Mutex::new(None),
            }),
        })
    }

    /// The normalized base URL (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// What has been learned about this JobManager's API (the batch metric endpoints).
    pub fn features(&self) -> &Features {
        &self.inner.features
    }

    /// Totals since the client was built.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            requests: self.inner.requests.load(Ordering::Relaxed),
            response_bytes: self.inner.response_bytes.load(Ordering::Relaxed),
        }
    }

    /// `GET /jobs/overview`: the parsed jobs and the raw body (served again by the agent).
    /// Jobs whose id is not a Flink id are left out, each counted as an `invalid_id` error,
    /// with at most one log line a minute: they are never polled, and never stall the rest.
    pub async fn jobs_overview(&self) -> Result<(JobsOverview, Bytes), FlinkError> {
        let body = self.get(Endpoint::JobsOverview, "/jobs/overview").await?;
        let mut parsed: JobsOverview = parse_json(Endpoint::JobsOverview, &body)?;
        let before = parsed.jobs.len();
        let mut example = None;
        parsed.jobs.retain(|j| {
            let valid = is_flink_id(&j.jid);
            if !valid {
                telemetry::record_error("invalid_id");
                example.get_or_insert_with(|| printable(&j.jid));
            }
            valid
        });
        if let Some(example) = example {
            self.log_invalid_jobs(before - parsed.jobs.len(), &example);
        }
        Ok((parsed, body))
    }

    fn log_invalid_jobs(&self, skipped: usize, example: &str) {
        const EVERY: Duration = Duration::from_secs(60);
        let mut last = self
            .inner
            .invalid_ids_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() >= EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(skipped, example = %example, "skipping jobs whose ids are not Flink ids (32 hex characters); logged at most once a minute");
        }
    }

    /// `GET /jobs/:jobid`. Every vertex id in it (vertices, plan nodes, their inputs) must
    /// be a Flink id: they go into URLs and metric labels.
    pub async fn job_details(&self, job_id: &str) -> Result<JobDetails, FlinkError> {
        let path = format!("/jobs/{}", path_segment(job_id));
        let body = self.get(Endpoint::JobDetails, &path).await?;
        let details: JobDetails = parse_json(Endpoint::JobDetails, &body)?;
        check_vertex_ids(&details)?;
        Ok(details)
    }

    /// The union of metric names over a vertex's subtasks (the expensive listing).
    pub async fn metric_names(
        &self,
        job_id: &str,
        vertex_id: &str,
    ) -> Result<Vec<MetricName>, FlinkError> {
        let path = format!(
            "/jobs/{}/vertices/{}/subtasks/metrics",
            path_segment(job_id),
            path_segment(vertex_id)
        );
        let body = self.get(Endpoint::MetricNames, &path).await?;
        parse_json(Endpoint::MetricNames, &body)
    }

    /// One filtered, aggregated value query; `query` is the already-encoded query string.
    pub async fn metric_values(
        &self,
        job_id: &str,
        vertex_id: &str,
        query: &str,
    ) -> Result<Vec<AggregatedMetric>, FlinkError> {
        let path = format!(
            "/jobs/{}/vertices/{}/subtasks/metrics?{query}",
            path_segment(job_id),
            path_segment(vertex_id)
        );
        let body = self.get(Endpoint::MetricValues, &path).await?;
        parse_json(Endpoint::MetricValues, &body)
    }

    /// Names per vertex from the batch endpoint (FLINK-39617, not in released Flink);
    /// `query` is the already-encoded `vertices=..&regex=..`.
    pub async fn batch_metric_names(
        &self,
        job_id: &str,
        query: &str,
    ) -> Result<Vec<VertexMetrics>, FlinkError> {
        let path = format!(
            "/jobs/{}/vertices/subtasks/metrics/names?{query}",
            path_segment(job_id)
        );
        let body = self.get(Endpoint::BatchMetricNames, &path).await?;
        parse_json(Endpoint::BatchMetricNames, &body)
    }

    /// Aggregated values per vertex from the batch endpoint; `query` is the already-encoded
    /// `vertices=..&get=..&agg=..`.
    pub async fn batch_metric_values(
        &self,
        job_id: &str,
        query: &str,
    ) -> Result<Vec<VertexMetrics>, FlinkError> {
        let path = format!(
            "/jobs/{}/vertices/subtasks/metrics/values?{query}",
            path_segment(job_id)
        );
        let body = self.get(Endpoint::BatchMetricValues, &path).await?;
        parse_json(Endpoint::BatchMetricValues, &body)
    }

    /// The job's configuration as key/value pairs.
    pub async fn job_config(&self, job_id: &str) -> Result<Vec<ConfigEntry>, FlinkError> {
        let path = format!("/jobs/{}/jobmanager/config", path_segment(job_id));
        let body = self.get(Endpoint::JobConfig, &path).await?;
        parse_json(Endpoint::JobConfig, &body)
    }

    /// Checkpoint statistics of a job.
    pub async fn checkpoints(&self, job_id: &str) -> Result<Checkpoints, FlinkError> {
        let path = format!("/jobs/{}/checkpoints", path_segment(job_id));
        let body = self.get(Endpoint::Checkpoints, &path).await?;
        parse_json(Endpoint::Checkpoints, &body)
    }

    /// The cluster configuration as key/value pairs.
    pub async fn jobmanager_config(&self) -> Result<Vec<ConfigEntry>, FlinkError> {
        let body = self
            .get(Endpoint::JobManagerConfig, "/jobmanager/config")
            .await?;
        parse_json(Endpoint::JobManagerConfig, &body)
    }

    /// Length of the request line the client sends for `path_and_query`.
    pub fn request_line_len(&self, path_and_query: &str) -> usize {
        // "GET " + path + " HTTP/1.1"; the base prefix path counts too.
        let prefix = self
            .inner
            .base
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| rest.len() - i))
            .unwrap_or(0);
        4 + prefix + path_and_query.len() + 9
    }

    /// One GET, with the permit, the deadline, the size cap and the accounting.
    pub async fn get(&self, endpoint: Endpoint, path_and_query: &str) -> Result<Bytes, FlinkError> {
        let inner = &*self.inner;
        let _permit = inner
            .permits
            .acquire()
            .await
            .map_err(|_| FlinkError::Transport {
                endpoint: endpoint.label(),
                detail: "client is shut down".into(),
            })?;
        let url = format!("{}{}", inner.base, path_and_query);
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| FlinkError::InvalidUrl {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let timeout = inner.opts.request_timeout;
        let result = match tokio::time::timeout(timeout, self.exchange(endpoint, uri)).await {
            Ok(result) => result,
            Err(_) => Err(FlinkError::Timeout {
                endpoint: endpoint.label(),
                timeout,
            }),
        };
        inner.requests.fetch_add(1, Ordering::Relaxed);
        match &result {
            Ok(body) => {
                inner
                    .response_bytes
                    .fetch_add(body.len() as u64, Ordering::Relaxed);
                telemetry::record_jobmanager_request(endpoint.label(), "200", body.len());
            }
            Err(err) => {
                if matches!(
                    err,
                    FlinkError::Connect { .. } | FlinkError::Transport { .. }
                ) {
                    // Down or restarting: it may come back with other features.
                    inner.features.connection_lost();
                }
                let status = err.status().map(|s| s.to_string());
                telemetry::record_jobmanager_request(
                    endpoint.label(),
                    status.as_deref().unwrap_or(err.kind()),
                    0,
                );
            }
        }
        result
    }

    async fn exchange(&self, endpoint: Endpoint, uri: Uri) -> Result<Bytes, FlinkError> {
        let label = endpoint.label();
        let req = Request::get(uri)
            .header(ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| FlinkError::Transport {
                endpoint: label,
                detail: e.to_string(),
            })?;
        let resp = self.inner.http.request(req).await.map_err(|e| {
            let mut detail = error_chain(&e);
            if self.inner.base.starts_with("https://") {
                if let Some(hint) =
                    super::tls::handshake_hint(&detail, self.inner.opts.has_client_cert)
                {
                    detail = format!("{detail} ({hint})");
                }
            }
            if e.is_connect() {
                FlinkError::Connect {
                    endpoint: label,
                    detail,
                }
            } else if closed_mid_message(&e) {
                FlinkError::Truncated {
                    endpoint: label,
                    detail,
                }
            } else {
                FlinkError::Transport {
                    endpoint: label,
                    detail,
                }
            }
        })?;
        let status = resp.status();
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header(CONTENT_TYPE).unwrap_or_default();
        let content_length = header(CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
        if status.is_redirection() {
            return Err(FlinkError::Redirect {
                endpoint: label,
                status: status.as_u16(),
                location: header(LOCATION).unwrap_or_default(),
            });
        }
        let limit = self.inner.opts.max_body_bytes;
        if content_length.is_some_and(|n| n > limit as u64) {
            return Err(FlinkError::BodyTooLarge {
                endpoint: label,
                limit,
            });
        }
        let body = match Limited::new(resp.into_body(), limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) if err.is::<http_body_util::LengthLimitError>() => {
                return Err(FlinkError::BodyTooLarge {
                    endpoint: label,
                    limit,
                });
            }
            Err(err) => {
                return Err(FlinkError::Truncated {
                    endpoint: label,
                    detail: err.to_string(),
                });
            }
        };
        if !status.is_success() {
            return Err(FlinkError::Status {
                endpoint: label,
                status: status.as_u16(),
                detail: error_detail(&body),
            });
        }
        if content_type.starts_with("text/html") {
            return Err(FlinkError::Html {
                endpoint: label,
                excerpt: excerpt(&body),
            });
        }
        Ok(body)
    }
}

/// The first id of `details` that is not a Flink id, as an error naming where it is.
fn check_vertex_ids(details: &JobDetails) -> Result<(), FlinkError> {
    let vertices = details
        .vertices
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("vertices[{i}].id"), &v.id));
    let nodes = details.plan.iter().flat_map(|p| p.nodes.iter().enumerate());
    let plan = nodes.flat_map(|(i, n)| {
        std::iter::once((format!("plan.nodes[{i}].id"), &n.id)).chain(
            n.inputs
                .iter()
                .flatten()
                .enumerate()
                .map(move |(k, input)| (format!("plan.nodes[{i}].inputs[{k}].id"), &input.id)),
        )
    });
    match vertices.chain(plan).find(|(_, id)| !is_flink_id(id)) {
        None => Ok(()),
        Some((path, id)) => Err(FlinkError::InvalidId {
            endpoint: Endpoint::JobDetails.label(),
            path,
            id: printable(id),
        }),
    }
}

/// Parses a JSON body, classifying failures: HTML pages, truncation (EOF), syntax errors,
/// and shape errors with the JSON path of the offending field.
pub fn parse_json<T: DeserializeOwned>(endpoint: Endpoint, body: &[u8]) -> Result<T, FlinkError> {
    let label = endpoint.label();
    let first = body.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        None => {
            return Err(FlinkError::MalformedJson {
                endpoint: label,
                detail: "empty body".into(),
            });
        }
        Some(b'<') => {
            return Err(FlinkError::Html {
                endpoint: label,
                excerpt: excerpt(body),
            })
        }
        Some(_) => {}
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        classify_json_error(label, path, inner)
    })?;
    de.end()
        .map_err(|e| classify_json_error(label, String::new(), e))?;
    Ok(value)
}

fn classify_json_error(label: &'static str, path: String, err: serde_json::Error) -> FlinkError {
    use serde_json::error::Category;
    match err.classify() {
        // The body arrived whole (a cut-off transfer fails earlier, while reading), so a
        // document that ends early is malformed, not truncated.
        Category::Eof | Category::Syntax | Category::Io => FlinkError::MalformedJson {
            endpoint: label,
            detail: err.to_string(),
        },
        Category::Data => FlinkError::WrongShape {
            endpoint: label,
            path: if path.is_empty() { ".".into() } else { path },
            detail: err.to_string(),
        },
    }
}

/// The first message of a Flink error body (`{"errors":[..]}`), or the body's start.
fn error_detail(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        errors: Vec<String>,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) if !e.errors.is_empty() => truncate_chars(&e.errors.join("; "), ERROR_EXCERPT_CHARS),
        _ => excerpt(body),
    }
}

fn excerpt(body: &[u8]) -> String {
    truncate_chars(
        String::from_utf8_lossy(&body[..body.len().min(1024)]).trim(),
        ERROR_EXCERPT_CHARS,
    )
}

fn truncate_chars(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// The JobManager closed the connection before the response was complete.
fn closed_mid_message(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Checks and normalizes `http(s)://host:port[/prefix]`.
pub fn normalize_base_url(url: &str) -> Result<String, FlinkError> {
    let invalid = |detail: &str| FlinkError::InvalidUrl {
        url: url.to_string(),
        detail: detail.into(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(invalid("expected http://host:port or https://host:port")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("missing host"));
    }
    if uri.query().is_some() {
        return Err(invalid("must not have a query string"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_rules() {
        assert_eq!(
            normalize_base_url("http://127.0.0.1:8081/").unwrap(),
            "http://127.0.0.1:8081"
        );
        assert_eq!(
            normalize_base_url("http://jm:8081/v1").unwrap(),
            "http://jm:8081/v1"
        );
        assert_eq!(
            normalize_base_url("https://jm:8443/").unwrap(),
            "https://jm:8443"
        );
        assert!(normalize_base_url("ftp://jm:8081").is_err());
        assert!(normalize_base_url("jm:8081").is_err());
        assert!(normalize_base_url("http://jm:8081/?x=1").is_err());
    }

    #[test]
    fn classifies_bad_bodies() {
        let e =
            parse_json::<JobsOverview>(Endpoint::JobsOverview, b"<html>oops</html>").unwrap_err();
        assert_eq!(e.kind(), "html");
        let e = parse_json::<JobsOverview>(Endpoint::JobsOverview, br#"{"jobs":[{"jid":"a","#)
            .unwrap_err();
        assert_eq!(e.kind(), "malformed_json");
        let e = parse_json::<JobsOverview>(Endpoint::JobsOverview, br#"{"jobs":[}"#).unwrap_err();
        assert_eq!(e.kind(), "malformed_json");
        let e = parse_json::<JobsOverview>(
            Endpoint::JobsOverview,
            br#"{"jobs":[{"jid":"a","state":7}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind(), "wrong_shape");
        assert!(e.to_string().contains("jobs[0].state"), "{e}");
        let e = parse_json::<JobsOverview>(Endpoint::JobsOverview, br#"{"jobs":[{"jid":"a"}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("state"), "{e}");
        let e = parse_json::<JobsOverview>(Endpoint::JobsOverview, b"").unwrap_err();
        assert_eq!(e.kind(), "malformed_json");
        let e =
            parse_json::<JobsOverview>(Endpoint::JobsOverview, br#"{"jobs":[]} x"#).unwrap_err();
        assert_eq!(e.kind(), "malformed_json");
    }

    #[test]
    fn error_bodies_are_condensed() {
        assert_eq!(
            error_detail(br#"{"errors":["Job x not found"]}"#),
            "Job x not found"
        );
        let long = format!(r#"{{"errors":["{}"]}}"#, "a".repeat(500));
        assert!(error_detail(long.as_bytes()).chars().count() <= ERROR_EXCERPT_CHARS + 1);
        assert_eq!(error_detail(b"plain\ntext"), "plain text");
    }
}
