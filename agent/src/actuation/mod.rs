//! Realizers: how an approved plan reaches the job.
//! - [`AdaptiveScheduler`]: `PUT /jobs/:jid/resource-requirements` on the local JobManager.
//! - [`ExecRealizer`]: a configured command gets the decision as JSON on stdin.
//! - [`KubernetesOperator`]: the parallelism written into the job's `FlinkDeployment`, then
//!   applied in place.
//! - [`RecommendOnly`]: nothing is applied (the default).
//!
//! A realizer only starts the change; the control loop then watches the job until it runs at
//! the approved parallelism.

pub mod adaptive;
pub mod exec;
pub mod kubernetes;
pub mod payload;
pub mod rescale_history;

use std::collections::BTreeMap;

use flink_autoscale_core::protocol::{Plan, Proposal};

pub use adaptive::AdaptiveScheduler;
pub use exec::ExecRealizer;
pub use kubernetes::KubernetesOperator;
pub use payload::ActuationRequest;
pub use rescale_history::{EndedRescale, HistoryFinding};

use crate::daemon::clock::BoxFuture;
use crate::flink::scheduler::Scheduler;

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
    /// This realizer cannot rescale this job at all (for example, it does not run the
    /// adaptive scheduler); nothing was sent to it.
    #[error("{0}")]
    NotApplicable(String),
}

/// Applies approved plans.
pub trait Realizer: Send + Sync + 'static {
    fn apply<'a>(
        &'a self,
        proposal: &'a Proposal,
        plan: &'a Plan,
    ) -> BoxFuture<'a, Result<Actuation, ActuationError>>;
    /// `none`, `adaptive-scheduler`, `exec` or `kubernetes-operator`.
    fn label(&self) -> &'static str;

    /// Before a plan is handed over: whether this realizer can rescale the job at all, with
    /// what the agent knows of its scheduler. `Err(NotApplicable)` means never try.
    fn check<'a>(
        &'a self,
        _job_id: &'a str,
        _scheduler: Option<&'a Scheduler>,
    ) -> BoxFuture<'a, Result<(), ActuationError>> {
        Box::pin(async { Ok(()) })
    }

    /// While a rescale is watched: what the JobManager's own record of it says, if it keeps
    /// one (Flink 2.3's rescale history). `wanted` is every vertex's approved parallelism,
    /// `since_ms` when the plan was handed over.
    fn rescale_status<'a>(
        &'a self,
        _job_id: &'a str,
        _wanted: &'a BTreeMap<String, u32>,
        _since_ms: u64,
    ) -> BoxFuture<'a, HistoryFinding> {
        Box::pin(async { HistoryFinding::Unknown })
    }
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
    use flink_autoscale_core::protocol::{Proposal, VertexProposal};

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
