//! [`Execution`](crate::store::Execution): execution locks and step intents.

use async_trait::async_trait;
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, Conn as _, RowsAffected as _, query_as};
use super::{SqlStore, Tx};
use crate::store::{
    Execution, ExecutionLock, Intent, IntentStatus, Result, StoreError, storable_value,
};

#[async_trait]
impl<D: Dialect> Execution for SqlStore<D> {
    async fn acquire_execution_lock(
        &self,
        target_fingerprint: &str,
        namespace: Option<&str>,
        request: Uuid,
    ) -> Result<ExecutionLock> {
        let _write = self.write_guard().await;
        let mut tx: Tx<D> = self.writer.begin_with(D::BEGIN).await?;
        sqlx::query(
            "INSERT INTO execution_locks (target_fingerprint, request_id, namespace, \
             acquired_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (target_fingerprint) DO NOTHING",
        )
        .arg(target_fingerprint)
        .arg(D::id(request))
        .arg(namespace)
        .arg(D::ts(self.clock.now()))
        .execute(tx.conn())
        .await?;
        let row = sqlx::query(
            "SELECT target_fingerprint, request_id, namespace, acquired_at \
             FROM execution_locks WHERE target_fingerprint = $1",
        )
        .arg(target_fingerprint)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        Self::lock_from_row(&row)
    }

    async fn execution_locks(&self, namespace: Option<&str>) -> Result<Vec<ExecutionLock>> {
        let rows = sqlx::query(
            "SELECT target_fingerprint, request_id, namespace, acquired_at \
             FROM execution_locks WHERE ($1 IS NULL OR namespace = $1) \
             ORDER BY acquired_at",
        )
        .arg(namespace)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::lock_from_row).collect()
    }

    async fn begin_intent(
        &self,
        request: Uuid,
        step: i32,
        action: &str,
        detail: &serde_json::Value,
    ) -> Result<(Intent, bool)> {
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx: Tx<D> = self.writer.begin_with(D::BEGIN).await?;
        // Every write to the cluster is preceded by its intent: a replica whose audit
        // key was rotated out while a stage ran makes no further write.
        let recorded: Option<(String,)> =
            query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                .fetch_optional(tx.conn())
                .await?;
        if let Some((key,)) = recorded
            && key != self.audit_key.id()
        {
            return Err(StoreError::AuditKey(format!(
                "the audit trail is now signed with key {key}, not with this daemon's \
                 key {}: no step is started; restart this daemon with the current keyring",
                self.audit_key.id()
            )));
        }
        let inserted = sqlx::query(
            "INSERT INTO execution_intents (request_id, step, action, status, detail, \
             created_at, updated_at) VALUES ($1, $2, $3, 'started', $4, $5, $5) \
             ON CONFLICT (request_id, step) DO NOTHING",
        )
        .arg(D::id(request))
        .arg(step)
        .arg(action)
        .arg(storable_value(detail))
        .arg(D::ts(now))
        .execute(tx.conn())
        .await?
        .rows_affected()
            == 1;
        let row = sqlx::query(
            "SELECT request_id, step, action, status, detail, created_at, updated_at \
             FROM execution_intents WHERE request_id = $1 AND step = $2",
        )
        .arg(D::id(request))
        .arg(step)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        Ok((Self::intent_from_row(&row)?, inserted))
    }

    async fn finish_intent(
        &self,
        request: Uuid,
        step: i32,
        status: IntentStatus,
        detail: &serde_json::Value,
    ) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query(
            "UPDATE execution_intents SET status = $1, detail = $2, updated_at = $3 \
             WHERE request_id = $4 AND step = $5",
        )
        .arg(status.as_str())
        .arg(storable_value(detail))
        .arg(D::ts(self.clock.now()))
        .arg(D::id(request))
        .arg(step)
        .execute(self.writes())
        .await?;
        Ok(())
    }

    async fn intents(&self, request: Uuid) -> Result<Vec<Intent>> {
        let rows = sqlx::query(
            "SELECT request_id, step, action, status, detail, created_at, updated_at \
             FROM execution_intents WHERE request_id = $1 ORDER BY step",
        )
        .arg(D::id(request))
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::intent_from_row).collect()
    }
}
