//! Flink 2.3's rescale history: `/jobs/:jid/rescales/overview`, `/history` and
//! `/details/:rescaleuuid`, in the shapes a real 2.3.0 JobManager answers (captured samples
//! in `agent/tests/fixtures/flink-rest-samples/rescale-history/`). Served when the scenario
//! sets `web.adaptive-scheduler.rescale-history.size` above 0 under the adaptive scheduler;
//! a 2.3 JobManager otherwise answers 404 naming that option, and older versions do not know
//! the routes.

use serde_json::{json, Map, Value};

use super::Reply;
use crate::job::JobSim;
use crate::rescales::RescaleRecord;
use crate::scenario::RESCALE_HISTORY_SIZE;
use crate::world::World;

const REST_EXCEPTION: &str = "org.apache.flink.runtime.rest.handler.RestHandlerException";

/// `GET /jobs/:jobid/rescales/{overview,history,details/:uuid}`; `rest` is what follows
/// `rescales/`.
pub(super) fn get(world: &mut World, jid: &str, rest: &[&str]) -> Reply {
    let Some(j) = world.job_index(jid) else {
        return Reply::job_not_found(jid);
    };
    if !world.cluster.serves_rescale_history() {
        return Reply::handler_error(
            404,
            REST_EXCEPTION,
            &format!(
                "The job `{jid}` has not enabled the `Adaptive` scheduler, or it has been enabled but the value of configuration option `{RESCALE_HISTORY_SIZE}` has not been set to greater than `0`."
            ),
        );
    }
    let job = &world.jobs[j];
    let log = &job.rescale_log;
    match rest {
        ["overview"] => {
            let latest = |state| log.latest(state).map_or(Value::Null, brief);
            Reply::json(
                200,
                &json!({
                    "rescalesCounts": {
                        "ignored": log.counts.ignored,
                        "inProgress": log.in_progress(),
                        "completed": log.counts.completed,
                        "failed": log.counts.failed,
                    },
                    "latest": {
                        "completed": latest("COMPLETED"),
                        "failed": latest("FAILED"),
                        "ignored": latest("IGNORED"),
                    },
                }),
            )
        }
        ["history"] => Reply::json(
            200,
            &Value::Array(log.records.iter().rev().map(brief).collect()),
        ),
        ["details", uuid] => {
            if uuid.len() != 32 || !uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Reply::bad_path_param("rescaleuuid", uuid);
            }
            match log.find(uuid) {
                Some(r) => Reply::json(200, &details(job, r)),
                None => Reply::handler_error(
                    404,
                    REST_EXCEPTION,
                    &format!("Could not find rescale details of specified rescaleUuid {uuid}."),
                ),
            }
        }
        _ => Reply::not_found_route(&format!("/jobs/{jid}/rescales/{}", rest.join("/"))),
    }
}

/// A history entry: the record without its vertices, slots and states (as Flink lists them).
fn brief(r: &RescaleRecord) -> Value {
    json!({
        "rescaleUuid": r.uuid,
        "resourceRequirementsUuid": r.requirements_uuid,
        "rescaleAttemptId": 1,
        "vertices": {},
        "slots": {},
        "schedulerStates": [],
        "startTimestampInMillis": r.start_ms,
        "endTimestampInMillis": r.end_ms,
        "terminalState": r.ending.map(|e| e.terminal_state()),
        "triggerCause": r.trigger.as_str(),
        "terminatedReason": r.ending.map(|e| e.reason()),
    })
}

/// The full record of `/rescales/details/:uuid`.
fn details(job: &JobSim, r: &RescaleRecord) -> Value {
    let group = crate::ids::stable_id(&["slot-sharing-group", job.id()]);
    let at = |list: &Option<Vec<u32>>, v: usize| {
        list.as_ref()
            .and_then(|l| l.get(v).copied())
            .map_or(Value::Null, |p| json!(p))
    };
    let mut vertices = Map::new();
    for (v, spec) in job.spec.vertices.iter().enumerate() {
        vertices.insert(
            spec.id.clone(),
            json!({
                "jobVertexId": spec.id,
                "jobVertexName": spec.name,
                "slotSharingGroupId": group,
                "slotSharingGroupName": "default",
                "desiredParallelism": r.desired.get(v),
                "sufficientParallelism": r.sufficient.get(v),
                "preRescaleParallelism": at(&r.pre, v),
                "postRescaleParallelism": at(&r.post, v),
            }),
        );
    }
    // One slot-sharing group: it needs as many slots as its largest vertex.
    let max = |list: Option<&Vec<u32>>| list.and_then(|l| l.iter().max().copied());
    let profile = json!({"cpuCores": -1.0, "taskHeapMemory": -1, "taskOffHeapMemory": -1,
                          "managedMemory": -1, "networkMemory": -1, "extendedResources": {}});
    let slots = json!({ group.clone(): {
        "slotSharingGroupId": group,
        "slotSharingGroupName": "default",
        "requestResourceProfile": profile,
        "desiredSlots": max(Some(&r.desired)),
        "minimalRequiredSlots": max(Some(&r.sufficient)),
        "preRescaleSlots": max(r.pre.as_ref()),
        "postRescaleSlots": max(r.post.as_ref()),
        "acquiredResourceProfile": {"cpuCores": 1.0, "taskHeapMemory": 35, "taskOffHeapMemory": 0,
                                    "managedMemory": 54, "networkMemory": 13, "extendedResources": {}},
    }});
    let states: Vec<Value> = r
        .states
        .iter()
        .map(|s| {
            json!({
                "state": s.state,
                "enterTimestampInMillis": s.enter_ms,
                "leaveTimestampInMillis": s.leave_ms,
                "durationInMillis": s.leave_ms.map(|l| l.saturating_sub(s.enter_ms)),
                "stringifiedException": null,
            })
        })
        .collect();
    let mut body = brief(r);
    body["vertices"] = Value::Object(vertices);
    body["slots"] = slots;
    body["schedulerStates"] = Value::Array(states);
    body
}
