//! The store: signals, remediation requests, approvals, execution intents and the
//! append-only audit trail.
//!
//! What it can do is split by capability (`capability.rs`): [`Requests`], [`Claims`],
//! [`Audit`], [`Auth`], [`Approvals`], [`Execution`], [`History`] and [`Housekeeping`];
//! [`Store`] is their sum, what the daemon opens. One implementation, [`SqlStore<D>`], runs the
//! same SQL on two databases: [`SqliteStore`] (embedded, the default) and [`PgStore`]. The SQL
//! is written once, per capability, in `sql/`; what differs between the databases is the
//! [`Dialect`] (`sql/dialect.rs` lists it: id and time encoding, generated parameters, the
//! statement that opens a write transaction, serial writes and the audit chain's lock, the
//! claim query, a time's day, migrations, and the batch reads and writes of ingest and step
//! commits), implemented in `sqlite.rs` and `postgres.rs`.
//!
//! Invariants: every phase change commits together with its audit events; no code path
//! updates or deletes an audit row (database triggers refuse it too); a signal is keyed on
//! `(fingerprint, starts_at)` and a redelivery changes nothing; at most one active request
//! holds a target fingerprint.

mod bell;
mod capability;
pub mod chain;
pub mod files;
mod postgres;
mod sql;
mod sqlite;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use bell::{BellStatus, TrailWatch, Woken};
pub use capability::{
    Approvals, Audit, Auth, Chat, Claims, Execution, History, Housekeeping, Patterns, Requests,
    Store,
};
pub use chain::{AuditKey, BrokenLink, ChainReport};
pub use postgres::{AUDIT_CHANNEL, IDLE_IN_TRANSACTION, LISTENER_NAME, PgStore, Postgres};
pub use sql::{Dialect, SqlStore};
pub use sqlite::{Sqlite, SqliteStore};

use crate::clock::Clock;
use crate::domain::{
    AuditDraft, Phase, RemediationRequest, Severity, SignalMode, SignalSource, SignalStatus,
    StageState, Target,
};
use crate::secret::{Secret, redact_url};

/// The most failed sign-ins of one client [`Auth::failed_logins`] returns: far above any limit
/// the login limiter sets, so a client a few racing replicas let through is still refused.
pub const MAX_LOGIN_FAILURES_READ: i64 = 100;

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    Sqlite(PathBuf),
    Postgres(Secret),
}

