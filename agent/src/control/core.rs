//! The per-job loop as a pure state machine. Given the job's record (persisted state and the
//! action in flight) and what the latest poll observed, [`next`] says what to do now; the
//! transition functions fold each result back into the record. No clock, no I/O: time and
//! jitter are inputs, so every path is a table test.
//!
//! ```text
//!   idle ──window ready, engine says scale──▶ awaiting verdict ──refused──▶ idle (+refusal backoff)
//!                                              │ │ pending (a person must approve)
//!                                              │ ▼
//!                                              │ pending ──polled until final: refused, expired,
//!                                              │   │        superseded──▶ idle (+refusal backoff)
//!                                              │ approved
//!                                              ▼ ◀─┘
//!                                              ▼
//!                                           approved ──409 / not started──▶ approved (retry later)
//!                                              │ handed to the realizer (persisted first)
//!                                              ▼
//!                                           actuating ──running at plan / deadline──▶ reporting ──▶ idle
//! ```
//! Never two actions per job: a new proposal is only made from idle.

use std::collections::BTreeMap;

use flink_autoscale_core::protocol::{
    Decision, Outcome, OutcomeStatus, Proposal, RescaleReport, Verdict,
};

use crate::actuation::{full_parallelism, HistoryFinding};
use crate::state_store::{
    InFlight, JobRecord, RestartObservation, Stage, MAX_RESTART_OBSERVATIONS,
};
use flink_autoscale_core::engine::ScalingState;

/// The loop's timing, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub verify_deadline_ms: u64,
    pub conflict_retry_ms: u64,
    pub refusal_backoff_ms: u64,
    pub approval_max_age_ms: u64,
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// Longest wait between two polls of a pending verdict.
    pub pending_poll_max_ms: u64,
}

/// What the latest successful poll saw of the job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observation {
    pub now_ms: u64,
    pub running: bool,
    /// The job's RUNNING timestamp (Unix ms), when known.
    pub running_since_ms: Option<u64>,
    /// Vertex id → parallelism, as the JobManager reports it.
    pub parallelism: BTreeMap<String, u32>,
    /// The sample window is full and this poll's data is usable.
    pub window_ready: bool,
}

/// Why nothing happens this poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The window is not full or the data is unusable.
    Collecting,
    /// Backing off after a refusal.
    RefusalBackoff,
    /// A retry (coordinator call, actuation) is not due yet.
    RetryNotDue,
    /// Watching for the approved parallelism.
    Verifying,
}

/// The next thing to do for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Wait(WaitReason),
    /// Run the engine over the window (and propose if it says scale).
    Evaluate,
    /// Ask for (or re-ask for) the verdict on the in-flight proposal.
    SendProposal,
    /// Ask whether a pending verdict is final yet.
    PollVerdict,
    /// Hand the approved plan to the realizer.
    Actuate,
    /// Compare the observed job with the plan.
    Verify,
    /// Deliver the outcome.
    Report,
}

pub fn next(record: &JobRecord, obs: &Observation) -> Next {
    let now = obs.now_ms;
    match record.in_flight.as_ref().map(|f| &f.stage) {
        None if now < record.not_before_ms => Next::Wait(WaitReason::RefusalBackoff),
        None if obs.window_ready => Next::Evaluate,
        None => Next::Wait(WaitReason::Collecting),
        Some(Stage::AwaitingVerdict {
            next_attempt_ms, ..
        }) => due(now, *next_attempt_ms, Next::SendProposal),
        Some(Stage::Pending { next_poll_ms, .. }) => due(now, *next_poll_ms, Next::PollVerdict),
        Some(Stage::Approved {
            next_attempt_ms, ..
        }) => due(now, *next_attempt_ms, Next::Actuate),
        Some(Stage::Actuating { .. }) => Next::Verify,
        Some(Stage::Reporting {
            next_attempt_ms, ..
        }) => due(now, *next_attempt_ms, Next::Report),
    }
}

fn due(now: u64, at: u64, then: Next) -> Next {
    if now >= at {
        then
    } else {
        Next::Wait(WaitReason::RetryNotDue)
    }
}

/// The delay before retrying the coordinator (`attempts` failures so far).
pub fn retry_delay_ms(attempts: u32, timing: &Timing, jitter: f64) -> u64 {
    flink_autoscale_core::backoff::equal_jitter_ms(
        timing.retry_initial_ms,
        timing.retry_max_ms,
        attempts,
        jitter,
    )
}

