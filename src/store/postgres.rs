//! PostgreSQL: native UUID, TIMESTAMPTZ and JSONB columns; workers claim requests with
//! `FOR UPDATE SKIP LOCKED`, so several kubemedic replicas can share one database.
//!
//! [`Postgres`] is its [`Dialect`]: native ids and times, an advisory lock for the audit
//! chain, and the batch reads and writes bound as arrays (ADR 0019).
//!
//! Live streams are woken across replicas with `LISTEN`/`NOTIFY`: a trigger (migration 0011)
//! notifies [`AUDIT_CHANNEL`] with the request's id for every audit append, delivered when the
//! transaction commits; each store's one listener ([`listen`], started by its first watcher)
//! rings the store's bell (`bell.rs`), reconnecting whenever it loses its connection.

use std::convert::Infallible;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgBindIterExt as _, PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::types::Json;
use uuid::Uuid;

use super::Result;
use super::bell::{Ring, TrailBell};
use super::sql::{
    AuditRow, Dialect, RowsAffected, SqlStore, StepRow, request_columns, runnable_phases,
};
use crate::clock::Clock;
use crate::domain::Severity;
use crate::domain::{NewSignal, Phase, SignalContext};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// The PostgreSQL dialect (see [`Dialect`]).
pub struct Postgres;

/// The store on PostgreSQL.
pub type PgStore = SqlStore<Postgres>;

type Tx = super::sql::Tx<Postgres>;
type DbRow = sqlx::postgres::PgRow;

type Id = Uuid;
type Ts = DateTime<Utc>;

/// How long a session of the store may sit idle inside a transaction before Postgres ends it
/// (see [`PgStore::prepare_session`]). Far longer than any gap between the statements of one
/// of the store's transactions on a loaded machine, far shorter than the default lease.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

const CLAIM_SQL: &str = concat!(
    "UPDATE remediation_requests SET claimed_by = $1, lease_until = $2 \
     WHERE id IN (SELECT id FROM remediation_requests \
       WHERE active AND phase IN ",
    runnable_phases!(),
    " AND (lease_until IS NULL OR lease_until < $3) \
       AND (not_before IS NULL OR not_before <= $3) \
       AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'audit_key_id' AND value <> $5) \
       ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
     RETURNING ",
    request_columns!()
);

