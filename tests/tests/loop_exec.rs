//! The `exec` realizer in the loop: the configured command gets the approved decision as JSON
//! on stdin (the `pipeline.jobvertex-parallelism-overrides` map and the TaskManager plan).
//! Here the command only records it and rescales nothing, so the loop watches until the
//! verify deadline and reports a timed-out (failed) outcome; a failing command is reported
//! as failed at once.

use std::time::Duration;

use flink_autoscale_agent::control::LoopEvent;
use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_tests::lockstep::{scenario_text, Harness, SHORT_WINDOW};

fn exec_control(dir: &std::path::Path, script: &str) -> String {
    format!(
        r#"{SHORT_WINDOW}
[control]
realizer = "exec"
state_file = "{}"
disk_bytes_per_task_manager = 10737418240
verify_deadline = "2min"
[control.gates]
min_interval = "0s"
[control.exec]
command = ["/bin/sh", "-c", "{script}"]
timeout = "10s"
"#,
        dir.join("state.json").display()
    )
}

fn first_outcome(h: &Harness) -> (OutcomeStatus, String) {
    h.log
        .iter()
        .find_map(|(_, e)| match e {
            LoopEvent::Outcome { outcome, .. } => {
                Some((outcome.status, outcome.error.clone().unwrap_or_default()))
            }
            _ => None,
        })
        .expect("an outcome")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_gets_the_decision_and_the_loop_verifies_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("decision.json");
    let extra = exec_control(dir.path(), &format!("cat > {}", out.display()));
    let mut h = Harness::start(
        &scenario_text("step-load.toml"),
        Duration::from_secs(15),
        &extra,
    )
    .await;
    let job = h.job_ids()[0].clone();
    h.run_for(Duration::from_secs(15 * 60)).await;

    let decision: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("the command ran"))
            .expect("JSON on stdin");
    assert_eq!(decision["job_id"], job.as_str());
    let overrides = decision["flink_configuration"]["pipeline.jobvertex-parallelism-overrides"]
        .as_str()
        .expect("overrides map");
    assert_eq!(
        overrides.split(',').count(),
        h.control.vertex_ids(&job).len(),
        "{overrides}"
    );
    assert!(
        decision["task_managers"]["total"].as_u64().unwrap_or(0) >= 1,
        "{decision}"
    );
    let (status, error) = first_outcome(&h);
    assert_eq!(status, OutcomeStatus::Failed);
    assert!(error.starts_with("timed out"), "{error}");
    assert!(
        h.control.parallelism(&job).values().all(|p| *p == 1),
        "nothing applied it"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_is_a_failed_outcome() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = exec_control(dir.path(), "echo operator says no >&2; exit 4");
    let mut h = Harness::start(
        &scenario_text("step-load.toml"),
        Duration::from_secs(15),
        &extra,
    )
    .await;
    h.run_for(Duration::from_secs(10 * 60)).await;
    let (status, error) = first_outcome(&h);
    assert_eq!(status, OutcomeStatus::Failed);
    assert!(error.contains("operator says no"), "{error}");
    h.shutdown().await;
}
