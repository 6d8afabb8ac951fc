//! Source input rate over simulated time (records per second arriving at a source).

use std::f64::consts::PI;

use crate::ids::unit_hash;

/// How a source's input rate evolves. Time is seconds since the simulation started.
#[derive(Debug, Clone, PartialEq)]
pub enum RateProfile {
    /// A fixed rate.
    Constant(f64),
    /// Piecewise constant: `(from_second, rate)`, sorted by time; before the first step the
    /// first rate applies.
    Steps(Vec<(f64, f64)>),
    /// A daily curve between `min` and `max` peaking at `peak_at_s` (mod `period_s`), with
    /// multiplicative noise of relative amplitude `noise` that changes every `noise_interval_s`.
    Diurnal {
        min: f64,
        max: f64,
        period_s: f64,
        peak_at_s: f64,
        noise: f64,
        noise_interval_s: f64,
        seed: u64,
    },
    /// A diurnal curve (period one day) scaled by a factor per day of the week, `days[0]`
    /// for the first simulated day; the factor changes smoothly over the two hours either
    /// side of midnight.
    Weekly {
        daily: Box<RateProfile>,
        days: [f64; 7],
    },
    /// A recorded trace of `(second, rate)` points, linearly interpolated; after the last
    /// point it either repeats from the start or holds the last rate.
    Trace {
        points: Vec<(f64, f64)>,
        repeat: bool,
    },
}

impl RateProfile {
    /// The input rate at `t_s` seconds (never negative).
    pub fn rate_at(&self, t_s: f64) -> f64 {
        let r = match self {
            RateProfile::Constant(r) => *r,
            RateProfile::Steps(steps) => {
                let mut r = steps.first().map(|s| s.1).unwrap_or(0.0);
                for &(at, rate) in steps {
                    if at <= t_s {
                        r = rate;
                    } else {
                        break;
                    }
                }
                r
            }
            RateProfile::Diurnal {
                min,
                max,
                period_s,
                peak_at_s,
                noise,
                noise_interval_s,
                seed,
            } => {
                let phase = 2.0 * PI * (t_s - peak_at_s) / period_s;
                let base = min + (max - min) * (1.0 + phase.cos()) / 2.0;
                base * (1.0 + noise * smooth_noise(*seed, t_s / noise_interval_s))
            }
            RateProfile::Weekly { daily, days } => daily.rate_at(t_s) * day_factor(days, t_s),
            RateProfile::Trace { points, repeat } => trace_at(points, *repeat, t_s),
        };
        r.max(0.0)
    }

    /// The next time after `t_s` at which the rate jumps, so integration can stop there.
    pub fn next_jump_after(&self, t_s: f64) -> Option<f64> {
        match self {
            RateProfile::Steps(steps) => steps.iter().map(|s| s.0).find(|&at| at > t_s),
            _ => None,
        }
    }
}

/// The day-of-week factor at `t_s`, blended linearly over 2 h either side of midnight.
fn day_factor(days: &[f64; 7], t_s: f64) -> f64 {
    const DAY: f64 = 86_400.0;
    const BLEND: f64 = 7_200.0;
    let day = (t_s / DAY).floor();
    let into = t_s - day * DAY;
    let at = |d: f64| days[(d.rem_euclid(7.0)) as usize];
    if into < BLEND {
        let w = 0.5 + into / (2.0 * BLEND);
        at(day - 1.0) * (1.0 - w) + at(day) * w
    } else if into > DAY - BLEND {
        let w = 0.5 - (DAY - into) / (2.0 * BLEND);
        at(day) * (1.0 - w) + at(day + 1.0) * w
    } else {
        at(day)
    }
}

/// Noise in [-1, 1], linearly interpolated between deterministic knots so the curve is
/// continuous (a real load never jumps between two samples).
fn smooth_noise(seed: u64, x: f64) -> f64 {
    let k = x.floor();
    let frac = x - k;
    let knot = |i: f64| unit_hash(seed, i as i64 as u64, 0x5eed) * 2.0 - 1.0;
    knot(k) * (1.0 - frac) + knot(k + 1.0) * frac
}

fn trace_at(points: &[(f64, f64)], repeat: bool, t_s: f64) -> f64 {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return 0.0;
    };
    let span = last.0 - first.0;
    let mut t = t_s;
    if t > last.0 {
        if repeat && span > 0.0 {
            t = first.0 + (t - first.0).rem_euclid(span);
        } else {
            return last.1;
        }
    }
    if t <= first.0 {
        return first.1;
    }
    let idx = points.partition_point(|p| p.0 <= t);
    let (a, b) = (points[idx - 1], points[idx.min(points.len() - 1)]);
    if b.0 <= a.0 {
        return a.1;
    }
    a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_jumps() {
        let p = RateProfile::Steps(vec![(0.0, 100.0), (60.0, 500.0)]);
        assert_eq!(p.rate_at(10.0), 100.0);
        assert_eq!(p.rate_at(60.0), 500.0);
        assert_eq!(p.next_jump_after(10.0), Some(60.0));
        assert_eq!(p.next_jump_after(60.0), None);
    }

    #[test]
    fn diurnal_peaks_where_asked() {
        let p = RateProfile::Diurnal {
            min: 100.0,
            max: 1000.0,
            period_s: 86_400.0,
            peak_at_s: 43_200.0,
            noise: 0.0,
            noise_interval_s: 60.0,
            seed: 1,
        };
        assert!((p.rate_at(43_200.0) - 1000.0).abs() < 1e-9);
        assert!((p.rate_at(0.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn weekly_scales_days_and_blends_at_midnight() {
        let p = RateProfile::Weekly {
            daily: Box::new(RateProfile::Constant(100.0)),
            days: [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5],
        };
        assert_eq!(p.rate_at(3.0 * 86_400.0 + 43_200.0), 100.0);
        assert_eq!(p.rate_at(5.0 * 86_400.0 + 43_200.0), 50.0);
        // Midnight between Friday and Saturday: halfway.
        assert!((p.rate_at(5.0 * 86_400.0) - 75.0).abs() < 1e-9);
        // A week later it repeats.
        assert_eq!(p.rate_at(12.0 * 86_400.0 + 43_200.0), 50.0);
    }

    #[test]
    fn trace_interpolates_and_repeats() {
        let p = RateProfile::Trace {
            points: vec![(0.0, 0.0), (10.0, 100.0)],
            repeat: true,
        };
        assert!((p.rate_at(5.0) - 50.0).abs() < 1e-9);
        assert!((p.rate_at(15.0) - 50.0).abs() < 1e-9);
        let hold = RateProfile::Trace {
            points: vec![(0.0, 0.0), (10.0, 100.0)],
            repeat: false,
        };
        assert_eq!(hold.rate_at(50.0), 100.0);
    }
}
