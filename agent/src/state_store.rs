//! The agent's durable memory, one small JSON file: per job the engine's scaling state
//! (history, delayed scale-down), the observed restart times, and the action in flight. It is
//! written atomically (temporary file, fsync, rename, fsync of the directory), so a crash
//! leaves either the old or the new file, never a torn one. Without a path the state lives in
//! memory only.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use flink_autoscale_shared::protocol::{Outcome, Plan, Proposal};
use serde::{Deserialize, Serialize};

use crate::engine::ScalingState;

/// Format version of the file; bumped on incompatible changes.
const FILE_VERSION: u32 = 1;
/// Restart observations kept per job (newest last).
pub const MAX_RESTART_OBSERVATIONS: usize = 16;

/// Everything remembered about one job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobRecord {
    /// The engine's state as of the last applied decision or no-change evaluation.
    pub scaling: ScalingState,
    /// How long past rescales took until the job ran again, newest last.
    pub restarts: Vec<RestartObservation>,
    /// When the last action ended (verdict refused, outcome known), agent clock, Unix ms.
    pub last_action_ms: Option<u64>,
    /// No new proposal before this time (after a refusal).
    pub not_before_ms: u64,
    /// The one action in flight, if any.
    pub in_flight: Option<InFlight>,
}

/// One observed rescale restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartObservation {
    /// When the rescale was triggered (Unix ms).
    pub at_ms: u64,
    /// From triggering until the job ran at the new parallelism.
    pub duration_ms: u64,
}

/// A proposal on its way through verdict, actuation, verification and outcome report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    /// Sent again verbatim on retries, so the proposal id keeps it idempotent.
    pub proposal: Proposal,
    pub proposed_at_ms: u64,
    /// The engine's state as it will be once this change is applied (history appended).
    pub state_if_applied: ScalingState,
    pub stage: Stage,
}

/// Where an in-flight action stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case", deny_unknown_fields)]
pub enum Stage {
    /// Waiting for the verdict; retried with the same proposal id.
    AwaitingVerdict { attempts: u32, next_attempt_ms: u64 },
    /// Approved, not yet handed to the realizer (or the JobManager asked to retry later).
    Approved {
        plan: Plan,
        approved_at_ms: u64,
        next_attempt_ms: u64,
    },
    /// Handed to the realizer at `actuated_at_ms`; watching for the approved parallelism.
    /// Persisted before the realizer runs, so an actuation is never repeated after a crash.
    Actuating {
        plan: Plan,
        actuated_at_ms: u64,
        deadline_ms: u64,
    },
    /// The outcome is known and must reach the coordinator.
    Reporting {
        outcome: Outcome,
        attempts: u32,
        next_attempt_ms: u64,
    },
}

impl Stage {
    pub fn label(&self) -> &'static str {
        match self {
            Stage::AwaitingVerdict { .. } => "awaiting_verdict",
            Stage::Approved { .. } => "approved",
            Stage::Actuating { .. } => "actuating",
            Stage::Reporting { .. } => "reporting",
        }
    }
}

/// What is on disk.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    jobs: BTreeMap<String, JobRecord>,
}

/// The state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid agent state file: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Per-job records, shared by every job task, persisted on every change.
pub struct StateStore {
    path: Option<PathBuf>,
    jobs: Mutex<BTreeMap<String, JobRecord>>,
    /// Serializes file writes so a slower older write never lands after a newer one.
    write: tokio::sync::Mutex<()>,
    /// The last write failed: write again even if nothing changed since.
    dirty: AtomicBool,
}

impl StateStore {
    /// Memory only: nothing survives a restart.
    pub fn in_memory() -> Arc<Self> {
        Arc::new(StateStore {
            path: None,
            jobs: Mutex::new(BTreeMap::new()),
            write: tokio::sync::Mutex::new(()),
            dirty: AtomicBool::new(false),
        })
    }

    /// Opens `path`, reading it if it exists. The directory must be writable: this is checked
    /// now, so a misconfiguration stops the agent at start and not mid-rescale.
    pub fn open(path: &Path) -> Result<Arc<Self>, StoreError> {
        let jobs = match std::fs::read(path) {
            Ok(bytes) => {
                let file: StateFile =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                        path: path.to_path_buf(),
                        detail: e.to_string(),
                    })?;
                if file.version != FILE_VERSION {
                    return Err(StoreError::Corrupt {
                        path: path.to_path_buf(),
                        detail: format!(
                            "version {} is not supported (expected {FILE_VERSION})",
                            file.version
                        ),
                    });
                }
                file.jobs
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(StoreError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        write_atomically(path, &serialize(&jobs))?;
        Ok(Arc::new(StateStore {
            path: Some(path.to_path_buf()),
            jobs: Mutex::new(jobs),
            write: tokio::sync::Mutex::new(()),
            dirty: AtomicBool::new(false),
        }))
    }

    /// The job's record (default when none is stored).
    pub fn get(&self, job_id: &str) -> JobRecord {
        self.lock().get(job_id).cloned().unwrap_or_default()
    }

    /// Every stored job id.
    pub fn job_ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Replaces the job's record and persists the file if it changed.
    pub async fn put(&self, job_id: &str, record: JobRecord) -> Result<(), StoreError> {
        let _writer = self.write.lock().await;
        let bytes = {
            let mut jobs = self.lock();
            if jobs.get(job_id) == Some(&record) && !self.dirty.load(Ordering::Relaxed) {
                return Ok(());
            }
            jobs.insert(job_id.to_string(), record);
            match &self.path {
                Some(_) => serialize(&jobs),
                None => return Ok(()),
            }
        };
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let written = tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StoreError::Write {
                path: self.path.clone().unwrap_or_default(),
                source: std::io::Error::other(e.to_string()),
            })
            .and_then(|r| r);
        self.dirty.store(written.is_err(), Ordering::Relaxed);
        written
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, JobRecord>> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn serialize(jobs: &BTreeMap<String, JobRecord>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        version: u32,
        jobs: &'a BTreeMap<String, JobRecord>,
    }
    // Serializing plain data into memory does not fail.
    serde_json::to_vec_pretty(&Out {
        version: FILE_VERSION,
        jobs,
    })
    .unwrap_or_default()
}

/// tmp + fsync + rename + fsync(dir). The temporary file sits next to the target so the
/// rename stays on one filesystem.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let fail = |source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let store = StateStore::open(&path).unwrap();
        let record = JobRecord {
            restarts: vec![RestartObservation {
                at_ms: 1,
                duration_ms: 2,
            }],
            not_before_ms: 7,
            ..JobRecord::default()
        };
        store.put("job", record.clone()).await.unwrap();
        drop(store);
        let again = StateStore::open(&path).unwrap();
        assert_eq!(again.get("job"), record);
        assert_eq!(again.job_ids(), ["job"]);
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{ not json").unwrap();
        let e = StateStore::open(&path).err().unwrap().to_string();
        assert!(e.contains("state.json"), "{e}");
    }

    #[test]
    fn an_unwritable_directory_fails_at_open() {
        let e = StateStore::open(Path::new("/proc/no-such-dir/state.json"))
            .err()
            .unwrap();
        assert!(matches!(e, StoreError::Write { .. }), "{e}");
    }
}
