//! [`Auth`](crate::store::Auth): API keys, sessions and failed sign-ins.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::dialect::Dialect;
use super::facade::{Arg as _, Col as _, Conn as _, query_as};
use super::{SqlStore, Tx};
use crate::domain::{ApiKey, AuditDraft, Role, Session};
use crate::store::{Auth, MAX_LOGIN_FAILURES_READ, Result, corrupt, storable_text};

#[async_trait]
impl<D: Dialect> Auth for SqlStore<D> {
    async fn create_api_key(&self, key: &ApiKey, key_hash: &str) -> Result<()> {
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        sqlx::query(
            "INSERT INTO api_keys (id, name, role, key_hash, prefix, created_at, created_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .arg(D::id(key.id))
        .arg(storable_text(&key.name))
        .arg(key.role.as_str())
        .arg(key_hash)
        .arg(&key.prefix)
        .arg(D::ts(key.created_at))
        .arg(storable_text(&key.created_by))
        .execute(tx.conn())
        .await?;
        let draft = AuditDraft::new(
            "apikey_created",
            &key.created_by,
            format!("API key `{}` created with role {}", key.name, key.role),
        )
        .with_payload(serde_json::json!({
            "key_id": key.id, "name": key.name, "role": key.role, "prefix": key.prefix,
        }));
        Self::insert_audit(
            &mut tx,
            &self.audit_key,
            None,
            None,
            self.clock.now(),
            &draft,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>> {
        let row = sqlx::query(
            "SELECT id, name, role, prefix, created_at, created_by, revoked_at \
             FROM api_keys WHERE key_hash = $1",
        )
        .arg(key_hash)
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::api_key_from_row).transpose()
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKey>> {
        let rows = sqlx::query(
            "SELECT id, name, role, prefix, created_at, created_by, revoked_at \
             FROM api_keys ORDER BY created_at, name",
        )
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::api_key_from_row).collect()
    }

    async fn revoke_api_key(&self, name: &str, actor: &str) -> Result<Option<ApiKey>> {
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let row = sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL \
             RETURNING id, name, role, prefix, created_at, created_by, revoked_at",
        )
        .arg(D::ts(now))
        .arg(name)
        .fetch_optional(tx.conn())
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let key = Self::api_key_from_row(&row)?;
        sqlx::query("DELETE FROM sessions WHERE key_id = $1")
            .arg(D::id(key.id))
            .execute(tx.conn())
            .await?;
        let draft = AuditDraft::new(
            "apikey_revoked",
            actor,
            format!(
                "API key `{}` ({}) revoked; its sessions ended",
                key.name, key.role
            ),
        )
        .with_payload(serde_json::json!({"key_id": key.id, "name": key.name, "role": key.role}));
        Self::insert_audit(&mut tx, &self.audit_key, None, None, now, &draft).await?;
        tx.commit().await?;
        Ok(Some(key))
    }

    async fn create_session(&self, token_hash: &str, session: &Session) -> Result<()> {
        let _write = self.write_guard().await;
        let mut tx: Tx<D> = self.writer.begin_with(D::BEGIN).await?;
        sqlx::query("DELETE FROM sessions WHERE expires_at < $1")
            .arg(D::ts(self.clock.now()))
            .execute(tx.conn())
            .await?;
        sqlx::query(
            "INSERT INTO sessions (token_hash, subject, key_id, role, csrf, created_at, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .arg(token_hash)
        .arg(storable_text(&session.subject))
        .arg(session.key_id.map(D::id))
        .arg(session.role.as_str())
        .arg(&session.csrf)
        .arg(D::ts(session.created_at))
        .arg(D::ts(session.expires_at))
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn session(&self, token_hash: &str) -> Result<Option<Session>> {
        let row = sqlx::query(
            "SELECT s.subject, s.key_id, s.role, s.csrf, s.created_at, s.expires_at \
             FROM sessions s WHERE s.token_hash = $1 AND s.expires_at > $2 \
             AND (s.key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k \
             WHERE k.id = s.key_id AND k.revoked_at IS NULL))",
        )
        .arg(token_hash)
        .arg(D::ts(self.clock.now()))
        .fetch_optional(self.reads())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let get = |e: sqlx::Error| corrupt("sessions", e.to_string());
        let role: String = row.col("role").map_err(get)?;
        let key_id: Option<D::Id> = row.col("key_id").map_err(get)?;
        Ok(Some(Session {
            subject: row.col("subject").map_err(get)?,
            key_id: key_id.map(D::uuid_of),
            role: Role::parse(&role)
                .ok_or_else(|| corrupt("sessions", format!("role `{role}`")))?,
            csrf: row.col("csrf").map_err(get)?,
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            expires_at: D::time_of(row.col("expires_at").map_err(get)?)?,
        }))
    }

    async fn delete_session(&self, token_hash: &str) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
            .arg(token_hash)
            .execute(self.writes())
            .await?;
        Ok(())
    }

    async fn record_failed_login(
        &self,
        client: &str,
        at: DateTime<Utc>,
        window: Duration,
    ) -> Result<()> {
        let horizon = at - chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
        let _write = self.write_guard().await;
        let mut tx: Tx<D> = self.writer.begin_with(D::BEGIN).await?;
        sqlx::query("DELETE FROM login_failures WHERE at < $1")
            .arg(D::ts(horizon))
            .execute(tx.conn())
            .await?;
        sqlx::query("INSERT INTO login_failures (client, at) VALUES ($1, $2)")
            .arg(storable_text(client))
            .arg(D::ts(at))
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn failed_logins(
        &self,
        client: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>> {
        let rows: Vec<(D::Ts,)> = query_as(
            "SELECT at FROM login_failures WHERE client = $1 AND at >= $2 ORDER BY at LIMIT $3",
        )
        .arg(storable_text(client))
        .arg(D::ts(since))
        .arg(MAX_LOGIN_FAILURES_READ)
        .fetch_all(self.reads())
        .await?;
        rows.into_iter().map(|(at,)| D::time_of(at)).collect()
    }

    async fn clear_failed_logins(&self, client: &str) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query("DELETE FROM login_failures WHERE client = $1")
            .arg(storable_text(client))
            .execute(self.writes())
            .await?;
        Ok(())
    }
}
