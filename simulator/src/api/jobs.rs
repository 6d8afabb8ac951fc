//! ExecutionGraph-backed job endpoints: `/jobs/:jobid`, `/status`, `/plan`, `/checkpoints`,
//! `/vertices/:vertexid` and `/vertices/:vertexid/backpressure`. These 404 for unknown ids.

use serde_json::{json, Map, Value};

use super::cluster::{duration, end_time, scheduler_type};
use super::Reply;
use crate::format::json_f64;
use crate::job::{CheckpointRecord, JobSim, Phase};
use crate::scenario::ShipStrategy;
use crate::view::{JobView, VertexView};
use crate::world::World;

/// IO counters Flink sums per vertex (`IOMetricsInfo`).
const IO_FIELDS: u64 = 7;

fn job_mut<'a>(world: &'a mut World, jid: &str) -> Result<&'a mut JobSim, Reply> {
    match world.job_index(jid) {
        Some(j) => Ok(&mut world.jobs[j]),
        None => Err(Reply::job_not_found(jid)),
    }
}

fn vertex_not_found(vid: &str) -> Reply {
    Reply::handler_error(
        404,
        "org.apache.flink.runtime.rest.NotFoundException",
        &format!("JobVertex {vid} not found"),
    )
}

/// Sums of one vertex's (or one subtask's) IO counters; `None` view = metrics not fetched yet.
fn io_metrics(job: &JobSim, v: usize, view: Option<&VertexView>, subtask: Option<usize>) -> Value {
    let spec = &job.spec.vertices[v];
    let is_source = spec.source.is_some();
    let is_sink = !job.spec.has_outputs(v);
    let running = job.phase == Phase::Running;
    let (mut rin, mut rout, mut busy, mut idle, mut bp) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let complete = match view {
        Some(vv) if !vv.subtasks.is_empty() => {
            let range = match subtask {
                Some(i) => i..i + 1,
                None => 0..vv.subtasks.len(),
            };
            for s in vv.subtasks.get(range).unwrap_or(&[]) {
                rin += if is_source { 0.0 } else { s.counters.rec_in };
                rout += if is_sink { 0.0 } else { s.counters.rec_out };
                busy += s.counters.busy_ms;
                idle += s.counters.idle_ms;
                bp += s.counters.backpressured_ms;
            }
            true
        }
        _ => !running,
    };
    let bytes = spec.record_bytes;
    json!({
        "read-bytes": (rin * bytes).round() as u64,
        "read-bytes-complete": complete,
        "write-bytes": (rout * bytes).round() as u64,
        "write-bytes-complete": complete,
        "read-records": rin.round() as u64,
        "read-records-complete": complete,
        "write-records": rout.round() as u64,
        "write-records-complete": complete,
        "accumulated-backpressured-time": bp.round() as u64,
        "accumulated-idle-time": idle.round() as u64,
        "accumulated-busy-time": json_f64(busy.round()),
    })
}

/// The state of a task of the job (all of them share it, but for FINISHED ones).
fn task_status(job: &JobSim) -> &'static str {
    match job.phase {
        Phase::Running => "RUNNING",
        Phase::Restarting { .. } => "SCHEDULED",
        Phase::Finished {
            canceled: false, ..
        } => "FINISHED",
        Phase::Finished { canceled: true, .. } => "CANCELED",
    }
}

/// A vertex's aggregate state: FINISHED once all its subtasks finished.
fn vertex_status(job: &JobSim, v: usize) -> &'static str {
    let p = job.parallelism()[v];
    if p > 0 && job.finished_subtasks(v) >= p {
        "FINISHED"
    } else {
        task_status(job)
    }
}

/// The state of subtask `i` of vertex `v`: the last ones of a vertex FINISH when they got
/// no split.
fn subtask_status(job: &JobSim, v: usize, i: usize) -> &'static str {
    let p = job.parallelism()[v] as usize;
    if i + job.finished_subtasks(v) as usize >= p {
        "FINISHED"
    } else {
        task_status(job)
    }
}

