//! The loop's pure state machine: what happens next, and how each result folds in.

use std::collections::BTreeMap;

use flink_autoscale_agent::actuation::{EndedRescale, HistoryFinding};
use flink_autoscale_agent::control::core::{
    self, actuation_precheck, begin, mark_actuating, next, on_poll_unavailable,
    on_proposal_rejected, on_verdict, on_verdict_unavailable, on_verified, pending_poll_delay_ms,
    restart_time_ms, retry_delay_ms, verify, Next, Observation, Timing, Verification, WaitReason,
};
use flink_autoscale_agent::state_store::{JobRecord, RestartObservation, Stage};
use flink_autoscale_core::engine::{HistoryEntry, ScalingState};
use flink_autoscale_core::protocol::{
    Decision, GateName, OutcomeStatus, Plan, Proposal, Reason, RescaleReport, Verdict,
    VertexProposal,
};
use flink_autoscale_core::samples::FlinkF64;

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
        pending_poll_max_ms: 30_000,
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

fn pending() -> Decision {
    Decision {
        proposal_id: "p1".into(),
        verdict: Verdict::Pending,
        reasons: vec![Reason {
            gate: GateName::Approval,
            code: "manual_approval".into(),
            message: "rule big asks for a person".into(),
        }],
        plan: None,
    }
}

fn refused_with(code: &str) -> Decision {
    let mut d = refused();
    d.reasons[0].gate = GateName::Approval;
    d.reasons[0].code = code.into();
    d
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
    on_verdict(&mut r, &approved(), 1_000, &timing(), 0.0);
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
    on_verdict(&mut r, &refused(), 5_000, &timing(), 0.0);
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
fn a_pending_verdict_is_polled_with_capped_backoff_and_never_acted_on() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &pending(), 1_000, &timing(), 1.0);
    let mut polls = Vec::new();
    let mut now = 1_000;
    for _ in 0..8 {
        // Whatever the observation, a pending action neither evaluates, proposes nor acts.
        let stage = r.in_flight.as_ref().unwrap().stage.clone();
        let Stage::Pending {
            since_ms,
            next_poll_ms,
            ..
        } = stage
        else {
            panic!("{stage:?}");
        };
        assert_eq!(since_ms, 1_000);
        assert_eq!(
            next(&r, &obs(next_poll_ms - 1, 2, 3)),
            Next::Wait(WaitReason::RetryNotDue)
        );
        assert_eq!(next(&r, &obs(next_poll_ms, 2, 3)), Next::PollVerdict);
        polls.push(next_poll_ms - now);
        now = next_poll_ms;
        if polls.len() % 2 == 0 {
            on_verdict(&mut r, &pending(), now, &timing(), 1.0);
        } else {
            on_poll_unavailable(&mut r, now, &timing(), 1.0);
        }
    }
    // 1 s, 2 s, 4 s, ... capped at control.coordinator.pending_poll_max (30 s).
    assert_eq!(
        polls,
        [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
    );
    assert_eq!(pending_poll_delay_ms(0, &timing(), 0.0), 500);
    assert_eq!(r.in_flight.as_ref().unwrap().proposal.proposal_id, "p1");
}

#[test]
fn an_expired_denied_or_superseded_pending_proposal_ends_like_a_refusal() {
    for code in ["approval_expired", "denied", "superseded"] {
        let mut r = in_flight_at(0);
        on_verdict(&mut r, &pending(), 1_000, &timing(), 0.0);
        on_verdict(&mut r, &refused_with(code), 60_000, &timing(), 0.0);
        assert!(r.in_flight.is_none(), "{code}");
        assert_eq!(r.scaling, ScalingState::default(), "{code}");
        assert_eq!(r.not_before_ms, 360_000, "{code}");
        assert_eq!(
            next(&r, &obs(60_000, 2, 3)),
            Next::Wait(WaitReason::RefusalBackoff)
        );
    }
}

#[test]
fn a_persons_late_approval_is_applied_because_they_vouched_for_the_evidence() {
    // Approved by a person 20 min after the proposal (approval_max_age is 15 min): applied,
    // and the precheck measures the age from the approval too.
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &pending(), 0, &timing(), 0.0);
    on_verdict(&mut r, &approved(), 1_200_000, &timing(), 0.0);
    assert!(matches!(
        r.in_flight.as_ref().unwrap().stage,
        Stage::Approved { .. }
    ));
    assert_eq!(next(&r, &obs(1_200_000, 2, 3)), Next::Actuate);
    assert_eq!(
        actuation_precheck(&r, &obs(1_300_000, 2, 3), &timing()),
        None
    );
    // Without a person, the same delay is stale.
    let mut auto = in_flight_at(0);
    on_verdict(&mut auto, &approved(), 1_200_000, &timing(), 0.0);
    assert!(matches!(
        auto.in_flight.as_ref().unwrap().stage,
        Stage::Reporting { .. }
    ));
}