/// Wait before the next poll of a pending verdict: like [`retry_delay_ms`], capped at
/// `pending_poll_max_ms` so an approval is acted on soon after a person gives it.
pub fn pending_poll_delay_ms(attempts: u32, timing: &Timing, jitter: f64) -> u64 {
    let capped = Timing {
        retry_max_ms: timing.pending_poll_max_ms.min(timing.retry_max_ms),
        ..*timing
    };
    retry_delay_ms(attempts, &capped, jitter)
}

/// Starts an action: the proposal awaits its verdict, due now.
pub fn begin(
    record: &mut JobRecord,
    proposal: Proposal,
    state_if_applied: ScalingState,
    now_ms: u64,
) {
    record.in_flight = Some(InFlight {
        proposal,
        proposed_at_ms: now_ms,
        state_if_applied,
        stage: Stage::AwaitingVerdict {
            attempts: 0,
            next_attempt_ms: now_ms,
        },
        approved_by_person_at_ms: None,
    });
}

/// Folds a verdict in (the answer to the proposal, or to a poll of a pending one). A refusal
/// (also an expired, denied or superseded pending proposal) ends the action and backs off; a
/// pending verdict waits, polled with backoff; an approval that arrives too late is not
/// applied, and the outcome says why. After a pending verdict, the approval counts as a
/// person vouching for the evidence, so its age is measured from then.
pub fn on_verdict(
    record: &mut JobRecord,
    decision: &Decision,
    now_ms: u64,
    timing: &Timing,
    jitter: f64,
) {
    let Some(flight) = record.in_flight.as_mut() else {
        return;
    };
    let was_pending = matches!(flight.stage, Stage::Pending { .. });
    match (decision.verdict, &decision.plan) {
        (Verdict::Approved, Some(plan)) => {
            if was_pending {
                flight.approved_by_person_at_ms = Some(now_ms);
            }
            let age = flight.evidence_age_ms(now_ms);
            if age > timing.approval_max_age_ms {
                let outcome = failed(
                    format!("not applied: the approval arrived {} s after the proposal, later than control.approval_max_age; the evidence is stale", age / 1000),
                    BTreeMap::new(),
                );
                finish(record, outcome, now_ms);
            } else {
                flight.stage = Stage::Approved {
                    plan: plan.clone(),
                    approved_at_ms: now_ms,
                    next_attempt_ms: now_ms,
                };
            }
        }
        (Verdict::Pending, _) => {
            let (since_ms, attempts) = match flight.stage {
                Stage::Pending {
                    since_ms, attempts, ..
                } => (since_ms, attempts.saturating_add(1)),
                _ => (now_ms, 0),
            };
            flight.stage = Stage::Pending {
                since_ms,
                attempts,
                next_poll_ms: now_ms
                    .saturating_add(pending_poll_delay_ms(attempts, timing, jitter)),
            };
        }
        _ => {
            record.in_flight = None;
            record.not_before_ms = now_ms.saturating_add(timing.refusal_backoff_ms);
            record.last_action_ms = Some(now_ms);
        }
    }
}

/// A poll of a pending verdict got no answer (coordinator down): poll again later, never
/// act meanwhile.
pub fn on_poll_unavailable(record: &mut JobRecord, now_ms: u64, timing: &Timing, jitter: f64) {
    if let Some(InFlight {
        stage:
            Stage::Pending {
                attempts,
                next_poll_ms,
                ..
            },
        ..
    }) = record.in_flight.as_mut()
    {
        *attempts = attempts.saturating_add(1);
        *next_poll_ms = now_ms.saturating_add(pending_poll_delay_ms(*attempts, timing, jitter));
    }
}

/// No verdict this time (coordinator down): retry the same proposal id later. Fail closed.
pub fn on_verdict_unavailable(record: &mut JobRecord, now_ms: u64, timing: &Timing, jitter: f64) {
    if let Some(InFlight {
        stage: Stage::AwaitingVerdict {
            attempts,
            next_attempt_ms,
        },
        ..
    }) = record.in_flight.as_mut()
    {
        *next_attempt_ms = now_ms.saturating_add(retry_delay_ms(*attempts, timing, jitter));
        *attempts = attempts.saturating_add(1);
    }
}

/// The coordinator will not consider this proposal (4xx): drop it and back off.
pub fn on_proposal_rejected(record: &mut JobRecord, now_ms: u64, timing: &Timing) {
    record.in_flight = None;
    record.not_before_ms = now_ms.saturating_add(timing.refusal_backoff_ms);
}

