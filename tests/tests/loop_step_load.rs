//! Step load: from parallelism 1 everywhere under a constant load that needs several
//! vertices at different parallelisms, the loop reaches a configuration where every vertex is
//! inside its utilization band in at most 2 approved rescales, then makes no more for 6
//! simulated hours. Simulator on a manual clock, agent in lockstep, real HTTP on loopback.

use std::time::Duration;

use flink_autoscale_core::protocol::OutcomeStatus;
use flink_autoscale_tests::lockstep::{local_harness, scenario_text, Harness, SHORT_WINDOW};

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_load_converges_in_at_most_two_rescales_and_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = local_harness("step-load.toml", dir.path(), "").await;
    let job = h.job_ids()[0].clone();
    let start = h.now_ms;

    // Long enough for two full windows after the rescales, then the six quiet hours.
    h.run_for(HOUR).await;
    let converged = h.applied_times();
    let converged_at = h.now_ms;
    h.run_for(6 * HOUR).await;

    let applied = h.applied_times();
    let model = h.control.model(&job);
    for (t, e) in &h.log {
        eprintln!("{:>6} s  {e:?}", (t - start) / 1000);
    }
    let busy: Vec<(String, u32, f64)> = model
        .iter()
        .map(|v| (v.name.clone(), v.parallelism, v.max_busy / 1000.0))
        .collect();
    eprintln!("final: {busy:?}");

    assert!(
        !converged.is_empty() && converged.len() <= 2,
        "expected 1..=2 applied rescales in the first hour, got {}",
        converged.len()
    );
    assert_eq!(
        applied.len(),
        converged.len(),
        "rescales after convergence (at {} s): {:?}",
        (converged_at - start) / 1000,
        applied
            .iter()
            .map(|t| (t - start) / 1000)
            .collect::<Vec<_>>()
    );
    assert!(
        h.outcomes(OutcomeStatus::Failed).is_empty(),
        "failed outcomes: {:?}",
        h.outcomes(OutcomeStatus::Failed)
    );
    // Every vertex inside the default band [0.4, 1.0] of busy time (sources may idle lower:
    // they are sized by their own records-in rate), and no backlog left.
    for v in &model {
        let busy = v.max_busy / 1000.0;
        if v.input_rate.is_none() {
            assert!(
                (0.4..=1.0).contains(&busy) || v.parallelism == 1,
                "{} at p={} is {busy:.2} busy",
                v.name,
                v.parallelism
            );
        }
        assert!(v.lag < 1.0 + v.in_rate, "{} still lags {}", v.name, v.lag);
    }
    let distinct: std::collections::BTreeSet<u32> = model.iter().map(|v| v.parallelism).collect();
    assert!(
        distinct.len() >= 3,
        "vertices should end at different parallelisms: {busy:?}"
    );
    h.shutdown().await;
}

/// `realizer = "none"` (the default): proposals and verdicts happen and are exported, nothing
/// is applied, and the recommendation repeats at most once per metric window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recommend_only_proposes_but_never_applies() {
    use flink_autoscale_agent::control::LoopEvent;

    let extra = format!("{SHORT_WINDOW}[control.gates]\nmin_interval = \"0s\"\n");
    let mut h = Harness::start(
        &scenario_text("step-load.toml"),
        Duration::from_secs(15),
        &extra,
    )
    .await;
    let job = h.job_ids()[0].clone();
    let before = h.control.parallelism(&job);
    h.run_for(HOUR).await;
    let proposals = h
        .log
        .iter()
        .filter(|(_, e)| matches!(e, LoopEvent::Proposed { .. }))
        .count();
    let not_applied = h.outcomes(OutcomeStatus::Failed);
    assert!(
        proposals >= 2,
        "the recommendation should repeat while the job stays undersized"
    );
    assert!(
        proposals <= 12,
        "{proposals} proposals in an hour with a 5-minute window"
    );
    assert_eq!(not_applied.len(), proposals);
    assert!(not_applied.iter().all(|(_, e)| matches!(
        e,
        LoopEvent::Outcome { outcome, .. } if outcome.error.as_deref().is_some_and(|m| m.contains("recommend only"))
    )));
    assert_eq!(
        h.control.parallelism(&job),
        before,
        "nothing may be applied"
    );
    h.shutdown().await;
}
