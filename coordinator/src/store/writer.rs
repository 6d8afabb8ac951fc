//! The proposal writer: group commit of gate decisions.
//!
//! Each writer drains up to `max_batch` waiting proposals and decides them in one
//! transaction with a fixed number of statements, whatever the batch size: it reads the facts
//! for the whole batch at once, runs the gates and the approval policy for each proposal in
//! arrival order (an in-memory ledger makes each proposal see the approvals and pending
//! proposals before it), writes all results with multi-row statements, commits, and only
//! then answers.
//!
//! Per-job serialization across writers and replicas comes from the database: the
//! `open_actions` primary key admits one open action per job, approved or pending a person.
//! A concurrent claim for the same job waits for the other transaction (PostgreSQL) or is
//! excluded by SQLite's single writer, and then finds the slot taken; that proposal is
//! refused. A new proposal for a job whose proposal waits for a person ends that one first
//! (`superseded`, or `approval_expired` when it is past its expiry).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flink_autoscale_core::gates::disk_capacity::slots_in_use;
use flink_autoscale_core::gates::GateConfig;
use flink_autoscale_core::policy::verdicts;
use flink_autoscale_core::protocol::{
    ApprovalRequest, Decision, GateName, Proposal, Reason, Verdict,
};
use sqlx::{AnyConnection, AnyPool, Row};
use tokio::sync::{mpsc, oneshot};

use super::facts::{self, lock_scopes, one_shot, Facts, Params, Policies};
use super::notifications::{count_queued, enqueue};
use super::review::finalize_pending;
use super::{now_ms, observe_store, parse_json, to_json, ProposeResult, StoreError};
use crate::notify::{self, Event, Notice, NotificationsConfig};

/// Attempts for a batch that failed on a transient conflict (deadlock between replicas).
const BATCH_ATTEMPTS: usize = 3;
/// Rows per multi-row INSERT (well under both backends' bind-parameter limits).
const INSERT_CHUNK: usize = 128;

pub(super) struct Request {
    pub proposal: Proposal,
    pub reply: oneshot::Sender<Result<ProposeResult, StoreError>>,
}

pub(super) struct Shared {
    pub pool: AnyPool,
    pub gates: GateConfig,
    pub policies: Policies,
    pub notifications: Arc<NotificationsConfig>,
    pub open_action_timeout_ms: i64,
    pub max_batch: usize,
    pub sqlite: bool,
}

impl Shared {
    pub fn params(&self) -> Params {
        Params {
            sqlite: self.sqlite,
        }
    }
}
/// Runs until every sender is dropped and the queue is drained.
pub(super) async fn run(shared: Arc<Shared>, mut queue: mpsc::Receiver<Request>) {
    let mut batch = Vec::with_capacity(shared.max_batch);
    while queue.recv_many(&mut batch, shared.max_batch).await > 0 {
        // Clients that gave up still get their proposal decided: a retry will replay it.
        let started = Instant::now();
        let result = decide_with_retries(&shared, &batch).await;
        observe_store("propose_batch", started);
        metrics::histogram!(crate::metrics::BATCH_SIZE).record(batch.len() as f64);
        match result {
            Ok(results) => {
                for (request, result) in batch.drain(..).zip(results) {
                    if let ProposeResult::Decided {
                        decision,
                        replay: false,
                    } = &result
                    {
                        record_verdict_metrics(decision);
                    }
                    let _ = request.reply.send(Ok(result));
                }
            }
            Err(err) => {
                let corrupt = err.is_corrupt();
                if corrupt {
                    tracing::error!(error = %err, proposals = batch.len(), "deciding a batch failed");
                } else {
                    tracing::warn!(error = %err, proposals = batch.len(), "deciding a batch failed: store unavailable");
                }
                // Each waiting client gets the same class of error, as text (sqlx errors
                // cannot be cloned).
                let message = err.to_string();
                for request in batch.drain(..) {
                    let error = if corrupt {
                        StoreError::Corrupt(message.clone())
                    } else {
                        StoreError::Unavailable(message.clone())
                    };
                    let _ = request.reply.send(Err(error));
                }
            }
        }
    }
}

