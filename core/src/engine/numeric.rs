//! Numeric helpers with Java semantics, so the engine computes exactly what the Flink
//! Autoscaler computes on the same evidence.

/// Java's `Math.max`: NaN if either argument is NaN (Rust's `f64::max` drops the NaN).
pub fn java_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Java's `Math.min`: NaN if either argument is NaN.
pub fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Java's `Math.round(double)` as a double: halves go up, NaN becomes 0 and the result
/// saturates at the `long` range (so `+Infinity` becomes about 9.22e18).
pub fn round_half_up(x: f64) -> f64 {
    const LONG_MAX: f64 = 9_223_372_036_854_775_807.0;
    const LONG_MIN: f64 = -9_223_372_036_854_775_808.0;
    if x.is_nan() {
        return 0.0;
    }
    if x >= LONG_MAX {
        return LONG_MAX;
    }
    if x <= LONG_MIN {
        return LONG_MIN;
    }
    let floor = x.floor();
    // `x - floor` is exact here, unlike `x + 0.5`, which can round up 0.49999999999999994.
    if x - floor >= 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

/// Apache Commons `Precision.round(x, 3)`: HALF_UP rounding of the shortest decimal form of
/// `x` to 3 fractional digits. A result of 0 keeps the original value, and NaN and
/// infinities pass through.
pub fn round3(x: f64) -> f64 {
    let rounded =
        round3_arithmetic(x).unwrap_or_else(|| round_decimal(x, 3, DecimalRounding::HalfUp));
    if rounded == 0.0 {
        x
    } else {
        rounded
    }
}

/// The common case of [`round3`] without decimal formatting, which dominated evaluation
/// time. It answers only where float arithmetic provably agrees with decimal rounding: the
/// scaled value is far below 2^53 and not within 1e-3 of a tie, so its float error (about
/// one ulp, at most 2.4e-4 below 1e12) cannot change the rounding direction. Ties and huge
/// values go the decimal way.
fn round3_arithmetic(x: f64) -> Option<f64> {
    if !x.is_finite() {
        return Some(x);
    }
    let scaled = (x * 1000.0).abs();
    if scaled >= 1e12 {
        return None;
    }
    let whole = scaled.floor();
    let fraction = scaled - whole;
    if (fraction - 0.5).abs() <= 1e-3 {
        return None;
    }
    let thousandths = if fraction > 0.5 { whole + 1.0 } else { whole };
    // An integer below 2^53 divided by 1000 is correctly rounded, like parsing "Ne-3".
    Some((thousandths / 1000.0).copysign(x))
}

/// Rounds up (towards +infinity) to two decimals, as upstream rounds the observed
/// scalability coefficient (`BigDecimal` CEILING on the shortest decimal form).
pub fn ceil2(x: f64) -> f64 {
    round_decimal(x, 2, DecimalRounding::Ceiling)
}

#[derive(Clone, Copy)]
enum DecimalRounding {
    HalfUp,
    Ceiling,
}

/// Rounds the shortest decimal representation of `x` (what Java's `Double.toString` and
/// Rust's `{:e}` print) to `places` fractional digits, like `BigDecimal.setScale`.
fn round_decimal(x: f64, places: i64, mode: DecimalRounding) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let text = format!("{:e}", x.abs());
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return x;
    };
    let Ok(exponent) = exponent.parse::<i64>() else {
        return x;
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    // Number of significant digits that stay: those before the point plus `places` after it.
    let keep = exponent + 1 + places;
    if keep >= digits.len() as i64 {
        return x;
    }
    let keep = keep.max(0) as usize;
    let dropped = &digits[keep..];
    let mut kept: u64 = digits[..keep]
        .iter()
        .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    let away_from_zero = match mode {
        // Only a dropped part of at least one half rounds up; if `keep` fell below zero the
        // leading dropped digit is an implicit 0.
        DecimalRounding::HalfUp => exponent + 1 + places >= 0 && dropped[0] >= b'5',
        DecimalRounding::Ceiling => x > 0.0 && dropped.iter().any(|d| *d != b'0'),
    };
    if away_from_zero {
        kept += 1;
    }
    let rounded: f64 = format!("{kept}e-{places}").parse().unwrap_or(x.abs());
    rounded.copysign(x)
}

