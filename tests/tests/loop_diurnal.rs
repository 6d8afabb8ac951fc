//! Diurnal days on the default autoscaler settings: a 24-hour curve (2,000 to 20,000
//! records/s, 5 % noise), two simulated days. Lag never exceeds catch-up.duration's worth of
//! input, the job runs on average below a static job sized for the peak (the saving,
//! printed), and the steady-state day takes at most 6 rescales. The 0.45 versus 0.7 table
//! comes from `cargo run --release -p flink-autoscale-tests --bin bench_convergence`
//! (BENCHMARKS.md).

use std::time::Duration;

use flink_autoscale_tests::convergence::{diurnal_days, markdown_table, CATCH_UP_S};

/// An agent setting, not an autoscaler one: one poll per simulated minute keeps a day fast.
const POLL: Duration = Duration::from_secs(60);

/// The budget of rescales per simulated day on the default settings.
const MAX_RESCALES_PER_DAY: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diurnal_days_keep_lag_bounded_save_parallelism_and_rescale_at_most_six_times_a_day() {
    let days = diurnal_days("0.7", 2, POLL, "").await;
    println!("{}", markdown_table(&days));
    for day in &days {
        println!("day {}: rescales {:?}", day.day, day.parallelism_changes);
        assert!(
            day.rescales >= 1,
            "day {}: the curve must cause rescales",
            day.day
        );
        assert!(
            day.max_lag_s <= CATCH_UP_S,
            "day {}: lag reached {:.0} s of input, more than catch-up.duration ({CATCH_UP_S} s)",
            day.day,
            day.max_lag_s
        );
        assert!(
            day.saving() > 0.2,
            "day {}: average parallelism {:.2} vs {} for a static peak-sized job",
            day.day,
            day.avg_parallelism,
            day.peak_sized_parallelism
        );
    }
    // Day 1 also converges from the scenario's initial sizing; day 2 is the steady state.
    let steady = &days[1];
    assert!(
        steady.rescales <= MAX_RESCALES_PER_DAY,
        "{} rescales on the steady-state day (budget {MAX_RESCALES_PER_DAY}): {:?}",
        steady.rescales,
        steady.parallelism_changes
    );
}
