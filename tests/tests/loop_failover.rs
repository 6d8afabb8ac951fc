//! Failover: while the job's region is flagged as evacuating on the coordinator, load drops,
//! and no scale-down is applied (every proposal is refused by the region-failover gate).
//! Once the flag is cleared the scale-down proceeds. Real coordinator over loopback, SQLite
//! in a temporary directory; simulator on a manual clock with the agent in lockstep.

use std::time::Duration;

use flink_autoscale_agent::control::LoopEvent;
use flink_autoscale_core::protocol::{OutcomeStatus, Verdict};
use flink_autoscale_tests::coordinator_process::Coordinator;
use flink_autoscale_tests::lockstep::{coordinator_control, scenario_text, Harness};
use serde_json::json;

const REGION: &str = "eu-west-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_scale_down_while_the_region_evacuates_then_it_proceeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
    let extra = coordinator_control(
        dir.path(),
        &coordinator.url,
        &coordinator.agent_token_file(),
        REGION,
    );
    let mut h = Harness::start(
        &scenario_text("three-vertex.toml"),
        Duration::from_secs(15),
        &extra,
    )
    .await;
    let job = h.job_ids()[0].clone();
    let before = h.control.parallelism(&job);

    let (status, _) = coordinator
        .admin(
            "PUT",
            &format!("/v1/regions/{REGION}/evacuation"),
            Some(json!({"reason": "failover drill"})),
        )
        .await;
    assert_eq!(status, 200);
    h.control.set_rate_multiplier(&job, 0.3);
    h.run_for(Duration::from_secs(3 * 3600)).await;

    let refused: Vec<_> = h
        .log
        .iter()
        .filter_map(|(_, e)| match e {
            LoopEvent::Verdict { decision, .. } if decision.verdict == Verdict::Refused => {
                Some(decision.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        !refused.is_empty(),
        "the load drop should have produced refused scale-downs"
    );
    assert!(refused.iter().all(|d| d
        .reasons
        .iter()
        .any(|r| r.gate.as_str() == "region_failover")));
    assert!(
        h.outcomes(OutcomeStatus::Applied).is_empty(),
        "a rescale was applied during the evacuation"
    );
    assert!(
        h.log
            .iter()
            .all(|(_, e)| !matches!(e, LoopEvent::Actuating { .. })),
        "nothing may be actuated during the evacuation"
    );
    assert_eq!(h.control.parallelism(&job), before);

    let (status, _) = coordinator
        .admin("DELETE", &format!("/v1/regions/{REGION}/evacuation"), None)
        .await;
    assert_eq!(status, 200);
    h.run_for(Duration::from_secs(2 * 3600)).await;
    let after = h.control.parallelism(&job);
    assert!(
        !h.outcomes(OutcomeStatus::Applied).is_empty(),
        "the scale-down must proceed once the flag is cleared"
    );
    assert!(
        after.iter().any(|(id, p)| *p < before[id]) && after.iter().all(|(id, p)| *p <= before[id]),
        "expected a scale-down: {before:?} -> {after:?}"
    );

    // Every verdict the agent saw is in the audit, with the same verdict.
    let audit = coordinator.decisions(&job).await;
    let verdicts: Vec<_> = h
        .log
        .iter()
        .filter_map(|(_, e)| match e {
            LoopEvent::Verdict { decision, .. } => Some(decision.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(audit.len(), verdicts.len());
    for d in &verdicts {
        let rec = audit
            .iter()
            .find(|r| r["proposal_id"] == d.proposal_id.as_str())
            .unwrap_or_else(|| panic!("{} missing from the audit", d.proposal_id));
        assert_eq!(rec["verdict"], d.verdict.as_str());
        if d.verdict == Verdict::Approved {
            assert_eq!(rec["outcome"]["status"], "applied", "{rec}");
        }
    }
    eprintln!(
        "{} refusals during the evacuation, then {before:?} -> {after:?}",
        refused.len()
    );
    h.shutdown().await;
}
