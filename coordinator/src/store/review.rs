//! A person in the loop: approving or denying a pending proposal, and expiring the ones
//! nobody decided in time.
//!
//! Exactly one decision wins, also between replicas: the pending verdict is changed with a
//! conditional `UPDATE … WHERE verdict = 'pending'`, which a concurrent decision either
//! waits for and then finds changed (PostgreSQL's row lock) or runs after (SQLite's single
//! writer). The loser changes nothing and is told who decided.

use std::time::Instant;

use flink_autoscale_core::policy::verdicts;
use flink_autoscale_core::protocol::{
    ApprovalRequest, Decision, DecisionRecord, Proposal, Review, ReviewAction, Verdict,
};
use sqlx::{AnyConnection, Row};

use super::facts::{self, lock_scopes};
use super::notifications::{count_queued, enqueue};
use super::{admin, now_ms, observe_store, parse_json, reads, to_json, Store, StoreError};
use crate::notify::{self, Event, Notice};

/// Most pending proposals expired in one sweep.
const EXPIRE_BATCH: i64 = 256;

/// The answer to an approval or denial.
#[derive(Debug, Clone, PartialEq)]
pub enum ReviewResult {
    /// Decided now; the record shows the verdict (an approval the gates refuse again is
    /// refused) and the review.
    Decided(Box<DecisionRecord>),
    UnknownProposal,
    /// It is not (or no longer) pending: decided by someone else, refused, expired or
    /// superseded. The record says how.
    NotPending(Box<DecisionRecord>),
}

/// Gives a pending proposal its final `decision` (and the review, if a person decided):
/// releases its hold on the job and updates the fleet view. False when it was no longer
/// pending (someone else decided it first), and nothing is changed.
pub(super) async fn finalize_pending(
    conn: &mut AnyConnection,
    job_id: &str,
    proposal_id: &str,
    decision: &Decision,
    review: Option<&Review>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE decisions SET verdict = $1, decision = $2, review = $3 \
         WHERE proposal_id = $4 AND verdict = 'pending'",
    )
    .bind(decision.verdict.as_str())
    .bind(to_json(decision))
    .bind(review.map(to_json))
    .bind(proposal_id)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    if decision.verdict == Verdict::Approved {
        sqlx::query(
            "UPDATE open_actions SET pending_until = NULL, approved_at = $1 \
             WHERE job_id = $2 AND proposal_id = $3",
        )
        .bind(review.map_or_else(now_ms, |r| r.at))
        .bind(job_id)
        .bind(proposal_id)
        .execute(&mut *conn)
        .await?;
    } else {
        sqlx::query("DELETE FROM open_actions WHERE job_id = $1 AND proposal_id = $2")
            .bind(job_id)
            .bind(proposal_id)
            .execute(&mut *conn)
            .await?;
    }
    let approved_at = (decision.verdict == Verdict::Approved).then(|| review.map_or(0, |r| r.at));
    sqlx::query(
        "UPDATE jobs SET last_verdict = $1, \
         last_approved_at = COALESCE($2, last_approved_at) \
         WHERE job_id = $3 AND last_proposal_id = $4",
    )
    .bind(decision.verdict.as_str())
    .bind(approved_at)
    .bind(job_id)
    .bind(proposal_id)
    .execute(&mut *conn)
    .await?;
    Ok(true)
}

