//! Real Flink: `flink-autoscale-agent collect` watches the load job on a real JobManager.
//! The topology and the resolved metric names are as Flink reports them, steady-state polls
//! stay within the request budget (vertices + 3, no name listing), and the values agree with
//! Flink's own per-subtask endpoints read from the same MetricFetcher snapshot. Read in
//! slices (as jobs above `collector.slice_above_subtasks` are), the JobManager honours
//! `subtasks=` (one-subtask selections add up to the whole) and the merged counters count
//! every subtask once.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use flink_autoscale_tests::flink_harness::per_subtask::{
    collect_once, compare, job_of, poll_within_one_snapshot, resolved_names,
};
use flink_autoscale_tests::flink_harness::{
    aggregated, job_in_round, job_status, listed_names, must, plan_edges, run_collect,
    start_agent_setup, vertex, within, AgentSetup, ClusterSettings, FlinkRest, LoadJobSpec, Polls,
    RecordedRequest, RecordingProxy, VertexStatus,
};
use serde_json::{json, Value};

const TEST_BUDGET: Duration = Duration::from_secs(540);
/// At least Flink's `metrics.fetcher.update-interval` (10 s): faster polls are stale.
const POLL_INTERVAL: &str = "11s";
const SNAPSHOT_ATTEMPTS: usize = 6;
const AGENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Requests further apart than this belong to different polls.
const POLL_GAP: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_2_3_0() {
    within(TEST_BUDGET, "the collect scenario", scenario("2.3.0")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_1_20_5() {
    within(TEST_BUDGET, "the collect scenario", scenario("1.20.5")).await;
}

/// Requests grouped into polls: a poll's requests follow each other within a second or two,
/// polls are `POLL_INTERVAL` apart.
fn polls_of(recorded: Vec<RecordedRequest>) -> Vec<Vec<RecordedRequest>> {
    let mut polls: Vec<Vec<RecordedRequest>> = Vec::new();
    for request in recorded {
        let gap = polls
            .last()
            .and_then(|poll| poll.last())
            .map(|last| request.at.duration_since(last.at));
        match (gap, polls.last_mut()) {
            (Some(gap), Some(poll)) if gap < POLL_GAP => poll.push(request),
            _ => polls.push(vec![request]),
        }
    }
    polls
}

/// What the agent asked for, as designed: only GETs; never a per-subtask or vertex-level
/// metric request; each vertex's names listed once, on the first poll; a later poll is the
/// overview plus one value query per vertex whose `get=` holds only resolved names and whose
/// `agg=` holds only aggregates (no skew).
fn check_requests(
    polls: &[Vec<RecordedRequest>],
    jid: &str,
    resolved: &BTreeMap<String, Vec<String>>,
) {
    let vertex_prefix = format!("/jobs/{jid}/vertices/");
    for request in polls.iter().flatten() {
        let path = &request.path_and_query;
        assert_eq!(request.method, "GET", "{path}");
        assert!(
            !path.contains("/subtasks/") || path.contains("/subtasks/metrics"),
            "per-subtask request: {path}"
        );
        assert!(
            !path.contains("/metrics?get=0."),
            "vertex-level metric request: {path}"
        );
    }
    let listings = |poll: &[RecordedRequest]| {
        poll.iter()
            .filter(|r| r.path_and_query.ends_with("/subtasks/metrics"))
            .count()
    };
    assert_eq!(
        listings(&polls[0]),
        resolved.len(),
        "first poll lists each vertex once"
    );
    let steady = &polls[1];
    assert_eq!(listings(steady), 0, "names listed again on a later poll");
    let overviews = steady
        .iter()
        .filter(|r| r.path_and_query == "/jobs/overview")
        .count();
    assert_eq!(overviews, 1, "{steady:?}");
    let mut queried: Vec<&str> = Vec::new();
    for request in steady {
        let Some(rest) = request.path_and_query.strip_prefix(&vertex_prefix) else {
            continue;
        };
        let (vid, query) = rest
            .split_once("/subtasks/metrics?")
            .unwrap_or_else(|| panic!("unexpected request {}", request.path_and_query));
        queried.push(vid);
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("get", names)) => {
                    for name in names.split(',') {
                        assert!(
                            resolved[vid].iter().any(|r| r == name),
                            "vertex {vid}: asked for {name}, which is not a resolved name"
                        );
                    }
                }
                Some(("agg", aggs)) => {
                    for agg in aggs.split(',') {
                        assert!(
                            ["min", "max", "avg", "sum"].contains(&agg),
                            "agg {agg} in {query}"
                        );
                    }
                }
                _ => panic!("unexpected query part {pair} in {query}"),
            }
        }
    }
    queried.sort_unstable();
    let mut expected: Vec<&str> = resolved.keys().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(
        queried, expected,
        "one value query per vertex on a later poll"
    );
}

