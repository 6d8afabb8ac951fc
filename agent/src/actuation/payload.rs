//! The approved decision as the `exec` realizer hands it to a command on stdin. Control planes
//! that restart the job themselves (a Kubernetes operator patch, an internal API) read the
//! vertex parallelism map in Flink's `pipeline.jobvertex-parallelism-overrides` form and the
//! TaskManager plan, standby included.

use std::collections::BTreeMap;

use flink_autoscale_core::protocol::{Plan, Proposal};
use serde::Serialize;

use super::full_parallelism;

/// Flink's configuration key for per-vertex parallelism overrides.
pub const OVERRIDES_KEY: &str = "pipeline.jobvertex-parallelism-overrides";

/// The value of [`OVERRIDES_KEY`]: `vid1:p1,vid2:p2`, in vertex id order.
pub fn overrides_value(parallelism: &BTreeMap<String, u32>) -> String {
    parallelism
        .iter()
        .map(|(id, p)| format!("{id}:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The JSON document on the command's stdin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActuationRequest {
    pub proposal_id: String,
    pub job_id: String,
    pub job_name: String,
    pub cluster_id: String,
    pub region: String,
    /// Vertex id → parallelism to run with, every vertex.
    pub parallelism: BTreeMap<String, u32>,
    /// Vertex id → parallelism now.
    pub current_parallelism: BTreeMap<String, u32>,
    /// Ready to merge into a Flink configuration: `{"pipeline.jobvertex-parallelism-overrides":
    /// "vid1:p1,vid2:p2"}`.
    pub flink_configuration: BTreeMap<String, String>,
    pub task_managers: TaskManagerPlan,
}

/// How many TaskManagers the job needs after the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskManagerPlan {
    pub required: u32,
    pub standby: u32,
    /// `required + standby`.
    pub total: u32,
    pub slots_per_task_manager: u32,
}

impl ActuationRequest {
    pub fn new(proposal: &Proposal, plan: &Plan) -> Self {
        let parallelism = full_parallelism(proposal, plan);
        let overrides = overrides_value(&parallelism);
        ActuationRequest {
            proposal_id: proposal.proposal_id.clone(),
            job_id: proposal.job_id.clone(),
            job_name: proposal.job_name.clone(),
            cluster_id: proposal.cluster_id.clone(),
            region: proposal.region.clone(),
            current_parallelism: proposal
                .vertices
                .iter()
                .map(|v| (v.id.clone(), v.current_parallelism))
                .collect(),
            parallelism,
            flink_configuration: [(OVERRIDES_KEY.to_string(), overrides)].into(),
            task_managers: TaskManagerPlan {
                required: plan.task_managers,
                standby: plan.standby_task_managers,
                total: plan
                    .task_managers
                    .saturating_add(plan.standby_task_managers),
                slots_per_task_manager: proposal.slots_per_task_manager,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuation::test_support::proposal;

    #[test]
    fn overrides_list_every_vertex_in_flink_map_form() {
        let proposal = proposal(&[("aa", 2, 4), ("bb", 3, 3)], 2);
        let plan = Plan {
            task_managers: 2,
            standby_task_managers: 1,
            parallelism: [("aa".to_string(), 4)].into(),
        };
        let json = serde_json::to_value(ActuationRequest::new(&proposal, &plan)).unwrap();
        assert_eq!(json["flink_configuration"][OVERRIDES_KEY], "aa:4,bb:3");
        assert_eq!(json["parallelism"]["bb"], 3);
        assert_eq!(json["task_managers"]["total"], 3);
        assert_eq!(json["task_managers"]["standby"], 1);
    }
}
