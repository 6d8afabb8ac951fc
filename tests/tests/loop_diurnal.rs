//! Diurnal days on the default autoscaler settings: a 24-hour curve (2,000 to 20,000
//! records/s, 5 % noise), three simulated days. Day 1 learns the load profile, day 2 is
//! scored against it, from day 3 the forecast is trusted: the loop scales up ahead of the
//! rise and holds through the peak. Lag never exceeds catch-up.duration's worth of input,
//! the job runs below a static job sized for its peak, and the day after the profile is
//! learned takes at most 4 rescales with at most 60 s of lag. The full tables (0.45 versus
//! 0.7, prediction on and off, against the best plan) come from `flink-autoscale-whatif`
//! (BENCHMARKS.md).

use std::time::Duration;

use flink_autoscale_tests::convergence::{diurnal_days, markdown_table, CATCH_UP_S};

/// An agent setting, not an autoscaler one: one poll per simulated minute keeps a day fast.
const POLL: Duration = Duration::from_secs(60);

/// The budget once the profile is learned.
const MAX_RESCALES_PER_DAY: usize = 4;
const MAX_LAG_S: f64 = 60.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diurnal_days_keep_lag_bounded_and_rescale_at_most_four_times_a_day_once_learned() {
    let days = diurnal_days("0.7", 3, POLL, "").await;
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
            day.saving() > 0.1,
            "day {}: average parallelism {:.2} vs {} for a static peak-sized job",
            day.day,
            day.avg_parallelism,
            day.peak_sized_parallelism
        );
    }
    let learned = &days[2];
    assert!(
        learned.rescales <= MAX_RESCALES_PER_DAY && learned.max_lag_s <= MAX_LAG_S,
        "day 3: {} rescales (budget {MAX_RESCALES_PER_DAY}), lag {:.0} s: {:?}",
        learned.rescales,
        learned.max_lag_s,
        learned.parallelism_changes
    );
}
