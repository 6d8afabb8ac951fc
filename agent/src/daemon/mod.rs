//! The agent daemon: one scheduling loop (the edge of [`scheduler::Scheduler`]) that shares
//! the JobManager's request budget (`jobmanager.max_concurrent_requests`) over discovery
//! (`/jobs/overview`) and every watched job's polls. Each poll runs in its own task under a
//! deadline counted from when it got its slot; a poll that hangs gives its slot back after
//! `scheduling.hung_after`, so hanging jobs delay no healthy one. Jobs gone from the
//! overview are dropped at once, their running poll cut.

pub mod backoff;
pub mod clock;
pub mod config;
pub mod failure_log;
pub mod hook;
pub mod scheduler;
pub mod status_board;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

pub use backoff::Backoff;
pub use clock::{Clock, ManualClock, SystemClock};
pub use hook::{AfterStep, DecisionStep, NoDecision};
pub use status_board::StatusBoard;
/// Re-exported so embedders (tests, the demo) can stop the daemon without a direct dependency.
pub use tokio_util::sync::CancellationToken;

use crate::collector::{CollectorSettings, JobCollector};
use crate::config::Config;
use crate::flink::model::JobOverview;
use crate::flink::{ClientOptions, FlinkClient, FlinkError};
use crate::telemetry;
use failure_log::{FailureLine, FailureLog};
use scheduler::{Ended, JobKey, Now, Scheduler, SchedulerSettings, Start, Work};

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
    crate::flink::tls::warn_if_insecure(&c.jobmanager);
    FlinkClient::new(ClientOptions {
        base_url: c.jobmanager.url.clone(),
        request_timeout: c.jobmanager.request_timeout.0,
        connect_timeout: c.jobmanager.connect_timeout.0,
        max_body_bytes: usize::try_from(c.jobmanager.max_response_bytes).unwrap_or(usize::MAX),
        // The scheduler keeps at most max_concurrent_requests polls on a slot; hung ones
        // wait beside them, so the client's own bound is both together.
        max_concurrent_requests: c
            .jobmanager
            .max_concurrent_requests
            .saturating_add(c.scheduling.max_hung_requests),
        tls: crate::flink::tls::client_config(&c.jobmanager).map_err(|e| {
            FlinkError::InvalidUrl {
                url: c.jobmanager.url.clone(),
                detail: e.to_string(),
            }
        })?,
        has_client_cert: c.jobmanager.client_cert_file.is_some(),
    })
}

/// Everything a poll task needs, shared by all of them.
struct Shared {
    client: FlinkClient,
    settings: Arc<CollectorSettings>,
    schedule: Schedule,
    scheduling: SchedulerSettings,
    clock: Arc<dyn Clock>,
    state: Arc<StatusBoard>,
    hook: Arc<dyn DecisionStep>,
}

/// The polling daemon.
pub struct Daemon {
    shared: Arc<Shared>,
    job_filter: Vec<String>,
}

/// How often the schedule's interval is re-planned and its keep-up figures published.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(1);

/// What a task reports to the scheduling loop.
enum Event {
    /// A poll is over (the decision step, if any, runs next).
    Polled {
        key: JobKey,
        ticket: u64,
        outcome: Result<(), PollFailure>,
    },
    /// The decision step after a poll is over (or there was none).
    Stepped { key: JobKey, ticket: u64 },
    Discovered {
        ticket: u64,
        outcome: Result<(crate::flink::model::JobsOverview, bytes::Bytes), PollFailure>,
    },
}

/// Why a poll failed, for the scheduler, the error counter and one log line.
struct PollFailure {
    kind: &'static str,
    detail: String,
    timed_out: bool,
}

impl PollFailure {
    fn from_error(err: &FlinkError) -> Self {
        PollFailure {
            kind: err.kind(),
            detail: err.to_string(),
            timed_out: err.kind() == "timeout",
        }
    }

    fn deadline(deadline: Duration) -> Self {
        PollFailure {
            kind: "deadline",
            detail: format!(
                "no answer within the poll deadline ({} ms)",
                deadline.as_millis()
            ),
            timed_out: true,
        }
    }

    fn ended(&self) -> Ended {
        if self.timed_out {
            Ended::TimedOut
        } else {
            Ended::Failed
        }
    }
}

