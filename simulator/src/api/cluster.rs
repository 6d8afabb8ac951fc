//! Cluster-level endpoints: `/overview`, `/config`, `/jobs`, `/jobs/overview`,
//! `/jobmanager/config` and `/taskmanagers`.

use serde_json::{json, Map, Value};

use super::Reply;
use crate::job::{JobSim, Phase};
use crate::world::World;

const FLINK_COMMIT: &str = "c0f8d1a";

pub(super) fn overview(world: &World) -> Reply {
    let count = |want: &str| {
        world
            .jobs
            .iter()
            .filter(|j| j.phase.job_status() == want)
            .count()
    };
    let running = world.jobs.len() - count("FINISHED") - count("CANCELED");
    let (finished, cancelled) = (count("FINISHED"), count("CANCELED"));
    let total = world.slots_total();
    Reply::json(
        200,
        &json!({
            "taskmanagers": world.taskmanager_count(),
            "slots-total": total,
            "slots-available": total.saturating_sub(world.slots_used()),
            "jobs-running": running,
            "jobs-finished": finished,
            "jobs-cancelled": cancelled,
            "jobs-failed": 0,
            "flink-version": world.cluster.flink_version,
            "flink-commit": FLINK_COMMIT,
        }),
    )
}

pub(super) fn config(world: &World) -> Reply {
    Reply::json(
        200,
        &json!({
            "refresh-interval": 3000,
            "timezone-name": "Coordinated Universal Time",
            "timezone-offset": 0,
            "flink-version": world.cluster.flink_version,
            "flink-revision": format!("{FLINK_COMMIT} @ 2026-06-14T16:29:03+02:00"),
            "features": { "web-submit": true, "web-cancel": true, "web-rescale": true, "web-history": false },
        }),
    )
}

pub(super) fn jobs(world: &World) -> Reply {
    let jobs: Vec<Value> = world
        .jobs
        .iter()
        .map(|j| json!({ "id": j.id(), "status": j.phase.job_status() }))
        .collect();
    Reply::json(200, &json!({ "jobs": jobs }))
}

/// `schedulerType` as Flink 2.3 reports it; older versions do not.
pub(super) fn scheduler_type(world: &World) -> Option<&'static str> {
    world
        .cluster
        .reports_scheduler_type()
        .then_some(if world.cluster.adaptive_scheduler {
            "Adaptive"
        } else {
            "Default"
        })
}

/// Task counts per state for `/jobs/overview` (lowercase keys, with a total).
fn task_counts(job: &JobSim) -> Value {
    let total: u32 = job.parallelism().iter().sum();
    let finished: u32 = (0..job.spec.vertices.len())
        .map(|v| job.finished_subtasks(v))
        .sum();
    let in_state = |state: &str| {
        let current = match job.phase {
            Phase::Running => "running",
            Phase::Restarting { .. } => "scheduled",
            Phase::Finished {
                canceled: false, ..
            } => "finished",
            Phase::Finished { canceled: true, .. } => "canceled",
        };
        match state {
            s if s == current && s == "running" => total - finished,
            s if s == current => total,
            "finished" => finished,
            _ => 0,
        }
    };
    let mut m = Map::new();
    m.insert("total".into(), json!(total));
    for state in [
        "running",
        "canceling",
        "canceled",
        "created",
        "scheduled",
        "deploying",
        "reconciling",
        "finished",
        "initializing",
        "failed",
    ] {
        m.insert(state.into(), json!(in_state(state)));
    }
    Value::Object(m)
}

pub(super) fn end_time(job: &JobSim) -> i64 {
    match job.phase {
        Phase::Finished { at_ms, .. } => at_ms as i64,
        _ => -1,
    }
}

pub(super) fn duration(job: &JobSim) -> u64 {
    let end = match job.phase {
        Phase::Finished { at_ms, .. } => at_ms,
        _ => job.t_ms,
    };
    end.saturating_sub(job.submitted_ms)
}

pub(super) fn jobs_overview(world: &World) -> Reply {
    let jobs: Vec<Value> = world
        .jobs
        .iter()
        .map(|j| {
            let mut entry = json!({
                "jid": j.id(),
                "name": j.spec.name,
                "jobType": "STREAMING",
                "schedulerType": scheduler_type(world),
                "start-time": j.submitted_ms,
                "end-time": end_time(j),
                "duration": duration(j),
                "state": j.phase.job_status(),
                "last-modification": j.last_modification(),
                "tasks": task_counts(j),
                "pending-operators": 0,
            });
            // Flink before 2.3 has neither field.
            if !world.cluster.reports_scheduler_type() {
                if let Some(fields) = entry.as_object_mut() {
                    fields.remove("schedulerType");
                    fields.remove("jobType");
                }
            }
            entry
        })
        .collect();
    Reply::json(200, &json!({ "jobs": jobs }))
}