#[test]
fn a_late_approval_is_not_applied_and_says_why() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 900_001, &timing(), 0.0);
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
    on_verdict(&mut r, &approved(), 0, &timing(), 0.0);
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
    on_verdict(&mut r, &approved(), 1_000, &timing(), 0.0);
    mark_actuating(&mut r, 1_000, &timing());
    // Still the old parallelism: pending.
    assert_eq!(
        verify(&r, &obs(15_000, 2, 3), &HistoryFinding::Unknown),
        Verification::Pending
    );
    let mut done = obs(30_000, 4, 3);
    done.running_since_ms = Some(9_500);
    let result = verify(&r, &done, &HistoryFinding::Unknown);
    assert_eq!(
        result,
        Verification::Applied {
            restart_ms: 8_500,
            rescale: None
        }
    );
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
    on_verdict(&mut r, &approved(), 0, &timing(), 0.0);
    mark_actuating(&mut r, 0, &timing());
    let mut late = obs(600_000, 3, 3);
    late.running = false;
    let result = verify(&r, &late, &HistoryFinding::Unknown);
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

fn ended(state: &str, reason: &str, post_a: u32) -> HistoryFinding {
    HistoryFinding::Ended(EndedRescale {
        report: RescaleReport {
            rescale_uuid: "7f55c8b72e131394b399cfb2ee41d16a".into(),
            terminal_state: state.into(),
            terminated_reason: Some(reason.into()),
            trigger_cause: "UPDATE_REQUIREMENT".into(),
            duration_ms: Some(8_883),
        },
        post: [(A.to_string(), post_a), (B.to_string(), 3)].into(),
        exception: None,
    })
}

#[test]
fn flinks_rescale_history_confirms_or_ends_the_wait_early() {
    let actuating = || {
        let mut r = in_flight_at(0);
        on_verdict(&mut r, &approved(), 1_000, &timing(), 0.0);
        mark_actuating(&mut r, 1_000, &timing());
        r
    };
    // (observation: A's parallelism, what the history says, expected)
    let completed = ended("COMPLETED", "SUCCEEDED", 4);
    let cases: Vec<(u32, HistoryFinding, &str)> = vec![
        // Completed and observed: applied, with Flink's record.
        (4, completed.clone(), "applied with record"),
        // Completed but the poll has not seen it yet: wait for the observation.
        (2, completed, "pending"),
        (2, HistoryFinding::InProgress, "pending"),
        // Ignored (a newer requirement replaced it) or failed: no need to wait.
        (
            2,
            ended("IGNORED", "RESOURCE_REQUIREMENTS_UPDATED", 2),
            "rejected",
        ),
        (2, ended("FAILED", "EXCEPTION_OCCURRED", 2), "rejected"),
        // Completed at fewer subtasks than approved (not enough slots): it will not reach it.
        (3, ended("COMPLETED", "SUCCEEDED", 3), "rejected"),
    ];
    for (a, history, expected) in cases {
        let r = actuating();
        let mut seen = obs(20_000, a, 3);
        seen.running_since_ms = Some(9_000);
        let got = verify(&r, &seen, &history);
        let label = match &got {
            Verification::Applied {
                rescale: Some(_), ..
            } => "applied with record",
            Verification::Applied { rescale: None, .. } => "applied",
            Verification::Pending => "pending",
            Verification::Rejected { .. } => "rejected",
            Verification::TimedOut => "timed out",
        };
        assert_eq!(label, expected, "{history:?}: {got:?}");
    }
    // The outcome carries Flink's record and, when rejected, says what Flink said.
    let mut r = actuating();
    let seen = obs(20_000, 2, 3);
    let result = verify(&r, &seen, &ended("FAILED", "EXCEPTION_OCCURRED", 2));
    on_verified(&mut r, &result, &seen);
    assert!(r.restarts.is_empty(), "nothing applied");
    match &r.in_flight.as_ref().unwrap().stage {
        Stage::Reporting { outcome, .. } => {
            assert_eq!(outcome.status, OutcomeStatus::Failed);
            let error = outcome.error.as_deref().unwrap();
            assert!(
                error.contains("rescale history: rescale 7f55c8b72e131394b399cfb2ee41d16a FAILED (EXCEPTION_OCCURRED), triggered by UPDATE_REQUIREMENT"),
                "{error}"
            );
            assert_eq!(outcome.rescale.as_ref().unwrap().terminal_state, "FAILED");
        }
        other => panic!("{other:?}"),
    }
    let mut r = actuating();
    let done = obs(20_000, 4, 3);
    let result = verify(&r, &done, &ended("COMPLETED", "SUCCEEDED", 4));
    on_verified(&mut r, &result, &done);
    match &r.in_flight.as_ref().unwrap().stage {
        Stage::Reporting { outcome, .. } => {
            assert_eq!(outcome.status, OutcomeStatus::Applied);
            let rescale = outcome.rescale.as_ref().unwrap();
            assert_eq!(
                (
                    rescale.terminated_reason.as_deref(),
                    rescale.trigger_cause.as_str()
                ),
                (Some("SUCCEEDED"), "UPDATE_REQUIREMENT")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_conflict_goes_back_to_approved_and_is_retried_later_never_stacked() {
    let mut r = in_flight_at(0);
    on_verdict(&mut r, &approved(), 0, &timing(), 0.0);
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
