//! Read side: the audit (and the pending queue), single verdicts, the fleet view, region
//! flags and cluster overrides.

use std::time::Instant;

use flink_autoscale_core::gates::disk_capacity::{slots_in_use, slots_needed};
use flink_autoscale_core::protocol::{
    ClusterOverridesView, ClustersPage, Decision, DecisionPage, DecisionRecord, JobView, JobsPage,
    OutcomeStatus, Proposal, RecordedOutcome, RegionEvacuation, RegionsPage, Verdict,
};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::{observe_store, parse_json, Store, StoreError};

/// Filters of `GET /v1/decisions`; all present filters must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionFilter {
    pub job_id: Option<String>,
    pub job_name: Option<String>,
    pub cluster_id: Option<String>,
    pub region: Option<String>,
    /// Only decisions with this verdict.
    pub verdict: Option<Verdict>,
    /// Only decisions received at or after this Unix time in milliseconds.
    pub since_ms: Option<i64>,
    /// Only decisions received before this Unix time in milliseconds.
    pub until_ms: Option<i64>,
    /// Only decisions older than this cursor (from a previous page's `next`).
    pub before_seq: Option<i64>,
    pub limit: u32,
}

/// Filters of `GET /v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub cluster_id: Option<String>,
    pub region: Option<String>,
    /// Only jobs whose id sorts after this cursor.
    pub after_job_id: Option<String>,
    pub limit: u32,
}

pub(super) const DECISION_COLUMNS: &str =
    "seq, proposal_id, agent_id, job_id, job_name, cluster_id, \
    region, verdict, received_at, decision, outcome, proposal, approval, review";

/// Appends `column op $n` conditions for the present values and returns the bind list.
pub(super) struct Conditions {
    sql: Vec<String>,
    binds: Vec<Bind>,
}

enum Bind {
    Text(String),
    Int(i64),
}

impl Conditions {
    pub(super) fn new() -> Self {
        Conditions {
            sql: Vec::new(),
            binds: Vec::new(),
        }
    }

    fn push(&mut self, condition: &str, value: Bind) {
        self.binds.push(value);
        self.sql
            .push(condition.replace("$?", &format!("${}", self.binds.len())));
    }

    pub(super) fn text(&mut self, condition: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.push(condition, Bind::Text(v.clone()));
        }
    }

    fn int(&mut self, condition: &str, value: Option<i64>) {
        if let Some(v) = value {
            self.push(condition, Bind::Int(v));
        }
    }

    pub(super) fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    pub(super) async fn fetch_all(
        self,
        sql: &str,
        pool: &sqlx::AnyPool,
    ) -> Result<Vec<AnyRow>, StoreError> {
        let mut query = sqlx::query(sql);
        for bind in self.binds {
            query = match bind {
                Bind::Text(v) => query.bind(v),
                Bind::Int(v) => query.bind(v),
            };
        }
        Ok(query.fetch_all(pool).await?)
    }
}

