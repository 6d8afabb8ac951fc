//! The gates inside the agent, for running without a coordinator.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;

use flink_autoscale_core::gates::{GateConfig, Switches};
use flink_autoscale_core::ledger::Ledger;
use flink_autoscale_core::pause;
use flink_autoscale_core::policy::Policy;
use flink_autoscale_core::protocol::{Decision, Outcome, Proposal};

use super::pause_file::PauseFile;
use super::{GateError, Gatekeeper};
use crate::daemon::clock::BoxFuture;

/// Local decisions remembered for idempotent retries.
const LOCAL_DECISIONS_KEPT: usize = 4096;

/// The gates run inside the agent. Facts the coordinator would know from its store come from
/// this agent's own memory; the region flag comes from a file an operator (or automation)
/// creates during a failover, the pauses from the pause file. There are no approval
/// policies locally: a person in the loop needs the coordinator.
pub struct LocalGates {
    config: GateConfig,
    evacuation_flag_file: Option<PathBuf>,
    pause_file: Option<PauseFile>,
    memory: Mutex<LocalMemory>,
}

#[derive(Default)]
struct LocalMemory {
    decisions: HashMap<String, Decision>,
    order: VecDeque<String>,
    ledger: Ledger,
}

impl LocalGates {
    pub fn new(
        config: GateConfig,
        evacuation_flag_file: Option<PathBuf>,
        pause_file: Option<PathBuf>,
    ) -> Self {
        LocalGates {
            config,
            evacuation_flag_file,
            pause_file: pause_file.map(PauseFile::new),
            memory: Mutex::new(LocalMemory::default()),
        }
    }

    fn switches(&self, proposal: &Proposal, now_ms: i64) -> Switches {
        let pauses = self
            .pause_file
            .as_ref()
            .map(PauseFile::pauses)
            .unwrap_or_default();
        Switches {
            region_evacuating: self
                .evacuation_flag_file
                .as_deref()
                .is_some_and(|p| p.exists()),
            pause: pause::in_force(&pauses, proposal, now_ms).cloned(),
        }
    }
}

impl Gatekeeper for LocalGates {
    fn propose<'a>(
        &'a self,
        proposal: &'a Proposal,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Decision, GateError>> {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let switches = self.switches(proposal, now);
        let result = (|| {
            proposal.validate().map_err(|e| GateError::Rejected {
                status: 400,
                message: e.to_string(),
            })?;
            let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(d) = memory.decisions.get(&proposal.proposal_id) {
                return Ok(d.clone());
            }
            let decision = memory
                .ledger
                .decide(proposal, &switches, &self.config, &Policy::default(), now)
                .decision;
            memory
                .decisions
                .insert(proposal.proposal_id.clone(), decision.clone());
            memory.order.push_back(proposal.proposal_id.clone());
            while memory.order.len() > LOCAL_DECISIONS_KEPT {
                if let Some(old) = memory.order.pop_front() {
                    memory.decisions.remove(&old);
                }
            }
            Ok(decision)
        })();
        Box::pin(async move { result })
    }

    fn verdict<'a>(&'a self, proposal_id: &'a str) -> BoxFuture<'a, Result<Decision, GateError>> {
        // Local gates never answer pending; a remembered decision is final.
        let memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let result =
            memory
                .decisions
                .get(proposal_id)
                .cloned()
                .ok_or_else(|| GateError::Rejected {
                    status: 404,
                    message: format!("no local decision for {proposal_id}"),
                });
        Box::pin(async move { result })
    }

    fn report<'a>(
        &'a self,
        job_id: &'a str,
        proposal_id: &'a str,
        _outcome: &'a Outcome,
    ) -> BoxFuture<'a, Result<(), GateError>> {
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        memory.ledger.release(job_id, proposal_id);
        Box::pin(async { Ok(()) })
    }

    fn label(&self) -> &'static str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flink_autoscale_core::protocol::{OutcomeStatus, Verdict, VertexProposal};

    fn proposal(id: &str, current: u32, proposed: u32) -> Proposal {
        Proposal {
            proposal_id: id.into(),
            agent_id: "a".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            job_id: "0123456789abcdef0123456789abcdef".into(),
            job_name: "job".into(),
            vertices: vec![VertexProposal {
                id: "fedcba9876543210fedcba9876543210".into(),
                name: "Map".into(),
                slot_sharing_group: None,
                current_parallelism: current,
                proposed_parallelism: proposed,
                evidence: None,
            }],
            checkpoint_state_bytes: Some(0),
            slots_per_task_manager: 1,
            disk_bytes_per_task_manager: 1 << 30,
            current_task_managers: current,
        }
    }

    fn no_interval() -> GateConfig {
        GateConfig {
            min_interval: flink_autoscale_core::duration::Dur::secs(0),
            ..GateConfig::default()
        }
    }

    #[tokio::test]
    async fn local_gates_follow_the_evacuation_flag_file() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("evacuating");
        let gates = LocalGates::new(no_interval(), Some(flag.clone()), None);
        std::fs::write(&flag, "failover").unwrap();
        let d = gates.propose(&proposal("p1", 4, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Refused);
        assert_eq!(d.reasons[0].gate.as_str(), "region_failover");
        // Scale-ups still pass while evacuating.
        let up = gates.propose(&proposal("p2", 4, 6), 0).await.unwrap();
        assert_eq!(up.verdict, Verdict::Approved);
        std::fs::remove_file(&flag).unwrap();
        let outcome = Outcome {
            status: OutcomeStatus::Applied,
            observed_parallelism: Default::default(),
            error: None,
            restart_ms: Some(3_000),
            rescale: None,
        };
        gates.report(&up_job(), "p2", &outcome).await.unwrap();
        let d = gates.propose(&proposal("p3", 6, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Approved);
    }

    #[tokio::test]
    async fn local_gates_refuse_what_the_pause_file_pauses_and_follow_its_edits() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pauses.toml");
        let gates = LocalGates::new(no_interval(), None, Some(file.clone()));
        std::fs::write(
            &file,
            "[[pause]]\nscope = \"cluster/c\"\nreason = \"INC-1\"\nset_by = \"alice\"\n",
        )
        .unwrap();
        let d = gates.propose(&proposal("p1", 1, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Refused);
        assert_eq!(d.reasons[0].code, "paused");
        assert!(
            d.reasons[0]
                .message
                .contains("cluster/c is paused by alice"),
            "{d:?}"
        );
        // Another cluster's pause does not stop this one; the edit applies at once.
        std::fs::write(
            &file,
            "[[pause]]\nscope = \"cluster/other\"\nreason = \"x\"\n",
        )
        .unwrap();
        let d = gates.propose(&proposal("p2", 1, 2), 0).await.unwrap();
        assert_eq!(d.verdict, Verdict::Approved, "{d:?}");
    }

    fn up_job() -> String {
        "0123456789abcdef0123456789abcdef".into()
    }

    #[tokio::test]
    async fn local_gates_are_idempotent_and_allow_one_open_action_per_job() {
        let gates = LocalGates::new(no_interval(), None, None);
        let first = gates.propose(&proposal("p1", 1, 2), 0).await.unwrap();
        assert_eq!(first.verdict, Verdict::Approved);
        assert_eq!(
            gates.propose(&proposal("p1", 1, 2), 5).await.unwrap(),
            first
        );
        let second = gates.propose(&proposal("p2", 1, 3), 5).await.unwrap();
        assert_eq!(second.verdict, Verdict::Refused);
        assert_eq!(second.reasons[0].gate.as_str(), "rate_limit");
    }
}
