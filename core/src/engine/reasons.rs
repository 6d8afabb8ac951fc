//! Human-readable reasons: one sentence per vertex that an operator can act on.

use std::fmt::Write;

use super::model::Limit;
use super::thresholds::{Band, Rates};

impl Limit {
    /// What the limit did, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::MaxFactor => "max factor (scale-up.max-factor / scale-down.max-factor)",
            Limit::Bounds => "parallelism bounds (vertex.min-parallelism, vertex.max-parallelism, max parallelism)",
            Limit::Alignment => "key-group/partition alignment",
            Limit::SourcePartitions => "source partitions/splits (no more subtasks than it can read from)",
            Limit::DelayedScaleDown => "delayed scale-down (scale-down.interval)",
            Limit::IneffectiveScaling => "ineffective previous scale-up (scaling.effectiveness.detection.enabled)",
            Limit::ObservedScalability => "observed scalability (observed-scalability.enabled)",
            Limit::ScaleDownCaution => "scale-down caution: backlog or incomplete window",
            Limit::ScaleDownCost => "scale-down caution: it saves less than the rescale costs",
            Limit::Forecast => "forecast (flink-autoscale.prediction.*)",
            Limit::SinkLimit => "sink limit",
            Limit::ForwardGroup => "forward-connected group",
            Limit::BandGate => "band gate: no changed vertex is outside its utilization band",
            Limit::Excluded => "excluded (vertex.exclude.ids or missing metrics)",
            Limit::MissingMetrics => "missing metrics (NaN rate)",
            Limit::ScalingDisabled => "scaling disabled (enabled, scaling.enabled or excluded.periods)",
        }
    }
}

/// Everything a reason mentions.
pub struct ReasonFacts<'a> {
    pub name: &'a str,
    pub current: u32,
    pub recommended: u32,
    pub applied: u32,
    pub rates: &'a Rates,
    pub band: &'a Band,
    pub outside_band: bool,
    pub limits: &'a [Limit],
    /// The limiting sink's name and capacity, when a sink limit applied.
    pub sink: Option<(&'a str, f64)>,
    /// Extra sentences (prediction, the cost-aware scale-down), appended in order.
    pub notes: &'a [String],
    pub ineffective_scale_up: bool,
}

pub fn reason(f: &ReasonFacts) -> String {
    let mut s = String::with_capacity(256);
    let _ = write!(s, "{}: {} -> {}", f.name, f.current, f.applied);
    if f.recommended != f.applied {
        let _ = write!(s, " (vertex recommendation {})", f.recommended);
    }
    s.push_str("; true processing rate ");
    push_rate(&mut s, f.rates.true_processing_rate);
    s.push_str(" rec/s, target rate ");
    push_rate(&mut s, f.rates.target_data_rate);
    if f.rates.catch_up_data_rate != 0.0 {
        s.push_str(" + catch-up ");
        push_rate(&mut s, f.rates.catch_up_data_rate);
    }
    s.push_str(" rec/s; band ");
    push_rate(&mut s, f.band.scale_up_rate_threshold);
    s.push_str("..");
    push_rate(&mut s, f.band.scale_down_rate_threshold);
    s.push_str(if f.outside_band {
        " rec/s (outside)"
    } else {
        " rec/s (within)"
    });
    if f.ineffective_scale_up {
        s.push_str("; the previous scale-up was ineffective");
    }
    if !f.limits.is_empty() {
        s.push_str("; limited by ");
        for (i, limit) in f.limits.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(limit.describe());
            if let (Limit::SinkLimit, Some((sink, capacity))) = (limit, f.sink) {
                let _ = write!(s, " (`{sink}` absorbs at most ");
                push_rate(&mut s, capacity);
                s.push_str(" rec/s)");
            }
        }
    }
    for note in f.notes {
        s.push_str("; ");
        s.push_str(note);
    }
    s
}

/// Rates as Flink prints them for NaN and infinities, otherwise with at most 3 decimals
/// (rounded half away from zero). Integer arithmetic keeps this cheap: exact float
/// formatting with a precision dominated the cost of a decision.
fn push_rate(s: &mut String, x: f64) {
    if x.is_nan() {
        s.push_str("NaN");
    } else if x.is_infinite() {
        s.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
    } else if x.abs() >= 1e12 {
        let _ = write!(s, "{x:e}");
    } else {
        let thousandths = (x.abs() * 1000.0).round() as u64;
        if x < 0.0 && thousandths > 0 {
            s.push('-');
        }
        let _ = write!(s, "{}", thousandths / 1000);
        let mut fraction = thousandths % 1000;
        if fraction > 0 {
            let mut digits = 3;
            while fraction.is_multiple_of(10) {
                fraction /= 10;
                digits -= 1;
            }
            let _ = write!(s, ".{fraction:0digits$}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_rates_band_and_limits() {
        let rates = Rates {
            true_processing_rate: 588.2352941,
            target_data_rate: 50.0,
            catch_up_data_rate: 0.0,
        };
        let band = Band {
            scale_up_rate_threshold: 50.0,
            scale_down_rate_threshold: f64::INFINITY,
        };
        let text = reason(&ReasonFacts {
            name: "Map",
            current: 10,
            recommended: 4,
            applied: 6,
            rates: &rates,
            band: &band,
            outside_band: true,
            limits: &[Limit::MaxFactor, Limit::SinkLimit],
            sink: Some(("Sink", 1234.05)),
            notes: &[],
            ineffective_scale_up: false,
        });
        assert_eq!(
            text,
            "Map: 10 -> 6 (vertex recommendation 4); true processing rate 588.235 rec/s, target rate 50 rec/s; \
             band 50..Infinity rec/s (outside); limited by max factor (scale-up.max-factor / scale-down.max-factor), \
             sink limit (`Sink` absorbs at most 1234.05 rec/s)"
        );
    }

    #[test]
    fn rates_print_compactly() {
        let cases = [
            (0.0, "0"),
            (1500.0, "1500"),
            (0.1, "0.1"),
            (2.0005, "2.001"),
            (-3.25, "-3.25"),
            (-0.0001, "0"),
            (1e13, "1e13"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, expected) in cases {
            let mut s = String::new();
            push_rate(&mut s, x);
            assert_eq!(s, expected, "{x}");
        }
    }
}
