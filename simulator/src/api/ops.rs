//! Job operations: adaptive-scheduler rescale (`/resource-requirements`), savepoints,
//! stop-with-savepoint and cancel.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::cluster::savepoint_dir;
use super::Reply;
use crate::ids::is_flink_id;
use crate::job::Phase;
use crate::world::World;

const REST_EXCEPTION: &str = "org.apache.flink.runtime.rest.handler.RestHandlerException";

fn job_not_found_internal(jid: &str) -> Reply {
    Reply::internal(
        "org.apache.flink.runtime.messages.FlinkJobNotFoundException",
        &format!("Could not find Flink job ({jid})"),
    )
}

fn default_scheduler_error() -> Reply {
    Reply::internal(
        "java.lang.UnsupportedOperationException",
        "The DefaultScheduler does not support changing the parallelism without a job restart. This feature is currently only expected to work with the AdaptiveScheduler.",
    )
}

/// `GET /jobs/:jobid/resource-requirements`
pub(super) fn get_requirements(world: &mut World, jid: &str) -> Reply {
    let Some(j) = world.job_index(jid) else {
        return job_not_found_internal(jid);
    };
    if !world.cluster.adaptive_scheduler {
        return default_scheduler_error();
    }
    let job = &world.jobs[j];
    let mut m = Map::new();
    for (vs, (lower, upper)) in job.spec.vertices.iter().zip(&job.requirements) {
        m.insert(
            vs.id.clone(),
            json!({ "parallelism": { "lowerBound": lower, "upperBound": upper } }),
        );
    }
    Reply::json(200, &Value::Object(m))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Bounds {
    #[serde(rename = "lowerBound")]
    lower: i64,
    #[serde(rename = "upperBound")]
    upper: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VertexRequirement {
    parallelism: Bounds,
}

/// `PUT /jobs/:jobid/resource-requirements`: answers `200 {}` and rescales after the
/// scenario's delay and downtime.
pub(super) fn put_requirements(world: &mut World, jid: &str, body: &[u8]) -> Reply {
    let Some(j) = world.job_index(jid) else {
        return job_not_found_internal(jid);
    };
    let parsed: BTreeMap<String, VertexRequirement> = match serde_json::from_slice(body) {
        Ok(p) => p,
        Err(_) => {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                "Request did not match expected format JobResourceRequirementsBody.",
            )
        }
    };
    if parsed.is_empty() {
        return Reply::handler_error(
            400,
            REST_EXCEPTION,
            "Request body does not specify resource requirements.",
        );
    }
    if !world.cluster.adaptive_scheduler {
        return default_scheduler_error();
    }
    // With a fixed number of task managers the adaptive scheduler runs at most at the free
    // slots; without one, task managers come and go as needed (like native Kubernetes).
    let available = match world.cluster.taskmanagers {
        Some(_) => {
            world.slots_total().saturating_sub(world.slots_used()) + world.jobs[j].slots_used()
        }
        None => u32::MAX,
    };
    let job = &mut world.jobs[j];
    if job.rescale_in_flight() {
        return Reply::handler_error(
            409,
            REST_EXCEPTION,
            "Another update to the job [%s] resource requirements is in progress.",
        );
    }
    if matches!(job.phase, Phase::Finished { .. }) {
        return job_not_found_internal(jid);
    }
    for vid in parsed.keys() {
        if !is_flink_id(vid) || job.spec.vertex_index(&vid.to_ascii_lowercase()).is_none() {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!(
                    "The request contains resource requirements for an unknown job vertex [{vid}]."
                ),
            );
        }
    }
    let mut requirements = Vec::with_capacity(job.spec.vertices.len());
    for vs in &job.spec.vertices {
        let Some(req) = parsed
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&vs.id))
            .map(|(_, r)| r)
        else {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!(
                    "The request is incomplete, missing job vertex [{}] resource requirements.",
                    vs.id
                ),
            );
        };
        let max = i64::from(vs.max_parallelism);
        // An upper bound of -1 means "as much as possible", i.e. the max parallelism.
        let upper = if req.parallelism.upper == -1 {
            max
        } else {
            req.parallelism.upper
        };
        let lower = req.parallelism.lower;
        if upper > max {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!("The newly requested parallelism {upper} for the job vertex {} exceeds its maximum parallelism {max}.", vs.id),
            );
        }
        if lower < 1 || upper < 1 {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!("The requested bounds [{lower}, {upper}] for job vertex [{}] must be at least 1.", vs.id),
            );
        }
        if lower > upper {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!("The requested lower bound [{lower}] for job vertex [{}] is higher than the upper bound [{upper}].", vs.id),
            );
        }
        requirements.push((lower as u32, upper as u32));
    }
    job.accept_rescale(requirements, available);
    Reply::raw(200, "{}".into())
}

