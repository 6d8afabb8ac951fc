//! Durable state: the audit, the fleet view, open actions (approved or pending a person),
//! region flags, cluster overrides, pauses, approval rules, the admin action log and the
//! webhook queue.
//!
//! One code path for SQLite and PostgreSQL through `sqlx::Any`; only the migrations differ
//! (identity column syntax). SQL uses `$N` placeholders, which both backends accept.
//!
//! Proposals go through [`writer`]: a task per shard that decides a batch of proposals in one
//! transaction and answers only after the commit, so every verdict a client sees is durable
//! and one commit (one fsync) is shared by the whole batch.

mod admin;
mod facts;
mod fleet;
mod notifications;
mod reads;
mod review;
mod sessions;
mod writer;

use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flink_autoscale_core::gates::GateConfig;
use flink_autoscale_core::policy::Rule;
use flink_autoscale_core::protocol::{
    Decision, DecisionRecord, Outcome, OutcomeStatus, Proposal, RecordedOutcome, Verdict,
};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor, Row};
use tokio::sync::{mpsc, oneshot};

pub use admin::AdminActionFilter;
pub use fleet::FleetJob;
pub use notifications::Queued;
pub use reads::{DecisionFilter, JobFilter};
pub use review::ReviewResult;
pub use sessions::StoredSession;

use crate::notify::{self, Event, NotificationsConfig};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }
}

/// SQLite's `synchronous` pragma for the WAL. `full` fsyncs every commit (survives power
/// loss); `normal` survives a process crash but may lose the last commits on power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    Full,
    Normal,
}

impl FromStr for SqliteSynchronous {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(SqliteSynchronous::Full),
            "normal" => Ok(SqliteSynchronous::Normal),
            other => Err(format!(
                "unknown value {other:?} (expected \"full\" or \"normal\")"
            )),
        }
    }
}

/// How to open the store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `sqlite:PATH` or `postgres://...`.
    pub url: String,
    /// PostgreSQL schema to create and use (tables live there); `None` uses the default.
    pub schema: Option<String>,
    /// Connections for reads (audit, fleet view, readiness).
    pub read_connections: u32,
    /// Writer tasks (each with its own connection); SQLite always uses one.
    pub writers: u32,
    /// Most proposals decided in one transaction.
    pub max_batch: usize,
    pub sqlite_synchronous: SqliteSynchronous,
    /// An approved action without an outcome after this long no longer blocks its job.
    pub open_action_timeout: Duration,
    /// Fleet-wide gate configuration; per-cluster overrides apply on top.
    pub gates: GateConfig,
    /// The configuration's approval rules (tried before those set through the API).
    pub approval_rules: Vec<Rule>,
    /// How long a pending proposal waits for a person.
    pub approval_ttl: Duration,
    /// Webhooks and their queue.
    pub notifications: NotificationsConfig,
    /// How long getting a database connection may take before the operation fails.
    pub connect_timeout: Duration,
    /// Longest wait between attempts to open the store at start.
    pub connect_retry_max: Duration,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The database could not complete the operation (unreachable, restarted, connection
    /// terminated); the message says why. Retrying later may succeed.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("unsupported database URL {0:?} (expected sqlite:PATH or postgres://...)")]
    UnsupportedUrl(String),
    #[error("the store is shutting down")]
    Closed,
}

impl StoreError {
    /// True when the stored data itself is wrong (not the database's availability).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, StoreError::Corrupt(_))
    }
}

/// The answer to a proposal.
#[derive(Debug, Clone, PartialEq)]
pub enum ProposeResult {
    /// Decided now, or earlier for the same proposal id and body (idempotent retry).
    Decided { decision: Decision, replay: bool },
    /// The proposal id is already recorded with a different body.
    IdConflict,
}

/// The answer to an outcome report.
#[derive(Debug, Clone, PartialEq)]
pub enum OutcomeResult {
    Recorded(Box<DecisionRecord>),
    UnknownProposal,
    /// Only approved proposals have outcomes.
    NotApproved,
    /// An outcome with different content was already recorded.
    AlreadyReported(Box<RecordedOutcome>),
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    read: AnyPool,
    write: AnyPool,
    shards: Vec<mpsc::Sender<writer::Request>>,
    shared: std::sync::Arc<writer::Shared>,
}

