//! The console's fleet read: per job, its latest audit record with the proposal behind it,
//! and the first proposal ever recorded for it (the parallelism before autoscaling).

use std::time::Instant;

use flink_autoscale_core::protocol::{DecisionRecord, Proposal};
use sqlx::Row;

use super::reads::{decision_from_row, Conditions, JobFilter, DECISION_COLUMNS};
use super::{observe_store, parse_json, Store, StoreError};

/// One job of the fleet page.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetJob {
    pub latest: DecisionRecord,
    pub latest_proposal: Proposal,
    pub first_proposal: Proposal,
    /// The approved proposal still waiting for its outcome, if any.
    pub open_action: Option<String>,
}

impl Store {
    /// One page of jobs by job id, with the cursor of the next page.
    pub async fn fleet(
        &self,
        filter: &JobFilter,
    ) -> Result<(Vec<FleetJob>, Option<String>), StoreError> {
        let started = Instant::now();
        let mut conditions = Conditions::new();
        conditions.text("j.cluster_id = $?", &filter.cluster_id);
        conditions.text("j.region = $?", &filter.region);
        conditions.text("j.job_id > $?", &filter.after_job_id);
        let limit = filter.limit.max(1) as usize;
        let latest_columns = DECISION_COLUMNS
            .split(", ")
            .map(|c| format!("d.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        // The first proposal is found through the (job_id, seq) index.
        let sql = format!(
            "SELECT {latest_columns}, f.proposal, o.proposal_id, o.pending_until \
             FROM jobs j \
             JOIN decisions d ON d.proposal_id = j.last_proposal_id \
             JOIN decisions f ON f.seq = \
               (SELECT MIN(m.seq) FROM decisions m WHERE m.job_id = j.job_id) \
             LEFT JOIN open_actions o ON o.job_id = j.job_id{} \
             ORDER BY j.job_id LIMIT {}",
            conditions.where_clause(),
            limit + 1
        );
        let rows = conditions.fetch_all(&sql, &self.read).await?;
        let more = rows.len() > limit;
        let jobs =
            rows.iter()
                .take(limit)
                .map(|row| {
                    let mut latest = decision_from_row(row)?;
                    let latest_proposal = latest.proposal.take().ok_or_else(|| {
                        StoreError::Corrupt("decisions.proposal is missing".into())
                    })?;
                    let pending = row.try_get::<Option<i64>, _>(16)?.is_some();
                    Ok(FleetJob {
                        latest,
                        latest_proposal,
                        first_proposal: parse_json(
                            &row.try_get::<String, _>(14)?,
                            "decisions.proposal",
                        )?,
                        // A pending proposal holds the job's slot but is not an approved action.
                        open_action: row.try_get::<Option<String>, _>(15)?.filter(|_| !pending),
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
        let next = if more {
            jobs.last().map(|j| j.latest.job_id.clone())
        } else {
            None
        };
        observe_store("read_fleet", started);
        Ok((jobs, next))
    }
}