/// A watched job, as the scheduling loop keeps it.
struct Watched {
    overview: JobOverview,
    collector: Arc<Mutex<JobCollector>>,
    failures: FailureLog,
    running: Option<Running>,
}

/// A task of a job (its poll and decision step), cancellable while it polls.
struct Running {
    ticket: u64,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

impl Daemon {
    pub fn new(
        config: &Config,
        clock: Arc<dyn Clock>,
        state: Arc<StatusBoard>,
        hook: Arc<dyn DecisionStep>,
    ) -> Result<Self, FlinkError> {
        let schedule = Schedule::from_config(config);
        Ok(Daemon {
            shared: Arc::new(Shared {
                client: client_from_config(config)?,
                settings: Arc::new(CollectorSettings::from_config(config)),
                scheduling: SchedulerSettings {
                    poll_interval: schedule.poll_interval,
                    poll_deadline: schedule.poll_deadline,
                    hung_after: config.scheduling.hung_after.0.min(schedule.poll_deadline),
                    slots: config.jobmanager.max_concurrent_requests,
                    max_hung: config.scheduling.max_hung_requests,
                    backoff_initial: schedule.backoff_initial,
                    backoff_max: schedule.backoff_max,
                },
                schedule,
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

    /// Runs until `shutdown` is cancelled, then stops every task (waiting at most one poll
    /// deadline for them).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut edge = Edge {
            scheduler: Scheduler::new(self.shared.scheduling),
            shared: Arc::clone(&self.shared),
            job_filter: self.job_filter,
            jobs: HashMap::new(),
            discovery: None,
            discovery_backoff: Backoff::new(
                self.shared.schedule.backoff_initial,
                self.shared.schedule.backoff_max,
            ),
            fetcher_checked: false,
            origin: Instant::now(),
            events: mpsc::unbounded_channel(),
            shutdown: shutdown.clone(),
            stretched: false,
        };
        let now = edge.now();
        edge.scheduler.discover_at(now.clock_ms);
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_EVERY);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = edge.now();
            edge.start_due(now);
            let (clock_wake, real_wake) = edge.scheduler.next_wakeup(now);
            let clock_sleep = clock_wake.map(|at| {
                edge.shared
                    .clock
                    .sleep(Duration::from_millis(at.saturating_sub(now.clock_ms)))
            });
            let real_sleep =
                real_wake.map(|at| Duration::from_millis(at.saturating_sub(now.real_ms)));
            tokio::select! {
                _ = shutdown.cancelled() => break,
                event = edge.events.1.recv() => {
                    let Some(event) = event else { break };
                    edge.handle(event);
                    // Take whatever else has arrived before planning again.
                    while let Ok(event) = edge.events.1.try_recv() {
                        edge.handle(event);
                    }
                }
                _ = async { clock_sleep.expect("guarded").await }, if clock_sleep.is_some() => {}
                _ = tokio::time::sleep(real_sleep.unwrap_or_default()), if real_sleep.is_some() => {}
                _ = housekeeping.tick() => edge.housekeeping(),
            }
        }
        edge.stop().await;
    }
}

/// The scheduling loop's state: the pure scheduler and what carries out its starts.
struct Edge {
    scheduler: Scheduler,
    shared: Arc<Shared>,
    job_filter: Vec<String>,
    jobs: HashMap<JobKey, Watched>,
    discovery: Option<(u64, CancellationToken)>,
    discovery_backoff: Backoff,
    fetcher_checked: bool,
    origin: Instant,
    events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
    shutdown: CancellationToken,
    /// Whether the interval is stretched now (for the log line when it is not any more).
    stretched: bool,
}

impl Edge {
    fn now(&self) -> Now {
        Now {
            clock_ms: self.shared.clock.now_ms(),
            real_ms: u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Cuts hung work the pool cannot keep, then starts everything a free slot allows.
    fn start_due(&mut self, now: Now) {
        for work in self.scheduler.expire(now) {
            self.cut(work, now);
        }
        while let Some(start) = self.scheduler.next_start(now) {
            telemetry::record_queue_wait(start.waited.as_secs_f64());
            match start.work.clone() {
                Work::Discovery => self.start_discovery(start),
                Work::Poll(key) => self.start_poll(key, start, now),
            }
        }
    }

    fn start_discovery(&mut self, start: Start) {
        let cancel = self.shutdown.child_token();
        self.discovery = Some((start.ticket, cancel.clone()));
        let client = self.shared.client.clone();
        let events = self.events.0.clone();
        let ticket = start.ticket;
        let deadline = start.deadline;
        tokio::spawn(async move {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return,
                r = tokio::time::timeout(deadline, client.jobs_overview()) => r,
            };
            let outcome = match outcome {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(err)) => Err(PollFailure::from_error(&err)),
                Err(_) => Err(PollFailure::deadline(deadline)),
            };
            let _ = events.send(Event::Discovered { ticket, outcome });
        });
    }

