//! Real Flink 2.3: the documented `exec` recipe for a session cluster,
//! `packaging/exec/session-cluster-resubmit.sh`, run once as the agent runs it (the approved
//! decision as JSON on stdin): it stops the load job with a savepoint and runs its jar again
//! from that savepoint (under a new job id: Flink refuses the old one). Flink 2.x ignores the
//! `pipeline.jobvertex-parallelism-overrides` given to `/jars/:id/run` (FLINK-38770), so the
//! script sets the parallelism with `PUT /jobs/:jid/resource-requirements`. The new job then
//! runs at the approved parallelism, restored from the savepoint.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flink_autoscale_agent::actuation::ActuationRequest;
use flink_autoscale_core::protocol::{Plan, Proposal, VertexProposal};
use flink_autoscale_tests::flink_harness::{
    fully_running, job_status, must, vertex, within, ClusterSettings, FlinkCluster, LoadJobSpec,
};

const TEST_BUDGET: Duration = Duration::from_secs(180);
const SCRIPT: &str = "packaging/exec/session-cluster-resubmit.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exec_recipe_resubmits_a_session_job_from_a_savepoint_with_new_parallelism() {
    within(TEST_BUDGET, "the exec recipe on real Flink", scenario()).await;
}

async fn scenario() {
    let mut cluster = must(
        "start the Flink cluster",
        FlinkCluster::start(ClusterSettings::default()).await,
    );
    // The source stays at its parallelism (restored, it cannot use more subtasks than the
    // splits it started with: extra ones finish), so it gets its own REBALANCE edge.
    let spec = LoadJobSpec {
        rebalance_after_source: true,
        ..LoadJobSpec::at_rate(200.0)
    };
    let job = must(
        "submit the load job",
        cluster
            .submit_load_job(&spec, Duration::from_secs(120))
            .await,
    );
    let details = must(
        "job details",
        cluster.rest().get(&format!("/jobs/{}", job.job_id)).await,
    );
    let (_, vertices) = job_status(&details);
    let jars = must("list jars", cluster.rest().get("/jars").await);
    let jar_id = jars["files"][0]["id"]
        .as_str()
        .expect("an uploaded jar")
        .to_string();
    // Every vertex but the source one up (the cluster has 8 slots; the job starts at 1 to 3).
    let target: Vec<(String, u64)> = vertices
        .iter()
        .map(|v| {
            let up = u64::from(!v.name.starts_with(vertex::SOURCE));
            (v.id.clone(), v.parallelism + up)
        })
        .collect();
    let proposal = Proposal {
        proposal_id: "exec-1".into(),
        agent_id: "agent".into(),
        cluster_id: "real-flink".into(),
        region: "local".into(),
        job_id: job.job_id.clone(),
        job_name: "load".into(),
        vertices: vertices
            .iter()
            .zip(&target)
            .map(|(v, (_, p))| VertexProposal {
                id: v.id.clone(),
                name: v.name.clone(),
                slot_sharing_group: None,
                current_parallelism: v.parallelism as u32,
                proposed_parallelism: *p as u32,
                evidence: None,
            })
            .collect(),
        checkpoint_state_bytes: None,
        slots_per_task_manager: 8,
        disk_bytes_per_task_manager: 1 << 30,
        current_task_managers: 1,
    };
    let plan = Plan {
        task_managers: 1,
        standby_task_managers: 0,
        parallelism: target
            .iter()
            .map(|(id, p)| (id.clone(), *p as u32))
            .collect(),
    };
    let stdin = serde_json::to_vec(&ActuationRequest::new(&proposal, &plan)).unwrap();
    let run = job.run_request();
    let savepoints = cluster.run_dir().join("savepoints");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let started = Instant::now();
    let output = tokio::task::block_in_place(|| {
        let mut child = Command::new("bash")
            .arg(repo.join(SCRIPT))
            .env("FLINK_REST_URL", cluster.rest_url())
            .env("FLINK_JAR_ID", &jar_id)
            .env("FLINK_ENTRY_CLASS", run["entryClass"].as_str().unwrap())
            .env(
                "FLINK_PROGRAM_ARGS_JSON",
                run["programArgsList"].to_string(),
            )
            .env(
                "FLINK_SAVEPOINT_DIR",
                format!("file://{}", savepoints.display()),
            )
            .env("FLINK_SAVEPOINT_TIMEOUT", "120")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash");
        child.stdin.take().unwrap().write_all(&stdin).unwrap();
        child.wait_with_output().expect("the script")
    });
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("[exec] {} s:\n{stderr}", started.elapsed().as_secs());
    assert!(output.status.success(), "the script failed:\n{stderr}");
    let savepoint = stderr
        .lines()
        .find_map(|l| {
            l.split_once(" stopped with savepoint ")
                .map(|(_, p)| p.trim())
        })
        .unwrap_or_else(|| panic!("no savepoint in:\n{stderr}"))
        .to_string();
    let new_id = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert_eq!(new_id.len(), 32, "the new job id on stdout: {new_id:?}");
    assert_ne!(new_id, job.job_id);
    // `/jobs/:jid` comes from a cache (`web.refresh-interval`, 3 s): the old job may still
    // read RUNNING for a moment after the stop.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let old = must(
            "old job",
            cluster.rest().get(&format!("/jobs/{}", job.job_id)).await,
        );
        if old["state"] == "FINISHED" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the old job was not stopped: {}",
            old["state"]
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Its first restore is the savepoint (a later in-place rescale restores a checkpoint,
    // but not before the adaptive scheduler's cooldown, 30 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    let restored = loop {
        let stats = cluster
            .rest()
            .get(&format!("/jobs/{new_id}/checkpoints"))
            .await;
        if let Some(restored) = stats.ok().map(|s| s["latest"]["restored"].clone()) {
            if !restored.is_null() {
                break restored;
            }
        }
        assert!(Instant::now() < deadline, "job {new_id} restored nothing");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(restored["is_savepoint"], true, "{restored}");
    assert_eq!(restored["external_path"], savepoint.as_str(), "{restored}");

    // The resubmitted job runs, every vertex (same ids: same graph) at its new parallelism:
    // at once, or after the adaptive scheduler's 30 s cooldown if the PUT came late (36 s).
    let deadline = Instant::now() + Duration::from_secs(75);
    loop {
        let details = cluster.rest().get(&format!("/jobs/{new_id}")).await;
        if let Ok(details) = details {
            let (state, now) = job_status(&details);
            let at_target = now.len() == target.len()
                && now.iter().all(|v| {
                    target
                        .iter()
                        .any(|(id, p)| *id == v.id && *p == v.parallelism)
                });
            if fully_running(&state, &now) && at_target {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "job {new_id} not running at {target:?} within 75 s: {state} {now:?}"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "[exec] job {new_id} runs at {target:?}, {} s after the script started",
        started.elapsed().as_secs()
    );
    cluster.stop();
}
