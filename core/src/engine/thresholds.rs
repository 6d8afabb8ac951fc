//! Target capacity and the utilization band (reference 4.5): the processing rate a vertex
//! needs at a given utilization, and the scale-up and scale-down rate thresholds.

use super::config::AutoscalerConfig;
use super::numeric::round_half_up;

/// Figures of one vertex that drive its decision (records per second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub true_processing_rate: f64,
    pub target_data_rate: f64,
    pub catch_up_data_rate: f64,
}

impl Rates {
    /// The same flow scaled by `factor` (a sink limit caps every rate proportionally).
    pub fn scaled_flow(&self, factor: f64) -> Rates {
        Rates {
            true_processing_rate: self.true_processing_rate,
            target_data_rate: self.target_data_rate * factor,
            catch_up_data_rate: self.catch_up_data_rate * factor,
        }
    }
}

/// Processing capacity needed to run at utilization `u`, rounded half-up. With the restart
/// term, the backlog built up during a restart is drained within the catch-up duration.
pub fn capacity(u: f64, with_restart: bool, rates: &Rates, config: &AutoscalerConfig) -> f64 {
    let tdr = rates.target_data_rate;
    let catch_up = rates.catch_up_data_rate;
    if tdr.is_nan() || catch_up.is_nan() {
        return f64::NAN;
    }
    let u = u.clamp(0.0, 1.0);
    if u == 0.0 {
        return f64::INFINITY;
    }
    let catch_up_s = config.catch_up_duration_s();
    let restart = if with_restart && catch_up_s > 0.0 {
        tdr * config.restart_time_s() / catch_up_s
    } else {
        0.0
    };
    round_half_up(catch_up + restart + tdr / u)
}

/// The rates between which a vertex's true processing rate is "within its band".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// Below this TPR the vertex is under-provisioned.
    pub scale_up_rate_threshold: f64,
    /// Above this TPR the vertex is over-provisioned.
    pub scale_down_rate_threshold: f64,
}

impl Band {
    /// Comparisons with NaN are false, so a NaN threshold never makes a vertex outside.
    pub fn is_outside(&self, true_processing_rate: f64) -> bool {
        true_processing_rate < self.scale_up_rate_threshold
            || true_processing_rate > self.scale_down_rate_threshold
    }
}

/// The band of a vertex; while the job processes a backlog it is `[1.0, 0.0]` in utilization,
/// so nothing is over-provisioned.
pub fn band(rates: &Rates, processing_backlog: bool, config: &AutoscalerConfig) -> Band {
    let (u_min, u_max) = if processing_backlog {
        (0.0, 1.0)
    } else {
        config.utilization_band()
    };
    Band {
        scale_up_rate_threshold: capacity(u_max, false, rates, config),
        scale_down_rate_threshold: capacity(u_min, true, rates, config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(
        target: f64,
        min: f64,
        max: f64,
        restart_s: u64,
        catch_up_s: u64,
    ) -> AutoscalerConfig {
        AutoscalerConfig {
            utilization_target: target,
            utilization_min: Some(min),
            utilization_max: Some(max),
            restart_time_ms: restart_s * 1000,
            catch_up_duration_ms: catch_up_s * 1000,
            ..AutoscalerConfig::default()
        }
    }

    fn rates(tdr: f64, catch_up: f64) -> Rates {
        Rates {
            true_processing_rate: 1000.0,
            target_data_rate: tdr,
            catch_up_data_rate: catch_up,
        }
    }

    #[test]
    fn thresholds_follow_the_reference() {
        // (config, tdr, catch-up, backlog, scale-up threshold, scale-down threshold)
        let cases = [
            // Worked example of the reference (section 4.5).
            (
                config(0.8, 0.7, 0.9, 1, 2),
                700.0,
                350.0,
                false,
                1128.0,
                1700.0,
            ),
            // Defaults: band [0.4, 1.0], restart 5 min, catch-up 30 min.
            (
                AutoscalerConfig::default(),
                500.0,
                0.0,
                false,
                500.0,
                1333.0,
            ),
            // Backlog: u_max = 1, u_min = 0 (scale-down threshold infinite).
            (
                AutoscalerConfig::default(),
                500.0,
                0.0,
                true,
                500.0,
                f64::INFINITY,
            ),
            // catch-up 0: no restart term.
            (
                config(0.5, 0.25, 0.75, 60, 0),
                100.0,
                0.0,
                false,
                133.0,
                400.0,
            ),
            // Sub-second durations truncate to 0 s.
            (config(0.5, 0.5, 0.5, 0, 0), 100.0, 0.0, false, 200.0, 200.0),
            // Utilization max above 1 acts as 1 (set directly, bypassing validation).
            (
                config(0.5, 0.0, 1.5, 0, 0),
                100.0,
                0.0,
                false,
                100.0,
                f64::INFINITY,
            ),
            // Half-up rounding of 62.5.
            (config(0.8, 0.8, 0.8, 0, 0), 50.0, 0.0, false, 63.0, 63.0),
        ];
        for (i, (cfg, tdr, catch_up, backlog, up, down)) in cases.into_iter().enumerate() {
            let b = band(&rates(tdr, catch_up), backlog, &cfg);
            assert_eq!(
                b.scale_up_rate_threshold, up,
                "case {i}: scale-up threshold"
            );
            assert_eq!(
                b.scale_down_rate_threshold, down,
                "case {i}: scale-down threshold"
            );
        }
    }

    #[test]
    fn nan_figures_give_nan_thresholds_that_never_count_as_outside() {
        let cfg = AutoscalerConfig::default();
        for (tdr, catch_up) in [(f64::NAN, 0.0), (1.0, f64::NAN)] {
            let b = band(&rates(tdr, catch_up), false, &cfg);
            assert!(b.scale_up_rate_threshold.is_nan() && b.scale_down_rate_threshold.is_nan());
            assert!(!b.is_outside(0.0) && !b.is_outside(1e12));
        }
        let b = band(&rates(100.0, 0.0), false, &cfg);
        assert!(!b.is_outside(f64::NAN));
        assert!(b.is_outside(f64::INFINITY));
    }
}
