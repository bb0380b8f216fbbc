//! [`History`](crate::store::History): finished remediations per target.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::SqlStore;
use super::dialect::Dialect;
use super::facade::{Arg as _, query_as};
use crate::domain::HistoryRecord;
use crate::store::{History, Result, corrupt, storable_json};

#[async_trait]
impl<D: Dialect> History for SqlStore<D> {
    async fn record_history(&self, record: &HistoryRecord) -> Result<()> {
        let rid = Uuid::parse_str(&record.remediation_uid)
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
        .arg(storable_json(record)?)
        .execute(self.writes())
        .await?;
        Ok(())
    }

    async fn history(
        &self,
        target_fingerprint: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<HistoryRecord>> {
        let rows: Vec<(Json<HistoryRecord>,)> = query_as(
            "SELECT record FROM remediation_history \
             WHERE target_fingerprint = $1 AND completed_at >= $2 \
             ORDER BY completed_at, request_id",
        )
        .arg(target_fingerprint)
        .arg(D::ts(since))
        .fetch_all(self.reads())
        .await?;
        Ok(rows.into_iter().map(|(r,)| r.0).collect())
    }
}