impl Store {
    /// An admin approves or denies a pending proposal. An approval runs the gates again
    /// (the region may be evacuating by now, the cluster may be at its cap) and is refused
    /// if they refuse; either way the audit records who, when and why.
    pub async fn review(
        &self,
        proposal_id: &str,
        action: ReviewAction,
        by: &str,
        comment: &str,
    ) -> Result<ReviewResult, StoreError> {
        let started = Instant::now();
        let shared = &self.shared;
        let now = now_ms();
        let mut tx = self.write.begin().await?;
        let row = sqlx::query(
            "SELECT proposal, verdict, approval, job_id FROM decisions WHERE proposal_id = $1",
        )
        .bind(proposal_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(ReviewResult::UnknownProposal);
        };
        let verdict: String = row.try_get(1)?;
        let job_id: String = row.try_get(3)?;
        if verdict != Verdict::Pending.as_str() {
            return not_pending(&mut tx, proposal_id).await;
        }
        let proposal: Proposal = parse_json(&row.try_get::<String, _>(0)?, "decisions.proposal")?;
        let approval: ApprovalRequest = parse_json(
            &row.try_get::<Option<String>, _>(2)?.unwrap_or_default(),
            "decisions.approval",
        )?;
        let mut notices: Vec<Notice> = Vec::new();
        if approval.expires_at <= now {
            // Too late: expire it now (the sweep would), and say so.
            let decision = verdicts::expired(proposal_id, &approval);
            if finalize_pending(&mut tx, &job_id, proposal_id, &decision, None).await? {
                notices.push(notice(
                    Event::ApprovalExpired,
                    &proposal,
                    &decision,
                    None,
                    now,
                ));
            }
            let queued = enqueue(
                &mut tx,
                shared.params(),
                &shared.notifications,
                &notices,
                now,
            )
            .await?;
            let result = not_pending(&mut tx, proposal_id).await?;
            tx.commit().await?;
            count_queued(&queued);
            return Ok(result);
        }
        let review = Review {
            action,
            by: by.to_string(),
            at: now,
            comment: comment.to_string(),
        };
        let decision = match action {
            ReviewAction::Deny => verdicts::denied(proposal_id, by, comment),
            ReviewAction::Approve => {
                if !shared.sqlite {
                    lock_scopes(&mut tx, &[&proposal]).await?;
                }
                let expired_before = now.saturating_sub(shared.open_action_timeout_ms);
                let mut facts =
                    facts::load(&mut tx, shared.params(), &[&proposal], now, expired_before)
                        .await?;
                let switches = facts.switches(&proposal, now);
                let config = facts.gates(&shared.gates, &proposal);
                facts
                    .ledger
                    .decide_reviewed(&proposal, &switches, &config, now)
            }
        };
        if !finalize_pending(&mut tx, &job_id, proposal_id, &decision, Some(&review)).await? {
            // Someone else decided it meanwhile; this review changes nothing.
            drop(tx);
            let mut conn = self.read.acquire().await?;
            return not_pending(&mut conn, proposal_id).await;
        }
        if let Some(event) = Event::of_verdict(decision.verdict) {
            notices.push(notice(event, &proposal, &decision, Some(&review), now));
        }
        let queued = enqueue(
            &mut tx,
            shared.params(),
            &shared.notifications,
            &notices,
            now,
        )
        .await?;
        admin::record_action(
            &mut tx,
            by,
            action.as_str(),
            proposal_id,
            &serde_json::json!({ "comment": comment, "verdict": decision.verdict }),
            now,
        )
        .await?;
        let record = reads::decision_by_id(&mut tx, proposal_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("decision {proposal_id} vanished")))?;
        tx.commit().await?;
        count_queued(&queued);
        admin::count_action(action.as_str());
        observe_store("review", started);
        Ok(ReviewResult::Decided(Box::new(record)))
    }

    /// Refuses every pending proposal past its expiry (`approval_expired`), and removes
    /// expired pauses. Returns how many proposals expired.
    pub async fn expire(&self) -> Result<usize, StoreError> {
        let started = Instant::now();
        let shared = &self.shared;
        let now = now_ms();
        let mut tx = self.write.begin().await?;
        let rows = sqlx::query(&format!(
            "SELECT o.job_id, o.proposal_id, d.approval, d.proposal FROM open_actions o \
             JOIN decisions d ON d.proposal_id = o.proposal_id \
             WHERE o.pending_until IS NOT NULL AND o.pending_until <= $1 LIMIT {EXPIRE_BATCH}"
        ))
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let mut notices = Vec::new();
        let mut expired = 0;
        for row in rows {
            let job_id: String = row.try_get(0)?;
            let proposal_id: String = row.try_get(1)?;
            let approval: ApprovalRequest = parse_json(
                &row.try_get::<Option<String>, _>(2)?.unwrap_or_default(),
                "decisions.approval",
            )?;
            let decision = verdicts::expired(&proposal_id, &approval);
            if finalize_pending(&mut tx, &job_id, &proposal_id, &decision, None).await? {
                expired += 1;
                if shared
                    .notifications
                    .subscribers(Event::ApprovalExpired)
                    .next()
                    .is_some()
                {
                    let proposal: Proposal =
                        parse_json(&row.try_get::<String, _>(3)?, "decisions.proposal")?;
                    notices.push(notice(
                        Event::ApprovalExpired,
                        &proposal,
                        &decision,
                        None,
                        now,
                    ));
                }
                tracing::info!(%job_id, %proposal_id, rule = %approval.rule, "pending proposal expired without approval");
            }
        }
        sqlx::query("DELETE FROM pauses WHERE expires_at IS NOT NULL AND expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let queued = enqueue(
            &mut tx,
            shared.params(),
            &shared.notifications,
            &notices,
            now,
        )
        .await?;
        tx.commit().await?;
        count_queued(&queued);
        observe_store("expire", started);
        Ok(expired)
    }

    /// Proposals waiting for a person now.
    pub async fn pending_count(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM open_actions WHERE pending_until IS NOT NULL AND pending_until > $1",
        )
        .bind(now_ms())
        .fetch_one(&self.read)
        .await?)
    }
}

/// The answer for a proposal that is not pending: its record as it stands.
async fn not_pending(
    conn: &mut AnyConnection,
    proposal_id: &str,
) -> Result<ReviewResult, StoreError> {
    let record = reads::decision_by_id(conn, proposal_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("decision {proposal_id} vanished")))?;
    Ok(ReviewResult::NotPending(Box::new(record)))
}

fn notice(
    event: Event,
    proposal: &Proposal,
    decision: &Decision,
    review: Option<&Review>,
    at: i64,
) -> Notice {
    notify::notice(
        event,
        &notify::Subject {
            proposal,
            decision,
            outcome: None,
            review,
            at,
        },
    )
}
