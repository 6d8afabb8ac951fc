//! Real Flink, the whole loop on one cluster: the agent daemon (`flink-autoscale-agent run`)
//! with the adaptive-scheduler realizer, and the coordinator binary (SQLite) as its gate.
//!
//! One scenario, in order, so the cluster starts once:
//! 1. start-up: the agent watches from the moment the job is RUNNING, while Flink reports its
//!    start-up values (busy 1000 ms/s, rates 0); no proposal comes of them;
//! 2. scale-up: the rate file raises the load until cpu-map is overloaded; the agent proposes
//!    cpu-map with its forward group, the coordinator approves, the realizer applies, the job
//!    runs at the new parallelism, the outcome is in the coordinator's audit;
//! 3. gated scale-down: the region is flagged as evacuating and the load lowered; the
//!    scale-down is refused with the reason in the audit, and proposed only once the rescaled
//!    job has been stable for a full window; the flag is cleared and the scale-down proceeds;
//! 4. JobManager outage: the JobManager is killed while the agent watches; the agent counts
//!    errors and does nothing; a new JobManager runs the job again from its checkpoint and the
//!    same agent process gets usable data again without acting on the gap.
//!
//! The job starts at parallelism 1 everywhere, so nothing can be scaled down at the start
//! or after the outage: any proposal there would come from start-up data. The source feeds
//! cpu-map through a REBALANCE edge, so cpu-map's forward group is cpu-map and filter (the
//! datagen source cannot grow past the splits it started with).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flink_autoscale_tests::coordinator_process::Coordinator;
use flink_autoscale_tests::flink_harness::{
    aggregated, alongside, fully_running, job_status, metric_sum, must, start_agent_setup, vertex,
    AgentDaemon, AgentSetup, ClusterSettings, FlinkCluster, LoadJob, LoadJobSpec, VertexStatus,
};
use serde_json::{json, Value};

const TEST_BUDGET: Duration = Duration::from_secs(840);
const REGION: &str = "real-flink-region";
/// At least Flink's `metrics.fetcher.update-interval` (10 s).
const POLL_S: u64 = 11;
/// Flink reports busy 1000 ms/s for 8-28 s after a (re)start; the engine ignores this long.
const STABILIZATION_S: u64 = 30;
const WINDOW_S: u64 = 30;
/// cpu-map waits this long per record: ~900 records/s per subtask at most.
const SLEEP_MICROS: u64 = 1000;
const LOW_RATE: f64 = 100.0;
const HIGH_RATE: f64 = 800.0;
/// Utilization band [0.2, 0.6]: 800/s on one cpu-map subtask (busy ~0.9) is above it, 100/s
/// (busy ~0.1) below it.
const AUTOSCALER: &str = r#"
[autoscaler]
enabled = true
"metrics.window" = "30s"
"stabilization.interval" = "30s"
"utilization.target" = 0.4
"target.utilization.boundary" = 0.2
"scale-down.interval" = "0s"
"vertex.max-parallelism" = 4
"restart.time" = "15s"
"catch-up.duration" = "2min"
# Phase 3 checks the region gate, not how long a lone scale-down is held for its saving
# (unit tests and the what-if runs cover that); held, it added ~100 s per run.
"flink-autoscale.scale-down-caution.enabled" = false
"#;
const METRIC_JOB_USABLE: &str = "flink_autoscale_agent_job_data_usable";
const METRIC_WINDOW: &str = "flink_autoscale_agent_window_samples";
const METRIC_LAST_POLL: &str = "flink_autoscale_agent_last_successful_poll_timestamp_seconds";
const METRIC_ERRORS: &str = "flink_autoscale_agent_errors_total";
const METRIC_PROPOSALS: &str = "flink_autoscale_agent_proposals_total";
const PROPOSING: &str = "proposing a rescale";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_2_3_0() {
    alongside(TEST_BUDGET, "the autoscaling scenario", scenario("2.3.0")).await;
}

/// The long-term-support line; runs beside the 2.3.0 test (`alongside`: the load job mostly sleeps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_flink_1_20_5() {
    alongside(TEST_BUDGET, "the autoscaling scenario", scenario("1.20.5")).await;
}