impl DatabaseUrl {
    /// A form safe to print: the SQLite path, or the Postgres host and database without
    /// credentials.
    pub fn redacted(&self) -> String {
        match self {
            DatabaseUrl::Sqlite(path) => format!("sqlite://{}", path.display()),
            DatabaseUrl::Postgres(url) => redact_url(url.expose()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or refused the operation; callers answer 503 / retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row that does not decode into the domain (a bug or a hand-edited database).
    #[error("corrupt row in {table}: {message}")]
    Corrupt {
        table: &'static str,
        message: String,
    },
    /// A concurrent writer won a race; the operation is retried internally.
    #[error("write conflict")]
    Conflict,
    #[error("cannot prepare the database: {0}")]
    Setup(String),
    /// A value that cannot be written as JSON (a bug: every stored type serialises).
    #[error("cannot encode a value for the database: {0}")]
    Encode(String),
    /// This daemon's audit key may not extend the trail: it was rotated out, or another key
    /// signs it. Nothing is written; the daemon must be restarted with the current keyring.
    #[error("{0}")]
    AuditKey(String),
    /// The data directory, the database's directory or the key file is writable by others.
    #[error(transparent)]
    SharedWrite(#[from] files::SharedWrite),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e
            && db.is_unique_violation()
        {
            return StoreError::Conflict;
        }
        StoreError::Unavailable(e)
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What ingest did with one signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum IngestOutcome {
    /// A new remediation request was opened for the signal's target.
    Opened { request_id: Uuid },
    /// The target already has an active request; its occurrence count went up.
    Occurrence {
        request_id: Uuid,
        occurrence_count: i64,
    },
    /// The same `(fingerprint, startsAt)` was seen before; nothing changed.
    Redelivery { request_id: Option<Uuid> },
    /// A resolved notification was recorded.
    Resolved { request_id: Option<Uuid> },
}

impl IngestOutcome {
    pub fn request_id(&self) -> Option<Uuid> {
        match *self {
            IngestOutcome::Opened { request_id } => Some(request_id),
            IngestOutcome::Occurrence { request_id, .. } => Some(request_id),
            IngestOutcome::Redelivery { request_id } => request_id,
            IngestOutcome::Resolved { request_id } => request_id,
        }
    }
}

/// Which requests to list, newest first. Every filter is an exact match served by an index;
/// paging is by key (`before`), so a page costs the same however deep it is.
#[derive(Debug, Clone, Default)]
pub struct RequestFilter {
    pub phase: Option<Phase>,
    pub namespace: Option<String>,
    /// The target's name (any kind).
    pub target: Option<String>,
    /// The alert (signal) name.
    pub signal_name: Option<String>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Created before.
    pub until: Option<DateTime<Utc>>,
    /// Only requests older than this one (the previous page's `next`).
    pub before: Option<Cursor>,
    pub limit: i64,
}

/// A position in the request list: the last request of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl Cursor {
    pub fn of(r: &RemediationRequest) -> Self {
        Self {
            created_at: r.created_at,
            id: r.id,
        }
    }

    /// `<microseconds>_<uuid>`: opaque to clients, safe in a URL.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created_at.timestamp_micros(), self.id)
    }

    pub fn decode(s: &str) -> Option<Self> {
        let (micros, id) = s.split_once('_')?;
        Some(Self {
            created_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            id: Uuid::parse_str(id).ok()?,
        })
    }
}

/// One page of requests; `next` is set when there may be more.
#[derive(Debug, Clone)]
pub struct RequestPage {
    pub items: Vec<RemediationRequest>,
    pub next: Option<Cursor>,
}

/// The figures of the summary page, over the requests created since `since`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub since: Option<DateTime<Utc>>,
    pub total: i64,
    /// Requests per phase (terminal phases are the outcomes).
    pub by_phase: Vec<(Phase, i64)>,
    /// Requests the gate decided, and how many of them it let through without a human.
    pub gated: i64,
    pub auto_approved: i64,
    /// Median time from the alert's arrival to the end of a completed request.
    pub median_ttr_seconds: Option<f64>,
    /// Effectiveness scores of verified requests in five bins: [0, .2), [.2, .4), … [.8, 1].
    pub effectiveness: [i64; 5],
    /// LLM tokens per UTC day (`YYYY-MM-DD`), oldest first.
    pub tokens_per_day: Vec<(String, i64)>,
    /// Executions stopped by each guardrail.
    pub guardrail_blocks: Vec<(String, i64)>,
}

#[derive(Debug, Clone, Default)]
pub struct SignalFilter {
    pub status: Option<SignalStatus>,
    pub namespace: Option<String>,
    pub request_id: Option<Uuid>,
    pub limit: i64,
    pub offset: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub total: i64,
    pub items: Vec<T>,
}

/// A signal as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRecord {
    pub id: Uuid,
    pub fingerprint: String,
    pub status: SignalStatus,
    pub name: String,
    pub severity: Option<Severity>,
    pub mode: SignalMode,
    pub source: SignalSource,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub target: Option<Target>,
    pub request_id: Option<Uuid>,
    pub received_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// The result of one pipeline step, committed atomically with its audit events.
#[derive(Debug, Clone)]
pub struct StepCommit {
    pub to: Phase,
    pub reason: Option<String>,
    pub state: StageState,
    pub attempts: i32,
    pub not_before: Option<DateTime<Utc>>,
    /// Give up the worker's claim (the request waits, is terminal, or waits for a human).
    pub release: bool,
    pub events: Vec<AuditDraft>,
}

/// A step for a request the worker holds in phase `from`, for [`Claims::commit_steps`].
#[derive(Debug, Clone)]
pub struct PendingStep {
    pub id: Uuid,
    /// The phase the request is stored in.
    pub from: Phase,
    /// A phase it passed through on the way without a commit of its own (received →
    /// enriching runs no stage and touches nothing outside the store), recorded as a
    /// transition of its own before the step's.
    pub via: Option<Via>,
    pub step: StepCommit,
}

/// A move made in memory and committed with the step after it (see [`PendingStep::via`]).
#[derive(Debug, Clone)]
pub struct Via {
    pub phase: Phase,
    pub reason: Option<String>,
    pub events: Vec<AuditDraft>,
}

/// What the summary counts of a request, kept in columns of its own as its steps commit.
pub(crate) struct Figures {
    tokens: i64,
    auto_approved: Option<bool>,
    effectiveness: Option<f64>,
    guardrail: Option<String>,
}

impl Figures {
    fn of(step: &StepCommit) -> Self {
        let state = &step.state;
        let tokens = state.analysis.as_ref().map_or(0, |a| a.usage.total())
            + state.selection.as_ref().map_or(0, |s| s.usage.total());
        Figures {
            tokens: i64::try_from(tokens).unwrap_or(i64::MAX),
            auto_approved: state.gate.as_ref().map(|g| !g.require_approval),
            effectiveness: state.assessment.as_ref().and_then(|a| a.score),
            guardrail: step
                .events
                .iter()
                .find(|e| e.kind == crate::domain::audit::GUARDRAIL)
                .and_then(|e| {
                    serde_json::from_value::<crate::domain::GuardrailPayload>(e.payload.clone())
                        .ok()
                })
                .map(|g| g.guardrail),
        }
    }
}

/// Where a step of an execution stands. `Started` is committed before the side effect; a
/// `Started` intent found after a crash must be reconciled with the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    Started,
    Applied,
    Failed,
}

impl IntentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::Started => "started",
            IntentStatus::Applied => "applied",
            IntentStatus::Failed => "failed",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "started" => Some(IntentStatus::Started),
            "applied" => Some(IntentStatus::Applied),
            "failed" => Some(IntentStatus::Failed),
            _ => None,
        }
    }
}

