//! Metric endpoints. They never 404: unknown jobs, vertices, subtasks and names answer
//! `200 []`. Aggregated `get` is all-or-nothing; plain values are strings.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::{Query, Reply};
use crate::catalog::{Catalog, Val, ValueCtx};
use crate::format::{push_json_f64, push_json_str};
use crate::job::{JobSim, Phase};
use crate::world::World;

const EMPTY: &str = "[]";

/// Which aggregations a request asked for (`agg`), in Flink's output order.
#[derive(Debug, Clone, Copy)]
pub(super) struct AggSet {
    min: bool,
    max: bool,
    avg: bool,
    sum: bool,
    skew: bool,
}

pub(super) fn parse_aggs(q: &Query) -> Result<AggSet, Reply> {
    let Some(list) = q.list("agg") else {
        return Ok(AggSet {
            min: true,
            max: true,
            avg: true,
            sum: true,
            skew: true,
        });
    };
    let mut set = AggSet {
        min: false,
        max: false,
        avg: false,
        sum: false,
        skew: false,
    };
    for a in list {
        match a.to_ascii_lowercase().as_str() {
            "min" => set.min = true,
            "max" => set.max = true,
            "avg" => set.avg = true,
            "sum" => set.sum = true,
            "skew" => set.skew = true,
            _ => return Err(Reply::bad_query_param("agg", a)),
        }
    }
    Ok(set)
}

/// Java's `Math.min`/`Math.max`: any NaN makes the result NaN.
fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Appends `{"id":..,"min":..,...}` for `values` (non-empty).
fn push_aggregate(out: &mut String, name: &str, values: &[f64], set: AggSet) {
    let n = values.len() as f64;
    let sum: f64 = values.iter().sum();
    let avg = sum / n;
    out.push_str("{\"id\":");
    push_json_str(out, name);
    let mut field = |key: &str, v: f64| {
        let _ = write!(out, ",\"{key}\":");
        push_json_f64(out, v);
    };
    if set.min {
        field("min", values.iter().copied().fold(f64::INFINITY, java_min));
    }
    if set.max {
        field(
            "max",
            values.iter().copied().fold(f64::NEG_INFINITY, java_max),
        );
    }
    if set.avg {
        field("avg", avg);
    }
    if set.sum {
        field("sum", sum);
    }
    if set.skew {
        let skew = if avg == 0.0 {
            0.0
        } else {
            let mad = values.iter().map(|x| (x - avg).abs()).sum::<f64>() / n;
            (100.0 * mad / avg).min(100.0)
        };
        field("skew", skew);
    }
    out.push('}');
}

pub(super) fn push_name(out: &mut String, name: &str) {
    out.push_str("{\"id\":");
    push_json_str(out, name);
    out.push('}');
}

fn push_value(out: &mut String, name: &str, value: &str) {
    out.push_str("{\"id\":");
    push_json_str(out, name);
    out.push_str(",\"value\":");
    push_json_str(out, value);
    out.push('}');
}

/// Joins JSON objects written by `each` into an array.
pub(super) fn array<T>(
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut String, T),
) -> String {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(&mut out, item);
    }
    out.push(']');
    out
}

/// Parses `subtasks=0-2,4`: ranges are inclusive, junk items are skipped, overlaps repeat.
fn subtask_selection(q: &Query, reporting: usize) -> Vec<usize> {
    let Some(items) = q.list("subtasks") else {
        return (0..reporting).collect();
    };
    let mut out = Vec::new();
    for item in items {
        let range = match item.split_once('-') {
            Some((a, b)) => a.parse::<usize>().ok().zip(b.parse::<usize>().ok()),
            None => item.parse::<usize>().ok().map(|i| (i, i)),
        };
        if let Some((a, b)) = range {
            out.extend((a..=b.min(reporting.saturating_sub(1))).filter(|&i| i < reporting));
        }
    }
    out
}

/// The job, vertex index and reporting view for a metric request, or `None` (→ `[]`).
pub(super) fn resolve(
    world: &mut World,
    jid: &str,
    vid: &str,
) -> Option<(usize, usize, std::sync::Arc<crate::view::JobView>)> {
    let j = world.job_index(jid)?;
    let v = world.jobs[j].spec.vertex_index(vid)?;
    let view = world.jobs[j].metrics_view()?;
    if view.vertices.get(v).is_none_or(|vv| vv.subtasks.is_empty()) {
        return None;
    }
    Some((j, v, view))
}