    fn start_poll(&mut self, key: JobKey, start: Start, now: Now) {
        tracing::debug!(job_id = %key, ticket = start.ticket, waited_ms = start.waited.as_millis() as u64, "poll starts");
        let Some(job) = self.jobs.get_mut(&key) else {
            // Not watched any more: the scheduler forgets it too.
            self.scheduler.remove_job(&key);
            return;
        };
        let cancel = self.shutdown.child_token();
        let task = poll_task(
            Arc::clone(&self.shared),
            key.clone(),
            start.ticket,
            start.deadline,
            Arc::clone(&job.collector),
            job.overview.clone(),
            cancel.clone(),
            self.events.0.clone(),
        );
        let handle = tokio::spawn(task);
        if let Some(old) = job.running.replace(Running {
            ticket: start.ticket,
            cancel,
            handle,
        }) {
            // A cut poll's task may still be finishing its decision step; it holds the
            // collector until then, so the new poll waits for it.
            old.cancel.cancel();
        }
        let _ = now;
    }

    /// Gives up on hung work the pool has no room for.
    fn cut(&mut self, work: Work, now: Now) {
        telemetry::record_error("hung");
        match &work {
            Work::Discovery => {
                if let Some((ticket, cancel)) = self.discovery.take() {
                    cancel.cancel();
                    self.discovery_ended(ticket, Err(PollFailure::hung()), now);
                }
            }
            Work::Poll(key) => {
                let Some(ticket) = self
                    .jobs
                    .get(key)
                    .and_then(|j| j.running.as_ref())
                    .map(|r| {
                        r.cancel.cancel();
                        r.ticket
                    })
                else {
                    return;
                };
                self.poll_ended(key.clone(), ticket, Err(PollFailure::hung()), now);
                self.scheduler.step_ended(key, ticket);
            }
        }
    }

    fn handle(&mut self, event: Event) {
        let now = self.now();
        match &event {
            Event::Polled {
                key,
                ticket,
                outcome,
            } => tracing::debug!(job_id = %key, ticket, ok = outcome.is_ok(), "polled"),
            Event::Stepped { key, ticket } => tracing::debug!(job_id = %key, ticket, "stepped"),
            Event::Discovered { ticket, .. } => tracing::debug!(ticket, "discovered"),
        }
        match event {
            Event::Polled {
                key,
                ticket,
                outcome,
            } => {
                // A job's poll counts as the first poll too: discovery may wait for a slot.
                self.shared.state.mark_first_poll_attempted();
                self.poll_ended(key, ticket, outcome, now)
            }
            Event::Stepped { key, ticket } => {
                self.scheduler.step_ended(&key, ticket);
                if let Some(job) = self.jobs.get_mut(&key) {
                    if job.running.as_ref().is_some_and(|r| r.ticket == ticket) {
                        job.running = None;
                    }
                }
            }
            Event::Discovered { ticket, outcome } => {
                if self.discovery.as_ref().is_some_and(|(t, _)| *t == ticket) {
                    self.discovery = None;
                    self.discovery_ended(ticket, outcome, now);
                }
            }
        }
    }

