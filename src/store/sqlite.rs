//! The embedded default: one SQLite file, WAL journal, `synchronous=FULL` so an acknowledged
//! alert survives a crash and a power cut. Writes open `BEGIN IMMEDIATE` transactions so two
//! writers queue on the lock instead of failing to upgrade a read lock.
//!
//! Every write goes through one dedicated connection (`writer`), queued in the process; reads
//! use a small pool beside it (WAL lets them run while the writer commits). One writer
//! connection keeps its page cache across transactions: no other connection writes, so SQLite
//! never has to throw it away and re-read the B-tree pages from the file.
//!
//! [`Sqlite`] is its [`Dialect`]: ids as hyphenated UUID text, times as fixed-width UTC text (so
//! text order is time order), bare `?` parameters in generated statements, and the batch
//! writes as multi-row `VALUES` statements.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::types::Json;
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use super::Result;
use super::bell::TrailBell;
use super::sql::{
    AuditRow, Dialect, RowsAffected, SqlStore, StepRow, request_columns, runnable_phases,
};
use crate::clock::Clock;
use crate::domain::Severity;
use crate::domain::{NewSignal, Phase, SignalContext};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

/// The SQLite dialect (see [`Dialect`]).
pub struct Sqlite;

/// The store on SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

type Tx = super::sql::Tx<Sqlite>;
type DbRow = sqlx::sqlite::SqliteRow;

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

