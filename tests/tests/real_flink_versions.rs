//! Real Flink, one smoke test per version of the matrix that the whole suite does not run on
//! (`flink_harness::SMOKE`: 1.18.1, 1.19.3, 2.0.2, 2.1.3, 2.2.1). On each: the harness installs
//! that version from PyPI and starts a cluster with the configuration file the version reads;
//! one `collect --once` poll of our agent is checked against Flink's own per-subtask endpoints
//! (read from the same MetricFetcher snapshot); one in-place scale-up of cpu-map and filter
//! through the adaptive scheduler (`PUT /jobs/:jid/resource-requirements`) brings the job to
//! RUNNING at the new parallelism, and the agent's next poll sees it. Prints per-version
//! timings (`[versions]` lines), which docs/real-flink.md quotes.
//!
//! The scenarios of this file take turns (one cluster at a time on a 2-core machine);
//! `FLINK_HARNESS_PARALLEL=2` lets two run at once.

use std::time::{Duration, Instant};

use flink_autoscale_tests::flink_harness::per_subtask::{
    collect_once, compare, job_of, poll_within_one_snapshot, resolved_names,
};
use flink_autoscale_tests::flink_harness::{
    fully_running, job_status, listed_names, must, start_agent_setup, vertex, within, AgentSetup,
    ClusterSettings, ConfigFormat, FlinkVersion, LoadJobSpec, VertexStatus, SMOKE,
};
use hyper::Method;
use serde_json::Value;

