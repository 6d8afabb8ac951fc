//! The proposal writer: group commit of gate decisions.
//!
//! Each writer drains up to `max_batch` waiting proposals and decides them in one
//! transaction with a fixed number of statements, whatever the batch size: it reads the facts
//! for the whole batch at once, runs the gates for each proposal in arrival order (an
//! in-memory overlay makes each proposal see the approvals before it), writes all results with
//! multi-row statements, commits, and only then answers.
//!
//! Per-job serialization across writers and replicas comes from the database: the
//! `open_actions` primary key admits one open action per job. A concurrent claim for the same
//! job waits for the other transaction (PostgreSQL) or is excluded by SQLite's single writer,
//! and then finds the slot taken; that proposal is refused.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flink_autoscale_shared::gates::{self, Facts, GateConfig};
use flink_autoscale_shared::protocol::{
    ClusterOverrides, Decision, GateName, Proposal, Reason, Verdict,
};
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, AnyConnection, AnyPool, Row};
use tokio::sync::{mpsc, oneshot};

use super::{now_ms, observe_store, parse_json, to_json, ProposeResult, StoreError};

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
    pub open_action_timeout_ms: i64,
    pub max_batch: usize,
    pub sqlite: bool,
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
                tracing::error!(error = %err, proposals = batch.len(), "deciding a batch failed");
                let message = err.to_string();
                for request in batch.drain(..) {
                    let _ = request
                        .reply
                        .send(Err(StoreError::Corrupt(message.clone())));
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
                tracing::warn!(error = %err, attempt, "batch conflicted with another writer; retrying");
                tokio::time::sleep(Duration::from_millis(5 * attempt as u64)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Deadlock or serialization failure (PostgreSQL), busy/locked (SQLite), lost connection.
fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => matches!(
            db.code().as_deref(),
            Some("40P01") | Some("40001") | Some("5") | Some("6") | Some("517")
        ),
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => true,
        _ => false,
    }
}

/// What the database knows about the batch's proposals, jobs, clusters and regions.
#[derive(Default)]
struct BatchFacts {
    /// proposal id → (stored proposal JSON, stored decision JSON)
    recorded: HashMap<String, (String, String)>,
    /// job id → last approval time
    last_approved: HashMap<String, i64>,
    /// job id → proposal id of its live open action
    open_action: HashMap<String, String>,
    cluster_in_flight: HashMap<String, u32>,
    region_in_flight: HashMap<String, u32>,
    evacuating: HashSet<String>,
    overrides: HashMap<String, ClusterOverrides>,
}

/// A decision made in this batch, waiting to be written.
struct Fresh {
    index: usize,
    decision: Decision,
}