/// The durable intent of one execution step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Intent {
    pub request_id: Uuid,
    pub step: i32,
    pub action: String,
    pub status: IntentStatus,
    pub detail: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Who holds the execution lock of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionLock {
    pub target_fingerprint: String,
    pub request_id: Uuid,
    pub namespace: Option<String>,
    pub acquired_at: DateTime<Utc>,
}

/// What one delivery attempt of a notification came to.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryResult {
    Delivered {
        external_ref: Option<serde_json::Value>,
    },
    /// Failed; try again at `at`.
    Retry { error: String, at: DateTime<Utc> },
    /// Failed for good (every attempt used, or an error no retry can fix).
    GaveUp { error: String },
    /// Not sent, and never to be (the approval was decided before this offer went out).
    Cancelled { reason: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct StoreHealth {
    pub backend: &'static str,
    pub migrations_applied: i64,
    pub migrations_expected: i64,
    /// The key the database's audit trail is signed with now (`None` before any daemon
    /// served it), and this store's signing key: a replica whose key was rotated out is not
    /// ready (it can write nothing).
    pub audit_key: Option<String>,
    pub our_audit_key: String,
}

impl StoreHealth {
    /// Whether this store's key may extend the audit trail.
    pub fn audit_key_current(&self) -> bool {
        self.audit_key
            .as_deref()
            .is_none_or(|k| k == self.our_audit_key)
    }
}

/// Open the configured database, creating it (and its directory) if needed, and apply
/// migrations. Audit events are chained with `key`.
pub async fn open(
    url: &DatabaseUrl,
    clock: Arc<dyn Clock>,
    key: AuditKey,
) -> Result<Arc<dyn Store>> {
    Ok(match url {
        DatabaseUrl::Sqlite(path) => Arc::new(SqliteStore::open(path, clock, key).await?),
        DatabaseUrl::Postgres(url) => Arc::new(PgStore::open(url.expose(), clock, key).await?),
    })
}

/// Refuse state that others can write, before anything is created in it or read from it: the
/// data directory, the SQLite database's directory, and `key_file` (the audit key file, when
/// the key is read from one). What is missing is created private later.
pub fn check_state_files(
    data_dir: &std::path::Path,
    url: &DatabaseUrl,
    key_file: Option<&std::path::Path>,
) -> Result<()> {
    files::refuse_shared_write("data directory", data_dir)?;
    if let DatabaseUrl::Sqlite(path) = url
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        files::refuse_shared_write("database directory", dir)?;
        files::refuse_shared_write("database file", path)?;
    }
    if let Some(key) = key_file {
        files::refuse_shared_write("audit key file", key)?;
    }
    Ok(())
}