fn time_of(s: Ts) -> Result<DateTime<Utc>> {
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

/// WAL pages (4 KiB each) after which the writer copies the log into the database file.
const WAL_AUTOCHECKPOINT_PAGES: &str = "2000";

const CLAIM_SQL: &str = concat!(
    "UPDATE remediation_requests SET claimed_by = $1, lease_until = $2 \
     WHERE id IN (SELECT id FROM remediation_requests \
       WHERE active AND phase IN ",
    runnable_phases!(),
    " AND (lease_until IS NULL OR lease_until < $3) \
       AND (not_before IS NULL OR not_before <= $3) \
       AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'audit_key_id' AND value <> $5) \
       ORDER BY created_at LIMIT $4) \
     RETURNING ",
    request_columns!()
);

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

impl SqlStore<Sqlite> {
    pub async fn open(
        path: &Path,
        clock: Arc<dyn Clock>,
        audit_key: super::AuditKey,
    ) -> super::Result<Self> {
        // The audit trail is nobody else's to read: a directory kubemedic creates is 0700, a
        // database file it creates 0600 (SQLite gives its -wal and -shm files the same mode).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            super::files::private_dir(dir).map_err(|e| {
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
        // One process writes: the store rings its own bell after each audited commit.
        Ok(SqlStore::new(
            pool,
            writer,
            clock,
            audit_key,
            TrailBell::in_process(),
        ))
    }
}

// The bulk writes the shared SQL calls, as multi-row statements with generated parameter lists
// (`?` each, see `param`). Their text varies with the batch size, so they are not kept prepared.

/// `?, ?, …` for an IN list or a VALUES row.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// `(?, ?, ?), (?, ?, ?), …` for a multi-row INSERT.
fn value_rows(rows: usize, cols: usize) -> String {
    let row = format!("({})", placeholders(cols));
    vec![row; rows].join(", ")
}

/// Rows per multi-row statement (21 columns x 100 stays far below SQLite's parameter limit).
const CHUNK: usize = 100;

/// Whether the generated statements stay prepared in the connection's statement cache. Their
/// text varies with the batch size, so a burst would fill the cache (100 per connection) with
/// large programs that are rarely reused.
const PERSISTENT: bool = false;

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[async_trait]
impl Dialect for Sqlite {
    type Db = sqlx::Sqlite;
    type Id = Id;
    type Ts = Ts;

    const BACKEND: &'static str = "sqlite";
    const BEGIN: &'static str = "BEGIN IMMEDIATE";
    /// One writer connection: every write queues behind the one before.
    const SERIAL_WRITES: bool = true;
    /// The audit chain needs no lock of its own: `BEGIN IMMEDIATE` and the one writer serialise
    /// every write.
    const CHAIN_LOCK: Option<&'static str> = None;
    /// Every writer is in this process: the store wakes its own streams.
    const NOTIFIES: bool = false;
    const NOTIFY_QUEUE_USAGE: Option<&'static str> = None;
    const CLAIM_SQL: &'static str = CLAIM_SQL;
    /// The stored text's first ten characters.
    const DAY_OF_CREATED_AT: &'static str = "substr(created_at, 1, 10)";

    fn migrator() -> &'static Migrator {
        &MIGRATOR
    }

    fn id(u: Uuid) -> Id {
        id(u)
    }

    fn uuid_of(h: Id) -> Uuid {
        uuid_of(h)
    }

    fn ts(t: DateTime<Utc>) -> Ts {
        ts(t)
    }

    fn time_of(s: Ts) -> Result<DateTime<Utc>> {
        time_of(s)
    }

    fn param(n: usize) -> String {
        param(n)
    }

    /// Signals already stored under any of `fingerprints`: (id, fingerprint, starts_at, status,
    /// request).
    async fn lookup_signals(
        tx: &mut Tx,
        fingerprints: &[&str],
    ) -> Result<Vec<(Id, String, Ts, String, Option<Id>)>> {
        let mut found = Vec::new();
        for chunk in fingerprints.chunks(CHUNK * 5) {
            let sql = format!(
                "SELECT id, fingerprint, starts_at, status, request_id FROM signals WHERE fingerprint IN ({})",
                placeholders(chunk.len())
            );
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for f in chunk {
                q = q.bind(*f);
            }
            found.extend(q.fetch_all(&mut **tx).await?);
        }
        Ok(found)
    }

    /// Active targets among `aliases`: (fingerprint, request).
    async fn lookup_targets(tx: &mut Tx, aliases: &[&str]) -> Result<Vec<(String, Id)>> {
        let mut found = Vec::new();
        for chunk in aliases.chunks(CHUNK * 5) {
            let sql = format!(
                "SELECT fingerprint, request_id FROM request_targets WHERE active AND fingerprint IN ({})",
                placeholders(chunk.len())
            );
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for a in chunk {
                q = q.bind(*a);
            }
            found.extend(q.fetch_all(&mut **tx).await?);
        }
        Ok(found)
    }

    /// Insert active targets (alias, request, primary); the aliases that were free and are now taken.
    async fn insert_targets(
        tx: &mut Tx,
        rows: &[(String, Uuid, bool)],
    ) -> Result<std::collections::HashSet<String>> {
        let mut taken = std::collections::HashSet::new();
        for chunk in rows.chunks(CHUNK * 5) {
            let sql = format!(
                "INSERT INTO request_targets (fingerprint, request_id, active) VALUES {} \
                 ON CONFLICT DO NOTHING RETURNING fingerprint",
                value_rows(chunk.len(), 3)
            );
            let mut q =
                sqlx::query_as::<_, (String,)>(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for (fp, rid, _) in chunk {
                q = q.bind(fp).bind(id(*rid)).bind(true);
            }
            taken.extend(q.fetch_all(&mut **tx).await?.into_iter().map(|(f,)| f));
        }
        Ok(taken)
    }

    /// Open a request in `Received` for each (request, signal).
    async fn insert_requests(
        tx: &mut Tx,
        now: DateTime<Utc>,
        rows: &[(Uuid, &NewSignal)],
    ) -> Result<()> {
        let empty_state = Json(crate::domain::StageState::default());
        for chunk in rows.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO remediation_requests (id, phase, reason, active, target_kind, \
                 target_name, target_namespace, target_fingerprint, signal_name, severity, \
                 signal_mode, signal, occurrence_count, first_seen, last_seen, created_at, \
                 updated_at, attempts, state, trace_parent) VALUES {}",
                value_rows(chunk.len(), 20)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for (rid, s) in chunk {
                q = q
                    .bind(id(*rid))
                    .bind("Received")
                    .bind(None::<String>)
                    .bind(true)
                    .bind(s.target.as_ref().map(|t| t.kind.clone()))
                    .bind(s.target.as_ref().map(|t| t.name.clone()))
                    .bind(s.target.as_ref().and_then(|t| t.namespace.clone()))
                    .bind(&s.target_fingerprint)
                    .bind(&s.name)
                    .bind(s.severity.as_ref().map(Severity::as_str))
                    .bind(s.mode.as_str())
                    .bind(Json(SignalContext::from_signal(s, now)))
                    .bind(1i64)
                    .bind(ts(now))
                    .bind(ts(now))
                    .bind(ts(now))
                    .bind(ts(now))
                    .bind(0i32)
                    .bind(&empty_state)
                    .bind(s.trace_for(*rid).traceparent());
            }
            q.execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Store signals (signal, request, resolved) unless already stored; how many were new.
    async fn insert_signals(
        tx: &mut Tx,
        now: DateTime<Utc>,
        rows: &[(&NewSignal, Option<Uuid>, bool)],
    ) -> Result<usize> {
        let mut stored = 0;
        for chunk in rows.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO signals (id, fingerprint, starts_at, status, ends_at, name, \
                 severity, mode, source, labels, annotations, generator_url, receiver, \
                 group_key, target_kind, target_name, target_namespace, \
                 target_fingerprint, request_id, received_at, resolved_at) VALUES {} \
                 ON CONFLICT (fingerprint, starts_at) DO NOTHING RETURNING fingerprint",
                value_rows(chunk.len(), 21)
            );
            let mut q =
                sqlx::query_as::<_, (String,)>(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for (s, rid, resolved) in chunk {
                q = q
                    .bind(id(Uuid::new_v4()))
                    .bind(&s.fingerprint)
                    .bind(ts(s.starts_at))
                    .bind(if *resolved { "resolved" } else { "firing" })
                    .bind(s.ends_at.map(ts))
                    .bind(&s.name)
                    .bind(s.severity.as_ref().map(Severity::as_str))
                    .bind(s.mode.as_str())
                    .bind(s.source.as_str())
                    .bind(Json(&s.labels))
                    .bind(Json(&s.annotations))
                    .bind(&s.generator_url)
                    .bind(&s.receiver)
                    .bind(&s.group_key)
                    .bind(s.target.as_ref().map(|t| t.kind.clone()))
                    .bind(s.target.as_ref().map(|t| t.name.clone()))
                    .bind(s.target.as_ref().and_then(|t| t.namespace.clone()))
                    .bind(&s.target_fingerprint)
                    .bind(rid.map(id))
                    .bind(ts(now))
                    .bind(resolved.then(|| ts(now)));
            }
            stored += q.fetch_all(&mut **tx).await?.len();
        }
        Ok(stored)
    }

    /// Write audit rows whose links are computed, in order (ids follow the chain).
    async fn write_audits(
        tx: &mut Tx,
        key_id: &str,
        at: DateTime<Utc>,
        rows: &[AuditRow<'_>],
    ) -> Result<()> {
        for chunk in rows.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload, \
                 prev_hash, hash, key_id) VALUES {}",
                value_rows(chunk.len(), 10)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
            for r in chunk {
                q = q
                    .bind(r.request_id.map(id))
                    .bind(ts(at))
                    .bind(r.phase.map(Phase::as_str))
                    .bind(&r.draft.kind)
                    .bind(&r.draft.actor)
                    .bind(super::storable_text(&r.draft.message))
                    .bind(super::storable_value(&r.draft.payload))
                    .bind(&r.prev)
                    .bind(&r.hash)
                    .bind(key_id);
            }
            q.execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Free the targets and execution locks of requests that reached a terminal phase.
    async fn finish_requests(tx: &mut Tx, ids: &[Uuid]) -> Result<()> {
        for chunk in ids.chunks(CHUNK) {
            let list = placeholders(chunk.len());
            for sql in [
                format!("UPDATE request_targets SET active = FALSE WHERE request_id IN ({list})"),
                format!("DELETE FROM execution_locks WHERE request_id IN ({list})"),
            ] {
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(PERSISTENT);
                for rid in chunk {
                    q = q.bind(id(*rid));
                }
                q.execute(&mut **tx).await?;
            }
        }
        Ok(())
    }

    /// Write each step to its request, if `worker` still holds it in the phase the step started
    /// from; the rows written. One statement per request: SQLite runs in the process, so a
    /// statement costs no round trip.
    async fn update_steps(
        tx: &mut Tx,
        worker: &str,
        now: DateTime<Utc>,
        rows: &[StepRow<'_>],
    ) -> Result<Vec<DbRow>> {
        let mut written = Vec::with_capacity(rows.len());
        for r in rows {
            // A finished request also records when, and its time to resolution.
            let row = sqlx::query(concat!(
                "UPDATE remediation_requests SET phase = $1, reason = $2, active = $3, \
                 state = $4, attempts = $5, not_before = $6, updated_at = $7, \
                 claimed_by = CASE WHEN $8 THEN NULL ELSE claimed_by END, \
                 lease_until = CASE WHEN $8 THEN NULL ELSE lease_until END, \
                 tokens = $12, auto_approved = $13, effectiveness = $14, \
                 guardrail = COALESCE($15, guardrail), \
                 finished_at = CASE WHEN $3 THEN finished_at ELSE $7 END, \
                 ttr_ms = CASE WHEN $3 THEN ttr_ms ELSE ",
                // ttr_ms: milliseconds from `created_at` to now (`$7`; both ISO 8601 text), rounded.
                "CAST(ROUND((julianday($7) - julianday(created_at)) * 86400000.0) AS INTEGER)",
                " END \
                 WHERE id = $9 AND phase = $10 AND claimed_by = $11 RETURNING ",
                request_columns!()
            ))
            .bind(r.to.as_str())
            .bind(r.reason.as_deref())
            .bind(r.active)
            .bind(&r.state)
            .bind(r.attempts)
            .bind(r.not_before.map(ts))
            .bind(ts(now))
            .bind(r.release)
            .bind(id(r.id))
            .bind(r.from.as_str())
            .bind(worker)
            .bind(r.figures.tokens)
            .bind(r.figures.auto_approved)
            .bind(r.figures.effectiveness)
            .bind(r.figures.guardrail.as_deref())
            .fetch_optional(&mut **tx)
            .await?;
            written.extend(row);
        }
        Ok(written)
    }
}