async fn decide_with_retries(
    shared: &Shared,
    batch: &[Request],
) -> Result<Vec<ProposeResult>, StoreError> {
    let mut attempt = 1;
    loop {
        match decide_batch(shared, batch).await {
            Err(StoreError::Database(err)) if attempt < BATCH_ATTEMPTS && is_transient(&err) => {
                tracing::warn!(error = %err, attempt, "batch failed on a transient error (conflict or lost connection); retrying");
                tokio::time::sleep(Duration::from_millis(5 * attempt as u64)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Worth one more attempt at once: a deadlock or serialization failure (PostgreSQL),
/// busy/locked (SQLite), or a connection that was lost or terminated by the server (the
/// pool opens a new one). Not a pool timeout: that already waited.
fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            let code = db.code();
            let code = code.as_deref().unwrap_or("");
            matches!(code, "40P01" | "40001" | "5" | "6" | "517") || connection_lost(code)
        }
        sqlx::Error::Io(_) => true,
        _ => false,
    }
}

/// SQLSTATE classes 08 (connection exception) and 57 (operator intervention: the backend
/// was terminated, the server is shutting down or starting).
fn connection_lost(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("57")
}

/// A decision made in this batch, waiting to be written.
struct Fresh {
    index: usize,
    decision: Decision,
    /// Set when pending: the rule and the expiry.
    approval: Option<ApprovalRequest>,
}

impl Fresh {
    /// Approved or pending: it holds the job's open action.
    fn holds_the_job(&self) -> bool {
        matches!(self.decision.verdict, Verdict::Approved | Verdict::Pending)
    }
}

async fn decide_batch(
    shared: &Shared,
    batch: &[Request],
) -> Result<Vec<ProposeResult>, StoreError> {
    let now = now_ms();
    let expired_before = now.saturating_sub(shared.open_action_timeout_ms);
    let mut tx = shared.pool.begin().await?;
    let params = shared.params();
    let proposals: Vec<&Proposal> = batch.iter().map(|r| &r.proposal).collect();
    if !shared.sqlite {
        lock_scopes(&mut tx, &proposals).await?;
    }
    let mut facts = facts::load(&mut tx, params, &proposals, now, expired_before).await?;
    let policy = shared.policies.current(facts.api_rules.as_deref())?;
    let mut notices: Vec<Notice> = Vec::new();
    end_replaced_pending(shared, &mut tx, batch, &mut facts, now, &mut notices).await?;

    let mut results: Vec<Option<ProposeResult>> = vec![None; batch.len()];
    let mut fresh: Vec<Fresh> = Vec::new();
    let mut fresh_by_id: HashMap<&str, usize> = HashMap::new();
    for (index, request) in batch.iter().enumerate() {
        let p = &request.proposal;
        if let Some((stored_proposal, stored_decision)) = facts.recorded.get(&p.proposal_id) {
            results[index] = Some(replay(p, stored_proposal, stored_decision)?);
            continue;
        }
        if let Some(&earlier) = fresh_by_id.get(p.proposal_id.as_str()) {
            let first = &fresh[earlier];
            results[index] = Some(if batch[first.index].proposal == *p {
                ProposeResult::Decided {
                    decision: first.decision.clone(),
                    replay: true,
                }
            } else {
                ProposeResult::IdConflict
            });
            continue;
        }
        // The ledger books each approval and pending proposal, so later proposals in this
        // batch see it.
        let switches = facts.switches(p, now);
        let ruling = match facts.overrides.get(&p.cluster_id) {
            Some(o) => {
                let config = shared.gates.with_overrides(o);
                facts.ledger.decide(p, &switches, &config, &policy, now)
            }
            None => facts
                .ledger
                .decide(p, &switches, &shared.gates, &policy, now),
        };
        fresh_by_id.insert(&p.proposal_id, fresh.len());
        fresh.push(Fresh {
            index,
            decision: ruling.decision,
            approval: ruling.approval,
        });
    }

    let claimed = claim_open_actions(&mut tx, params, batch, &fresh, now, expired_before).await?;
    for f in &mut fresh {
        if f.holds_the_job() && !claimed.contains(&batch[f.index].proposal.job_id) {
            // Another writer or replica approved an action for this job meanwhile.
            f.decision = refuse_concurrent(&f.decision.proposal_id);
            f.approval = None;
        }
    }
    let inserted = insert_decisions(&mut tx, params, batch, &fresh, now).await?;
    for f in &fresh {
        let p = &batch[f.index].proposal;
        if inserted.contains(&p.proposal_id) {
            continue;
        }
        // Another replica recorded this very proposal id concurrently: its answer stands.
        if f.holds_the_job() {
            release_claim(&mut tx, p).await?;
        }
        let row = sqlx::query("SELECT proposal, decision FROM decisions WHERE proposal_id = $1")
            .bind(&p.proposal_id)
            .fetch_one(&mut *tx)
            .await?;
        results[f.index] = Some(replay(
            p,
            &row.try_get::<String, _>(0)?,
            &row.try_get::<String, _>(1)?,
        )?);
    }
    let recorded: Vec<&Fresh> = fresh
        .iter()
        .filter(|f| inserted.contains(&batch[f.index].proposal.proposal_id))
        .collect();
    upsert_jobs(&mut tx, params, batch, &recorded, now).await?;
    if !shared.notifications.webhooks.is_empty() {
        for f in &recorded {
            let Some(event) = Event::of_verdict(f.decision.verdict) else {
                continue;
            };
            if shared.notifications.subscribers(event).next().is_none() {
                continue;
            }
            notices.push(notify::notice(
                event,
                &notify::Subject {
                    proposal: &batch[f.index].proposal,
                    decision: &f.decision,
                    outcome: None,
                    review: None,
                    at: now,
                },
            ));
        }
    }
    let queued = enqueue(&mut tx, params, &shared.notifications, &notices, now).await?;
    tx.commit().await?;
    count_queued(&queued);

    for f in fresh {
        if results[f.index].is_none() {
            results[f.index] = Some(ProposeResult::Decided {
                decision: f.decision,
                replay: false,
            });
        }
    }
    results
        .into_iter()
        .map(|r| r.ok_or_else(|| StoreError::Corrupt("proposal left undecided".to_string())))
        .collect()
}

/// A new proposal for a job whose proposal waits for a person ends the waiting one:
/// `superseded` by the new one, or `approval_expired` if it is past its expiry. Its hold on
/// the job is released in the ledger, so the new proposal is decided on its own merits.
/// (A proposal a person decided concurrently, on another replica, is left as they decided.)
async fn end_replaced_pending(
    shared: &Shared,
    conn: &mut AnyConnection,
    batch: &[Request],
    facts: &mut Facts,
    now: i64,
    notices: &mut Vec<Notice>,
) -> Result<(), StoreError> {
    if facts.pending.is_empty() {
        return Ok(());
    }
    let mut ended: Vec<(String, String)> = Vec::new();
    for request in batch {
        let p = &request.proposal;
        let Some(pending) = facts.pending.get(&p.job_id) else {
            continue;
        };
        if pending.proposal_id == p.proposal_id
            || facts.recorded.contains_key(&p.proposal_id)
            || ended.iter().any(|(job, _)| *job == p.job_id)
        {
            continue;
        }
        let (decision, event) = if pending.approval.expires_at <= now {
            (
                verdicts::expired(&pending.proposal_id, &pending.approval),
                Event::ApprovalExpired,
            )
        } else {
            (
                verdicts::superseded(&pending.proposal_id, &p.proposal_id),
                Event::Refused,
            )
        };
        if !finalize_pending(conn, &p.job_id, &pending.proposal_id, &decision, None).await? {
            continue;
        }
        ended.push((p.job_id.clone(), pending.proposal_id.clone()));
        if shared.notifications.subscribers(event).next().is_some() {
            let old: Proposal = parse_json(&pending.proposal, "decisions.proposal")?;
            notices.push(notify::notice(
                event,
                &notify::Subject {
                    proposal: &old,
                    decision: &decision,
                    outcome: None,
                    review: None,
                    at: now,
                },
            ));
        }
    }
    for (job, id) in ended {
        facts.ledger.release(&job, &id);
        facts.pending.remove(&job);
    }
    Ok(())
}

/// Claims the open-action slot of every approved or pending job (an expired approved claim
/// is taken over; a pending one only ends by a decision) and returns the jobs whose claim
/// succeeded.
async fn claim_open_actions(
    conn: &mut AnyConnection,
    params: Params,
    batch: &[Request],
    fresh: &[Fresh],
    now: i64,
    expired_before: i64,
) -> Result<HashSet<String>, StoreError> {
    let holding: Vec<(&Proposal, Option<i64>)> = fresh
        .iter()
        .filter(|f| f.holds_the_job())
        .map(|f| {
            (
                &batch[f.index].proposal,
                f.approval.as_ref().map(|a| a.expires_at),
            )
        })
        .collect();
    let mut claimed = HashSet::new();
    for chunk in holding.chunks(INSERT_CHUNK) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, {})", params.list(3 + i * 5, 5), params.one(1)))
            .collect();
        let sql = format!(
            "INSERT INTO open_actions (job_id, proposal_id, cluster_id, region, pending_until, \
             approved_at) VALUES {} ON CONFLICT (job_id) DO UPDATE SET \
             proposal_id = excluded.proposal_id, cluster_id = excluded.cluster_id, \
             region = excluded.region, approved_at = excluded.approved_at, \
             pending_until = excluded.pending_until \
             WHERE open_actions.pending_until IS NULL AND open_actions.approved_at <= {} \
             RETURNING job_id",
            rows.join(", "),
            params.one(2)
        );
        let mut query = one_shot(&sql).bind(now).bind(expired_before);
        for (p, pending_until) in chunk {
            query = query
                .bind(&p.job_id)
                .bind(&p.proposal_id)
                .bind(&p.cluster_id)
                .bind(&p.region)
                .bind(*pending_until);
        }
        for row in query.fetch_all(&mut *conn).await? {
            claimed.insert(row.try_get(0)?);
        }
    }
    Ok(claimed)
}

