//! The seam between collecting and deciding: after every successful poll, the job's task
//! hands its collector to a [`DecisionStep`]. The collector-only agent uses [`NoDecision`];
//! the propose/actuate loop plugs in here.

use super::clock::BoxFuture;
use crate::collector::{JobCollector, PollReport};

/// Runs after each successful poll of a job, inside that job's task (so a slow step delays
/// only its own job). It may read the window and the snapshot, and reset the window.
pub trait DecisionStep: Send + Sync + 'static {
    fn step<'a>(
        &'a self,
        job: &'a mut JobCollector,
        report: &'a PollReport,
        now_ms: u64,
    ) -> BoxFuture<'a, ()>;
}

/// Collect only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDecision;

impl DecisionStep for NoDecision {
    fn step<'a>(
        &'a self,
        _job: &'a mut JobCollector,
        _report: &'a PollReport,
        _now_ms: u64,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}
