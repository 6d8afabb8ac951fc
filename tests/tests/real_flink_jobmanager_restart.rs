//! Real Flink: the harness side of the JobManager-outage scenario. The JobManager is killed
//! (SIGKILL, as a crash), its REST API goes away, a new one starts on the same ports, the
//! TaskManager registers again, and the load job, which a JobManager without HA forgets, is
//! resubmitted under the same job id from its latest checkpoint. Prints the timings.

use std::time::{Duration, Instant};

use flink_autoscale_tests::flink_harness::{
    must, within, ClusterSettings, FlinkCluster, LoadJobSpec,
};
use serde_json::Value;

const TEST_BUDGET: Duration = Duration::from_secs(420);
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// Waiting for the TaskManager to drop the old incarnation (50 s heartbeat timeout) included.
const RESUBMIT_TIMEOUT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobmanager_killed_restarted_and_job_resubmitted_from_its_checkpoint() {
    within(TEST_BUDGET, "the JobManager-restart scenario", scenario()).await;
}

async fn scenario() {
    let mut cluster = must(
        "start the Flink cluster",
        FlinkCluster::start(ClusterSettings::default()).await,
    );
    let job = must(
        "run the load job",
        cluster
            .submit_load_job(&LoadJobSpec::at_rate(200.0), JOB_TIMEOUT)
            .await,
    );
    let jid = job.job_id.clone();
    let checkpoints_path = format!("/jobs/{jid}/checkpoints");
    must(
        "a completed checkpoint",
        cluster
            .poll_until(&checkpoints_path, Duration::from_secs(60), |c| {
                c["counts"]["completed"].as_u64() >= Some(1)
            })
            .await,
    );
    assert!(
        cluster.latest_checkpoint(&jid).is_some(),
        "a completed checkpoint must be on disk under {}",
        cluster.run_dir().display()
    );

    let killed = Instant::now();
    cluster.kill_jobmanager();
    let kill_took = killed.elapsed();
    let unreachable = cluster.rest().get("/overview").await;
    assert!(
        unreachable.is_err(),
        "REST still answers after the kill: {unreachable:?}"
    );

    let back_after = must("restart the JobManager", cluster.restart_jobmanager().await);
    let overview = must(
        "GET /jobs/overview",
        cluster.rest().get("/jobs/overview").await,
    );
    let still_listed = overview["jobs"]
        .as_array()
        .is_some_and(|jobs| jobs.iter().any(|j| j["jid"] == jid.as_str()));
    assert!(
        !still_listed,
        "a JobManager without HA forgets its jobs: {overview}"
    );

    let resubmitted = Instant::now();
    let restored_from = must(
        "resubmit the job from its checkpoint",
        cluster.resubmit_load_job(&job, RESUBMIT_TIMEOUT).await,
    )
    .expect("a checkpoint to restore");
    let resubmit_took = resubmitted.elapsed();
    let stats = must(
        "restore statistics",
        cluster
            .poll_until(&checkpoints_path, Duration::from_secs(60), |c| {
                c["latest"]["restored"]["external_path"].is_string()
            })
            .await,
    );
    let restored_path = stats["latest"]["restored"]["external_path"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let chk = restored_from
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        restored_path.ends_with(chk),
        "restored {restored_path}, expected {}",
        restored_from.display()
    );
    let details = must(
        "GET /jobs/:jid",
        cluster.rest().get(&format!("/jobs/{jid}")).await,
    );
    assert_eq!(
        details["state"],
        Value::from("RUNNING"),
        "same job id RUNNING again"
    );

    eprintln!(
        "[timing] SIGKILL to the JobManager -> reaped: {:.1} s",
        kill_took.as_secs_f64()
    );
    eprintln!(
        "[timing] new JobManager spawned -> TaskManager registered again: {:.1} s",
        back_after.as_secs_f64()
    );
    eprintln!(
        "[timing] resubmit (wait for free slots, upload, run from {chk}) -> all subtasks RUNNING: {:.1} s",
        resubmit_took.as_secs_f64()
    );
}
