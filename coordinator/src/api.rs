//! HTTP routes: authentication, input decoding and validation, and the calls into the store.
//!
//! Every failure answers with [`ErrorBody`]; bad input is a 400 that names the field.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use flink_autoscale_core::pause::PauseScope;
use flink_autoscale_core::policy::{validate_rules, PolicyRequest};
use flink_autoscale_core::protocol::{
    validate_identifier, ClusterOverrides, DecisionRecord, ErrorBody, EvacuationRequest,
    FieldError, Object, Outcome, PauseRequest, Proposal, ReviewAction, ReviewRequest, Verdict,
};
use flink_autoscale_shared::http::{self, Request, Response};
use hyper::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE,
};
use hyper::{Method, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::{Principal, Tokens};
use crate::route::{Access, Endpoint, NoRoute};
use crate::store::{
    AdminActionFilter, DecisionFilter, JobFilter, OutcomeResult, ProposeResult, ReviewResult,
    Store, StoreError,
};

/// Default and largest page sizes of the list endpoints.
const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;
/// How long `/readyz` waits for the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What the handlers share.
pub struct App {
    pub store: StoreSlot,
    /// Replaced as a whole by a reload (SIGHUP).
    pub tokens: std::sync::RwLock<Tokens>,
    pub max_body_bytes: usize,
    /// Time a client may take to send a body once its headers are in.
    pub body_read_timeout: Duration,
    pub prometheus: PrometheusHandle,
    pub console: crate::console::ConsoleSettings,
}

/// The store once it is open. Until then (the database is not reachable yet at start) every
/// call that needs it is answered at once with 503 `store_unavailable`, saying why.
#[derive(Default)]
pub struct StoreSlot {
    store: OnceLock<Store>,
    waiting_because: Mutex<Option<String>>,
}

impl StoreSlot {
    /// The open store, or the quick 503.
    pub fn get(&self) -> Result<&Store, ApiError> {
        self.store.get().ok_or_else(|| {
            let why = self
                .waiting_because
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_else(|| "connecting".to_string());
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                None,
                format!("the store is not ready yet ({why}); retry later"),
            )
        })
    }

    /// Why the store is not open yet (the last attempt's error), for `/readyz` and 503s.
    pub fn note_waiting(&self, why: String) {
        *self
            .waiting_because
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    /// Makes the store available to every handler; once only.
    pub fn fill(&self, store: Store) {
        let _ = self.store.set(store);
    }

    /// The store, if it was opened.
    pub fn opened(&self) -> Option<&Store> {
        self.store.get()
    }
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

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn body(&self) -> &ErrorBody {
        &self.body
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
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: do not read it as the next request.
            resp.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        if err.is_corrupt() {
            tracing::error!(error = %err, "store operation failed");
        } else {
            tracing::warn!(error = %err, "store operation failed: store unavailable");
        }
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
    let (route, answer) = match Endpoint::resolve(&method, &path) {
        Ok(endpoint) => (endpoint.template(), serve(&app, req, endpoint).await),
        Err(NoRoute::NotFound) => (
            "unknown",
            Err(ApiError::not_found(format!("no route for {path}"))),
        ),
        Err(NoRoute::MethodNotAllowed { template, allow }) => {
            (template, Ok(method_not_allowed(template, &allow)))
        }
    };
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

fn method_not_allowed(template: &str, allow: &[Method]) -> Response {
    let allow = allow
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut resp = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        None,
        format!("{template} allows {allow}"),
    )
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&allow) {
        resp.headers_mut().insert(ALLOW, value);
    }
    resp
}

/// Authorizes and answers one endpoint.
async fn serve(app: &App, req: Request, endpoint: Endpoint<'_>) -> Answer {
    use Endpoint as E;
    let who = authorize(app, &req, &endpoint)?;
    // Admin endpoints always have a principal; the name goes into the audit.
    let by = who.as_ref().map(|p| p.name.as_str()).unwrap_or_default();
    match endpoint {
        E::Health => Ok(http::text(StatusCode::OK, "ok\n")),
        E::Ready => ready(app).await,
        E::Metrics => Ok(http::with_type(
            StatusCode::OK,
            flink_autoscale_shared::telemetry::render_prometheus(&app.prometheus).into(),
            "text/plain; version=0.0.4; charset=utf-8",
        )),
        E::WhoAmI => {
            no_query(&req)?;
            let who = who.unwrap_or_else(|| Principal {
                role: crate::auth::Role::Viewer,
                name: String::new(),
            });
            ok(&serde_json::json!({ "name": who.name, "role": who.role.as_str() }))
        }
        E::Propose => propose(app, req).await,
        E::GetVerdict { proposal_id } => verdict(app, &req, proposal_id).await,
        E::ReportOutcome { proposal_id } => outcome(app, req, proposal_id).await,
        E::Approve { proposal_id } => {
            review(app, req, proposal_id, ReviewAction::Approve, by).await
        }
        E::Deny { proposal_id } => review(app, req, proposal_id, ReviewAction::Deny, by).await,
        E::ListPending => pending(app, &req).await,
        E::ListDecisions => decisions(app, &req).await,
        E::GetDecision { proposal_id } => decision(app, &req, proposal_id).await,
        E::ListJobs => jobs(app, &req).await,
        E::ListRegions => {
            no_query(&req)?;
            ok(&app.store.get()?.regions().await?)
        }
        E::FlagRegion { region } => set_evacuation(app, req, region, by).await,
        E::UnflagRegion { region } => clear_evacuation(app, region, by).await,
        E::ListClusters => {
            no_query(&req)?;
            ok(&app.store.get()?.clusters().await?)
        }
        E::SetOverrides { cluster } => set_overrides(app, req, cluster, by).await,
        E::DeleteOverrides { cluster } => delete_overrides(app, cluster, by).await,
        E::ListPauses => {
            no_query(&req)?;
            ok(&app.store.get()?.pauses().await?)
        }
        E::SetPause { kind, value } => set_pause(app, req, kind, value, by).await,
        E::ClearPause { kind, value } => clear_pause(app, kind, value, by).await,
        E::GetPolicy => {
            no_query(&req)?;
            ok(&app.store.get()?.policy().await?)
        }
        E::SetPolicy => set_policy(app, req, by).await,
        E::ListAdminActions => admin_actions(app, &req).await,
        E::Console(route) => Ok(crate::console::serve(app, req, route).await),
    }
}

/// Checks the bearer token against the endpoint's [`Access`]; the caller, unless public
/// (the console signs browsers in with its own session cookie).
fn authorize(
    app: &App,
    req: &Request,
    endpoint: &Endpoint<'_>,
) -> Result<Option<Principal>, ApiError> {
    let access = endpoint.access();
    if matches!(
        access,
        Access::Public | Access::ConsoleOpen | Access::ConsoleSignedIn | Access::ConsoleAdmin
    ) {
        return Ok(None);
    }
    let header = req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    let authenticated = app
        .tokens
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .authenticate(header);
    let who = authenticated.map_err(|e| {
        metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => e.as_str()).increment(1);
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            Some("Authorization".to_string()),
            format!("a valid bearer token is required ({} token)", e.as_str()),
        )
    })?;
    if !access.allows(who.role) {
        metrics::counter!(crate::metrics::AUTH_FAILURES, "reason" => "wrong_role").increment(1);
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            None,
            format!(
                "{} {} needs {} token; this is a {} token",
                endpoint.method(),
                endpoint.template(),
                access.describe(),
                who.role.as_str()
            ),
        ));
    }
    Ok(Some(who))
}

