//! The agent daemon: one discovery loop reading `/jobs/overview`, and one task per job with
//! its own schedule, deadline and backoff. All JobManager requests share one client whose
//! semaphore bounds the requests in flight, so a hanging job slows no other job.

pub mod backoff;
pub mod clock;
pub mod hook;
pub mod state;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use backoff::Backoff;
pub use clock::{Clock, ManualClock, SystemClock};
pub use hook::{DecisionStep, NoDecision};
pub use state::AgentState;
/// Re-exported so embedders (tests, the demo) can stop the daemon without a direct dependency.
pub use tokio_util::sync::CancellationToken;

use crate::collector::{CollectorSettings, JobCollector};
use crate::config::Config;
use crate::flink::model::JobOverview;
use crate::flink::{ClientOptions, FlinkClient, FlinkError};
use crate::telemetry;

/// Job states after which a job never runs again; their tasks stop.
const TERMINAL_STATES: [&str; 3] = ["FINISHED", "CANCELED", "FAILED"];

/// Longest wait before a new job's first poll, spreading many jobs' polls apart.
const MAX_FIRST_POLL_SPREAD: Duration = Duration::from_secs(2);

/// The timing of polls.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub poll_interval: Duration,
    pub poll_deadline: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Schedule {
    pub fn from_config(c: &Config) -> Self {
        Schedule {
            poll_interval: c.collector.poll_interval.0,
            poll_deadline: c.collector.poll_deadline.0,
            backoff_initial: c.collector.backoff_initial.0,
            backoff_max: c.collector.backoff_max.0,
        }
    }
}

/// Builds the JobManager client the configuration describes.
pub fn client_from_config(c: &Config) -> Result<FlinkClient, FlinkError> {
    FlinkClient::new(ClientOptions {
        base_url: c.jobmanager.url.clone(),
        request_timeout: c.jobmanager.request_timeout.0,
        connect_timeout: c.jobmanager.connect_timeout.0,
        max_body_bytes: usize::try_from(c.jobmanager.max_response_bytes).unwrap_or(usize::MAX),
        max_concurrent_requests: c.jobmanager.max_concurrent_requests,
    })
}

/// Everything a job task needs, shared by all of them.
struct Shared {
    client: FlinkClient,
    settings: Arc<CollectorSettings>,
    schedule: Schedule,
    clock: Arc<dyn Clock>,
    state: Arc<AgentState>,
    hook: Arc<dyn DecisionStep>,
}

/// The polling daemon.
pub struct Daemon {
    shared: Arc<Shared>,
    job_filter: Vec<String>,
}

type Overviews = Arc<HashMap<String, JobOverview>>;

impl Daemon {
    pub fn new(
        config: &Config,
        clock: Arc<dyn Clock>,
        state: Arc<AgentState>,
        hook: Arc<dyn DecisionStep>,
    ) -> Result<Self, FlinkError> {
        Ok(Daemon {
            shared: Arc::new(Shared {
                client: client_from_config(config)?,
                settings: Arc::new(CollectorSettings::from_config(config)),
                schedule: Schedule::from_config(config),
                clock,
                state,
                hook,
            }),
            job_filter: config.collector.jobs.clone(),
        })
    }

    /// The JobManager client (for its request totals).
    pub fn client(&self) -> &FlinkClient {
        &self.shared.client
    }

    /// Runs until `shutdown` is cancelled, then stops every job task (waiting at most one
    /// poll deadline for them).
    pub async fn run(self, shutdown: CancellationToken) {
        let shared = &self.shared;
        let (tx, rx) = watch::channel::<Overviews>(Arc::new(HashMap::new()));
        let mut tasks: HashMap<String, (CancellationToken, JoinHandle<()>)> = HashMap::new();
        let mut backoff =
            Backoff::new(shared.schedule.backoff_initial, shared.schedule.backoff_max);
        let mut fetcher_checked = false;
        loop {
            let started = Instant::now();
            let discovered =
                tokio::time::timeout(shared.schedule.poll_deadline, shared.client.jobs_overview())
                    .await;
            let delay = match discovered {
                Ok(Ok((overview, raw))) => {
                    backoff.reset();
                    if !fetcher_checked {
                        fetcher_checked = true;
                        check_fetcher_interval(&shared.client, shared.settings.fetcher_interval_ms)
                            .await;
                    }
                    shared.state.set_overview(raw);
                    let jobs: HashMap<String, JobOverview> = overview
                        .jobs
                        .into_iter()
                        .filter(|j| self.job_filter.is_empty() || self.job_filter.contains(&j.jid))
                        .filter(|j| !TERMINAL_STATES.contains(&j.state.as_str()))
                        .map(|j| (j.jid.clone(), j))
                        .collect();
                    tasks.retain(|id, (token, _)| {
                        let keep = jobs.contains_key(id);
                        if !keep {
                            tracing::info!(job_id = %id, "job gone or terminal; no longer watched");
                            token.cancel();
                            shared.state.remove(id);
                        }
                        keep
                    });
                    for id in jobs.keys() {
                        if !tasks.contains_key(id) {
                            tracing::info!(job_id = %id, "watching job");
                            let token = shutdown.child_token();
                            let handle = tokio::spawn(job_task(
                                id.clone(),
                                Arc::clone(shared),
                                rx.clone(),
                                token.clone(),
                            ));
                            tasks.insert(id.clone(), (token, handle));
                        }
                    }
                    let _ = tx.send(Arc::new(jobs));
                    shared
                        .schedule
                        .poll_interval
                        .saturating_sub(started.elapsed())
                }
                Ok(Err(err)) => discovery_failed(&err.to_string(), err.kind(), &mut backoff),
                Err(_) => discovery_failed(
                    "no answer within the poll deadline",
                    "deadline",
                    &mut backoff,
                ),
            };
            shared.state.mark_first_poll_attempted();
            telemetry::set_jobs_watched(tasks.len());
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = shared.clock.sleep(delay) => {}
            }
        }
        for (_, (token, _)) in tasks.iter() {
            token.cancel();
        }
        let deadline = shared.schedule.poll_deadline;
        for (id, (_, handle)) in tasks {
            if tokio::time::timeout(deadline, handle).await.is_err() {
                tracing::warn!(job_id = %id, "job task did not stop in time");
            }
        }
    }
}

