//! The loop's pure state machine: what happens next, and how each result folds in.

use std::collections::BTreeMap;

use flink_autoscale_agent::control::core::{
    self, actuation_precheck, begin, mark_actuating, next, on_proposal_rejected, on_verdict,
    on_verdict_unavailable, on_verified, restart_time_ms, retry_delay_ms, verify, Next,
    Observation, Timing, Verification, WaitReason,
};
use flink_autoscale_agent::engine::{HistoryEntry, ScalingState};
use flink_autoscale_agent::state_store::{JobRecord, RestartObservation, Stage};
use flink_autoscale_agent::window::FlinkF64;
use flink_autoscale_shared::protocol::{
    Decision, GateName, OutcomeStatus, Plan, Proposal, Reason, Verdict, VertexProposal,
};

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn timing() -> Timing {
    Timing {
        verify_deadline_ms: 600_000,
        conflict_retry_ms: 30_000,
        refusal_backoff_ms: 300_000,
        approval_max_age_ms: 900_000,
        retry_initial_ms: 1_000,
        retry_max_ms: 120_000,
    }
}

fn proposal() -> Proposal {
    let v = |id: &str, cur, new| VertexProposal {
        id: id.into(),
        name: id[..1].into(),
        slot_sharing_group: None,
        current_parallelism: cur,
        proposed_parallelism: new,
        evidence: None,
    };
    Proposal {
        proposal_id: "p1".into(),
        agent_id: "a".into(),
        cluster_id: "c".into(),
        region: "r".into(),
        job_id: "0123456789abcdef0123456789abcdef".into(),
        job_name: "job".into(),
        vertices: vec![v(A, 2, 4), v(B, 3, 3)],
        checkpoint_state_bytes: None,
        slots_per_task_manager: 1,
        disk_bytes_per_task_manager: 1,
        current_task_managers: 3,
    }
}

fn plan() -> Plan {
    Plan {
        task_managers: 4,
        standby_task_managers: 0,
        parallelism: [(A.to_string(), 4), (B.to_string(), 3)].into(),
    }
}

fn applied_state() -> ScalingState {
    let mut s = ScalingState::default();
    s.history.insert(
        A.into(),
        vec![HistoryEntry {
            time_ms: 1_000,
            current: 2,
            new: 4,
            true_processing_rate: FlinkF64(10.0),
            expected_processing_rate: FlinkF64(20.0),
        }],
    );
    s
}

fn obs(now_ms: u64, a: u32, b: u32) -> Observation {
    Observation {
        now_ms,
        running: true,
        running_since_ms: Some(0),
        parallelism: [(A.to_string(), a), (B.to_string(), b)].into(),
        window_ready: true,
    }
}

fn approved() -> Decision {
    Decision {
        proposal_id: "p1".into(),
        verdict: Verdict::Approved,
        reasons: vec![],
        plan: Some(plan()),
    }
}

fn refused() -> Decision {
    Decision {
        proposal_id: "p1".into(),
        verdict: Verdict::Refused,
        reasons: vec![Reason {
            gate: GateName::RegionFailover,
            code: "region_evacuating".into(),
            message: "r is evacuating".into(),
        }],
        plan: None,
    }
}

fn in_flight_at(now: u64) -> JobRecord {
    let mut r = JobRecord::default();
    begin(&mut r, proposal(), applied_state(), now);
    r
}

#[test]
fn idle_jobs_evaluate_only_on_a_ready_window_and_after_a_refusal_backoff() {
    let r = JobRecord::default();
    assert_eq!(next(&r, &obs(0, 2, 3)), Next::Evaluate);
    let mut not_ready = obs(0, 2, 3);
    not_ready.window_ready = false;
    assert_eq!(next(&r, &not_ready), Next::Wait(WaitReason::Collecting));
    let backing_off = JobRecord {
        not_before_ms: 10,
        ..JobRecord::default()
    };
    assert_eq!(
        next(&backing_off, &obs(9, 2, 3)),
        Next::Wait(WaitReason::RefusalBackoff)
    );
    assert_eq!(next(&backing_off, &obs(10, 2, 3)), Next::Evaluate);
}

#[test]
fn an_action_in_flight_blocks_any_new_evaluation() {
    let mut r = in_flight_at(0);
    assert_eq!(next(&r, &obs(0, 2, 3)), Next::SendProposal);
    on_verdict_unavailable(&mut r, 0, &timing(), 0.0);
    // Not due: wait, but never evaluate while a proposal is open.
    assert_eq!(
        next(&r, &obs(100, 2, 3)),
        Next::Wait(WaitReason::RetryNotDue)
    );
    on_verdict(&mut r, &approved(), 1_000, &timing());
    assert_eq!(next(&r, &obs(1_000, 2, 3)), Next::Actuate);
    mark_actuating(&mut r, 1_000, &timing());
    assert_eq!(next(&r, &obs(1_000, 2, 3)), Next::Verify);
}

