//! Diurnal day on the default autoscaler settings: a 24-hour curve (2,000 to 20,000
//! records/s, 5 % noise). Lag never exceeds catch-up.duration's worth of input, and the job
//! runs on average below a static job sized for the peak (the saving, printed). The 0.45
//! versus 0.7 table comes from `cargo run --release -p flink-autoscale-tests --bin
//! bench_convergence` (docs/bench-convergence.md).

use std::time::Duration;

use flink_autoscale_tests::convergence::{diurnal_days, markdown_table, CATCH_UP_S};

/// An agent setting, not an autoscaler one: one poll per simulated minute keeps a day fast.
const POLL: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diurnal_day_keeps_lag_bounded_and_saves_parallelism() {
    let days = diurnal_days("0.7", 1, POLL, "").await;
    let day = &days[0];
    println!("{}", markdown_table(&days));
    println!("rescales at hours {:?}", day.rescale_hours);
    assert!(day.rescales >= 1, "the day's curve must cause rescales");
    assert!(
        day.max_lag_s <= CATCH_UP_S,
        "lag reached {:.0} s of input, more than catch-up.duration ({CATCH_UP_S} s)",
        day.max_lag_s
    );
    assert!(
        day.saving() > 0.2,
        "average parallelism {:.2} vs {} for a static peak-sized job",
        day.avg_parallelism,
        day.peak_sized_parallelism
    );
}

/// The target: at most 6 rescales per simulated day on the default settings,
/// measured on the second (steady-state) day. Not met yet with upstream-parity delayed
/// scale-down (8 per day measured; see docs/bench-convergence.md), so it runs on request:
/// `cargo test -p flink-autoscale-tests --test loop_diurnal -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "8 rescales/day measured in steady state; target is 6 (docs/bench-convergence.md)"]
async fn at_most_six_rescales_per_steady_state_day() {
    let days = diurnal_days("0.7", 2, POLL, "").await;
    println!("{}", markdown_table(&days));
    assert!(
        days[1].rescales <= 6,
        "{} rescales on day 2 at hours {:?}",
        days[1].rescales,
        days[1].rescale_hours
    );
}
