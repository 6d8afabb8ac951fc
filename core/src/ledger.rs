//! The gate ledger: what the rate-limit gate needs to remember between verdicts.
//!
//! After an approval the job has an open action, a new last-approval time, and its cluster
//! and region one more rescale in flight; after its outcome the action is released. A
//! proposal pending a person's approval holds the job's open action and counts as in flight
//! too (it may be applied any moment), but sets no approval time. Both gatekeepers keep this
//! bookkeeping through [`Ledger`]: the coordinator fills one from its store for every batch
//! (so each proposal of the batch sees the approvals before it), the agent without a
//! coordinator keeps one in memory.

use std::collections::HashMap;

use crate::gates::{self, Facts, GateConfig, Switches};
use crate::policy::{self, Policy, Subject};
use crate::protocol::{ApprovalRequest, Decision, Proposal, Verdict};

/// An approved action still waiting for its outcome, or a proposal waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAction {
    pub proposal_id: String,
    pub cluster_id: String,
    pub region: String,
    /// Waiting for a person's approval (not approved yet).
    pub pending: bool,
}

/// What the gates and the approval policy say about a proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Ruling {
    pub decision: Decision,
    /// Set when the verdict is pending: the rule and the expiry.
    pub approval: Option<ApprovalRequest>,
}

/// Open actions, last approvals and in-flight counts, keyed by job, cluster and region.
///
/// The in-flight counts cover every job of a cluster or region, also jobs this ledger holds
/// no open action for (the coordinator loads only the jobs of a batch, but whole counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    open: HashMap<String, OpenAction>,
    last_approved_ms: HashMap<String, i64>,
    cluster_in_flight: HashMap<String, u32>,
    region_in_flight: HashMap<String, u32>,
}

impl Ledger {
    /// Restores a job's open action, already included in the in-flight counts.
    pub fn restore_open_action(&mut self, job_id: &str, action: OpenAction) {
        self.open.insert(job_id.to_string(), action);
    }

    /// Restores when a job's last action was approved (Unix ms).
    pub fn restore_last_approval(&mut self, job_id: &str, at_ms: i64) {
        self.last_approved_ms.insert(job_id.to_string(), at_ms);
    }

    /// Restores the number of open actions in a cluster.
    pub fn restore_cluster_in_flight(&mut self, cluster_id: &str, count: u32) {
        self.cluster_in_flight.insert(cluster_id.to_string(), count);
    }

    /// Restores the number of open actions in a region.
    pub fn restore_region_in_flight(&mut self, region: &str, count: u32) {
        self.region_in_flight.insert(region.to_string(), count);
    }

    /// What the gates need to know about `proposal`'s job, cluster and region.
    pub fn facts(&self, proposal: &Proposal, switches: &Switches) -> Facts {
        Facts {
            region_evacuating: switches.region_evacuating,
            pause: switches.pause.clone(),
            job_open_action: self
                .open
                .get(&proposal.job_id)
                .map(|a| a.proposal_id.clone()),
            job_last_approved_at_ms: self.last_approved_ms.get(&proposal.job_id).copied(),
            cluster_in_flight: self.cluster_in_flight(&proposal.cluster_id),
            region_in_flight: self.region_in_flight(&proposal.region),
        }
    }

    /// Runs the gates on `proposal`, then the approval policy when they approve, and books
    /// the result: an approval, or a pending proposal that holds the job's open action.
    pub fn decide(
        &mut self,
        proposal: &Proposal,
        switches: &Switches,
        config: &GateConfig,
        policy: &Policy,
        now_ms: i64,
    ) -> Ruling {
        let facts = self.facts(proposal, switches);
        let decision = gates::evaluate(proposal, &facts, config, now_ms);
        let Some(plan) = decision
            .plan
            .as_ref()
            .filter(|_| decision.verdict == Verdict::Approved)
        else {
            return Ruling {
                decision,
                approval: None,
            };
        };
        let subject = Subject {
            proposal,
            planned_task_managers: plan.task_managers,
            now_ms,
        };
        if let Some(rule) = policy.manual_rule(&subject) {
            let request = ApprovalRequest {
                rule: rule.name.clone(),
                expires_at: now_ms.saturating_add(policy.approval_ttl_ms()),
            };
            self.book(proposal, true);
            return Ruling {
                decision: policy::verdicts::pending(&proposal.proposal_id, &request),
                approval: Some(request),
            };
        }
        self.record_approval(proposal, now_ms);
        Ruling {
            decision,
            approval: None,
        }
    }

