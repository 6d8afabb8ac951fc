//! Read side: the audit, the fleet view, region flags and cluster overrides.

use std::time::Instant;

use flink_autoscale_shared::protocol::{
    ClusterOverridesView, ClustersPage, Decision, DecisionPage, DecisionRecord, JobView, JobsPage,
    RecordedOutcome, RegionEvacuation, RegionsPage, Verdict,
};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::{observe_store, parse_json, Store, StoreError};

/// Filters of `GET /v1/decisions`; all present filters must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionFilter {
    pub job_id: Option<String>,
    pub cluster_id: Option<String>,
    pub region: Option<String>,
    /// Only decisions received at or after this Unix time in milliseconds.
    pub since_ms: Option<i64>,
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

const DECISION_COLUMNS: &str = "seq, proposal_id, agent_id, job_id, job_name, cluster_id, \
    region, verdict, received_at, decision, outcome";

/// Appends `column op $n` conditions for the present values and returns the bind list.
struct Conditions {
    sql: Vec<String>,
    binds: Vec<Bind>,
}

enum Bind {
    Text(String),
    Int(i64),
}

impl Conditions {
    fn new() -> Self {
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

    fn text(&mut self, condition: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.push(condition, Bind::Text(v.clone()));
        }
    }

    fn int(&mut self, condition: &str, value: Option<i64>) {
        if let Some(v) = value {
            self.push(condition, Bind::Int(v));
        }
    }

    fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    async fn fetch_all(self, sql: &str, pool: &sqlx::AnyPool) -> Result<Vec<AnyRow>, StoreError> {
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
        let mut conditions = Conditions::new();
        conditions.text("job_id = $?", &filter.job_id);
        conditions.text("cluster_id = $?", &filter.cluster_id);
        conditions.text("region = $?", &filter.region);
        conditions.int("received_at >= $?", filter.since_ms);
        conditions.int("seq < $?", filter.before_seq);
        let limit = filter.limit.max(1);
        // One extra row tells whether another page exists.
        let sql = format!(
            "SELECT {DECISION_COLUMNS} FROM decisions{} ORDER BY seq DESC LIMIT {}",
            conditions.where_clause(),
            u64::from(limit) + 1
        );
        let rows = conditions.fetch_all(&sql, &self.read).await?;
        let more = rows.len() > limit as usize;
        let mut decisions = Vec::with_capacity(rows.len().min(limit as usize));
        let mut last_seq = None;
        for row in rows.iter().take(limit as usize) {
            last_seq = Some(row.try_get::<i64, _>(0)?);
            decisions.push(decision_from_row(row)?);
        }
        observe_store("read_decisions", started);
        Ok(DecisionPage {
            decisions,
            next: if more {
                last_seq.map(|s| s.to_string())
            } else {
                None
            },
        })
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
             j.last_verdict, j.last_received_at, j.last_approved_at, o.proposal_id \
             FROM jobs j LEFT JOIN open_actions o ON o.job_id = j.job_id{} \
             ORDER BY j.job_id LIMIT {}",
            conditions.where_clause(),
            u64::from(limit) + 1
        );
        let rows = conditions.fetch_all(&sql, &self.read).await?;
        let more = rows.len() > limit as usize;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit as usize) {
            jobs.push(JobView {
                job_id: row.try_get(0)?,
                job_name: row.try_get(1)?,
                cluster_id: row.try_get(2)?,
                region: row.try_get(3)?,
                last_proposal_id: row.try_get(4)?,
                last_verdict: verdict(&row.try_get::<String, _>(5)?)?,
                last_received_at: row.try_get(6)?,
                last_approved_at: row.try_get(7)?,
                open_action: row.try_get(8)?,
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
        let rows = sqlx::query("SELECT region, reason, since FROM evacuations ORDER BY region")
            .fetch_all(&self.read)
            .await?;
        let regions = rows
            .iter()
            .map(|row| {
                Ok(RegionEvacuation {
                    region: row.try_get(0)?,
                    reason: row.try_get(1)?,
                    since: row.try_get(2)?,
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
            "SELECT cluster_id, overrides, updated_at FROM cluster_overrides ORDER BY cluster_id",
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
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        observe_store("read_clusters", started);
        Ok(ClustersPage { clusters })
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

fn decision_from_row(row: &AnyRow) -> Result<DecisionRecord, StoreError> {
    let decision: Decision = parse_json(&row.try_get::<String, _>(9)?, "decisions.decision")?;
    let outcome: Option<String> = row.try_get(10)?;
    let outcome = outcome
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
    })
}

fn verdict(text: &str) -> Result<Verdict, StoreError> {
    Verdict::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown verdict {text:?}")))
}