async fn decide_batch(
    shared: &Shared,
    batch: &[Request],
) -> Result<Vec<ProposeResult>, StoreError> {
    let now = now_ms();
    let expired_before = now.saturating_sub(shared.open_action_timeout_ms);
    let mut tx = shared.pool.begin().await?;
    let params = Params {
        sqlite: shared.sqlite,
    };
    let mut facts = load_facts(&mut tx, params, batch, expired_before).await?;

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
        let job_facts = Facts {
            region_evacuating: facts.evacuating.contains(&p.region),
            job_open_action: facts.open_action.get(&p.job_id).cloned(),
            job_last_approved_at_ms: facts.last_approved.get(&p.job_id).copied(),
            cluster_in_flight: facts
                .cluster_in_flight
                .get(&p.cluster_id)
                .copied()
                .unwrap_or(0),
            region_in_flight: facts.region_in_flight.get(&p.region).copied().unwrap_or(0),
        };
        let decision = match facts.overrides.get(&p.cluster_id) {
            Some(o) => gates::evaluate(p, &job_facts, &shared.gates.with_overrides(o), now),
            None => gates::evaluate(p, &job_facts, &shared.gates, now),
        };
        if decision.verdict == Verdict::Approved {
            // Later proposals in this batch must see this approval.
            facts
                .open_action
                .insert(p.job_id.clone(), p.proposal_id.clone());
            facts.last_approved.insert(p.job_id.clone(), now);
            *facts
                .cluster_in_flight
                .entry(p.cluster_id.clone())
                .or_default() += 1;
            *facts.region_in_flight.entry(p.region.clone()).or_default() += 1;
        }
        fresh_by_id.insert(&p.proposal_id, fresh.len());
        fresh.push(Fresh { index, decision });
    }

    let claimed = claim_open_actions(&mut tx, params, batch, &fresh, now, expired_before).await?;
    for f in &mut fresh {
        if f.decision.verdict == Verdict::Approved
            && !claimed.contains(&batch[f.index].proposal.job_id)
        {
            // Another writer or replica approved an action for this job meanwhile.
            f.decision = refuse_concurrent(&f.decision.proposal_id);
        }
    }
    let inserted = insert_decisions(&mut tx, params, batch, &fresh, now).await?;
    for f in &fresh {
        let p = &batch[f.index].proposal;
        if inserted.contains(&p.proposal_id) {
            continue;
        }
        // Another replica recorded this very proposal id concurrently: its answer stands.
        if f.decision.verdict == Verdict::Approved {
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
    tx.commit().await?;

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

/// Bind-parameter syntax for generated statements. SQLite resolves `$N` names with a linear
/// string search per occurrence (quadratic in a batch-sized statement); `?N` is numeric.
#[derive(Clone, Copy)]
struct Params {
    sqlite: bool,
}

impl Params {
    fn one(self, n: usize) -> String {
        if self.sqlite {
            format!("?{n}")
        } else {
            format!("${n}")
        }
    }

    /// Parameters `first, first+1, …` for `n` values, comma-separated.
    fn list(self, first: usize, n: usize) -> String {
        (first..first + n)
            .map(|i| self.one(i))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A statement whose text depends on the batch: not worth a cached prepared statement.
fn one_shot(sql: &str) -> Query<'_, Any, AnyArguments<'_>> {
    sqlx::query(sql).persistent(false)
}

fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    values.filter(|v| seen.insert(*v)).collect()
}

/// Reads every fact the batch needs in a single statement (one round trip matters more than
/// anything else here): a UNION of tagged rows, all columns as text.
async fn load_facts(
    conn: &mut AnyConnection,
    params: Params,
    batch: &[Request],
    expired_before: i64,
) -> Result<BatchFacts, StoreError> {
    let proposals = || batch.iter().map(|r| &r.proposal);
    let ids = distinct(proposals().map(|p| p.proposal_id.as_str()));
    let jobs = distinct(proposals().map(|p| p.job_id.as_str()));
    let clusters = distinct(proposals().map(|p| p.cluster_id.as_str()));
    let regions = distinct(proposals().map(|p| p.region.as_str()));
    // Parameter 1 is the expiry bound; then the id, job, cluster and region lists.
    let expiry = params.one(1);
    let ids_in = params.list(2, ids.len());
    let jobs_in = params.list(2 + ids.len(), jobs.len());
    let clusters_in = params.list(2 + ids.len() + jobs.len(), clusters.len());
    let regions_in = params.list(2 + ids.len() + jobs.len() + clusters.len(), regions.len());
    const NULL: &str = "CAST(NULL AS TEXT)";
    let sql = format!(
        "SELECT 'd', proposal_id, proposal, decision FROM decisions WHERE proposal_id IN ({ids_in}) \
         UNION ALL SELECT 'j', job_id, CAST(last_approved_at AS TEXT), {NULL} FROM jobs \
           WHERE last_approved_at IS NOT NULL AND job_id IN ({jobs_in}) \
         UNION ALL SELECT 'o', job_id, proposal_id, {NULL} FROM open_actions \
           WHERE approved_at > {expiry} AND job_id IN ({jobs_in}) \
         UNION ALL SELECT 'c', cluster_id, CAST(COUNT(*) AS TEXT), {NULL} FROM open_actions \
           WHERE approved_at > {expiry} AND cluster_id IN ({clusters_in}) GROUP BY cluster_id \
         UNION ALL SELECT 'r', region, CAST(COUNT(*) AS TEXT), {NULL} FROM open_actions \
           WHERE approved_at > {expiry} AND region IN ({regions_in}) GROUP BY region \
         UNION ALL SELECT 'e', region, {NULL}, {NULL} FROM evacuations WHERE region IN ({regions_in}) \
         UNION ALL SELECT 'v', cluster_id, overrides, {NULL} FROM cluster_overrides \
           WHERE cluster_id IN ({clusters_in})"
    );
    let mut query = one_shot(&sql).bind(expired_before);
    for list in [&ids, &jobs, &clusters, &regions] {
        query = bind_all(query, list);
    }
    let mut facts = BatchFacts::default();
    for row in query.fetch_all(&mut *conn).await? {
        let kind: String = row.try_get(0)?;
        let key: String = row.try_get(1)?;
        // Absent values only occur where the kind has none ('e'); elsewhere an empty string
        // fails to parse and is reported as corruption.
        let a: String = row.try_get::<Option<String>, _>(2)?.unwrap_or_default();
        match kind.as_str() {
            "d" => {
                let b: String = row.try_get::<Option<String>, _>(3)?.unwrap_or_default();
                facts.recorded.insert(key, (a, b));
            }
            "j" => {
                facts.last_approved.insert(key, parse_int(&a)?);
            }
            "o" => {
                facts.open_action.insert(key, a);
            }
            "c" => {
                facts.cluster_in_flight.insert(key, count(parse_int(&a)?));
            }
            "r" => {
                facts.region_in_flight.insert(key, count(parse_int(&a)?));
            }
            "e" => {
                facts.evacuating.insert(key);
            }
            "v" => {
                facts
                    .overrides
                    .insert(key, parse_json(&a, "cluster_overrides")?);
            }
            other => return Err(StoreError::Corrupt(format!("unknown fact kind {other:?}"))),
        }
    }
    Ok(facts)
}

fn parse_int(text: &str) -> Result<i64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("expected an integer, found {text:?}")))
}

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

