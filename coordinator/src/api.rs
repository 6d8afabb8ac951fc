//! HTTP routes: authentication, input decoding and validation, and the calls into the store.
//!
//! Every failure answers with [`ErrorBody`]; bad input is a 400 that names the field.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flink_autoscale_shared::http::{self, Request, Response};
use flink_autoscale_shared::protocol::{
    validate_identifier, ClusterOverrides, ErrorBody, EvacuationRequest, FieldError, Outcome,
    Proposal,
};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::{Method, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::{Role, Tokens};
use crate::store::{DecisionFilter, JobFilter, OutcomeResult, ProposeResult, Store, StoreError};

/// Default and largest page sizes of the list endpoints.
const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;
/// How long `/readyz` waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What the handlers share.
pub struct App {
    pub store: Store,
    pub tokens: Tokens,
    pub max_body_bytes: usize,
    pub prometheus: PrometheusHandle,
}

/// A failed request, rendered as [`ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

impl ApiError {
    fn new(
        status: StatusCode,
        error: &str,
        field: Option<String>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            body: ErrorBody {
                error: error.to_string(),
                field,
                message: message.into(),
            },
        }
    }

    fn invalid(e: FieldError) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_field",
            Some(e.field),
            e.message,
        )
    }

    fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", None, message)
    }

    fn conflict(field: &str, message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            Some(field.to_string()),
            message,
        )
    }

    fn into_response(self) -> Response {
        let mut resp = http::json(self.status, &self.body);
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        tracing::error!(error = %err, "store operation failed");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            None,
            "the store could not complete the request; retry later",
        )
    }
}

type Answer = Result<Response, ApiError>;

fn ok<T: Serialize>(body: &T) -> Answer {
    Ok(http::json(StatusCode::OK, body))
}

/// Entry point for every request: routes, answers, and records the latency.
pub async fn handle(app: Arc<App>, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let (route, answer) = dispatch(&app, req, &path).await;
    let resp = answer.unwrap_or_else(ApiError::into_response);
    metrics::histogram!(
        crate::metrics::REQUEST_DURATION,
        "route" => route,
        "method" => method_label(&method),
        "status" => resp.status().as_u16().to_string()
    )
    .record(started.elapsed().as_secs_f64());
    resp
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

async fn dispatch(app: &App, req: Request, path: &str) -> (&'static str, Answer) {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();
    let (route, allowed): (&'static str, &[Method]) = match segments.as_slice() {
        ["healthz"] => ("/healthz", &[Method::GET]),
        ["readyz"] => ("/readyz", &[Method::GET]),
        ["metrics"] => ("/metrics", &[Method::GET]),
        ["v1", "proposals"] => ("/v1/proposals", &[Method::POST]),
        ["v1", "proposals", _, "outcome"] => ("/v1/proposals/{id}/outcome", &[Method::POST]),
        ["v1", "decisions"] => ("/v1/decisions", &[Method::GET]),
        ["v1", "jobs"] => ("/v1/jobs", &[Method::GET]),
        ["v1", "regions"] => ("/v1/regions", &[Method::GET]),
        ["v1", "regions", _, "evacuation"] => (
            "/v1/regions/{region}/evacuation",
            &[Method::PUT, Method::DELETE],
        ),
        ["v1", "clusters"] => ("/v1/clusters", &[Method::GET]),
        ["v1", "clusters", _, "overrides"] => (
            "/v1/clusters/{cluster}/overrides",
            &[Method::PUT, Method::DELETE],
        ),
        _ => {
            return (
                "unknown",
                Err(ApiError::not_found(format!("no route for {path}"))),
            )
        }
    };
    if !allowed.contains(&method) {
        let allow = allowed
            .iter()
            .map(Method::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let mut resp = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            None,
            format!("{route} allows {allow}"),
        )
        .into_response();
        if let Ok(value) = HeaderValue::from_str(&allow) {
            resp.headers_mut().insert(ALLOW, value);
        }
        return (route, Ok(resp));
    }
    let answer = match route {
        "/healthz" => Ok(http::text(StatusCode::OK, "ok\n")),
        "/readyz" => Ok(ready(app).await),
        "/metrics" => Ok(http::with_type(
            StatusCode::OK,
            flink_autoscale_shared::telemetry::render_prometheus(&app.prometheus).into(),
            "text/plain; version=0.0.4; charset=utf-8",
        )),
        _ => match authorize(app, &req, route, &method) {
            Err(e) => Err(e),
            Ok(()) => api_route(app, req, route, &method, &segments).await,
        },
    };
    (route, answer)
}

async fn api_route(
    app: &App,
    req: Request,
    route: &str,
    method: &Method,
    segments: &[&str],
) -> Answer {
    match (route, method) {
        ("/v1/proposals", _) => propose(app, req).await,
        ("/v1/proposals/{id}/outcome", _) => outcome(app, req, segments[2]).await,
        ("/v1/decisions", _) => decisions(app, &req).await,
        ("/v1/jobs", _) => jobs(app, &req).await,
        ("/v1/regions", _) => {
            no_query(&req)?;
            ok(&app.store.regions().await?)
        }
        ("/v1/regions/{region}/evacuation", &Method::PUT) => {
            set_evacuation(app, req, segments[2]).await
        }
        ("/v1/regions/{region}/evacuation", _) => clear_evacuation(app, segments[2]).await,
        ("/v1/clusters", _) => {
            no_query(&req)?;
            ok(&app.store.clusters().await?)
        }
        ("/v1/clusters/{cluster}/overrides", &Method::PUT) => {
            set_overrides(app, req, segments[2]).await
        }
        _ => delete_overrides(app, segments[2]).await,
    }
}

/// Agents propose and report outcomes; admins do everything else.
fn required_role(route: &str) -> Role {
    match route {
        "/v1/proposals" | "/v1/proposals/{id}/outcome" => Role::Agent,
        _ => Role::Admin,
    }
}

fn authorize(app: &App, req: &Request, route: &str, method: &Method) -> Result<(), ApiError> {
    let header = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    let role = app.tokens.authenticate(header).map_err(|e| {
        metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => e.as_str()).increment(1);
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            Some("Authorization".to_string()),
            format!("a valid bearer token is required ({} token)", e.as_str()),
        )
    })?;
    let needed = required_role(route);
    if role != needed {
        metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => "wrong_role").increment(1);
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            None,
            format!(
                "{method} {route} needs an {} token; this is an {} token",
                needed.as_str(),
                role.as_str()
            ),
        ));
    }
    Ok(())
}