    /// A person approved the pending `proposal`: its hold on the job is released and the
    /// gates run again (a region may have started evacuating meanwhile); an approval is
    /// booked as usual. The policy is not asked again: the person was the policy.
    pub fn decide_reviewed(
        &mut self,
        proposal: &Proposal,
        switches: &Switches,
        config: &GateConfig,
        now_ms: i64,
    ) -> Decision {
        self.release(&proposal.job_id, &proposal.proposal_id);
        let facts = self.facts(proposal, switches);
        let decision = gates::evaluate(proposal, &facts, config, now_ms);
        if decision.verdict == Verdict::Approved {
            self.record_approval(proposal, now_ms);
        }
        decision
    }

    /// Books an approval: the job's open action, its last approval time, and one more
    /// rescale in flight in its cluster and region.
    pub fn record_approval(&mut self, proposal: &Proposal, now_ms: i64) {
        self.book(proposal, false);
        self.last_approved_ms
            .insert(proposal.job_id.clone(), now_ms);
    }

    /// The job's open action becomes `proposal` (approved, or pending a person), counted in
    /// its cluster and region.
    fn book(&mut self, proposal: &Proposal, pending: bool) {
        let action = OpenAction {
            proposal_id: proposal.proposal_id.clone(),
            cluster_id: proposal.cluster_id.clone(),
            region: proposal.region.clone(),
            pending,
        };
        if let Some(replaced) = self.open.insert(proposal.job_id.clone(), action) {
            // An action approved over an expired one replaces it in the counts too.
            self.uncount(&replaced);
        }
        increment(&mut self.cluster_in_flight, &proposal.cluster_id);
        increment(&mut self.region_in_flight, &proposal.region);
    }

    /// Releases `job_id`'s open action once its outcome is in. Returns false (and changes
    /// nothing) when the job's open action is not `proposal_id`.
    pub fn release(&mut self, job_id: &str, proposal_id: &str) -> bool {
        if !matches!(self.open.get(job_id), Some(a) if a.proposal_id == proposal_id) {
            return false;
        }
        if let Some(action) = self.open.remove(job_id) {
            self.uncount(&action);
        }
        true
    }

    /// The job's open action, if any.
    pub fn open_action(&self, job_id: &str) -> Option<&OpenAction> {
        self.open.get(job_id)
    }

    pub fn cluster_in_flight(&self, cluster_id: &str) -> u32 {
        self.cluster_in_flight.get(cluster_id).copied().unwrap_or(0)
    }

    pub fn region_in_flight(&self, region: &str) -> u32 {
        self.region_in_flight.get(region).copied().unwrap_or(0)
    }

    fn uncount(&mut self, action: &OpenAction) {
        decrement(&mut self.cluster_in_flight, &action.cluster_id);
        decrement(&mut self.region_in_flight, &action.region);
    }
}

fn increment(counts: &mut HashMap<String, u32>, key: &str) {
    let n = counts.entry(key.to_string()).or_default();
    *n = n.saturating_add(1);
}