#[test]
fn verdict_retries_back_off_exponentially_with_the_same_proposal() {
    let mut r = in_flight_at(0);
    let mut due = Vec::new();
    for _ in 0..4 {
        on_verdict_unavailable(&mut r, 0, &timing(), 1.0);
        match &r.in_flight.as_ref().unwrap().stage {
            Stage::AwaitingVerdict {
                next_attempt_ms, ..
            } => due.push(*next_attempt_ms),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(due, [1_000, 2_000, 4_000, 8_000]);
    assert_eq!(r.in_flight.as_ref().unwrap().proposal.proposal_id, "p1");
    assert_eq!(retry_delay_ms(40, &timing(), 1.0), 120_000);
    assert_eq!(retry_delay_ms(0, &timing(), 0.0), 500);
}

#[test]
fn a_refusal_ends_the_action_keeps_the_old_engine_state_and_backs_off() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &refused(), 5_000, &timing());
    assert!(r.in_flight.is_none());
    assert_eq!(r.scaling, ScalingState::default());
    assert_eq!(r.not_before_ms, 305_000);
    assert_eq!(r.last_action_ms, Some(5_000));
}

#[test]
fn a_rejected_proposal_is_dropped_and_backs_off() {
    let mut r = in_flight_at(0);
    on_proposal_rejected(&mut r, 1, &timing());
    assert!(r.in_flight.is_none());
    assert_eq!(r.not_before_ms, 300_001);
}

#[test]
fn a_late_approval_is_not_applied_and_says_why() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 900_001, &timing());
    match &r.in_flight.as_ref().unwrap().stage {
        Stage::Reporting { outcome, .. } => {
            assert_eq!(outcome.status, OutcomeStatus::Failed);
            assert!(outcome.error.as_deref().unwrap().contains("stale"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn precheck_refuses_a_job_that_changed_or_stopped() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 0, &timing());
    assert_eq!(actuation_precheck(&r, &obs(0, 2, 3), &timing()), None);
    let changed = actuation_precheck(&r, &obs(0, 5, 3), &timing()).unwrap();
    assert!(changed.error.unwrap().contains(A));
    let mut stopped = obs(0, 2, 3);
    stopped.running = false;
    assert!(actuation_precheck(&r, &stopped, &timing()).is_some());
}

#[test]
fn verification_reports_applied_with_the_restart_time_and_commits_the_state() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 1_000, &timing());
    mark_actuating(&mut r, 1_000, &timing());
    // Still the old parallelism: pending.
    assert_eq!(verify(&r, &obs(15_000, 2, 3)), Verification::Pending);
    let mut done = obs(30_000, 4, 3);
    done.running_since_ms = Some(9_500);
    let result = verify(&r, &done);
    assert_eq!(result, Verification::Applied { restart_ms: 8_500 });
    let spent = on_verified(&mut r, &result, &done);
    assert_eq!(spent, 29_000);
    assert_eq!(r.scaling, applied_state());
    assert_eq!(
        r.restarts,
        [RestartObservation {
            at_ms: 1_000,
            duration_ms: 8_500
        }]
    );
    match &r.in_flight.as_ref().unwrap().stage {
        Stage::Reporting { outcome, .. } => {
            assert_eq!(outcome.status, OutcomeStatus::Applied);
            assert_eq!(outcome.observed_parallelism.get(A), Some(&4));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(next(&r, &done), Next::Report);
    core::on_reported(&mut r);
    assert!(r.in_flight.is_none());
}

#[test]
fn verification_times_out_at_the_deadline_without_committing() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 0, &timing());
    mark_actuating(&mut r, 0, &timing());
    let mut late = obs(600_000, 3, 3);
    late.running = false;
    let result = verify(&r, &late);
    assert_eq!(result, Verification::TimedOut);
    on_verified(&mut r, &result, &late);
    assert_eq!(r.scaling, ScalingState::default());
    assert!(r.restarts.is_empty());
    match &r.in_flight.as_ref().unwrap().stage {
        Stage::Reporting { outcome, .. } => {
            assert_eq!(outcome.status, OutcomeStatus::Failed);
            assert!(outcome.error.as_deref().unwrap().starts_with("timed out"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_conflict_goes_back_to_approved_and_is_retried_later_never_stacked() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 0, &timing());
    mark_actuating(&mut r, 0, &timing());
    core::on_actuation_retry_later(&mut r, 0, &timing());
    assert_eq!(
        next(&r, &obs(29_999, 2, 3)),
        Next::Wait(WaitReason::RetryNotDue)
    );
    assert_eq!(next(&r, &obs(30_000, 2, 3)), Next::Actuate);
}

#[test]
fn restart_time_follows_upstream_tracking() {
    let r = |d| RestartObservation {
        at_ms: 0,
        duration_ms: d,
    };
    let cases: [(&[RestartObservation], bool, u64); 4] = [
        (&[], true, 300_000),
        (&[r(12_345), r(40_999)], true, 40_000),
        (&[r(2_000_000)], true, 900_000),
        (&[r(12_345)], false, 300_000),
    ];
    for (restarts, enabled, expected) in cases {
        assert_eq!(
            restart_time_ms(restarts, enabled, 900_000, 300_000),
            expected,
            "{restarts:?} {enabled}"
        );
    }
}

#[test]
fn failed_outcomes_carry_only_valid_parallelisms() {
    let observed: BTreeMap<String, u32> = [(A.to_string(), 0), (B.to_string(), 2)].into();
    let o = core::failed("x".into(), observed);
    assert_eq!(o.observed_parallelism.len(), 1);
}
