//! Real Flink: the harness starts a standalone cluster and the load job; the REST endpoints
//! the agent reads answer as designed; the rate file moves the load; an in-place rescale
//! through `PUT /jobs/:jid/resource-requirements` brings the job to RUNNING at the new
//! parallelism. Prints the measured timings. Needs Java and the Flink wheels, which the
//! harness installs when missing; without them the test fails and says why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flink_autoscale_tests::flink_harness::{
    aggregated as aggregate, fully_running, job_status, must, plan_edges, vertex, within,
    ClusterSettings, FlinkCluster, LoadJobSpec, VertexStatus,
};
use hyper::Method;
use serde_json::Value;

/// The whole test, cluster start and stop included.
const TEST_BUDGET: Duration = Duration::from_secs(300);
const INITIAL_RATE: f64 = 100.0;
const STEPPED_RATE: f64 = 2000.0;
const RESCALED_MAP_PARALLELISM: u64 = 3;
/// cpu-map's wait per record: at 1000 records/s per subtask about 200+ ms/s of busy time.
const SLEEP_MICROS: u64 = 200;
/// Busy time cpu-map must reach after the rate step (it is ~10 ms/s before).
const BUSY_AFTER_STEP_MS: f64 = 100.0;
const AGGREGATED: &str = "get=busyTimeMsPerSecond,numRecordsInPerSecond&agg=min,max,avg,sum";

fn by_name<'a>(vertices: &'a [VertexStatus], name: &str) -> &'a VertexStatus {
    vertices
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vertex named {name:?} in {vertices:?}"))
}

fn epoch_millis() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