const STATES: [&str; 10] = [
    "CANCELED",
    "FAILED",
    "SCHEDULED",
    "CANCELING",
    "DEPLOYING",
    "RECONCILING",
    "FINISHED",
    "CREATED",
    "RUNNING",
    "INITIALIZING",
];

/// Execution states in the order Flink lists them, with `counts` per state.
fn state_object(counts: &[(&str, usize)]) -> Value {
    Value::Object(
        STATES
            .iter()
            .map(|s| {
                let n: usize = counts.iter().filter(|(c, _)| c == s).map(|(_, n)| n).sum();
                (s.to_string(), json!(n))
            })
            .collect(),
    )
}

/// Vertex `v`'s subtasks per execution state.
fn subtask_counts(job: &JobSim, v: usize) -> Value {
    let p = job.parallelism()[v] as usize;
    let finished = job.finished_subtasks(v) as usize;
    state_object(&[(task_status(job), p - finished), ("FINISHED", finished)])
}

/// The job's vertices per aggregate state.
fn vertex_counts(job: &JobSim) -> Value {
    let states: Vec<(&str, usize)> = (0..job.spec.vertices.len())
        .map(|v| (vertex_status(job, v), 1))
        .collect();
    state_object(&states)
}

fn timestamps(job: &JobSim) -> Value {
    let mut m = Map::new();
    let restarting = if job.restarts > 0 {
        job.running_since_ms.saturating_sub(job.spec.downtime_ms)
    } else {
        0
    };
    let finished = match job.phase {
        Phase::Finished { at_ms, .. } => at_ms,
        _ => 0,
    };
    for (k, v) in [
        ("RESTARTING", restarting),
        ("FAILING", 0),
        (
            "CREATED",
            job.running_since_ms
                .saturating_sub(150)
                .max(job.submitted_ms),
        ),
        ("SUSPENDED", 0),
        ("CANCELED", 0),
        ("FINISHED", finished),
        ("INITIALIZING", job.submitted_ms),
        ("RUNNING", job.running_since_ms),
        ("CANCELLING", 0),
        ("FAILED", 0),
        ("RECONCILING", 0),
    ] {
        m.insert(k.into(), json!(v));
    }
    Value::Object(m)
}

fn plan_json(job: &JobSim) -> Value {
    let p = job.parallelism();
    let nodes: Vec<Value> = job
        .spec
        .vertices
        .iter()
        .enumerate()
        .map(|(v, vs)| {
            let mut ops = vs.name.split(" -> ");
            let mut description = format!("{}<br/>", ops.next().unwrap_or(&vs.name));
            for op in ops {
                description.push_str(&format!("+- {op}<br/>"));
            }
            let mut node = json!({
                "id": vs.id,
                "operator": "",
                "parallelism": p[v],
                "operator_strategy": "",
                "description": description,
                "optimizer_properties": {},
            });
            let inputs: Vec<Value> = job
                .spec
                .inputs_of(v)
                .enumerate()
                .map(|(num, e)| {
                    // After a rescale breaks equal parallelism, Flink shows FORWARD as REBALANCE.
                    let ship = if e.ship == ShipStrategy::Forward && p[e.from] != p[v] {
                        ShipStrategy::Rebalance
                    } else {
                        e.ship
                    };
                    json!({
                        "id": job.spec.vertices[e.from].id,
                        "num": num,
                        "exchange": "pipelined_bounded",
                        "ship_strategy": ship.as_str(),
                    })
                })
                .collect();
            if !inputs.is_empty() {
                node["inputs"] = Value::Array(inputs);
            }
            node
        })
        .collect();
    json!({ "jid": job.id(), "name": job.spec.name, "type": "STREAMING", "nodes": nodes })
}

