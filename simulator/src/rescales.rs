//! A job's rescale history, as Flink 2.3's adaptive scheduler keeps it (FLIP-487/495): one
//! record per rescale with what triggered it (the initial schedule, a requirements update,
//! a failover), the parallelism before and after, the scheduler states it went through, and
//! how it ended. Served by `/jobs/:jid/rescales/*` when the scenario sets
//! `web.adaptive-scheduler.rescale-history.size` above 0 (`api/rescales.rs`).

use crate::ids::stable_id;

/// What started a rescale (Flink's `TriggerCause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    InitialSchedule,
    UpdateRequirement,
    RecoverableFailover,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::InitialSchedule => "INITIAL_SCHEDULE",
            Trigger::UpdateRequirement => "UPDATE_REQUIREMENT",
            Trigger::RecoverableFailover => "RECOVERABLE_FAILOVER",
        }
    }
}

/// How a rescale ended (Flink's `TerminalState` and `TerminatedReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Succeeded,
    /// Requirements that change nothing with the resources at hand.
    NoChange,
    /// Newer requirements replaced them before the rescale ran.
    RequirementsUpdated,
    JobFinished,
    JobCanceled,
}

impl Ending {
    pub fn terminal_state(self) -> &'static str {
        match self {
            Ending::Succeeded => "COMPLETED",
            _ => "IGNORED",
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Ending::Succeeded => "SUCCEEDED",
            Ending::NoChange => "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
            Ending::RequirementsUpdated => "RESOURCE_REQUIREMENTS_UPDATED",
            Ending::JobFinished => "JOB_FINISHED",
            Ending::JobCanceled => "JOB_CANCELED",
        }
    }
}

/// One scheduler state a rescale went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateSpan {
    pub state: &'static str,
    pub enter_ms: u64,
    pub leave_ms: Option<u64>,
}

/// One rescale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RescaleRecord {
    pub uuid: String,
    pub requirements_uuid: String,
    pub trigger: Trigger,
    pub start_ms: u64,
    pub end_ms: Option<u64>,
    pub ending: Option<Ending>,
    /// Per vertex: the requirements' upper and lower bounds, and the parallelism before
    /// (none at the initial schedule) and after (once ended at a new parallelism).
    pub desired: Vec<u32>,
    pub sufficient: Vec<u32>,
    pub pre: Option<Vec<u32>>,
    pub post: Option<Vec<u32>>,
    pub states: Vec<StateSpan>,
}

/// Counts per terminal state, over every rescale of the job (not only those kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RescaleCounts {
    pub completed: u64,
    pub ignored: u64,
    pub failed: u64,
}

/// The rescales of one job, newest last; at most `size` are kept (none when 0).
#[derive(Debug, Clone, Default)]
pub(crate) struct RescaleLog {
    size: usize,
    job_id: String,
    next: u64,
    pub records: Vec<RescaleRecord>,
    pub counts: RescaleCounts,
}

impl RescaleLog {
    pub fn new(job_id: &str, size: u32) -> Self {
        RescaleLog {
            size: size as usize,
            job_id: job_id.to_string(),
            ..RescaleLog::default()
        }
    }

    /// Starts a rescale.
    pub fn begin(
        &mut self,
        trigger: Trigger,
        now_ms: u64,
        requirements: &[(u32, u32)],
        pre: Option<&[u32]>,
    ) {
        if self.size == 0 {
            return;
        }
        // Newer requirements replace a requirements update that has not run yet.
        if trigger == Trigger::UpdateRequirement {
            self.end_open(now_ms, Ending::RequirementsUpdated, None);
        }
        let n = self.next.to_string();
        self.next += 1;
        self.records.push(RescaleRecord {
            uuid: stable_id(&["rescale", &self.job_id, &n]),
            requirements_uuid: stable_id(&["resource-requirements", &self.job_id, &n]),
            trigger,
            start_ms: now_ms,
            end_ms: None,
            ending: None,
            desired: requirements.iter().map(|r| r.1).collect(),
            sufficient: requirements.iter().map(|r| r.0).collect(),
            pre: pre.map(<[u32]>::to_vec),
            post: None,
            states: vec![StateSpan {
                state: "Executing",
                enter_ms: now_ms,
                leave_ms: None,
            }],
        });
        if self.records.len() > self.size {
            self.records.remove(0);
        }
    }