/// Apply migrations only (the `migrate` command). Writes no audit event, so any key does.
pub async fn migrate(url: &DatabaseUrl) -> Result<StoreHealth> {
    let store = open(
        url,
        Arc::new(crate::clock::SystemClock),
        AuditKey::generate(),
    )
    .await?;
    store.health().await
}

fn corrupt(table: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        table,
        message: message.into(),
    }
}

fn parse_phase(s: &str) -> Result<Phase> {
    Phase::parse(s).ok_or_else(|| corrupt("remediation_requests", format!("unknown phase `{s}`")))
}

fn make_target(kind: Option<String>, name: Option<String>, ns: Option<String>) -> Option<Target> {
    match (kind, name) {
        (Some(kind), Some(name)) => Some(Target::new(kind, name, ns)),
        _ => None,
    }
}

/// Replace every U+0000 in the strings and keys of `v` with U+FFFD; returns how many. PostgreSQL's
/// `text` and `jsonb` cannot hold U+0000 (SQLite can): kubemedic stores U+FFFD in its place on
/// both backends, so they hold the same data, and a NUL in an alert label, a log line or a
/// model's answer never makes a commit fail (and be retried forever).
pub fn replace_nul(v: &mut serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) if s.contains('\0') => {
            let n = s.matches('\0').count();
            *s = s.replace('\0', "\u{FFFD}");
            n
        }
        Value::Array(items) => items.iter_mut().map(replace_nul).sum(),
        Value::Object(map) => {
            let mut n = 0;
            if map.keys().any(|k| k.contains('\0')) {
                let old = std::mem::take(map);
                for (k, v) in old {
                    n += k.matches('\0').count();
                    map.insert(k.replace('\0', "\u{FFFD}"), v);
                }
            }
            n + map.values_mut().map(replace_nul).sum::<usize>()
        }
        _ => 0,
    }
}

/// `s` as both backends can store it (see [`replace_nul`]).
pub(crate) fn storable_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Whether any string or key of `v` holds U+0000.
fn has_nul(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// A JSON value as both backends can store it (see [`replace_nul`]), copied only when it holds
/// a NUL: audit payloads are written on every ingest.
pub(crate) fn storable_value(
    v: &serde_json::Value,
) -> sqlx::types::Json<std::borrow::Cow<'_, serde_json::Value>> {
    if !has_nul(v) {
        return sqlx::types::Json(std::borrow::Cow::Borrowed(v));
    }
    let mut owned = v.clone();
    replace_nul(&mut owned);
    sqlx::types::Json(std::borrow::Cow::Owned(owned))
}

/// `v` as JSON both backends can store (see [`replace_nul`]).
pub(crate) fn storable_json<T: Serialize + ?Sized>(
    v: &T,
) -> Result<sqlx::types::Json<serde_json::Value>> {
    let mut value = serde_json::to_value(v).map_err(|e| StoreError::Encode(e.to_string()))?;
    replace_nul(&mut value);
    Ok(sqlx::types::Json(value))
}
