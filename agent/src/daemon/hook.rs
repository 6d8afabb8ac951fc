//! The seam between collecting and deciding: after every successful poll, the job's task
//! hands its collector to a [`DecisionStep`]. The collector-only agent uses [`NoDecision`];
//! the propose/actuate loop plugs in here.

use super::clock::BoxFuture;
use crate::collector::{JobCollector, PollReport};

/// What a step asks of the job's collector once it is done; the daemon carries it out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct AfterStep {
    /// An action ended (the job was rescaled, or will not be): its window starts over.
    pub reset_window: bool,
}

/// Runs after each successful poll of a job, inside that job's task (so a slow step delays
/// only its own job). It reads the window and the snapshot and says what should change.
pub trait DecisionStep: Send + Sync + 'static {
    fn step<'a>(
        &'a self,
        job: &'a JobCollector,
        report: &'a PollReport,
        now_ms: u64,
    ) -> BoxFuture<'a, AfterStep>;
}

/// Collect only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDecision;

impl DecisionStep for NoDecision {
    fn step<'a>(
        &'a self,
        _job: &'a JobCollector,
        _report: &'a PollReport,
        _now_ms: u64,
    ) -> BoxFuture<'a, AfterStep> {
        Box::pin(async { AfterStep::default() })
    }
}
