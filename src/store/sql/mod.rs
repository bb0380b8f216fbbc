//! The SQL both backends share, written once as ordinary Rust generic over the [`Dialect`].
//!
//! [`SqlStore<D>`] is the store on dialect `D` ([`super::SqliteStore`] is
//! `SqlStore<Sqlite>`, [`super::PgStore`] `SqlStore<Postgres>`). Each capability trait of
//! [`super::Store`] is implemented once, in a file of its own (`requests.rs`, `claims.rs`,
//! `audit.rs`, `auth.rs`, `approvals.rs`, `execution.rs`, `history.rs`, `housekeeping.rs`);
//! `rows.rs` reads rows back into the domain. What differs between the databases is stated
//! once, in [`Dialect`] (`dialect.rs`, with the table of differences), and implemented in
//! `sqlite.rs` and `postgres.rs`. `facade.rs` names what the shared SQL needs of an sqlx driver
//! so generic code can use it.
//!
//! Statements are written with `$n` parameters, which both databases accept; the ones built at
//! run time (the list filters) number theirs with [`Dialect::param`].
//!
//! Invariants: every write goes through `writer` (behind [`SqlStore::write_guard`]); every
//! audited write transaction is opened with [`SqlStore::begin_audited`] and appends its audit
//! events after its other writes (see `SqlStore::chain_head`); its commit wakes the streams of
//! the trails it grew ([`Audited::commit`]).

mod approvals;
mod audit;
mod auth;
mod chat;
mod claims;
mod dialect;
mod execution;
mod facade;
mod history;
mod housekeeping;
mod patterns;
mod requests;
mod rows;

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Database, Executor, Pool};
use uuid::Uuid;

pub use dialect::Dialect;
pub use facade::RowsAffected;

use self::facade::{Conn as _, Runs as _, query_as};
use super::bell::{Ring, TrailBell};
use super::{AuditKey, Figures, Result, parse_phase};
use crate::clock::Clock;
use crate::domain::{AuditDraft, Phase};

/// Column list of `remediation_requests`, in the order `request_from_row` reads it.
///
/// The column lists are macros, not constants, because `concat!` takes only literals: the
/// statements that use them stay `&'static str` text, the same on every call, so each is
/// prepared once per connection.
macro_rules! request_columns {
    () => {
        "id, phase, reason, target_kind, target_name, target_namespace, target_fingerprint, \
         signal, occurrence_count, first_seen, last_seen, created_at, updated_at, attempts, \
         not_before, state, trace_parent"
    };
}
pub(super) use request_columns;

/// The phases a worker may claim, as an SQL list (kept in step with `Phase::RUNNABLE` by a test).
macro_rules! runnable_phases {
    () => {
        "('Received', 'Enriching', 'Investigating', 'Selecting', 'Gating', 'AwaitingApproval', \
         'Executing', 'Verifying')"
    };
}
pub(super) use runnable_phases;

/// Column list of `approvals`.
macro_rules! approval_columns {
    () => {
        "id, request_id, status, created_at, expires_at, decided_at, record"
    };
}
pub(super) use approval_columns;

/// Column list of `notifications`, in the order `notification_from_row` reads it.
macro_rules! notification_columns {
    () => {
        "id, approval_id, channel, recipient, kind, status, attempts, next_attempt_at, \
         last_error, external_ref, created_at, updated_at"
    };
}
pub(super) use notification_columns;

/// A write transaction on dialect `D`'s database.
pub type Tx<D> = sqlx::Transaction<'static, <D as Dialect>::Db>;

/// A row of dialect `D`'s database.
pub type DbRow<D> = <<D as Dialect>::Db as Database>::Row;

/// The store on one database.
pub struct SqlStore<D: Dialect> {
    /// Reads.
    pool: Pool<D::Db>,
    /// Writes. SQLite: one connection, used only under `write_lock`; Postgres: the same pool
    /// as `pool`.
    writer: Pool<D::Db>,
    clock: Arc<dyn Clock>,
    /// Signs the audit chain.
    audit_key: AuditKey,
    /// Queues writers in the process when the database takes one write at a time
    /// ([`Dialect::SERIAL_WRITES`]): cheaper than letting them collide on SQLite's file lock
    /// and back off in its busy handler.
    write_lock: tokio::sync::Mutex<()>,
    /// Wakes the live streams when an audit trail grows (`bell.rs`).
    bell: TrailBell,
}

