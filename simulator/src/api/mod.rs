//! Flink's REST API over the simulated world: routing, parameter parsing and replies.
//! Handlers are synchronous and run under the world lock; they only build bodies.

mod batch_metrics;
mod cluster;
pub(crate) mod control;
mod jobs;
mod metrics;
mod ops;
mod rescales;

use std::collections::HashMap;

use http::Method;
use serde_json::Value;

use crate::format::{error_body, handler_exception, internal_error};
use crate::ids::is_flink_id;
use crate::world::World;

/// A handler's answer plus what it cost, for `/_sim/stats`.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub body: String,
    /// Route template used for accounting, e.g. `GET /jobs/:jobid`.
    pub endpoint: String,
    /// Metric entries the JobManager had to touch.
    pub entries: u64,
    /// Entries of the MetricFetcher refresh this request started, if it started one.
    pub fetched: Option<u64>,
}

impl Reply {
    fn json(status: u16, v: &Value) -> Self {
        Reply {
            status,
            body: v.to_string(),
            endpoint: String::new(),
            entries: 0,
            fetched: None,
        }
    }

    fn raw(status: u16, body: String) -> Self {
        Reply {
            status,
            body,
            endpoint: String::new(),
            entries: 0,
            fetched: None,
        }
    }

    fn with_entries(mut self, entries: u64) -> Self {
        self.entries = entries;
        self
    }

    fn not_found_route(path: &str) -> Self {
        Reply::json(404, &error_body(&[format!("Not found: {path}")]))
    }

    /// A `RestHandlerException`-style error with the given status.
    fn handler_error(status: u16, class: &str, message: &str) -> Self {
        Reply::json(status, &error_body(&[handler_exception(class, message)]))
    }

    fn internal(class: &str, message: &str) -> Self {
        Reply::json(500, &error_body(&internal_error(class, message)))
    }

    fn bad_path_param(key: &str, value: &str) -> Self {
        Reply::handler_error(
            400,
            "org.apache.flink.runtime.rest.handler.RestHandlerException",
            &format!("Bad request, could not parse parameters: Cannot resolve path parameter ({key}) from value \"{value}\"."),
        )
    }

    fn bad_query_param(key: &str, value: &str) -> Self {
        Reply::handler_error(
            400,
            "org.apache.flink.runtime.rest.handler.RestHandlerException",
            &format!("Bad request, could not parse parameters: Cannot resolve query parameter ({key}) from value \"{value}\"."),
        )
    }

    fn job_not_found(jid: &str) -> Self {
        Reply::handler_error(
            404,
            "org.apache.flink.runtime.rest.NotFoundException",
            &format!("Job {jid} not found"),
        )
    }

    fn method_not_allowed() -> Self {
        Reply::json(405, &error_body(&["Method not allowed.".to_string()]))
    }
}

/// Query parameters: repeated keys are joined with `,`, as Flink does.
#[derive(Debug, Default)]
pub(crate) struct Query {
    params: HashMap<String, String>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let mut params: HashMap<String, String> = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (decode(k), decode(v));
            params
                .entry(k)
                .and_modify(|old| {
                    old.push(',');
                    old.push_str(&v);
                })
                .or_insert(v);
        }
        Query { params }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Comma-separated list values, without trimming (a space becomes part of a name).
    pub fn list(&self, key: &str) -> Option<Vec<&str>> {
        self.get(key)
            .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
    }
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

/// Path segments without the optional `/v1` prefix.
pub(crate) fn segments(path: &str) -> Vec<&str> {
    let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.first() == Some(&"v1") {
        segs.remove(0);
    }
    segs
}

/// The job id a Flink path refers to, for job-scoped faults.
pub(crate) fn job_in_path(path: &str) -> Option<String> {
    let segs = segments(path);
    match segs.as_slice() {
        ["jobs", jid, ..] if is_flink_id(jid) => Some(jid.to_ascii_lowercase()),
        _ => None,
    }
}

/// Handles one Flink REST request.
pub(crate) fn dispatch(
    world: &mut World,
    method: &Method,
    path: &str,
    query: &Query,
    body: &[u8],
) -> Reply {
    // A read about one job integrates only that job, so a session of thousands of jobs costs
    // per request what one job costs; everything else brings every job up to date.
    let job = job_in_path(path).and_then(|jid| world.job_index(&jid));
    let now = match job {
        Some(j) if method == Method::GET => world.sync_job(j),
        _ => world.sync(),
    };
    let segs = segments(path);
    let (template, mut reply) = route(world, method, &segs, query, body, path);
    reply.endpoint = format!("{method} {template}");
    if method == Method::GET
        && reads_metric_store(template)
        && reply.status == 200
        && world.fetcher.update(now)
    {
        world.sync();
        reply.fetched = Some(metrics::store_entries(world));
    }
    if let Some(j) = job.filter(|_| reply.status == 200 && reads_values(template, query)) {
        let id = world.jobs[j].id().to_string();
        world.polls.record(&id);
    }
    reply
}

