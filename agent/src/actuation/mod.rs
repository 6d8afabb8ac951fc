//! Realizers: how an approved plan reaches the job.
//! - [`AdaptiveScheduler`]: `PUT /jobs/:jid/resource-requirements` on the local JobManager.
//! - [`ExecRealizer`]: a configured command gets the decision as JSON on stdin.
//! - [`RecommendOnly`]: nothing is applied (the default).
//!
//! A realizer only starts the change; the control loop then watches the job until it runs at
//! the approved parallelism.

pub mod adaptive;
pub mod exec;
pub mod payload;

use std::collections::BTreeMap;

use flink_autoscale_shared::protocol::{Plan, Proposal};

pub use adaptive::AdaptiveScheduler;
pub use exec::ExecRealizer;
pub use payload::ActuationRequest;

use crate::daemon::clock::BoxFuture;

/// What a realizer did with a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actuation {
    /// The change was handed over; watch the job for the result.
    Started,
    /// Nothing was applied by design (recommend-only).
    NotApplied(String),
}

/// Why a plan was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActuationError {
    /// The target is busy with an earlier update (HTTP 409) or could not be reached: nothing
    /// was applied, try again later.
    #[error("retry later: {0}")]
    RetryLater(String),
    /// The request may or may not have taken effect (no answer in time); only watching the
    /// job tells.
    #[error("unknown result: {0}")]
    Unknown(String),
    /// Refused or failed; nothing to watch.
    #[error("{0}")]
    Failed(String),
}

/// Applies approved plans.
pub trait Realizer: Send + Sync + 'static {
    fn apply<'a>(
        &'a self,
        proposal: &'a Proposal,
        plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>>;
    /// `none`, `adaptive-scheduler` or `exec`.
    fn label(&self) -> &'static str;
}

/// The `none` realizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecommendOnly;

impl Realizer for RecommendOnly {
    fn apply<'a>(
        &'a self,
        _proposal: &'a Proposal,
        _plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>> {
        Box::pin(async {
            Ok(Actuation::NotApplied(
                "not applied: control.realizer is \"none\" (recommend only)".into(),
            ))
        })
    }

    fn label(&self) -> &'static str {
        "none"
    }
}

/// The parallelism of every vertex: the plan's value, else the proposal's current one.
pub fn full_parallelism(proposal: &Proposal, plan: &Plan) -> BTreeMap<String, u32> {
    proposal
        .vertices
        .iter()
        .map(|v| {
            let p = plan
                .parallelism
                .get(&v.id)
                .copied()
                .unwrap_or(v.current_parallelism);
            (v.id.clone(), p)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod test_support {
    use flink_autoscale_shared::protocol::{Proposal, VertexProposal};

    /// A proposal of `(vertex id, current, proposed)` with `slots` slots per TaskManager.
    pub fn proposal(vertices: &[(&str, u32, u32)], slots: u32) -> Proposal {
        Proposal {
            proposal_id: "p".into(),
            agent_id: "a".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            job_id: "j".into(),
            job_name: "n".into(),
            vertices: vertices
                .iter()
                .map(|(id, cur, new)| VertexProposal {
                    id: (*id).into(),
                    name: (*id).into(),
                    slot_sharing_group: None,
                    current_parallelism: *cur,
                    proposed_parallelism: *new,
                    evidence: None,
                })
                .collect(),
            checkpoint_state_bytes: None,
            slots_per_task_manager: slots,
            disk_bytes_per_task_manager: 1,
            current_task_managers: 2,
        }
    }
}