pub(super) fn details(world: &mut World, jid: &str) -> Reply {
    let scheduler = scheduler_type(world);
    let job = match job_mut(world, jid) {
        Ok(j) => j,
        Err(r) => return r,
    };
    let view = job.metrics_view();
    let p = job.parallelism();
    let now = job.t_ms;
    let mut touched = 0u64;
    let vertices: Vec<Value> = job
        .spec
        .vertices
        .iter()
        .enumerate()
        .map(|(v, vs)| {
            let vv = view
                .as_deref()
                .and_then(|view| view.vertices.get(v))
                .filter(|vv| vv.parallelism == p[v]);
            touched += vv.map_or(0, |vv| vv.subtasks.len() as u64) * IO_FIELDS;
            json!({
                "id": vs.id,
                "slotSharingGroupId": crate::ids::stable_id(&["slot-sharing-group", job.id()]),
                "name": vs.name,
                "maxParallelism": vs.max_parallelism,
                "parallelism": p[v],
                "status": vertex_status(job, v),
                "start-time": job.running_since_ms,
                "end-time": end_time(job),
                "duration": now.saturating_sub(job.running_since_ms),
                "tasks": subtask_counts(job, v),
                "metrics": io_metrics(job, v, vv, None),
            })
        })
        .collect();
    let mut body = json!({
        "jid": job.id(),
        "application-id": job.id(),
        "name": job.spec.name,
        "isStoppable": false,
        "state": job.phase.job_status(),
        "job-type": "STREAMING",
        "schedulerType": scheduler,
        "start-time": job.submitted_ms,
        "end-time": end_time(job),
        "duration": duration(job),
        "maxParallelism": -1,
        "now": now,
        "timestamps": timestamps(job),
        "vertices": vertices,
        "status-counts": vertex_counts(job),
        "plan": plan_json(job),
        "pending-operators": 0,
    });
    if scheduler.is_none() {
        if let Some(fields) = body.as_object_mut() {
            fields.remove("schedulerType");
        }
    }
    Reply::json(200, &body).with_entries(touched)
}

pub(super) fn status(world: &mut World, jid: &str) -> Reply {
    match job_mut(world, jid) {
        Ok(job) => Reply::json(200, &json!({ "status": job.phase.job_status() })),
        Err(r) => r,
    }
}

pub(super) fn plan(world: &mut World, jid: &str) -> Reply {
    match job_mut(world, jid) {
        Ok(job) => Reply::json(200, &json!({ "plan": plan_json(job) })),
        Err(r) => r,
    }
}

