//! Scaffolding shared by the real-Flink test files: unwrap a harness result with a message
//! (the panic happens while the cluster is still owned, so its run folder is kept), and bound
//! a whole scenario's time.

use std::future::Future;
use std::time::{Duration, Instant};

use super::HarnessError;

/// The value, or a panic (located at the caller) that says what failed and why.
#[track_caller]
pub fn must<T>(what: &str, result: Result<T, HarnessError>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Runs `scenario` and panics if it takes longer than `budget`. On timeout the scenario's
/// future is dropped, and with it any cluster it owns: Drop stops every JVM.
pub async fn within(budget: Duration, name: &str, scenario: impl Future<Output = ()>) {
    let started = Instant::now();
    if tokio::time::timeout(budget, scenario).await.is_err() {
        panic!("{name} did not finish within {budget:?}");
    }
    eprintln!(
        "[timing] whole test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
