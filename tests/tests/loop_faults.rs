//! Faults during the loop, at random (seeded) and right after proposals and actuations: the
//! coordinator is SIGKILLed and restarted, the JobManager answers 5xx or stalls, the agent
//! restarts from its state file. Afterwards: no lost or duplicated actuation (every change
//! of the job's parallelism matches exactly one approved plan, and the loop saw each one
//! applied), no action without approval, and every verdict and outcome is in the
//! coordinator's audit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use flink_autoscale_agent::control::{ControlLoop, LoopEvent};
use flink_autoscale_core::protocol::{OutcomeStatus, Verdict};
use flink_autoscale_simulator::Fault;
use flink_autoscale_tests::coordinator_process::Coordinator;
use flink_autoscale_tests::lockstep::{coordinator_control, scenario_text, Harness};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TICK_S: u64 = 15;
const CHAOS_TICKS: usize = 6 * 3600 / TICK_S as usize;
const QUIET_TICKS: usize = 2 * 3600 / TICK_S as usize;
/// Simulated hour → load multiplier, to make the loop act several times.
const LOAD: [(usize, f64); 5] = [(0, 1.0), (1, 2.5), (2, 0.5), (4, 1.8), (5, 0.8)];

#[derive(Default, Debug)]
struct Chaos {
    coordinator_kills: u32,
    jm_errors: u32,
    jm_stalls: u32,
    agent_restarts: u32,
    actuation_faults: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_lose_and_duplicate_nothing_and_everything_is_audited() {
    let seed: u64 = std::env::var("LOOP_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261130);
    eprintln!("seed {seed} (set LOOP_FAULTS_SEED to replay another)");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut coordinator = Coordinator::start(dir.path(), &["--min-interval", "0s"]);
    let extra = format!(
        "[autoscaler]\n\"scale-down.interval\" = \"10min\"\n{}",
        coordinator_control(
            dir.path(),
            &coordinator.url,
            &coordinator.agent_token_file(),
            "eu-west-1"
        )
    );
    let mut h = Harness::start(
        &scenario_text("three-vertex.toml"),
        Duration::from_secs(TICK_S),
        &extra,
    )
    .await;
    let job = h.job_ids()[0].clone();
    let mut chaos = Chaos::default();
    let mut coordinator_back_at: Option<usize> = None;
    let mut jm_fault_until: Option<usize> = None;

    for tick in 0..CHAOS_TICKS + QUIET_TICKS {
        let hour = tick * TICK_S as usize / 3600;
        if let Some((_, m)) = LOAD.iter().find(|(at, _)| *at == hour) {
            h.control.set_rate_multiplier(&job, *m);
        }
        let seen = h.log.len();
        h.tick().await;
        let chaotic = tick < CHAOS_TICKS;

        // Undo faults whose time is up (and all of them once the chaos is over).
        if coordinator_back_at.is_some_and(|t| t <= tick || !chaotic) {
            coordinator.restart();
            coordinator_back_at = None;
        }
        if jm_fault_until.is_some_and(|t| t <= tick || !chaotic) {
            h.control.set_fault(Some(&job), None);
            jm_fault_until = None;
        }
        if !chaotic {
            continue;
        }
        let proposed = h.log[seen..]
            .iter()
            .any(|(_, e)| matches!(e, LoopEvent::Proposed { .. }));
        let actuated = h.log[seen..]
            .iter()
            .any(|(_, e)| matches!(e, LoopEvent::Actuating { .. }));
        let approved = h.log[seen..].iter().any(|(_, e)| {
            matches!(e, LoopEvent::Verdict { decision, .. } if decision.verdict == Verdict::Approved)
        });

        if coordinator.is_running()
            && chaos.coordinator_kills < 6
            && (rng.random_bool(0.004) || (proposed && rng.random_bool(0.4)))
        {
            coordinator.kill();
            chaos.coordinator_kills += 1;
            coordinator_back_at = Some(tick + rng.random_range(2..40));
        }
        if jm_fault_until.is_none() && (rng.random_bool(0.01) || (approved && rng.random_bool(0.3)))
        {
            let stall = chaos.jm_stalls < 3 && rng.random_bool(0.2);
            let fault = if stall {
                chaos.jm_stalls += 1;
                Fault::Delay(Duration::from_secs(4))
            } else {
                chaos.jm_errors += 1;
                Fault::Status(if rng.random_bool(0.5) { 500 } else { 503 })
            };
            h.control.set_fault(Some(&job), Some(fault));
            jm_fault_until = Some(tick + if stall { 1 } else { rng.random_range(1..8) });
        }
        // A fault that only the loop's own request (the actuation) can meet.
        if rng.random_bool(0.05) {
            chaos.actuation_faults += 1;
            h.step_fault = Some(match rng.random_range(0..3) {
                0 => Fault::Status(409),
                1 => Fault::Status(500),
                _ if chaos.jm_stalls < 4 => {
                    chaos.jm_stalls += 1;
                    Fault::Delay(Duration::from_secs(4))
                }
                _ => Fault::Status(503),
            });
        }
        if chaos.agent_restarts < 4
            && (rng.random_bool(0.002) || (actuated && rng.random_bool(0.5)))
        {
            chaos.agent_restarts += 1;
            let agent =
                ControlLoop::from_config(&h.config).expect("agent restarts from its state file");
            h.restart_agent(Arc::new(agent));
        }
    }
    eprintln!("chaos: {chaos:?}");
    assert!(
        chaos.coordinator_kills >= 1 && chaos.agent_restarts >= 1 && chaos.jm_errors >= 1,
        "{chaos:?}"
    );

    // What the agent saw.
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    let mut actuations: Vec<(u64, String, BTreeMap<String, u32>)> = Vec::new();
    let mut outcomes: BTreeMap<String, Vec<OutcomeStatus>> = BTreeMap::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    for (t, e) in &h.log {
        match e {
            LoopEvent::Verdict { decision, .. } => {
                let before = verdicts.insert(decision.proposal_id.clone(), decision.verdict);
                assert!(
                    before.is_none_or(|v| v == decision.verdict),
                    "{} changed verdict",
                    decision.proposal_id
                );
            }
            LoopEvent::Actuating {
                proposal_id, plan, ..
            } => {
                assert_eq!(
                    verdicts.get(proposal_id),
                    Some(&Verdict::Approved),
                    "actuation of {proposal_id} without an approval"
                );
                actuations.push((*t, proposal_id.clone(), plan.parallelism.clone()));
            }
            LoopEvent::Outcome {
                proposal_id,
                outcome,
                ..
            } => {
                outcomes
                    .entry(proposal_id.clone())
                    .or_default()
                    .push(outcome.status);
            }
            LoopEvent::Reported { proposal_id, .. } => {
                reported.insert(proposal_id.clone());
            }
            _ => {}
        }
    }
    for (id, list) in &outcomes {
        assert_eq!(
            list.len(),
            1,
            "{id} concluded {} times: {list:?}",
            list.len()
        );
    }

    // Every change of the job's parallelism is one approved plan, used once.
    let mut changes = Vec::new();
    for w in h.ticks.windows(2) {
        if w[0].parallelism != w[1].parallelism {
            changes.push((w[1].now_ms, w[1].parallelism.clone()));
        }
    }
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (t, p) in &changes {
        let matched = actuations
            .iter()
            .rev()
            .find(|(at, id, plan)| at <= t && plan == p && !used.contains(id))
            .map(|(_, id, _)| id.clone())
            .unwrap_or_else(|| {
                panic!("the job changed to {p:?} at {t} without a matching approved actuation")
            });
        used.insert(matched);
    }
    let applied: BTreeSet<&String> = outcomes
        .iter()
        .filter(|(_, s)| s.contains(&OutcomeStatus::Applied))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        applied.len(),
        changes.len(),
        "applied outcomes vs parallelism changes: {applied:?} / {changes:?}"
    );
    assert!(
        !changes.is_empty(),
        "the load steps should have caused rescales"
    );

    // Every verdict and outcome is in the audit.
    let audit = coordinator.decisions(&job).await;
    let audited: BTreeMap<String, &serde_json::Value> = audit
        .iter()
        .map(|r| (r["proposal_id"].as_str().unwrap_or_default().to_string(), r))
        .collect();
    assert_eq!(
        audited.keys().collect::<BTreeSet<_>>(),
        verdicts.keys().collect::<BTreeSet<_>>(),
        "audit and agent disagree on which proposals got verdicts"
    );
    for (id, verdict) in &verdicts {
        let rec = audited[id];
        assert_eq!(rec["verdict"], verdict.as_str(), "{rec}");
        if *verdict == Verdict::Approved {
            let status = outcomes.get(id).and_then(|s| s.first()).map(|s| s.as_str());
            assert!(reported.contains(id), "outcome of {id} never reported");
            assert_eq!(rec["outcome"]["status"].as_str(), status, "{rec}");
        }
    }
    eprintln!(
        "{} verdicts ({} approved), {} rescales applied, {} outcomes in the audit",
        verdicts.len(),
        verdicts
            .values()
            .filter(|v| **v == Verdict::Approved)
            .count(),
        changes.len(),
        audit.iter().filter(|r| !r["outcome"].is_null()).count()
    );
    h.shutdown().await;
}
