//! The embedded default: one SQLite file, WAL journal, `synchronous=FULL` so an acknowledged
//! alert survives a crash and a power cut. Writes open `BEGIN IMMEDIATE` transactions so two
//! writers queue on the lock instead of failing to upgrade a read lock.
//!
//! Every write goes through one dedicated connection (`writer`), queued in the process; reads
//! use a small pool beside it (WAL lets them run while the writer commits). One writer
//! connection keeps its page cache across transactions: no other connection writes, so SQLite
//! never has to throw it away and re-read the B-tree pages from the file.

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

use super::sql::{
    approval_columns, notification_columns, request_columns, runnable_phases, sql_store,
};
use crate::clock::Clock;

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

pub struct SqliteStore {
    /// Reads.
    pool: SqlitePool,
    /// Writes: one connection, used only under `write_lock`.
    writer: SqlitePool,
    clock: Arc<dyn Clock>,
    /// Signs the audit chain.
    audit_key: super::AuditKey,
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

/// Bare `?`, numbered by position. SQLite looks a `$N` parameter up by name in a list, at
/// prepare and again at every bind, which makes a 2,000-parameter multi-row INSERT quadratic
/// (it was the hottest function of the ingest profile). Sound only for the generated
/// statements, whose parameters are bound in order from 1.
fn param(_: usize) -> String {
    "?".to_owned()
}

const BEGIN: &str = "BEGIN IMMEDIATE";

/// One writer connection: every write queues behind the one before.
const SERIAL_WRITES: bool = true;

/// The audit chain needs no lock of its own: `BEGIN IMMEDIATE` and the one writer serialise
/// every write.
const CHAIN_LOCK: Option<&'static str> = None;

/// A stored time's UTC day, `YYYY-MM-DD`.
macro_rules! day_of {
    ($col:literal) => {
        concat!("substr(", $col, ", 1, 10)")
    };
}

/// Milliseconds from the row's `created_at` to the time bound as parameter `$p` (both stored as
/// ISO 8601 text), rounded to the millisecond.
macro_rules! ms_since_created {
    ($p:literal) => {
        concat!(
            "CAST(ROUND((julianday(",
            $p,
            ") - julianday(created_at)) * 86400000.0) AS INTEGER)"
        )
    };
}

/// WAL pages (4 KiB each) after which the writer copies the log into the database file.
const WAL_AUTOCHECKPOINT_PAGES: &str = "2000";

const CLAIM_SQL: &str = concat!(
    "UPDATE remediation_requests SET claimed_by = $1, lease_until = $2 \
     WHERE id IN (SELECT id FROM remediation_requests \
       WHERE active AND phase IN ",
    runnable_phases!(),
    " AND (lease_until IS NULL OR lease_until < $3) \
       AND (not_before IS NULL OR not_before <= $3) \
       ORDER BY created_at LIMIT $4) \
     RETURNING ",
    request_columns!()
);

#[cfg(unix)]
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Create the database file readable by its owner only, unless it exists.
#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn private_file(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

impl SqliteStore {
    pub async fn open(
        path: &Path,
        clock: Arc<dyn Clock>,
        audit_key: super::AuditKey,
    ) -> super::Result<Self> {
        // The audit trail is nobody else's to read: a directory kubemedic creates is 0700, a
        // database file it creates 0600 (SQLite gives its -wal and -shm files the same mode).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private_dir(dir).map_err(|e| {
                super::StoreError::Setup(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        private_file(path).map_err(|e| {
            super::StoreError::Setup(format!("cannot create {}: {e}", path.display()))
        })?;
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(super::StoreError::Unavailable)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // The writer checkpoints the WAL into the database file every `wal_autocheckpoint`
        // pages, inside a commit: every write queued behind it waits. SQLite's default (1,000
        // pages, 4 MiB) copies the same hot index pages over and over in a burst; 8,000 pages
        // gave the most throughput but stalls of up to ~100 ms (the p99 at 500 requests/s
        // is the stall); 2,000 keeps most of the gain with stalls a quarter as long
        // (docs/benchmarks.md, runs 8–11).
        let writer_options = options
            .clone()
            .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(writer_options)
            .await
            .map_err(super::StoreError::Unavailable)?;
        MIGRATOR.run(&writer).await?;
        // Readers: the API and the dashboard. A small page cache each (the OS caches the file
        // anyway) and closed after a minute idle, so a quiet daemon gives their memory back.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(0)
            .idle_timeout(Duration::from_secs(60))
            .connect_with(options.pragma("cache_size", "-1024"))
            .await
            .map_err(super::StoreError::Unavailable)?;
        Ok(Self {
            pool,
            writer,
            clock,
            audit_key,
            write_lock: tokio::sync::Mutex::new(()),
        })
    }

    async fn write_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        Some(self.write_lock.lock().await)
    }
}

sql_store!(SqliteStore, sqlx::Sqlite, "sqlite");