/// The agent's `collect` on the real job, as Flink reports it.
async fn scenario(version: &str) {
    let spec = LoadJobSpec::at_rate(1000.0);
    let AgentSetup {
        agent,
        mut cluster,
        job,
    } = must(
        "start the cluster and the load job, locate the agent",
        start_agent_setup(ClusterSettings::on(version), &spec).await,
    );
    let jid = job.job_id.clone();
    let rest = cluster.rest().clone();
    let url = cluster.rest_url().to_owned();

    let details = must("GET /jobs/:jid", rest.get(&format!("/jobs/{jid}")).await);
    let (_, vertices) = job_status(&details);
    let plan = must("GET plan", rest.get(&format!("/jobs/{jid}/plan")).await);
    let flink_edges = plan_edges(&plan, &vertices);

    // Wait until Flink lists every vertex's metric names: before that the JobManager
    // answers `[]`, which is the start-up test's subject (real_flink_startup.rs).
    let waited = Instant::now();
    // Flink's own listings, for comparing names below.
    let mut flink_names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in &vertices {
        let path = format!("/jobs/{jid}/vertices/{}/subtasks/metrics", v.id);
        let listing = must(
            "metric names listed",
            cluster
                .poll_until(&path, Duration::from_secs(60), |l| {
                    listed_names(l).iter().any(|n| n == "busyTimeMsPerSecond")
                })
                .await,
        );
        flink_names.insert(v.id.clone(), listed_names(&listing));
    }
    eprintln!(
        "[timing] RUNNING -> every vertex lists its metrics: {:.1} s",
        waited.elapsed().as_secs_f64()
    );

    // A first poll tells which names the agent resolved.
    let first = must("collect --once", collect_once(&agent, &url).await);
    let resolved = resolved_names(must("the job", job_of(&first, &jid)), &vertices);

    // One poll, bracketed by two reads of Flink's per-subtask endpoints.
    let (round, flink_values) = must(
        "a poll inside one MetricFetcher snapshot",
        poll_within_one_snapshot(&agent, &rest, &jid, &resolved, &vertices, SNAPSHOT_ATTEMPTS)
            .await,
    );
    let job_view = must("the job", job_of(&round, &jid)).clone();
    assert_eq!(job_view["state"], "RUNNING");
    assert_eq!(job_view["name"], spec.name.as_str());

    // Topology as Flink reports it.
    let topology = job_view["topology"]
        .as_array()
        .expect("topology is an array");
    assert_eq!(topology.len(), vertices.len(), "{job_view}");
    for (spec, v) in topology.iter().zip(&vertices) {
        assert_eq!(spec["id"], v.id.as_str());
        assert_eq!(spec["name"], v.name.as_str());
        assert_eq!(spec["parallelism"].as_u64(), Some(v.parallelism));
        assert_eq!(spec["max_parallelism"], 128, "{spec}");
    }
    // The agent's topology has the plan's node shape (id, inputs with id and ship_strategy).
    let agent_edges = plan_edges(&json!({"plan": {"nodes": topology}}), &vertices);
    assert_eq!(
        agent_edges, flink_edges,
        "edges and ship strategies as in /plan"
    );

    // Every resolved name is one Flink lists for that vertex.
    for (vid, names) in &resolved {
        for name in names {
            assert!(
                flink_names[vid].contains(name),
                "vertex {vid}: resolved {name} is not in Flink's listing"
            );
        }
    }

    // The names themselves: task-level time metrics everywhere; the source's records-in
    // are its operator-scoped ones (the task-level counter of a source stays 0).
    for v in &vertices {
        let names = &job_view["names"][&v.id];
        assert_eq!(names["busy"], "busyTimeMsPerSecond", "vertex {}", v.name);
        assert_eq!(
            names["backpressured"], "backPressuredTimeMsPerSecond",
            "vertex {}",
            v.name
        );
        assert_eq!(names["idle"], "idleTimeMsPerSecond", "vertex {}", v.name);
        // The datagen source's own numRecordsIn stays 0: its records out stand in for them.
        let (records_in, rate_in, source_out) = if v.name == vertex::SOURCE {
            (
                json!(["Source__datagen-source.numRecordsIn"]),
                json!(["Source__datagen-source.numRecordsInPerSecond"]),
                json!(["Source__datagen-source.numRecordsOut"]),
            )
        } else {
            (
                json!(["numRecordsIn"]),
                json!(["numRecordsInPerSecond"]),
                json!([]),
            )
        };
        assert_eq!(names["source_records_out"], source_out, "vertex {}", v.name);
        assert_eq!(names["records_in"], records_in, "vertex {}", v.name);
        assert_eq!(names["records_in_per_second"], rate_in, "vertex {}", v.name);
        assert_eq!(
            names["pending_records"],
            json!([]),
            "datagen has no pendingRecords"
        );
    }

    // Request budget: the first poll reads the details and lists each vertex's names once;
    // a later poll sends the overview and one filtered, aggregated request per vertex. The
    // agent talks to Flink through a recording proxy, so its requests can be checked too.
    let proxy = must(
        "start the recording proxy",
        RecordingProxy::start(rest.clone()).await,
    );
    let two = |rounds: &[Value]| rounds.len() >= 2;
    let polls = Polls::Until {
        interval: POLL_INTERVAL,
        done: &two,
    };
    let rounds = must(
        "collect, two polls",
        run_collect(&agent, proxy.url(), polls, AGENT_TIMEOUT * 2).await,
    );
    let recorded = polls_of(proxy.take());
    let requests: Vec<u64> = rounds
        .iter()
        .map(|r| r["requests"].as_u64().unwrap_or(u64::MAX))
        .collect();
    let vertex_count = vertices.len() as u64;
    eprintln!(
        "[collect] requests per poll: first {}, steady {} ({} vertices); steady poll usable: {}, reason: {}",
        requests[0],
        requests[1],
        vertex_count,
        steady_view(&rounds, &jid)["usable"],
        steady_view(&rounds, &jid)["unusable_reason"]
    );
    assert!(
        requests[0] >= 2 + 2 * vertex_count,
        "first poll: details, listings, values: {requests:?}"
    );
    assert!(
        requests[1] <= vertex_count + 3,
        "steady poll over budget (vertices + 3): {requests:?}"
    );
    assert!(
        requests[1] < requests[0],
        "names must not be listed again: {requests:?}"
    );
    assert_eq!(
        steady_view(&rounds, &jid)["names"],
        must("the job", job_of(&rounds[0], &jid))["names"]
    );
    let seen: Vec<u64> = recorded.iter().map(|p| p.len() as u64).collect();
    assert_eq!(
        seen, requests,
        "requests the proxy saw per poll vs the agent's own count"
    );
    check_requests(&recorded, &jid, &resolved);

    let mismatches = compare(&job_view, &flink_values);
    assert!(
        mismatches.is_empty(),
        "agent values differ from Flink's per-subtask values:\n{}",
        mismatches.join("\n")
    );

    sliced_reading(&agent, &rest, &jid, &vertices).await;
}

