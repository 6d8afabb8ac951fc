//! The agent's durable memory, one small JSON file: per job the engine's scaling state
//! (history, delayed scale-down), the observed restart times, and the action in flight. It is
//! written atomically (temporary file, fsync, rename, fsync of the directory), so a crash
//! leaves either the old or the new file, never a torn one. Without a path the state lives in
//! memory only.
//!
//! Beside it, `<name>.profiles.json` keeps each job's learned load profile (a few KiB per
//! source, for predictive scaling). It changes once per 15-minute bucket, so it has a file of
//! its own and the main file stays small for the writes of every poll.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use flink_autoscale_core::protocol::{Outcome, Plan, Proposal};
use serde::{Deserialize, Serialize};

use flink_autoscale_core::engine::ScalingState;
use flink_autoscale_core::forecast::{LoadProfile, PROFILE_VERSION};

/// Format version of the file; bumped on incompatible changes.
const FILE_VERSION: u32 = 1;
/// Format version of the profiles file.
const PROFILES_FILE_VERSION: u32 = 1;
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
    /// How long the job then took to catch up, newest last (at most as many as `restarts`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catch_ups: Vec<CatchUpObservation>,
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

/// How long the job took to catch up after one observed restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatchUpObservation {
    /// The restart's `at_ms`.
    pub restart_at_ms: u64,
    /// From running again until the source backlog stopped falling.
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
    /// When the agent learned that a person approved it (after a pending verdict): the
    /// evidence counts as vouched for from then, for `control.approval_max_age`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by_person_at_ms: Option<u64>,
}

impl InFlight {
    /// How old the proposal's evidence is at `now_ms`: since the proposal, or since a
    /// person approved it.
    pub fn evidence_age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.approved_by_person_at_ms.unwrap_or(self.proposed_at_ms))
    }
}

/// Where an in-flight action stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case", deny_unknown_fields)]
pub enum Stage {
    /// Waiting for the verdict; retried with the same proposal id.
    AwaitingVerdict { attempts: u32, next_attempt_ms: u64 },
    /// The verdict is pending a person's approval: polled (`GET /v1/proposals/{id}`) with
    /// backoff until final; never re-proposed or applied meanwhile.
    Pending {
        since_ms: u64,
        attempts: u32,
        next_poll_ms: u64,
    },
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
            Stage::Pending { .. } => "pending",
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

/// What is in the profiles file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfilesFile {
    version: u32,
    profiles: BTreeMap<String, LoadProfile>,
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
    /// Learned load profiles per job, and where they are kept.
    profiles: Mutex<BTreeMap<String, LoadProfile>>,
    profiles_path: Option<PathBuf>,
    profiles_write: tokio::sync::Mutex<()>,
}

impl StateStore {
    /// Memory only: nothing survives a restart.
    pub fn in_memory() -> Arc<Self> {
        Arc::new(StateStore {
            path: None,
            jobs: Mutex::new(BTreeMap::new()),
            write: tokio::sync::Mutex::new(()),
            dirty: AtomicBool::new(false),
            profiles: Mutex::new(BTreeMap::new()),
            profiles_path: None,
            profiles_write: tokio::sync::Mutex::new(()),
        })
    }

    /// Opens `path`, reading it if it exists. The directory must be writable: this is checked
    /// now, so a misconfiguration stops the agent at start and not mid-rescale.
    pub fn open(path: &Path) -> Result<Arc<Self>, StoreError> {
        let jobs = Self::read_jobs(path)?;
        write_atomically(path, &serialize(&jobs))?;
        let profiles_path = profiles_path(path);
        let profiles = read_profiles(&profiles_path)?;
        Ok(Arc::new(StateStore {
            path: Some(path.to_path_buf()),
            jobs: Mutex::new(jobs),
            write: tokio::sync::Mutex::new(()),
            dirty: AtomicBool::new(false),
            profiles: Mutex::new(profiles),
            profiles_path: Some(profiles_path),
            profiles_write: tokio::sync::Mutex::new(()),
        }))
    }