/// The cluster configuration, plus the job's own keys when `job` is given.
pub(super) fn jobmanager_config(world: &World, job: Option<usize>) -> Reply {
    let fetch = world.fetcher.interval_ms();
    let mut pairs: Vec<(String, String)> = vec![
        ("jobmanager.rpc.address".into(), "127.0.0.1".into()),
        ("jobmanager.rpc.port".into(), "6123".into()),
        ("rest.port".into(), "8081".into()),
        ("rest.address".into(), "127.0.0.1".into()),
        (
            "jobmanager.scheduler".into(),
            if world.cluster.adaptive_scheduler {
                "adaptive"
            } else {
                "default"
            }
            .into(),
        ),
        (
            "taskmanager.numberOfTaskSlots".into(),
            world.cluster.slots_per_taskmanager.to_string(),
        ),
        ("parallelism.default".into(), "1".into()),
        ("metrics.fetcher.update-interval".into(), fetch.to_string()),
        ("web.refresh-interval".into(), "3000".into()),
        (
            "execution.checkpointing.savepoint-dir".into(),
            savepoint_dir(world, job),
        ),
    ];
    let mut set = |k: &str, v: &str| {
        if let Some(p) = pairs.iter_mut().find(|p| p.0 == k) {
            p.1 = v.to_string();
        } else {
            pairs.push((k.to_string(), v.to_string()));
        }
    };
    for (k, v) in &world.cluster.config {
        set(k, v);
    }
    if let Some(j) = job {
        let spec = &world.jobs[j].spec;
        set(
            "execution.checkpointing.interval",
            &format!("{}ms", spec.checkpoint_interval_ms),
        );
        for (k, v) in &spec.config {
            set(k, v);
        }
    }
    let list: Vec<Value> = pairs
        .into_iter()
        .map(|(k, v)| json!({ "key": k, "value": v }))
        .collect();
    Reply::json(200, &Value::Array(list))
}

/// Where savepoints go when a request names no directory.
pub(super) fn savepoint_dir(world: &World, job: Option<usize>) -> String {
    let key = "execution.checkpointing.savepoint-dir";
    job.and_then(|j| {
        world.jobs[j]
            .spec
            .config
            .iter()
            .find(|p| p.0 == key)
            .map(|p| p.1.clone())
    })
    .or_else(|| {
        world
            .cluster
            .config
            .iter()
            .find(|p| p.0 == key)
            .map(|p| p.1.clone())
    })
    .unwrap_or_else(|| "file:/tmp/flink-sim/savepoints".into())
}

pub(super) fn taskmanagers(world: &World) -> Reply {
    let per_tm = world.cluster.slots_per_taskmanager;
    let tms: Vec<Value> = world
        .taskmanager_slots()
        .into_iter()
        .enumerate()
        .map(|(i, (id, busy))| {
            let free = per_tm - busy;
            let host = id.split(':').next().unwrap_or("127.0.0.1").to_string();
            let resource = |slots: u32| {
                json!({
                    "cpuCores": f64::from(slots),
                    "taskHeapMemory": 36 * slots,
                    "taskOffHeapMemory": 0,
                    "managedMemory": 54 * slots,
                    "networkMemory": 13 * slots,
                    "extendedResources": {},
                })
            };
            json!({
                "id": id,
                "path": format!("pekko.tcp://flink@{host}:6122/user/rpc/taskmanager_{i}"),
                "dataPort": 46627,
                "jmxPort": -1,
                "timeSinceLastHeartbeat": world.clock.now_ms(),
                "slotsNumber": per_tm,
                "freeSlots": free,
                "assignedTasks": busy,
                "totalResource": resource(per_tm),
                "freeResource": resource(free),
                "hardware": { "cpuCores": 2, "physicalMemory": 25_276_502_016_u64, "freeMemory": 436_207_616, "managedMemory": 456_340_282 },
                "memoryConfiguration": {
                    "frameworkHeap": 134_217_728, "taskHeap": 301_989_880, "frameworkOffHeap": 134_217_728,
                    "taskOffHeap": 0, "networkMemory": 114_085_070, "managedMemory": 456_340_282,
                    "jvmMetaspace": 268_435_456, "jvmOverhead": 201_326_592,
                    "totalFlinkMemory": 1_140_850_688, "totalProcessMemory": 1_610_612_736_u64,
                },
            })
        })
        .collect();
    Reply::json(200, &json!({ "taskmanagers": tms }))
}