/// Before actuating: the job must still be what the proposal described, and the approval
/// still fresh. `Some(outcome)` means: do not actuate, report this instead.
pub fn actuation_precheck(
    record: &JobRecord,
    obs: &Observation,
    timing: &Timing,
) -> Option<Outcome> {
    let flight = record.in_flight.as_ref()?;
    let age = flight.evidence_age_ms(obs.now_ms);
    if age > timing.approval_max_age_ms {
        return Some(failed(
            format!("not applied: could not start the rescale within control.approval_max_age ({} s after the proposal)", age / 1000),
            obs.parallelism.clone(),
        ));
    }
    if !obs.running {
        return Some(failed(
            "not applied: the job is not running".into(),
            obs.parallelism.clone(),
        ));
    }
    let changed: Vec<String> = flight
        .proposal
        .vertices
        .iter()
        .filter(|v| obs.parallelism.get(&v.id) != Some(&v.current_parallelism))
        .map(|v| v.id.clone())
        .collect();
    if !changed.is_empty() {
        return Some(failed(
            format!(
                "not applied: the job changed since the proposal (vertices {})",
                changed.join(", ")
            ),
            obs.parallelism.clone(),
        ));
    }
    None
}

/// Marks the action as handed to the realizer. Called and persisted before the realizer
/// runs, so an agent restart never repeats an actuation: it verifies instead.
pub fn mark_actuating(record: &mut JobRecord, now_ms: u64, timing: &Timing) {
    if let Some(flight) = record.in_flight.as_mut() {
        if let Stage::Approved { plan, .. } = &flight.stage {
            flight.stage = Stage::Actuating {
                plan: plan.clone(),
                actuated_at_ms: now_ms,
                deadline_ms: now_ms.saturating_add(timing.verify_deadline_ms),
            };
        }
    }
}

/// Nothing was applied and it may be tried again (409, control plane unreachable).
pub fn on_actuation_retry_later(record: &mut JobRecord, now_ms: u64, timing: &Timing) {
    if let Some(flight) = record.in_flight.as_mut() {
        match &mut flight.stage {
            Stage::Actuating { plan, .. } => {
                flight.stage = Stage::Approved {
                    plan: plan.clone(),
                    approved_at_ms: now_ms,
                    next_attempt_ms: now_ms.saturating_add(timing.conflict_retry_ms),
                };
            }
            // The check before handing the plan over could not be made.
            Stage::Approved {
                next_attempt_ms, ..
            } => *next_attempt_ms = now_ms.saturating_add(timing.conflict_retry_ms),
            _ => {}
        }
    }
}

/// The result of comparing the job with the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    Pending,
    /// Running at the plan; how long the rescale took until RUNNING, and what Flink's
    /// rescale history said, when it keeps one.
    Applied {
        restart_ms: u64,
        rescale: Option<RescaleReport>,
    },
    /// Flink's rescale history says the rescale ended without running the job at the plan
    /// (failed, ignored, or completed at another parallelism): no need to wait any longer.
    Rejected {
        reason: String,
        rescale: RescaleReport,
    },
    TimedOut,
}

/// Compares the job with the plan. The observed parallelism decides; Flink's rescale
/// history (`history`, Flink 2.3+) only adds what it says, and ends the wait early when the
/// rescale ended without reaching the plan. Without it the deadline is the fallback.
pub fn verify(record: &JobRecord, obs: &Observation, history: &HistoryFinding) -> Verification {
    let Some(InFlight {
        proposal,
        stage:
            Stage::Actuating {
                plan,
                actuated_at_ms,
                deadline_ms,
            },
        ..
    }) = record.in_flight.as_ref()
    else {
        return Verification::Pending;
    };
    let wanted = full_parallelism(proposal, plan);
    let at_plan = wanted
        .iter()
        .all(|(id, p)| obs.parallelism.get(id) == Some(p));
    let ended = match history {
        HistoryFinding::Ended(ended) => Some(ended),
        _ => None,
    };
    if obs.running && at_plan {
        let restarted_at = obs
            .running_since_ms
            .filter(|t| *t >= *actuated_at_ms)
            .unwrap_or(obs.now_ms);
        return Verification::Applied {
            restart_ms: restarted_at - actuated_at_ms,
            rescale: ended.filter(|e| e.completed()).map(|e| e.report.clone()),
        };
    }
    if let Some(ended) = ended {
        if !ended.completed() {
            return Verification::Rejected {
                reason: format!("not applied: {}", ended.describe()),
                rescale: ended.report.clone(),
            };
        }
        let elsewhere: Vec<String> = wanted
            .iter()
            .filter_map(|(id, p)| {
                let ran = ended.post.get(id).filter(|ran| *ran != p)?;
                Some(format!("{id} at {ran} (approved {p})"))
            })
            .collect();
        if !elsewhere.is_empty() {
            return Verification::Rejected {
                reason: format!(
                    "not applied as approved: {}, but ran {} (the JobManager had fewer slots than asked for?)",
                    ended.describe(),
                    elsewhere.join(", ")
                ),
                rescale: ended.report.clone(),
            };
        }
    }
    if obs.now_ms >= *deadline_ms {
        Verification::TimedOut
    } else {
        Verification::Pending
    }
}

