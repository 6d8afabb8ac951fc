//! A scripted JobManager on loopback for the agent's own integration tests: it answers the
//! few endpoints the collector uses, and can be told to misbehave in ways the simulator
//! does not (a name that stops reporting, wrong types, missing fields).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flink_autoscale_agent::daemon::CancellationToken;
use flink_autoscale_shared::http::{self as shttp, Request, Response};
use hyper::StatusCode;

pub const JOB: &str = "0123456789abcdef0123456789abcdef";
pub const VERTEX: &str = "fedcba9876543210fedcba9876543210";
pub const PENDING: &str = "Source__src.pendingRecords";

/// Whether the scripted JobManager serves the batch metric endpoints (FLINK-39617).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// 404, as released Flink.
    #[default]
    Absent,
    /// 200 with a body of another shape (the per-vertex shape).
    WrongShape,
    /// The shape of apache/flink PR #29012.
    Served,
}

/// What the scripted JobManager does.
#[derive(Default)]
pub struct Script {
    pub batch: Batch,
    /// Batch requests seen (names and values).
    pub batch_requests: u32,
    /// `pendingRecords` is no longer reported (dropped from listings and values).
    pub pending_gone: bool,
    /// `/jobs/:jid` answers with `parallelism` as a non-numeric string.
    pub wrong_type: bool,
    /// `/jobs/:jid` answers without `maxParallelism`.
    pub missing_field: bool,
    /// This many more name listings answer `[]`, as Flink does for a few seconds after a
    /// job turns RUNNING.
    pub empty_listings: u32,
    /// Value requests seen, with their query strings.
    pub value_queries: Vec<String>,
    pub listings: u32,
    pub tick: f64,
}

fn names(script: &Script) -> Vec<&'static str> {
    let mut n = vec![
        "busyTimeMsPerSecond",
        "backPressuredTimeMsPerSecond",
        "idleTimeMsPerSecond",
        "numRecordsOut",
        "numRecordsOutPerSecond",
        "Source__src.numRecordsIn",
        "Source__src.numRecordsInPerSecond",
    ];
    if !script.pending_gone {
        n.push(PENDING);
    }
    n
}

/// Aggregates for the names in `get=`; `[]` when one is not reported (all-or-nothing).
fn values(script: &mut Script, query: &str) -> Vec<serde_json::Value> {
    script.value_queries.push(query.to_string());
    script.tick += 1.0;
    let get = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("get="))
        .unwrap_or("");
    let known = names(script);
    let mut out = Vec::new();
    for name in get.split(',') {
        if !known.contains(&name) {
            return Vec::new(); // Flink's all-or-nothing rule
        }
        let v = 100.0 * script.tick;
        out.push(serde_json::json!({"id": name, "max": v, "avg": v / 2.0, "sum": v}));
    }
    out
}

fn handle(req: &Request, script: &mut Script) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let json = |v: serde_json::Value| shttp::json(StatusCode::OK, &v);
    match path.as_str() {
        "/jobs/overview" => json(
            serde_json::json!({"jobs":[{"jid":JOB,"name":"scripted","state":"RUNNING","start-time":1,"last-modification":2,"tasks":{"total":2}}]}),
        ),
        p if p == format!("/jobs/{JOB}") => {
            let mut vertex = serde_json::json!({"id":VERTEX,"name":"Source: src","parallelism":2,"maxParallelism":128,"status":"RUNNING"});
            if script.wrong_type {
                vertex["parallelism"] = "two".into();
            }
            if script.missing_field {
                vertex.as_object_mut().unwrap().remove("maxParallelism");
            }
            json(
                serde_json::json!({"jid":JOB,"name":"scripted","state":"RUNNING","timestamps":{"RUNNING":1000},"vertices":[vertex],"plan":{"nodes":[{"id":VERTEX}]}}),
            )
        }
        p if p == format!("/jobs/{JOB}/vertices/{VERTEX}/subtasks/metrics") => {
            if query.is_empty() {
                script.listings += 1;
                if script.empty_listings > 0 {
                    script.empty_listings -= 1;
                    return json(serde_json::json!([]));
                }
                let list: Vec<_> = names(script)
                    .into_iter()
                    .map(|n| serde_json::json!({"id": n}))
                    .collect();
                return json(list.into());
            }
            json(values(script, &query).into())
        }
        p if p.starts_with(&format!("/jobs/{JOB}/vertices/subtasks/metrics/"))
            && script.batch != Batch::Absent =>
        {
            script.batch_requests += 1;
            let metrics: serde_json::Value = if p.ends_with("/names") {
                names(script)
                    .into_iter()
                    .map(|n| serde_json::json!({"id": n}))
                    .collect::<Vec<_>>()
                    .into()
            } else {
                values(script, &query).into()
            };
            match script.batch {
                Batch::WrongShape => json(metrics),
                _ => json(serde_json::json!([{"vertexId": VERTEX, "metrics": metrics}])),
            }
        }
        _ => shttp::json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"errors":["Not found."]}),
        ),
    }
}

pub async fn start_scripted() -> (String, Arc<Mutex<Script>>, CancellationToken) {
    let script = Arc::new(Mutex::new(Script::default()));
    let (listener, addr) = shttp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let token = CancellationToken::new();
    let s = Arc::clone(&script);
    tokio::spawn(shttp::serve(
        listener,
        move |req| {
            let resp = handle(&req, &mut s.lock().unwrap());
            async move { resp }
        },
        token.clone(),
        Duration::from_secs(1),
    ));
    (format!("http://{addr}"), script, token)
}