impl<D: Dialect> SqlStore<D> {
    pub(super) fn new(
        pool: Pool<D::Db>,
        writer: Pool<D::Db>,
        clock: Arc<dyn Clock>,
        audit_key: AuditKey,
        bell: TrailBell,
    ) -> Self {
        Self {
            pool,
            writer,
            clock,
            audit_key,
            write_lock: tokio::sync::Mutex::new(()),
            bell,
        }
    }

    /// Wait for this writer's turn when writes are serial; Postgres takes row locks itself,
    /// and its writers need no queue in the process.
    async fn write_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if D::SERIAL_WRITES {
            Some(self.write_lock.lock().await)
        } else {
            None
        }
    }

    /// The pool that reads.
    fn reads(&self) -> impl Executor<'_, Database = D::Db> {
        D::Db::on_pool(&self.pool)
    }

    /// The pool that writes (outside a transaction); take [`Self::write_guard`] first.
    fn writes(&self) -> impl Executor<'_, Database = D::Db> {
        D::Db::on_pool(&self.writer)
    }

    /// A write transaction that may append audit events. It must append them after its
    /// other writes: appending takes the chain's lock (see `chain_head`).
    async fn begin_audited(&self) -> Result<Audited<D>> {
        Ok(Audited {
            tx: self.writer.begin_with(D::BEGIN).await?,
            ring: (!D::NOTIFIES).then(|| self.bell.ring().clone()),
            grew: Vec::new(),
        })
    }

    async fn current_phase(tx: &mut Tx<D>, request_id: Uuid) -> Result<Option<Phase>> {
        let row: Option<(String,)> =
            query_as("SELECT phase FROM remediation_requests WHERE id = $1")
                .arg(D::id(request_id))
                .fetch_optional(tx.conn())
                .await?;
        row.map(|(p,)| parse_phase(&p)).transpose()
    }

    /// Times are compared at the precision both databases keep.
    fn micros(t: DateTime<Utc>) -> i64 {
        t.timestamp_micros()
    }
}

/// A write transaction that may append audit events ([`SqlStore::begin_audited`]); otherwise
/// the transaction itself. When the database does not tell the listeners itself
/// ([`Dialect::NOTIFIES`]), its commit rings the store's bell for every request whose trail it
/// grew — after the commit, so a woken stream's read sees the events.
pub struct Audited<D: Dialect> {
    tx: Tx<D>,
    /// The bell to ring after the commit (SQLite).
    ring: Option<Ring>,
    /// The requests whose trails this transaction appended to.
    grew: Vec<Uuid>,
}

impl<D: Dialect> Audited<D> {
    /// Remember that this transaction appends to `request`'s trail.
    fn grows(&mut self, request: Option<Uuid>) {
        if let (Some(_), Some(r)) = (&self.ring, request) {
            self.grew.push(r);
        }
    }

    pub async fn commit(mut self) -> std::result::Result<(), sqlx::Error> {
        self.tx.commit().await?;
        if let Some(ring) = self.ring {
            self.grew.sort_unstable();
            self.grew.dedup();
            for r in self.grew {
                ring.grew(r);
            }
        }
        Ok(())
    }

    pub async fn rollback(self) -> std::result::Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl<D: Dialect> Deref for Audited<D> {
    type Target = Tx<D>;
    fn deref(&self) -> &Tx<D> {
        &self.tx
    }
}

impl<D: Dialect> DerefMut for Audited<D> {
    fn deref_mut(&mut self) -> &mut Tx<D> {
        &mut self.tx
    }
}

/// An audit event about to be written, its link computed.
pub struct AuditRow<'a> {
    pub(super) request_id: Option<Uuid>,
    pub(super) phase: Option<Phase>,
    pub(super) draft: &'a AuditDraft,
    pub(super) prev: Option<String>,
    pub(super) hash: String,
}

/// One request's step, as `update_steps` writes it.
pub struct StepRow<'a> {
    pub(super) id: Uuid,
    pub(super) from: Phase,
    pub(super) to: Phase,
    pub(super) reason: Option<Cow<'a, str>>,
    /// Still active after the step.
    pub(super) active: bool,
    pub(super) state: Json<serde_json::Value>,
    pub(super) attempts: i32,
    pub(super) not_before: Option<DateTime<Utc>>,
    /// The claim ends with the step.
    pub(super) release: bool,
    pub(super) figures: Figures,
}

#[cfg(test)]
mod tests {
    use crate::domain::Phase;

    #[test]
    fn runnable_list_matches_the_state_machine() {
        let sql: &str = runnable_phases!();
        for p in Phase::ALL {
            assert_eq!(
                sql.contains(&format!("'{}'", p.as_str())),
                p.is_runnable(),
                "{p}"
            );
        }
    }
}