/// One version's smoke test, install (cold) and cluster stop included.
const TEST_BUDGET: Duration = Duration::from_secs(420);
const SNAPSHOT_ATTEMPTS: usize = 6;
/// Flink's default adaptive-scheduler cooldown after the job started RUNNING (30 s on the
/// versions that have one), plus a second.
const COOLDOWN: Duration = Duration::from_secs(31);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_on_flink_1_18_1() {
    smoke("1.18.1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_on_flink_1_19_3() {
    smoke("1.19.3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_on_flink_2_0_2() {
    smoke("2.0.2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_on_flink_2_1_3() {
    smoke("2.1.3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_on_flink_2_2_1() {
    smoke("2.2.1").await;
}

/// The tests above are the smoke list, and the smoke list is what the tests cover.
#[test]
fn every_smoke_version_has_a_test() {
    let source = include_str!("real_flink_versions.rs");
    for version in SMOKE {
        let v = FlinkVersion::parse(version).expect("a valid version");
        assert!(
            source.contains(&format!("fn smoke_on_flink_{}()", v.snake())),
            "no smoke test for Flink {version}"
        );
    }
}

async fn smoke(version: &str) {
    within(
        TEST_BUDGET,
        &format!("the smoke test on Flink {version}"),
        scenario(version),
    )
    .await;
}

fn by_name<'a>(vertices: &'a [VertexStatus], name: &str) -> &'a VertexStatus {
    vertices
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vertex named {name:?} in {vertices:?}"))
}

async fn scenario(version: &str) {
    let t0 = Instant::now();
    let spec = LoadJobSpec {
        // cpu-map and filter rescale without the source (which cannot use more subtasks
        // than the splits it started with).
        rebalance_after_source: true,
        ..LoadJobSpec::at_rate(500.0)
    };
    let AgentSetup {
        agent,
        mut cluster,
        job,
    } = must(
        "start the cluster and the load job, locate the agent",
        start_agent_setup(ClusterSettings::on(version), &spec).await,
    );
    let started = t0.elapsed();
    let running_at = Instant::now();
    let timings = cluster.timings();
    let flink = cluster.version();
    let jid = job.job_id.clone();
    let rest = cluster.rest().clone();
    let url = cluster.rest_url().to_owned();

    // The version asked for runs, configured through the file that version reads.
    let overview = must("GET /overview", rest.get("/overview").await);
    assert_eq!(overview["flink-version"], version, "{overview}");
    let conf = cluster.run_dir().join("conf");
    let (read, other) = match flink.config_format() {
        ConfigFormat::Legacy => (ConfigFormat::Legacy, ConfigFormat::Standard),
        ConfigFormat::Standard => (ConfigFormat::Standard, ConfigFormat::Legacy),
    };
    assert!(
        conf.join(read.file_name()).is_file(),
        "{version}: no {read:?} file"
    );
    assert!(
        !conf.join(other.file_name()).exists(),
        "{version}: {} written beside {}",
        other.file_name(),
        read.file_name()
    );
    // The settings in it reached the JobManager: the adaptive scheduler and loopback REST.
    let jm_config = must(
        "GET /jobmanager/config",
        rest.get("/jobmanager/config").await,
    );
    let setting = |key: &str| {
        jm_config
            .as_array()
            .and_then(|all| all.iter().find(|e| e["key"] == key))
            .and_then(|e| e["value"].as_str())
            .map(str::to_owned)
    };
    assert_eq!(
        setting("jobmanager.scheduler").as_deref(),
        Some("adaptive"),
        "{jm_config}"
    );
    assert_eq!(
        setting("rest.bind-address").as_deref(),
        Some("127.0.0.1"),
        "{jm_config}"
    );

    // Collection: wait until every vertex lists its metrics, let the agent resolve names,
    // then one poll inside one MetricFetcher snapshot equals Flink's per-subtask values.
    let details = must("GET /jobs/:jid", rest.get(&format!("/jobs/{jid}")).await);
    let (_, vertices) = job_status(&details);
    let collect_t0 = Instant::now();
    for v in &vertices {
        let path = format!("/jobs/{jid}/vertices/{}/subtasks/metrics", v.id);
        must(
            "metric names listed",
            cluster
                .poll_until(&path, Duration::from_secs(60), |l| {
                    listed_names(l).iter().any(|n| n == "busyTimeMsPerSecond")
                })
                .await,
        );
    }
    let first = must("collect --once", collect_once(&agent, &url).await);
    let resolved = resolved_names(must("the job", job_of(&first, &jid)), &vertices);
    let (round, flink_values) = must(
        "a poll inside one MetricFetcher snapshot",
        poll_within_one_snapshot(&agent, &rest, &jid, &resolved, &vertices, SNAPSHOT_ATTEMPTS)
            .await,
    );
    let job_view = must("the job", job_of(&round, &jid)).clone();
    assert_eq!(job_view["state"], "RUNNING", "{job_view}");
    let topology = job_view["topology"].as_array().expect("a topology");
    assert_eq!(topology.len(), vertices.len(), "{job_view}");
    for (agent_vertex, v) in topology.iter().zip(&vertices) {
        assert_eq!(agent_vertex["id"], v.id.as_str());
        assert_eq!(agent_vertex["parallelism"].as_u64(), Some(v.parallelism));
    }
    let mismatches = compare(&job_view, &flink_values);
    assert!(
        mismatches.is_empty(),
        "Flink {version}: the agent's figures differ from Flink's per-subtask values:\n{}",
        mismatches.join("\n")
    );
    // The source produced records and cpu-map received them (the figures are not all zero).
    let cpu_map = by_name(&vertices, vertex::CPU_MAP).clone();
    let filter = by_name(&vertices, vertex::FILTER).clone();
    let received = job_view["sample"]["vertices"][&cpu_map.id]["num_records_in"]
        .as_f64()
        .unwrap_or_default();
    assert!(received > 0.0, "cpu-map received nothing: {job_view}");
    let collected = collect_t0.elapsed();

    // In-place scale-up of cpu-map and filter by one, through the adaptive scheduler.
    let requirements_path = format!("/jobs/{jid}/resource-requirements");
    let mut requirements = must(
        "GET resource-requirements",
        rest.get(&requirements_path).await,
    );
    let target = cpu_map.parallelism + 1;
    for id in [&cpu_map.id, &filter.id] {
        let upper = &mut requirements[id.as_str()]["parallelism"]["upperBound"];
        assert_eq!(
            upper.as_u64(),
            Some(cpu_map.parallelism),
            "upper bound of vertex {id}: {requirements}"
        );
        *upper = Value::from(target);
    }
    tokio::time::sleep(COOLDOWN.saturating_sub(running_at.elapsed())).await;
    let put_sent = Instant::now();
    must(
        "PUT resource-requirements",
        rest.send_json(Method::PUT, &requirements_path, &requirements)
            .await,
    );
    let rescaled = |vs: &[VertexStatus]| {
        vs.iter()
            .filter(|v| v.id == cpu_map.id || v.id == filter.id)
            .all(|v| v.parallelism == target)
    };
    let after = must(
        "RUNNING at the new parallelism",
        cluster
            .wait_for_job(&jid, Duration::from_secs(120), |state, vs| {
                fully_running(state, vs) && rescaled(vs)
            })
            .await,
    );
    let rescale_took = put_sent.elapsed();
    for v in &after {
        if v.id != cpu_map.id && v.id != filter.id {
            let before = vertices
                .iter()
                .find(|b| b.id == v.id)
                .expect("same vertices");
            assert_eq!(v.parallelism, before.parallelism, "{} untouched", v.name);
        }
    }
    // The same job, rescaled in place: no new job id, and the agent's next poll sees it.
    let jobs = must("GET /jobs/overview", rest.get("/jobs/overview").await);
    assert_eq!(
        jobs["jobs"].as_array().map(Vec::len),
        Some(1),
        "one job, rescaled in place: {jobs}"
    );
    let seen = must("collect --once", collect_once(&agent, &url).await);
    let seen_job = must("the job", job_of(&seen, &jid));
    let agent_parallelism = seen_job["topology"]
        .as_array()
        .and_then(|t| t.iter().find(|v| v["id"] == cpu_map.id.as_str()))
        .and_then(|v| v["parallelism"].as_u64());
    assert_eq!(agent_parallelism, Some(target), "{seen_job}");

    cluster.stop();
    eprintln!(
        "[versions] Flink {version}: total {:.1} s (install/prepare {:.1} s, cluster up {:.1} s, \
         start + job RUNNING {:.1} s, collection checked {:.1} s, rescale {} -> {target} RUNNING \
         after {:.1} s)",
        t0.elapsed().as_secs_f64(),
        timings.prepare.as_secs_f64(),
        timings.cluster_ready.as_secs_f64(),
        started.as_secs_f64(),
        collected.as_secs_f64(),
        cpu_map.parallelism,
        rescale_took.as_secs_f64(),
    );
}