fn bind_all<'q>(
    mut query: Query<'q, Any, AnyArguments<'q>>,
    values: &[&'q str],
) -> Query<'q, Any, AnyArguments<'q>> {
    for v in values {
        query = query.bind(*v);
    }
    query
}

/// Claims the open-action slot of every approved job (an expired claim is taken over) and
/// returns the jobs whose claim succeeded.
async fn claim_open_actions(
    conn: &mut AnyConnection,
    params: Params,
    batch: &[Request],
    fresh: &[Fresh],
    now: i64,
    expired_before: i64,
) -> Result<HashSet<String>, StoreError> {
    let approved: Vec<&Proposal> = fresh
        .iter()
        .filter(|f| f.decision.verdict == Verdict::Approved)
        .map(|f| &batch[f.index].proposal)
        .collect();
    let mut claimed = HashSet::new();
    for chunk in approved.chunks(INSERT_CHUNK) {
        let rows: Vec<String> = (0..chunk.len())
            .map(|i| format!("({}, {})", params.list(3 + i * 4, 4), params.one(1)))
            .collect();
        let sql = format!(
            "INSERT INTO open_actions (job_id, proposal_id, cluster_id, region, approved_at) \
             VALUES {} ON CONFLICT (job_id) DO UPDATE SET \
             proposal_id = excluded.proposal_id, cluster_id = excluded.cluster_id, \
             region = excluded.region, approved_at = excluded.approved_at \
             WHERE open_actions.approved_at <= {} RETURNING job_id",
            rows.join(", "),
            params.one(2)
        );
        let mut query = one_shot(&sql).bind(now).bind(expired_before);
        for p in chunk {
            query = query
                .bind(&p.job_id)
                .bind(&p.proposal_id)
                .bind(&p.cluster_id)
                .bind(&p.region);
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
            .map(|i| format!("({}, {})", params.list(2 + i * 9, 9), params.one(1)))
            .collect();
        let sql = format!(
            "INSERT INTO decisions (proposal_id, agent_id, job_id, job_name, cluster_id, region, \
             verdict, proposal, decision, received_at) VALUES {} \
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
                .bind(to_json(&f.decision));
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
            .map(|i| format!("({}, {})", params.list(2 + i * 7, 7), params.one(1)))
            .collect();
        let sql = format!(
            "INSERT INTO jobs (job_id, job_name, cluster_id, region, last_proposal_id, \
             last_verdict, last_approved_at, last_received_at) VALUES {} \
             ON CONFLICT (job_id) DO UPDATE SET job_name = excluded.job_name, \
             cluster_id = excluded.cluster_id, region = excluded.region, \
             last_proposal_id = excluded.last_proposal_id, last_verdict = excluded.last_verdict, \
             last_received_at = excluded.last_received_at, \
             last_approved_at = COALESCE(excluded.last_approved_at, jobs.last_approved_at)",
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
                .bind(approved.then_some(now));
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
    let stored: Proposal = parse_json(stored_proposal, "decisions.proposal")?;
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
