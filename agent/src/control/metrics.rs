//! The loop's Prometheus metrics, per job (never per vertex or subtask).

use std::sync::atomic::{AtomicI8, Ordering};

use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

pub const PROPOSALS: &str = "flink_autoscale_agent_proposals_total";
pub const ACTUATIONS: &str = "flink_autoscale_agent_actuations_total";
pub const LAST_ACTION_AGE: &str = "flink_autoscale_agent_last_action_age_seconds";
pub const RESCALING_SECONDS: &str = "flink_autoscale_agent_rescaling_seconds_total";
pub const ACTION_IN_FLIGHT: &str = "flink_autoscale_agent_action_in_flight";
pub const GATEKEEPER_ERRORS: &str = "flink_autoscale_agent_gatekeeper_errors_total";
pub const GATEKEEPER_UP: &str = "flink_autoscale_agent_gatekeeper_up";
pub const RESTART_SECONDS: &str = "flink_autoscale_agent_last_restart_duration_seconds";

/// Registers descriptions; call once after installing the recorder.
pub fn describe() {
    describe_counter!(
        PROPOSALS,
        "Proposals that got a verdict, by job and verdict (approved, refused)."
    );
    describe_counter!(
        ACTUATIONS,
        "Actuation results by job: applied, failed, timed_out, not_applied, retry_later, not_applicable (the realizer cannot rescale this job: it does not run the adaptive scheduler), rejected (Flink's rescale history says the rescale ended without reaching the plan)."
    );
    describe_gauge!(
        LAST_ACTION_AGE,
        Unit::Seconds,
        "Seconds since the job's last action ended (verdict refused or outcome known)."
    );
    describe_counter!(
        RESCALING_SECONDS,
        Unit::Seconds,
        "Time spent rescaling: from handing a plan to the realizer until the outcome was known."
    );
    describe_gauge!(
        ACTION_IN_FLIGHT,
        "1 while the job has an action in flight (proposed, approved, actuating or reporting)."
    );
    describe_counter!(
        GATEKEEPER_ERRORS,
        "Coordinator calls without an answer (unavailable) or refused as invalid (rejected), by job and kind. No actuation happens without a verdict."
    );
    describe_gauge!(
        GATEKEEPER_UP,
        "1 if the last call to the coordinator (or the local gates) got an answer, else 0."
    );
    describe_gauge!(
        RESTART_SECONDS,
        Unit::Seconds,
        "How long the job's last applied rescale took until it ran again."
    );
}

fn job(job_id: &str) -> (&'static str, String) {
    ("job_id", job_id.to_string())
}

pub fn proposal(job_id: &str, verdict: &'static str) {
    counter!(PROPOSALS, &[job(job_id), ("verdict", verdict.to_string())]).increment(1);
}

pub fn actuation(job_id: &str, result: &'static str) {
    counter!(ACTUATIONS, &[job(job_id), ("result", result.to_string())]).increment(1);
}

pub fn rescaling_time(job_id: &str, ms: u64) {
    counter!(RESCALING_SECONDS, &[job(job_id)]).increment(ms / 1000);
}

pub fn restart_duration(job_id: &str, ms: u64) {
    gauge!(RESTART_SECONDS, &[job(job_id)]).set(ms as f64 / 1000.0);
}

/// The last coordinator call's result (1 answered, 0 not), -1 before the first call: kept so
/// that every poll re-sets the gauge and it does not expire between proposals.
static GATEKEEPER_STATE: AtomicI8 = AtomicI8::new(-1);

/// Set on every poll, so the job's gauges stay exported while it is watched (gauges expire).
pub fn job_status(
    job_id: &str,
    last_action_age_ms: Option<u64>,
    in_flight: bool,
    last_restart_ms: Option<u64>,
) {
    if let Some(ms) = last_restart_ms {
        restart_duration(job_id, ms);
    }
    let up = GATEKEEPER_STATE.load(Ordering::Relaxed);
    if up >= 0 {
        gauge!(GATEKEEPER_UP).set(f64::from(up));
    }
    if let Some(age) = last_action_age_ms {
        gauge!(LAST_ACTION_AGE, &[job(job_id)]).set(age as f64 / 1000.0);
    }
    gauge!(ACTION_IN_FLIGHT, &[job(job_id)]).set(if in_flight { 1.0 } else { 0.0 });
}

pub fn gatekeeper(job_id: &str, error_kind: Option<&'static str>) {
    let up = i8::from(error_kind.is_none());
    GATEKEEPER_STATE.store(up, Ordering::Relaxed);
    gauge!(GATEKEEPER_UP).set(f64::from(up));
    if let Some(kind) = error_kind {
        counter!(
            GATEKEEPER_ERRORS,
            &[job(job_id), ("kind", kind.to_string())]
        )
        .increment(1);
    }
}
