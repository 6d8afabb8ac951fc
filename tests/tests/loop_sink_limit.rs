//! Sink limit: the sink's external system takes at most 3,000 records/s whatever its
//! parallelism, under 4,000 records/s of input. The loop must not scale anything up past what
//! the sink can take, and the reason (the sink limit) is visible in the decision.

use std::time::Duration;

use flink_autoscale_agent::control::LoopEvent;
use flink_autoscale_core::engine::Limit;
use flink_autoscale_tests::lockstep::local_harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_scale_up_past_a_limited_sink_and_the_reason_is_visible() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = local_harness("sink-limited.toml", dir.path(), "").await;
    let job = h.job_ids()[0].clone();
    let ids = h.control.vertex_ids(&job);
    let sink = ids.last().expect("sink").clone();
    let before = h.control.parallelism(&job);
    h.run_for(Duration::from_secs(3 * 3600)).await;
    let after = h.control.parallelism(&job);

    let mut sink_limited = false;
    let mut sink_scale_ups = 0;
    for (t, e) in &h.log {
        match e {
            LoopEvent::Evaluated { decision, .. } => {
                sink_limited |= decision
                    .vertices
                    .iter()
                    .any(|v| v.limited_by.contains(&Limit::SinkLimit) && v.reason.contains("sink"));
            }
            LoopEvent::Actuating { plan, .. } => {
                eprintln!("{t}: {:?}", plan.parallelism);
                let now = plan.parallelism[&sink];
                if now > before[&sink] {
                    sink_scale_ups += 1;
                }
            }
            _ => {}
        }
    }
    eprintln!("before {before:?}\nafter {after:?}");
    assert!(
        sink_limited,
        "some decision must name the sink limit as the reason"
    );
    // Detection may need one scale-up of the sink to see that it does not help; never more.
    assert!(
        sink_scale_ups <= 1,
        "the sink was scaled up {sink_scale_ups} times"
    );
    // Nothing upstream of the sink grows: the sink cannot absorb more.
    for id in ids.iter().filter(|id| **id != sink) {
        assert!(
            after[id] <= before[id],
            "vertex {id} grew from {} to {} into a limited sink",
            before[id],
            after[id]
        );
    }
    h.shutdown().await;
}