fn steady_view<'a>(rounds: &'a [Value], jid: &str) -> &'a Value {
    must("the job in the second poll", job_of(&rounds[1], jid))
}

/// What slicing relies on: Flink's `subtasks=k-k` selections of a vertex add up to its
/// whole-vertex sum, read within one MetricFetcher snapshot (the whole sum read before and
/// after the slices agrees).
async fn subtask_filters_partition_the_sums(
    rest: &FlinkRest,
    jid: &str,
    vertices: &[VertexStatus],
) {
    let sum_of = |vid: &str, filter: String| {
        let path = format!(
            "/jobs/{jid}/vertices/{vid}/subtasks/metrics?get=numRecordsOut&agg=sum{filter}"
        );
        async move {
            let answer = must("read numRecordsOut", rest.get(&path).await);
            aggregated(&answer, "numRecordsOut", "sum").unwrap_or(f64::NAN)
        }
    };
    for v in vertices.iter().filter(|v| v.parallelism > 1) {
        let mut checked = false;
        for _ in 0..SNAPSHOT_ATTEMPTS {
            let whole = sum_of(&v.id, String::new()).await;
            let mut parts = Vec::new();
            for k in 0..v.parallelism {
                parts.push(sum_of(&v.id, format!("&subtasks={k}-{k}")).await);
            }
            if whole != sum_of(&v.id, String::new()).await {
                continue; // a refresh came in between
            }
            eprintln!(
                "[collect] vertex {}: numRecordsOut per subtask {parts:?}, whole {whole}",
                v.name
            );
            assert_eq!(
                parts.iter().sum::<f64>(),
                whole,
                "vertex {}: {parts:?}",
                v.name
            );
            assert!(
                parts.iter().all(|p| *p < whole),
                "vertex {}: a one-subtask selection returned the whole sum: {parts:?}",
                v.name
            );
            checked = true;
            break;
        }
        assert!(
            checked,
            "vertex {}: no read fell inside one snapshot",
            v.name
        );
    }
}

/// Records-out counters of the multi-subtask vertices, summed by Flink over all subtasks.
async fn records_out_sums(
    rest: &FlinkRest,
    jid: &str,
    vertices: &[VertexStatus],
) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for v in vertices.iter().filter(|v| v.parallelism > 1) {
        let path = format!(
            "/jobs/{jid}/vertices/{}/subtasks/metrics?get=numRecordsOut&agg=sum",
            v.id
        );
        let answer = must("read numRecordsOut", rest.get(&path).await);
        if let Some(sum) = aggregated(&answer, "numRecordsOut", "sum") {
            sums.insert(v.id.clone(), sum);
        }
    }
    sums
}