impl Store {
    /// Connects, applies migrations and starts the writer tasks.
    pub async fn open(options: StoreOptions) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(&options.url)
            .ok_or_else(|| StoreError::UnsupportedUrl(options.url.clone()))?;
        let url = match backend {
            Backend::Sqlite if !options.url.contains("mode=") => {
                let sep = if options.url.contains('?') { '&' } else { '?' };
                format!("{}{sep}mode=rwc", options.url)
            }
            _ => options.url.clone(),
        };
        let connect = AnyConnectOptions::from_str(&url)?;
        let writers = match backend {
            Backend::Sqlite => 1,
            Backend::Postgres => options.writers.max(1),
        };
        if let (Backend::Postgres, Some(schema)) = (backend, &options.schema) {
            let pool = AnyPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(options.connect_timeout)
                .connect_with(connect.clone())
                .await?;
            sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
                .execute(&pool)
                .await?;
            pool.close().await;
        }
        // SQLite: exactly one write connection, so its page cache stays valid between
        // batches (a write by a second connection would invalidate it). PostgreSQL: one per
        // writer plus one for admin writes and outcomes.
        let write_connections = match backend {
            Backend::Sqlite => 1,
            Backend::Postgres => writers + 1,
        };
        let write = pool_options(backend, &options, write_connections)
            .connect_with(connect.clone())
            .await?;
        match backend {
            Backend::Sqlite => SQLITE_MIGRATIONS.run(&write).await?,
            Backend::Postgres => POSTGRES_MIGRATIONS.run(&write).await?,
        }
        let read = pool_options(backend, &options, options.read_connections.max(1))
            .connect_with(connect)
            .await?;
        if backend == Backend::Sqlite {
            tokio::spawn(checkpoint_wal(read.clone()));
        }
        let shared = std::sync::Arc::new(writer::Shared {
            pool: write.clone(),
            gates: options.gates.clone(),
            policies: facts::Policies::new(
                options.approval_rules.clone(),
                i64::try_from(options.approval_ttl.as_millis()).unwrap_or(i64::MAX),
            )?,
            notifications: std::sync::Arc::new(options.notifications.clone()),
            open_action_timeout_ms: i64::try_from(options.open_action_timeout.as_millis())
                .unwrap_or(i64::MAX),
            max_batch: options.max_batch.max(1),
            sqlite: backend == Backend::Sqlite,
        });
        let shards = (0..writers)
            .map(|_| {
                let (tx, rx) = mpsc::channel(options.max_batch.max(1) * 4);
                tokio::spawn(writer::run(std::sync::Arc::clone(&shared), rx));
                tx
            })
            .collect();
        Ok(Store {
            backend,
            read,
            write,
            shards,
            shared,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The webhooks and queue settings the store was opened with.
    pub fn notifications(&self) -> &NotificationsConfig {
        &self.shared.notifications
    }

    /// Decides a validated proposal (or replays the recorded decision for its id).
    pub async fn propose(&self, proposal: Proposal) -> Result<ProposeResult, StoreError> {
        let shard = shard_of(&proposal.job_id, self.shards.len());
        let (reply, answer) = oneshot::channel();
        self.shards[shard]
            .send(writer::Request { proposal, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Records the outcome of an approved proposal and releases its job's open action.
    pub async fn record_outcome(
        &self,
        proposal_id: &str,
        outcome: Outcome,
    ) -> Result<OutcomeResult, StoreError> {
        let started = Instant::now();
        let mut tx = self.write.begin().await?;
        let row = sqlx::query(
            "SELECT verdict, outcome, job_id, proposal, decision FROM decisions WHERE proposal_id = $1",
        )
        .bind(proposal_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(OutcomeResult::UnknownProposal);
        };
        let verdict: String = row.try_get(0)?;
        let existing: Option<String> = row.try_get(1)?;
        let job_id: String = row.try_get(2)?;
        let mut queued = Vec::new();
        if verdict != Verdict::Approved.as_str() {
            return Ok(OutcomeResult::NotApproved);
        }
        if let Some(existing) = existing {
            let existing: RecordedOutcome = parse_json(&existing, "decisions.outcome")?;
            if existing.outcome() != outcome {
                return Ok(OutcomeResult::AlreadyReported(Box::new(existing)));
            }
        } else {
            let now = now_ms();
            let event = match outcome.status {
                OutcomeStatus::Applied => Event::Applied,
                OutcomeStatus::Failed => Event::Failed,
            };
            if self
                .shared
                .notifications
                .subscribers(event)
                .next()
                .is_some()
            {
                let proposal: Proposal =
                    parse_json(&row.try_get::<String, _>(3)?, "decisions.proposal")?;
                let decision: Decision =
                    parse_json(&row.try_get::<String, _>(4)?, "decisions.decision")?;
                let notice = notify::notice(
                    event,
                    &notify::Subject {
                        proposal: &proposal,
                        decision: &decision,
                        outcome: Some(&outcome),
                        review: None,
                        at: now,
                    },
                );
                queued = notifications::enqueue(
                    &mut tx,
                    self.shared.params(),
                    &self.shared.notifications,
                    &[notice],
                    now,
                )
                .await?;
            }
            let recorded = RecordedOutcome::new(outcome, now);
            sqlx::query("UPDATE decisions SET outcome = $1 WHERE proposal_id = $2")
                .bind(to_json(&recorded))
                .bind(proposal_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM open_actions WHERE job_id = $1 AND proposal_id = $2")
                .bind(job_id)
                .bind(proposal_id)
                .execute(&mut *tx)
                .await?;
        }
        let record = reads::decision_by_id(&mut tx, proposal_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("decision {proposal_id} vanished")))?;
        tx.commit().await?;
        notifications::count_queued(&queued);
        observe_store("record_outcome", started);
        Ok(OutcomeResult::Recorded(Box::new(record)))
    }

    /// True when the database answers a trivial query within `timeout`.
    pub async fn ping(&self, timeout: Duration) -> bool {
        let query = sqlx::query("SELECT 1").execute(&self.read);
        matches!(tokio::time::timeout(timeout, query).await, Ok(Ok(_)))
    }

    /// Stops accepting proposals and closes the connections once in-flight work is done.
    pub async fn close(self) {
        drop(self.shards);
        self.read.close().await;
        self.write.close().await;
    }
}

/// Copies the SQLite WAL back into the database file every second from a reader
/// connection. PASSIVE never blocks the writer, so proposal latency does not include
/// checkpoint I/O. Ends when the pool is closed.
async fn checkpoint_wal(pool: AnyPool) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        let started = Instant::now();
        if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&pool)
            .await
        {
            if pool.is_closed() {
                return;
            }
            tracing::warn!(error = %err, "WAL checkpoint failed");
        }
        observe_store("wal_checkpoint", started);
    }
}

fn pool_options(backend: Backend, options: &StoreOptions, size: u32) -> AnyPoolOptions {
    let schema = options.schema.clone();
    let synchronous = match options.sqlite_synchronous {
        SqliteSynchronous::Full => "FULL",
        SqliteSynchronous::Normal => "NORMAL",
    };
    AnyPoolOptions::new()
        .max_connections(size)
        .min_connections(1)
        .acquire_timeout(options.connect_timeout)
        .after_connect(move |conn, _meta| {
            let schema = schema.clone();
            Box::pin(async move {
                match backend {
                    Backend::Sqlite => {
                        // WAL lets readers run beside the single writer; the busy timeout
                        // covers the moments a checkpoint holds the lock.
                        for pragma in [
                            "PRAGMA journal_mode = WAL".to_string(),
                            format!("PRAGMA synchronous = {synchronous}"),
                            "PRAGMA busy_timeout = 10000".to_string(),
                            // Checkpoints run in the background (see `checkpoint_wal`), not
                            // inside a proposal batch's commit.
                            "PRAGMA wal_autocheckpoint = 0".to_string(),
                            // Keep hot index pages in process memory instead of re-reading
                            // them through syscalls on every batch.
                            "PRAGMA cache_size = -65536".to_string(),
                            "PRAGMA temp_store = MEMORY".to_string(),
                        ] {
                            conn.execute(pragma.as_str()).await?;
                        }
                    }
                    Backend::Postgres => {
                        if let Some(schema) = schema {
                            let set = format!("SET search_path TO \"{schema}\"");
                            conn.execute(set.as_str()).await?;
                        }
                    }
                }
                Ok(())
            })
        })
}

/// Stable shard for a job, so one job's proposals are always decided by one writer.
fn shard_of(job_id: &str, shards: usize) -> usize {
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in job_id.to_ascii_lowercase().bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % shards.max(1) as u64) as usize
}

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serializing our own plain structs (string keys, finite numbers) cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

fn parse_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn observe_store(operation: &'static str, started: Instant) {
    metrics::histogram!(
        crate::metrics::STORE_DURATION,
        "operation" => operation
    )
    .record(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_case_insensitive() {
        let a = shard_of("0123456789abcdef0123456789abcdef", 4);
        assert_eq!(a, shard_of("0123456789ABCDEF0123456789ABCDEF", 4));
        assert!(a < 4);
        assert_eq!(shard_of("x", 1), 0);
    }

    #[test]
    fn backend_follows_the_url_scheme() {
        assert_eq!(Backend::of_url("sqlite:/tmp/x.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("postgres://h/db"), Some(Backend::Postgres));
        assert_eq!(
            Backend::of_url("postgresql://h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::of_url("mysql://h/db"), None);
    }
}
