//! Forward chain: vertices joined by FORWARD edges always end up with one parallelism, and
//! no plan ever gives a FORWARD edge two parallelisms (which Flink would silently turn into
//! a shuffle). The load is raised so the CPU-heavy map needs more subtasks than its
//! forward-connected source and filter would on their own.

use std::time::Duration;

use flink_autoscale_agent::control::LoopEvent;
use flink_autoscale_tests::lockstep::local_harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_connected_vertices_always_share_one_parallelism() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = local_harness(
        "forward-chain.toml",
        dir.path(),
        "\"scale-down.interval\" = \"0\"",
    )
    .await;
    let job = h.job_ids()[0].clone();
    let ids = h.control.vertex_ids(&job);
    // Source → cpu-map → filter are FORWARD-connected (scenario order).
    let chain = &ids[..3];
    h.control.set_rate_multiplier(&job, 4.0);
    h.run_for(Duration::from_secs(3600)).await;
    h.control.set_rate_multiplier(&job, 1.5);
    h.run_for(Duration::from_secs(3 * 3600)).await;

    let plans: Vec<_> = h
        .log
        .iter()
        .filter_map(|(_, e)| match e {
            LoopEvent::Actuating { plan, .. } => Some(plan.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !plans.is_empty(),
        "the raised load should have caused a rescale"
    );
    for plan in &plans {
        let ps: Vec<u32> = chain.iter().map(|id| plan.parallelism[id]).collect();
        assert!(
            ps.windows(2).all(|w| w[0] == w[1]),
            "plan splits the forward chain: {ps:?}"
        );
    }
    for tick in &h.ticks {
        let ps: Vec<u32> = chain.iter().map(|id| tick.parallelism[id]).collect();
        assert!(
            ps.windows(2).all(|w| w[0] == w[1]),
            "at {} ms the chain ran at {ps:?}",
            tick.now_ms
        );
    }
    let final_p = h.control.parallelism(&job);
    eprintln!(
        "plans: {:?}\nfinal: {final_p:?}",
        plans.iter().map(|p| &p.parallelism).collect::<Vec<_>>()
    );
    let peak = plans
        .iter()
        .map(|p| p.parallelism[&chain[1]])
        .max()
        .unwrap_or(0);
    assert!(
        peak > 2,
        "the CPU-heavy map must have grown under 4x load: {plans:?}"
    );
    h.shutdown().await;
}
