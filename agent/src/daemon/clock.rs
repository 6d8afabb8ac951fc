//! Time as the daemon sees it. Production uses the system clock; closed-loop tests use a
//! manual clock they advance, so hours of simulated time run in seconds. Request timeouts
//! stay on real time either way: they protect the process, not the algorithm.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The daemon's source of "now" and of waiting.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// Resolves once `d` has passed on this clock.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}

/// The system clock with tokio timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A clock that moves only when told to; sleepers wake when it passes their deadline.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<u64>,
}

impl ManualClock {
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(ManualClock {
            now: watch::Sender::new(start_ms),
        })
    }

    /// Moves the clock forward by `d`, waking every sleeper whose deadline passed.
    pub fn advance(&self, d: Duration) {
        let step = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.now.send_modify(|t| *t = t.saturating_add(step));
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        *self.now.borrow()
    }
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        let mut rx = self.now.subscribe();
        let deadline = self
            .now_ms()
            .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Box::pin(async move {
            // If the clock is dropped the sender closes; stop waiting then.
            let _ = rx.wait_for(|t| *t >= deadline).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_wakes_sleepers_when_advanced() {
        let clock = ManualClock::new(1_000);
        let sleeper = tokio::spawn(clock.sleep(Duration::from_secs(10)));
        clock.advance(Duration::from_secs(5));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(5));
        tokio::time::timeout(Duration::from_secs(2), sleeper)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(clock.now_ms(), 11_000);
    }
}
