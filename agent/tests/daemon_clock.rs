//! The daemon on an injected manual clock: polls happen only when the clock moves, samples
//! carry the clock's time, and the decision step runs after each successful poll with the
//! job's window. Shutdown stops every task.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flink_autoscale_agent::collector::{JobCollector, PollReport};
use flink_autoscale_agent::config::{Config, Overrides};
use flink_autoscale_agent::daemon::clock::BoxFuture;
use flink_autoscale_agent::daemon::{
    AfterStep, CancellationToken, Daemon, DecisionStep, ManualClock, StatusBoard,
};
use support::{start_scripted, JOB};

/// Records (now, window length, newest sample time) for every step.
#[derive(Default)]
struct Recorder(Mutex<Vec<(u64, usize, Option<u64>)>>);

impl DecisionStep for Recorder {
    fn step<'a>(
        &'a self,
        job: &'a JobCollector,
        report: &'a PollReport,
        now_ms: u64,
    ) -> BoxFuture<'a, AfterStep> {
        Box::pin(async move {
            assert_eq!(job.job_id(), JOB);
            assert_eq!(
                report.unusable,
                None,
                "{:?}",
                job.snapshot().unusable_detail
            );
            let newest = job.window().latest().map(|s| s.time_ms);
            self.0
                .lock()
                .unwrap()
                .push((now_ms, job.window().len(), newest));
            AfterStep::default()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_follow_the_injected_clock_and_feed_the_decision_step() {
    let (url, _script, stop_jm) = start_scripted().await;
    let toml = format!(
        "[jobmanager]\nurl = \"{url}\"\nrequest_timeout = \"1s\"\nfetcher_update_interval = \"10s\"\n[collector]\npoll_interval = \"15s\"\npoll_deadline = \"5s\"\n"
    );
    let cfg = Config::from_layers(&toml, &Default::default(), &Overrides::default()).unwrap();
    let start_ms = 1_700_000_000_000;
    let clock = ManualClock::new(start_ms);
    let recorder = Arc::new(Recorder::default());
    let state = StatusBoard::new();
    let daemon = Daemon::new(&cfg, clock.clone(), Arc::clone(&state), recorder.clone()).unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(daemon.run(shutdown.clone()));

    // Nothing is polled while the clock stands still (beyond discovery).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(state.is_ready(), "ready after the first discovery attempt");
    assert!(recorder.0.lock().unwrap().is_empty());

    // Move simulated time in one-second steps for two minutes.
    for _ in 0..120 {
        clock.advance(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let steps = recorder.0.lock().unwrap().clone();
    assert!(
        steps.len() >= 6,
        "expected a poll every 15 simulated seconds, got {steps:?}"
    );
    for w in steps.windows(2) {
        assert!(
            w[1].0 - w[0].0 >= 15_000,
            "polls at least one interval apart: {steps:?}"
        );
        assert_eq!(w[1].1, w[0].1 + 1, "each poll adds one sample: {steps:?}");
    }
    for (now, _, newest) in &steps {
        assert!(*now >= start_ms && *now <= start_ms + 120_000);
        assert_eq!(
            *newest,
            Some(*now),
            "samples carry the injected clock's time"
        );
    }
    assert_eq!(state.jobs().len(), 1);

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("daemon stops")
        .unwrap();
    stop_jm.cancel();
}