fn decrement(counts: &mut HashMap<String, u32>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::test_support;

    /// A scale-up proposal `id` for job number `job` in `cluster` and `region`.
    fn proposal(id: &str, job: u32, cluster: &str, region: &str) -> Proposal {
        let mut p = test_support::proposal(&[("default", 1, 2)]);
        p.proposal_id = id.into();
        p.job_id = format!("{job:032x}");
        p.cluster_id = cluster.into();
        p.region = region.into();
        p
    }

    fn config() -> GateConfig {
        GateConfig {
            min_interval: crate::duration::Dur::secs(60),
            max_in_flight_per_cluster: 2,
            max_in_flight_per_region: 3,
            ..GateConfig::default()
        }
    }

    /// One step of a table: propose (and expect these refusal codes) or release.
    enum Step {
        Propose {
            id: &'static str,
            job: u32,
            cluster: &'static str,
            region: &'static str,
            at_s: i64,
            refused: &'static [&'static str],
        },
        Release {
            job: u32,
            id: &'static str,
            released: bool,
        },
    }

    fn propose(
        id: &'static str,
        job: u32,
        cluster: &'static str,
        region: &'static str,
        at_s: i64,
        refused: &'static [&'static str],
    ) -> Step {
        Step::Propose {
            id,
            job,
            cluster,
            region,
            at_s,
            refused,
        }
    }

    fn release(job: u32, id: &'static str, released: bool) -> Step {
        Step::Release { job, id, released }
    }

    /// Runs the steps on one ledger; returns the final (cluster c1, region r1) counts.
    fn run(name: &str, ledger: &mut Ledger, steps: &[Step]) -> (u32, u32) {
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Propose {
                    id,
                    job,
                    cluster,
                    region,
                    at_s,
                    refused,
                } => {
                    let p = proposal(id, *job, cluster, region);
                    let d = ledger
                        .decide(
                            &p,
                            &Switches::default(),
                            &config(),
                            &Policy::default(),
                            at_s * 1000,
                        )
                        .decision;
                    let codes: Vec<&str> = d.reasons.iter().map(|r| r.code.as_str()).collect();
                    assert_eq!(codes, *refused, "{name}, step {i} ({id})");
                    assert_eq!(d.verdict == Verdict::Approved, refused.is_empty());
                }
                Step::Release { job, id, released } => {
                    let job_id = format!("{job:032x}");
                    assert_eq!(
                        ledger.release(&job_id, id),
                        *released,
                        "{name}, step {i} (release {id})"
                    );
                }
            }
        }
        (
            ledger.cluster_in_flight("c1"),
            ledger.region_in_flight("r1"),
        )
    }

    #[test]
    fn approvals_and_releases_keep_the_books() {
        let cases: Vec<(&str, Vec<Step>, (u32, u32))> = vec![
            (
                "an approval opens an action and counts once in cluster and region",
                vec![propose("p1", 1, "c1", "r1", 0, &[])],
                (1, 1),
            ),
            (
                "a second proposal for the job waits for the open action and the interval",
                vec![
                    propose("p1", 1, "c1", "r1", 0, &[]),
                    propose(
                        "p2",
                        1,
                        "c1",
                        "r1",
                        10,
                        &["job_action_in_flight", "min_interval"],
                    ),
                ],
                (1, 1),
            ),
            (
                "after the release only the interval holds, then the job may go again",
                vec![
                    propose("p1", 1, "c1", "r1", 0, &[]),
                    release(1, "p1", true),
                    propose("p2", 1, "c1", "r1", 10, &["min_interval"]),
                    propose("p3", 1, "c1", "r1", 60, &[]),
                ],
                (1, 1),
            ),
            (
                "the cluster cap counts every job of the cluster",
                vec![
                    propose("p1", 1, "c1", "r1", 0, &[]),
                    propose("p2", 2, "c1", "r1", 0, &[]),
                    propose("p3", 3, "c1", "r1", 0, &["cluster_concurrency"]),
                    release(2, "p2", true),
                    propose("p4", 3, "c1", "r1", 0, &[]),
                ],
                (2, 2),
            ),
            (
                "the region cap counts every cluster of the region",
                vec![
                    propose("p1", 1, "c1", "r1", 0, &[]),
                    propose("p2", 2, "c2", "r1", 0, &[]),
                    propose("p3", 3, "c3", "r1", 0, &[]),
                    propose("p4", 4, "c4", "r1", 0, &["region_concurrency"]),
                    propose("p5", 5, "c4", "r2", 0, &[]),
                ],
                (1, 3),
            ),
            (
                "releasing another proposal id, or twice, changes nothing",
                vec![
                    propose("p1", 1, "c1", "r1", 0, &[]),
                    release(1, "p0", false),
                    release(2, "p1", false),
                    release(1, "p1", true),
                    release(1, "p1", false),
                ],
                (0, 0),
            ),
        ];
        for (name, steps, counts) in cases {
            let mut ledger = Ledger::default();
            assert_eq!(run(name, &mut ledger, &steps), counts, "{name}");
        }
    }

    #[test]
    fn restored_facts_count_like_recorded_ones() {
        let mut ledger = Ledger::default();
        let job = format!("{:032x}", 1);
        ledger.restore_open_action(
            &job,
            OpenAction {
                proposal_id: "old".into(),
                cluster_id: "c1".into(),
                region: "r1".into(),
                pending: false,
            },
        );
        ledger.restore_last_approval(&job, 0);
        ledger.restore_cluster_in_flight("c1", 1);
        ledger.restore_region_in_flight("r1", 2);
        let p = proposal("p1", 1, "c1", "r1");
        let switches = Switches {
            region_evacuating: true,
            pause: None,
        };
        let facts = ledger.facts(&p, &switches);
        assert_eq!(
            facts,
            Facts {
                region_evacuating: true,
                pause: None,
                job_open_action: Some("old".into()),
                job_last_approved_at_ms: Some(0),
                cluster_in_flight: 1,
                region_in_flight: 2,
            }
        );
        let steps = [
            propose("p2", 2, "c1", "r1", 0, &[]),
            propose(
                "p3",
                3,
                "c1",
                "r1",
                0,
                &["cluster_concurrency", "region_concurrency"],
            ),
            release(1, "old", true),
        ];
        assert_eq!(run("restored", &mut ledger, &steps), (1, 2));
    }

    fn manual_for_everything() -> Policy {
        let rule: crate::policy::Rule =
            serde_json::from_str(r#"{"name":"all","action":"manual"}"#).unwrap();
        Policy::new(&[rule], 60_000).unwrap()
    }

    #[test]
    fn a_pending_proposal_holds_the_job_and_counts_in_flight_until_reviewed() {
        let mut ledger = Ledger::default();
        let manual = manual_for_everything();
        let none = Switches::default();
        let p1 = proposal("p1", 1, "c1", "r1");
        let ruling = ledger.decide(&p1, &none, &config(), &manual, 1_000);
        assert_eq!(ruling.decision.verdict, Verdict::Pending);
        assert_eq!(ruling.decision.reasons[0].code, "manual_approval");
        let request = ruling.approval.unwrap();
        assert_eq!((request.rule.as_str(), request.expires_at), ("all", 61_000));
        let job = format!("{:032x}", 1);
        assert!(ledger.open_action(&job).unwrap().pending);
        assert_eq!(
            (
                ledger.cluster_in_flight("c1"),
                ledger.region_in_flight("r1")
            ),
            (1, 1)
        );
        // Another job of the cluster sees it in flight; the job itself has no approval time.
        let facts = ledger.facts(&proposal("q", 2, "c1", "r1"), &none);
        assert_eq!(facts.cluster_in_flight, 1);
        assert_eq!(ledger.facts(&p1, &none).job_last_approved_at_ms, None);
        // A second proposal for the job is refused while the first one is open.
        let p2 = proposal("p2", 1, "c1", "r1");
        let d = ledger.decide(&p2, &none, &config(), &Policy::default(), 2_000);
        assert_eq!(d.decision.reasons[0].code, "job_action_in_flight");

        // Approved by a person: the gates run again, with the region now evacuating only
        // scale-downs would fail; this scale-up is approved and booked once.
        let evacuating = Switches {
            region_evacuating: true,
            pause: None,
        };
        let d = ledger.decide_reviewed(&p1, &evacuating, &config(), 5_000);
        assert_eq!(d.verdict, Verdict::Approved, "{d:?}");
        assert!(!ledger.open_action(&job).unwrap().pending);
        assert_eq!(
            (
                ledger.cluster_in_flight("c1"),
                ledger.region_in_flight("r1")
            ),
            (1, 1)
        );
        assert_eq!(
            ledger.facts(&p1, &none).job_last_approved_at_ms,
            Some(5_000)
        );
    }

    #[test]
    fn a_reviewed_approval_can_still_be_refused_by_the_gates_and_then_holds_nothing() {
        let mut ledger = Ledger::default();
        let mut down = proposal("p1", 1, "c1", "r1");
        down.vertices[0].current_parallelism = 4;
        down.vertices[0].proposed_parallelism = 2;
        let none = Switches::default();
        let ruling = ledger.decide(&down, &none, &config(), &manual_for_everything(), 0);
        assert_eq!(ruling.decision.verdict, Verdict::Pending);
        let evacuating = Switches {
            region_evacuating: true,
            pause: None,
        };
        let d = ledger.decide_reviewed(&down, &evacuating, &config(), 1_000);
        assert_eq!(d.verdict, Verdict::Refused);
        assert_eq!(d.reasons[0].code, "region_evacuating");
        assert!(ledger.open_action(&down.job_id).is_none());
        assert_eq!(
            (
                ledger.cluster_in_flight("c1"),
                ledger.region_in_flight("r1")
            ),
            (0, 0)
        );
    }

    #[test]
    fn an_approval_over_an_expired_action_replaces_it_in_the_counts() {
        let mut ledger = Ledger::default();
        ledger.record_approval(&proposal("p1", 1, "c1", "r1"), 0);
        ledger.record_approval(&proposal("p2", 1, "c1", "r1"), 1);
        assert_eq!(
            ledger
                .open_action(&format!("{:032x}", 1))
                .unwrap()
                .proposal_id,
            "p2"
        );
        assert_eq!(
            (
                ledger.cluster_in_flight("c1"),
                ledger.region_in_flight("r1")
            ),
            (1, 1)
        );
    }
}