async fn ready(app: &App) -> Response {
    if app.store.ping(READY_TIMEOUT).await {
        http::text(StatusCode::OK, "ready\n")
    } else {
        http::text(StatusCode::SERVICE_UNAVAILABLE, "store unreachable\n")
    }
}

async fn propose(app: &App, req: Request) -> Answer {
    let mut proposal: Proposal = read_json(app, req).await?;
    proposal.validate().map_err(ApiError::invalid)?;
    // Flink ids are case-insensitive hex; one spelling keeps the per-job lock per job.
    proposal.job_id.make_ascii_lowercase();
    for v in &mut proposal.vertices {
        v.id.make_ascii_lowercase();
    }
    match app.store.propose(proposal).await? {
        ProposeResult::Decided { decision, .. } => ok(&decision),
        ProposeResult::IdConflict => Err(ApiError::conflict(
            "proposal_id",
            "this proposal_id was already used for a different proposal",
        )),
    }
}

async fn outcome(app: &App, req: Request, raw_id: &str) -> Answer {
    let proposal_id = path_segment(raw_id, "proposal_id")?;
    let mut outcome: Outcome = read_json(app, req).await?;
    outcome.validate().map_err(ApiError::invalid)?;
    outcome.observed_parallelism = outcome
        .observed_parallelism
        .into_iter()
        .map(|(id, p)| (id.to_ascii_lowercase(), p))
        .collect();
    match app.store.record_outcome(&proposal_id, outcome).await? {
        OutcomeResult::Recorded(record) => ok(&record),
        OutcomeResult::UnknownProposal => Err(ApiError::not_found(format!(
            "no proposal {proposal_id} is on record"
        ))),
        OutcomeResult::NotApproved => Err(ApiError::conflict(
            "proposal_id",
            format!("proposal {proposal_id} was refused; only approved proposals have outcomes"),
        )),
        OutcomeResult::AlreadyReported(existing) => Err(ApiError::conflict(
            "status",
            format!(
                "a different outcome ({}) was already reported for {proposal_id}",
                existing.status.as_str()
            ),
        )),
    }
}