/// `(int) Math.min(Math.ceil(x), Integer.MAX_VALUE)`: NaN becomes 0, out-of-range values
/// saturate.
pub fn ceil_to_i32(x: f64) -> i32 {
    java_min(x.ceil(), f64::from(i32::MAX)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_max_and_min_keep_nan() {
        assert!(java_max(0.0, f64::NAN).is_nan());
        assert!(java_max(f64::NAN, 0.0).is_nan());
        assert!(java_min(1.0, f64::NAN).is_nan());
        assert_eq!(java_max(0.0, -3.0), 0.0);
        assert_eq!(java_min(2.0, 3.0), 2.0);
    }

    #[test]
    fn round_half_up_matches_java_math_round() {
        let cases = [
            (62.5, 63.0),
            (102.5, 103.0),
            (0.49999999999999994, 0.0),
            (1127.7777, 1128.0),
            (-2.5, -2.0),
            (f64::NAN, 0.0),
            (f64::INFINITY, 9_223_372_036_854_775_807.0),
        ];
        for (input, expected) in cases {
            assert_eq!(round_half_up(input), expected, "round_half_up({input})");
        }
    }

    #[test]
    fn round3_is_half_up_on_the_shortest_decimal() {
        let cases = [
            (500.0 / 0.85, 588.235),
            (0.0005, 0.001),
            (0.0004, 0.0004), // rounds to 0, so the original is kept
            (1.0005, 1.001),
            (2.675, 2.675),
            (1.23456, 1.235),
            (-1.2345, -1.235),
            (12345678.9, 12345678.9),
            (1e20, 1e20),
            (1e-10, 1e-10),
            (0.1 + 0.2, 0.3),
        ];
        for (input, expected) in cases {
            assert_eq!(round3(input), expected, "round3({input})");
        }
        assert!(round3(f64::NAN).is_nan());
        assert_eq!(round3(f64::INFINITY), f64::INFINITY);
        assert_eq!(round3(f64::NEG_INFINITY), f64::NEG_INFINITY);
    }

    #[test]
    fn ceil_to_i32_saturates_and_maps_nan_to_zero() {
        assert_eq!(ceil_to_i32(4.1), 5);
        assert_eq!(ceil_to_i32(f64::NAN), 0);
        assert_eq!(ceil_to_i32(1e20), i32::MAX);
        assert_eq!(ceil_to_i32(f64::INFINITY), i32::MAX);
    }

    #[test]
    fn ceil2_rounds_up() {
        assert_eq!(ceil2(0.731), 0.74);
        assert_eq!(ceil2(0.5), 0.5);
        assert_eq!(ceil2(0.07), 0.07);
        assert_eq!(ceil2(0.0001), 0.01);
    }

    use proptest::prelude::*;

    proptest! {
        /// The arithmetic shortcut agrees with decimal HALF_UP rounding wherever it answers.
        #[test]
        fn round3_shortcut_matches_decimal_rounding(
            mantissa in -1.0e6f64..1.0e6,
            exponent in -8i32..7,
            thousandths in -1_000_000_000i64..1_000_000_000,
            nudge in -3i64..4,
        ) {
            let arbitrary = mantissa * 10f64.powi(exponent);
            // Values at or next to exact thousandths and ties, where errors would show.
            let near_grid = (thousandths as f64 + 0.5 * (nudge % 2) as f64) / 1000.0
                + nudge as f64 * f64::EPSILON;
            for x in [arbitrary, near_grid] {
                if let Some(fast) = round3_arithmetic(x) {
                    let slow = round_decimal(x, 3, DecimalRounding::HalfUp);
                    prop_assert_eq!(fast.to_bits(), slow.to_bits(), "x = {:e}", x);
                }
            }
        }
    }
}