/// Folds a concluded verification in: an applied change commits the engine state and the
/// restart time; either way the outcome goes to reporting. Returns the time spent rescaling.
pub fn on_verified(record: &mut JobRecord, result: &Verification, obs: &Observation) -> u64 {
    let Some(InFlight {
        stage:
            Stage::Actuating {
                actuated_at_ms,
                deadline_ms,
                ..
            },
        state_if_applied,
        ..
    }) = record.in_flight.as_ref()
    else {
        return 0;
    };
    let (actuated_at, deadline) = (*actuated_at_ms, *deadline_ms);
    let spent = obs.now_ms.saturating_sub(actuated_at);
    let outcome =
        match result {
            Verification::Pending => return 0,
            Verification::Applied {
                restart_ms,
                rescale,
            } => {
                record.scaling = state_if_applied.clone();
                record.restarts.push(RestartObservation {
                    at_ms: actuated_at,
                    duration_ms: *restart_ms,
                });
                let excess = record
                    .restarts
                    .len()
                    .saturating_sub(MAX_RESTART_OBSERVATIONS);
                record.restarts.drain(..excess);
                Outcome {
                    status: OutcomeStatus::Applied,
                    observed_parallelism: obs.parallelism.clone(),
                    error: None,
                    restart_ms: Some(*restart_ms),
                    rescale: rescale.clone(),
                }
            }
            Verification::Rejected { reason, rescale } => Outcome {
                rescale: Some(rescale.clone()),
                ..failed(reason.clone(), obs.parallelism.clone())
            },
            Verification::TimedOut => failed(
                format!(
                "timed out: the job did not run at the approved parallelism within {} s (job {})",
                deadline.saturating_sub(actuated_at) / 1000,
                if obs.running { "running" } else { "not running" }
            ),
                obs.parallelism.clone(),
            ),
        };
    finish(record, outcome, obs.now_ms);
    spent
}

/// Ends the action with an outcome to report (the action stays in flight until reported).
pub fn finish(record: &mut JobRecord, outcome: Outcome, now_ms: u64) {
    record.last_action_ms = Some(now_ms);
    if let Some(flight) = record.in_flight.as_mut() {
        flight.stage = Stage::Reporting {
            outcome,
            attempts: 0,
            next_attempt_ms: now_ms,
        };
    }
}

/// The outcome reached the coordinator (or it will never accept it): the action is over.
pub fn on_reported(record: &mut JobRecord) {
    record.in_flight = None;
}

pub fn on_report_unavailable(record: &mut JobRecord, now_ms: u64, timing: &Timing, jitter: f64) {
    if let Some(InFlight {
        stage:
            Stage::Reporting {
                attempts,
                next_attempt_ms,
                ..
            },
        ..
    }) = record.in_flight.as_mut()
    {
        *next_attempt_ms = now_ms.saturating_add(retry_delay_ms(*attempts, timing, jitter));
        *attempts = attempts.saturating_add(1);
    }
}

/// A failed outcome with `error`.
pub fn failed(error: String, observed: BTreeMap<String, u32>) -> Outcome {
    Outcome {
        status: OutcomeStatus::Failed,
        // The coordinator validates ids; only report what the JobManager reported.
        observed_parallelism: observed.into_iter().filter(|(_, p)| *p >= 1).collect(),
        error: Some(error),
        restart_ms: None,
        rescale: None,
    }
}

/// The restart time the engine should assume: upstream's tracking rule (max observed duration
/// in whole seconds, capped by the limit) when enabled and observed, else `configured_ms`.
pub fn restart_time_ms(
    restarts: &[RestartObservation],
    tracking_enabled: bool,
    limit_ms: u64,
    configured_ms: u64,
) -> u64 {
    match restarts.iter().map(|r| r.duration_ms / 1000 * 1000).max() {
        Some(max) if tracking_enabled => max.min(limit_ms),
        _ => configured_ms,
    }
}