async fn decisions(app: &App, req: &Request) -> Answer {
    let mut filter = DecisionFilter {
        limit: DEFAULT_PAGE,
        ..DecisionFilter::default()
    };
    for (key, value) in query_pairs(req) {
        match key.as_str() {
            "job" => filter.job_id = Some(flink_id(&value, "job")?),
            "cluster" => filter.cluster_id = Some(identifier(value, "cluster")?),
            "region" => filter.region = Some(identifier(value, "region")?),
            "since" => filter.since_ms = Some(non_negative(&value, "since")?),
            "limit" => filter.limit = page_size(&value)?,
            "cursor" => filter.before_seq = Some(non_negative(&value, "cursor")?),
            _ => {
                return Err(unknown_parameter(
                    &key,
                    "job, cluster, region, since, limit, cursor",
                ))
            }
        }
    }
    ok(&app.store.decisions(&filter).await?)
}

async fn jobs(app: &App, req: &Request) -> Answer {
    let mut filter = JobFilter {
        limit: MAX_PAGE,
        ..JobFilter::default()
    };
    for (key, value) in query_pairs(req) {
        match key.as_str() {
            "cluster" => filter.cluster_id = Some(identifier(value, "cluster")?),
            "region" => filter.region = Some(identifier(value, "region")?),
            "limit" => filter.limit = page_size(&value)?,
            "cursor" => filter.after_job_id = Some(flink_id(&value, "cursor")?),
            _ => return Err(unknown_parameter(&key, "cluster, region, limit, cursor")),
        }
    }
    let (page, next) = app.store.jobs(&filter).await?;
    #[derive(Serialize)]
    struct Body {
        #[serde(flatten)]
        page: flink_autoscale_shared::protocol::JobsPage,
        next: Option<String>,
    }
    ok(&Body { page, next })
}

async fn set_evacuation(app: &App, req: Request, raw_region: &str) -> Answer {
    let region = path_segment(raw_region, "region")?;
    let body: EvacuationRequest = read_json(app, req).await?;
    body.validate().map_err(ApiError::invalid)?;
    app.store
        .set_evacuation(&region, body.reason.trim())
        .await?;
    tracing::warn!(%region, reason = %body.reason, "region flagged as evacuating");
    ok(&app.store.regions().await?)
}

async fn clear_evacuation(app: &App, raw_region: &str) -> Answer {
    let region = path_segment(raw_region, "region")?;
    if !app.store.clear_evacuation(&region).await? {
        return Err(ApiError::not_found(format!(
            "region {region} is not evacuating"
        )));
    }
    tracing::warn!(%region, "region evacuation cleared");
    ok(&app.store.regions().await?)
}

async fn set_overrides(app: &App, req: Request, raw_cluster: &str) -> Answer {
    let cluster = path_segment(raw_cluster, "cluster")?;
    let overrides: ClusterOverrides = read_json(app, req).await?;
    overrides.validate().map_err(ApiError::invalid)?;
    app.store.set_overrides(&cluster, &overrides).await?;
    tracing::info!(%cluster, ?overrides, "cluster overrides set");
    ok(&app.store.clusters().await?)
}

async fn delete_overrides(app: &App, raw_cluster: &str) -> Answer {
    let cluster = path_segment(raw_cluster, "cluster")?;
    if !app.store.delete_overrides(&cluster).await? {
        return Err(ApiError::not_found(format!(
            "cluster {cluster} has no overrides"
        )));
    }
    tracing::info!(%cluster, "cluster overrides removed");
    ok(&app.store.clusters().await?)
}

/// Reads the capped body and decodes it, naming the offending field on failure.
async fn read_json<T: DeserializeOwned>(app: &App, req: Request) -> Result<T, ApiError> {
    let bytes = http::read_body(req.into_body(), app.max_body_bytes)
        .await
        .map_err(|e| match e {
            http::BodyError::TooLarge { limit } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "body_too_large",
                Some("body".to_string()),
                format!("request body exceeds {limit} bytes"),
            ),
            http::BodyError::Read(message) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                Some("body".to_string()),
                message,
            ),
        })?;
    decode_json(&bytes)
}

