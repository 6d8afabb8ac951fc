//! Web console sessions, kept in the store so that they survive a restart and every replica
//! behind a load balancer knows them. Only digests are stored (see the migration).

use std::time::Instant;

use sqlx::Row;

use super::{observe_store, Store, StoreError};

/// A console session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Hex SHA-256 of the token signed in with.
    pub token_digest: String,
    /// The session's CSRF token, echoed by every form.
    pub csrf: String,
    /// Unix time in milliseconds.
    pub expires_at: i64,
}

impl Store {
    /// Records a new session under the digest of its id, and forgets expired ones.
    pub async fn create_session(
        &self,
        id_digest: &str,
        session: &StoredSession,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let mut tx = self.write.begin().await?;
        sqlx::query("DELETE FROM console_sessions WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO console_sessions (id_digest, token_digest, csrf, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id_digest)
        .bind(&session.token_digest)
        .bind(&session.csrf)
        .bind(now_ms)
        .bind(session.expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        observe_store("create_session", started);
        Ok(())
    }

    /// The unexpired session stored under `id_digest`, if any.
    pub async fn session(
        &self,
        id_digest: &str,
        now_ms: i64,
    ) -> Result<Option<StoredSession>, StoreError> {
        let started = Instant::now();
        let row = sqlx::query(
            "SELECT token_digest, csrf, expires_at FROM console_sessions \
             WHERE id_digest = $1 AND expires_at > $2",
        )
        .bind(id_digest)
        .bind(now_ms)
        .fetch_optional(&self.read)
        .await?;
        let session = row
            .map(|row| {
                Ok::<_, StoreError>(StoredSession {
                    token_digest: row.try_get(0)?,
                    csrf: row.try_get(1)?,
                    expires_at: row.try_get(2)?,
                })
            })
            .transpose()?;
        observe_store("read_session", started);
        Ok(session)
    }

    /// Ends a session (signing out); nothing happens for an unknown one.
    pub async fn delete_session(&self, id_digest: &str) -> Result<(), StoreError> {
        let started = Instant::now();
        sqlx::query("DELETE FROM console_sessions WHERE id_digest = $1")
            .bind(id_digest)
            .execute(&self.write)
            .await?;
        observe_store("delete_session", started);
        Ok(())
    }
}
