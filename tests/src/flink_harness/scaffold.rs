//! Scaffolding shared by the real-Flink test files: unwrap a harness result with a message
//! (the panic happens while the cluster is still owned, so its run folder is kept), and bound
//! a whole scenario's time, one scenario at a time.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::HarnessError;

/// The value, or a panic (located at the caller) that says what failed and why.
#[track_caller]
pub fn must<T>(what: &str, result: Result<T, HarnessError>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// How many scenarios of one test binary may run at once. A file runs its scenario on each
/// version of the matrix as separate tests, which libtest starts in parallel; on a 2-core
/// machine two clusters at once slow each other into timeouts, so by default they take turns.
/// Env `FLINK_HARNESS_PARALLEL` raises it.
fn turns() -> &'static Semaphore {
    static TURNS: OnceLock<Semaphore> = OnceLock::new();
    TURNS.get_or_init(|| {
        let parallel = std::env::var("FLINK_HARNESS_PARALLEL")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(1);
        Semaphore::new(parallel)
    })
}

/// Runs `scenario` once it is this test's turn (see [`turns`]) and panics if it then takes
/// longer than `budget`. On timeout the scenario's future is dropped, and with it any
/// cluster it owns: Drop stops every JVM.
pub async fn within(budget: Duration, name: &str, scenario: impl Future<Output = ()>) {
    let waited = Instant::now();
    let _turn = turns()
        .acquire()
        .await
        .expect("the semaphore is never closed");
    if waited.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "[timing] waited {:.1} s for another scenario of this file to finish",
            waited.elapsed().as_secs_f64()
        );
    }
    bounded(budget, name, scenario).await;
}

/// Like [`within`], without taking turns: for a file whose scenarios mostly wait (a load job
/// that sleeps per record, windows to fill), measured to pass two clusters at once on this
/// 2-core machine (`real_flink_autoscale`: 2.3.0 and 1.20.5 side by side, 309 s for both).
pub async fn alongside(budget: Duration, name: &str, scenario: impl Future<Output = ()>) {
    bounded(budget, name, scenario).await;
}

async fn bounded(budget: Duration, name: &str, scenario: impl Future<Output = ()>) {
    let started = Instant::now();
    if tokio::time::timeout(budget, scenario).await.is_err() {
        panic!("{name} did not finish within {budget:?}");
    }
    eprintln!(
        "[timing] whole test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