async fn scenario(version: &str) {
    let mut rig = Rig::start(version).await;
    start_up_is_not_acted_on(&mut rig).await;
    let scaled_to = scale_up(&mut rig).await;
    gated_scale_down(&mut rig, scaled_to).await;
    jobmanager_outage(&mut rig).await;
    for line in &rig.timings {
        eprintln!("[timing] Flink {version}: {line}");
    }
}

/// The cluster, the job, the coordinator and the agent daemon.
struct Rig {
    cluster: FlinkCluster,
    job: LoadJob,
    agent: AgentDaemon,
    coordinator: Coordinator,
    _dir: tempfile::TempDir,
    ids: VertexIds,
    timings: Vec<String>,
}

/// cpu-map's forward group (cpu-map, filter) and the rest of the job (the source, and
/// keyed-sum chained with the sink when both run at parallelism 1).
struct VertexIds {
    map: String,
    filter: String,
    others: Vec<String>,
}

impl Rig {
    async fn start(version: &str) -> Rig {
        let spec = LoadJobSpec {
            rate: LOW_RATE,
            work: 1000,
            sleep_micros: SLEEP_MICROS,
            source_parallelism: 1,
            rebalance_after_source: true,
            map_parallelism: 1,
            keyed_parallelism: 1,
            sink_parallelism: 1,
            ..LoadJobSpec::default()
        };
        // A TaskManager notices a dead JobManager after heartbeat.timeout (50 s by default).
        let settings = ClusterSettings {
            extra: vec![("heartbeat.timeout".to_owned(), "20000".to_owned())],
            ..ClusterSettings::on(version)
        };
        let setup = start_agent_setup(settings, &spec).await;
        let AgentSetup {
            agent,
            cluster,
            job,
        } = must(
            "start the cluster and the load job, locate the agent",
            setup,
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
        let config = dir.path().join("agent.toml");
        std::fs::write(
            &config,
            agent_toml(cluster.rest_url(), &job.job_id, dir.path(), &coordinator),
        )
        .expect("write agent.toml");
        let agent = must(
            "start the agent daemon",
            AgentDaemon::start(&cluster, &agent, &config).await,
        );
        let details = must(
            "GET /jobs/:jid",
            cluster.rest().get(&format!("/jobs/{}", job.job_id)).await,
        );
        let (_, vertices) = job_status(&details);
        let id = |name: &str| {
            vertices
                .iter()
                .find(|v| v.name == name)
                .map(|v| v.id.clone())
                .unwrap_or_else(|| panic!("no vertex {name}: {details}"))
        };
        let group = [id(vertex::CPU_MAP), id(vertex::FILTER)];
        let others = vertices
            .iter()
            .filter(|v| !group.contains(&v.id))
            .map(|v| v.id.clone())
            .collect();
        let [map, filter] = group;
        let ids = VertexIds {
            map,
            filter,
            others,
        };
        Rig {
            cluster,
            job,
            agent,
            coordinator,
            _dir: dir,
            ids,
            timings: Vec::new(),
        }
    }

    fn jid(&self) -> &str {
        &self.job.job_id
    }

    /// The JobManager's RUNNING timestamp of the job's current incarnation (Unix ms).
    async fn running_since_ms(&self) -> u64 {
        let details = must(
            "GET /jobs/:jid",
            self.cluster
                .rest()
                .get(&format!("/jobs/{}", self.jid()))
                .await,
        );
        details["timestamps"]["RUNNING"]
            .as_u64()
            .unwrap_or_else(|| panic!("no RUNNING timestamp: {details}"))
    }

    async fn metrics(&self) -> String {
        must("scrape the agent", self.agent.metrics().await)
    }

    /// Audit records of the job, oldest first.
    async fn audit(&self) -> Vec<Value> {
        let mut records = self.coordinator.decisions(self.jid()).await;
        records.reverse();
        records
    }

    /// Polls the audit every 2 s until `found` picks a record; panics after `timeout` with
    /// the audit and the agent's log.
    async fn wait_for_record(
        &self,
        what: &str,
        timeout: Duration,
        found: impl Fn(&[Value]) -> Option<Value>,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let audit = self.audit().await;
            if let Some(record) = found(&audit) {
                return record;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {timeout:?}\naudit: {audit:#?}\nagent:\n{}",
                self.agent.log_tail(30)
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Waits until the job runs with the forward group (cpu-map, filter) at `p`.
    async fn wait_for_group_parallelism(&mut self, p: u64, timeout: Duration) {
        let ids = [self.ids.map.clone(), self.ids.filter.clone()];
        let jid = self.job.job_id.clone();
        must(
            &format!("the job RUNNING with its forward group at parallelism {p}"),
            self.cluster
                .wait_for_job(&jid, timeout, |state, vertices| {
                    fully_running(state, vertices)
                        && ids.iter().all(|id| parallelism_of(vertices, id) == Some(p))
                })
                .await,
        );
    }

    /// Waits until the job runs with the forward group at `p`, the parallelism `approved`
    /// planned, and the audit shows the outcome `applied`; returns when the job was seen
    /// running (Unix ms) and the record with its outcome.
    async fn applied(&mut self, approved: &Value, p: u64) -> (u64, Value) {
        self.wait_for_group_parallelism(p, Duration::from_secs(120))
            .await;
        let running_ms = unix_ms();
        let reported = self
            .wait_for_record(
                "the rescale's outcome in the audit",
                Duration::from_secs(90),
                |audit| {
                    audit
                        .iter()
                        .find(|r| r["proposal_id"] == approved["proposal_id"])
                        .filter(|r| r["outcome"].is_object())
                        .cloned()
                },
            )
            .await;
        assert_eq!(reported["outcome"]["status"], "applied", "{reported:#}");
        assert!(
            reported["outcome"]["restart_ms"]
                .as_u64()
                .is_some_and(|ms| ms > 0),
            "the audit records the rescale's downtime: {reported:#}"
        );
        (running_ms, reported)
    }

    /// How many "proposing a rescale" events the agent has logged so far.
    fn proposals_logged(&self) -> usize {
        self.agent.events_with_message(PROPOSING).len()
    }

    /// The agent's "proposing a rescale" log events for cpu-map after the first `mark`
    /// events, as (current, proposed).
    fn map_proposals_after(&self, mark: usize) -> Vec<(u64, u64)> {
        self.agent
            .events_with_message(PROPOSING)
            .iter()
            .skip(mark)
            .filter(|e| e["vertex_id"] == self.ids.map.as_str())
            .filter_map(|e| Some((e["current"].as_u64()?, e["proposed"].as_u64()?)))
            .collect()
    }
}

/// Phase 1, start-up: no proposal from the start-up values; the agent gets usable data by itself.
async fn start_up_is_not_acted_on(rig: &mut Rig) {
    let running = rig.running_since_ms().await;
    let busy_path = format!(
        "/jobs/{}/vertices/{}/subtasks/metrics?get=busyTimeMsPerSecond&agg=max",
        rig.jid(),
        rig.ids.map
    );
    // Past stabilization plus one full window plus two polls, the engine has evaluated.
    let until = running + (STABILIZATION_S + WINDOW_S + 2 * POLL_S) * 1000;
    let mut startup_busy: Vec<(f64, f64)> = Vec::new();
    // One poll in a few meets the MetricFetcher's previous snapshot and is `stale`, so the
    // agent's figures are read every second, not once at the end.
    let (mut usable_seen, mut window_max) = (false, 0.0_f64);
    let job = [("job_id", rig.jid())];
    while unix_ms() < until {
        if let Ok(answer) = rig.cluster.rest().get(&busy_path).await {
            if let Some(busy) = aggregated(&answer, "busyTimeMsPerSecond", "max") {
                let at = unix_ms().saturating_sub(running) as f64 / 1000.0;
                if startup_busy.last().is_none_or(|(_, b)| *b != busy) {
                    startup_busy.push((at, busy));
                }
            }
        }
        let metrics = rig.metrics().await;
        usable_seen |= metric_sum(&metrics, METRIC_JOB_USABLE, &job) == 1.0;
        window_max = window_max.max(metric_sum(&metrics, METRIC_WINDOW, &job));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        usable_seen,
        "the agent's data should have become usable by itself\n{}",
        rig.agent.log_tail(30)
    );
    assert!(
        window_max >= (WINDOW_S / POLL_S) as f64,
        "the window should have held a full window of samples, held at most {window_max}"
    );
    let metrics = rig.metrics().await;
    let audit = rig.audit().await;
    assert!(
        audit.is_empty(),
        "no proposal may come of start-up data: {audit:#?}"
    );
    assert_eq!(metric_sum(&metrics, METRIC_PROPOSALS, &job), 0.0);
    assert!(rig.agent.events_with_message(PROPOSING).is_empty());
    rig.timings.push(format!(
        "start-up: cpu-map busy max as Flink reported it (s after RUNNING, ms/s): {startup_busy:?}"
    ));
}

/// Phase 2, scale-up of cpu-map with its forward group, approved, applied, reported. Returns the
/// new parallelism.
async fn scale_up(rig: &mut Rig) -> u64 {
    let mark = rig.proposals_logged();
    let step_ms = unix_ms();
    must("raise the rate", rig.job.set_rate(HIGH_RATE));
    let approved = rig
        .wait_for_record(
            "a scale-up approved by the coordinator",
            Duration::from_secs(240),
            |audit| {
                if let Some(refused) = audit.iter().find(|r| r["verdict"] != "approved") {
                    panic!("a proposal was refused: {refused:#}");
                }
                audit.first().cloned()
            },
        )
        .await;
    let approved_ms = approved["received_at"].as_u64().unwrap_or_default();
    let plan = &approved["plan"]["parallelism"];
    let p = plan[&rig.ids.map].as_u64().unwrap_or_default();
    assert!(p > 1, "cpu-map must be scaled up: {approved:#}");
    assert_eq!(plan[&rig.ids.filter], p, "forward group: {approved:#}");
    for other in &rig.ids.others {
        assert!(
            plan[other].is_null() || plan[other] == 1,
            "only the forward group changes: {approved:#}"
        );
    }
    assert_eq!(approved["region"], REGION);
    assert_eq!(
        rig.map_proposals_after(mark),
        vec![(1, p)],
        "the agent proposed cpu-map 1 -> {p} once"
    );

    let (running_ms, reported) = rig.applied(&approved, p).await;
    let observed = &reported["outcome"]["observed_parallelism"];
    assert!(
        observed.is_null() || observed[&rig.ids.map] == p,
        "{reported:#}"
    );
    rig.timings.push(format!(
        "scale-up 1 -> {p}: load step -> approval {:.1} s; approval -> RUNNING at {p} seen {:.1} s; -> outcome in the audit {:.1} s",
        approved_ms.saturating_sub(step_ms) as f64 / 1000.0,
        running_ms.saturating_sub(approved_ms) as f64 / 1000.0,
        unix_ms().saturating_sub(approved_ms) as f64 / 1000.0,
    ));
    p
}

/// Phase 3, scale-down refused while the region evacuates, then applied once the flag is cleared.
async fn gated_scale_down(rig: &mut Rig, from: u64) {
    let mark = rig.proposals_logged();
    let evacuation = format!("/v1/regions/{REGION}/evacuation");
    let (status, body) = rig
        .coordinator
        .admin(
            "PUT",
            &evacuation,
            Some(json!({"reason": "real-Flink test failover"})),
        )
        .await;
    assert!(
        (200..300).contains(&status),
        "PUT {evacuation}: {status} {body}"
    );
    must("lower the rate", rig.job.set_rate(LOW_RATE));
    let rescaled_ms = rig.running_since_ms().await;
    let before = rig.audit().await.len();

    let refused = rig
        .wait_for_record(
            "a scale-down refused during the evacuation",
            Duration::from_secs(200),
            |audit| {
                let newer = &audit[before.min(audit.len())..];
                if let Some(approved) = newer.iter().find(|r| r["verdict"] == "approved") {
                    panic!("approved during the evacuation: {approved:#}");
                }
                newer.first().cloned()
            },
        )
        .await;
    let codes: Vec<&str> = refused["reasons"]
        .as_array()
        .map(|reasons| reasons.iter().filter_map(|r| r["code"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        codes.contains(&"region_evacuating"),
        "the audit must say why: {refused:#}"
    );
    let refused_ms = refused["received_at"].as_u64().unwrap_or_default();
    // Staleness after the rescale: nothing before stabilization plus a full window.
    assert!(
        refused_ms >= rescaled_ms + (STABILIZATION_S + WINDOW_S) * 1000,
        "proposed {} s after the rescale, before stabilization + window",
        refused_ms.saturating_sub(rescaled_ms) / 1000
    );
    let proposals = rig.map_proposals_after(mark);
    assert!(
        !proposals.is_empty() && proposals.iter().all(|(cur, new)| *cur == from && new < cur),
        "after the rescale only scale-downs of cpu-map from {from}: {proposals:?}"
    );
    let details = must(
        "GET /jobs/:jid",
        rig.cluster
            .rest()
            .get(&format!("/jobs/{}", rig.jid()))
            .await,
    );
    assert_eq!(
        parallelism_of(&job_status(&details).1, &rig.ids.map),
        Some(from),
        "nothing applied during the evacuation"
    );

    let (status, body) = rig.coordinator.admin("DELETE", &evacuation, None).await;
    assert!(
        (200..300).contains(&status),
        "DELETE {evacuation}: {status} {body}"
    );
    let cleared_ms = unix_ms();
    let approved = rig
        .wait_for_record(
            "the scale-down approved once the flag is cleared",
            Duration::from_secs(120),
            |audit| {
                audit
                    .iter()
                    .find(|r| {
                        r["verdict"] == "approved" && r["received_at"].as_u64() >= Some(cleared_ms)
                    })
                    .cloned()
            },
        )
        .await;
    let p = approved["plan"]["parallelism"][&rig.ids.map]
        .as_u64()
        .unwrap_or_default();
    assert!(p < from && p >= 1, "a scale-down of cpu-map: {approved:#}");
    rig.applied(&approved, p).await;
    let refusals = rig
        .audit()
        .await
        .iter()
        .filter(|r| r["verdict"] == "refused")
        .count();
    rig.timings.push(format!(
        "scale-down {from} -> {p}: first proposal {:.1} s after the rescaled job's RUNNING; {refusals} refusal(s) while evacuating; flag cleared -> approval {:.1} s",
        refused_ms.saturating_sub(rescaled_ms) as f64 / 1000.0,
        approved["received_at"]
            .as_u64()
            .unwrap_or_default()
            .saturating_sub(cleared_ms) as f64
            / 1000.0,
    ));
}

/// Phase 4, the JobManager dies and comes back; the agent counts errors, acts on nothing, and
/// recovers by itself.
async fn jobmanager_outage(rig: &mut Rig) {
    let jid = rig.jid().to_owned();
    let checkpoints = format!("/jobs/{jid}/checkpoints");
    let since = rig.running_since_ms().await;
    must(
        "a checkpoint of the current incarnation",
        rig.cluster
            .poll_until(&checkpoints, Duration::from_secs(60), |c| {
                c["latest"]["completed"]["latest_ack_timestamp"].as_u64() > Some(since)
            })
            .await,
    );
    let pid = rig.agent.pid();
    let baseline = rig.metrics().await;
    let errors_before = metric_sum(&baseline, METRIC_ERRORS, &[]);
    let proposals_before = metric_sum(&baseline, METRIC_PROPOSALS, &[]);
    let audit_before = rig.audit().await.len();

    let mark = rig.proposals_logged();
    let killed_ms = unix_ms();
    rig.cluster.kill_jobmanager();
    assert!(
        rig.cluster.rest().get("/overview").await.is_err(),
        "REST still answers after the kill"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let errors = loop {
        let errors = metric_sum(&rig.metrics().await, METRIC_ERRORS, &[]) - errors_before;
        if errors >= 2.0 {
            break errors;
        }
        assert!(
            Instant::now() < deadline,
            "the agent should count failed polls\n{}",
            rig.agent.log_tail(30)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    let back = must(
        "restart the JobManager",
        rig.cluster.restart_jobmanager().await,
    );
    let job = rig.job.clone();
    let restored = must(
        "resubmit the job from its checkpoint",
        rig.cluster
            .resubmit_load_job(&job, Duration::from_secs(180))
            .await,
    )
    .expect("a checkpoint to restore");
    let resubmitted_ms = rig.running_since_ms().await;
    let stats = must(
        "restore statistics",
        rig.cluster
            .poll_until(&checkpoints, Duration::from_secs(60), |c| {
                c["latest"]["restored"]["external_path"].is_string()
            })
            .await,
    );
    let chk = restored
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        stats["latest"]["restored"]["external_path"]
            .as_str()
            .is_some_and(|p| p.ends_with(&chk)),
        "restored from {chk}: {stats}"
    );

    let deadline = Instant::now() + Duration::from_secs(120);
    let job_labels = [("job_id", jid.as_str())];
    loop {
        let metrics = rig.metrics().await;
        let last_poll_ms = (metric_sum(&metrics, METRIC_LAST_POLL, &job_labels) * 1000.0) as u64;
        if last_poll_ms >= resubmitted_ms
            && metric_sum(&metrics, METRIC_JOB_USABLE, &job_labels) == 1.0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent should get usable data from the new JobManager by itself\n{}",
            rig.agent.log_tail(30)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let recovered_ms = unix_ms();
    assert!(rig.agent.is_running(), "the agent must keep running");
    assert_eq!(rig.agent.pid(), pid, "the same agent process");
    let metrics = rig.metrics().await;
    assert!(
        metric_sum(&metrics, METRIC_WINDOW, &job_labels) <= 2.0,
        "the window starts over with the new incarnation\n{metrics}"
    );
    assert_eq!(
        metric_sum(&metrics, METRIC_PROPOSALS, &[]),
        proposals_before,
        "no proposal across the outage"
    );
    assert_eq!(
        rig.audit().await.len(),
        audit_before,
        "no action across the outage"
    );
    assert!(
        rig.map_proposals_after(mark).is_empty(),
        "nothing proposed across the outage"
    );
    rig.timings.push(format!(
        "JobManager outage: {errors} failed polls counted; new JobManager -> TaskManager back {:.1} s; resubmitted from {chk}; kill -> agent's data usable again {:.1} s (job RUNNING again -> usable {:.1} s)",
        back.as_secs_f64(),
        recovered_ms.saturating_sub(killed_ms) as f64 / 1000.0,
        recovered_ms.saturating_sub(resubmitted_ms) as f64 / 1000.0,
    ));
}

fn agent_toml(jobmanager: &str, jid: &str, dir: &Path, coordinator: &Coordinator) -> String {
    format!(
        r#"
[jobmanager]
url = "{jobmanager}"
request_timeout = "5s"
connect_timeout = "2s"
fetcher_update_interval = "10s"
[collector]
poll_interval = "{POLL_S}s"
poll_deadline = "10s"
backoff_initial = "1s"
backoff_max = "8s"
jobs = ["{jid}"]
[server]
listen = "127.0.0.1:0"
shutdown_grace = "1s"
[log]
format = "json"
level = "info"
{AUTOSCALER}
[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
agent_id = "real-flink-agent"
cluster_id = "real-flink"
region = "{REGION}"
slots_per_task_manager = 8
disk_bytes_per_task_manager = 10737418240
verify_deadline = "3min"
refusal_backoff = "5s"
retry_initial = "1s"
retry_max = "10s"
[control.coordinator]
url = "{url}"
token_file = "{token}"
request_timeout = "5s"
"#,
        state = dir.join("agent-state.json").display(),
        url = coordinator.url,
        token = coordinator.agent_token_file().display(),
    )
}

fn parallelism_of(vertices: &[VertexStatus], id: &str) -> Option<u64> {
    vertices.iter().find(|v| v.id == id).map(|v| v.parallelism)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