impl SqlStore<Postgres> {
    pub async fn open(
        url: &str,
        clock: Arc<dyn Clock>,
        audit_key: super::AuditKey,
    ) -> super::Result<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(super::StoreError::Unavailable)?
            .application_name("kubemedic");
        let pool = Self::pool_options()
            .connect_with(options.clone())
            .await
            .map_err(super::StoreError::Unavailable)?;
        MIGRATOR.run(&pool).await?;
        let bell = TrailBell::listening(Box::new(move |ring| Box::pin(listen(options, ring))));
        // Postgres has no single writer: writes use the same pool.
        Ok(SqlStore::new(pool.clone(), pool, clock, audit_key, bell))
    }

    /// How the store's pool is made: its size, and [`PgStore::prepare_session`] run on every
    /// connection it opens.
    pub fn pool_options() -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(|conn, _| Box::pin(Self::prepare_session(conn)))
    }

    /// Settings of every session the store opens (run once per new connection).
    ///
    /// `idle_in_transaction_session_timeout`: a transaction of kubemedic's never waits for
    /// anything but Postgres and a few microseconds of the daemon's own work between its
    /// statements (no cluster or model call happens inside one). A session that sits idle in a
    /// transaction for [`IDLE_IN_TRANSACTION`] belongs to a replica that stopped mid-transaction
    /// (SIGSTOP, a frozen VM, a stalled node) and still holds its row locks, its uncommitted
    /// unique keys or the audit chain's lock. Postgres ends that session and rolls it back, so
    /// the other replicas, which would otherwise wait on those locks until it woke (an intent
    /// insert queues behind an uncommitted one with the same key; a claim silently skips a
    /// locked request), go on. The stopped replica finds its connection gone when it wakes:
    /// the step fails with the store unavailable, and its claim was taken over meanwhile.
    pub async fn prepare_session(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        let ms = IDLE_IN_TRANSACTION.as_millis().to_string();
        sqlx::query("SELECT set_config('idle_in_transaction_session_timeout', $1, false)")
            .bind(ms)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// The channel the trigger of migration 0011 notifies when an audit trail grows; the payload is
/// the request's id.
pub const AUDIT_CHANNEL: &str = "kubemedic_audit";

/// The `application_name` of the listener's session, to find it in `pg_stat_activity`.
pub const LISTENER_NAME: &str = "kubemedic-listener";

/// The first wait before the listener tries to connect again; it doubles up to
/// [`RETRY_MAX`] while Postgres stays away.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(10);

/// Hear [`AUDIT_CHANNEL`] on a connection of its own and ring `ring` for every notification,
/// for as long as the store lives (its bell aborts this when dropped). A lost connection is
/// made again, with a growing pause while Postgres refuses; meanwhile the bell is not live (the
/// streams poll every `DEAF_POLL`), and every loss and every return rings for everyone:
/// notifications sent while nobody listened are gone, so every stream reads again.
async fn listen(options: PgConnectOptions, ring: Ring) {
    // One connection, never recycled: a session that LISTENs must stay up to hear.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options.application_name(LISTENER_NAME));
    let mut retry = RETRY_MIN;
    loop {
        let Err(error) = hear(&pool, &ring, &mut retry).await;
        if ring.lost() {
            tracing::warn!(
                parent: None,
                error = %error,
                "the audit trail's listener lost PostgreSQL; live event streams read the trail \
                 every {} ms until it is back",
                super::bell::DEAF_POLL.as_millis()
            );
            ring.resync();
        } else {
            tracing::debug!(parent: None, error = %error, "the audit trail's listener cannot connect yet");
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(RETRY_MAX);
    }
}

/// Listen until the connection fails for good (an error sqlx does not reconnect after).
async fn hear(
    pool: &sqlx::PgPool,
    ring: &Ring,
    retry: &mut Duration,
) -> Result<Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(AUDIT_CHANNEL).await?;
    back(ring);
    *retry = RETRY_MIN;
    loop {
        match listener.try_recv().await? {
            Some(n) => match Uuid::parse_str(n.payload()) {
                Ok(request) => ring.grew(request),
                Err(_) => ring.resync(),
            },
            // sqlx lost the connection and listens again on a new one: what was notified in
            // between is lost.
            None => {
                ring.lost();
                tracing::warn!(
                    parent: None,
                    "the audit trail's listener lost its connection to PostgreSQL and made it again"
                );
                back(ring);
            }
        }
    }
}

/// The listener listens (again): wake everyone if it is a return.
fn back(ring: &Ring) {
    if ring.up() {
        tracing::info!(parent: None, "the audit trail's listener is back; live event streams are woken again");
        ring.resync();
    }
}

// The bulk reads and writes the shared SQL calls. Each is one statement whatever the batch size,
// its rows bound as arrays and unpacked with `UNNEST` (or matched with `= ANY`): the text never
// changes, so the inserts are prepared once per connection and cost one round trip per batch.
// Multi-row VALUES lists, as on SQLite, were a new statement for every batch size, parsed,
// planned and prepared with a round trip of its own each time (ADR 0019). Statements that read
// a table through an index are not kept prepared: Postgres would keep one generic plan for them,
// and a plan chosen while a table was nearly empty (a fresh install in a storm) scans all of it
// once it holds thousands of rows.

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[async_trait]
impl Dialect for Postgres {
    type Db = sqlx::Postgres;
    type Id = Id;
    type Ts = Ts;

    const BACKEND: &'static str = "postgres";
    const BEGIN: &'static str = "BEGIN";
    /// Row locks let writers work side by side.
    const SERIAL_WRITES: bool = false;
    /// Writers of audit events take this transaction-scoped lock before they read the chain's head
    /// (after their other writes), so the chain grows one transaction at a time, in id order,
    /// across every replica.
    const CHAIN_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(7239418825061)");
    /// The trigger of migration 0011 notifies [`AUDIT_CHANNEL`].
    const NOTIFIES: bool = true;
    /// Notifications wait in an 8 GB queue until every listening session has read them.
    const NOTIFY_QUEUE_USAGE: Option<&'static str> =
        Some("SELECT pg_notification_queue_usage()::text");
    const CLAIM_SQL: &'static str = CLAIM_SQL;
    const DAY_OF_CREATED_AT: &'static str = "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')";

    fn migrator() -> &'static Migrator {
        &MIGRATOR
    }

    fn id(u: Uuid) -> Id {
        u
    }

    fn uuid_of(u: Id) -> Uuid {
        u
    }

    fn ts(t: DateTime<Utc>) -> Ts {
        t
    }

    fn time_of(t: Ts) -> Result<DateTime<Utc>> {
        Ok(t)
    }

    fn param(i: usize) -> String {
        format!("${i}")
    }

    /// Signals already stored under any of `fingerprints`: (id, fingerprint, starts_at, status,
    /// request). Not kept prepared (see above): in the benchmark a kept plan from the first
    /// seconds scanned the whole table for every batch.
    async fn lookup_signals(
        tx: &mut Tx,
        fingerprints: &[&str],
    ) -> Result<Vec<(Id, String, Ts, String, Option<Id>)>> {
        Ok(sqlx::query_as(
            "SELECT id, fingerprint, starts_at, status, request_id FROM signals \
             WHERE fingerprint = ANY($1)",
        )
        .persistent(false)
        .bind(fingerprints)
        .fetch_all(&mut **tx)
        .await?)
    }

    /// Active targets among `aliases`: (fingerprint, request).
    async fn lookup_targets(tx: &mut Tx, aliases: &[&str]) -> Result<Vec<(String, Id)>> {
        Ok(sqlx::query_as(
            "SELECT fingerprint, request_id FROM request_targets \
             WHERE active AND fingerprint = ANY($1)",
        )
        .persistent(false)
        .bind(aliases)
        .fetch_all(&mut **tx)
        .await?)
    }

    /// Insert active targets (alias, request, primary); the aliases that were free and are now taken.
    async fn insert_targets(
        tx: &mut Tx,
        rows: &[(String, Uuid, bool)],
    ) -> Result<std::collections::HashSet<String>> {
        if rows.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let taken: Vec<(String,)> = sqlx::query_as(
            "INSERT INTO request_targets (fingerprint, request_id, active) \
             SELECT f, r, TRUE FROM UNNEST($1::text[], $2::uuid[]) AS t(f, r) \
             ON CONFLICT DO NOTHING RETURNING fingerprint",
        )
        .bind(rows.iter().map(|r| &r.0).bind_iter())
        .bind(rows.iter().map(|r| r.1).bind_iter())
        .fetch_all(&mut **tx)
        .await?;
        Ok(taken.into_iter().map(|(f,)| f).collect())
    }

    /// Open a request in `Received` for each (request, signal).
    async fn insert_requests(
        tx: &mut Tx,
        now: DateTime<Utc>,
        rows: &[(Uuid, &NewSignal)],
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO remediation_requests (id, phase, reason, active, target_kind, \
             target_name, target_namespace, target_fingerprint, signal_name, severity, \
             signal_mode, signal, occurrence_count, first_seen, last_seen, created_at, \
             updated_at, attempts, state, trace_parent) \
             SELECT id, 'Received', NULL, TRUE, kind, name, namespace, fingerprint, signal_name, \
             severity, mode, signal, 1, $1, $1, $1, $1, 0, $2, trace_parent \
             FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], \
             $9::text[], $10::text[], $11::jsonb[], $12::text[]) \
             AS t(id, kind, name, namespace, fingerprint, signal_name, severity, mode, signal, \
             trace_parent)",
        )
        .bind(now)
        .bind(Json(crate::domain::StageState::default()))
        .bind(rows.iter().map(|r| r.0).bind_iter())
        .bind(
            rows.iter()
                .map(|r| r.1.target.as_ref().map(|t| &t.kind))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| r.1.target.as_ref().map(|t| &t.name))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| r.1.target.as_ref().and_then(|t| t.namespace.as_ref()))
                .bind_iter(),
        )
        .bind(rows.iter().map(|r| &r.1.target_fingerprint).bind_iter())
        .bind(rows.iter().map(|r| &r.1.name).bind_iter())
        .bind(
            rows.iter()
                .map(|r| r.1.severity.as_ref().map(Severity::as_str))
                .bind_iter(),
        )
        .bind(rows.iter().map(|r| r.1.mode.as_str()).bind_iter())
        .bind(
            rows.iter()
                .map(|r| Json(SignalContext::from_signal(r.1, now)))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| r.1.trace_for(r.0).traceparent())
                .bind_iter(),
        )
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Store signals (signal, request, resolved) unless already stored; how many were new.
    async fn insert_signals(
        tx: &mut Tx,
        now: DateTime<Utc>,
        rows: &[(&NewSignal, Option<Uuid>, bool)],
    ) -> Result<usize> {
        if rows.is_empty() {
            return Ok(0);
        }
        let stored: Vec<(String,)> = sqlx::query_as(
            "INSERT INTO signals (id, fingerprint, starts_at, status, ends_at, name, severity, \
             mode, source, labels, annotations, generator_url, receiver, group_key, target_kind, \
             target_name, target_namespace, target_fingerprint, request_id, received_at, \
             resolved_at) \
             SELECT gen_random_uuid(), fingerprint, starts_at, CASE WHEN resolved THEN 'resolved' \
             ELSE 'firing' END, ends_at, name, severity, mode, source, labels, annotations, \
             generator_url, receiver, group_key, kind, tname, namespace, tfp, request_id, $1, \
             CASE WHEN resolved THEN $1 END \
             FROM UNNEST($2::text[], $3::timestamptz[], $4::bool[], $5::timestamptz[], \
             $6::text[], $7::text[], $8::text[], $9::text[], $10::jsonb[], $11::jsonb[], \
             $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], \
             $18::text[], $19::uuid[]) \
             AS t(fingerprint, starts_at, resolved, ends_at, name, severity, mode, source, labels, \
             annotations, generator_url, receiver, group_key, kind, tname, namespace, tfp, \
             request_id) \
             ON CONFLICT (fingerprint, starts_at) DO NOTHING RETURNING fingerprint",
        )
        .bind(now)
        .bind(rows.iter().map(|r| &r.0.fingerprint).bind_iter())
        .bind(rows.iter().map(|r| r.0.starts_at).bind_iter())
        .bind(rows.iter().map(|r| r.2).bind_iter())
        .bind(rows.iter().map(|r| r.0.ends_at).bind_iter())
        .bind(rows.iter().map(|r| &r.0.name).bind_iter())
        .bind(
            rows.iter()
                .map(|r| r.0.severity.as_ref().map(Severity::as_str))
                .bind_iter(),
        )
        .bind(rows.iter().map(|r| r.0.mode.as_str()).bind_iter())
        .bind(rows.iter().map(|r| r.0.source.as_str()).bind_iter())
        .bind(rows.iter().map(|r| Json(&r.0.labels)).bind_iter())
        .bind(rows.iter().map(|r| Json(&r.0.annotations)).bind_iter())
        .bind(rows.iter().map(|r| r.0.generator_url.as_ref()).bind_iter())
        .bind(rows.iter().map(|r| r.0.receiver.as_ref()).bind_iter())
        .bind(rows.iter().map(|r| r.0.group_key.as_ref()).bind_iter())
        .bind(
            rows.iter()
                .map(|r| r.0.target.as_ref().map(|t| &t.kind))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| r.0.target.as_ref().map(|t| &t.name))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| r.0.target.as_ref().and_then(|t| t.namespace.as_ref()))
                .bind_iter(),
        )
        .bind(rows.iter().map(|r| &r.0.target_fingerprint).bind_iter())
        .bind(rows.iter().map(|r| r.1).bind_iter())
        .fetch_all(&mut **tx)
        .await?;
        Ok(stored.len())
    }

    /// Write audit rows whose links are computed, in order: the rows are numbered in the order
    /// given, so ids follow the chain.
    async fn write_audits(
        tx: &mut Tx,
        key_id: &str,
        at: DateTime<Utc>,
        rows: &[AuditRow<'_>],
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload, \
             prev_hash, hash, key_id) \
             SELECT request_id, $1, phase, kind, actor, message, payload, prev_hash, hash, $2 \
             FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::jsonb[], \
             $9::text[], $10::text[]) WITH ORDINALITY \
             AS t(request_id, phase, kind, actor, message, payload, prev_hash, hash, n) \
             ORDER BY n",
        )
        .bind(at)
        .bind(key_id)
        .bind(rows.iter().map(|r| r.request_id).bind_iter())
        .bind(rows.iter().map(|r| r.phase.map(Phase::as_str)).bind_iter())
        .bind(rows.iter().map(|r| &r.draft.kind).bind_iter())
        .bind(rows.iter().map(|r| &r.draft.actor).bind_iter())
        .bind(
            rows.iter()
                .map(|r| super::storable_text(&r.draft.message))
                .bind_iter(),
        )
        .bind(
            rows.iter()
                .map(|r| super::storable_value(&r.draft.payload))
                .bind_iter(),
        )
        .bind(rows.iter().map(|r| r.prev.as_ref()).bind_iter())
        .bind(rows.iter().map(|r| &r.hash).bind_iter())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Free the targets and execution locks of requests that reached a terminal phase. Planned
    /// afresh each time, as the lookups are.
    async fn finish_requests(tx: &mut Tx, ids: &[Uuid]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        for sql in [
            "UPDATE request_targets SET active = FALSE WHERE request_id = ANY($1)",
            "DELETE FROM execution_locks WHERE request_id = ANY($1)",
        ] {
            sqlx::query(sql)
                .persistent(false)
                .bind(ids)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Write each step to its request, if `worker` still holds it in the phase the step started
    /// from; the rows written. One statement for the batch, planned afresh each time as the lookups
    /// are (a join with the requests table); `rows` come in id order, and the statement visits them
    /// in that order, locking as ingest does (were it ever to lock in another order, Postgres
    /// reports the deadlock and the worker retries the steps one by one).
    async fn update_steps(
        tx: &mut Tx,
        worker: &str,
        now: DateTime<Utc>,
        rows: &[StepRow<'_>],
    ) -> Result<Vec<DbRow>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query(concat!(
            // A finished request also records when, and its time to resolution.
            "UPDATE remediation_requests SET phase = v_to, reason = v_reason, active = v_active, \
             state = v_state, attempts = v_attempts, not_before = v_not_before, updated_at = $1, \
             claimed_by = CASE WHEN v_release THEN NULL ELSE claimed_by END, \
             lease_until = CASE WHEN v_release THEN NULL ELSE lease_until END, \
             tokens = v_tokens, auto_approved = v_auto_approved, effectiveness = v_effectiveness, \
             guardrail = COALESCE(v_guardrail, guardrail), \
             finished_at = CASE WHEN v_active THEN finished_at ELSE $1 END, \
             ttr_ms = CASE WHEN v_active THEN ttr_ms ELSE ",
            // ttr_ms: milliseconds from `created_at` to now (`$1`).
            "CAST(ROUND(EXTRACT(EPOCH FROM ($1 - created_at)) * 1000) AS BIGINT)",
            " END \
             FROM (SELECT * FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::text[], \
             $7::bool[], $8::jsonb[], $9::int4[], $10::timestamptz[], $11::bool[], $12::int8[], \
             $13::bool[], $14::float8[], $15::text[]) \
             AS u(v_id, v_from, v_to, v_reason, v_active, v_state, v_attempts, v_not_before, \
             v_release, v_tokens, v_auto_approved, v_effectiveness, v_guardrail) ORDER BY v_id) v \
             WHERE id = v_id AND phase = v_from AND claimed_by = $2 RETURNING ",
            request_columns!()
        ))
        .persistent(false)
        .bind(now)
        .bind(worker)
        .bind(rows.iter().map(|r| r.id).bind_iter())
        .bind(rows.iter().map(|r| r.from.as_str()).bind_iter())
        .bind(rows.iter().map(|r| r.to.as_str()).bind_iter())
        .bind(rows.iter().map(|r| r.reason.as_deref()).bind_iter())
        .bind(rows.iter().map(|r| r.active).bind_iter())
        .bind(rows.iter().map(|r| &r.state).bind_iter())
        .bind(rows.iter().map(|r| r.attempts).bind_iter())
        .bind(rows.iter().map(|r| r.not_before).bind_iter())
        .bind(rows.iter().map(|r| r.release).bind_iter())
        .bind(rows.iter().map(|r| r.figures.tokens).bind_iter())
        .bind(rows.iter().map(|r| r.figures.auto_approved).bind_iter())
        .bind(rows.iter().map(|r| r.figures.effectiveness).bind_iter())
        .bind(
            rows.iter()
                .map(|r| r.figures.guardrail.as_deref())
                .bind_iter(),
        )
        .fetch_all(&mut **tx)
        .await?)
    }
}
