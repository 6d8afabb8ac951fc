//! Jittered exponential backoff, the one formula behind every retry: a failing poll, a
//! coordinator that does not answer.

/// The delay before retry `attempt` (0 for the first): the exponential step
/// `initial_ms × 2^attempt`, capped at `max_ms`, drawn from its upper half ("equal jitter"), so
/// failing callers spread out instead of retrying in step. `jitter` is a uniform draw from
/// `[0, 1)`.
pub fn equal_jitter_ms(initial_ms: u64, max_ms: u64, attempt: u32, jitter: f64) -> u64 {
    let step = initial_ms
        .saturating_mul(1u64 << attempt.min(30))
        .min(max_ms.max(initial_ms));
    let half = step / 2;
    half.saturating_add(((step - half) as f64 * jitter.clamp(0.0, 1.0)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_stays_in_the_upper_half() {
        let d: Vec<u64> = (0..6)
            .map(|a| equal_jitter_ms(1000, 8000, a, 0.0))
            .collect();
        assert_eq!(d, [500, 1000, 2000, 4000, 4000, 4000]);
        let d: Vec<u64> = (0..6)
            .map(|a| equal_jitter_ms(1000, 8000, a, 0.5))
            .collect();
        assert_eq!(d, [750, 1500, 3000, 6000, 6000, 6000]);
        let d: Vec<u64> = (0..5)
            .map(|a| equal_jitter_ms(1000, 8000, a, 1.0))
            .collect();
        assert_eq!(d, [1000, 2000, 4000, 8000, 8000]);
        // A cap below the first step does not shrink it; huge attempts do not overflow.
        assert_eq!(equal_jitter_ms(1000, 10, 0, 0.0), 500);
        assert_eq!(equal_jitter_ms(u64::MAX / 2, u64::MAX, 1000, 1.0), u64::MAX);
        // Out-of-range jitter is clamped.
        assert_eq!(equal_jitter_ms(1000, 8000, 0, 7.0), 1000);
        assert_eq!(equal_jitter_ms(1000, 8000, 0, -1.0), 500);
    }
}