fn stats(values: &[u64]) -> Value {
    if values.is_empty() {
        return json!({ "min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0 });
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let pct = |q: f64| {
        let idx = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[idx] as f64
    };
    json!({
        "min": sorted[0],
        "max": sorted[sorted.len() - 1],
        "avg": sorted.iter().sum::<u64>() / sorted.len() as u64,
        "p50": pct(0.5), "p90": pct(0.9), "p95": pct(0.95), "p99": pct(0.99), "p999": pct(0.999),
    })
}

fn checkpoint_json(c: &CheckpointRecord, subtasks: u32) -> Value {
    json!({
        "className": "completed",
        "id": c.id,
        "status": "COMPLETED",
        "is_savepoint": c.is_savepoint,
        "savepointFormat": if c.is_savepoint { json!("CANONICAL") } else { Value::Null },
        "trigger_timestamp": c.trigger_ms,
        "latest_ack_timestamp": c.trigger_ms + c.duration_ms,
        "checkpointed_size": c.checkpointed_size,
        "state_size": c.state_size,
        "end_to_end_duration": c.duration_ms,
        "alignment_buffered": 0,
        "processed_data": c.checkpointed_size / 6,
        "persisted_data": 0,
        "num_subtasks": subtasks,
        "num_acknowledged_subtasks": subtasks,
        "checkpoint_type": if c.is_savepoint { "SAVEPOINT" } else { "CHECKPOINT" },
        "tasks": {},
        "external_path": c.external_path,
        "discarded": false,
    })
}

pub(super) fn checkpoints(world: &mut World, jid: &str) -> Reply {
    let job = match job_mut(world, jid) {
        Ok(j) => j,
        Err(r) => return r,
    };
    if job.spec.checkpoint_interval_ms == 0 && job.checkpoints.history.is_empty() {
        return Reply::handler_error(
            404,
            "org.apache.flink.runtime.rest.NotFoundException",
            "Checkpointing has not been enabled.",
        );
    }
    let subtasks: u32 = job.parallelism().iter().sum();
    let log = &job.checkpoints;
    let hist = &log.history;
    let col = |f: fn(&CheckpointRecord) -> u64| hist.iter().map(f).collect::<Vec<u64>>();
    let latest_completed = hist
        .iter()
        .rev()
        .find(|c| !c.is_savepoint)
        .map(|c| checkpoint_json(c, subtasks));
    let restored = log.restored.map(|(id, ts)| {
        json!({ "id": id, "restore_timestamp": ts, "is_savepoint": false, "external_path": format!("file:/tmp/flink-sim/checkpoints/{}/chk-{id}", job.spec.id) })
    });
    let body = json!({
        "counts": {
            "restored": u64::from(log.restored.is_some()) * job.restarts,
            "total": log.completed,
            "in_progress": 0,
            "completed": log.completed,
            "failed": 0,
        },
        "summary": {
            "checkpointed_size": stats(&col(|c| c.checkpointed_size)),
            "state_size": stats(&col(|c| c.state_size)),
            "end_to_end_duration": stats(&col(|c| c.duration_ms)),
            "alignment_buffered": stats(&col(|_| 0)),
            "processed_data": stats(&col(|c| c.checkpointed_size / 6)),
            "persisted_data": stats(&col(|_| 0)),
        },
        "latest": {
            "completed": latest_completed,
            "savepoint": log.latest_savepoint.as_ref().map(|c| checkpoint_json(c, subtasks)),
            "failed": Value::Null,
            "restored": restored,
        },
        "history": hist.iter().rev().map(|c| checkpoint_json(c, subtasks)).collect::<Vec<_>>(),
    });
    Reply::json(200, &body)
}

/// Finds the vertex and the metric view for vertex-scoped ExecutionGraph endpoints.
fn vertex_and_view(
    world: &mut World,
    jid: &str,
    vid: &str,
) -> Result<(usize, usize, Option<std::sync::Arc<JobView>>), Reply> {
    let j = world
        .job_index(jid)
        .ok_or_else(|| Reply::job_not_found(jid))?;
    let v = world.jobs[j]
        .spec
        .vertex_index(vid)
        .ok_or_else(|| vertex_not_found(vid))?;
    let view = world.jobs[j].metrics_view();
    Ok((j, v, view))
}

pub(super) fn vertex(world: &mut World, jid: &str, vid: &str) -> Reply {
    let (j, v, view) = match vertex_and_view(world, jid, vid) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let tm_ids = world.taskmanager_ids();
    let per_tm = world.cluster.slots_per_taskmanager as usize;
    let job = &world.jobs[j];
    let p = job.parallelism()[v];
    let vv = view
        .as_deref()
        .and_then(|view| view.vertices.get(v))
        .filter(|vv| vv.parallelism == p);
    let now = job.t_ms;
    let running_for = now.saturating_sub(job.running_since_ms);
    let subtasks: Vec<Value> = (0..p as usize)
        .map(|i| {
            let tm = &tm_ids[(i / per_tm.max(1)).min(tm_ids.len().saturating_sub(1))];
            let host = tm.split(':').next().unwrap_or("127.0.0.1");
            json!({
                "subtask": i,
                "status": subtask_status(job, v, i),
                "attempt": 0,
                "endpoint": format!("{host}:46627"),
                "start-time": job.running_since_ms,
                "end-time": -1,
                "duration": running_for,
                "metrics": io_metrics(job, v, vv, Some(i)),
                "taskmanager-id": tm,
                "status-duration": { "SCHEDULED": 26, "DEPLOYING": 320, "CREATED": 96, "RUNNING": running_for, "INITIALIZING": 279 },
                "start_time": job.running_since_ms,
            })
        })
        .collect();
    let body = json!({
        "id": vid,
        "name": job.spec.vertices[v].name,
        "parallelism": p,
        "maxParallelism": job.spec.vertices[v].max_parallelism,
        "now": now,
        "subtasks": subtasks,
        "aggregated": aggregated(job, v, vv, p, running_for),
    });
    Reply::json(200, &body).with_entries(u64::from(p) * IO_FIELDS)
}

/// Flink's per-vertex distribution summary of a per-subtask number.
fn distribution(values: &mut [u64]) -> Value {
    if values.is_empty() {
        return json!({ "p25": 0, "min": 0, "avg": 0, "median": 0, "max": 0, "sum": 0, "p95": 0, "p75": 0 });
    }
    values.sort_unstable();
    let n = values.len();
    let at = |q: f64| values[((q * (n - 1) as f64).round() as usize).min(n - 1)];
    let sum: u64 = values.iter().sum();
    json!({
        "p25": at(0.25), "min": values[0], "avg": sum / n as u64, "median": at(0.5),
        "max": values[n - 1], "sum": sum, "p95": at(0.95), "p75": at(0.75),
    })
}

/// The `aggregated` block of `/jobs/:jobid/vertices/:vertexid`.
fn aggregated(job: &JobSim, v: usize, vv: Option<&VertexView>, p: u32, running_for: u64) -> Value {
    let per_subtask: Vec<Value> = (0..p as usize)
        .map(|i| io_metrics(job, v, vv, Some(i)))
        .collect();
    let mut metrics = Map::new();
    for key in [
        "write-records",
        "accumulated-backpressured-time",
        "accumulated-idle-time",
        "write-bytes",
        "read-bytes",
        "read-records",
        "accumulated-busy-time",
    ] {
        let mut values: Vec<u64> = per_subtask
            .iter()
            .map(|m| m[key].as_f64().unwrap_or(0.0) as u64)
            .collect();
        metrics.insert(key.into(), distribution(&mut values));
    }
    let mut status = Map::new();
    for (state, d) in [
        ("CREATED", 96),
        ("RUNNING", running_for),
        ("INITIALIZING", 279),
        ("SCHEDULED", 26),
        ("DEPLOYING", 320),
    ] {
        status.insert(state.into(), distribution(&mut vec![d; p as usize]));
    }
    json!({ "metrics": metrics, "status-duration": status })
}

fn level(ratio: f64) -> &'static str {
    if ratio <= 0.10 {
        "ok"
    } else if ratio <= 0.5 {
        "low"
    } else {
        "high"
    }
}

pub(super) fn backpressure(world: &mut World, jid: &str, vid: &str) -> Reply {
    let (_, v, view) = match vertex_and_view(world, jid, vid) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(vv) = view
        .as_deref()
        .and_then(|view| view.vertices.get(v))
        .filter(|vv| !vv.subtasks.is_empty())
    else {
        return Reply::json(
            200,
            &json!({ "status": "deprecated", "backpressureLevel": "ok", "end-timestamp": 0, "subtasks": [], "backpressure-level": "ok" }),
        );
    };
    let mut max_ratio: f64 = 0.0;
    let subtasks: Vec<Value> = vv
        .subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ratio = s.backpressured / 1000.0;
            max_ratio = max_ratio.max(ratio);
            json!({
                "subtask": i,
                "backpressureLevel": level(ratio),
                "ratio": ratio,
                "idleRatio": s.idle / 1000.0,
                "busyRatio": s.busy / 1000.0,
                "backpressure-level": level(ratio),
            })
        })
        .collect();
    let entries = subtasks.len() as u64 * 3;
    let end_ts = view.as_deref().map_or(0, |v| v.t_ms);
    let body = json!({
        "status": "ok",
        "backpressureLevel": level(max_ratio),
        "end-timestamp": end_ts,
        "subtasks": subtasks,
        "backpressure-level": level(max_ratio),
    });
    Reply::json(200, &body).with_entries(entries)
}
