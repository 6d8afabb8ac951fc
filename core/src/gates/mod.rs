//! The coordinator's safety gates as pure functions over plain data.
//!
//! [`evaluate`] takes a proposal, the facts the caller gathered (region flag, in-flight
//! actions, last approval), the gate configuration and the current time, and returns the
//! [`Decision`]. No clock, no I/O: the coordinator feeds it from its store, an agent without a
//! coordinator feeds it from its own memory, and tests feed it tables.
//!
//! Every configured gate runs, in the configured order, so an operator sees all reasons at
//! once; a gate left out of the order is disabled. Every refusal names its gate.

pub mod disk_capacity;
pub mod rate_limit;
pub mod region_failover;
pub mod standby_buffer;

use serde::{Deserialize, Serialize};

use crate::duration::Dur;

use crate::protocol::{
    ClusterOverrides, Decision, FieldError, GateName, Pause, Plan, Proposal, Reason, Verdict,
};

/// Largest accepted `disk_headroom` (10 000 %): more is a typing mistake.
const MAX_DISK_HEADROOM: f64 = 100.0;
/// Longest accepted `min_interval`.
const MAX_MIN_INTERVAL: Dur = Dur::secs(30 * 24 * 3600);
/// Largest accepted TaskManager count or concurrency cap.
const MAX_COUNT: u32 = 1_000_000;

/// Thresholds and order of the gates. [`Default`] holds the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// Gates to run, in this order; a gate not listed is disabled.
    pub order: Vec<GateName>,
    /// Local disk per TaskManager; when set it replaces the value the agent reports.
    pub disk_bytes_per_task_manager: Option<u64>,
    /// Spare disk required on top of the checkpoint state (0.5 = 50 %): RocksDB needs room to
    /// restore and to write the next checkpoint.
    pub disk_headroom: f64,
    /// Clusters with at least this many TaskManagers get a standby buffer.
    pub standby_min_cluster_task_managers: u32,
    /// Standby TaskManagers as a fraction of the planned TaskManagers (rounded up).
    pub standby_fraction: f64,
    /// Lower bound on the standby buffer when one applies.
    pub standby_min_task_managers: u32,
    /// Minimum time between two approved actions for one job. Formerly
    /// `min_interval_seconds` (a whole number), which the daemons' loaders still read with a
    /// deprecation warning.
    pub min_interval: Dur,
    /// Concurrent approved rescales allowed per cluster.
    pub max_in_flight_per_cluster: u32,
    /// Concurrent approved rescales allowed per region.
    pub max_in_flight_per_region: u32,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            order: GateName::ALL.to_vec(),
            disk_bytes_per_task_manager: None,
            disk_headroom: 0.5,
            standby_min_cluster_task_managers: 10,
            standby_fraction: 0.05,
            standby_min_task_managers: 1,
            min_interval: Dur::secs(600),
            max_in_flight_per_cluster: 5,
            max_in_flight_per_region: 50,
        }
    }
}

impl GateConfig {
    /// Checks thresholds; the error names the setting (prefixed by `prefix`, e.g. `gates.`).
    pub fn validate(&self, prefix: &str) -> Result<(), FieldError> {
        let field = |name: &str| format!("{prefix}{name}");
        for (i, gate) in self.order.iter().enumerate() {
            if !gate.is_configurable() {
                return Err(FieldError::new(
                    field("order"),
                    format!("{gate} is always on and cannot be listed (configurable: region_failover, disk_capacity, standby_buffer, rate_limit)"),
                ));
            }
            if self.order[..i].contains(gate) {
                return Err(FieldError::new(
                    field("order"),
                    format!("gate {gate} is listed twice"),
                ));
            }
        }
        if !self.disk_headroom.is_finite()
            || !(0.0..=MAX_DISK_HEADROOM).contains(&self.disk_headroom)
        {
            return Err(FieldError::new(
                field("disk_headroom"),
                format!("must be a number between 0 and {MAX_DISK_HEADROOM}"),
            ));
        }
        if self.min_interval > MAX_MIN_INTERVAL {
            return Err(FieldError::new(
                field("min_interval"),
                format!("must be at most {MAX_MIN_INTERVAL}"),
            ));
        }
        for (name, value) in [
            (
                "standby_min_cluster_task_managers",
                self.standby_min_cluster_task_managers,
            ),
            ("standby_min_task_managers", self.standby_min_task_managers),
            ("max_in_flight_per_cluster", self.max_in_flight_per_cluster),
            ("max_in_flight_per_region", self.max_in_flight_per_region),
        ] {
            if value > MAX_COUNT {
                return Err(FieldError::new(
                    field(name),
                    format!("must be at most {MAX_COUNT}"),
                ));
            }
        }
        if !self.standby_fraction.is_finite() || !(0.0..=1.0).contains(&self.standby_fraction) {
            return Err(FieldError::new(
                field("standby_fraction"),
                "must be between 0 and 1",
            ));
        }
        if self.max_in_flight_per_cluster == 0 {
            return Err(FieldError::new(
                field("max_in_flight_per_cluster"),
                "must be >= 1",
            ));
        }
        if self.max_in_flight_per_region == 0 {
            return Err(FieldError::new(
                field("max_in_flight_per_region"),
                "must be >= 1",
            ));
        }
        Ok(())
    }

