//! The embedded default: one SQLite file, WAL journal, `synchronous=FULL` so an acknowledged
//! alert survives a crash and a power cut. Writes open `BEGIN IMMEDIATE` transactions so two
//! writers queue on the lock instead of failing to upgrade a read lock.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::SqlitePool;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use super::sql::{request_columns, runnable_phases, sql_store};
use crate::clock::Clock;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

pub struct SqliteStore {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
    /// SQLite has one writer at a time. Queueing writers here, in order, is cheaper than
    /// letting them collide on the file lock and back off in the busy handler.
    write_lock: tokio::sync::Mutex<()>,
}

type Id = Hyphenated;
type Ts = String;

fn id(u: Uuid) -> Id {
    u.hyphenated()
}

fn uuid_of(h: Id) -> Uuid {
    h.into_uuid()
}

const TS_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

/// Fixed-width UTC text, so that comparing text compares times.
fn ts(t: DateTime<Utc>) -> Ts {
    t.format(TS_FORMAT).to_string()
}

fn time_of(s: Ts) -> super::Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(&s, TS_FORMAT)
        .map(|t| t.and_utc())
        .map_err(|e| super::corrupt("timestamp", format!("`{s}`: {e}")))
}

const BEGIN: &str = "BEGIN IMMEDIATE";

const CLAIM_SQL: &str = concat!(
    "UPDATE remediation_requests SET claimed_by = $1, lease_until = $2 \
     WHERE id = (SELECT id FROM remediation_requests \
       WHERE active AND phase IN ",
    runnable_phases!(),
    " AND (lease_until IS NULL OR lease_until < $3) \
       AND (not_before IS NULL OR not_before <= $3) \
       ORDER BY created_at LIMIT 1) \
     RETURNING ",
    request_columns!()
);

impl SqliteStore {
    pub async fn open(path: &Path, clock: Arc<dyn Clock>) -> super::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                super::StoreError::Setup(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(super::StoreError::Unavailable)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(super::StoreError::Unavailable)?;
        MIGRATOR.run(&pool).await?;
        Ok(Self {
            pool,
            clock,
            write_lock: tokio::sync::Mutex::new(()),
        })
    }

    async fn write_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        Some(self.write_lock.lock().await)
    }
}

sql_store!(SqliteStore, sqlx::Sqlite, "sqlite");