/// The handlers that call `MetricFetcher.update()` in Flink: every metric endpoint, the
/// backpressure one, and the ExecutionGraph handlers that add IO metrics from the store. A
/// request Flink refuses before its handler runs (a bad parameter, an unknown job for the
/// ExecutionGraph handlers) does not, hence only answered ones count.
fn reads_metric_store(template: &str) -> bool {
    template.ends_with("/metrics")
        || matches!(
            template,
            "/jobs/:jobid"
                | "/jobs/:jobid/vertices/:vertexid"
                | "/jobs/:jobid/vertices/:vertexid/backpressure"
                | "/jobs/:jobid/vertices/subtasks/metrics/names"
                | "/jobs/:jobid/vertices/subtasks/metrics/values"
        )
}

/// A read of aggregated metric values (`get=`), per vertex or batched: what a poller's
/// poll of a job is made of.
fn reads_values(template: &str, query: &Query) -> bool {
    query.get("get").is_some()
        && matches!(
            template,
            "/jobs/:jobid/vertices/:vertexid/subtasks/metrics"
                | "/jobs/:jobid/vertices/subtasks/metrics/values"
        )
}

fn check_id(key: &str, value: &str) -> Result<String, Reply> {
    if is_flink_id(value) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(Reply::bad_path_param(key, value))
    }
}

macro_rules! ids {
    ($($key:literal => $val:expr),+) => {
        ( $( match check_id($key, $val) { Ok(v) => v, Err(r) => return r } ),+ )
    };
}

fn route(
    world: &mut World,
    method: &Method,
    segs: &[&str],
    q: &Query,
    body: &[u8],
    path: &str,
) -> (&'static str, Reply) {
    let get = method == Method::GET;
    let only_get = |r: Reply| if get { r } else { Reply::method_not_allowed() };
    match segs {
        ["overview"] => ("/overview", only_get(cluster::overview(world))),
        ["config"] => ("/config", only_get(cluster::config(world))),
        ["jobs"] => ("/jobs", only_get(cluster::jobs(world))),
        ["jobs", "overview"] => ("/jobs/overview", only_get(cluster::jobs_overview(world))),
        ["jobs", "metrics"] => (
            "/jobs/metrics",
            only_get(metrics::jobs_aggregated(world, q)),
        ),
        ["jobmanager", "config"] => (
            "/jobmanager/config",
            only_get(cluster::jobmanager_config(world, None)),
        ),
        ["jobmanager", "metrics"] => (
            "/jobmanager/metrics",
            only_get(metrics::jobmanager(world, q)),
        ),
        ["taskmanagers"] => ("/taskmanagers", only_get(cluster::taskmanagers(world))),
        ["taskmanagers", "metrics"] => (
            "/taskmanagers/metrics",
            only_get(metrics::taskmanagers_aggregated(world, q)),
        ),
        ["taskmanagers", tm, "metrics"] => (
            "/taskmanagers/:taskmanagerid/metrics",
            only_get(metrics::taskmanager(world, tm, q)),
        ),
        ["jobs", jid] => ("/jobs/:jobid", job_route(world, method, jid, &[], q, body)),
        ["jobs", jid, rest @ ..] => {
            let template = job_template(rest);
            (template, job_route(world, method, jid, rest, q, body))
        }
        _ => ("(unknown)", Reply::not_found_route(path)),
    }
}

fn job_template(rest: &[&str]) -> &'static str {
    match rest {
        ["status"] => "/jobs/:jobid/status",
        ["plan"] => "/jobs/:jobid/plan",
        ["metrics"] => "/jobs/:jobid/metrics",
        ["checkpoints"] => "/jobs/:jobid/checkpoints",
        ["jobmanager", "config"] => "/jobs/:jobid/jobmanager/config",
        ["resource-requirements"] => "/jobs/:jobid/resource-requirements",
        ["stop"] => "/jobs/:jobid/stop",
        ["savepoints"] => "/jobs/:jobid/savepoints",
        ["savepoints", _] => "/jobs/:jobid/savepoints/:triggerid",
        ["rescaling"] => "/jobs/:jobid/rescaling",
        ["rescales", "overview"] => "/jobs/:jobid/rescales/overview",
        ["rescales", "history"] => "/jobs/:jobid/rescales/history",
        ["rescales", "details", _] => "/jobs/:jobid/rescales/details/:rescaleuuid",
        ["vertices", "subtasks", "metrics", "names"] => {
            "/jobs/:jobid/vertices/subtasks/metrics/names"
        }
        ["vertices", "subtasks", "metrics", "values"] => {
            "/jobs/:jobid/vertices/subtasks/metrics/values"
        }
        ["vertices", _] => "/jobs/:jobid/vertices/:vertexid",
        ["vertices", _, "backpressure"] => "/jobs/:jobid/vertices/:vertexid/backpressure",
        ["vertices", _, "metrics"] => "/jobs/:jobid/vertices/:vertexid/metrics",
        ["vertices", _, "subtasks", "metrics"] => {
            "/jobs/:jobid/vertices/:vertexid/subtasks/metrics"
        }
        ["vertices", _, "subtasks", _, "metrics"] => {
            "/jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/metrics"
        }
        _ => "(unknown)",
    }
}

