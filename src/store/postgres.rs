//! PostgreSQL: native UUID, TIMESTAMPTZ and JSONB columns; workers claim requests with
//! `FOR UPDATE SKIP LOCKED`, so several kubemedic replicas can share one database.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

use super::sql::{
    approval_columns, notification_columns, request_columns, runnable_phases, sql_store,
};
use crate::clock::Clock;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

pub struct PgStore {
    pool: PgPool,
    /// The same pool: Postgres has no single writer.
    writer: PgPool,
    clock: Arc<dyn Clock>,
    /// Signs the audit chain.
    audit_key: super::AuditKey,
}

type Id = Uuid;
type Ts = DateTime<Utc>;

fn id(u: Uuid) -> Id {
    u
}

fn uuid_of(u: Id) -> Uuid {
    u
}

fn ts(t: DateTime<Utc>) -> Ts {
    t
}

fn time_of(t: Ts) -> super::Result<DateTime<Utc>> {
    Ok(t)
}

fn param(i: usize) -> String {
    format!("${i}")
}

const BEGIN: &str = "BEGIN";

/// Row locks let writers work side by side.
const SERIAL_WRITES: bool = false;

/// Writers of audit events take this transaction-scoped lock before they read the chain's head
/// (after their other writes), so the chain grows one transaction at a time, in id order,
/// across every replica.
const CHAIN_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(7239418825061)");

/// A stored time's UTC day, `YYYY-MM-DD`.
macro_rules! day_of {
    ($col:literal) => {
        concat!("to_char(", $col, " AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
    };
}

/// Milliseconds from the row's `created_at` to the time bound as parameter `$p`.
macro_rules! ms_since_created {
    ($p:literal) => {
        concat!(
            "CAST(ROUND(EXTRACT(EPOCH FROM (",
            $p,
            " - created_at)) * 1000) AS BIGINT)"
        )
    };
}

const CLAIM_SQL: &str = concat!(
    "UPDATE remediation_requests SET claimed_by = $1, lease_until = $2 \
     WHERE id IN (SELECT id FROM remediation_requests \
       WHERE active AND phase IN ",
    runnable_phases!(),
    " AND (lease_until IS NULL OR lease_until < $3) \
       AND (not_before IS NULL OR not_before <= $3) \
       ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
     RETURNING ",
    request_columns!()
);

impl PgStore {
    pub async fn open(
        url: &str,
        clock: Arc<dyn Clock>,
        audit_key: super::AuditKey,
    ) -> super::Result<Self> {
        let options = PgConnectOptions::from_str(url).map_err(super::StoreError::Unavailable)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(super::StoreError::Unavailable)?;
        MIGRATOR.run(&pool).await?;
        Ok(Self {
            writer: pool.clone(),
            pool,
            clock,
            audit_key,
        })
    }

    /// Postgres takes row locks itself; writers need no queue in the process.
    async fn write_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        None
    }
}

sql_store!(PgStore, sqlx::Postgres, "postgres");
