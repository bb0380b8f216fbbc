//! [`History`](crate::store::History): finished remediations per target.

use async_trait::async_trait;
use sqlx::types::Json;

use super::SqlStore;
use super::dialect::Dialect;
use super::facade::{Arg as _, Runs as _, query_as};
use crate::store::{Result, corrupt};

#[async_trait]
impl<D: Dialect> crate::store::History for SqlStore<D> {
    async fn record_history(&self, record: &crate::domain::HistoryRecord) -> Result<()> {
        let rid = uuid::Uuid::parse_str(&record.remediation_uid)
            .map_err(|e| corrupt("remediation_history", format!("remediation uid: {e}")))?;
        let _write = self.write_guard().await;
        sqlx::query(
            "INSERT INTO remediation_history (request_id, target_fingerprint, \
             completed_at, record) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (request_id) DO NOTHING",
        )
        .arg(D::id(rid))
        .arg(record.target.fingerprint())
        .arg(D::ts(record.completed_at))
        .arg(crate::store::storable_json(record)?)
        .execute(D::Db::on_pool(&self.writer))
        .await?;
        Ok(())
    }

    async fn history(
        &self,
        target_fingerprint: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<crate::domain::HistoryRecord>> {
        let rows: Vec<(Json<crate::domain::HistoryRecord>,)> = query_as(
            "SELECT record FROM remediation_history \
             WHERE target_fingerprint = $1 AND completed_at >= $2 \
             ORDER BY completed_at, request_id",
        )
        .arg(target_fingerprint)
        .arg(D::ts(since))
        .fetch_all(D::Db::on_pool(&self.pool))
        .await?;
        Ok(rows.into_iter().map(|(r,)| r.0).collect())
    }
}