#[derive(Deserialize, Default)]
struct SavepointRequest {
    #[serde(rename = "targetDirectory", alias = "target-directory")]
    target_directory: Option<String>,
    #[serde(rename = "triggerId")]
    trigger_id: Option<String>,
    #[serde(rename = "cancel-job", default)]
    cancel_job: bool,
}

/// `POST /jobs/:jobid/stop` (stop = true) and `POST /jobs/:jobid/savepoints`.
pub(super) fn savepoint(world: &mut World, jid: &str, body: &[u8], stop: bool) -> Reply {
    let Some(j) = world.job_index(jid) else {
        return Reply::job_not_found(jid);
    };
    let req: SavepointRequest = if body.iter().all(u8::is_ascii_whitespace) {
        SavepointRequest::default()
    } else {
        match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return Reply::handler_error(
                    400,
                    REST_EXCEPTION,
                    &format!("Request did not match expected format: {e}"),
                );
            }
        }
    };
    if let Some(t) = &req.trigger_id {
        if !is_flink_id(t) {
            return Reply::handler_error(
                400,
                REST_EXCEPTION,
                &format!("Invalid triggerId \"{t}\"."),
            );
        }
    }
    if world.jobs[j].phase != Phase::Running {
        return Reply::handler_error(
            409,
            REST_EXCEPTION,
            &format!("Job {jid} is not in state RUNNING."),
        );
    }
    let dir = req
        .target_directory
        .unwrap_or_else(|| savepoint_dir(world, Some(j)));
    let trigger = world.jobs[j].trigger_savepoint(
        &dir,
        stop || req.cancel_job,
        req.trigger_id.map(|t| t.to_ascii_lowercase()),
    );
    Reply::json(202, &json!({ "request-id": trigger }))
}

/// `GET /jobs/:jobid/savepoints/:triggerid`
pub(super) fn savepoint_status(world: &mut World, jid: &str, tid: &str) -> Reply {
    let op = world.job_index(jid).and_then(|j| {
        let job = &world.jobs[j];
        job.savepoints
            .iter()
            .find(|s| s.trigger_id == tid)
            .map(|s| (s.done_at_ms <= job.t_ms, s.location.clone()))
    });
    match op {
        None => Reply::handler_error(
            404,
            REST_EXCEPTION,
            &format!("There is no savepoint operation with triggerId={tid} for job {jid}."),
        ),
        Some((false, _)) => Reply::json(200, &json!({ "status": { "id": "IN_PROGRESS" } })),
        Some((true, location)) => Reply::json(
            200,
            &json!({ "status": { "id": "COMPLETED" }, "operation": { "location": location } }),
        ),
    }
}

/// `PATCH /jobs/:jobid?mode=cancel`: the simulator treats cancel as an immediate stop.
pub(super) fn cancel(world: &mut World, jid: &str) -> Reply {
    let Some(j) = world.job_index(jid) else {
        return Reply::job_not_found(jid);
    };
    world.jobs[j].cancel();
    Reply::raw(202, "{}".into())
}