impl Store {
    /// One page of the audit, newest first.
    pub async fn decisions(&self, filter: &DecisionFilter) -> Result<DecisionPage, StoreError> {
        let started = Instant::now();
        let (rows, next) = self.decision_rows(filter, "").await?;
        let decisions = rows
            .iter()
            .map(decision_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        observe_store("read_decisions", started);
        Ok(DecisionPage { decisions, next })
    }

    /// One page of the audit, newest first, each record with the proposal it decided (the
    /// console shows the evidence and charts the parallelism).
    pub async fn decisions_with_proposals(
        &self,
        filter: &DecisionFilter,
    ) -> Result<(Vec<(DecisionRecord, Proposal)>, Option<String>), StoreError> {
        let started = Instant::now();
        let (rows, next) = self.decision_rows(filter, "").await?;
        let records =
            rows.iter()
                .map(|row| {
                    let mut record = decision_from_row(row)?;
                    let proposal = record.proposal.take().ok_or_else(|| {
                        StoreError::Corrupt("decisions.proposal is missing".into())
                    })?;
                    Ok((record, proposal))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
        observe_store("read_decisions", started);
        Ok((records, next))
    }

    /// The rows of one audit page (the decision columns, then `extra_columns`) and the
    /// cursor of the next page.
    async fn decision_rows(
        &self,
        filter: &DecisionFilter,
        extra_columns: &str,
    ) -> Result<(Vec<AnyRow>, Option<String>), StoreError> {
        let mut conditions = Conditions::new();
        conditions.text("job_id = $?", &filter.job_id);
        conditions.text("job_name = $?", &filter.job_name);
        conditions.text("cluster_id = $?", &filter.cluster_id);
        conditions.text("region = $?", &filter.region);
        conditions.text(
            "verdict = $?",
            &filter.verdict.map(|v| v.as_str().to_string()),
        );
        conditions.int("received_at >= $?", filter.since_ms);
        conditions.int("received_at < $?", filter.until_ms);
        conditions.int("seq < $?", filter.before_seq);
        let limit = filter.limit.max(1) as usize;
        // One extra row tells whether another page exists.
        let sql = format!(
            "SELECT {DECISION_COLUMNS}{extra_columns} FROM decisions{} ORDER BY seq DESC LIMIT {}",
            conditions.where_clause(),
            limit + 1
        );
        let mut rows = conditions.fetch_all(&sql, &self.read).await?;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            let last = rows
                .last()
                .map(|row| row.try_get::<i64, _>(0))
                .transpose()?;
            last.map(|seq| seq.to_string())
        } else {
            None
        };
        Ok((rows, next))
    }

    /// One page of the fleet view: the latest proposal per job, by job id.
    pub async fn jobs(&self, filter: &JobFilter) -> Result<(JobsPage, Option<String>), StoreError> {
        let started = Instant::now();
        let mut conditions = Conditions::new();
        conditions.text("j.cluster_id = $?", &filter.cluster_id);
        conditions.text("j.region = $?", &filter.region);
        conditions.text("j.job_id > $?", &filter.after_job_id);
        let limit = filter.limit.max(1);
        let sql = format!(
            "SELECT j.job_id, j.job_name, j.cluster_id, j.region, j.last_proposal_id, \
             j.last_verdict, j.last_received_at, j.last_approved_at, o.proposal_id, \
             o.pending_until, j.baseline_slots, d.proposal, d.outcome \
             FROM jobs j LEFT JOIN open_actions o ON o.job_id = j.job_id \
             LEFT JOIN decisions d ON d.proposal_id = j.last_proposal_id{} \
             ORDER BY j.job_id LIMIT {}",
            conditions.where_clause(),
            u64::from(limit) + 1
        );
        let rows = conditions.fetch_all(&sql, &self.read).await?;
        let more = rows.len() > limit as usize;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit as usize) {
            let open: Option<String> = row.try_get(8)?;
            let pending = row.try_get::<Option<i64>, _>(9)?.is_some();
            let proposal: Option<Proposal> = row
                .try_get::<Option<String>, _>(11)?
                .map(|t| parse_json(&t, "decisions.proposal"))
                .transpose()?;
            let last_outcome: Option<RecordedOutcome> = row
                .try_get::<Option<String>, _>(12)?
                .map(|t| parse_json(&t, "decisions.outcome"))
                .transpose()?;
            let applied = last_outcome
                .as_ref()
                .is_some_and(|o| o.status == OutcomeStatus::Applied);
            let slots_now = proposal.as_ref().map_or(0, |p| {
                if applied {
                    slots_needed(p)
                } else {
                    slots_in_use(p)
                }
            });
            jobs.push(JobView {
                job_id: row.try_get(0)?,
                job_name: row.try_get(1)?,
                cluster_id: row.try_get(2)?,
                region: row.try_get(3)?,
                last_proposal_id: row.try_get(4)?,
                last_verdict: verdict(&row.try_get::<String, _>(5)?)?,
                last_received_at: row.try_get(6)?,
                last_approved_at: row.try_get(7)?,
                open_action: open.clone().filter(|_| !pending),
                pending: open.filter(|_| pending),
                vertices: proposal.map(|p| p.vertices).unwrap_or_default(),
                last_outcome,
                slots_now,
                slots_before_autoscaling: row
                    .try_get::<Option<i64>, _>(10)?
                    .and_then(|s| u64::try_from(s).ok()),
            });
        }
        observe_store("read_jobs", started);
        let next = if more {
            jobs.last().map(|j| j.job_id.clone())
        } else {
            None
        };
        Ok((JobsPage { jobs }, next))
    }

    /// Regions currently flagged as evacuating.
    pub async fn regions(&self) -> Result<RegionsPage, StoreError> {
        let started = Instant::now();
        let rows =
            sqlx::query("SELECT region, reason, since, set_by FROM evacuations ORDER BY region")
                .fetch_all(&self.read)
                .await?;
        let regions = rows
            .iter()
            .map(|row| {
                Ok(RegionEvacuation {
                    region: row.try_get(0)?,
                    reason: row.try_get(1)?,
                    since: row.try_get(2)?,
                    set_by: row.try_get(3)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        observe_store("read_regions", started);
        Ok(RegionsPage { regions })
    }

    /// Every cluster with overrides.
    pub async fn clusters(&self) -> Result<ClustersPage, StoreError> {
        let started = Instant::now();
        let rows = sqlx::query(
            "SELECT cluster_id, overrides, updated_at, updated_by FROM cluster_overrides \
             ORDER BY cluster_id",
        )
        .fetch_all(&self.read)
        .await?;
        let clusters = rows
            .iter()
            .map(|row| {
                Ok(ClusterOverridesView {
                    cluster_id: row.try_get(0)?,
                    overrides: parse_json(&row.try_get::<String, _>(1)?, "cluster_overrides")?,
                    updated_at: row.try_get(2)?,
                    updated_by: row.try_get(3)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        observe_store("read_clusters", started);
        Ok(ClustersPage { clusters })
    }
}

impl Store {
    /// The current verdict for a proposal (what `POST /v1/proposals` answered, or the final
    /// verdict once a pending one is decided), if it is on record.
    pub async fn verdict(&self, proposal_id: &str) -> Result<Option<Decision>, StoreError> {
        let started = Instant::now();
        let text: Option<String> =
            sqlx::query_scalar("SELECT decision FROM decisions WHERE proposal_id = $1")
                .bind(proposal_id)
                .fetch_optional(&self.read)
                .await?;
        observe_store("read_verdict", started);
        text.map(|t| parse_json(&t, "decisions.decision"))
            .transpose()
    }

    /// One audit record.
    pub async fn decision(&self, proposal_id: &str) -> Result<Option<DecisionRecord>, StoreError> {
        let mut conn = self.read.acquire().await?;
        decision_by_id(&mut conn, proposal_id).await
    }
}

/// One audit record by proposal id, read on `conn` (inside a transaction when needed).
pub(super) async fn decision_by_id(
    conn: &mut AnyConnection,
    proposal_id: &str,
) -> Result<Option<DecisionRecord>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {DECISION_COLUMNS} FROM decisions WHERE proposal_id = $1"
    ))
    .bind(proposal_id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(decision_from_row).transpose()
}

pub(super) fn decision_from_row(row: &AnyRow) -> Result<DecisionRecord, StoreError> {
    let decision: Decision = parse_json(&row.try_get::<String, _>(9)?, "decisions.decision")?;
    let optional = |i: usize| -> Result<Option<String>, StoreError> { Ok(row.try_get(i)?) };
    let outcome = optional(10)?
        .map(|text| parse_json::<RecordedOutcome>(&text, "decisions.outcome"))
        .transpose()?;
    Ok(DecisionRecord {
        proposal_id: row.try_get(1)?,
        agent_id: row.try_get(2)?,
        job_id: row.try_get(3)?,
        job_name: row.try_get(4)?,
        cluster_id: row.try_get(5)?,
        region: row.try_get(6)?,
        verdict: verdict(&row.try_get::<String, _>(7)?)?,
        reasons: decision.reasons,
        plan: decision.plan,
        received_at: row.try_get(8)?,
        outcome,
        proposal: Some(parse_json(
            &row.try_get::<String, _>(11)?,
            "decisions.proposal",
        )?),
        approval: optional(12)?
            .map(|t| parse_json(&t, "decisions.approval"))
            .transpose()?,
        review: optional(13)?
            .map(|t| parse_json(&t, "decisions.review"))
            .transpose()?,
    })
}

pub(super) fn verdict(text: &str) -> Result<Verdict, StoreError> {
    Verdict::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown verdict {text:?}")))
}
