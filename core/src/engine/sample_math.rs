//! Window primitives (reference 4.1): a counter's rate from the first and last valid
//! samples, and the mean of a gauge with upstream's handling of NaN and infinity.

/// Per-second rate of a counter: `1000 * (last - first) / max(1, t_last - t_first)` over the
/// first and last samples where it is not NaN; NaN with fewer than two such samples.
pub fn rate(points: impl DoubleEndedIterator<Item = (u64, f64)> + Clone) -> f64 {
    let mut valid = points.filter(|(_, v)| !v.is_nan());
    let (Some(first), Some(last)) = (valid.clone().next(), valid.next_back()) else {
        return f64::NAN;
    };
    if first.0 == last.0 {
        return f64::NAN;
    }
    1000.0 * (last.1 - first.1) / (last.0.saturating_sub(first.0)).max(1) as f64
}

/// Mean of the finite values. With no finite value: +Infinity if an infinite value was
/// seen, else NaN. With fewer than `min_count` finite values: NaN.
pub fn average(values: impl Iterator<Item = f64>, min_count: u32) -> f64 {
    let mut sum = 0.0;
    let mut finite = 0u32;
    let mut infinite = false;
    for v in values {
        if v.is_nan() {
            continue;
        }
        if v.is_infinite() {
            infinite = true;
        } else {
            sum += v;
            finite += 1;
        }
    }
    if finite == 0 {
        return if infinite { f64::INFINITY } else { f64::NAN };
    }
    if finite < min_count {
        return f64::NAN;
    }
    sum / f64::from(finite)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAN: f64 = f64::NAN;
    const INF: f64 = f64::INFINITY;

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b
    }

    #[test]
    fn rates_use_first_and_last_valid_samples() {
        let cases: [(&[(u64, f64)], f64); 6] = [
            (&[(0, 0.0), (1000, 10.0), (2000, 40.0)], 20.0),
            (&[(0, NAN), (1000, 10.0), (3000, 50.0), (4000, NAN)], 20.0),
            (&[(0, 5.0)], NAN),
            (&[(0, NAN), (1000, NAN)], NAN),
            (&[(0, 100.0), (2000, 50.0)], -25.0),
            (&[], NAN),
        ];
        for (points, expected) in cases {
            let got = rate(points.iter().copied());
            assert!(
                same(got, expected),
                "{points:?}: got {got}, expected {expected}"
            );
        }
    }

    #[test]
    fn averages_skip_nan_and_count_infinity_apart() {
        let cases: [(&[f64], u32, f64); 6] = [
            (&[1.0, 2.0, 3.0], 1, 2.0),
            (&[1.0, NAN, 3.0], 1, 2.0),
            (&[1.0, INF, 3.0], 1, 2.0),
            (&[INF, NAN], 1, INF),
            (&[NAN], 1, NAN),
            (&[1.0, INF], 2, NAN),
        ];
        for (values, min, expected) in cases {
            let got = average(values.iter().copied(), min);
            assert!(
                same(got, expected),
                "{values:?} min {min}: got {got}, expected {expected}"
            );
        }
    }
}