/// JSON → `T`; syntax errors are `malformed_json`, type errors name the JSON path.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                Some("body".to_string()),
                format!("request body is not valid JSON: {inner}"),
            );
        }
        let message = inner.to_string();
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_field",
            Some(field_path(&path, &message)),
            message,
        )
    })?;
    de.end().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            Some("body".to_string()),
            format!("trailing data after the JSON value: {e}"),
        )
    })?;
    Ok(value)
}

/// The field a serde error is about: the path, plus the name quoted in "missing field `x`"
/// (serde reports a missing field at its parent's path).
fn field_path(path: &str, message: &str) -> String {
    let named = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let parent = if path == "." { "" } else { path };
    match named {
        Some(name) if parent.is_empty() => name.to_string(),
        Some(name) => format!("{parent}.{name}"),
        None if parent.is_empty() => "body".to_string(),
        None => parent.to_string(),
    }
}

fn query_pairs(req: &Request) -> Vec<(String, String)> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn no_query(req: &Request) -> Result<(), ApiError> {
    match query_pairs(req).first() {
        Some((key, _)) => Err(unknown_parameter(key, "none")),
        None => Ok(()),
    }
}

fn unknown_parameter(key: &str, known: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_field",
        Some(key.to_string()),
        format!("unknown query parameter (known: {known})"),
    )
}

fn path_segment(raw: &str, field: &str) -> Result<String, ApiError> {
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| ApiError::invalid(FieldError::new(field, "must be UTF-8")))?
        .into_owned();
    identifier(decoded, field)
}

fn identifier(value: String, field: &str) -> Result<String, ApiError> {
    validate_identifier(field, &value).map_err(ApiError::invalid)?;
    Ok(value)
}

fn flink_id(value: &str, field: &str) -> Result<String, ApiError> {
    if flink_autoscale_shared::protocol::is_flink_id(value) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(ApiError::invalid(FieldError::new(
            field,
            "must be a Flink id: 32 hex digits",
        )))
    }
}

fn non_negative(value: &str, field: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| ApiError::invalid(FieldError::new(field, "must be a non-negative integer")))
}

fn page_size(value: &str) -> Result<u32, ApiError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|v| (1..=MAX_PAGE).contains(v))
        .ok_or_else(|| {
            ApiError::invalid(FieldError::new(
                "limit",
                format!("must be between 1 and {MAX_PAGE}"),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(body: &str) -> (String, Option<String>) {
        let err = decode_json::<Proposal>(body.as_bytes()).unwrap_err();
        (err.body.error, err.body.field)
    }

    #[test]
    fn decode_errors_name_the_field() {
        let valid = flink_autoscale_shared::protocol::MINIMAL_PROPOSAL_JSON;
        assert!(decode_json::<Proposal>(valid.as_bytes()).is_ok());
        let cases = [
            ("{", "malformed_json", "body"),
            ("7", "invalid_field", "body"),
            (
                &valid.replace("\"j\"", "7") as &str,
                "invalid_field",
                "job_name",
            ),
            (
                &valid.replace(
                    "\"proposed_parallelism\":2",
                    "\"proposed_parallelism\":\"2\"",
                ),
                "invalid_field",
                "vertices[0].proposed_parallelism",
            ),
            (
                &valid.replace(
                    "\"current_task_managers\":1",
                    "\"current_task_managers\":-1",
                ),
                "invalid_field",
                "current_task_managers",
            ),
            (
                &valid.replace("\"job_name\"", "\"jobname\""),
                "invalid_field",
                "jobname",
            ),
            (
                &valid.replace("\"name\":\"Map\",", ""),
                "invalid_field",
                "vertices[0].name",
            ),
            (&format!("{valid} x"), "malformed_json", "body"),
        ];
        for (body, error, field) in cases {
            assert_eq!(
                field_of(body),
                (error.to_string(), Some(field.to_string())),
                "{body}"
            );
        }
    }
}
