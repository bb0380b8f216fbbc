//! [`Patterns`](crate::store::Patterns): verified outcomes per incident signature.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::SqlStore;
use super::dialect::Dialect;
use super::facade::{Arg as _, RowsAffected as _, query_as};
use crate::domain::PatternOutcome;
use crate::store::{Patterns, Result, storable_json};

#[async_trait]
impl<D: Dialect> Patterns for SqlStore<D> {
    async fn record_outcome(&self, outcome: &PatternOutcome) -> Result<bool> {
        let _write = self.write_guard().await;
        let done = sqlx::query(
            "INSERT INTO pattern_outcomes (request_id, signature, workflow_id, recorded_at, \
             outcome) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (request_id) DO NOTHING",
        )
        .arg(D::id(outcome.request_id))
        .arg(outcome.signature.hash.as_str())
        .arg(outcome.workflow_id.as_str())
        .arg(D::ts(outcome.recorded_at))
        .arg(storable_json(outcome)?)
        .execute(self.writes())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn outcomes(&self, signature: &str, since: DateTime<Utc>) -> Result<Vec<PatternOutcome>> {
        let rows: Vec<(Json<PatternOutcome>,)> = query_as(
            "SELECT outcome FROM pattern_outcomes \
             WHERE signature = $1 AND recorded_at >= $2 \
             ORDER BY recorded_at, request_id",
        )
        .arg(signature)
        .arg(D::ts(since))
        .fetch_all(self.reads())
        .await?;
        Ok(rows.into_iter().map(|(r,)| r.0).collect())
    }
}