async fn ready(app: &App) -> Answer {
    if app.store.get()?.ping(READY_TIMEOUT).await {
        Ok(http::text(StatusCode::OK, "ready\n"))
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            None,
            format!("the store did not answer within {READY_TIMEOUT:?}"),
        ))
    }
}

async fn propose(app: &App, req: Request) -> Answer {
    let mut proposal: Proposal = read_json(app, req).await?;
    proposal.validate().map_err(ApiError::invalid)?;
    // One spelling: the per-job lock stays per job and a retry written differently (an
    // explicit "default" group, uppercase ids) is recognized as the same proposal.
    proposal.normalize();
    match app.store.get()?.propose(proposal).await? {
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
    match app
        .store
        .get()?
        .record_outcome(&proposal_id, outcome)
        .await?
    {
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

/// `GET /v1/proposals/{id}`: the current verdict (agents poll it while it is pending).
async fn verdict(app: &App, req: &Request, raw_id: &str) -> Answer {
    no_query(req)?;
    let proposal_id = path_segment(raw_id, "proposal_id")?;
    match app.store.get()?.verdict(&proposal_id).await? {
        Some(decision) => ok(&decision),
        None => Err(ApiError::not_found(format!(
            "no proposal {proposal_id} is on record"
        ))),
    }
}

/// `GET /v1/decisions/{id}`: one audit record.
async fn decision(app: &App, req: &Request, raw_id: &str) -> Answer {
    no_query(req)?;
    let proposal_id = path_segment(raw_id, "proposal_id")?;
    match app.store.get()?.decision(&proposal_id).await? {
        Some(record) => ok(&record),
        None => Err(ApiError::not_found(format!(
            "no proposal {proposal_id} is on record"
        ))),
    }
}

/// `POST /v1/proposals/{id}/approve` and `/deny`.
async fn review(app: &App, req: Request, raw_id: &str, action: ReviewAction, by: &str) -> Answer {
    let proposal_id = path_segment(raw_id, "proposal_id")?;
    let body: ReviewRequest = read_json(app, req).await?;
    ok(&decide(app, &proposal_id, action, &body, by).await?)
}

/// An admin's approval or denial of a pending proposal, for the API and the console alike:
/// validates the request, runs the review in the store (an approval runs the gates again)
/// and answers the record as it now stands. Already decided, expired or superseded is a 409
/// naming `proposal_id`.
pub async fn decide(
    app: &App,
    proposal_id: &str,
    action: ReviewAction,
    body: &ReviewRequest,
    by: &str,
) -> Result<DecisionRecord, ApiError> {
    body.validate(action).map_err(ApiError::invalid)?;
    let comment = body.comment.trim();
    match app
        .store
        .get()?
        .review(proposal_id, action, by, comment)
        .await?
    {
        ReviewResult::Decided(record) => {
            tracing::warn!(%proposal_id, admin = %by, action = action.as_str(), verdict = %record.verdict, "pending proposal reviewed");
            Ok(*record)
        }
        ReviewResult::UnknownProposal => Err(ApiError::not_found(format!(
            "no proposal {proposal_id} is on record"
        ))),
        ReviewResult::NotPending(record) => {
            let how = match (&record.review, record.reasons.first()) {
                (Some(r), _) => format!("{}d by {}", r.action.as_str(), r.by),
                (None, Some(reason)) => format!("{} ({})", record.verdict, reason.code),
                (None, None) => record.verdict.to_string(),
            };
            Err(ApiError::conflict(
                "proposal_id",
                format!("proposal {proposal_id} is not pending: it was {how}"),
            ))
        }
    }
}

/// `GET /v1/pending`: the proposals waiting for a person, newest first.
async fn pending(app: &App, req: &Request) -> Answer {
    let start = DecisionFilter {
        verdict: Some(Verdict::Pending),
        ..DecisionFilter::default()
    };
    let filter = decision_filter(req, start, &["job", "cluster", "region", "limit", "cursor"])?;
    ok(&app.store.get()?.decisions(&filter).await?)
}

async fn decisions(app: &App, req: &Request) -> Answer {
    let known = [
        "job", "cluster", "region", "verdict", "since", "until", "limit", "cursor",
    ];
    let filter = decision_filter(req, DecisionFilter::default(), &known)?;
    ok(&app.store.get()?.decisions(&filter).await?)
}

/// The audit's query parameters over `filter`; `known` are the ones this route takes.
fn decision_filter(
    req: &Request,
    mut filter: DecisionFilter,
    known: &[&str],
) -> Result<DecisionFilter, ApiError> {
    filter.limit = DEFAULT_PAGE;
    for (key, value) in query_pairs(req) {
        if !known.contains(&key.as_str()) {
            return Err(unknown_parameter(&key, &known.join(", ")));
        }
        match key.as_str() {
            "job" => filter.job_id = Some(flink_id(&value, "job")?),
            "cluster" => filter.cluster_id = Some(identifier(value, "cluster")?),
            "region" => filter.region = Some(identifier(value, "region")?),
            "verdict" => {
                filter.verdict = Some(Verdict::parse(&value).ok_or_else(|| {
                    ApiError::invalid(FieldError::new(
                        "verdict",
                        "must be approved, refused or pending",
                    ))
                })?)
            }
            "since" => filter.since_ms = Some(non_negative(&value, "since")?),
            "until" => filter.until_ms = Some(non_negative(&value, "until")?),
            "limit" => filter.limit = page_size(&value)?,
            // "cursor", the last of `known`.
            _ => filter.before_seq = Some(non_negative(&value, "cursor")?),
        }
    }
    Ok(filter)
}

async fn admin_actions(app: &App, req: &Request) -> Answer {
    let mut filter = AdminActionFilter {
        limit: DEFAULT_PAGE,
        ..AdminActionFilter::default()
    };
    for (key, value) in query_pairs(req) {
        match key.as_str() {
            "admin" => filter.admin = Some(value),
            "limit" => filter.limit = page_size(&value)?,
            "cursor" => filter.before_seq = Some(non_negative(&value, "cursor")?),
            _ => return Err(unknown_parameter(&key, "admin, limit, cursor")),
        }
    }
    ok(&app.store.get()?.admin_actions(&filter).await?)
}

/// The scope named by `/v1/pauses/{kind}[/{value}]` (and the console's
/// `/ui/pauses/{kind}[/{value}]/clear`), still percent-encoded; the error names `scope`.
pub fn pause_scope(kind: &str, value: Option<&str>) -> Result<PauseScope, ApiError> {
    let decode = |raw: &str| {
        percent_encoding::percent_decode_str(raw)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| ApiError::invalid(FieldError::new("scope", "must be UTF-8")))
    };
    let kind = decode(kind)?;
    let value = value.map(decode).transpose()?;
    PauseScope::of(&kind, value.as_deref()).map_err(ApiError::invalid)
}

async fn set_pause(app: &App, req: Request, kind: &str, value: Option<&str>, by: &str) -> Answer {
    let scope = pause_scope(kind, value)?;
    let body: PauseRequest = read_json(app, req).await?;
    body.validate(crate::store::now_ms())
        .map_err(ApiError::invalid)?;
    app.store.get()?.set_pause(&scope, &body, by).await?;
    tracing::warn!(%scope, admin = %by, reason = %body.reason, expires_at = ?body.expires_at, "paused");
    ok(&app.store.get()?.pauses().await?)
}

async fn clear_pause(app: &App, kind: &str, value: Option<&str>, by: &str) -> Answer {
    let scope = pause_scope(kind, value)?;
    if !app.store.get()?.clear_pause(&scope, by).await? {
        return Err(ApiError::not_found(format!("{scope} is not paused")));
    }
    tracing::warn!(%scope, admin = %by, "pause lifted");
    ok(&app.store.get()?.pauses().await?)
}

async fn set_policy(app: &App, req: Request, by: &str) -> Answer {
    let body: PolicyRequest = read_json(app, req).await?;
    validate_rules(&body.rules, "rules").map_err(ApiError::invalid)?;
    let store = app.store.get()?;
    let current = store.policy().await?;
    for (i, rule) in body.rules.iter().enumerate() {
        if current.rules.iter().any(|r| {
            r.source == flink_autoscale_core::policy::RuleSource::Config && r.rule.name == rule.name
        }) {
            return Err(ApiError::invalid(FieldError::new(
                format!("rules[{i}].name"),
                format!(
                    "rule name {:?} is taken by the configuration's approval.rules",
                    rule.name
                ),
            )));
        }
    }
    store.set_policy(&body.rules, by).await?;
    tracing::warn!(admin = %by, rules = body.rules.len(), "approval rules set");
    ok(&store.policy().await?)
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
    let (page, next) = app.store.get()?.jobs(&filter).await?;
    #[derive(Serialize)]
    struct Body {
        #[serde(flatten)]
        page: flink_autoscale_core::protocol::JobsPage,
        next: Option<String>,
    }
    ok(&Body { page, next })
}

async fn set_evacuation(app: &App, req: Request, raw_region: &str, by: &str) -> Answer {
    let region = path_segment(raw_region, "region")?;
    let body: EvacuationRequest = read_json(app, req).await?;
    body.validate().map_err(ApiError::invalid)?;
    app.store
        .get()?
        .set_evacuation(&region, body.reason.trim(), by)
        .await?;
    tracing::warn!(%region, admin = %by, reason = %body.reason, "region flagged as evacuating");
    ok(&app.store.get()?.regions().await?)
}

async fn clear_evacuation(app: &App, raw_region: &str, by: &str) -> Answer {
    let region = path_segment(raw_region, "region")?;
    if !app.store.get()?.clear_evacuation(&region, by).await? {
        return Err(ApiError::not_found(format!(
            "region {region} is not evacuating"
        )));
    }
    tracing::warn!(%region, admin = %by, "region evacuation cleared");
    ok(&app.store.get()?.regions().await?)
}

async fn set_overrides(app: &App, req: Request, raw_cluster: &str, by: &str) -> Answer {
    let cluster = path_segment(raw_cluster, "cluster")?;
    let overrides: ClusterOverrides = read_json(app, req).await?;
    overrides.validate().map_err(ApiError::invalid)?;
    app.store
        .get()?
        .set_overrides(&cluster, &overrides, by)
        .await?;
    tracing::info!(%cluster, admin = %by, ?overrides, "cluster overrides set");
    ok(&app.store.get()?.clusters().await?)
}

async fn delete_overrides(app: &App, raw_cluster: &str, by: &str) -> Answer {
    let cluster = path_segment(raw_cluster, "cluster")?;
    if !app.store.get()?.delete_overrides(&cluster, by).await? {
        return Err(ApiError::not_found(format!(
            "cluster {cluster} has no overrides"
        )));
    }
    tracing::info!(%cluster, admin = %by, "cluster overrides removed");
    ok(&app.store.get()?.clusters().await?)
}

/// Reads the capped body and decodes it, naming the offending field on failure.
async fn read_json<T: DeserializeOwned>(app: &App, req: Request) -> Result<T, ApiError> {
    require_json(&req)?;
    let bytes = http::read_body(req.into_body(), app.max_body_bytes, app.body_read_timeout)
        .await
        .map_err(|e| match e {
            http::BodyError::Timeout { .. } => ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                Some("body".to_string()),
                e.to_string(),
            ),
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

/// A body must say it is JSON: `Content-Type: application/json` (parameters such as
/// `charset` allowed); anything else, or none, is 415.
fn require_json(req: &Request) -> Result<(), ApiError> {
    let given = req
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let media_type = given
        .as_deref()
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if media_type.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        Some("Content-Type".to_string()),
        match given {
            Some(other) => format!("request bodies must be application/json, not {other:?}"),
            None => "request bodies must be application/json; the Content-Type header is missing"
                .to_string(),
        },
    ))
}

/// JSON → `T`; syntax errors are `malformed_json`, type errors name the JSON path. The body
/// must be a JSON object (no positional arrays for structs, see [`Object`]).
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
    let Object(value) = value;
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

/// A path parameter, percent-decoded and checked as an identifier; the error names `field`.
pub fn path_segment(raw: &str, field: &str) -> Result<String, ApiError> {
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
    if flink_autoscale_core::protocol::is_flink_id(value) {
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
        let valid = flink_autoscale_core::protocol::MINIMAL_PROPOSAL_JSON;
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
