//! [`Housekeeping`](crate::store::Housekeeping): the backend, its health, settings generated once.

use async_trait::async_trait;

use super::SqlStore;
use super::dialect::Dialect;
use super::facade::{Arg as _, query_as};
use crate::store::{Housekeeping, Result, StoreHealth};

#[async_trait]
impl<D: Dialect> Housekeeping for SqlStore<D> {
    fn backend(&self) -> &'static str {
        D::BACKEND
    }

    fn serial_writes(&self) -> bool {
        D::SERIAL_WRITES
    }

    async fn health(&self) -> Result<StoreHealth> {
        let (applied,): (i64,) = query_as("SELECT count(*) FROM _sqlx_migrations WHERE success")
            .fetch_one(self.reads())
            .await?;
        let audit_key: Option<(String,)> =
            query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                .fetch_optional(self.reads())
                .await?;
        Ok(StoreHealth {
            backend: D::BACKEND,
            migrations_applied: applied,
            migrations_expected: D::migrator().iter().count() as i64,
            audit_key: audit_key.map(|(k,)| k),
            our_audit_key: self.audit_key.id().to_owned(),
        })
    }

    async fn setting_or_init(
        &self,
        key: &str,
        generate: &(dyn Fn() -> String + Sync),
    ) -> Result<String> {
        let _write = self.write_guard().await;
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO NOTHING",
        )
        .arg(key)
        .arg(generate())
        .execute(self.writes())
        .await?;
        let (value,): (String,) = query_as("SELECT value FROM settings WHERE key = $1")
            .arg(key)
            .fetch_one(self.writes())
            .await?;
        Ok(value)
    }
}
