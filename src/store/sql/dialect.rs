//! What differs between SQLite and Postgres, stated once: the [`Dialect`] trait, implemented
//! by [`Sqlite`](crate::store::Sqlite) and [`Postgres`](crate::store::Postgres).
//!
//! Everything else (every statement of `sql/<capability>.rs`) is the same text on both.
//!
//! | what | SQLite | Postgres |
//! |---|---|---|
//! | ids ([`Dialect::Id`]) | hyphenated UUID text | `uuid` |
//! | times ([`Dialect::Ts`]) | fixed-width ISO 8601 text, UTC, µs | `timestamptz` |
//! | generated parameter *n* ([`Dialect::param`]) | `?` (by position) | `$n` |
//! | write transaction ([`Dialect::BEGIN`]) | `BEGIN IMMEDIATE` | `BEGIN` |
//! | writers ([`Dialect::SERIAL_WRITES`]) | one connection, queued in the process | a pool, row locks |
//! | the audit chain's lock ([`Dialect::CHAIN_LOCK`]) | none (one writer) | an advisory lock |
//! | waking the live streams ([`Dialect::NOTIFIES`]) | the store, after its commit | `NOTIFY` from a trigger |
//! | claiming requests ([`Dialect::CLAIM_SQL`]) | `UPDATE … WHERE id IN (SELECT …)` | the same, `FOR UPDATE SKIP LOCKED` |
//! | a time's UTC day ([`Dialect::DAY_OF_CREATED_AT`]) | `substr` of the text | `to_char` |
//! | batch reads and writes | multi-row `VALUES`, `IN (?, …)` | arrays, `UNNEST`, `= ANY` (ADR 0019) |
//! | migrations ([`Dialect::migrator`]) | `migrations/sqlite` | `migrations/postgres` |

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use uuid::Uuid;

use super::facade::{Binds, Reads, SqlDb};
use super::{AuditRow, DbRow, StepRow, Tx};
use crate::domain::NewSignal;
use crate::store::Result;

/// A database kubemedic stores in, and how its SQL differs from the other's.
#[async_trait]
pub trait Dialect: Send + Sync + Sized + 'static {
    type Db: SqlDb
        + Binds<Self::Id>
        + Binds<Option<Self::Id>>
        + Reads<Self::Id>
        + Reads<Option<Self::Id>>
        + Binds<Self::Ts>
        + Binds<Option<Self::Ts>>
        + Reads<Self::Ts>
        + Reads<Option<Self::Ts>>;

    /// How a UUID is bound and read.
    type Id: Copy + Send + Sync + 'static;
    /// How a time is bound and read.
    type Ts: Clone + Send + Sync + 'static;

    /// The backend's name in the health report (`sqlite`, `postgres`).
    const BACKEND: &'static str;
    /// The statement that opens a write transaction.
    const BEGIN: &'static str;
    /// Whether the database takes one write at a time: the store then queues its writers in
    /// the process (`SqlStore::write_guard`).
    const SERIAL_WRITES: bool;
    /// The statement that takes the audit chain's lock, when one is needed (see
    /// `SqlStore::chain_head`).
    const CHAIN_LOCK: Option<&'static str>;
    /// Whether the database itself tells every replica's listener when an audit trail grows
    /// (on commit); otherwise the store rings its bell after each audited commit
    /// (`Audited::commit`).
    const NOTIFIES: bool;
    /// The share (0 to 1) of the database's notification queue in use, as text (one row, one
    /// column); `None` where notifications do not queue in the database.
    const NOTIFY_QUEUE_USAGE: Option<&'static str>;
    /// Claim runnable requests: `$1` worker, `$2` lease end, `$3` now, `$4` limit, `$5` this
    /// store's audit key id; returns the request columns.
    const CLAIM_SQL: &'static str;
    /// `created_at`'s UTC day as `YYYY-MM-DD`.
    const DAY_OF_CREATED_AT: &'static str;

    fn migrator() -> &'static Migrator;

    fn id(u: Uuid) -> Self::Id;
    fn uuid_of(id: Self::Id) -> Uuid;
    fn ts(t: DateTime<Utc>) -> Self::Ts;
    fn time_of(t: Self::Ts) -> Result<DateTime<Utc>>;
    /// Parameter `n` (from 1) of a statement built at run time.
    fn param(n: usize) -> String;

    // The batch reads and writes of ingest and step commits.

    /// Signals already stored under any of `fingerprints`: (id, fingerprint, starts_at,
    /// status, request).
    async fn lookup_signals(
        tx: &mut Tx<Self>,
        fingerprints: &[&str],
    ) -> Result<Vec<(Self::Id, String, Self::Ts, String, Option<Self::Id>)>>;

    /// Active targets among `aliases`: (fingerprint, request).
    async fn lookup_targets(tx: &mut Tx<Self>, aliases: &[&str])
    -> Result<Vec<(String, Self::Id)>>;

    /// Insert active targets (alias, request, primary); the aliases that were free and are
    /// now taken.
    async fn insert_targets(
        tx: &mut Tx<Self>,
        rows: &[(String, Uuid, bool)],
    ) -> Result<std::collections::HashSet<String>>;

    /// Open a request in `Received` for each (request, signal).
    async fn insert_requests(
        tx: &mut Tx<Self>,
        now: DateTime<Utc>,
        rows: &[(Uuid, &NewSignal)],
    ) -> Result<()>;

    /// Store signals (signal, request, resolved) unless already stored; how many were new.
    async fn insert_signals(
        tx: &mut Tx<Self>,
        now: DateTime<Utc>,
        rows: &[(&NewSignal, Option<Uuid>, bool)],
    ) -> Result<usize>;

    /// Write audit rows whose links are computed, in order (ids follow the chain).
    async fn write_audits(
        tx: &mut Tx<Self>,
        key_id: &str,
        at: DateTime<Utc>,
        rows: &[AuditRow<'_>],
    ) -> Result<()>;

    /// Free the targets and execution locks of requests that reached a terminal phase.
    async fn finish_requests(tx: &mut Tx<Self>, ids: &[Uuid]) -> Result<()>;

    /// Write each step to its request, if `worker` still holds it in the phase the step
    /// started from; the rows written (the request columns).
    async fn update_steps(
        tx: &mut Tx<Self>,
        worker: &str,
        now: DateTime<Utc>,
        rows: &[StepRow<'_>],
    ) -> Result<Vec<DbRow<Self>>>;
}
