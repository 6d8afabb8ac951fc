//! Admin switches and settings, each recorded with the admin's name in the same transaction
//! as the change: region flags, cluster overrides, pauses and the approval rules set through
//! the API; and the log of admin actions.

use std::time::Instant;

use flink_autoscale_core::pause::PauseScope;
use flink_autoscale_core::policy::{PolicyView, Rule, RuleSource, SourcedRule};
use flink_autoscale_core::protocol::{
    AdminAction, AdminActionPage, ClusterOverrides, Pause, PauseRequest, PausesPage,
};
use serde_json::{json, Value};
use sqlx::{AnyConnection, Row};

use super::{now_ms, observe_store, parse_json, to_json, Store, StoreError};

/// Filters of `GET /v1/admin-actions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminActionFilter {
    pub admin: Option<String>,
    /// Only actions older than this cursor (from a previous page's `next`).
    pub before_seq: Option<i64>,
    pub limit: u32,
}

/// Appends one admin action to the log, in the caller's transaction.
pub(super) async fn record_action(
    conn: &mut AnyConnection,
    admin: &str,
    action: &str,
    target: &str,
    detail: &Value,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO admin_actions (at, admin, action, target, detail) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(now)
    .bind(admin)
    .bind(action)
    .bind(target)
    .bind(detail.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

/// A change made in an admin transaction: its result, and whether anything changed (only
/// then is the action logged).
type Change<'c, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(T, bool), StoreError>> + Send + 'c>>;

/// Counts an admin action that committed.
pub(super) fn count_action(action: &str) {
    metrics::counter!(crate::metrics::ADMIN_ACTIONS, "action" => action.to_string()).increment(1);
}

impl Store {
    /// Runs `change` and logs the admin action in one transaction; returns `change`'s result.
    async fn admin_change<T>(
        &self,
        operation: &'static str,
        by: &str,
        target: &str,
        detail: Value,
        change: impl for<'c> FnOnce(&'c mut AnyConnection, i64) -> Change<'c, T>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let now = now_ms();
        let mut tx = self.write.begin().await?;
        let (result, changed) = change(&mut tx, now).await?;
        if changed {
            record_action(&mut tx, by, operation, target, &detail, now).await?;
        }
        tx.commit().await?;
        if changed {
            count_action(operation);
        }
        observe_store(operation, started);
        Ok(result)
    }

    /// Flags a region as evacuating (keeps the original start time if already flagged).
    pub async fn set_evacuation(
        &self,
        region: &str,
        reason: &str,
        by: &str,
    ) -> Result<(), StoreError> {
        let (region_, reason_, by_) = (region.to_string(), reason.to_string(), by.to_string());
        self.admin_change(
            "flag_region",
            by,
            region,
            json!({ "reason": reason }),
            move |conn, now| {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO evacuations (region, reason, since, set_by) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (region) DO UPDATE SET reason = excluded.reason, set_by = excluded.set_by",
                    )
                    .bind(region_)
                    .bind(reason_)
                    .bind(now)
                    .bind(by_)
                    .execute(conn)
                    .await?;
                    Ok(((), true))
                })
            },
        )
        .await
    }

    /// Clears a region's evacuation flag; false when it was not flagged.
    pub async fn clear_evacuation(&self, region: &str, by: &str) -> Result<bool, StoreError> {
        let region_ = region.to_string();
        self.admin_change("unflag_region", by, region, json!({}), move |conn, _| {
            Box::pin(async move {
                let done = sqlx::query("DELETE FROM evacuations WHERE region = $1")
                    .bind(region_)
                    .execute(conn)
                    .await?;
                let changed = done.rows_affected() > 0;
                Ok((changed, changed))
            })
        })
        .await
    }

    /// Replaces a cluster's overrides.
    pub async fn set_overrides(
        &self,
        cluster_id: &str,
        overrides: &ClusterOverrides,
        by: &str,
    ) -> Result<(), StoreError> {
        let (cluster, text, by_) = (cluster_id.to_string(), to_json(overrides), by.to_string());
        let detail = serde_json::to_value(overrides).unwrap_or(Value::Null);
        self.admin_change("set_overrides", by, cluster_id, detail, move |conn, now| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO cluster_overrides (cluster_id, overrides, updated_at, updated_by) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (cluster_id) DO UPDATE SET \
                     overrides = excluded.overrides, updated_at = excluded.updated_at, \
                     updated_by = excluded.updated_by",
                )
                .bind(cluster)
                .bind(text)
                .bind(now)
                .bind(by_)
                .execute(conn)
                .await?;
                Ok(((), true))
            })
        })
        .await
    }

    /// Removes a cluster's overrides; false when it had none.
    pub async fn delete_overrides(&self, cluster_id: &str, by: &str) -> Result<bool, StoreError> {
        let cluster = cluster_id.to_string();
        self.admin_change(
            "delete_overrides",
            by,
            cluster_id,
            json!({}),
            move |conn, _| {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM cluster_overrides WHERE cluster_id = $1")
                        .bind(cluster)
                        .execute(conn)
                        .await?;
                    let changed = done.rows_affected() > 0;
                    Ok((changed, changed))
                })
            },
        )
        .await
    }

    /// Pauses a scope (or changes the reason and expiry of its pause; the start time stays
    /// unless the earlier pause had expired).
    pub async fn set_pause(
        &self,
        scope: &PauseScope,
        request: &PauseRequest,
        by: &str,
    ) -> Result<(), StoreError> {
        let scope_text = scope.to_string();
        let (scope_, reason, expires_at, by_) = (
            scope_text.clone(),
            request.reason.trim().to_string(),
            request.expires_at,
            by.to_string(),
        );
        let detail = json!({ "reason": reason, "expires_at": expires_at });
        self.admin_change("pause", by, &scope_text, detail, move |conn, now| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO pauses (scope, reason, set_by, since, expires_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope) DO UPDATE SET \
                     reason = excluded.reason, set_by = excluded.set_by, \
                     expires_at = excluded.expires_at, \
                     since = CASE WHEN pauses.expires_at IS NOT NULL AND pauses.expires_at <= $4 \
                     THEN excluded.since ELSE pauses.since END",
                )
                .bind(scope_)
                .bind(reason)
                .bind(by_)
                .bind(now)
                .bind(expires_at)
                .execute(conn)
                .await?;
                Ok(((), true))
            })
        })
        .await
    }

    /// Lifts a pause; false when the scope was not paused.
    pub async fn clear_pause(&self, scope: &PauseScope, by: &str) -> Result<bool, StoreError> {
        let scope_text = scope.to_string();
        let scope_ = scope_text.clone();
        self.admin_change("unpause", by, &scope_text, json!({}), move |conn, now| {
            Box::pin(async move {
                let done = sqlx::query(
                    "DELETE FROM pauses WHERE scope = $1 AND (expires_at IS NULL OR expires_at > $2)",
                )
                .bind(scope_)
                .bind(now)
                .execute(conn)
                .await?;
                let changed = done.rows_affected() > 0;
                Ok((changed, changed))
            })
        })
        .await
    }

    /// The pauses in force, broadest scope first.
    pub async fn pauses(&self) -> Result<PausesPage, StoreError> {
        let started = Instant::now();
        let rows = sqlx::query(
            "SELECT scope, reason, set_by, since, expires_at FROM pauses \
             WHERE expires_at IS NULL OR expires_at > $1",
        )
        .bind(now_ms())
        .fetch_all(&self.read)
        .await?;
        let mut pauses = rows
            .iter()
            .map(|row| {
                Ok(Pause {
                    scope: row.try_get(0)?,
                    reason: row.try_get(1)?,
                    set_by: row.try_get(2)?,
                    since: row.try_get(3)?,
                    expires_at: row.try_get(4)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        pauses.sort_by_key(|p| PauseScope::parse(&p.scope).unwrap_or(PauseScope::Fleet));
        observe_store("read_pauses", started);
        Ok(PausesPage { pauses })
    }

    /// Replaces the approval rules set through the API (the configuration's stay first).
    pub async fn set_policy(&self, rules: &[Rule], by: &str) -> Result<(), StoreError> {
        let (text, by_) = (to_json(&rules), by.to_string());
        let detail = json!({ "rules": rules });
        self.admin_change("set_policy", by, "policy", detail, move |conn, now| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO approval_policy (id, rules, updated_by, updated_at) \
                     VALUES (1, $1, $2, $3) ON CONFLICT (id) DO UPDATE SET \
                     rules = excluded.rules, updated_by = excluded.updated_by, \
                     updated_at = excluded.updated_at",
                )
                .bind(text)
                .bind(by_)
                .bind(now)
                .execute(conn)
                .await?;
                Ok(((), true))
            })
        })
        .await
    }

    /// The approval policy in force: the configuration's rules, then the API's.
    pub async fn policy(&self) -> Result<PolicyView, StoreError> {
        let row = sqlx::query("SELECT rules, updated_by, updated_at FROM approval_policy")
            .fetch_optional(&self.read)
            .await?;
        let policies = &self.shared.policies;
        let mut rules: Vec<SourcedRule> = policies
            .config_rules()
            .iter()
            .map(|r| SourcedRule {
                source: RuleSource::Config,
                rule: r.clone(),
            })
            .collect();
        let (mut updated_by, mut updated_at) = (None, None);
        if let Some(row) = row {
            let api: Vec<Rule> =
                parse_json(&row.try_get::<String, _>(0)?, "approval_policy.rules")?;
            rules.extend(api.into_iter().map(|rule| SourcedRule {
                source: RuleSource::Api,
                rule,
            }));
            updated_by = Some(row.try_get(1)?);
            updated_at = Some(row.try_get(2)?);
        }
        Ok(PolicyView {
            rules,
            approval_ttl_seconds: policies.approval_ttl_ms() / 1000,
            updated_by,
            updated_at,
        })
    }

    /// One page of the admin action log, newest first.
    pub async fn admin_actions(
        &self,
        filter: &AdminActionFilter,
    ) -> Result<AdminActionPage, StoreError> {
        let started = Instant::now();
        let limit = filter.limit.max(1);
        let mut conditions = Vec::new();
        if filter.admin.is_some() {
            conditions.push("admin = $1".to_string());
        }
        if filter.before_seq.is_some() {
            conditions.push(format!(
                "seq < ${}",
                if filter.admin.is_some() { 2 } else { 1 }
            ));
        }
        let where_clause = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT seq, at, admin, action, target, detail FROM admin_actions{where_clause} \
             ORDER BY seq DESC LIMIT {}",
            u64::from(limit) + 1
        );
        let mut query = sqlx::query(&sql);
        if let Some(admin) = &filter.admin {
            query = query.bind(admin.clone());
        }
        if let Some(seq) = filter.before_seq {
            query = query.bind(seq);
        }
        let rows = query.fetch_all(&self.read).await?;
        let more = rows.len() > limit as usize;
        let mut actions = Vec::new();
        let mut last_seq = None;
        for row in rows.iter().take(limit as usize) {
            last_seq = Some(row.try_get::<i64, _>(0)?);
            actions.push(AdminAction {
                at: row.try_get(1)?,
                admin: row.try_get(2)?,
                action: row.try_get(3)?,
                target: row.try_get(4)?,
                detail: parse_json(&row.try_get::<String, _>(5)?, "admin_actions.detail")?,
            });
        }
        observe_store("read_admin_actions", started);
        Ok(AdminActionPage {
            actions,
            next: if more {
                last_seq.map(|s| s.to_string())
            } else {
                None
            },
        })
    }
}
