//! Part of our extension "scale-down caution": the cost-aware scale-down. Every rescale of a
//! stateful job costs a restart: the job's subtasks stand still for the restart and then
//! work off the backlog. A scale-down on its own (nothing scales up) is worth it when the
//! subtasks it frees, over the time the lower load is expected to last, save more than that.
//! Held back, it is not lost: upstream's delayed scale-down keeps collecting.

use std::fmt::Write;

use super::config::AutoscalerConfig;
use super::model::ObservedRescale;

/// What one rescale costs this job, per subtask.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RescaleCost {
    pub restart_s: f64,
    pub catch_up_s: f64,
    /// Observed on this job; otherwise `restart.time` is assumed.
    pub observed: bool,
}

impl RescaleCost {
    /// The job's observed rescale, or `restart.time` (and no catch-up) until one is seen.
    pub fn of(observed: Option<&ObservedRescale>, config: &AutoscalerConfig) -> RescaleCost {
        match observed {
            Some(o) => RescaleCost {
                restart_s: o.restart_ms as f64 / 1000.0,
                catch_up_s: o.catch_up_ms as f64 / 1000.0,
                observed: true,
            },
            None => RescaleCost {
                restart_s: config.restart_time_ms as f64 / 1000.0,
                catch_up_s: 0.0,
                observed: false,
            },
        }
    }

    /// Subtask-seconds a rescale of a job with `subtasks` subtasks costs.
    pub fn subtask_seconds(&self, subtasks: u32) -> f64 {
        (self.restart_s + self.catch_up_s) * f64::from(subtasks)
    }
}

/// Where the expected duration of the lower load comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Evidence {
    /// The confident forecast needs more again after this long (or not within its range).
    Forecast { within_range: bool },
    /// Without a forecast: the lower load is expected to last as long as it already has.
    History,
}

/// A pure scale-down, weighed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleDownCase {
    /// Subtasks it frees.
    pub freed: u32,
    /// The job's current total parallelism.
    pub total: u32,
    /// How long the lower load is expected to last (s).
    pub expected_s: f64,
    pub evidence: Evidence,
    pub cost: RescaleCost,
    /// How long it has been held already (s).
    pub held_s: f64,
    pub max_hold_s: f64,
}

/// The verdict on a pure scale-down, with the figures that decided it.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighed {
    pub apply: bool,
    pub text: String,
}

impl ScaleDownCase {
    pub fn saving_subtask_s(&self) -> f64 {
        f64::from(self.freed) * self.expected_s
    }

    pub fn cost_subtask_s(&self) -> f64 {
        self.cost.subtask_seconds(self.total)
    }

