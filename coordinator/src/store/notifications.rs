//! The webhook queue: durable, bounded, shared by replicas. Notifications are queued in the
//! transaction of the decision they report; the delivery task leases due rows (one replica
//! delivers each), deletes what was delivered or given up, and reschedules the rest.

use std::time::Instant;

use sqlx::{AnyConnection, Row};

use super::facts::{one_shot, Params};
use super::{observe_store, Store, StoreError};
use crate::notify::{Event, Notice, NotificationsConfig};

/// Rows per multi-row INSERT.
const INSERT_CHUNK: usize = 128;

/// A delivery leased to this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub id: i64,
    pub webhook: String,
    pub event: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// Queues `notices` for every webhook that receives their event, in the caller's
/// transaction. Returns the event of each queued delivery, for [`count_queued`] after the
/// commit.
pub(super) async fn enqueue(
    conn: &mut AnyConnection,
    params: Params,
    config: &NotificationsConfig,
    notices: &[Notice],
    now: i64,
) -> Result<Vec<(String, Event)>, StoreError> {
    let rows: Vec<(&str, Event, &str)> = notices
        .iter()
        .flat_map(|n| {
            config
                .subscribers(n.event)
                .map(move |w| (w.name.as_str(), n.event, n.body.as_str()))
        })
        .collect();
    for chunk in rows.chunks(INSERT_CHUNK) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let now = params.one(1);
                format!("({}, {now}, {now})", params.list(2 + i * 3, 3))
            })
            .collect();
        // Due at once: next_attempt_at = created_at.
        let sql = format!(
            "INSERT INTO notifications (webhook, event, body, created_at, next_attempt_at) \
             VALUES {}",
            values.join(", ")
        );
        let mut query = one_shot(&sql).bind(now);
        for (webhook, event, body) in chunk {
            query = query.bind(*webhook).bind(event.as_str()).bind(*body);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(rows
        .iter()
        .map(|(webhook, event, _)| (webhook.to_string(), *event))
        .collect())
}

/// Counts deliveries queued by a committed transaction.
pub(super) fn count_queued(queued: &[(String, Event)]) {
    for (webhook, event) in queued {
        crate::metrics::webhook_delivery(webhook, event.as_str(), "queued");
    }
}

impl Store {
    /// Leases up to `limit` due deliveries for `lease_ms`: one statement that only takes
    /// rows no one else holds, so two replicas never send the same delivery at once.
    pub async fn lease_notifications(
        &self,
        now: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<Queued>, StoreError> {
        let started = Instant::now();
        let rows = sqlx::query(&format!(
            "UPDATE notifications SET lease_until = $1 WHERE id IN (\
               SELECT id FROM notifications \
               WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) \
               ORDER BY id LIMIT {limit}) \
             AND (lease_until IS NULL OR lease_until <= $2) \
             RETURNING id, webhook, event, body, attempts"
        ))
        .bind(now.saturating_add(lease_ms))
        .bind(now)
        .fetch_all(&self.write)
        .await?;
        let mut leased = rows
            .iter()
            .map(|row| {
                Ok(Queued {
                    id: row.try_get(0)?,
                    webhook: row.try_get(1)?,
                    event: row.try_get(2)?,
                    body: row.try_get(3)?,
                    attempts: u32::try_from(row.try_get::<i64, _>(4)?).unwrap_or(u32::MAX),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        leased.sort_by_key(|q| q.id);
        observe_store("lease_notifications", started);
        Ok(leased)
    }

    /// Removes a delivery that was delivered or given up.
    pub async fn finish_notification(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM notifications WHERE id = $1")
            .bind(id)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// Schedules another attempt at `next_at`.
    pub async fn retry_notification(
        &self,
        id: i64,
        attempts: u32,
        next_at: i64,
        error: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE notifications SET attempts = $1, next_attempt_at = $2, lease_until = NULL, \
             last_error = $3 WHERE id = $4",
        )
        .bind(i64::from(attempts))
        .bind(next_at)
        .bind(error)
        .bind(id)
        .execute(&self.write)
        .await?;
        Ok(())
    }

    /// Keeps the `capacity` newest deliveries; returns the (webhook, event) of each older
    /// one dropped.
    pub async fn trim_notifications(
        &self,
        capacity: u64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let offset = i64::try_from(capacity).unwrap_or(i64::MAX);
        let cut: Option<i64> =
            sqlx::query_scalar("SELECT id FROM notifications ORDER BY id DESC LIMIT 1 OFFSET $1")
                .bind(offset)
                .fetch_optional(&self.read)
                .await?;
        let Some(cut) = cut else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query("DELETE FROM notifications WHERE id <= $1 RETURNING webhook, event")
            .bind(cut)
            .fetch_all(&self.write)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect()
    }

    /// Deliveries waiting (due or not).
    pub async fn queued_notifications(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM notifications")
            .fetch_one(&self.read)
            .await?)
    }
}