    fn poll_ended(&mut self, key: JobKey, ticket: u64, outcome: Result<(), PollFailure>, now: Now) {
        let ended = match &outcome {
            Ok(()) => Ended::Answered,
            Err(f) => f.ended(),
        };
        let jitter = rand::random::<f64>();
        self.scheduler
            .poll_ended(&Work::Poll(key.clone()), ticket, ended, now, jitter);
        let Some(job) = self.jobs.get_mut(&key) else {
            return;
        };
        match outcome {
            Ok(()) => {
                if let Some(failures) = job.failures.answered() {
                    tracing::info!(job_id = %key, failures, "job answers again");
                }
            }
            Err(failure) => {
                if failure.kind != "hung" {
                    telemetry::record_error(failure.kind);
                }
                let retry_in_ms = self
                    .scheduler
                    .retry_in(&key, now)
                    .map_or(0, |d| d.as_millis() as u64);
                match job.failures.failure(failure.kind, now.clock_ms) {
                    FailureLine::Full => tracing::warn!(
                        job_id = %key,
                        kind = failure.kind,
                        error = %failure.detail,
                        retry_in_ms,
                        "poll failed"
                    ),
                    FailureLine::Summary {
                        failures,
                        left_out,
                        since_ms,
                    } => tracing::warn!(
                        job_id = %key,
                        kind = failure.kind,
                        error = %failure.detail,
                        failures,
                        not_logged = left_out,
                        failing_for_s = now.clock_ms.saturating_sub(since_ms) / 1000,
                        retry_in_ms,
                        "polls still failing"
                    ),
                    FailureLine::Quiet => {}
                }
            }
        }
    }

    fn discovery_ended(
        &mut self,
        ticket: u64,
        outcome: Result<(crate::flink::model::JobsOverview, bytes::Bytes), PollFailure>,
        now: Now,
    ) {
        let ended = match &outcome {
            Ok(_) => Ended::Answered,
            Err(f) => f.ended(),
        };
        self.scheduler
            .poll_ended(&Work::Discovery, ticket, ended, now, 0.0);
        self.shared.state.mark_first_poll_attempted();
        let next = match outcome {
            Ok((overview, raw)) => {
                self.discovery_backoff.reset();
                if !self.fetcher_checked {
                    self.fetcher_checked = true;
                    let client = self.shared.client.clone();
                    let configured = self.shared.settings.fetcher_interval_ms;
                    tokio::spawn(async move { check_fetcher_interval(&client, configured).await });
                }
                self.shared.state.set_overview(raw);
                self.apply_overview(overview.jobs, now);
                self.shared.schedule.poll_interval
            }
            Err(failure) => {
                telemetry::record_error(failure.kind);
                let delay = self.discovery_backoff.next_delay(rand::random::<f64>());
                tracing::warn!(error = %failure.detail, retry_in_ms = delay.as_millis() as u64, "job discovery failed");
                delay
            }
        };
        self.scheduler
            .discover_at(now.clock_ms.saturating_add(next.as_millis() as u64));
    }

    /// Watches the jobs the overview lists (running, and passing the filter); drops the
    /// rest at once, cutting their running polls.
    fn apply_overview(&mut self, listed: Vec<JobOverview>, now: Now) {
        let listed: HashMap<JobKey, JobOverview> = listed
            .into_iter()
            .filter(|j| self.job_filter.is_empty() || self.job_filter.contains(&j.jid))
            .filter(|j| !TERMINAL_STATES.contains(&j.state.as_str()))
            .map(|j| (JobKey::from(j.jid.as_str()), j))
            .collect();
        let gone: Vec<JobKey> = self
            .jobs
            .keys()
            .filter(|k| !listed.contains_key(*k))
            .cloned()
            .collect();
        for key in &gone {
            self.scheduler.remove_job(key);
            if let Some(job) = self.jobs.remove(key) {
                if let Some(running) = job.running {
                    running.cancel.cancel();
                }
            }
            self.shared.state.remove(key);
        }
        if !gone.is_empty() {
            tracing::info!(
                jobs = gone.len(),
                example = %gone[0],
                "jobs gone or terminal; no longer watched"
            );
        }
        let spread = self
            .shared
            .schedule
            .poll_interval
            .min(MAX_FIRST_POLL_SPREAD);
        let mut added = 0usize;
        for (key, overview) in listed {
            match self.jobs.get_mut(&key) {
                Some(job) => job.overview = overview,
                None => {
                    if added < 10 {
                        tracing::info!(job_id = %key, "watching job");
                    }
                    added += 1;
                    let collector =
                        JobCollector::new(key.to_string(), Arc::clone(&self.shared.settings));
                    self.jobs.insert(
                        key.clone(),
                        Watched {
                            overview,
                            collector: Arc::new(Mutex::new(collector)),
                            failures: FailureLog::default(),
                            running: None,
                        },
                    );
                    self.scheduler
                        .add_job(key, now, spread.mul_f64(rand::random::<f64>()));
                }
            }
        }
        if added > 10 {
            tracing::info!(
                jobs = added,
                "watching new jobs (the first ten logged one by one)"
            );
        }
        telemetry::set_jobs_watched(self.jobs.len());
    }