fn job_route(
    world: &mut World,
    method: &Method,
    jid: &str,
    rest: &[&str],
    q: &Query,
    body: &[u8],
) -> Reply {
    let m = method.clone();
    match (m, rest) {
        (Method::GET, []) => jobs::details(world, &ids!("jobid" => jid)),
        (Method::PATCH, []) => ops::cancel(world, &ids!("jobid" => jid)),
        (Method::GET, ["status"]) => jobs::status(world, &ids!("jobid" => jid)),
        (Method::GET, ["plan"]) => jobs::plan(world, &ids!("jobid" => jid)),
        (Method::GET, ["metrics"]) => metrics::job(world, &ids!("jobid" => jid), q),
        (Method::GET, ["checkpoints"]) => jobs::checkpoints(world, &ids!("jobid" => jid)),
        (Method::GET, ["jobmanager", "config"]) => {
            let jid = ids!("jobid" => jid);
            match world.job_index(&jid) {
                Some(j) => cluster::jobmanager_config(world, Some(j)),
                None => Reply::job_not_found(&jid),
            }
        }
        (Method::GET, ["resource-requirements"]) => {
            ops::get_requirements(world, &ids!("jobid" => jid))
        }
        (Method::PUT, ["resource-requirements"]) => {
            ops::put_requirements(world, &ids!("jobid" => jid), body)
        }
        (Method::POST, ["stop"]) => ops::savepoint(world, &ids!("jobid" => jid), body, true),
        (Method::POST, ["savepoints"]) => ops::savepoint(world, &ids!("jobid" => jid), body, false),
        (Method::GET, ["savepoints", tid]) => {
            let (jid, tid) = ids!("jobid" => jid, "triggerid" => tid);
            ops::savepoint_status(world, &jid, &tid)
        }
        // Flink 2.3's rescale history; older versions do not know the routes.
        (Method::GET, ["rescales", tail @ ..]) if world.cluster.reports_scheduler_type() => {
            rescales::get(world, &ids!("jobid" => jid), tail)
        }
        (_, ["rescales", ..]) if !world.cluster.reports_scheduler_type() => {
            Reply::not_found_route(&format!("/jobs/{jid}/{}", rest.join("/")))
        }
        (Method::PATCH, ["rescaling"]) => Reply::handler_error(
            503,
            "org.apache.flink.runtime.rest.handler.RestHandlerException",
            "Rescaling is temporarily disabled. See FLINK-12312.",
        ),
        (Method::GET, ["vertices", "subtasks", "metrics", which @ ("names" | "values")])
            if world.batch_metrics =>
        {
            let jid = ids!("jobid" => jid);
            if *which == "names" {
                batch_metrics::names(world, &jid, q)
            } else {
                batch_metrics::values(world, &jid, q)
            }
        }
        // Released Flink does not know them: an unknown route.
        (_, ["vertices", "subtasks", "metrics", "names" | "values"]) if !world.batch_metrics => {
            Reply::not_found_route(&format!("/jobs/{jid}/{}", rest.join("/")))
        }
        (Method::GET, ["vertices", vid]) => {
            let (jid, vid) = ids!("jobid" => jid, "vertexid" => vid);
            jobs::vertex(world, &jid, &vid)
        }
        (Method::GET, ["vertices", vid, "backpressure"]) => {
            let (jid, vid) = ids!("jobid" => jid, "vertexid" => vid);
            jobs::backpressure(world, &jid, &vid)
        }
        (Method::GET, ["vertices", vid, "metrics"]) => {
            let (jid, vid) = ids!("jobid" => jid, "vertexid" => vid);
            metrics::vertex(world, &jid, &vid, q)
        }
        (Method::GET, ["vertices", vid, "subtasks", "metrics"]) => {
            let (jid, vid) = ids!("jobid" => jid, "vertexid" => vid);
            metrics::subtasks_aggregated(world, &jid, &vid, q)
        }
        (Method::GET, ["vertices", vid, "subtasks", idx, "metrics"]) => {
            let (jid, vid) = ids!("jobid" => jid, "vertexid" => vid);
            let Ok(idx) = idx.parse::<u32>() else {
                return Reply::bad_path_param("subtaskindex", idx);
            };
            metrics::subtask(world, &jid, &vid, idx, q)
        }
        (_, rest) if job_template(rest) != "(unknown)" || rest.is_empty() => {
            Reply::method_not_allowed()
        }
        _ => Reply::not_found_route(&format!("/jobs/{jid}/{}", rest.join("/"))),
    }
}
