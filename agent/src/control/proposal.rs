//! An engine decision becomes a coordinator proposal: every vertex with its current and
//! proposed parallelism and the evidence, plus the sizing facts the gates need.

use flink_autoscale_core::gates::disk_capacity::task_managers_needed;
use flink_autoscale_core::protocol::{
    Evidence, Proposal, VertexProposal, MAX_MESSAGE_LEN, MAX_TEXT_LEN,
};

use super::config::ControlConfig;
use crate::collector::JobSnapshot;
use flink_autoscale_core::engine::EvaluateOutput;

/// `{agent}-{job}-{decision time}`: unique per job and decision, stable across retries.
pub fn proposal_id(agent_id: &str, job_id: &str, now_ms: u64) -> String {
    let suffix = format!("-{job_id}-{now_ms}");
    let room = MAX_TEXT_LEN.saturating_sub(suffix.len());
    let agent: String = agent_id.chars().take(room).collect();
    format!("{agent}{suffix}")
}

fn finite(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

pub fn build(
    settings: &ControlConfig,
    snapshot: &JobSnapshot,
    output: &EvaluateOutput,
    now_ms: u64,
) -> Proposal {
    let decision = &output.decision;
    let vertices: Vec<VertexProposal> = snapshot
        .topology
        .iter()
        .map(|spec| {
            let vd = decision.vertices.iter().find(|d| d.id == spec.id);
            let figures = output.evaluated.vertices.get(&spec.id);
            VertexProposal {
                id: spec.id.clone(),
                name: clip(&spec.name, MAX_TEXT_LEN),
                slot_sharing_group: None,
                current_parallelism: spec.parallelism,
                proposed_parallelism: decision
                    .parallelism
                    .get(&spec.id)
                    .copied()
                    .unwrap_or(spec.parallelism),
                evidence: Some(Evidence {
                    true_processing_rate: vd.and_then(|d| finite(d.true_processing_rate.0)),
                    target_data_rate: vd.and_then(|d| finite(d.target_data_rate.0)),
                    busy_ratio: figures.and_then(|f| finite(f.load.0)),
                    reason: vd.map(|d| clip(&d.reason, MAX_MESSAGE_LEN)),
                }),
            }
        })
        .collect();
    // Every vertex is in Flink's default slot-sharing group unless told otherwise.
    let current_slots = vertices
        .iter()
        .map(|v| u64::from(v.current_parallelism))
        .max()
        .unwrap_or(0);
    Proposal {
        proposal_id: proposal_id(&settings.agent_id, &snapshot.job_id, now_ms),
        agent_id: settings.agent_id.clone(),
        cluster_id: settings.cluster_id.clone(),
        region: settings.region.clone(),
        job_id: snapshot.job_id.clone(),
        job_name: clip(&snapshot.name, MAX_TEXT_LEN).replace(char::is_control, " "),
        vertices,
        checkpoint_state_bytes: snapshot.state_size_bytes.and_then(finite).map(|b| b as u64),
        slots_per_task_manager: settings.slots_per_task_manager,
        disk_bytes_per_task_manager: settings.disk_bytes_per_task_manager,
        current_task_managers: task_managers_needed(current_slots, settings.slots_per_task_manager),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_ids_fit_the_protocol() {
        let long = "a".repeat(400);
        let id = proposal_id(&long, &"f".repeat(32), 1_700_000_000_000);
        assert!(id.len() <= MAX_TEXT_LEN);
        flink_autoscale_core::protocol::validate_identifier("proposal_id", &id).unwrap();
        assert_eq!(proposal_id("agent-1", "ab", 5), "agent-1-ab-5",);
    }
}