    /// What [`StateStore::open`] checks, without writing: the files read and parse, and the
    /// directory exists (`check-config`).
    pub fn check(path: &Path) -> Result<(), StoreError> {
        Self::read_jobs(path)?;
        read_profiles(&profiles_path(path))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(StoreError::Read {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("directory {} does not exist", dir.display()),
                ),
            });
        }
        Ok(())
    }

    /// The jobs recorded in the state file; none if it does not exist yet.
    fn read_jobs(path: &Path) -> Result<BTreeMap<String, JobRecord>, StoreError> {
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
        Ok(jobs)
    }

    /// The job's learned load profile (empty when none is stored).
    pub fn profile(&self, job_id: &str) -> LoadProfile {
        self.lock_profiles()
            .get(job_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Changes the job's profile; `change` returns whether something worth keeping changed
    /// (a finished bucket), and only then is the profiles file written.
    pub async fn update_profile(
        &self,
        job_id: &str,
        change: impl FnOnce(&mut LoadProfile) -> bool,
    ) -> Result<(), StoreError> {
        let _writer = self.profiles_write.lock().await;
        let bytes = {
            let mut profiles = self.lock_profiles();
            if !change(profiles.entry(job_id.to_string()).or_default()) {
                return Ok(());
            }
            #[derive(Serialize)]
            struct Out<'a> {
                version: u32,
                profiles: &'a BTreeMap<String, LoadProfile>,
            }
            // Compact: the buckets are many numbers, read by no one but the agent.
            serde_json::to_vec(&Out {
                version: PROFILES_FILE_VERSION,
                profiles: &profiles,
            })
            .unwrap_or_default()
        };
        let Some(path) = self.profiles_path.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StoreError::Write {
                path: self.profiles_path.clone().unwrap_or_default(),
                source: std::io::Error::other(e.to_string()),
            })
            .and_then(|r| r)
    }

    fn lock_profiles(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, LoadProfile>> {
        self.profiles.lock().unwrap_or_else(|e| e.into_inner())
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

/// `agent-state.json` keeps its profiles in `agent-state.profiles.json`.
fn profiles_path(path: &Path) -> PathBuf {
    path.with_extension("profiles.json")
}

/// The stored profiles; those of another profile version are dropped and relearned.
fn read_profiles(path: &Path) -> Result<BTreeMap<String, LoadProfile>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(StoreError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let corrupt = |detail: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let file: ProfilesFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.version != PROFILES_FILE_VERSION {
        return Err(corrupt(format!(
            "version {} is not supported (expected {PROFILES_FILE_VERSION})",
            file.version
        )));
    }
    let mut profiles = file.profiles;
    profiles.retain(|job, p| {
        let current = p.version == PROFILE_VERSION;
        if !current {
            tracing::info!(job_id = %job, version = p.version, "load profile of another version; relearning it");
        }
        current
    });
    Ok(profiles)
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
            catch_ups: vec![CatchUpObservation {
                restart_at_ms: 1,
                duration_ms: 3,
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

    #[tokio::test]
    async fn profiles_survive_a_reopen_in_their_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let store = StateStore::open(&path).unwrap();
        let hour = 3_600_000;
        for h in 0..2 {
            store
                .update_profile("job", |p| {
                    p.observe("src", h * hour, (h + 1) * hour, 10.0, hour)
                })
                .await
                .unwrap();
        }
        assert!(dir.path().join("state.profiles.json").exists());
        let learned = store.profile("job");
        drop(store);
        let again = StateStore::open(&path).unwrap();
        let forecast = |p: &LoadProfile| p.forecast(0, 4, 0.1).sources["src"].clone();
        assert_eq!(forecast(&again.profile("job")), forecast(&learned));
        assert_eq!(again.profile("other"), LoadProfile::default());
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