    /// This configuration with a cluster's overrides applied.
    pub fn with_overrides(&self, o: &ClusterOverrides) -> GateConfig {
        GateConfig {
            order: self.order.clone(),
            disk_bytes_per_task_manager: o
                .disk_bytes_per_task_manager
                .or(self.disk_bytes_per_task_manager),
            disk_headroom: o.disk_headroom.unwrap_or(self.disk_headroom),
            standby_min_cluster_task_managers: o
                .standby_min_cluster_task_managers
                .unwrap_or(self.standby_min_cluster_task_managers),
            standby_fraction: o.standby_fraction.unwrap_or(self.standby_fraction),
            standby_min_task_managers: o
                .standby_min_task_managers
                .unwrap_or(self.standby_min_task_managers),
            min_interval: o
                .min_interval_seconds
                .map(Dur::secs)
                .unwrap_or(self.min_interval),
            max_in_flight_per_cluster: o
                .max_in_flight_per_cluster
                .unwrap_or(self.max_in_flight_per_cluster),
            max_in_flight_per_region: self.max_in_flight_per_region,
        }
    }

    fn enabled(&self, gate: GateName) -> bool {
        self.order.contains(&gate)
    }
}

/// The admin switches that bear on a proposal: its region's evacuation flag and the pause in
/// force over its scope, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switches {
    pub region_evacuating: bool,
    pub pause: Option<Pause>,
}

/// What the caller knows about the world when the proposal arrives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// The proposal's region is flagged as evacuating (failover in progress).
    pub region_evacuating: bool,
    /// The pause that covers the proposal (see [`crate::pause::in_force`]), if any.
    pub pause: Option<Pause>,
    /// Proposal id of an approved action for this job still waiting for its outcome.
    pub job_open_action: Option<String>,
    /// When the last action for this job was approved (Unix ms).
    pub job_last_approved_at_ms: Option<i64>,
    /// Approved actions without an outcome in the proposal's cluster.
    pub cluster_in_flight: u32,
    /// Approved actions without an outcome in the proposal's region.
    pub region_in_flight: u32,
}

/// Runs the configured gates and returns the verdict, with a plan when approved. A pause in
/// force refuses first (it is always on); the configured gates still run, so every reason
/// is reported at once.
///
/// `proposal` must have passed [`Proposal::validate`]; `now_ms` is Unix time in milliseconds.
pub fn evaluate(proposal: &Proposal, facts: &Facts, config: &GateConfig, now_ms: i64) -> Decision {
    let sizing = disk_capacity::Sizing::of(proposal, config);
    let mut reasons: Vec<Reason> = facts.pause.iter().map(crate::pause::refusal).collect();
    let mut standby = 0;
    for gate in &config.order {
        match gate {
            GateName::RegionFailover => {
                reasons.extend(region_failover::check(proposal, facts.region_evacuating))
            }
            GateName::DiskCapacity => {
                reasons.extend(disk_capacity::check(proposal, &sizing, config))
            }
            GateName::StandbyBuffer => {
                standby = standby_buffer::standby_task_managers(sizing.task_managers, config)
            }
            GateName::RateLimit => reasons.extend(rate_limit::check(facts, config, now_ms)),
            // Always on, never listed (validate refuses them in the order).
            GateName::Pause | GateName::Approval => {}
        }
    }
    if !reasons.is_empty() {
        return Decision {
            proposal_id: proposal.proposal_id.clone(),
            verdict: Verdict::Refused,
            reasons,
            plan: None,
        };
    }
    Decision {
        proposal_id: proposal.proposal_id.clone(),
        verdict: Verdict::Approved,
        reasons,
        plan: Some(Plan {
            task_managers: sizing.task_managers,
            standby_task_managers: if config.enabled(GateName::StandbyBuffer) {
                standby
            } else {
                0
            },
            parallelism: proposal
                .vertices
                .iter()
                .map(|v| (v.id.clone(), v.proposed_parallelism))
                .collect(),
        }),
    }
}