/// Warns once when the JobManager refreshes its metrics more slowly than configured: polls
/// closer together than its `metrics.fetcher.update-interval` read unchanged values.
async fn check_fetcher_interval(client: &FlinkClient, configured_ms: u64) {
    const KEY: &str = "metrics.fetcher.update-interval";
    let entries = match client.jobmanager_config().await {
        Ok(entries) => entries,
        Err(err) => {
            tracing::debug!(error = %err, "cannot read the JobManager configuration");
            return;
        }
    };
    let Some(raw) = entries
        .iter()
        .find(|e| e.key == KEY)
        .map(|e| e.value.trim())
    else {
        return;
    };
    let actual_ms = crate::config::parse_flink_duration(raw)
        .ok()
        .map(|d| d.as_millis() as u64);
    if let Some(actual_ms) = actual_ms.filter(|ms| *ms > configured_ms) {
        tracing::warn!(
            jobmanager_ms = actual_ms,
            configured_ms,
            "the JobManager's {KEY} is longer than jobmanager.fetcher_update_interval; polls closer together than it read unchanged values (marked stale)"
        );
    }
}

fn discovery_failed(detail: &str, kind: &'static str, backoff: &mut Backoff) -> Duration {
    telemetry::record_error(kind);
    let delay = backoff.next_delay(rand::random::<f64>());
    tracing::warn!(error = %detail, retry_in_ms = delay.as_millis() as u64, "job discovery failed");
    delay
}

/// One job's loop: wait, poll under the deadline, publish, run the decision step; on
/// failure back off with jitter. Fixed-rate: the next poll is one interval after this one
/// started.
async fn job_task(
    job_id: String,
    shared: Arc<Shared>,
    overviews: watch::Receiver<Overviews>,
    cancel: CancellationToken,
) {
    let schedule = shared.schedule;
    let mut collector = JobCollector::new(job_id.clone(), Arc::clone(&shared.settings));
    let mut backoff = Backoff::new(schedule.backoff_initial, schedule.backoff_max);
    let spread = schedule.poll_interval.min(MAX_FIRST_POLL_SPREAD);
    let mut delay = spread.mul_f64(rand::random::<f64>());
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = shared.clock.sleep(delay) => {}
        }
        let overview = overviews.borrow().get(&job_id).cloned();
        let Some(overview) = overview else {
            delay = schedule.poll_interval;
            continue;
        };
        let started = Instant::now();
        let now_ms = shared.clock.now_ms();
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return,
            r = tokio::time::timeout(schedule.poll_deadline, collector.poll(&shared.client, &overview, now_ms)) => r,
        };
        telemetry::record_poll_duration(started.elapsed().as_secs_f64());
        delay = match outcome {
            Ok(Ok(report)) => {
                backoff.reset();
                shared.state.publish(collector.snapshot().clone());
                shared.hook.step(&mut collector, &report, now_ms).await;
                schedule.poll_interval.saturating_sub(started.elapsed())
            }
            Ok(Err(err)) => {
                telemetry::record_error(err.kind());
                let delay = backoff.next_delay(rand::random::<f64>());
                tracing::warn!(job_id = %job_id, error = %err, retry_in_ms = delay.as_millis() as u64, "poll failed");
                delay
            }
            Err(_) => {
                telemetry::record_error("deadline");
                let delay = backoff.next_delay(rand::random::<f64>());
                tracing::warn!(job_id = %job_id, deadline_ms = schedule.poll_deadline.as_millis() as u64, retry_in_ms = delay.as_millis() as u64, "poll exceeded its deadline");
                delay
            }
        };
    }
}
