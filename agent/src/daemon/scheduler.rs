//! Which poll starts next: the JobManager's request budget shared fairly over every watched
//! job. Pure: plain data in and out, time is an argument; `daemon/mod.rs` is its edge.
//!
//! - **Slots.** `slots` polls (the budget, `jobmanager.max_concurrent_requests`) hold a slot
//!   at once. A poll makes one request at a time, so a job never holds more than one slot.
//!   A poll's deadline counts from when it gets its slot, never while it queues.
//! - **Order.** Due jobs wait in two queues, each in order of due time. Jobs whose latest
//!   poll was answered come first; jobs that are new or whose latest poll failed
//!   ("unproven") get a quarter of the slots while answering jobs wait, and never the last
//!   free slot, so a crowd of failing jobs cannot hold every slot.
//! - **Hung polls.** A poll still running `hung_after` after it started gives its slot back
//!   and waits in a bounded pool of hung polls until its deadline; when the pool is full it
//!   is cut instead. A job whose polls keep timing out gets half the deadline each time.
//! - **Stretch.** When the slots cannot poll every job every interval (judged from how long
//!   answered polls hold a slot), every job's interval is stretched by the same factor.
//! - **Discovery** (`/jobs/overview`) takes the next free slot before any poll.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::backoff::Backoff;

/// Share of the slot time the schedule plans to use; the rest absorbs bursts, so polls
/// start close to their due time. Beyond it the interval is stretched.
const TARGET_UTILIZATION: f64 = 0.8;
/// Weight of the newest answered poll in the average slot time.
const COST_WEIGHT: f64 = 0.05;
/// The stretched interval is rounded up to this, so it does not move with every poll.
const STRETCH_STEP_MS: u64 = 500;

/// A watched job's id.
pub type JobKey = Arc<str>;

/// What the schedule is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    pub poll_interval: Duration,
    pub poll_deadline: Duration,
    pub hung_after: Duration,
    /// Polls holding a slot at once (`jobmanager.max_concurrent_requests`).
    pub slots: usize,
    /// Hung polls kept waiting for an answer at once (`scheduling.max_hung_requests`).
    pub max_hung: usize,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

/// Now, on the daemon's clock (due times, intervals) and on a monotonic real clock (how long
/// a poll has held its slot). They differ when the daemon runs on a manual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub clock_ms: u64,
    pub real_ms: u64,
}

/// Something that needs a slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// `/jobs/overview`, and what is read once with it.
    Discovery,
    Poll(JobKey),
}

/// A start the edge carries out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub work: Work,
    /// Identifies this start in [`Scheduler::poll_ended`] and [`Scheduler::step_ended`].
    pub ticket: u64,
    /// Real time the poll may take, from now.
    pub deadline: Duration,
    /// How long after its due time it starts (daemon clock).
    pub waited: Duration,
}

/// How a poll ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Answered,
    /// An error answer or a refused connection: quick, the slot was not held long.
    Failed,
    /// Its deadline passed, or it was cut while hung.
    TimedOut,
}

/// Whether a job's latest poll was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    Answering = 0,
    Unproven = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting {
        due_ms: u64,
        seq: u64,
    },
    Polling {
        ticket: u64,
        started: Now,
    },
    /// The poll is over; the edge runs the decision step. Then due at `next_due_ms`.
    Stepping {
        ticket: u64,
        next_due_ms: u64,
    },
}

#[derive(Debug, Clone)]
struct Job {
    phase: Phase,
    standing: Standing,
    backoff: Backoff,
    timeouts_in_a_row: u32,
    watched_since_ms: u64,
    last_answer_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiscoveryPhase {
    Idle,
    Due(u64),
    Running { ticket: u64 },
}

/// How well the schedule keeps up, for `/readyz` and the keep-up gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeepUp {
    pub jobs: usize,
    /// Jobs answered within twice the configured interval (or watched for less than that).
    pub polled_in_time: usize,
    /// Age of the oldest latest answer (or of the watch, for a job never answered).
    pub oldest_answer_age: Duration,
    pub poll_interval: Duration,
    /// The interval polls are planned at: the configured one, or stretched.
    pub effective_interval: Duration,
    /// How long past its due time the most overdue answering job waits.
    pub schedule_lag: Duration,
    pub hung_polls: usize,
}

impl KeepUp {
    /// The configured interval holds and no answering job waits a whole interval late.
    pub fn keeping_up(&self) -> bool {
        self.effective_interval <= self.poll_interval && self.schedule_lag <= self.poll_interval
    }

    /// Share of jobs answered within twice the configured interval (1 with no jobs).
    pub fn in_time_ratio(&self) -> f64 {
        if self.jobs == 0 {
            1.0
        } else {
            self.polled_in_time as f64 / self.jobs as f64
        }
    }
}

/// A change of the planned interval, for one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalChange {
    pub from: Duration,
    pub to: Duration,
    pub jobs: usize,
    /// Average slot time of an answered poll.
    pub poll_cost: Duration,
}

