//! The simulator's own endpoints under `/_sim/...`: accounting, clock, load, restarts and
//! fault injection. They are not Flink paths, are never faulted and are not accounted.

use std::time::Duration;

use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{segments, Reply};
use crate::cost::{CostCounts, CostModel};
use crate::ids::is_flink_id;
use crate::world::{Fault, SimStats, World};

fn bad_request(message: &str) -> Reply {
    Reply::json(400, &json!({ "errors": [message] }))
}

fn unknown_job(jid: &str) -> Reply {
    Reply::json(404, &json!({ "errors": [format!("Job {jid} not found")] }))
}

/// The wire form of a fault for `PUT /_sim/faults`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultRequest {
    pub job: Option<String>,
    pub fault: String,
    pub status: Option<u16>,
    pub bytes: Option<usize>,
    pub delay_ms: Option<u64>,
}

impl FaultRequest {
    pub fn to_fault(&self) -> Result<Fault, String> {
        Ok(match self.fault.as_str() {
            "hang" => Fault::Hang,
            "status" => {
                let s = self.status.ok_or("fault \"status\" needs a \"status\" field")?;
                if !(100..=599).contains(&s) {
                    return Err(format!("status: {s} is not an HTTP status code"));
                }
                Fault::Status(s)
            }
            "html" => Fault::Html,
            "truncated" => Fault::Truncated,
            "malformed_json" => Fault::MalformedJson,
            "huge_body" => Fault::HugeBody(self.bytes.ok_or("fault \"huge_body\" needs a \"bytes\" field")?),
            "redirect" => Fault::Redirect,
            "delay" => Fault::Delay(Duration::from_millis(self.delay_ms.ok_or("fault \"delay\" needs a \"delay_ms\" field")?)),
            other => {
                return Err(format!(
                    "fault: unknown kind \"{other}\" (expected hang, status, html, truncated, malformed_json, huge_body, redirect, delay)"
                ))
            }
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvanceRequest {
    ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateRequest {
    multiplier: f64,
}

/// The model's own view of a job (no staleness), for scripts, demos and tests.
pub(crate) fn model_json(world: &mut World, j: usize) -> Value {
    let job = &mut world.jobs[j];
    let vertices = serde_json::to_value(job.vertex_models()).unwrap_or(Value::Null);
    json!({
        "id": job.id(),
        "name": job.spec.name,
        "state": job.phase.job_status(),
        "now_ms": job.t_ms,
        "restarts": job.restarts,
        "rescales": job.rescales,
        "rescale_in_flight": job.rescale_in_flight(),
        "rate_multiplier": job.rate_multiplier,
        "vertices": vertices,
    })
}

/// Handles a `/_sim/...` request.
pub(crate) fn handle(
    world: &mut World,
    method: &Method,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Reply {
    world.sync();
    let segs = segments(path);
    let parse = |b: &[u8]| serde_json::from_slice::<Value>(if b.is_empty() { b"{}" } else { b });
    match (method.clone(), &segs[1..]) {
        (Method::GET, ["stats"]) => Reply::json(200, &stats_json(&world.stats)),
        (Method::DELETE, ["stats"]) => {
            world.reset_stats();
            Reply::json(200, &json!({}))
        }
        (Method::GET, ["polls"]) => Reply::json(
            200,
            &serde_json::to_value(world.polls.report()).unwrap_or(Value::Null),
        ),
        (Method::GET, ["clock"]) => Reply::json(
            200,
            &json!({ "now_ms": world.clock.now_ms(), "start_ms": world.start_ms, "manual": world.clock.manual(), "speed": world.clock.speed() }),
        ),
        (Method::POST, ["clock", "advance"]) => {
            match serde_json::from_slice::<AdvanceRequest>(body) {
                Ok(r) => {
                    let now = world.advance(Duration::from_millis(r.ms));
                    Reply::json(200, &json!({ "now_ms": now }))
                }
                Err(e) => bad_request(&format!("body must be {{\"ms\": <milliseconds>}}: {e}")),
            }
        }
        (Method::GET, ["jobs"]) => {
            let all: Vec<Value> = (0..world.jobs.len())
                .map(|j| model_json(world, j))
                .collect();
            Reply::json(200, &Value::Array(all))
        }
        (Method::GET, ["jobs", jid]) => match world.job_index(&jid.to_ascii_lowercase()) {
            Some(j) => Reply::json(200, &model_json(world, j)),
            None => unknown_job(jid),
        },
        (Method::DELETE, ["jobs", jid]) => {
            if world.remove_job(&jid.to_ascii_lowercase()) {
                Reply::json(200, &json!({}))
            } else {
                unknown_job(jid)
            }
        }
        (Method::POST, ["jobs", jid, "rate"]) => {
            let Some(j) = world.job_index(&jid.to_ascii_lowercase()) else {
                return unknown_job(jid);
            };
            match serde_json::from_slice::<RateRequest>(body) {
                Ok(r) if r.multiplier.is_finite() && r.multiplier >= 0.0 => {
                    world.jobs[j].set_rate_multiplier(r.multiplier);
                    Reply::json(200, &json!({ "multiplier": r.multiplier }))
                }
                Ok(r) => bad_request(&format!(
                    "multiplier: must be a finite number >= 0, got {}",
                    r.multiplier
                )),
                Err(e) => bad_request(&format!("body must be {{\"multiplier\": <number>}}: {e}")),
            }
        }
        (Method::POST, ["jobs", jid, "restart"]) => {
            match world.job_index(&jid.to_ascii_lowercase()) {
                Some(j) => {
                    world.jobs[j].restart();
                    Reply::json(200, &json!({ "state": world.jobs[j].phase.job_status() }))
                }
                None => unknown_job(jid),
            }
        }
        (Method::PUT, ["faults"]) => {
            if parse(body).is_err() {
                return bad_request("body must be JSON");
            }
            let req: FaultRequest = match serde_json::from_slice(body) {
                Ok(r) => r,
                Err(e) => return bad_request(&format!("invalid fault request: {e}")),
            };
            let fault = match req.to_fault() {
                Ok(f) => f,
                Err(e) => return bad_request(&e),
            };
            match &req.job {
                Some(jid)
                    if !is_flink_id(jid)
                        || world.job_index(&jid.to_ascii_lowercase()).is_none() =>
                {
                    unknown_job(jid)
                }
                Some(jid) => {
                    world.job_faults.insert(jid.to_ascii_lowercase(), fault);
                    Reply::json(200, &json!({}))
                }
                None => {
                    world.global_fault = Some(fault);
                    Reply::json(200, &json!({}))
                }
            }
        }
        (Method::DELETE, ["faults"]) => {
            let q = super::Query::parse(query);
            match q.get("job") {
                Some(jid) => {
                    world.job_faults.remove(&jid.to_ascii_lowercase());
                }
                None => {
                    world.global_fault = None;
                    world.job_faults.clear();
                }
            }
            Reply::json(200, &json!({}))
        }
        _ => Reply::json(404, &json!({ "errors": [format!("Not found: {path}")] })),
    }
}

/// `/_sim/stats`: the accounting plus the modeled JobManager CPU (`cost.rs`), in total
/// (`jobmanager_cpu_ms` and its parts under `jobmanager_cpu`) and per endpoint.
fn stats_json(stats: &SimStats) -> Value {
    let model = CostModel::CALIBRATED;
    let mut v = serde_json::to_value(stats).unwrap_or(Value::Null);
    let total = model.cpu(&stats.counts());
    v["jobmanager_cpu_ms"] = json!(total.jobmanager_cpu_ms);
    v["jobmanager_cpu"] = serde_json::to_value(total).unwrap_or(Value::Null);
    for (endpoint, e) in &stats.by_endpoint {
        let (refreshes, fetched) = (e.fetcher_refreshes, e.fetched_entries);
        let counts = CostCounts::new(
            refreshes,
            fetched,
            e.requests,
            e.entries_touched,
            e.response_bytes,
        );
        v["by_endpoint"][endpoint]["jobmanager_cpu_ms"] =
            json!(model.cpu(&counts).jobmanager_cpu_ms);
    }
    v
}
