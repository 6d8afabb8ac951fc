//! Jittered exponential backoff for a job whose polls fail (the formula is
//! `flink_autoscale_core::backoff`; this keeps the count of failures in a row).

use std::time::Duration;

/// Doubles from `initial` up to `max`; each delay is drawn from the upper half of the
/// current step ("equal jitter"), so failing jobs spread out instead of retrying in step.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
            attempt: 0,
        }
    }

    /// The next delay; `jitter` is a uniform draw from `[0, 1)`.
    pub fn next_delay(&mut self, jitter: f64) -> Duration {
        let ms = flink_autoscale_core::backoff::equal_jitter_ms(
            self.initial.as_millis() as u64,
            self.max.as_millis() as u64,
            self.attempt,
            jitter,
        );
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_millis(ms)
    }

    /// Back to the initial delay after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Failures in a row.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_jitters() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        let d: Vec<u64> = (0..6)
            .map(|_| b.next_delay(0.5).as_millis() as u64)
            .collect();
        assert_eq!(d, vec![750, 1500, 3000, 6000, 6000, 6000]);
        b.reset();
        assert_eq!(b.next_delay(0.0), Duration::from_millis(500));
        assert_eq!(b.attempts(), 1);
    }
}
