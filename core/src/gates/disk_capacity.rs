//! Disk capacity: the resized cluster must hold the job's checkpoint state plus headroom.
//!
//! TaskManagers follow Flink's slot sharing: vertices in one slot-sharing group share slots,
//! so a group needs as many slots as its widest vertex, and the job needs the sum over groups.

use std::collections::BTreeMap;

use super::{reason, GateConfig};
use crate::protocol::{GateName, Proposal, Reason};

/// Slots and TaskManagers a proposal needs, and the disk each TaskManager has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub slots: u64,
    pub task_managers: u32,
    pub disk_bytes_per_task_manager: u64,
}

impl Sizing {
    pub fn of(proposal: &Proposal, config: &GateConfig) -> Sizing {
        let slots = slots_needed(proposal);
        Sizing {
            slots,
            task_managers: task_managers_needed(slots, proposal.slots_per_task_manager),
            disk_bytes_per_task_manager: config
                .disk_bytes_per_task_manager
                .unwrap_or(proposal.disk_bytes_per_task_manager),
        }
    }
}

/// Max proposed parallelism per slot-sharing group, summed over groups.
pub fn slots_needed(proposal: &Proposal) -> u64 {
    slots_of(
        proposal
            .vertices
            .iter()
            .map(|v| (v.slot_sharing_group(), v.proposed_parallelism)),
    )
}

/// The slots the job uses now: max current parallelism per group, summed.
pub fn slots_in_use(proposal: &Proposal) -> u64 {
    slots_of(
        proposal
            .vertices
            .iter()
            .map(|v| (v.slot_sharing_group(), v.current_parallelism)),
    )
}

/// Slots that vertices given as (slot-sharing group, parallelism) take: the widest vertex
/// per group, summed over groups.
pub fn slots_of<'a>(vertices: impl IntoIterator<Item = (&'a str, u32)>) -> u64 {
    let mut widest: BTreeMap<&str, u32> = BTreeMap::new();
    for (group, parallelism) in vertices {
        let w = widest.entry(group).or_default();
        *w = (*w).max(parallelism);
    }
    widest.values().map(|&p| u64::from(p)).sum()
}

/// ceil(slots / slots per TaskManager), saturating at `u32::MAX`.
pub fn task_managers_needed(slots: u64, slots_per_task_manager: u32) -> u32 {
    let per = u64::from(slots_per_task_manager.max(1));
    u32::try_from(slots.div_ceil(per)).unwrap_or(u32::MAX)
}