fn value_ctx<'a>(job: &'a JobSim, v: usize, view: &'a crate::view::JobView) -> ValueCtx<'a> {
    ValueCtx {
        spec: &job.spec.vertices[v],
        is_sink: !job.spec.has_outputs(v),
        view: &view.vertices[v],
        t_ms: view.t_ms,
        running_since_ms: view.running_since_ms,
    }
}

/// `GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics`
pub(super) fn subtasks_aggregated(world: &mut World, jid: &str, vid: &str, q: &Query) -> Reply {
    let set = match parse_aggs(q) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let Some((j, v, view)) = resolve(world, jid, vid) else {
        return Reply::raw(200, EMPTY.into());
    };
    let job = &world.jobs[j];
    let selected = subtask_selection(q, view.vertices[v].subtasks.len());
    let (body, entries) = match q.list("get") {
        None => {
            let (names, entries) =
                listed_names(job, v, &view, &selected, q.get("subtasks").is_none());
            (array(names, push_name), entries)
        }
        Some(names) => aggregated(job, v, &view, &selected, &names, set),
    };
    Reply::raw(200, body).with_entries(entries)
}

/// The names a listing of vertex `v` shows over the `selected` subtasks (every subtask when
/// `all`: names registered lazily appear only once a subtask reports them), and the entries
/// the JobManager touched: every metric of every selected subtask.
pub(super) fn listed_names<'a>(
    job: &'a JobSim,
    v: usize,
    view: &crate::view::JobView,
    selected: &[usize],
    all: bool,
) -> (Vec<&'a str>, u64) {
    let catalog: &Catalog = &job.catalogs[v];
    let spec = &job.spec.vertices[v];
    let vv = &view.vertices[v];
    let names = (0..catalog.len())
        .filter(|&m| {
            (all && !catalog.registered_lazily(m, spec))
                || selected
                    .iter()
                    .any(|&i| catalog.present(m, spec, vv, i as u32))
        })
        .filter(|_| !selected.is_empty())
        .map(|m| catalog.name(m))
        .collect();
    let entries = selected.len() as u64 * catalog.entries_per_subtask(vv.parallelism);
    (names, entries)
}