/// The schedule of every watched job.
#[derive(Debug)]
pub struct Scheduler {
    settings: SchedulerSettings,
    jobs: HashMap<JobKey, Job>,
    /// Waiting jobs by (due, seq), one queue per standing.
    queues: [BTreeSet<(u64, u64, JobKey)>; 2],
    /// Work holding a slot, by (real start, ticket).
    holding: BTreeSet<(u64, u64, Work)>,
    /// Hung work (no slot), by ticket.
    hung: HashMap<u64, Work>,
    unproven_holding: usize,
    discovery: DiscoveryPhase,
    next_seq: u64,
    next_ticket: u64,
    /// Average real ms an answered poll holds its slot.
    poll_cost_ms: Option<f64>,
    effective_interval_ms: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Scheduler {
    pub fn new(settings: SchedulerSettings) -> Self {
        Scheduler {
            jobs: HashMap::new(),
            queues: [BTreeSet::new(), BTreeSet::new()],
            holding: BTreeSet::new(),
            hung: HashMap::new(),
            unproven_holding: 0,
            discovery: DiscoveryPhase::Idle,
            next_seq: 0,
            next_ticket: 0,
            poll_cost_ms: None,
            effective_interval_ms: ms(settings.poll_interval),
            settings: SchedulerSettings {
                slots: settings.slots.max(1),
                ..settings
            },
        }
    }

    pub fn settings(&self) -> &SchedulerSettings {
        &self.settings
    }

    pub fn jobs(&self) -> usize {
        self.jobs.len()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.jobs.contains_key(key)
    }

    /// The interval polls are planned at.
    pub fn effective_interval(&self) -> Duration {
        Duration::from_millis(self.effective_interval_ms)
    }

    /// Starts watching `key`; its first poll is due `delay` from now. New jobs are unproven.
    pub fn add_job(&mut self, key: JobKey, now: Now, delay: Duration) {
        if self.jobs.contains_key(&key) {
            return;
        }
        let s = &self.settings;
        let job = Job {
            phase: Phase::Waiting { due_ms: 0, seq: 0 },
            standing: Standing::Unproven,
            backoff: Backoff::new(s.backoff_initial, s.backoff_max),
            timeouts_in_a_row: 0,
            watched_since_ms: now.clock_ms,
            last_answer_ms: None,
        };
        self.jobs.insert(key.clone(), job);
        self.enqueue(&key, now.clock_ms.saturating_add(ms(delay)));
    }

    /// Stops watching `key`. True if a poll or decision step of it is running, which the
    /// edge then stops; its slot is free at once.
    pub fn remove_job(&mut self, key: &str) -> bool {
        let Some(job) = self.jobs.remove(key) else {
            return false;
        };
        match job.phase {
            Phase::Waiting { due_ms, seq } => {
                self.queues[job.standing as usize].remove(&(due_ms, seq, Arc::from(key)));
                false
            }
            Phase::Polling { ticket, started } => {
                let work = Work::Poll(Arc::from(key));
                if self.holding.remove(&(started.real_ms, ticket, work)) {
                    self.release_slot(job.standing);
                }
                self.hung.remove(&ticket);
                true
            }
            Phase::Stepping { .. } => true,
        }
    }

    /// Discovery becomes due at `clock_ms` (unless it is running).
    pub fn discover_at(&mut self, clock_ms: u64) {
        if !matches!(self.discovery, DiscoveryPhase::Running { .. }) {
            self.discovery = DiscoveryPhase::Due(clock_ms);
        }
    }

    /// The next start, if a slot is free and something may use it. Call until `None`.
    pub fn next_start(&mut self, now: Now) -> Option<Start> {
        if self.holding.len() >= self.settings.slots {
            return None;
        }
        if let DiscoveryPhase::Due(due) = self.discovery {
            if due <= now.clock_ms {
                let ticket = self.ticket();
                self.discovery = DiscoveryPhase::Running { ticket };
                self.holding.insert((now.real_ms, ticket, Work::Discovery));
                return Some(Start {
                    work: Work::Discovery,
                    ticket,
                    deadline: self.settings.poll_deadline,
                    waited: Duration::from_millis(now.clock_ms - due),
                });
            }
        }
        let standing = self.pick(now.clock_ms)?;
        let (due_ms, seq, key) = self.queues[standing as usize].pop_first()?;
        debug_assert!(due_ms <= now.clock_ms && seq < self.next_seq);
        let ticket = self.ticket();
        let settings = self.settings;
        let job = self.jobs.get_mut(&key)?;
        job.phase = Phase::Polling {
            ticket,
            started: now,
        };
        let halved = settings
            .poll_deadline
            .checked_div(1u32 << job.timeouts_in_a_row.min(16))
            .unwrap_or_default();
        self.holding
            .insert((now.real_ms, ticket, Work::Poll(key.clone())));
        if standing == Standing::Unproven {
            self.unproven_holding += 1;
        }
        Some(Start {
            work: Work::Poll(key),
            ticket,
            deadline: halved.max(settings.hung_after.min(settings.poll_deadline)),
            waited: Duration::from_millis(now.clock_ms - due_ms),
        })
    }

    /// Which queue gets a free slot.
    fn pick(&self, clock_ms: u64) -> Option<Standing> {
        let due = |s: Standing| {
            self.queues[s as usize]
                .first()
                .is_some_and(|(d, _, _)| *d <= clock_ms)
        };
        let slots = self.settings.slots;
        // An unproven job a whole interval past due gets a slot when no other unproven job
        // holds one, so they are never starved while answering jobs keep every slot busy
        // (with one slot, answering jobs always come first).
        let starving = slots >= 2
            && self.unproven_holding == 0
            && self.queues[Standing::Unproven as usize]
                .first()
                .is_some_and(|(d, _, _)| d.saturating_add(self.effective_interval_ms) <= clock_ms);
        match (due(Standing::Answering), due(Standing::Unproven)) {
            (true, true) if self.unproven_holding < slots / 4 || starving => {
                Some(Standing::Unproven)
            }
            (true, _) => Some(Standing::Answering),
            // Never the last free slot: an answering job that comes due finds one.
            (false, true) if self.holding.len() + 1 < slots || slots == 1 || starving => {
                Some(Standing::Unproven)
            }
            _ => None,
        }
    }

    /// Polls that have held their slot for `hung_after` give it back: into the pool of hung
    /// polls, or, with the pool full, cut. Returns the work the edge must cut now.
    pub fn expire(&mut self, now: Now) -> Vec<Work> {
        let hung_after = ms(self.settings.hung_after);
        let mut cut = Vec::new();
        while let Some((started, ticket, work)) = self.holding.first().cloned() {
            if started.saturating_add(hung_after) > now.real_ms {
                break;
            }
            self.holding.pop_first();
            let standing = match &work {
                Work::Poll(key) => self.jobs.get(key).map(|j| j.standing),
                Work::Discovery => None,
            };
            if let Some(standing) = standing {
                self.release_slot(standing);
            }
            if self.hung.len() < self.settings.max_hung {
                self.hung.insert(ticket, work);
                continue;
            }
            // The pool is full. A slow poll of a job that answers (or discovery) takes the
            // place of the oldest hung poll of a job that does not; otherwise it is cut.
            let victim = (standing != Some(Standing::Unproven))
                .then(|| {
                    self.hung
                        .iter()
                        .filter(|(_, w)| match w {
                            Work::Poll(k) => self
                                .jobs
                                .get(k)
                                .is_none_or(|j| j.standing == Standing::Unproven),
                            Work::Discovery => false,
                        })
                        .map(|(t, _)| *t)
                        .min()
                })
                .flatten();
            match victim.and_then(|t| self.hung.remove(&t)) {
                Some(evicted) => {
                    self.hung.insert(ticket, work);
                    cut.push(evicted);
                }
                None => cut.push(work),
            }
        }
        cut
    }

    /// A poll (or discovery) ended; its slot is free. For a poll the edge runs the decision
    /// step next and then calls [`Scheduler::step_ended`]. `jitter` is a uniform draw from
    /// `[0, 1)` for the backoff. Stale tickets are ignored.
    pub fn poll_ended(&mut self, work: &Work, ticket: u64, ended: Ended, now: Now, jitter: f64) {
        match work {
            Work::Discovery => {
                if self.discovery == (DiscoveryPhase::Running { ticket }) {
                    self.discovery = DiscoveryPhase::Idle;
                    self.free(ticket, now);
                }
            }
            Work::Poll(key) => {
                let Some(job) = self.jobs.get(key) else {
                    return;
                };
                let Phase::Polling {
                    ticket: current,
                    started,
                } = job.phase
                else {
                    return;
                };
                if current != ticket {
                    return;
                }
                let held_ms = self.free_at(started.real_ms, ticket, work, Some(job.standing), now);
                if ended == Ended::Answered {
                    let cost = held_ms.min(ms(self.settings.hung_after)) as f64;
                    self.poll_cost_ms = Some(match self.poll_cost_ms {
                        None => cost,
                        Some(avg) => avg + COST_WEIGHT * (cost - avg),
                    });
                }
                let interval = self.effective_interval_ms;
                let Some(job) = self.jobs.get_mut(key) else {
                    return;
                };
                let next_due_ms = match ended {
                    Ended::Answered => {
                        job.standing = Standing::Answering;
                        job.backoff.reset();
                        job.timeouts_in_a_row = 0;
                        job.last_answer_ms = Some(now.clock_ms);
                        // Fixed rate: one interval after this poll started.
                        started.clock_ms.saturating_add(interval)
                    }
                    Ended::Failed | Ended::TimedOut => {
                        job.standing = Standing::Unproven;
                        if ended == Ended::TimedOut {
                            job.timeouts_in_a_row = job.timeouts_in_a_row.saturating_add(1);
                        } else {
                            job.timeouts_in_a_row = 0;
                        }
                        now.clock_ms
                            .saturating_add(ms(job.backoff.next_delay(jitter)))
                    }
                };
                job.phase = Phase::Stepping {
                    ticket,
                    next_due_ms,
                };
            }
        }
    }

    /// The decision step after a poll is over: the job waits for its next poll.
    pub fn step_ended(&mut self, key: &JobKey, ticket: u64) {
        let next = match self.jobs.get(key).map(|j| j.phase) {
            Some(Phase::Stepping {
                ticket: current,
                next_due_ms,
            }) if current == ticket => next_due_ms,
            _ => return,
        };
        self.enqueue(key, next);
    }

    /// The backoff delay a failed poll of `key` was given (for its log line).
    pub fn retry_in(&self, key: &str, now: Now) -> Option<Duration> {
        match self.jobs.get(key)?.phase {
            Phase::Stepping { next_due_ms, .. }
            | Phase::Waiting {
                due_ms: next_due_ms,
                ..
            } => Some(Duration::from_millis(
                next_due_ms.saturating_sub(now.clock_ms),
            )),
            Phase::Polling { .. } => None,
        }
    }

    /// When to call again at the latest, if nothing else happens: the next due time on the
    /// daemon clock, and the next hung check on the real clock. Due work that only waits
    /// for a slot is not included: a slot frees only through an event the edge reports.
    pub fn next_wakeup(&self, now: Now) -> (Option<u64>, Option<u64>) {
        let after = |q: &BTreeSet<(u64, u64, JobKey)>| {
            q.range((now.clock_ms + 1, 0, Arc::<str>::from(""))..)
                .next()
                .map(|(d, _, _)| *d)
        };
        let discovery = match self.discovery {
            DiscoveryPhase::Due(d) if d > now.clock_ms => Some(d),
            _ => None,
        };
        let clock = [after(&self.queues[0]), after(&self.queues[1]), discovery]
            .into_iter()
            .flatten()
            .min();
        let real = self
            .holding
            .first()
            .map(|(started, _, _)| started.saturating_add(ms(self.settings.hung_after)));
        (clock, real)
    }

    /// Plans the interval from the jobs watched and what an answered poll costs: stretched
    /// evenly when the slots cannot cover every job every configured interval. Returns the
    /// change, if any, for a log line.
    pub fn plan_interval(&mut self) -> Option<IntervalChange> {
        let configured = ms(self.settings.poll_interval);
        let cost = self.poll_cost_ms?;
        let capacity = self.settings.slots as f64 * TARGET_UTILIZATION;
        let needed = (self.jobs.len() as f64 * cost / capacity).ceil() as u64;
        let planned = if needed > configured {
            needed.div_ceil(STRETCH_STEP_MS) * STRETCH_STEP_MS
        } else {
            configured
        };
        let before = self.effective_interval_ms;
        // Move only on a real change, so the interval does not wobble with the average.
        let small = planned.abs_diff(before) * 10 < before && planned != configured;
        if planned == before || small {
            return None;
        }
        self.effective_interval_ms = planned;
        if planned < before {
            self.pull_in(before - planned);
        }
        Some(IntervalChange {
            from: Duration::from_millis(before),
            to: Duration::from_millis(planned),
            jobs: self.jobs.len(),
            poll_cost: Duration::from_micros((cost * 1000.0) as u64),
        })
    }

    /// The keep-up figures now (one pass over the jobs).
    pub fn keep_up(&self, now: Now) -> KeepUp {
        let twice = ms(self.settings.poll_interval).saturating_mul(2);
        let mut in_time = 0;
        let mut oldest = 0;
        for job in self.jobs.values() {
            let age = now
                .clock_ms
                .saturating_sub(job.last_answer_ms.unwrap_or(job.watched_since_ms));
            oldest = oldest.max(age);
            if age <= twice {
                in_time += 1;
            }
        }
        let lag = self.queues[Standing::Answering as usize]
            .first()
            .map_or(0, |(due, _, _)| now.clock_ms.saturating_sub(*due));
        KeepUp {
            jobs: self.jobs.len(),
            polled_in_time: in_time,
            oldest_answer_age: Duration::from_millis(oldest),
            poll_interval: self.settings.poll_interval,
            effective_interval: self.effective_interval(),
            schedule_lag: Duration::from_millis(lag),
            hung_polls: self.hung.len(),
        }
    }

    /// The interval shrank by `delta_ms`: answering jobs planned at the longer one come due
    /// that much sooner, keeping their spread.
    fn pull_in(&mut self, delta_ms: u64) {
        let queue = std::mem::take(&mut self.queues[Standing::Answering as usize]);
        for (due, seq, key) in queue {
            let due = due.saturating_sub(delta_ms);
            if let Some(job) = self.jobs.get_mut(&key) {
                job.phase = Phase::Waiting { due_ms: due, seq };
            }
            self.queues[Standing::Answering as usize].insert((due, seq, key));
        }
        for job in self.jobs.values_mut() {
            if let Phase::Stepping {
                ticket,
                next_due_ms,
            } = job.phase
            {
                if job.standing == Standing::Answering {
                    job.phase = Phase::Stepping {
                        ticket,
                        next_due_ms: next_due_ms.saturating_sub(delta_ms),
                    };
                }
            }
        }
    }

    fn enqueue(&mut self, key: &JobKey, due_ms: u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(job) = self.jobs.get_mut(key) {
            job.phase = Phase::Waiting { due_ms, seq };
            self.queues[job.standing as usize].insert((due_ms, seq, key.clone()));
        }
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    fn release_slot(&mut self, standing: Standing) {
        if standing == Standing::Unproven {
            self.unproven_holding = self.unproven_holding.saturating_sub(1);
        }
    }

    /// Frees discovery's slot or pool place.
    fn free(&mut self, ticket: u64, now: Now) {
        let held = self
            .holding
            .iter()
            .find(|(_, t, _)| *t == ticket)
            .map(|(s, _, _)| *s);
        match held {
            Some(started) => {
                self.free_at(started, ticket, &Work::Discovery, None, now);
            }
            None => {
                self.hung.remove(&ticket);
            }
        }
    }

    /// Frees the slot (or pool place) of work started at `started_real_ms`; returns how long
    /// it held a slot.
    fn free_at(
        &mut self,
        started_real_ms: u64,
        ticket: u64,
        work: &Work,
        standing: Option<Standing>,
        now: Now,
    ) -> u64 {
        if self
            .holding
            .remove(&(started_real_ms, ticket, work.clone()))
        {
            if let Some(standing) = standing {
                self.release_slot(standing);
            }
            now.real_ms.saturating_sub(started_real_ms)
        } else {
            self.hung.remove(&ticket);
            ms(self.settings.hung_after)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn settings(slots: usize) -> SchedulerSettings {
        SchedulerSettings {
            poll_interval: Duration::from_secs(15),
            poll_deadline: Duration::from_secs(10),
            hung_after: Duration::from_secs(1),
            slots,
            max_hung: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
        }
    }

    fn at(ms: u64) -> Now {
        Now {
            clock_ms: ms,
            real_ms: ms,
        }
    }

    fn key(i: usize) -> JobKey {
        Arc::from(format!("job-{i:05}").as_str())
    }

    fn poll_key(start: &Start) -> JobKey {
        match &start.work {
            Work::Poll(k) => k.clone(),
            Work::Discovery => panic!("expected a poll, got discovery"),
        }
    }

    /// Ends a poll and its decision step at once.
    fn finish(s: &mut Scheduler, start: &Start, ended: Ended, now: Now) {
        s.poll_ended(&start.work, start.ticket, ended, now, 0.0);
        if let Work::Poll(k) = &start.work {
            s.step_ended(k, start.ticket);
        }
    }

    #[test]
    fn slots_bound_the_polls_and_a_deadline_counts_from_the_start() {
        let mut s = Scheduler::new(settings(2));
        for i in 0..5 {
            s.add_job(key(i), at(0), Duration::ZERO);
        }
        let a = s.next_start(at(0)).unwrap();
        assert_eq!(
            s.next_start(at(0)),
            None,
            "the last slot is kept for answering jobs"
        );
        assert_eq!(a.deadline, Duration::from_secs(10));
        finish(&mut s, &a, Ended::Answered, at(700));
        // A job that queued 700 ms still gets its whole deadline.
        let c = s.next_start(at(700)).unwrap();
        assert_eq!(c.deadline, Duration::from_secs(10));
        assert_eq!(c.waited, Duration::from_millis(700));
        assert_ne!(poll_key(&c), poll_key(&a));
        // The answering job gets the last slot when due.
        let again = s.next_start(at(15_000)).unwrap();
        assert_eq!(poll_key(&again), poll_key(&a));
        assert_eq!(s.next_start(at(15_000)), None, "two slots");
    }

    #[test]
    fn an_answered_job_is_due_one_interval_after_its_poll_started() {
        let mut s = Scheduler::new(settings(1));
        s.add_job(key(0), at(0), Duration::from_millis(300));
        assert_eq!(s.next_start(at(299)), None);
        assert_eq!(s.next_wakeup(at(299)), (Some(300), None));
        let p = s.next_start(at(300)).unwrap();
        assert_eq!(s.next_wakeup(at(300)), (None, Some(1_300)));
        s.poll_ended(&p.work, p.ticket, Ended::Answered, at(340), 0.0);
        assert_eq!(
            s.next_start(at(20_000)),
            None,
            "not due while its step runs"
        );
        s.step_ended(&poll_key(&p), p.ticket);
        assert_eq!(s.next_start(at(15_299)), None);
        assert!(s.next_start(at(15_300)).is_some());
    }

    #[test]
    fn failures_back_off_and_timeouts_halve_the_deadline() {
        let mut s = Scheduler::new(settings(1));
        s.add_job(key(0), at(0), Duration::ZERO);
        let p = s.next_start(at(0)).unwrap();
        finish(&mut s, &p, Ended::TimedOut, at(10_000));
        assert_eq!(
            s.retry_in("job-00000", at(10_000)),
            Some(Duration::from_millis(500))
        );
        let p = s.next_start(at(10_500)).unwrap();
        assert_eq!(p.deadline, Duration::from_secs(5));
        finish(&mut s, &p, Ended::TimedOut, at(15_500));
        let p = s.next_start(at(16_500)).unwrap();
        assert_eq!(p.deadline, Duration::from_millis(2_500));
        let mut now = 20_000;
        let mut last = p;
        for _ in 0..6 {
            finish(&mut s, &last, Ended::TimedOut, at(now));
            now += 10_000;
            last = s.next_start(at(now)).unwrap();
        }
        assert_eq!(
            last.deadline,
            Duration::from_secs(1),
            "never below hung_after"
        );
        finish(&mut s, &last, Ended::Answered, at(now + 5));
        let p = s.next_start(at(now + 15_000)).unwrap();
        assert_eq!(p.deadline, Duration::from_secs(10), "an answer restores it");
    }

    #[test]
    fn answering_jobs_keep_a_slot_free_of_unproven_ones() {
        let mut s = Scheduler::new(settings(4));
        for i in 0..100 {
            s.add_job(key(i), at(0), Duration::ZERO);
        }
        let started: Vec<Start> = std::iter::from_fn(|| s.next_start(at(0))).collect();
        assert_eq!(started.len(), 3, "unproven jobs never take the last slot");
        // One of them answers: it is answering now, and when due gets the free slot
        // although 97 unproven jobs were due long before it.
        finish(&mut s, &started[0], Ended::Answered, at(5));
        let answering = poll_key(&started[0]);
        let next = s.next_start(at(15_000)).unwrap();
        assert_eq!(poll_key(&next), answering);
        assert_eq!(
            s.next_start(at(15_000)),
            None,
            "the last free slot stays free"
        );
    }

    #[test]
    fn while_answering_jobs_wait_unproven_ones_get_a_quarter_of_the_slots() {
        let mut s = Scheduler::new(settings(8));
        for i in 0..20 {
            s.add_job(key(i), at(0), Duration::ZERO);
        }
        // Make ten answering, all due at 15 s.
        for _ in 0..10 {
            let p = s.next_start(at(0)).unwrap();
            finish(&mut s, &p, Ended::Answered, at(0));
        }
        let mut unproven = 0;
        let mut answering = 0;
        while let Some(p) = s.next_start(at(15_000)) {
            if p.waited >= Duration::from_secs(15) {
                unproven += 1;
            } else {
                answering += 1;
            }
        }
        assert_eq!((unproven, answering), (2, 6));
    }

    #[test]
    fn hung_polls_give_their_slot_back_and_a_full_pool_cuts() {
        let mut s = Scheduler::new(SchedulerSettings {
            max_hung: 1,
            ..settings(2)
        });
        for i in 0..4 {
            s.add_job(key(i), at(0), Duration::ZERO);
        }
        let a = s.next_start(at(0)).unwrap();
        assert_eq!(
            s.next_start(at(0)),
            None,
            "one slot kept for answering jobs"
        );
        assert!(s.expire(at(999)).is_empty());
        assert!(s.expire(at(1_000)).is_empty(), "into the pool");
        assert_eq!(s.keep_up(at(1_000)).hung_polls, 1);
        let b = s.next_start(at(1_000)).unwrap();
        assert_eq!(
            s.expire(at(2_000)),
            vec![b.work.clone()],
            "the pool is full"
        );
        let c = s.next_start(at(2_000)).unwrap();
        assert_ne!(poll_key(&c), poll_key(&b));
        // The hung poll answers late: its pool place frees, and it counts as answered.
        finish(&mut s, &a, Ended::Answered, at(3_000));
        assert_eq!(s.keep_up(at(3_000)).hung_polls, 0);
        finish(&mut s, &b, Ended::TimedOut, at(2_001));
    }

    #[test]
    fn a_slow_answering_poll_takes_the_place_of_a_hung_unproven_one() {
        let mut s = Scheduler::new(SchedulerSettings {
            max_hung: 1,
            ..settings(4)
        });
        s.add_job(key(0), at(0), Duration::ZERO);
        let p = s.next_start(at(0)).unwrap();
        finish(&mut s, &p, Ended::Answered, at(5));
        s.add_job(key(1), at(5), Duration::ZERO);
        let hanging = s.next_start(at(5)).unwrap();
        assert_eq!(poll_key(&hanging), key(1));
        assert!(s.expire(at(1_005)).is_empty(), "into the pool");
        let slow = s.next_start(at(15_000)).unwrap();
        assert_eq!(poll_key(&slow), key(0));
        assert_eq!(
            s.expire(at(16_000)),
            vec![hanging.work.clone()],
            "the unproven one is cut, the answering one waits in the pool"
        );
        finish(&mut s, &hanging, Ended::TimedOut, at(16_000));
        finish(&mut s, &slow, Ended::Answered, at(16_500));
        assert_eq!(s.keep_up(at(16_500)).hung_polls, 0);
    }

    #[test]
    fn discovery_takes_the_next_free_slot_first() {
        let mut s = Scheduler::new(settings(1));
        s.add_job(key(0), at(0), Duration::ZERO);
        s.discover_at(0);
        let d = s.next_start(at(0)).unwrap();
        assert_eq!(d.work, Work::Discovery);
        assert_eq!(s.next_start(at(0)), None);
        s.discover_at(5);
        s.poll_ended(&Work::Discovery, d.ticket, Ended::Answered, at(3), 0.0);
        let p = s.next_start(at(3)).unwrap();
        assert!(matches!(p.work, Work::Poll(_)));
    }

    #[test]
    fn a_removed_job_frees_its_slot_and_stale_tickets_are_ignored() {
        let mut s = Scheduler::new(settings(2));
        s.add_job(key(0), at(0), Duration::ZERO);
        s.add_job(key(1), at(0), Duration::ZERO);
        let a = s.next_start(at(0)).unwrap();
        assert!(s.remove_job("job-00000"), "a poll was running");
        assert!(!s.remove_job("job-00000"));
        assert!(!s.contains("job-00000"));
        s.add_job(key(0), at(1), Duration::ZERO);
        // The old poll's end must not touch the new watch.
        finish(&mut s, &a, Ended::Answered, at(2));
        let b = s.next_start(at(2)).unwrap();
        let c = s.next_start(at(2));
        assert!(c.is_none(), "one unproven slot is kept free");
        assert_eq!(s.jobs(), 2);
        assert_ne!(a.ticket, b.ticket);
    }

    #[test]
    fn the_interval_stretches_evenly_when_the_slots_cannot_cover_every_job() {
        let mut s = Scheduler::new(settings(4));
        let jobs = 10_000;
        for i in 0..jobs {
            s.add_job(key(i), at(0), Duration::ZERO);
        }
        assert_eq!(s.plan_interval(), None, "nothing measured yet");
        // Answered polls hold a slot 10 ms: 10,000 jobs need 25 s of four slots at 100%.
        let mut now = 0;
        for _ in 0..200 {
            let p = s.next_start(at(now)).unwrap();
            now += 10;
            finish(&mut s, &p, Ended::Answered, at(now));
        }
        let change = s.plan_interval().unwrap();
        assert_eq!(change.from, Duration::from_secs(15));
        // 10,000 × 10 ms / (4 × 0.8) = 31.25 s, rounded up to 31.5 s.
        assert_eq!(change.to, Duration::from_millis(31_500));
        assert_eq!(s.effective_interval(), Duration::from_millis(31_500));
        assert_eq!(s.plan_interval(), None, "stable");
        let keep_up = s.keep_up(at(now));
        assert!(!keep_up.keeping_up());
        for i in 0..9_000 {
            s.remove_job(&format!("job-{i:05}"));
        }
        let due_before = s.next_wakeup(at(now)).0;
        let back = s.plan_interval().unwrap();
        assert_eq!(back.to, Duration::from_secs(15));
        // Jobs planned at 31.5 s come due 16.5 s sooner.
        let due_after = s.next_wakeup(at(now)).0;
        assert_eq!(due_before.map(|d| d - 16_500), due_after);
    }

    #[test]
    fn keep_up_counts_jobs_answered_within_twice_the_interval() {
        let mut s = Scheduler::new(settings(4));
        s.add_job(key(0), at(0), Duration::ZERO);
        s.add_job(key(1), at(0), Duration::ZERO);
        let p = s.next_start(at(0)).unwrap();
        finish(&mut s, &p, Ended::Answered, at(10));
        let k = s.keep_up(at(29_000));
        assert_eq!((k.jobs, k.polled_in_time), (2, 2));
        let k = s.keep_up(at(31_000));
        assert_eq!(k.polled_in_time, 0);
        assert_eq!(k.oldest_answer_age, Duration::from_secs(31));
        assert_eq!(k.schedule_lag, Duration::from_secs(16), "due at 15 s");
        assert!(!k.keeping_up());
        assert_eq!(
            Scheduler::new(settings(1)).keep_up(at(5)).in_time_ratio(),
            1.0
        );
    }

    /// How a simulated job answers.
    #[derive(Debug, Clone, Copy)]
    enum Behaviour {
        Answers { after_ms: u64 },
        Hangs,
    }

    /// Runs the scheduler against simulated jobs for `until_ms`, the edge's part played by
    /// this loop (deadlines and cuts enforced, steps instant), on one clock. Returns every
    /// job's answered-poll start times and the most polls in flight at once.
    fn simulate(
        settings: SchedulerSettings,
        jobs: &[Behaviour],
        until_ms: u64,
    ) -> (Vec<Vec<u64>>, usize) {
        let mut s = Scheduler::new(settings);
        for i in 0..jobs.len() {
            s.add_job(
                key(i),
                at(0),
                Duration::from_millis((i as u64 * 7919) % 2_000),
            );
        }
        // In flight: (end time, start, answered).
        let mut running: Vec<(u64, Start, bool, u64)> = Vec::new();
        let mut answered = vec![Vec::new(); jobs.len()];
        let mut most = 0;
        let mut now = 0;
        while now < until_ms {
            for work in s.expire(at(now)) {
                if let Some(i) = running.iter().position(|(_, st, _, _)| st.work == work) {
                    let (_, st, _, _) = running.remove(i);
                    finish(&mut s, &st, Ended::TimedOut, at(now));
                }
            }
            running.sort_by_key(|(end, ..)| *end);
            while running.first().is_some_and(|(end, ..)| *end <= now) {
                let (_, st, ok, started) = running.remove(0);
                if ok {
                    let i: usize = poll_key(&st)[4..].parse().unwrap();
                    answered[i].push(started);
                }
                let ended = if ok { Ended::Answered } else { Ended::TimedOut };
                finish(&mut s, &st, ended, at(now));
            }
            while let Some(st) = s.next_start(at(now)) {
                let i: usize = poll_key(&st)[4..].parse().unwrap();
                let deadline = now + st.deadline.as_millis() as u64;
                let (end, ok) = match jobs[i] {
                    Behaviour::Answers { after_ms } if now + after_ms <= deadline => {
                        (now + after_ms, true)
                    }
                    _ => (deadline, false),
                };
                running.push((end, st, ok, now));
            }
            most = most.max(running.len());
            let (clock, real) = s.next_wakeup(at(now));
            let next_end = running.iter().map(|(end, ..)| *end).min();
            now = [clock, real, next_end]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(until_ms)
                .max(now + 1);
        }
        (answered, most)
    }

    fn largest_gap(starts: &[u64], from_ms: u64) -> u64 {
        starts
            .windows(2)
            .filter(|w| w[0] >= from_ms)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(u64::MAX)
    }

    #[test]
    fn a_hundred_hanging_jobs_do_not_delay_a_healthy_one() {
        let settings = SchedulerSettings {
            poll_interval: Duration::from_secs(2),
            poll_deadline: Duration::from_secs(2),
            hung_after: Duration::from_millis(250),
            backoff_initial: Duration::from_millis(200),
            backoff_max: Duration::from_secs(1),
            ..settings(4)
        };
        let mut jobs = vec![Behaviour::Hangs; 100];
        jobs.push(Behaviour::Answers { after_ms: 5 });
        let (answered, most) = simulate(settings, &jobs, 60_000);
        let healthy = &answered[100];
        let first = healthy[0];
        assert!(first < 10_000, "first answered poll at {first} ms");
        assert!(
            healthy.len() as u64 >= (60_000 - first) / 2_000,
            "{} polls in 60 s, the first at {first} ms",
            healthy.len()
        );
        assert!(
            largest_gap(healthy, 0) <= 3_000,
            "largest gap {} ms",
            largest_gap(healthy, 0)
        );
        assert!(most <= 4 + 4, "slots plus the hung pool: {most}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever the budget and however many jobs hang, polls in flight stay within the
        /// slots plus the hung pool; a healthy job is first answered within one pass over
        /// the hanging jobs (each holds a slot for hung_after once before it is known to
        /// hang), and from then on polled at least every interval plus hung_after (1.5 × the
        /// interval here).
        #[test]
        fn hanging_jobs_never_starve_an_answering_one(
            slots in 1usize..8,
            max_hung in 0usize..8,
            hanging in 0usize..150,
            healthy in 1usize..20,
        ) {
            let settings = SchedulerSettings {
                poll_interval: Duration::from_secs(2),
                poll_deadline: Duration::from_secs(2),
                hung_after: Duration::from_millis(250),
                slots,
                max_hung,
                backoff_initial: Duration::from_millis(200),
                backoff_max: Duration::from_secs(1),
            };
            let mut jobs = vec![Behaviour::Hangs; hanging];
            jobs.extend(std::iter::repeat_n(Behaviour::Answers { after_ms: 3 }, healthy));
            let (answered, most) = simulate(settings, &jobs, 60_000);
            prop_assert!(most <= slots + max_hung, "{most} in flight");
            let unproven_slots = (slots.max(2) - 1) as u64;
            let one_pass = 2_000 + (hanging + healthy) as u64 * 250 / unproven_slots + 250;
            for starts in &answered[hanging..] {
                let first = *starts.first().expect("polled");
                prop_assert!(first <= one_pass, "first answer at {first} ms > {one_pass}");
                prop_assert!(largest_gap(starts, first) <= 2_250 + 5, "{starts:?}");
            }
        }

        /// Jobs due together start in due order, each once, and a job never runs twice.
        #[test]
        fn due_jobs_start_in_due_order(delays in proptest::collection::vec(0u64..5_000, 1..60)) {
            let mut s = Scheduler::new(settings(3));
            for (i, d) in delays.iter().enumerate() {
                s.add_job(key(i), at(0), Duration::from_millis(*d));
            }
            let mut seen = std::collections::HashSet::new();
            let mut last_due = 0;
            let mut now = 0;
            while seen.len() < delays.len() {
                now += 50;
                while let Some(p) = s.next_start(at(now)) {
                    let k = poll_key(&p);
                    let i: usize = k[4..].parse().unwrap();
                    prop_assert!(seen.insert(k.clone()));
                    prop_assert!(delays[i] >= last_due, "out of order");
                    last_due = delays[i];
                    s.remove_job(&k);
                }
            }
        }
    }
}