    /// Apply when the saving exceeds the cost; without a forecast, at the latest after
    /// `max_hold_s` of holding.
    pub fn weigh(&self) -> Weighed {
        let worth = self.saving_subtask_s() >= self.cost_subtask_s();
        let timed_out = self.evidence == Evidence::History && self.held_s >= self.max_hold_s;
        let apply = worth || timed_out;
        let mut text = String::with_capacity(200);
        let _ = write!(
            text,
            "freeing {} of {} subtasks for {} saves {:.2} subtask-hours, {} the rescale's {:.2} (({} s restart + {} s catch-up) x {} subtasks, {})",
            self.freed,
            self.total,
            match self.evidence {
                Evidence::Forecast { within_range: true } =>
                    format!("{} until the forecast needs them again", hours(self.expected_s)),
                Evidence::Forecast { within_range: false } =>
                    format!("at least {} (the forecast's range)", hours(self.expected_s)),
                Evidence::History =>
                    format!("an expected {} (as long as the lower load has lasted)", hours(self.expected_s)),
            },
            self.saving_subtask_s() / 3600.0,
            if worth { "at least" } else { "less than" },
            self.cost_subtask_s() / 3600.0,
            round(self.cost.restart_s),
            round(self.cost.catch_up_s),
            self.total,
            if self.cost.observed { "observed" } else { "restart.time; no rescale observed yet" },
        );
        if !apply {
            if self.evidence == Evidence::History {
                let _ = write!(
                    text,
                    "; held {} of at most {} (scale-down-caution.max-hold)",
                    hours(self.held_s),
                    hours(self.max_hold_s)
                );
            }
        } else if !worth {
            let _ = write!(
                text,
                "; applied after holding it for scale-down-caution.max-hold ({})",
                hours(self.max_hold_s)
            );
        }
        Weighed { apply, text }
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `45 min` or `2.5 h`.
pub fn hours(seconds: f64) -> String {
    if seconds < 5400.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(
        freed: u32,
        total: u32,
        expected_s: f64,
        held_s: f64,
        evidence: Evidence,
    ) -> ScaleDownCase {
        ScaleDownCase {
            freed,
            total,
            expected_s,
            evidence,
            cost: RescaleCost {
                restart_s: 300.0,
                catch_up_s: 0.0,
                observed: false,
            },
            held_s,
            max_hold_s: 6.0 * 3600.0,
        }
    }

    #[test]
    fn applied_when_the_saving_exceeds_the_cost_or_after_max_hold() {
        // The job: 10 -> 4 of 50 subtasks, restart.time 5 min: 6 x t >= 300 x 50
        // once the lower load has lasted 2,500 s.
        let h = Evidence::History;
        // (freed, total, expected, held, evidence, applied)
        let cases = [
            (6, 50, 900.0, 0.0, h, false),
            (6, 50, 2_499.0, 1_599.0, h, false),
            (6, 50, 2_500.0, 1_600.0, h, true),
            // One subtask of 50 would need 4 h 10 min; max-hold 6 h is not reached yet ...
            (1, 50, 14_000.0, 5.0 * 3600.0, h, false),
            // ... and releases it at 6 h, whatever the figures say.
            (1, 50, 100.0, 6.0 * 3600.0, h, true),
            // A forecast is evidence: no max-hold.
            (
                1,
                50,
                3600.0,
                7.0 * 3600.0,
                Evidence::Forecast { within_range: true },
                false,
            ),
            (
                1,
                50,
                24.0 * 3600.0,
                0.0,
                Evidence::Forecast {
                    within_range: false,
                },
                true,
            ),
        ];
        for (i, (freed, total, expected, held, evidence, applied)) in cases.into_iter().enumerate()
        {
            let w = case(freed, total, expected, held, evidence).weigh();
            assert_eq!(w.apply, applied, "case {i}: {}", w.text);
        }
    }

    #[test]
    fn the_reason_names_its_numbers() {
        let w = case(6, 50, 900.0, 0.0, Evidence::History).weigh();
        assert_eq!(
            w.text,
            "freeing 6 of 50 subtasks for an expected 15 min (as long as the lower load has lasted) saves 1.50 subtask-hours, \
             less than the rescale's 4.17 ((300 s restart + 0 s catch-up) x 50 subtasks, restart.time; no rescale observed yet); \
             held 0 min of at most 6.0 h (scale-down-caution.max-hold)"
        );
        let w = case(1, 50, 100.0, 6.0 * 3600.0, Evidence::History).weigh();
        assert!(
            w.text
                .ends_with("applied after holding it for scale-down-caution.max-hold (6.0 h)"),
            "{}",
            w.text
        );
    }

    #[test]
    fn observed_restarts_replace_restart_time() {
        let config = AutoscalerConfig::default();
        let assumed = RescaleCost::of(None, &config);
        assert_eq!(
            (assumed.restart_s, assumed.catch_up_s, assumed.observed),
            (300.0, 0.0, false)
        );
        let seen = RescaleCost::of(
            Some(&ObservedRescale {
                restart_ms: 5_500,
                catch_up_ms: 12_000,
            }),
            &config,
        );
        assert_eq!(seen.subtask_seconds(10), 175.0);
    }
}