/// Builds a reason; gates use it so that every refusal carries its gate.
fn reason(gate: GateName, code: &str, message: String) -> Reason {
    Reason {
        gate,
        code: code.to_string(),
        message,
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use crate::protocol::{Proposal, VertexProposal};

    /// Hex vertex id number `n`.
    pub fn vid(n: u32) -> String {
        format!("{n:032x}")
    }

    /// A proposal with the given (group, current, proposed) vertices.
    pub fn proposal(vertices: &[(&str, u32, u32)]) -> Proposal {
        Proposal {
            proposal_id: "p".into(),
            agent_id: "a".into(),
            cluster_id: "c".into(),
            region: "r".into(),
            job_id: "0123456789abcdef0123456789abcdef".into(),
            job_name: "job".into(),
            vertices: vertices
                .iter()
                .enumerate()
                .map(|(i, (group, cur, new))| VertexProposal {
                    id: vid(i as u32 + 1),
                    name: format!("v{i}"),
                    slot_sharing_group: Some((*group).to_string()),
                    current_parallelism: *cur,
                    proposed_parallelism: *new,
                    evidence: None,
                })
                .collect(),
            checkpoint_state_bytes: Some(0),
            slots_per_task_manager: 1,
            disk_bytes_per_task_manager: 1 << 30,
            current_task_managers: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::proposal;
    use super::*;

    #[test]
    fn approval_carries_the_plan() {
        let mut p = proposal(&[("default", 2, 4), ("default", 2, 3)]);
        p.slots_per_task_manager = 2;
        let d = evaluate(&p, &Facts::default(), &GateConfig::default(), 0);
        assert_eq!(d.verdict, Verdict::Approved);
        let plan = d.plan.unwrap();
        assert_eq!(plan.task_managers, 2);
        assert_eq!(plan.standby_task_managers, 0);
        assert_eq!(
            plan.parallelism.values().copied().collect::<Vec<_>>(),
            [4, 3]
        );
    }

    #[test]
    fn all_refusals_are_reported_in_gate_order() {
        let p = proposal(&[("default", 4, 2)]);
        let facts = Facts {
            region_evacuating: true,
            job_open_action: Some("earlier".into()),
            ..Facts::default()
        };
        let mut config = GateConfig::default();
        let d = evaluate(&p, &facts, &config, 0);
        let gates: Vec<_> = d.reasons.iter().map(|r| r.gate).collect();
        assert_eq!(gates, [GateName::RegionFailover, GateName::RateLimit]);
        assert!(d.plan.is_none());

        config.order = vec![GateName::RateLimit, GateName::RegionFailover];
        let d = evaluate(&p, &facts, &config, 0);
        let gates: Vec<_> = d.reasons.iter().map(|r| r.gate).collect();
        assert_eq!(gates, [GateName::RateLimit, GateName::RegionFailover]);
    }

    #[test]
    fn a_gate_left_out_of_the_order_is_disabled() {
        let p = proposal(&[("default", 4, 2)]);
        let facts = Facts {
            region_evacuating: true,
            ..Facts::default()
        };
        let config = GateConfig {
            order: vec![GateName::DiskCapacity, GateName::RateLimit],
            ..GateConfig::default()
        };
        assert_eq!(evaluate(&p, &facts, &config, 0).verdict, Verdict::Approved);
    }

    #[test]
    fn a_pause_refuses_first_even_with_every_gate_disabled() {
        let p = proposal(&[("default", 4, 2)]);
        let facts = Facts {
            region_evacuating: true,
            pause: Some(Pause {
                scope: "fleet".into(),
                reason: "incident".into(),
                set_by: "alice".into(),
                since: 0,
                expires_at: None,
            }),
            ..Facts::default()
        };
        let d = evaluate(&p, &facts, &GateConfig::default(), 0);
        let codes: Vec<_> = d.reasons.iter().map(|r| r.code.as_str()).collect();
        assert_eq!(codes, ["paused", "region_evacuating"]);
        let none = GateConfig {
            order: vec![],
            ..GateConfig::default()
        };
        let d = evaluate(&p, &facts, &none, 0);
        assert_eq!(d.verdict, Verdict::Refused);
        assert_eq!(d.reasons[0].gate, GateName::Pause);
    }

    #[test]
    fn overrides_win_over_defaults() {
        let base = GateConfig::default();
        let o = ClusterOverrides {
            disk_bytes_per_task_manager: Some(7),
            min_interval_seconds: Some(1),
            ..ClusterOverrides::default()
        };
        let c = base.with_overrides(&o);
        assert_eq!(c.disk_bytes_per_task_manager, Some(7));
        assert_eq!(c.min_interval, Dur::secs(1));
        assert_eq!(c.disk_headroom, base.disk_headroom);
    }

    #[test]
    fn config_validation_names_the_setting() {
        type Case = (fn(&mut GateConfig), &'static str);
        let cases: Vec<Case> = vec![
            (|c| c.disk_headroom = -1.0, "gates.disk_headroom"),
            (|c| c.disk_headroom = 1e9, "gates.disk_headroom"),
            (
                |c| c.min_interval = Dur::secs(31 * 86_400),
                "gates.min_interval",
            ),
            (
                |c| c.max_in_flight_per_region = u32::MAX,
                "gates.max_in_flight_per_region",
            ),
            (|c| c.standby_fraction = 2.0, "gates.standby_fraction"),
            (
                |c| c.max_in_flight_per_cluster = 0,
                "gates.max_in_flight_per_cluster",
            ),
            (
                |c| c.max_in_flight_per_region = 0,
                "gates.max_in_flight_per_region",
            ),
            (
                |c| c.order = vec![GateName::RateLimit, GateName::RateLimit],
                "gates.order",
            ),
            (|c| c.order = vec![GateName::Pause], "gates.order"),
            (|c| c.order.push(GateName::Approval), "gates.order"),
        ];
        for (mutate, field) in cases {
            let mut c = GateConfig::default();
            mutate(&mut c);
            assert_eq!(c.validate("gates.").unwrap_err().field, field);
        }
        GateConfig::default().validate("gates.").unwrap();
    }
}