    /// The open rescale's tasks went down: it is restarting.
    pub fn restarting(&mut self, now_ms: u64) {
        if let Some(r) = self.open_mut() {
            close_state(r, now_ms);
            r.states.push(StateSpan {
                state: "Restarting",
                enter_ms: now_ms,
                leave_ms: None,
            });
        }
    }

    /// Ends the open rescale (if any) at `post` parallelism or without a change.
    pub fn end_open(&mut self, now_ms: u64, ending: Ending, post: Option<&[u32]>) {
        let Some(r) = self.open_mut() else {
            return;
        };
        close_state(r, now_ms);
        if ending == Ending::Succeeded {
            for state in ["CreatingExecutionGraph", "Executing"] {
                r.states.push(StateSpan {
                    state,
                    enter_ms: now_ms,
                    leave_ms: Some(now_ms),
                });
            }
        }
        r.end_ms = Some(now_ms);
        r.ending = Some(ending);
        r.post = post.map(<[u32]>::to_vec);
        match ending.terminal_state() {
            "COMPLETED" => self.counts.completed += 1,
            _ => self.counts.ignored += 1,
        }
    }

    /// A rescale that ended as soon as it began (the initial schedule; requirements that
    /// change nothing).
    pub fn instant(
        &mut self,
        trigger: Trigger,
        now_ms: u64,
        requirements: &[(u32, u32)],
        pre: Option<&[u32]>,
        ending: Ending,
        post: Option<&[u32]>,
    ) {
        self.begin(trigger, now_ms, requirements, pre);
        self.end_open(now_ms, ending, post);
    }

    /// Rescales started and not ended.
    pub fn in_progress(&self) -> u64 {
        self.records.iter().filter(|r| r.ending.is_none()).count() as u64
    }

    /// The newest rescale that ended in `state`.
    pub fn latest(&self, state: &str) -> Option<&RescaleRecord> {
        self.records
            .iter()
            .rev()
            .find(|r| r.ending.is_some_and(|e| e.terminal_state() == state))
    }

    pub fn find(&self, uuid: &str) -> Option<&RescaleRecord> {
        self.records
            .iter()
            .find(|r| r.uuid.eq_ignore_ascii_case(uuid))
    }

    fn open_mut(&mut self) -> Option<&mut RescaleRecord> {
        self.records.iter_mut().rev().find(|r| r.ending.is_none())
    }
}

fn close_state(r: &mut RescaleRecord, now_ms: u64) {
    if let Some(last) = r.states.last_mut().filter(|s| s.leave_ms.is_none()) {
        last.leave_ms = Some(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_runs_its_course_and_a_newer_one_replaces_a_waiting_one() {
        let mut log = RescaleLog::new("j", 10);
        log.instant(
            Trigger::InitialSchedule,
            0,
            &[(1, 2)],
            None,
            Ending::Succeeded,
            Some(&[2]),
        );
        log.begin(Trigger::UpdateRequirement, 10, &[(1, 4)], Some(&[2]));
        log.begin(Trigger::UpdateRequirement, 20, &[(1, 3)], Some(&[2]));
        assert_eq!(log.in_progress(), 1);
        log.restarting(25);
        log.end_open(30, Ending::Succeeded, Some(&[3]));
        assert_eq!(
            log.counts,
            RescaleCounts {
                completed: 2,
                ignored: 1,
                failed: 0
            }
        );
        let replaced = log.latest("IGNORED").unwrap();
        assert_eq!(replaced.ending, Some(Ending::RequirementsUpdated));
        let done = log.latest("COMPLETED").unwrap();
        assert_eq!((done.start_ms, done.end_ms), (20, Some(30)));
        assert_eq!(done.post.as_deref(), Some(&[3][..]));
        let states: Vec<&str> = done.states.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                "Executing",
                "Restarting",
                "CreatingExecutionGraph",
                "Executing"
            ]
        );
        assert!(log.find(&done.uuid.to_ascii_uppercase()).is_some());
    }

    #[test]
    fn only_the_newest_are_kept_and_nothing_when_off() {
        let mut log = RescaleLog::new("j", 2);
        for t in 0..5 {
            log.instant(
                Trigger::RecoverableFailover,
                t,
                &[(1, 1)],
                None,
                Ending::Succeeded,
                None,
            );
        }
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.counts.completed, 5);
        let mut off = RescaleLog::new("j", 0);
        off.begin(Trigger::UpdateRequirement, 0, &[(1, 2)], Some(&[1]));
        assert!(off.records.is_empty());
    }
}
