//! What the daemon publishes for the HTTP server: readiness, the raw `/jobs/overview` body,
//! and each job's latest snapshot. Short critical sections only; readers never wait on I/O.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::collector::JobSnapshot;

/// Shared between the daemon (writer) and the HTTP handlers (readers).
#[derive(Debug, Default)]
pub struct StatusBoard {
    first_poll_attempted: AtomicBool,
    overview: RwLock<Option<Bytes>>,
    /// Why the schedule cannot keep up, while it cannot.
    falling_behind: RwLock<Option<String>>,
    jobs: RwLock<BTreeMap<String, Arc<JobSnapshot>>>,
}

impl StatusBoard {
    pub fn new() -> Arc<Self> {
        Arc::new(StatusBoard::default())
    }

    /// Ready means: configuration loaded and the first poll attempted, whatever its outcome.
    pub fn is_ready(&self) -> bool {
        self.first_poll_attempted.load(Ordering::Acquire)
    }

    /// Whether the schedule keeps up: `Err` with the reason while it cannot (the poll
    /// interval stretched, or answering jobs waiting more than an interval past due).
    pub fn keeping_up(&self) -> Result<(), String> {
        match &*self
            .falling_behind
            .read()
            .unwrap_or_else(|p| p.into_inner())
        {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }

    pub fn set_falling_behind(&self, reason: Option<String>) {
        *self
            .falling_behind
            .write()
            .unwrap_or_else(|p| p.into_inner()) = reason;
    }

    pub fn mark_first_poll_attempted(&self) {
        self.first_poll_attempted.store(true, Ordering::Release);
    }

    pub fn set_overview(&self, body: Bytes) {
        *self.overview.write().unwrap_or_else(|p| p.into_inner()) = Some(body);
    }

    /// The last `/jobs/overview` body the JobManager sent, verbatim.
    pub fn overview(&self) -> Option<Bytes> {
        self.overview
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn publish(&self, snapshot: JobSnapshot) {
        let mut jobs = self.jobs.write().unwrap_or_else(|p| p.into_inner());
        jobs.insert(snapshot.job_id.clone(), Arc::new(snapshot));
    }

    pub fn remove(&self, job_id: &str) {
        self.jobs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(job_id);
    }

    pub fn job(&self, job_id: &str) -> Option<Arc<JobSnapshot>> {
        self.jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(job_id)
            .cloned()
    }

    pub fn jobs(&self) -> Vec<Arc<JobSnapshot>> {
        self.jobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}