/// The aggregates of `names` over the `selected` subtasks of vertex `v`, as a JSON array, and
/// the entries touched (selected subtasks × names). All-or-nothing: a name no selected
/// subtask reports makes the whole answer `[]`; names with non-numeric values are skipped.
pub(super) fn aggregated(
    job: &JobSim,
    v: usize,
    view: &crate::view::JobView,
    selected: &[usize],
    names: &[&str],
    set: AggSet,
) -> (String, u64) {
    let catalog: &Catalog = &job.catalogs[v];
    let spec = &job.spec.vertices[v];
    let vv = &view.vertices[v];
    let ctx = value_ctx(job, v, view);
    let entries = (selected.len() * names.len()) as u64;
    let mut out = String::from("[");
    let mut first = true;
    let mut values = Vec::with_capacity(selected.len());
    for &name in names {
        let Some(m) = catalog.lookup(name) else {
            return (EMPTY.into(), entries);
        };
        values.clear();
        let mut numeric = true;
        for &i in selected {
            if catalog.present(m, spec, vv, i as u32) {
                match catalog.value(m, &ctx, i).as_f64() {
                    Some(x) => values.push(x),
                    None => numeric = false,
                }
            }
        }
        if values.is_empty() && numeric {
            return (EMPTY.into(), entries);
        }
        if !numeric {
            continue; // Flink logs and skips metrics whose values are not numbers.
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_aggregate(&mut out, name, &values, set);
    }
    out.push(']');
    (out, entries)
}

/// Requested names as a set: Flink de-duplicates them and answers in no particular order.
fn requested(q: &Query) -> Option<Vec<String>> {
    q.list("get").map(|names| {
        let mut seen = HashSet::new();
        names
            .into_iter()
            .filter(|n| seen.insert(*n))
            .map(str::to_string)
            .collect()
    })
}

/// `GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/metrics`
pub(super) fn subtask(world: &mut World, jid: &str, vid: &str, idx: u32, q: &Query) -> Reply {
    let Some((j, v, view)) = resolve(world, jid, vid) else {
        return Reply::raw(200, EMPTY.into());
    };
    let job = &world.jobs[j];
    let catalog = &job.catalogs[v];
    let spec = &job.spec.vertices[v];
    let vv = &view.vertices[v];
    if idx as usize >= vv.subtasks.len() {
        return Reply::raw(200, EMPTY.into());
    }
    let ctx = value_ctx(job, v, &view);
    match requested(q) {
        None => {
            let present: Vec<usize> = (0..catalog.len())
                .filter(|&m| catalog.present(m, spec, vv, idx))
                .collect();
            let n = present.len() as u64;
            Reply::raw(
                200,
                array(present, |out, m| push_name(out, catalog.name(m))),
            )
            .with_entries(n)
        }
        Some(names) => {
            let n = names.len() as u64;
            let found = names.iter().filter_map(|name| {
                catalog
                    .lookup(name)
                    .filter(|&m| catalog.present(m, spec, vv, idx))
                    .map(|m| (name, m))
            });
            let body = array(found, |out, (name, m)| {
                push_value(out, name, &catalog.value(m, &ctx, idx as usize).to_plain())
            });
            Reply::raw(200, body).with_entries(n)
        }
    }
}

/// `GET /jobs/:jobid/vertices/:vertexid/metrics` (task store: keys prefixed with the index).
pub(super) fn vertex(world: &mut World, jid: &str, vid: &str, q: &Query) -> Reply {
    let Some((j, v, view)) = resolve(world, jid, vid) else {
        return Reply::raw(200, EMPTY.into());
    };
    let job = &world.jobs[j];
    let catalog = &job.catalogs[v];
    let spec = &job.spec.vertices[v];
    let vv = &view.vertices[v];
    let ctx = value_ctx(job, v, &view);
    match requested(q) {
        None => {
            let reporting = vv.subtasks.len();
            let keys = (0..reporting).flat_map(|i| {
                (0..catalog.len())
                    .filter(move |&m| catalog.present(m, spec, vv, i as u32))
                    .map(move |m| (i, m))
            });
            let mut n = 0u64;
            let body = array(keys, |out, (i, m)| {
                n += 1;
                push_name(out, &format!("{i}.{}", catalog.name(m)));
            });
            Reply::raw(200, body).with_entries(n)
        }
        Some(keys) => {
            let n = keys.len() as u64;
            let found = keys.iter().filter_map(|key| {
                let (idx, name) = key.split_once('.')?;
                let i: usize = idx.parse().ok()?;
                let m = catalog.lookup(name)?;
                (i < vv.subtasks.len() && catalog.present(m, spec, vv, i as u32))
                    .then_some((key, m, i))
            });
            let body = array(found, |out, (key, m, i)| {
                push_value(out, key, &catalog.value(m, &ctx, i).to_plain())
            });
            Reply::raw(200, body).with_entries(n)
        }
    }
}

/// A small store of named values (job, JobManager or TaskManager scope).
type Store = Vec<(&'static str, Val)>;

fn plain_store(store: &Store, q: &Query) -> Reply {
    match requested(q) {
        None => Reply::raw(200, array(store, |out, (name, _)| push_name(out, name)))
            .with_entries(store.len() as u64),
        Some(names) => {
            let n = names.len() as u64;
            let found = names
                .iter()
                .filter_map(|name| store.iter().find(|(k, _)| k == name));
            Reply::raw(
                200,
                array(found, |out, (name, v)| push_value(out, name, &v.to_plain())),
            )
            .with_entries(n)
        }
    }
}

/// Aggregates a named metric over several stores, all-or-nothing like the subtask endpoint.
fn aggregated_stores(stores: &[Store], q: &Query) -> Reply {
    let set = match parse_aggs(q) {
        Ok(s) => s,
        Err(r) => return r,
    };
    if stores.is_empty() {
        return Reply::raw(200, EMPTY.into());
    }
    let Some(names) = q.list("get") else {
        let mut seen = HashSet::new();
        let names: Vec<&str> = stores
            .iter()
            .flatten()
            .map(|(k, _)| *k)
            .filter(|k| seen.insert(*k))
            .collect();
        let touched = stores.iter().map(|s| s.len() as u64).sum();
        return Reply::raw(200, array(names, push_name)).with_entries(touched);
    };
    let entries = (stores.len() * names.len()) as u64;
    let mut parts = Vec::new();
    for name in names {
        let vals: Vec<&Val> = stores
            .iter()
            .filter_map(|s| s.iter().find(|(k, _)| *k == name).map(|(_, v)| v))
            .collect();
        if vals.is_empty() {
            return Reply::raw(200, EMPTY.into()).with_entries(entries);
        }
        let nums: Option<Vec<f64>> = vals.iter().map(|v| v.as_f64()).collect();
        if let Some(nums) = nums {
            let mut s = String::new();
            push_aggregate(&mut s, name, &nums, set);
            parts.push(s);
        }
    }
    Reply::raw(200, format!("[{}]", parts.join(","))).with_entries(entries)
}

fn job_store(job: &JobSim) -> Store {
    let now = job.t_ms;
    let last = job
        .checkpoints
        .history
        .iter()
        .rev()
        .find(|c| !c.is_savepoint);
    let running = job.phase == Phase::Running;
    let running_time = if running {
        now.saturating_sub(job.running_since_ms)
    } else {
        0
    };
    let restarting_time = match &job.phase {
        Phase::Restarting { until_ms, .. } => {
            now.saturating_sub(until_ms.saturating_sub(job.spec.downtime_ms))
        }
        _ => 0,
    };
    let l = |x: u64| Val::Long(x as i64);
    vec![
        (
            "lastCheckpointSize",
            l(last.map_or(0, |c| c.checkpointed_size)),
        ),
        (
            "lastCheckpointExternalPath",
            Val::Text(if last.is_some() {
                "file:/tmp/flink-sim/checkpoints"
            } else {
                "n/a"
            }),
        ),
        ("failingTime", l(0)),
        ("numRescales", l(job.rescales)),
        ("restartingTime", l(restarting_time)),
        ("numberOfInProgressCheckpoints", l(0)),
        (
            "lastCheckpointMetadataSize",
            l(if last.is_some() { 4_512 } else { 0 }),
        ),
        (
            "lastCheckpointProcessedData",
            l(last.map_or(0, |c| c.checkpointed_size / 6)),
        ),
        ("numberOfCompletedCheckpoints", l(job.checkpoints.completed)),
        ("numRestarts", l(job.restarts)),
        ("deployingTime", l(0)),
        ("createdTime", l(0)),
        (
            "lastCheckpointDuration",
            l(last.map_or(0, |c| c.duration_ms)),
        ),
        ("numberOfFailedCheckpoints", l(0)),
        (
            "lastCheckpointCompletedTimestamp",
            l(last.map_or(0, |c| c.trigger_ms + c.duration_ms)),
        ),
        ("cancellingTime", l(0)),
        ("totalNumberOfCheckpoints", l(job.checkpoints.completed)),
        (
            "lastCompletedCheckpointId",
            Val::Long(last.map_or(-1, |c| c.id as i64)),
        ),
        (
            "lastCheckpointRestoreTimestamp",
            Val::Long(job.checkpoints.restored.map_or(-1, |r| r.1 as i64)),
        ),
        ("runningTime", l(running_time)),
        ("uptime", l(running_time)),
        ("allSubTasksRunningOrFinishedTime", l(running_time)),
        ("initializingTime", l(0)),
        ("downtime", l(restarting_time)),
        (
            "lastCheckpointFullSize",
            l(last.map_or(0, |c| c.state_size)),
        ),
        ("lastCheckpointPersistedData", l(0)),
    ]
}

/// `GET /jobs/:jobid/metrics`
pub(super) fn job(world: &mut World, jid: &str, q: &Query) -> Reply {
    match world.job_index(jid) {
        Some(j) => plain_store(&job_store(&world.jobs[j]), q),
        None => Reply::raw(200, EMPTY.into()),
    }
}

/// `GET /jobs/metrics?get=..&agg=..&jobs=..`: job-scope metrics aggregated across jobs.
pub(super) fn jobs_aggregated(world: &mut World, q: &Query) -> Reply {
    let wanted: Option<Vec<String>> = q
        .list("jobs")
        .map(|l| l.into_iter().map(str::to_ascii_lowercase).collect());
    let stores: Vec<Store> = world
        .jobs
        .iter()
        .filter(|j| {
            wanted
                .as_ref()
                .is_none_or(|w| w.iter().any(|id| id == j.id()))
        })
        .map(job_store)
        .collect();
    aggregated_stores(&stores, q)
}

const JVM_METRICS: &[&str] = &[
    "Status.JVM.Memory.Mapped.TotalCapacity",
    "Status.JVM.Memory.Mapped.MemoryUsed",
    "Status.JVM.Memory.Mapped.Count",
    "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
    "Status.JVM.GarbageCollector.All.Count",
    "Status.JVM.GarbageCollector.All.Time",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Count",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Time",
    "Status.JVM.GarbageCollector.G1_Young_Generation.TimeMsPerSecond",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Count",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Time",
    "Status.JVM.GarbageCollector.G1_Old_Generation.TimeMsPerSecond",
    "Status.JVM.CPU.Time",
    "Status.JVM.CPU.Load",
    "Status.JVM.Threads.Count",
    "Status.JVM.Memory.Heap.Used",
    "Status.JVM.Memory.Heap.Committed",
    "Status.JVM.Memory.Heap.Max",
    "Status.JVM.Memory.NonHeap.Used",
    "Status.JVM.Memory.NonHeap.Committed",
    "Status.JVM.Memory.NonHeap.Max",
    "Status.JVM.Memory.Metaspace.Used",
    "Status.JVM.Memory.Metaspace.Committed",
    "Status.JVM.Memory.Metaspace.Max",
    "Status.JVM.Memory.Direct.Count",
    "Status.JVM.Memory.Direct.MemoryUsed",
    "Status.JVM.Memory.Direct.TotalCapacity",
    "Status.JVM.FileDescriptor.Max",
    "Status.JVM.FileDescriptor.Open",
    "Status.JVM.ClassLoader.ClassesLoaded",
    "Status.JVM.ClassLoader.ClassesUnloaded",
];

const TM_ONLY_METRICS: &[&str] = &[
    "Status.Flink.Memory.Managed.Total",
    "Status.Flink.Memory.Managed.Used",
    "Status.Shuffle.Netty.UsedMemory",
    "Status.Shuffle.Netty.TotalMemory",
    "Status.Shuffle.Netty.RequestedMemoryUsage",
    "Status.Shuffle.Netty.AvailableMemorySegments",
    "Status.Shuffle.Netty.TotalMemorySegments",
    "Status.Shuffle.Netty.UsedMemorySegments",
    "Status.Shuffle.Netty.AvailableMemory",
];

/// Process metrics of a JVM with `load` (0..1) of its slots in use.
fn jvm_value(name: &'static str, seed: u64, load: f64, uptime_ms: u64) -> Val {
    let jitter = crate::ids::unit_hash(seed, name.len() as u64, 11);
    match name {
        "Status.JVM.Memory.Heap.Max" => Val::Long(436_207_616),
        "Status.JVM.Memory.Heap.Committed" => Val::Long(436_207_616),
        "Status.JVM.Memory.Heap.Used" => {
            Val::Long((90_000_000.0 + 200_000_000.0 * load + 20_000_000.0 * jitter) as i64)
        }
        "Status.JVM.Memory.Metaspace.Used" => Val::Long(70_000_000 + (jitter * 5_000_000.0) as i64),
        "Status.JVM.Memory.Metaspace.Max" => Val::Long(268_435_456),
        "Status.JVM.CPU.Load" => Val::Double((0.05 + 0.8 * load + 0.05 * jitter).min(1.0)),
        "Status.JVM.CPU.Time" => Val::Long((uptime_ms as f64 * 1e6 * (0.1 + load)) as i64),
        "Status.JVM.GarbageCollector.All.TimeMsPerSecond" => {
            Val::Double(2.0 + 20.0 * load * jitter)
        }
        "Status.JVM.GarbageCollector.G1_Young_Generation.TimeMsPerSecond" => {
            Val::Double(2.0 + 20.0 * load * jitter)
        }
        "Status.JVM.GarbageCollector.G1_Old_Generation.TimeMsPerSecond" => Val::Double(0.0),
        "Status.JVM.Threads.Count" => Val::Long(80 + (load * 60.0) as i64),
        "Status.Flink.Memory.Managed.Total" => Val::Long(456_340_282),
        "Status.Flink.Memory.Managed.Used" => Val::Long((456_340_282.0 * load * 0.5) as i64),
        _ => Val::Long((jitter * 1000.0) as i64),
    }
}

/// What one MetricFetcher refresh pulls into the JobManager's store: every metric of every
/// running subtask of every job, each job's own, the JobManager's and every TaskManager's.
pub(super) fn store_entries(world: &World) -> u64 {
    let jobs: u64 = world
        .jobs
        .iter()
        .filter(|job| job.phase == Phase::Running)
        .map(|job| {
            let subtasks: u64 = job
                .parallelism()
                .into_iter()
                .zip(&job.catalogs)
                .map(|(p, catalog)| u64::from(p) * catalog.entries_per_subtask(p))
                .sum();
            subtasks + job_store(job).len() as u64
        })
        .sum();
    let jobmanager = (JOBMANAGER_METRICS + JVM_METRICS.len()) as u64;
    let taskmanagers =
        u64::from(world.taskmanager_count()) * (JVM_METRICS.len() + TM_ONLY_METRICS.len()) as u64;
    jobs + jobmanager + taskmanagers
}

/// The JobManager's own metrics beside its JVM's (see [`jobmanager`]).
const JOBMANAGER_METRICS: usize = 4;

/// `GET /jobmanager/metrics`
pub(super) fn jobmanager(world: &mut World, q: &Query) -> Reply {
    let total = world.slots_total();
    let used = world.slots_used();
    let running = world
        .jobs
        .iter()
        .filter(|j| j.phase == Phase::Running)
        .count();
    let uptime = world.clock.now_ms().saturating_sub(world.start_ms);
    let mut store: Store = vec![
        (
            "taskSlotsAvailable",
            Val::Long(i64::from(total.saturating_sub(used))),
        ),
        ("taskSlotsTotal", Val::Long(i64::from(total))),
        (
            "numRegisteredTaskManagers",
            Val::Long(i64::from(world.taskmanager_count())),
        ),
        ("numRunningJobs", Val::Long(running as i64)),
    ];
    store.extend(
        JVM_METRICS
            .iter()
            .map(|&n| (n, jvm_value(n, 0, 0.1, uptime))),
    );
    plain_store(&store, q)
}

fn taskmanager_stores(world: &World) -> Vec<(String, Store)> {
    let per_tm = world.cluster.slots_per_taskmanager;
    let uptime = world.clock.now_ms().saturating_sub(world.start_ms);
    world
        .taskmanager_slots()
        .into_iter()
        .enumerate()
        .map(|(i, (id, busy))| {
            let load = f64::from(busy) / f64::from(per_tm);
            let store = JVM_METRICS
                .iter()
                .chain(TM_ONLY_METRICS)
                .map(|&n| (n, jvm_value(n, i as u64 + 1, load, uptime)))
                .collect();
            (id, store)
        })
        .collect()
}

/// `GET /taskmanagers/metrics?get=..&agg=..&taskmanagers=..`
pub(super) fn taskmanagers_aggregated(world: &mut World, q: &Query) -> Reply {
    let wanted: Option<Vec<&str>> = q.list("taskmanagers");
    let stores: Vec<Store> = taskmanager_stores(world)
        .into_iter()
        .filter(|(id, _)| wanted.as_ref().is_none_or(|w| w.contains(&id.as_str())))
        .map(|(_, s)| s)
        .collect();
    aggregated_stores(&stores, q)
}

/// `GET /taskmanagers/:taskmanagerid/metrics`
pub(super) fn taskmanager(world: &mut World, tm: &str, q: &Query) -> Reply {
    match taskmanager_stores(world)
        .into_iter()
        .find(|(id, _)| id == tm)
    {
        Some((_, store)) => plain_store(&store, q),
        None => Reply::raw(200, EMPTY.into()),
    }
}
