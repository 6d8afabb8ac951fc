//! Agent restarts in the middle of an action. The state file carries the action in flight:
//! after a restart mid-rescale the agent compares the observed parallelism with the approved
//! plan and reports the outcome (never actuating twice); after a restart while the
//! coordinator was unreachable it asks again with the same proposal id (one audit record).

use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_agent::control::{ControlLoop, LoopEvent};
use flink_autoscale_agent::state_store::Stage;
use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_tests::coordinator_process::Coordinator;
use flink_autoscale_tests::lockstep::{coordinator_control, scenario_text, Harness, SHORT_WINDOW};

async fn start(dir: &std::path::Path, coordinator: &Coordinator) -> Harness {
    let extra = format!(
        "{SHORT_WINDOW}{}",
        coordinator_control(
            dir,
            &coordinator.url,
            &coordinator.agent_token_file(),
            "eu-west-1"
        )
    );
    Harness::start(
        &scenario_text("step-load.toml"),
        Duration::from_secs(15),
        &extra,
    )
    .await
}

fn count(h: &Harness, pred: impl Fn(&LoopEvent) -> bool) -> usize {
    h.log.iter().filter(|(_, e)| pred(e)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_rescale_verifies_and_reports_without_actuating_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
    let mut h = start(dir.path(), &coordinator).await;
    let job = h.job_ids()[0].clone();
    for _ in 0..120 {
        h.tick().await;
        if count(&h, |e| matches!(e, LoopEvent::Actuating { .. })) > 0 {
            break;
        }
    }
    let flight = h
        .agent
        .store()
        .get(&job)
        .in_flight
        .expect("an action in flight");
    assert!(
        matches!(flight.stage, Stage::Actuating { .. }),
        "{:?}",
        flight.stage
    );
    let id = flight.proposal.proposal_id.clone();

    let restarted = ControlLoop::from_config(&h.config).expect("restart from the state file");
    assert!(
        restarted.store().get(&job).in_flight.is_some(),
        "the state file keeps the action"
    );
    h.restart_agent(Arc::new(restarted));
    h.run_for(Duration::from_secs(1800)).await;

    assert_eq!(
        count(&h, |e| matches!(e, LoopEvent::Actuating { .. })),
        1,
        "actuated again after the restart"
    );
    let applied = h.outcomes(OutcomeStatus::Applied);
    assert_eq!(applied.len(), 1);
    assert!(matches!(applied[0].1, LoopEvent::Outcome { proposal_id, .. } if *proposal_id == id));
    let audit = coordinator.decisions(&job).await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["outcome"]["status"], "applied", "{}", audit[0]);
    let record = h.agent.store().get(&job);
    assert!(record.in_flight.is_none());
    assert_eq!(
        record.restarts.len(),
        1,
        "the observed restart time is kept"
    );
    assert!(
        !record.scaling.history.is_empty(),
        "the scaling history is kept"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_the_coordinator_is_down_asks_again_with_the_same_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
    let mut h = start(dir.path(), &coordinator).await;
    let job = h.job_ids()[0].clone();
    coordinator.kill();
    for _ in 0..120 {
        h.tick().await;
        if count(&h, |e| matches!(e, LoopEvent::GatekeeperError { .. })) >= 2 {
            break;
        }
    }
    // Fail closed: no verdict, no actuation, the same proposal retried.
    assert_eq!(count(&h, |e| matches!(e, LoopEvent::Actuating { .. })), 0);
    let ids: std::collections::BTreeSet<String> = h
        .log
        .iter()
        .filter_map(|(_, e)| match e {
            LoopEvent::GatekeeperError { proposal_id, .. } => Some(proposal_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "retries must reuse the proposal id: {ids:?}");

    let restarted = ControlLoop::from_config(&h.config).expect("restart from the state file");
    h.restart_agent(Arc::new(restarted));
    coordinator.restart();
    h.run_for(Duration::from_secs(1800)).await;

    let audit = coordinator.decisions(&job).await;
    assert_eq!(audit.len(), 1, "one proposal, one audit record: {audit:?}");
    assert!(ids.contains(audit[0]["proposal_id"].as_str().unwrap_or_default()));
    assert_eq!(audit[0]["outcome"]["status"], "applied", "{}", audit[0]);
    assert_eq!(h.outcomes(OutcomeStatus::Applied).len(), 1);
    h.shutdown().await;
}