/// Every job treated as large (`slice_above_subtasks = 1`, a 44 s window of 11 s polls in
/// one pass: 4 slices, so each subtask of these small vertices is a slice of its own). Each
/// poll must ask for one `subtasks=` slice per vertex, and no sample may be usable before
/// every slice has been read. Afterwards the merged counters must count each subtask exactly
/// once: they lie between Flink's whole-vertex sums read before and after the sliced polls
/// (counters only grow). A JobManager that ignored the filter would count every subtask once
/// per slice and overshoot; a slice left out would undershoot.
async fn sliced_reading(agent: &Path, rest: &FlinkRest, jid: &str, vertices: &[VertexStatus]) {
    subtask_filters_partition_the_sums(rest, jid, vertices).await;
    let before = records_out_sums(rest, jid, vertices).await;
    let proxy = must(
        "start the recording proxy",
        RecordingProxy::start(rest.clone()).await,
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "[jobmanager]\nurl = \"{}\"\n[collector]\npoll_interval = \"{POLL_INTERVAL}\"\nslice_above_subtasks = 1\nslice_passes_per_window = 1\n[autoscaler]\n\"metrics.window\" = \"44s\"\n",
            proxy.url()
        ),
    )
    .expect("write the agent configuration");
    let widest = vertices.iter().map(|v| v.parallelism).max().unwrap_or(1) as usize;
    let usable = |rounds: &[Value]| {
        rounds
            .last()
            .and_then(|r| job_in_round(r, jid))
            .is_some_and(|j| j["usable"] == true)
    };
    let mut command = tokio::process::Command::new(agent);
    command
        .args(["collect", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("start the agent's collect command");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let mut rounds: Vec<Value> = Vec::new();
    // The widest vertex needs one poll per subtask; allow a few polls of start-up slack.
    let read = async {
        while !usable(&rounds) && rounds.len() < widest + 4 {
            let Ok(Some(line)) = lines.next_line().await else {
                break;
            };
            rounds.push(serde_json::from_str(&line).expect("collect prints JSON lines"));
        }
    };
    let limit = Duration::from_secs(11 * (widest as u64 + 5));
    let _ = tokio::time::timeout(limit, read).await;
    let _ = child.start_kill();
    let _ = child.wait().await;

    let reasons: Vec<String> = rounds
        .iter()
        .filter_map(|r| job_in_round(r, jid))
        .map(|j| j["unusable_reason"].as_str().unwrap_or("usable").to_owned())
        .collect();
    eprintln!("[collect] sliced polls: {reasons:?}");
    assert!(
        usable(&rounds),
        "never usable in {} sliced polls: {reasons:?}",
        rounds.len()
    );
    let first_usable = reasons.len() - 1;
    assert!(
        first_usable + 1 >= widest,
        "usable before every slice of a {widest}-subtask vertex was read: {reasons:?}"
    );
    assert!(
        reasons[..first_usable].iter().all(|r| r != "usable"),
        "{reasons:?}"
    );

    let after = records_out_sums(rest, jid, vertices).await;
    let job = job_in_round(rounds.last().expect("a round"), jid).expect("the job");
    for (vid, low) in &before {
        let merged = job["sample"]["vertices"][vid]["num_records_out"]
            .as_f64()
            .unwrap_or_else(|| panic!("no merged records-out counter for vertex {vid}: {job}"));
        let high = after[vid];
        eprintln!("[collect] sliced vertex {vid}: records out {low} <= {merged} <= {high}");
        assert!(
            *low <= merged && merged <= high,
            "vertex {vid}: merged records-out {merged} outside Flink's whole-vertex sums {low}..{high}"
        );
    }
    assert!(
        !before.is_empty(),
        "no multi-subtask vertex reports numRecordsOut"
    );

    let value_queries: Vec<String> = proxy
        .take()
        .into_iter()
        .map(|r| r.path_and_query)
        .filter(|p| p.contains("/subtasks/metrics?get="))
        .collect();
    for v in vertices.iter().filter(|v| v.parallelism > 1) {
        let for_vertex: Vec<&String> = value_queries
            .iter()
            .filter(|p| p.contains(&format!("/vertices/{}/", v.id)))
            .collect();
        assert!(!for_vertex.is_empty(), "vertex {} was never read", v.name);
        assert!(
            for_vertex.iter().all(|p| p.contains("&subtasks=")),
            "vertex {} read whole while sliced: {for_vertex:?}",
            v.name
        );
    }
}