async fn release_claim(conn: &mut AnyConnection, p: &Proposal) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM open_actions WHERE job_id = $1 AND proposal_id = $2")
        .bind(&p.job_id)
        .bind(&p.proposal_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes the batch's decisions; returns the proposal ids actually inserted (an id another
/// replica recorded concurrently is not).
async fn insert_decisions(
    conn: &mut AnyConnection,
    params: Params,
    batch: &[Request],
    fresh: &[Fresh],
    now: i64,
) -> Result<HashSet<String>, StoreError> {
    let mut inserted = HashSet::with_capacity(fresh.len());
    for chunk in fresh.chunks(INSERT_CHUNK) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, {})", params.list(2 + i * 10, 10), params.one(1)))
            .collect();
        let sql = format!(
            "INSERT INTO decisions (proposal_id, agent_id, job_id, job_name, cluster_id, region, \
             verdict, proposal, decision, approval, received_at) VALUES {} \
             ON CONFLICT (proposal_id) DO NOTHING RETURNING proposal_id",
            rows.join(", ")
        );
        let mut query = one_shot(&sql).bind(now);
        for f in chunk {
            let p = &batch[f.index].proposal;
            query = query
                .bind(&p.proposal_id)
                .bind(&p.agent_id)
                .bind(&p.job_id)
                .bind(&p.job_name)
                .bind(&p.cluster_id)
                .bind(&p.region)
                .bind(f.decision.verdict.as_str())
                .bind(to_json(p))
                .bind(to_json(&f.decision))
                .bind(f.approval.as_ref().map(to_json));
        }
        for row in query.fetch_all(&mut *conn).await? {
            inserted.insert(row.try_get(0)?);
        }
    }
    Ok(inserted)
}