fn edge(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_2_3_0() {
    within(TEST_BUDGET, "the real-Flink scenario", scenario("2.3.0")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_1_20_5() {
    within(TEST_BUDGET, "the real-Flink scenario", scenario("1.20.5")).await;
}

/// The real-Flink facts the agent relies on, on Flink `version`.
async fn scenario(version: &str) {
    let mut cluster = must(
        "start the Flink cluster",
        FlinkCluster::start(ClusterSettings::on(version)).await,
    );
    let flink = cluster.version();
    let timings = cluster.timings();
    let installation = cluster.installation().clone();
    eprintln!(
        "[setup] Flink {} (Java {}) at {}, run folder {}",
        installation.flink_version,
        installation.java_version,
        cluster.rest_url(),
        cluster.run_dir().display()
    );

    let spec = LoadJobSpec {
        rate: INITIAL_RATE,
        sleep_micros: SLEEP_MICROS,
        ..LoadJobSpec::default()
    };
    let submitted = Instant::now();
    let job = must(
        "run the load job",
        cluster
            .submit_load_job(&spec, Duration::from_secs(120))
            .await,
    );
    let submit_to_running = submitted.elapsed();
    let running_since = Instant::now();
    let jid = job.job_id.clone();
    let rest = cluster.rest().clone();

    // Jobs overview: the job, by id and name, RUNNING.
    let overview = must("GET /jobs/overview", rest.get("/jobs/overview").await);
    let listed = overview["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["jid"] == jid.as_str()))
        .unwrap_or_else(|| panic!("job {jid} missing from /jobs/overview: {overview}"));
    assert_eq!(listed["name"], spec.name.as_str());
    assert_eq!(listed["state"], "RUNNING");

    // The cluster runs the version asked for, with the configuration file that version reads.
    let flink_overview = must("GET /overview", rest.get("/overview").await);
    assert_eq!(flink_overview["flink-version"], version, "{flink_overview}");

    // Job details: five vertices at the program's parallelism, adaptive scheduler.
    let details = must("GET /jobs/:jid", rest.get(&format!("/jobs/{jid}")).await);
    if flink.reports_scheduler_type() {
        assert_eq!(details["schedulerType"], "Adaptive", "{details}");
    }
    // `schedulerType` is only in Flink 2.3+'s answer; the job's JobManager config is in all.
    let jm_config = must(
        "GET /jobs/:jid/jobmanager/config",
        rest.get(&format!("/jobs/{jid}/jobmanager/config")).await,
    );
    let scheduler = jm_config
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["key"] == "jobmanager.scheduler"))
        .map(|e| e["value"].clone());
    assert_eq!(scheduler, Some(Value::from("adaptive")), "{jm_config}");
    let (state, vertices) = job_status(&details);
    assert!(fully_running(&state, &vertices), "{details}");
    let names: Vec<&str> = vertices.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            vertex::SOURCE,
            vertex::CPU_MAP,
            vertex::FILTER,
            vertex::KEYED_SUM,
            vertex::SINK
        ]
    );
    let parallelisms: Vec<u64> = vertices.iter().map(|v| v.parallelism).collect();
    assert_eq!(parallelisms, [2, 2, 2, 3, 1]);

    // Plan: the three ship strategies the agent must handle, on the expected edges.
    let plan = must(
        "GET /jobs/:jid/plan",
        rest.get(&format!("/jobs/{jid}/plan")).await,
    );
    let edges = plan_edges(&plan, &vertices);
    let expected_edges = BTreeMap::from([
        (edge(vertex::SOURCE, vertex::CPU_MAP), "FORWARD".to_owned()),
        (edge(vertex::CPU_MAP, vertex::FILTER), "FORWARD".to_owned()),
        (edge(vertex::FILTER, vertex::KEYED_SUM), "HASH".to_owned()),
        (
            edge(vertex::KEYED_SUM, vertex::SINK),
            "REBALANCE".to_owned(),
        ),
    ]);
    assert_eq!(edges, expected_edges);

    // Metrics: names list, filtered and aggregated values, per-subtask values, job metrics.
    let cpu_map = by_name(&vertices, vertex::CPU_MAP).clone();
    let subtask_metrics = format!("/jobs/{jid}/vertices/{}/subtasks/metrics", cpu_map.id);
    // The JobManager's MetricFetcher answers `[]` until its first fetch for the job.
    let first_metrics_wait = Instant::now();
    must(
        "list cpu-map's subtask metrics",
        cluster
            .poll_until(&subtask_metrics, Duration::from_secs(60), |names| {
                [
                    "busyTimeMsPerSecond",
                    "numRecordsInPerSecond",
                    "backPressuredTimeMsPerSecond",
                ]
                .iter()
                .all(|name| {
                    names
                        .as_array()
                        .is_some_and(|all| all.iter().any(|m| m["id"] == *name))
                })
            })
            .await,
    );
    let aggregated_path = format!("{subtask_metrics}?{AGGREGATED}");
    let aggregated = must(
        "aggregated cpu-map metrics",
        cluster
            .poll_until(&aggregated_path, Duration::from_secs(60), |answer| {
                aggregate(answer, "numRecordsInPerSecond", "sum").is_some()
                    && aggregate(answer, "busyTimeMsPerSecond", "max").is_some()
            })
            .await,
    );
    let first_metrics_after = first_metrics_wait.elapsed();
    for entry in aggregated.as_array().expect("array") {
        for key in ["min", "max", "avg", "sum"] {
            assert!(entry.get(key).is_some(), "{key} missing in {entry}");
        }
        assert!(
            entry.get("skew").is_none(),
            "agg=min,max,avg,sum has no skew: {entry}"
        );
    }
    let per_subtask = must(
        "per-subtask metric",
        rest.get(&format!(
            "/jobs/{jid}/vertices/{}/subtasks/0/metrics?get=numRecordsInPerSecond",
            cpu_map.id
        ))
        .await,
    );
    assert!(
        per_subtask[0]["id"] == "numRecordsInPerSecond" && per_subtask[0]["value"].is_string(),
        "per-subtask values are strings: {per_subtask}"
    );
    // numRescales exists from 2.0 on; 1.x counts the adaptive scheduler's rescales as restarts.
    let rescale_counter = if flink.reports_num_rescales() {
        "numRescales"
    } else {
        "numRestarts"
    };
    let job_metrics = must(
        "job metrics",
        rest.get(&format!("/jobs/{jid}/metrics?get=numRescales,numRestarts"))
            .await,
    );
    let expected_job_metrics = if flink.reports_num_rescales() { 2 } else { 1 };
    assert!(
        job_metrics
            .as_array()
            .is_some_and(|m| m.len() == expected_job_metrics),
        "{job_metrics}"
    );

    // Right after a start Flink reports busy time 1000 with rates 0; wait until busy time
    // shows the real, light load.
    let settled = must(
        "busy time settles after the start",
        cluster
            .poll_until(&aggregated_path, Duration::from_secs(60), |answer| {
                aggregate(answer, "busyTimeMsPerSecond", "max")
                    .is_some_and(|busy| busy < BUSY_AFTER_STEP_MS / 2.0)
            })
            .await,
    );
    let busy_settled_after = running_since.elapsed();

    // Load: at the initial rate the 60 s moving average can never exceed it; after the rate
    // file says 2000/s it must climb well past it, and busy time with it.
    let before_step = aggregate(&settled, "numRecordsInPerSecond", "sum").unwrap_or_default();
    assert!(
        before_step <= INITIAL_RATE * 1.5,
        "the source exceeds its rate limit: cpu-map receives {before_step}/s at {INITIAL_RATE}/s"
    );
    let busy_before = aggregate(&settled, "busyTimeMsPerSecond", "max").unwrap_or_default();
    must("write the rate file", job.set_rate(STEPPED_RATE));
    let stepped = Instant::now();
    let after_step = must(
        "numRecordsInPerSecond after the rate step",
        cluster
            .poll_until(&aggregated_path, Duration::from_secs(90), |answer| {
                aggregate(answer, "numRecordsInPerSecond", "sum")
                    .is_some_and(|rate| rate >= 3.0 * INITIAL_RATE)
            })
            .await,
    );
    let step_visible_after = stepped.elapsed();
    let rate_after = aggregate(&after_step, "numRecordsInPerSecond", "sum").unwrap_or_default();
    let busy_after_step = must(
        "busyTimeMsPerSecond after the rate step",
        cluster
            .poll_until(&aggregated_path, Duration::from_secs(60), |answer| {
                aggregate(answer, "busyTimeMsPerSecond", "max")
                    .is_some_and(|busy| busy >= BUSY_AFTER_STEP_MS)
            })
            .await,
    );
    let busy_visible_after = stepped.elapsed();
    let busy_after = aggregate(&busy_after_step, "busyTimeMsPerSecond", "max").unwrap_or_default();

    // In-place rescale of cpu-map and filter (its FORWARD partner) from 2 to 3.
    let requirements_path = format!("/jobs/{jid}/resource-requirements");
    let mut requirements = must(
        "GET resource-requirements",
        rest.get(&requirements_path).await,
    );
    let filter = by_name(&vertices, vertex::FILTER).clone();
    for id in [&cpu_map.id, &filter.id] {
        let upper = &mut requirements[id.as_str()]["parallelism"]["upperBound"];
        assert_eq!(*upper, 2, "upper bound of vertex {id} before the rescale");
        *upper = Value::from(RESCALED_MAP_PARALLELISM);
    }
    // Flink's default cooldown (30 s after the job started RUNNING or last rescaled) would
    // otherwise be part of the measured time; the agent waits longer than that anyway.
    let cooldown = Duration::from_secs(31);
    tokio::time::sleep(cooldown.saturating_sub(running_since.elapsed())).await;
    let since_running_at_put = running_since.elapsed();
    let put_wall_ms = epoch_millis();
    let put_sent = Instant::now();
    must(
        "PUT resource-requirements",
        rest.send_json(Method::PUT, &requirements_path, &requirements)
            .await,
    );
    let put_answered = put_sent.elapsed();
    let rescaled = |vs: &[VertexStatus]| {
        vs.iter()
            .filter(|v| v.id == cpu_map.id || v.id == filter.id)
            .all(|v| v.parallelism == RESCALED_MAP_PARALLELISM)
    };
    must(
        "new parallelism visible",
        cluster
            .wait_for_job(&jid, Duration::from_secs(120), |_, vs| rescaled(vs))
            .await,
    );
    let parallelism_visible = put_sent.elapsed();
    let after_rescale = must(
        "RUNNING at the new parallelism",
        cluster
            .wait_for_job(&jid, Duration::from_secs(120), |state, vs| {
                fully_running(state, vs) && rescaled(vs)
            })
            .await,
    );
    let running_at_new_parallelism = put_sent.elapsed();
    // Server side: the ExecutionGraph's RUNNING timestamp is reset by the rescale.
    let details_after = must(
        "GET /jobs/:jid after the rescale",
        rest.get(&format!("/jobs/{jid}")).await,
    );
    let server_running_ms = details_after["timestamps"]["RUNNING"]
        .as_u64()
        .unwrap_or_default();
    let server_side = Duration::from_millis(server_running_ms.saturating_sub(put_wall_ms));
    assert_eq!(
        by_name(&after_rescale, vertex::KEYED_SUM).parallelism,
        3,
        "untouched vertex keeps its parallelism"
    );
    let requirements_now = must(
        "GET resource-requirements",
        rest.get(&requirements_path).await,
    );
    assert_eq!(
        requirements_now[cpu_map.id.as_str()]["parallelism"]["upperBound"],
        RESCALED_MAP_PARALLELISM
    );
    let rescales = must(
        "the rescale counted",
        cluster
            .poll_until(
                &format!("/jobs/{jid}/metrics?get={rescale_counter}"),
                Duration::from_secs(60),
                |answer| {
                    answer[0]["value"]
                        .as_str()
                        .and_then(|v| v.parse::<f64>().ok())
                        >= Some(1.0)
                },
            )
            .await,
    );
    let plan_after = must(
        "GET plan after the rescale",
        rest.get(&format!("/jobs/{jid}/plan")).await,
    );
    let edges_after = plan_edges(&plan_after, &after_rescale);

    let usage = cluster.process_usage();
    let stopping = Instant::now();
    cluster.stop();
    let stop_took = stopping.elapsed();

    let s = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    eprintln!(
        "[timing] prepare (install check / apt, pip, javac when missing): {}",
        s(timings.prepare)
    );
    eprintln!(
        "[timing] JVMs spawned -> REST answers: {}",
        s(timings.rest_up)
    );
    eprintln!(
        "[timing] JVMs spawned -> TaskManager slots registered: {}",
        s(timings.cluster_ready)
    );
    eprintln!(
        "[timing] job submitted (upload + run) -> all subtasks RUNNING: {}",
        s(submit_to_running)
    );
    eprintln!(
        "[timing] RUNNING -> first aggregated cpu-map metrics: {}",
        s(first_metrics_after)
    );
    eprintln!(
        "[timing] RUNNING -> busy time no longer the start-up 1000 ms/s: {}",
        s(busy_settled_after)
    );
    eprintln!(
        "[timing] rate {INITIAL_RATE}/s -> {STEPPED_RATE}/s: numRecordsInPerSecond sum {before_step:.0} -> \
         {rate_after:.0} (>= 3x) after {}; cpu-map busy max {busy_before:.0} -> {busy_after:.0} ms/s after {}",
        s(step_visible_after),
        s(busy_visible_after)
    );
    eprintln!(
        "[timing] rescale cpu-map+filter 2 -> {RESCALED_MAP_PARALLELISM} (PUT {} after RUNNING, past the \
         default cooldown): PUT answered {}, new parallelism in /jobs/:jid {}, all subtasks RUNNING {}, \
         job's RUNNING timestamp {} after the PUT",
        s(since_running_at_put),
        s(put_answered),
        s(parallelism_visible),
        s(running_at_new_parallelism),
        s(server_side)
    );
    eprintln!(
        "[rescale] Flink {version}: {rescale_counter} {}; plan edges after: {edges_after:?}",
        rescales[0]["value"]
    );
    for u in &usage {
        eprintln!(
            "[resources] {} pid {}: CPU {:.1} s, RSS {} MiB, peak RSS {} MiB",
            u.role,
            u.pid,
            u.cpu_seconds,
            u.rss_bytes >> 20,
            u.peak_rss_bytes >> 20
        );
    }
    eprintln!(
        "[timing] stop (SIGTERM to both process groups, reap): {}",
        s(stop_took)
    );
}