/// Refuses when the planned TaskManagers cannot hold state × (1 + headroom), or, with the
/// state size unknown, when the proposal would shrink the cluster.
pub fn check(proposal: &Proposal, sizing: &Sizing, config: &GateConfig) -> Option<Reason> {
    let Some(state) = proposal.checkpoint_state_bytes else {
        if sizing.task_managers < proposal.current_task_managers {
            return Some(reason(
                GateName::DiskCapacity,
                "state_size_unknown",
                format!(
                    "checkpoint state size is unknown, so shrinking from {} to {} TaskManagers is refused",
                    proposal.current_task_managers, sizing.task_managers
                ),
            ));
        }
        return None;
    };
    let capacity = f64::from(sizing.task_managers) * sizing.disk_bytes_per_task_manager as f64;
    let required = state as f64 * (1.0 + config.disk_headroom);
    if capacity >= required {
        return None;
    }
    Some(reason(
        GateName::DiskCapacity,
        "insufficient_disk",
        format!(
            "{} TaskManagers x {} bytes of disk = {} bytes < checkpoint state {} bytes x (1 + headroom {}) = {:.0} bytes",
            sizing.task_managers,
            sizing.disk_bytes_per_task_manager,
            u128::from(sizing.task_managers) * u128::from(sizing.disk_bytes_per_task_manager),
            state,
            config.disk_headroom,
            required
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::proposal;
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn slot_sharing_counts_the_widest_vertex_per_group() {
        // (vertices as (group, proposed), slots)
        let cases: &[(&[(&str, u32)], u64)] = &[
            (&[("default", 4)], 4),
            (&[("default", 4), ("default", 2), ("default", 3)], 4),
            (&[("default", 4), ("sink", 2)], 6),
            (&[("a", 1), ("b", 1), ("c", 1), ("a", 5)], 7),
        ];
        for (vertices, slots) in cases {
            let spec: Vec<_> = vertices.iter().map(|(g, p)| (*g, 1, *p)).collect();
            assert_eq!(slots_needed(&proposal(&spec)), *slots, "{vertices:?}");
        }
    }

    #[test]
    fn task_managers_round_up() {
        for (slots, per, tms) in [
            (0, 4, 0),
            (1, 4, 1),
            (4, 4, 1),
            (5, 4, 2),
            (9, 2, 5),
            (3, 0, 3),
        ] {
            assert_eq!(task_managers_needed(slots, per), tms, "{slots}/{per}");
        }
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            proposed: u32,
            state: Option<u64>,
            disk: u64,
            override_disk: Option<u64>,
            headroom: f64,
            refused: Option<&'static str>,
        }
        // Current: 4 slots on 2 TaskManagers of 2 slots each.
        let cases = [
            Case {
                name: "fits",
                proposed: 2,
                state: Some(GIB),
                disk: 10 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: None,
            },
            Case {
                name: "exactly fits",
                proposed: 2,
                state: Some(10 * GIB),
                disk: 15 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: None,
            },
            Case {
                name: "does not fit after shrink",
                proposed: 2,
                state: Some(10 * GIB),
                disk: 10 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: Some("insufficient_disk"),
            },
            Case {
                name: "headroom matters",
                proposed: 2,
                state: Some(10 * GIB),
                disk: 10 * GIB,
                override_disk: None,
                headroom: 0.0,
                refused: None,
            },
            Case {
                name: "scale-up that still does not fit",
                proposed: 6,
                state: Some(100 * GIB),
                disk: 10 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: Some("insufficient_disk"),
            },
            Case {
                name: "override replaces reported disk",
                proposed: 2,
                state: Some(10 * GIB),
                disk: 100 * GIB,
                override_disk: Some(GIB),
                headroom: 0.5,
                refused: Some("insufficient_disk"),
            },
            Case {
                name: "unknown state, shrink",
                proposed: 2,
                state: None,
                disk: 100 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: Some("state_size_unknown"),
            },
            Case {
                name: "unknown state, same size",
                proposed: 3,
                state: None,
                disk: 100 * GIB,
                override_disk: None,
                headroom: 0.5,
                refused: None,
            },
            Case {
                name: "unknown state, grow",
                proposed: 8,
                state: None,
                disk: 0,
                override_disk: None,
                headroom: 0.5,
                refused: None,
            },
            Case {
                name: "no state at all",
                proposed: 1,
                state: Some(0),
                disk: 0,
                override_disk: None,
                headroom: 0.5,
                refused: None,
            },
        ];
        for c in cases {
            let mut p = proposal(&[("default", 4, c.proposed), ("default", 4, 1)]);
            p.slots_per_task_manager = 2;
            p.current_task_managers = 2;
            p.checkpoint_state_bytes = c.state;
            p.disk_bytes_per_task_manager = c.disk;
            let config = GateConfig {
                disk_headroom: c.headroom,
                disk_bytes_per_task_manager: c.override_disk,
                ..GateConfig::default()
            };
            let got = check(&p, &Sizing::of(&p, &config), &config);
            assert_eq!(
                got.as_ref().map(|r| r.code.as_str()),
                c.refused,
                "{}",
                c.name
            );
            if let Some(r) = got {
                assert_eq!(r.gate, GateName::DiskCapacity, "{}", c.name);
            }
        }
    }
}