/// Updates the fleet view: one row per job, from its latest decision in the batch.
async fn upsert_jobs(
    conn: &mut AnyConnection,
    params: Params,
    batch: &[Request],
    recorded: &[&Fresh],
    now: i64,
) -> Result<(), StoreError> {
    // Latest decision per job, and whether any decision of the batch approved it.
    let mut latest: HashMap<&str, (&Fresh, bool)> = HashMap::new();
    for f in recorded {
        let approved = f.decision.verdict == Verdict::Approved;
        latest
            .entry(batch[f.index].proposal.job_id.as_str())
            .and_modify(|(last, any)| {
                *last = f;
                *any |= approved;
            })
            .or_insert((f, approved));
    }
    let rows: Vec<(&Fresh, bool)> = latest.into_values().collect();
    for chunk in rows.chunks(INSERT_CHUNK) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, {})", params.list(2 + i * 8, 8), params.one(1)))
            .collect();
        // baseline_slots: the slots at the job's first proposal (kept, or filled in for jobs
        // recorded before it existed).
        let sql = format!(
            "INSERT INTO jobs (job_id, job_name, cluster_id, region, last_proposal_id, \
             last_verdict, last_approved_at, baseline_slots, last_received_at) VALUES {} \
             ON CONFLICT (job_id) DO UPDATE SET job_name = excluded.job_name, \
             cluster_id = excluded.cluster_id, region = excluded.region, \
             last_proposal_id = excluded.last_proposal_id, last_verdict = excluded.last_verdict, \
             last_received_at = excluded.last_received_at, \
             last_approved_at = COALESCE(excluded.last_approved_at, jobs.last_approved_at), \
             baseline_slots = COALESCE(jobs.baseline_slots, excluded.baseline_slots)",
            values.join(", ")
        );
        let mut query = one_shot(&sql).bind(now);
        for (f, approved) in chunk {
            let p = &batch[f.index].proposal;
            query = query
                .bind(&p.job_id)
                .bind(&p.job_name)
                .bind(&p.cluster_id)
                .bind(&p.region)
                .bind(&p.proposal_id)
                .bind(f.decision.verdict.as_str())
                .bind(approved.then_some(now))
                .bind(i64::try_from(slots_in_use(p)).unwrap_or(i64::MAX));
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

fn refuse_concurrent(proposal_id: &str) -> Decision {
    Decision {
        proposal_id: proposal_id.to_string(),
        verdict: Verdict::Refused,
        reasons: vec![Reason {
            gate: GateName::RateLimit,
            code: "job_action_in_flight".to_string(),
            message: "another action for this job was approved concurrently".to_string(),
        }],
        plan: None,
    }
}

/// The recorded decision for a retried proposal id, if the body is the same.
fn replay(
    proposal: &Proposal,
    stored_proposal: &str,
    stored_decision: &str,
) -> Result<ProposeResult, StoreError> {
    let mut stored: Proposal = parse_json(stored_proposal, "decisions.proposal")?;
    // Records written before normalization may spell the same proposal differently.
    stored.normalize();
    if &stored != proposal {
        return Ok(ProposeResult::IdConflict);
    }
    Ok(ProposeResult::Decided {
        decision: parse_json(stored_decision, "decisions.decision")?,
        replay: true,
    })
}

fn record_verdict_metrics(decision: &Decision) {
    let reason = decision
        .reasons
        .first()
        .map(|r| r.code.clone())
        .unwrap_or_else(|| "none".to_string());
    metrics::counter!(
        crate::metrics::PROPOSALS,
        "verdict" => decision.verdict.as_str(),
        "reason" => reason
    )
    .increment(1);
    for r in &decision.reasons {
        metrics::counter!(
            crate::metrics::REFUSAL_REASONS,
            "gate" => r.gate.as_str(),
            "code" => r.code.clone()
        )
        .increment(1);
    }
}