    /// Re-plans the interval (stretched evenly when the budget cannot cover every job every
    /// interval) and publishes the keep-up figures.
    fn housekeeping(&mut self) {
        let now = self.now();
        if let Some(change) = self.scheduler.plan_interval() {
            let configured = self.shared.schedule.poll_interval;
            if change.to > configured {
                self.stretched = true;
                tracing::warn!(
                    jobs = change.jobs,
                    poll_cost_ms = change.poll_cost.as_secs_f64() * 1000.0,
                    slots = self.shared.scheduling.slots,
                    configured_ms = configured.as_millis() as u64,
                    from_ms = change.from.as_millis() as u64,
                    interval_ms = change.to.as_millis() as u64,
                    "the request budget cannot poll every job every collector.poll_interval; every job's interval is stretched evenly (raise jobmanager.max_concurrent_requests to restore it)"
                );
            } else if self.stretched {
                self.stretched = false;
                tracing::info!(
                    jobs = change.jobs,
                    interval_ms = change.to.as_millis() as u64,
                    "the request budget covers every job again; the configured interval holds"
                );
            }
        }
        let keep_up = self.scheduler.keep_up(now);
        telemetry::record_keep_up(&keep_up);
        let reason = (!keep_up.keeping_up()).then(|| {
            format!(
                "{} jobs, poll interval {} ms planned for {} ms configured, the most overdue answering job {} ms past due, {} of them answered within twice the interval",
                keep_up.jobs,
                keep_up.effective_interval.as_millis(),
                keep_up.poll_interval.as_millis(),
                keep_up.schedule_lag.as_millis(),
                keep_up.polled_in_time,
            )
        });
        self.shared.state.set_falling_behind(reason);
    }

    /// Stops every task, waiting at most one poll deadline for them.
    async fn stop(self) {
        if let Some((_, cancel)) = &self.discovery {
            cancel.cancel();
        }
        let handles: Vec<(JobKey, JoinHandle<()>)> = self
            .jobs
            .into_iter()
            .filter_map(|(key, job)| {
                job.running.map(|r| {
                    r.cancel.cancel();
                    (key, r.handle)
                })
            })
            .collect();
        let deadline = tokio::time::Instant::now() + self.shared.schedule.poll_deadline;
        for (key, handle) in handles {
            if tokio::time::timeout_at(deadline, handle).await.is_err() {
                tracing::warn!(job_id = %key, "job task did not stop in time");
            }
        }
    }
}

impl PollFailure {
    fn hung() -> Self {
        PollFailure {
            kind: "hung",
            detail: "unanswered after scheduling.hung_after with the pool of hung polls full; cut"
                .into(),
            timed_out: true,
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

/// One poll of one job under its deadline, then its decision step; reports both ends.
#[allow(clippy::too_many_arguments)]
async fn poll_task(
    shared: Arc<Shared>,
    key: JobKey,
    ticket: u64,
    deadline: Duration,
    collector: Arc<Mutex<JobCollector>>,
    overview: JobOverview,
    cancel: CancellationToken,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut collector = tokio::select! {
        _ = cancel.cancelled() => return,
        c = collector.lock() => c,
    };
    let started = Instant::now();
    let now_ms = shared.clock.now_ms();
    let outcome = tokio::select! {
        _ = cancel.cancelled() => return,
        r = tokio::time::timeout(deadline, collector.poll(&shared.client, &overview, now_ms)) => r,
    };
    telemetry::record_poll_duration(started.elapsed().as_secs_f64());
    let report = match outcome {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(err)) => Err(PollFailure::from_error(&err)),
        Err(_) => Err(PollFailure::deadline(deadline)),
    };
    match report {
        Ok(report) => {
            let _ = events.send(Event::Polled {
                key: key.clone(),
                ticket,
                outcome: Ok(()),
            });
            shared.state.publish(collector.snapshot().clone());
            let after = shared.hook.step(&collector, &report, now_ms).await;
            if after.reset_window {
                collector.reset_window();
            }
        }
        Err(failure) => {
            let _ = events.send(Event::Polled {
                key: key.clone(),
                ticket,
                outcome: Err(failure),
            });
        }
    }
    drop(collector);
    let _ = events.send(Event::Stepped { key, ticket });
}
