//! Dashboard benchmark: the list pages, the request page and the summary at scale — 100,000
//! remediation requests and 1,000,000 audit events — on SQLite and on PostgreSQL.
//!
//! Run it with `scripts/bench-dashboard` (starts a throwaway Postgres that keeps its data for
//! the next run, builds in release, runs this, stops Postgres); figures and analysis live in
//! `docs/benchmarks.md`.
//!
//! 1. Seeding, once per backend (kept, and reused by the next run while its sizes match):
//!    `BENCH_REQUESTS` requests over the `BENCH_DAYS` days before the seeding moment, in
//!    Alertmanager webhook bodies of `BATCH` alerts (8 namespaces, 40 workloads each, 10 alert
//!    names, pod and workload targets) parsed by the real parser and recorded with
//!    `Store::ingest` (signals, requests, targets and the `received` event, as in production).
//!    Each request is then given a fate — a realistic mix of terminal phases, and the requests
//!    of the last two hours still in flight — and the rest of its story is written with plain
//!    SQL in large statements, the way the pipeline would have left it: the phase and the typed
//!    stage state (enrichment, analysis, selection, gate, approval, execution, assessment, built
//!    from the domain types), the summary's columns (tokens, auto-approved, effectiveness,
//!    guardrail, time to resolution), the audit events of every stage, the decided approvals
//!    with their notifications, the remediation history. The audit events (~`BENCH_EVENTS` in
//!    all) extend the store's hash chain exactly as `insert_audit` does (`AuditKey::link` over
//!    the stored fields, explicit ids in chain order). Pending approvals of the requests still
//!    waiting are created with `Store::create_approval`. Seeding ends with
//!    `Store::verify_chain()` over the whole trail (the cost of `kubemedic audit verify`), which
//!    must report it intact, then a marker in the `settings` table. On Postgres a
//!    `VACUUM ANALYZE` follows the bulk load (what autovacuum does after it); SQLite gets no
//!    `ANALYZE`, as the daemon runs none.
//! 2. Measurement, over real HTTP: the daemon (`daemon::start_on`, `Components::default()`: no
//!    cluster, no stages) on the seeded store, its clock held at the seeding moment so the
//!    periods cover the same data on every run, an admin key through `--api-token`. For each
//!    page, `BENCH_WARMUP` requests, then `BENCH_SAMPLES` requests one after another (each timed
//!    from send to the last byte of the body); p50, p95, max. The requests still in flight wait
//!    (`not_before` a year ahead) so the daemon's workers leave the seeded data alone.
//!
//! Environment (all optional): `KUBEMEDIC_TEST_POSTGRES_URL` (admin URL; without it Postgres is
//! skipped, loudly), `BENCH_BACKENDS` (`sqlite,postgres`), `BENCH_DIR` (where the seeded data
//! lives; default the system temp dir), `BENCH_RESEED` (seed again even if a seeded database
//! exists), `BENCH_REQUESTS` (100000), `BENCH_EVENTS` (1000000), `BENCH_DAYS` (60),
//! `BENCH_SAMPLES` (200), `BENCH_WARMUP` (20), `BENCH_ONLY` (measure only the pages whose name
//! contains this).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed assumption fails the run

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sqlx::types::Json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use kubemedic::clock::Clock;
use kubemedic::config::{DaemonArgs, Settings};
use kubemedic::daemon::{self, Components};
use kubemedic::domain::{
    AlternativeWorkflow, ApprovalDecision, ApprovalRequest, Assessment, AssessmentReason, Channel,
    Decision, DeliveryStatus, EngineKind, Execution, ExecutionOutcome, ExecutionStep,
    HistoryOutcome, HistoryRecord, Notification, NotificationKind, Phase, RiskFactor, StageState,
    StepStatus, Target, Usage,
};
use kubemedic::ingest::alertmanager;
use kubemedic::secret::Secret;
use kubemedic::store::{AuditKey, IngestOutcome, Store, chain::ChainRow};

const API_TOKEN: &str = "bench-dashboard-token";
const WEBHOOK_TOKEN: &str = "bench-dashboard-webhook";
/// The `settings` row that says a database is seeded, and with what.
const SEED_KEY: &str = "bench.dashboard.seed";
/// Bumped when the seeded data changes shape: an older seed is replaced.
const SEED_VERSION: u32 = 1;
/// Alerts per webhook body (Alertmanager groups alerts; one `Store::ingest` call each).
const BATCH: usize = 10;
/// Requests of the last this-many hours are still in flight.
const IN_FLIGHT_HOURS: i64 = 2;
/// Requests whose story is written in one flush.
const FLUSH: usize = 2_000;
/// Rows per multi-row INSERT of audit events.
const ROWS_PER_INSERT: usize = 500;
const WORKER: &str = "worker/kubemedic-0";
const POSTGRES_DB: &str = "kubemedic_dashboard_bench";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a valid value")),
        _ => default,
    }
}

#[derive(Clone)]
struct Config {
    requests: usize,
    events: usize,
    days: i64,
    samples: usize,
    warmup: usize,
    dir: PathBuf,
    reseed: bool,
    only: Option<String>,
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cfg = Config {
        requests: env_or("BENCH_REQUESTS", 100_000),
        events: env_or("BENCH_EVENTS", 1_000_000),
        days: env_or("BENCH_DAYS", 60),
        samples: env_or("BENCH_SAMPLES", 200),
        warmup: env_or("BENCH_WARMUP", 20),
        dir: std::env::var_os("BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir),
        reseed: std::env::var("BENCH_RESEED").is_ok_and(|v| !v.is_empty() && v != "0"),
        only: std::env::var("BENCH_ONLY").ok().filter(|v| !v.is_empty()),
    };
    let backends: Vec<String> = std::env::var("BENCH_BACKENDS")
        .unwrap_or_else(|_| "sqlite,postgres".into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = runtime.block_on(async move {
        match run(cfg, backends).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("bench failed: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}

async fn run(cfg: Config, backends: Vec<String>) -> Res<()> {
    println!("kubemedic dashboard benchmark");
    println!(
        "  data        {} requests over {} days, ~{} audit events; kept in {}",
        cfg.requests,
        cfg.days,
        cfg.events,
        cfg.dir.display()
    );
    println!(
        "  measure     {} requests per page after {} warm-up requests, one at a time, over HTTP",
        cfg.samples, cfg.warmup
    );
    println!();
    let mut reports = Vec::new();
    for backend in &backends {
        let backend = match backend.as_str() {
            "sqlite" => Backend::Sqlite {
                dir: cfg.dir.join("dashboard-sqlite"),
            },
            "postgres" => match std::env::var("KUBEMEDIC_TEST_POSTGRES_URL") {
                Ok(admin) if !admin.is_empty() => Backend::Postgres {
                    dir: cfg.dir.join("dashboard-postgres"),
                    admin,
                },
                _ => {
                    eprintln!(
                        "\n*** SKIPPED Postgres: KUBEMEDIC_TEST_POSTGRES_URL is not set; run \
                         scripts/bench-dashboard ***\n"
                    );
                    continue;
                }
            },
            other => return Err(format!("unknown backend `{other}`").into()),
        };
        reports.push(bench_backend(&cfg, backend).await?);
    }
    println!("\n## Summary\n");
    for r in &reports {
        print_report(&cfg, r);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Backends and direct database access.

enum Backend {
    Sqlite { dir: PathBuf },
    Postgres { dir: PathBuf, admin: String },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite { .. } => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    fn data_dir(&self) -> &Path {
        match self {
            Backend::Sqlite { dir } | Backend::Postgres { dir, .. } => dir,
        }
    }

    fn url(&self) -> String {
        match self {
            Backend::Sqlite { dir } => format!("sqlite://{}", dir.join("kubemedic.db").display()),
            Backend::Postgres { admin, .. } => {
                let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
                format!("{base}/{POSTGRES_DB}")
            }
        }
    }

    /// Remove the seeded database and its audit key.
    async fn wipe(&self) -> Res<()> {
        let dir = self.data_dir();
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        if let Backend::Postgres { admin, .. } = self {
            let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {POSTGRES_DB} WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "CREATE DATABASE {POSTGRES_DB}"
            )))
            .execute(&mut conn)
            .await?;
        }
        Ok(())
    }

    /// Whether the database exists at all (a Postgres database may be gone with its cluster).
    async fn exists(&self) -> Res<bool> {
        Ok(match self {
            Backend::Sqlite { dir } => {
                dir.join("kubemedic.db").exists() && dir.join("audit.key").exists()
            }
            Backend::Postgres { admin, .. } => {
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await?;
                let found: Option<(i32,)> =
                    sqlx::query_as("SELECT 1 FROM pg_database WHERE datname = $1")
                        .bind(POSTGRES_DB)
                        .fetch_optional(&mut conn)
                        .await?;
                found.is_some() && self.data_dir().join("audit.key").exists()
            }
        })
    }

    async fn connect(&self) -> Res<Db> {
        Ok(match self {
            Backend::Sqlite { dir } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(dir.join("kubemedic.db"))
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
                    .busy_timeout(Duration::from_secs(60));
                Db::Sqlite(
                    sqlx::sqlite::SqlitePoolOptions::new()
                        .max_connections(1)
                        .connect_with(options)
                        .await?,
                )
            }
            Backend::Postgres { .. } => Db::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(2)
                    .connect(&self.url())
                    .await?,
            ),
        })
    }
}

/// A connection of the benchmark's own beside the store's, for the bulk writes and the reads
/// the pages do not offer (the ids to visit, the database size).
enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

mod sqlite_enc {
    pub fn id(u: uuid::Uuid) -> String {
        u.hyphenated().to_string()
    }
    pub fn ts(t: chrono::DateTime<chrono::Utc>) -> String {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    }
}

mod pg_enc {
    pub fn id(u: uuid::Uuid) -> uuid::Uuid {
        u
    }
    pub fn ts(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        t
    }
}

/// Run `$body` on either backend with `$pool` the pool, `$dbt` the sqlx database type and `id` /
/// `ts` encoding a UUID / a time the way the store stores them there.
macro_rules! on_db {
    ($db:expr, $pool:ident, $dbt:ident => $body:block) => {
        match $db {
            Db::Sqlite($pool) => {
                #[allow(unused)]
                type $dbt = sqlx::Sqlite;
                #[allow(unused)]
                use sqlite_enc::{id, ts};
                $body
            }
            Db::Postgres($pool) => {
                #[allow(unused)]
                type $dbt = sqlx::Postgres;
                #[allow(unused)]
                use pg_enc::{id, ts};
                $body
            }
        }
    };
}

impl Db {
    async fn seed_marker(&self) -> Res<Option<SeedInfo>> {
        let row: Option<(String,)> = on_db!(self, pool, D => {
            sqlx::query_as("SELECT value FROM settings WHERE key = $1")
                .bind(SEED_KEY)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.and_then(|(v,)| serde_json::from_str(&v).ok()))
    }

    /// The id and hash of the last audit event: where the chain continues.
    async fn chain_head(&self) -> Res<(i64, Option<String>)> {
        let row: Option<(i64, Option<String>)> = on_db!(self, pool, D => {
            sqlx::query_as("SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1")
                .fetch_optional(pool)
                .await?
        });
        Ok(row.unwrap_or((0, None)))
    }

    /// A terminal request no longer holds its target (what the commit that ends it does).
    async fn release_targets(&self, ids: &[Uuid]) -> Res<()> {
        if ids.is_empty() {
            return Ok(());
        }
        on_db!(self, pool, D => {
            let mut q = sqlx::QueryBuilder::<D>::new(
                "UPDATE request_targets SET active = FALSE WHERE request_id IN (",
            );
            {
                let mut list = q.separated(", ");
                for r in ids {
                    list.push_bind(id(*r));
                }
            }
            q.push(")");
            q.build().execute(pool).await?;
        });
        Ok(())
    }

    /// Write the rest of each request's story: its row, its events (chained after the current
    /// head), its approval and notifications, its history entry.
    async fn write_stories(&self, key: &AuditKey, stories: &[Story]) -> Res<u64> {
        let (mut last_id, mut prev) = self.chain_head().await?;
        let mut events: Vec<(Uuid, &Ev)> = stories
            .iter()
            .flat_map(|s| s.events.iter().map(move |e| (s.id, e)))
            .collect();
        events.sort_by_key(|(_, e)| e.at);
        // The chain columns, computed exactly as `insert_audit` does.
        let mut chained: Vec<(i64, Uuid, &Ev, Option<String>, String)> =
            Vec::with_capacity(events.len());
        for (rid, e) in events {
            let rid_text = rid.hyphenated().to_string();
            let hash = key.link(
                prev.as_deref(),
                &ChainRow {
                    request_id: Some(&rid_text),
                    at_micros: e.at.timestamp_micros(),
                    phase: Some(e.phase.as_str()),
                    kind: e.kind,
                    actor: &e.actor,
                    message: &e.message,
                    payload: &e.payload,
                },
            );
            last_id += 1;
            chained.push((last_id, rid, e, prev.replace(hash.clone()), hash));
        }
        let written = chained.len() as u64;
        on_db!(self, pool, D => {
            let mut tx = pool.begin().await?;
            for s in stories.iter() {
                let f = &s.fate_row;
                sqlx::query(
                    "UPDATE remediation_requests SET phase = $1, reason = $2, active = $3, \
                     state = $4, attempts = $5, not_before = $6, updated_at = $7, tokens = $8, \
                     auto_approved = $9, effectiveness = $10, guardrail = $11, finished_at = $12, \
                     ttr_ms = $13, occurrence_count = $14, last_seen = $15 WHERE id = $16",
                )
                .bind(f.phase.as_str())
                .bind(f.reason.as_deref())
                .bind(!f.phase.is_terminal())
                .bind(Json(&s.state))
                .bind(1i32)
                .bind(f.not_before.map(ts))
                .bind(ts(f.updated_at))
                .bind(f.tokens)
                .bind(f.auto_approved)
                .bind(f.effectiveness)
                .bind(f.guardrail)
                .bind(f.finished_at.map(ts))
                .bind(f.finished_at.map(|t| (t - s.created).num_milliseconds()))
                .bind(f.occurrences)
                .bind(ts(f.last_seen))
                .bind(id(s.id))
                .execute(&mut *tx)
                .await?;
                if let Some((approval, notifications)) = &s.approval {
                    sqlx::query(
                        "INSERT INTO approvals (id, request_id, status, created_at, expires_at, \
                         decided_at, record) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(id(approval.id))
                    .bind(id(approval.request_id))
                    .bind(approval.status().as_str())
                    .bind(ts(approval.created_at))
                    .bind(ts(approval.expires_at))
                    .bind(approval.decision.as_ref().map(|d| ts(d.decided_at)))
                    .bind(Json(approval))
                    .execute(&mut *tx)
                    .await?;
                    for n in notifications {
                        sqlx::query(
                            "INSERT INTO notifications (id, approval_id, channel, recipient, \
                             kind, status, attempts, next_attempt_at, last_error, external_ref, \
                             created_at, updated_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL, NULL, $8, $9)",
                        )
                        .bind(id(n.id))
                        .bind(id(n.approval_id))
                        .bind(n.channel.as_str())
                        .bind(&n.recipient)
                        .bind(n.kind.as_str())
                        .bind(n.status.as_str())
                        .bind(n.attempts)
                        .bind(ts(n.created_at))
                        .bind(ts(n.updated_at))
                        .execute(&mut *tx)
                        .await?;
                    }
                }
                if let Some(h) = &s.history {
                    sqlx::query(
                        "INSERT INTO remediation_history (request_id, target_fingerprint, \
                         completed_at, record) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(id(s.id))
                    .bind(h.target.fingerprint())
                    .bind(ts(h.completed_at))
                    .bind(Json(h))
                    .execute(&mut *tx)
                    .await?;
                }
            }
            for chunk in chained.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::<D>::new(
                    "INSERT INTO audit_events (id, request_id, at, phase, kind, actor, message, \
                     payload, prev_hash, hash, key_id) ",
                );
                q.push_values(chunk, |mut b, (eid, rid, e, prev, hash)| {
                    b.push_bind(*eid)
                        .push_bind(id(*rid))
                        .push_bind(ts(e.at))
                        .push_bind(e.phase.as_str())
                        .push_bind(e.kind)
                        .push_bind(&e.actor)
                        .push_bind(&e.message)
                        .push_bind(Json(&e.payload))
                        .push_bind(prev.clone())
                        .push_bind(hash.clone())
                        .push_bind(key.id().to_owned());
                });
                q.build().execute(&mut *tx).await?;
            }
            if matches!(self, Db::Postgres(_)) {
                // The store's next insert takes its id from the sequence.
                sqlx::query(
                    "SELECT setval(pg_get_serial_sequence('audit_events', 'id'), \
                     (SELECT max(id) FROM audit_events))",
                )
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        Ok(written)
    }

    async fn request_ids(&self) -> Res<Vec<Uuid>> {
        Ok(match self {
            Db::Sqlite(pool) => {
                let rows: Vec<(String,)> =
                    sqlx::query_as("SELECT id FROM remediation_requests ORDER BY id")
                        .fetch_all(pool)
                        .await?;
                rows.into_iter()
                    .map(|(s,)| Uuid::parse_str(&s))
                    .collect::<Result<_, _>>()?
            }
            Db::Postgres(pool) => {
                let rows: Vec<(Uuid,)> =
                    sqlx::query_as("SELECT id FROM remediation_requests ORDER BY id")
                        .fetch_all(pool)
                        .await?;
                rows.into_iter().map(|(u,)| u).collect()
            }
        })
    }

    /// The list's cursor after `offset` requests, newest first.
    async fn cursor_at(&self, offset: i64) -> Res<Option<String>> {
        const SQL: &str = "SELECT created_at, id FROM remediation_requests \
                           ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET $1";
        Ok(match self {
            Db::Sqlite(pool) => {
                let row: Option<(String, String)> = sqlx::query_as(SQL)
                    .bind(offset)
                    .fetch_optional(pool)
                    .await?;
                row.map(|(at, id)| {
                    let at = chrono::NaiveDateTime::parse_from_str(&at, "%Y-%m-%dT%H:%M:%S%.6fZ")
                        .expect("stored time")
                        .and_utc();
                    format!("{}_{id}", at.timestamp_micros())
                })
            }
            Db::Postgres(pool) => {
                let row: Option<(DateTime<Utc>, Uuid)> = sqlx::query_as(SQL)
                    .bind(offset)
                    .fetch_optional(pool)
                    .await?;
                row.map(|(at, id)| format!("{}_{id}", at.timestamp_micros()))
            }
        })
    }

    async fn count(&self, table: &str) -> Res<i64> {
        let sql = format!("SELECT count(*) FROM {table}");
        let (n,): (i64,) = on_db!(self, pool, D => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_one(pool).await?
        });
        Ok(n)
    }

    /// After the bulk load: Postgres `VACUUM ANALYZE` (autovacuum's job, done now so every
    /// run measures the same state); SQLite folds its write-ahead log into the file.
    async fn settle(&self) -> Res<()> {
        match self {
            Db::Sqlite(pool) => {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(pool)
                    .await?;
            }
            Db::Postgres(pool) => {
                sqlx::query("VACUUM ANALYZE").execute(pool).await?;
            }
        }
        Ok(())
    }

    /// Bytes the database takes on disk.
    async fn size(&self, backend: &Backend) -> Res<u64> {
        Ok(match (self, backend) {
            (Db::Postgres(pool), _) => {
                let (n,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())")
                    .fetch_one(pool)
                    .await?;
                n as u64
            }
            (Db::Sqlite(_), b) => std::fs::read_dir(b.data_dir())?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("kubemedic.db"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The clock: seeding moves it batch by batch; the daemon reads the seeding moment.

struct BenchClock(AtomicI64);

impl BenchClock {
    fn new(t: DateTime<Utc>) -> Self {
        Self(AtomicI64::new(t.timestamp_micros()))
    }
    fn set(&self, t: DateTime<Utc>) {
        self.0.store(t.timestamp_micros(), Ordering::SeqCst);
    }
}

impl Clock for BenchClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0.load(Ordering::SeqCst)).expect("time")
    }
}

// ---------------------------------------------------------------------------------------------
// What a seed was, kept in the database.

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct SeedInfo {
    version: u32,
    requests: usize,
    events_target: usize,
    days: i64,
    /// The seeding moment: the newest request is just before it; the daemon's clock reads it.
    now: DateTime<Utc>,
    requests_seeded: i64,
    events_seeded: i64,
    signals: i64,
    approvals: i64,
    history: i64,
    seconds_ingest: f64,
    seconds_stories: f64,
    seconds_total: f64,
    seconds_verify: f64,
    seconds_settle: f64,
    verified_events: u64,
}

// ---------------------------------------------------------------------------------------------
// The world the alerts come from.

const NAMESPACES: [(&str, u32, &str); 8] = [
    ("payments", 18, "production"),
    ("checkout", 16, "production"),
    ("search", 14, "production"),
    ("inventory", 12, "production"),
    ("identity", 10, "production"),
    ("ledger", 10, "production"),
    ("notifications", 10, "staging"),
    ("analytics", 10, "staging"),
];
const BASES: [&str; 10] = [
    "api",
    "worker",
    "gateway",
    "frontend",
    "scheduler",
    "consumer",
    "indexer",
    "cache",
    "exporter",
    "sync",
];
const VARIANTS: [&str; 4] = ["", "-v2", "-batch", "-canary"];

#[derive(Clone, Copy)]
enum Shape {
    Pod,
    Workload,
}

/// (alertname, weight, severity, what it names)
const ALERTS: [(&str, u32, &str, Shape); 10] = [
    ("KubePodCrashLooping", 22, "critical", Shape::Pod),
    ("KubePodNotReady", 14, "warning", Shape::Pod),
    ("KubeContainerOOMKilled", 10, "warning", Shape::Pod),
    ("CPUThrottlingHigh", 6, "info", Shape::Pod),
    (
        "KubeDeploymentReplicasMismatch",
        12,
        "warning",
        Shape::Workload,
    ),
    ("HighErrorRate", 12, "critical", Shape::Workload),
    ("HighLatencyP99", 9, "warning", Shape::Workload),
    ("KubeHpaMaxedOut", 6, "warning", Shape::Workload),
    (
        "KubeStatefulSetReplicasMismatch",
        5,
        "warning",
        Shape::Workload,
    ),
    (
        "KubePersistentVolumeFillingUp",
        4,
        "critical",
        Shape::Workload,
    ),
];
/// (workflow id, action type)
const WORKFLOWS: [(&str, &str); 4] = [
    (
        "rollback-deployment-previous-revision",
        "RollbackDeployment",
    ),
    ("restart-rolling", "RestartDeployment"),
    ("scale-replicas", "ScaleReplicas"),
    ("increase-memory-limits", "IncreaseMemoryLimits"),
];
const GUARDRAILS: [&str; 5] = [
    "RecentlyRemediated",
    "IneffectiveChain",
    "RecurrenceCap",
    "ConsecutiveFailures",
    "ResourceBusy",
];
const APPROVERS: [&str; 4] = [
    "alice@example.com",
    "bob@example.com",
    "carol@example.com",
    "dan@example.com",
];

fn weighted<T: Copy>(rng: &mut StdRng, items: &[T], weight: impl Fn(&T) -> u32) -> T {
    let total: u32 = items.iter().map(&weight).sum();
    let mut pick = rng.random_range(0..total);
    for item in items {
        let w = weight(item);
        if pick < w {
            return *item;
        }
        pick -= w;
    }
    items[items.len() - 1]
}

#[derive(Clone)]
struct Workload {
    namespace: &'static str,
    environment: &'static str,
    kind: &'static str,
    name: String,
}

impl Workload {
    fn target(&self) -> Target {
        Target::new(
            self.kind,
            self.name.clone(),
            Some(self.namespace.to_owned()),
        )
    }
}

fn workloads() -> Vec<Workload> {
    let mut out = Vec::new();
    for (ns, _, env) in NAMESPACES {
        for base in BASES {
            for variant in VARIANTS {
                out.push(Workload {
                    namespace: ns,
                    environment: env,
                    kind: if matches!(base, "cache" | "indexer") {
                        "StatefulSet"
                    } else {
                        "Deployment"
                    },
                    name: format!("{base}{variant}"),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Fates and stories.

/// How a request ends (or where it stands, for the ones in flight).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fate {
    Completed {
        approved: bool,
    },
    /// The alert resolved before the investigation finished.
    Resolved,
    /// Investigated; no workflow fits.
    NoWorkflow,
    InvestigationTimeout,
    NeedsReview,
    Failed {
        approved: bool,
    },
    Blocked,
    Rejected,
    Expired,
    InFlight(Phase),
}

fn roll_fate(rng: &mut StdRng, in_flight: bool) -> Fate {
    let r = rng.random_range(0..100u32);
    if in_flight {
        return Fate::InFlight(match r {
            0..30 => Phase::AwaitingApproval,
            30..50 => Phase::Verifying,
            50..65 => Phase::Investigating,
            65..75 => Phase::Selecting,
            75..85 => Phase::Executing,
            85..90 => Phase::Enriching,
            90..95 => Phase::Gating,
            _ => Phase::Received,
        });
    }
    let approved = rng.random_bool(0.3);
    match r {
        0..25 => Fate::Completed { approved },
        25..45 => Fate::Resolved,
        45..65 => Fate::NoWorkflow,
        65..71 => Fate::InvestigationTimeout,
        71..78 => Fate::NeedsReview,
        78..85 => Fate::Failed { approved },
        85..91 => Fate::Blocked,
        91..96 => Fate::Rejected,
        _ => Fate::Expired,
    }
}

/// One audit event to write after the `received` one.
struct Ev {
    at: DateTime<Utc>,
    phase: Phase,
    kind: &'static str,
    actor: String,
    message: String,
    payload: Value,
}

/// The columns the stages would have left on the request row.
struct FateRow {
    phase: Phase,
    reason: Option<String>,
    not_before: Option<DateTime<Utc>>,
    updated_at: DateTime<Utc>,
    tokens: i64,
    auto_approved: Option<bool>,
    effectiveness: Option<f64>,
    guardrail: Option<&'static str>,
    finished_at: Option<DateTime<Utc>>,
    occurrences: i64,
    last_seen: DateTime<Utc>,
}

struct Story {
    id: Uuid,
    created: DateTime<Utc>,
    state: StageState,
    events: Vec<Ev>,
    fate_row: FateRow,
    approval: Option<(ApprovalRequest, Vec<Notification>)>,
    history: Option<HistoryRecord>,
    /// A pending approval to create through the store once the story is written.
    pending: Option<ApprovalRequest>,
}

/// What one opened request is about.
struct Opened {
    id: Uuid,
    created: DateTime<Utc>,
    workload: Workload,
    alert: &'static str,
    fingerprint: String,
    starts_at: DateTime<Utc>,
}

fn ms(n: i64) -> chrono::Duration {
    chrono::Duration::milliseconds(n)
}

fn spec_hash(rng: &mut StdRng) -> String {
    format!(
        "sha256:{:016x}{:016x}",
        rng.random::<u64>(),
        rng.random::<u64>()
    )
}

/// Build the rest of a request's life: its events after `received`, its stage state, the row's
/// figures, its approval and history. `extra` occurrences of the alert come in meanwhile.
fn write_story(
    rng: &mut StdRng,
    template: &StageState,
    o: &Opened,
    fate: Fate,
    extra: usize,
    seed_now: DateTime<Utc>,
) -> Story {
    let mut t = o.created;
    let mut events = Vec::new();
    let mut state = StageState::default();
    let target = o.workload.target();
    let (workflow_id, action_type) = WORKFLOWS[rng.random_range(0..WORKFLOWS.len())];
    let in_flight = match fate {
        Fate::InFlight(p) => Some(p),
        _ => None,
    };
    let stops_at = |p: Phase| in_flight == Some(p);
    let mut approval = None;
    let mut pending = None;
    let mut history = None;
    let mut auto_approved = None;
    let mut effectiveness = None;
    let mut guardrail = None;
    let push = |events: &mut Vec<Ev>,
                at: DateTime<Utc>,
                phase: Phase,
                kind: &'static str,
                actor: &str,
                message: String,
                payload: Value| {
        events.push(Ev {
            at,
            phase,
            kind,
            actor: actor.to_owned(),
            message,
            payload,
        })
    };
    let transition =
        |events: &mut Vec<Ev>, at: DateTime<Utc>, from: Phase, to: Phase, reason: Option<&str>| {
            let d = kubemedic::domain::transition_event(from, to, reason, WORKER);
            events.push(Ev {
                at,
                phase: to,
                kind: "transition",
                actor: d.actor,
                message: d.message,
                payload: d.payload,
            });
        };
    // The story, stage by stage; `end` is (phase, reason) once it ends or stops.
    let end: (Phase, Option<String>) = 'story: {
        if stops_at(Phase::Received) {
            break 'story (Phase::Received, None);
        }
        t += ms(rng.random_range(20..200));
        transition(&mut events, t, Phase::Received, Phase::Enriching, None);
        if stops_at(Phase::Enriching) {
            break 'story (Phase::Enriching, None);
        }
        let mut enrichment = template.enrichment.clone().expect("fixture enrichment");
        enrichment.environment = o.workload.environment.to_owned();
        enrichment.sources = vec![
            format!(
                "environment: namespace label kubemedic.io/environment on {}",
                o.workload.namespace
            ),
            "priority: enrichment policy sha256:2361442b3932".into(),
        ];
        t += ms(rng.random_range(50..400));
        push(
            &mut events,
            t,
            Phase::Enriching,
            "enrichment",
            "enricher",
            format!(
                "environment {}, priority {}",
                enrichment.environment,
                enrichment.priority.as_deref().unwrap_or("none")
            ),
            json!({"environment": enrichment.environment, "priority": enrichment.priority,
                   "sources": enrichment.sources}),
        );
        state.enrichment = Some(enrichment);
        t += ms(5);
        transition(&mut events, t, Phase::Enriching, Phase::Investigating, None);
        if stops_at(Phase::Investigating) {
            break 'story (Phase::Investigating, None);
        }
        if fate == Fate::InvestigationTimeout {
            t += chrono::Duration::seconds(601);
            let reason =
                "timed out: Investigating for more than 600 s (investigation did not finish)";
            push(
                &mut events,
                t,
                Phase::Investigating,
                "timeout",
                WORKER,
                reason.into(),
                Value::Null,
            );
            transition(
                &mut events,
                t,
                Phase::Investigating,
                Phase::ManualReviewRequired,
                Some(reason),
            );
            break 'story (Phase::ManualReviewRequired, Some(reason.into()));
        }
        if fate == Fate::Resolved {
            t += chrono::Duration::seconds(rng.random_range(20..300));
            push(
                &mut events,
                t,
                Phase::Investigating,
                "signal_resolved",
                "alertmanager/kubemedic",
                format!("alert {} resolved", o.alert),
                json!({"fingerprint": o.fingerprint, "starts_at": o.starts_at, "ends_at": t}),
            );
            let reason = "the alert resolved before the investigation finished";
            transition(
                &mut events,
                t,
                Phase::Investigating,
                Phase::NoActionRequired,
                Some(reason),
            );
            break 'story (Phase::NoActionRequired, Some(reason.into()));
        }
        let mut analysis = template.analysis.clone().expect("fixture analysis");
        analysis.root_owner = Some(target.clone());
        analysis.usage = Usage {
            prompt_tokens: rng.random_range(6_000..40_000),
            completion_tokens: rng.random_range(300..2_500),
        };
        if fate == Fate::NeedsReview {
            analysis.rca.needs_human_review = true;
            analysis.rca.human_review_reason =
                Some("the evidence points at two owners; a human should pick".into());
        }
        state.analysis = Some(analysis);
        t += chrono::Duration::seconds(rng.random_range(15..120));
        transition(&mut events, t, Phase::Investigating, Phase::Selecting, None);
        if stops_at(Phase::Selecting) {
            break 'story (Phase::Selecting, None);
        }
        let mut selection = template.selection.clone().expect("fixture selection");
        selection.usage = Usage {
            prompt_tokens: rng.random_range(1_500..6_000),
            completion_tokens: rng.random_range(100..800),
        };
        t += chrono::Duration::seconds(rng.random_range(3..40));
        if matches!(fate, Fate::NoWorkflow | Fate::NeedsReview) {
            selection.selected = None;
            let (to, reason) = if fate == Fate::NoWorkflow {
                (
                    Phase::NoActionRequired,
                    "no workflow fits: the workload recovered on its own",
                )
            } else {
                (
                    Phase::ManualReviewRequired,
                    "the investigation asks for human review",
                )
            };
            selection.no_workflow_reasoning = Some(reason.into());
            push(
                &mut events,
                t,
                Phase::Selecting,
                "selection",
                "selector",
                format!("no workflow: {reason}"),
                json!({"selected": null, "reason": reason}),
            );
            state.selection = Some(selection);
            transition(&mut events, t, Phase::Selecting, to, Some(reason));
            break 'story (to, Some(reason.into()));
        }
        if let Some(w) = selection.selected.as_mut() {
            w.workflow_id = workflow_id.into();
            w.action_type = action_type.into();
            w.confidence = rng.random_range(0.6..0.98);
            w.parameters = serde_json::Map::from_iter([
                ("TARGET_RESOURCE_KIND".into(), json!(target.kind)),
                ("TARGET_RESOURCE_NAME".into(), json!(target.name)),
                ("TARGET_RESOURCE_NAMESPACE".into(), json!(target.namespace)),
            ]);
        }
        selection.alternatives = vec![AlternativeWorkflow {
            workflow_id: "restart-rolling".into(),
            rationale: "a restart clears the symptom without changing the spec".into(),
        }];
        push(
            &mut events,
            t,
            Phase::Selecting,
            "selection",
            "selector",
            format!("selected {workflow_id} v1.0.0 ({action_type})"),
            json!({"workflow_id": workflow_id, "action_type": action_type, "version": "1.0.0",
                   "alternatives": ["restart-rolling"], "parameters": {
                       "TARGET_RESOURCE_KIND": target.kind, "TARGET_RESOURCE_NAME": target.name,
                       "TARGET_RESOURCE_NAMESPACE": target.namespace}}),
        );
        state.selection = Some(selection);
        t += ms(10);
        transition(&mut events, t, Phase::Selecting, Phase::Gating, None);
        if stops_at(Phase::Gating) {
            break 'story (Phase::Gating, None);
        }
        let require = matches!(
            fate,
            Fate::Completed { approved: true }
                | Fate::Failed { approved: true }
                | Fate::Rejected
                | Fate::Expired
                | Fate::InFlight(Phase::AwaitingApproval)
        );
        let mut gate = template.gate.clone().expect("fixture gate");
        gate.require_approval = require;
        gate.reason = if require {
            format!(
                "{} environment: {} remediations require approval",
                o.workload.environment, o.workload.environment
            )
        } else {
            format!("{action_type} is allowed without approval here")
        };
        gate.risk_factors = vec![RiskFactor {
            score: if require { 70 } else { 20 },
            reason: gate.reason.clone(),
        }];
        t += ms(rng.random_range(2..30));
        push(
            &mut events,
            t,
            Phase::Gating,
            "gate",
            "gate",
            if require {
                format!("approval required: {}", gate.reason)
            } else {
                "approved automatically".into()
            },
            json!({
                "input": {
                    "request": {"id": o.id, "signal": o.alert, "namespace": target.namespace,
                                "environment": o.workload.environment, "priority": "P1"},
                    "target": target,
                    "workflow": {"id": workflow_id, "action_type": action_type,
                                 "version": "1.0.0", "confidence": 0.9},
                    "rca": {"severity": "critical", "confidence": 0.9,
                            "needs_human_review": false},
                    "history": {"remediations_24h": 0, "ineffective_chain": 0},
                },
                "output": {"require_approval": require, "reason": gate.reason,
                           "risk_factors": gate.risk_factors, "degraded": false},
                "policy_revision": gate.policy_revision,
            }),
        );
        state.gate = Some(gate.clone());
        auto_approved = Some(!require);
        if require {
            t += ms(5);
            transition(
                &mut events,
                t,
                Phase::Gating,
                Phase::AwaitingApproval,
                Some(&gate.reason),
            );
            let analysis = state.analysis.as_ref().expect("analysis");
            let selected = state
                .selection
                .as_ref()
                .and_then(|s| s.selected.clone())
                .expect("selected");
            let mut request = ApprovalRequest {
                id: Uuid::new_v4(),
                request_id: o.id,
                created_at: t,
                expires_at: t + chrono::Duration::minutes(15),
                signal_name: o.alert.into(),
                target: target.clone(),
                environment: Some(o.workload.environment.into()),
                summary: analysis.rca.root_cause_analysis.summary.clone(),
                evidence: analysis
                    .rca
                    .root_cause_analysis
                    .contributing_factors
                    .clone(),
                workflow_id: selected.workflow_id.clone(),
                workflow_version: selected.version.clone(),
                action_type: selected.action_type.clone(),
                parameters: selected.parameters.clone(),
                rationale: selected.rationale.clone(),
                alternatives: vec![AlternativeWorkflow {
                    workflow_id: "restart-rolling".into(),
                    rationale: "a restart clears the symptom".into(),
                }],
                confidence: selected.confidence,
                risk_score: 70,
                risk_reason: gate.reason.clone(),
                required_because: vec![gate.reason.clone()],
                policy_revision: gate.policy_revision.clone(),
                approvers: APPROVERS[..2].iter().map(|s| (*s).to_owned()).collect(),
                slack_approvers: vec![],
                proof: None,
                decision: None,
                note: None,
            };
            if stops_at(Phase::AwaitingApproval) {
                // Created through the store (with its own audit event) once this is written.
                request.created_at = seed_now - chrono::Duration::minutes(5);
                request.expires_at = seed_now + chrono::Duration::hours(12);
                pending = Some(request);
                break 'story (Phase::AwaitingApproval, Some(gate.reason.clone()));
            }
            push(
                &mut events,
                t,
                Phase::AwaitingApproval,
                "approval_requested",
                "approval",
                format!(
                    "approval {} requested from email {}, email {}; expires {}",
                    request.id,
                    request.approvers[0],
                    request.approvers[1],
                    request.expires_at.to_rfc3339()
                ),
                json!({"approval_id": request.id, "expires_at": request.expires_at,
                       "approvers": request.approvers, "risk_score": 70,
                       "policy_revision": request.policy_revision}),
            );
            let (decision, by, via, wait) = match fate {
                Fate::Expired => (
                    Decision::Expired,
                    "system".to_owned(),
                    Channel::System,
                    chrono::Duration::minutes(15),
                ),
                Fate::Rejected => (
                    Decision::Rejected,
                    APPROVERS[rng.random_range(0..4)].to_owned(),
                    Channel::Email,
                    chrono::Duration::seconds(rng.random_range(60..800)),
                ),
                _ => (
                    Decision::Approved,
                    APPROVERS[rng.random_range(0..4)].to_owned(),
                    if rng.random_bool(0.5) {
                        Channel::Email
                    } else {
                        Channel::Dashboard
                    },
                    chrono::Duration::seconds(rng.random_range(60..800)),
                ),
            };
            let notifications: Vec<Notification> = request
                .approvers
                .iter()
                .map(|to| Notification {
                    id: Uuid::new_v4(),
                    approval_id: request.id,
                    channel: Channel::Email,
                    recipient: to.clone(),
                    kind: NotificationKind::Offer,
                    status: DeliveryStatus::Delivered,
                    attempts: 1,
                    next_attempt_at: None,
                    last_error: None,
                    external_ref: None,
                    created_at: t,
                    updated_at: t + ms(800),
                })
                .collect();
            t += wait;
            let d = ApprovalDecision {
                decision,
                decided_by: by.clone(),
                decided_via: via,
                decided_at: t,
                message: (decision == Decision::Rejected)
                    .then(|| "not during the sale; page the owner instead".to_owned()),
                alternative: None,
            };
            push(
                &mut events,
                t,
                Phase::AwaitingApproval,
                "approval_decided",
                &by,
                format!("{} by {} via {}", d.decision, d.decided_by, d.decided_via),
                json!({"approval_id": request.id, "decision": d}),
            );
            request.decision = Some(d.clone());
            state.approval = Some(d);
            approval = Some((request, notifications));
            match fate {
                Fate::Rejected | Fate::Expired => {
                    let (to, reason) = if fate == Fate::Rejected {
                        (Phase::Rejected, format!("rejected by {by}"))
                    } else {
                        (Phase::Expired, "no decision before the deadline".to_owned())
                    };
                    transition(&mut events, t, Phase::AwaitingApproval, to, Some(&reason));
                    break 'story (to, Some(reason));
                }
                _ => {
                    t += ms(rng.random_range(100..2_000));
                    transition(
                        &mut events,
                        t,
                        Phase::AwaitingApproval,
                        Phase::Executing,
                        None,
                    );
                }
            }
        } else {
            t += ms(5);
            transition(&mut events, t, Phase::Gating, Phase::Executing, None);
        }
        if stops_at(Phase::Executing) {
            break 'story (Phase::Executing, None);
        }
        if fate == Fate::Blocked {
            let kind = GUARDRAILS[rng.random_range(0..GUARDRAILS.len())];
            guardrail = Some(kind);
            let reason = format!("guardrail {kind}: {target} was remediated too recently");
            t += ms(rng.random_range(5..50));
            push(
                &mut events,
                t,
                Phase::Executing,
                "guardrail",
                "executor",
                reason.clone(),
                json!({"guardrail": kind, "message": reason}),
            );
            transition(
                &mut events,
                t,
                Phase::Executing,
                Phase::Blocked,
                Some(&reason),
            );
            break 'story (Phase::Blocked, Some(reason));
        }
        let ok = !matches!(fate, Fate::Failed { .. });
        let started = t + ms(rng.random_range(5..50));
        t = started + ms(rng.random_range(100..3_000));
        let step = ExecutionStep {
            index: 1,
            action: "patch".into(),
            status: if ok {
                StepStatus::Applied
            } else {
                StepStatus::Failed
            },
            detail: if ok {
                json!({"kind": target.kind, "name": target.name, "patched": "spec.template.metadata.annotations", "generation": rng.random_range(2..400)})
            } else {
                json!({"error": "admission webhook \"policy.example.com\" denied the request: change freeze in effect"})
            },
            at: t,
        };
        push(
            &mut events,
            t,
            Phase::Executing,
            "execution_step",
            "executor",
            format!("step 1 patch {}", if ok { "applied" } else { "failed" }),
            serde_json::to_value(&step).expect("step"),
        );
        let pre = spec_hash(rng);
        let post = spec_hash(rng);
        let execution = Execution {
            workflow_id: workflow_id.into(),
            workflow_version: "1.0.0".into(),
            action_type: action_type.into(),
            engine: EngineKind::Builtin,
            target: target.clone(),
            parameters: serde_json::Map::new(),
            dry_run: false,
            pre_spec_hash: Some(pre.clone()),
            pre_drift_hash: None,
            before: None,
            post_spec_hash: ok.then(|| post.clone()),
            post_drift_hash: None,
            started_at: started,
            finished_at: t,
            steps: vec![step],
            outcome: if ok {
                ExecutionOutcome::Succeeded
            } else {
                ExecutionOutcome::Failed
            },
            message: if ok {
                format!("{workflow_id} applied to {target}")
            } else {
                format!("{workflow_id} failed at step 1 on {target}")
            },
            proposal: None,
        };
        push(
            &mut events,
            t,
            Phase::Executing,
            "execution",
            "executor",
            execution.message.clone(),
            json!({"workflow_id": workflow_id, "outcome": execution.outcome,
                   "pre_spec_hash": pre, "post_spec_hash": execution.post_spec_hash}),
        );
        state.execution = Some(execution);
        let record =
            |outcome: HistoryOutcome, score: Option<f64>, at: DateTime<Utc>| HistoryRecord {
                remediation_uid: o.id.to_string(),
                target: target.clone(),
                completed_at: at,
                signal_name: o.alert.into(),
                workflow_type: action_type.into(),
                workflow_id: workflow_id.into(),
                outcome,
                effectiveness_score: score,
                pre_remediation_spec_hash: Some(pre.clone()),
                post_remediation_spec_hash: ok.then(|| post.clone()),
                pre_remediation_drift_hash: None,
                post_remediation_drift_hash: None,
                signal_resolved: Some(ok),
                assessment_reason: Some(AssessmentReason::Full),
                health_checks: None,
            };
        if !ok {
            let reason = format!("{workflow_id} failed at step 1");
            transition(
                &mut events,
                t,
                Phase::Executing,
                Phase::Failed,
                Some(&reason),
            );
            history = Some(record(HistoryOutcome::Failed, None, t));
            break 'story (Phase::Failed, Some(reason));
        }
        transition(&mut events, t, Phase::Executing, Phase::Verifying, None);
        if stops_at(Phase::Verifying) {
            break 'story (Phase::Verifying, None);
        }
        t += chrono::Duration::seconds(300) + ms(rng.random_range(100..5_000));
        let roll = rng.random_range(0..100u32);
        let score: f64 = match roll {
            0..70 => rng.random_range(0.8..=1.0),
            70..90 => rng.random_range(0.5..0.8),
            _ => rng.random_range(0.0..0.5),
        };
        let effective = score >= 0.7;
        let assessment = Assessment {
            score: Some(score),
            health_score: Some(if effective { 1.0 } else { 0.5 }),
            alert_score: Some(if effective { 1.0 } else { 0.0 }),
            metrics_score: None,
            post_spec_hash: Some(post.clone()),
            signal_resolved: effective,
            reason: AssessmentReason::Partial,
            effective,
            details: vec![
                format!(
                    "health: {} of 3 pods ready, no restart since",
                    if effective { 3 } else { 2 }
                ),
                format!(
                    "alert: {}",
                    if effective {
                        "resolved within the window"
                    } else {
                        "still firing"
                    }
                ),
                "metrics: not configured".into(),
            ],
            assessed_at: t,
        };
        push(
            &mut events,
            t,
            Phase::Verifying,
            "assessment",
            "verifier",
            format!(
                "score {score:.2}: {}",
                if effective {
                    "effective"
                } else {
                    "not effective"
                }
            ),
            serde_json::to_value(&assessment).expect("assessment"),
        );
        state.assessment = Some(assessment);
        effectiveness = Some(score);
        let reason = if effective {
            "verified effective".to_owned()
        } else {
            format!("verified not effective (score {score:.2})")
        };
        transition(
            &mut events,
            t,
            Phase::Verifying,
            Phase::Completed,
            Some(&reason),
        );
        history = Some(record(HistoryOutcome::Completed, Some(score), t));
        (Phase::Completed, Some(reason))
    };
    // Repeats of the alert while the request ran (or after, for the ones in flight).
    let mut last_seen = o.created;
    for i in 0..extra {
        let at = if events.is_empty() {
            o.created + chrono::Duration::seconds(30 * (i as i64 + 1))
        } else {
            let span = (events[events.len() - 1].at - o.created)
                .num_milliseconds()
                .max(1);
            o.created + ms(rng.random_range(0..span))
        };
        last_seen = last_seen.max(at);
        push(
            &mut events,
            at,
            end.0,
            "occurrence",
            "alertmanager/kubemedic",
            format!("{} fired again ({} occurrences)", o.alert, i + 2),
            json!({"fingerprint": o.fingerprint, "starts_at": at, "occurrence_count": i + 2}),
        );
    }
    events.sort_by_key(|e| e.at);
    let tokens = state.analysis.as_ref().map_or(0, |a| a.usage.total())
        + state.selection.as_ref().map_or(0, |s| s.usage.total());
    let updated_at = events.last().map_or(o.created, |e| e.at);
    state.phase_entered_at = Some(updated_at);
    let terminal = end.0.is_terminal();
    Story {
        id: o.id,
        created: o.created,
        fate_row: FateRow {
            phase: end.0,
            reason: end.1,
            not_before: (!terminal).then(|| seed_now + chrono::Duration::days(365)),
            updated_at,
            tokens: tokens as i64,
            auto_approved,
            effectiveness,
            guardrail,
            finished_at: terminal.then_some(updated_at),
            occurrences: 1 + extra as i64,
            last_seen,
        },
        state,
        events,
        approval,
        history,
        pending,
    }
}

// ---------------------------------------------------------------------------------------------
// Seeding.

fn settings_for(backend: &Backend) -> Res<Settings> {
    let mut args = DaemonArgs::default();
    args.store.data_dir = Some(backend.data_dir().to_owned());
    args.store.database_url = Some(Secret::new(backend.url()));
    args.web.listen = Some("127.0.0.1:0".into());
    args.web.webhook_token = Some(Secret::new(WEBHOOK_TOKEN));
    args.web.api_token = Some(Secret::new(API_TOKEN));
    args.pipeline.workers = Some(1);
    Ok(Settings::load(&args)?)
}

async fn seed(
    cfg: &Config,
    backend: &Backend,
    store: &Arc<dyn Store>,
    db: &Db,
    key: &AuditKey,
    clock: &BenchClock,
    now: DateTime<Utc>,
) -> Res<SeedInfo> {
    let started = Instant::now();
    let template: StageState = serde_json::from_str(include_str!(
        "../tests/fixtures/stored-state/awaiting-approval.json"
    ))?;
    let mut rng = StdRng::seed_from_u64(0x6b75_6265_6d65_6469);
    let workloads = workloads();
    let begin = now - chrono::Duration::days(cfg.days);
    let batches = cfg.requests.div_ceil(BATCH);
    let span_ms = (now - begin).num_milliseconds() - 60_000;
    let in_flight_from = now - chrono::Duration::hours(IN_FLIGHT_HOURS);
    // Workloads held by a request still in flight: no later alert may name them (it would
    // join that request instead of opening one).
    let mut busy: HashSet<(usize, usize)> = HashSet::new();
    let mut pending: Vec<Story> = Vec::new();
    let mut approvals_to_create: Vec<ApprovalRequest> = Vec::new();
    let (mut opened_total, mut events_total, mut folded) = (0usize, 0u64, 0usize);
    let mut ingest_time = Duration::ZERO;
    let mut events_written = 0u64;
    let mut story_time = Duration::ZERO;
    let mut serial = 0u64;
    let mut last_report = Instant::now();
    for b in 0..batches {
        let at = begin + ms(span_ms * b as i64 / batches as i64 + rng.random_range(0..30_000));
        clock.set(at);
        let n = BATCH.min(cfg.requests - b * BATCH);
        let mut used: HashSet<(usize, usize)> = HashSet::new();
        let mut alerts = Vec::with_capacity(n);
        let mut meta = Vec::with_capacity(n);
        while alerts.len() < n {
            let ns = weighted(&mut rng, &[0usize, 1, 2, 3, 4, 5, 6, 7], |i| {
                NAMESPACES[*i].1
            });
            let w = rng.random_range(0..BASES.len() * VARIANTS.len());
            if busy.contains(&(ns, w)) || !used.insert((ns, w)) {
                continue;
            }
            let workload = workloads[ns * BASES.len() * VARIANTS.len() + w].clone();
            let (alert, _, severity, shape) = weighted(&mut rng, &ALERTS, |a| a.1);
            serial += 1;
            let fingerprint = format!("{:016x}", serial.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let starts_at = at - chrono::Duration::seconds(rng.random_range(30..600));
            let mut labels = serde_json::Map::new();
            labels.insert("alertname".into(), json!(alert));
            labels.insert("severity".into(), json!(severity));
            labels.insert("namespace".into(), json!(workload.namespace));
            labels.insert(
                if workload.kind == "StatefulSet" {
                    "statefulset".into()
                } else {
                    "deployment".into()
                },
                json!(workload.name),
            );
            labels.insert("container".into(), json!(workload.name));
            labels.insert("job".into(), json!("kube-state-metrics"));
            labels.insert("prometheus".into(), json!("monitoring/k8s"));
            if let Shape::Pod = shape {
                let pod = format!(
                    "{}-{:08x}-{:05}",
                    workload.name,
                    (serial / 500).wrapping_mul(2_654_435_761) & 0xffff_ffff,
                    serial % 100_000
                );
                labels.insert("pod".into(), json!(pod));
            }
            alerts.push(json!({
                "status": "firing",
                "labels": labels,
                "annotations": {
                    "summary": format!("{alert} on {}/{}", workload.namespace, workload.name),
                    "description": format!("{alert} has been firing for {}/{} for more than 5 minutes.", workload.namespace, workload.name),
                    "runbook_url": format!("https://runbooks.example.com/{}", alert.to_lowercase()),
                },
                "startsAt": starts_at.to_rfc3339(),
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.monitoring:9090/graph?g0.expr=ALERTS",
                "fingerprint": fingerprint,
            }));
            meta.push(((ns, w), workload, alert, fingerprint, starts_at));
        }
        let body = json!({
            "version": "4",
            "groupKey": format!("{{}}:{{batch=\"{b}\"}}"),
            "status": "firing",
            "receiver": "kubemedic",
            "groupLabels": {},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.monitoring:9093",
            "alerts": alerts,
        });
        let signals = alertmanager::parse(body.to_string().as_bytes())?;
        let t0 = Instant::now();
        let outcomes = store.ingest(&signals).await?;
        ingest_time += t0.elapsed();
        let t0 = Instant::now();
        let mut released = Vec::new();
        for (outcome, (slot, workload, alert, fingerprint, starts_at)) in
            outcomes.into_iter().zip(meta)
        {
            let IngestOutcome::Opened { request_id } = outcome else {
                folded += 1;
                continue;
            };
            opened_total += 1;
            let in_flight = at >= in_flight_from;
            let fate = roll_fate(&mut rng, in_flight);
            // Occurrences make up the events the mix leaves short of the target.
            let due = (cfg.events as u64) * opened_total as u64 / cfg.requests as u64;
            let extra = if events_total + 12 < due {
                rng.random_range(1..=4)
            } else {
                0
            };
            let o = Opened {
                id: request_id,
                created: at,
                workload,
                alert,
                fingerprint,
                starts_at,
            };
            let story = write_story(&mut rng, &template, &o, fate, extra, now);
            events_total += 1 + story.events.len() as u64 + u64::from(story.pending.is_some());
            if story.fate_row.phase.is_terminal() {
                released.push(request_id);
            } else {
                busy.insert(slot);
            }
            pending.push(story);
        }
        db.release_targets(&released).await?;
        if pending.len() >= FLUSH || b + 1 == batches {
            events_written += db.write_stories(key, &pending).await?;
            approvals_to_create.extend(pending.iter_mut().filter_map(|s| s.pending.take()));
            pending.clear();
        }
        story_time += t0.elapsed();
        if last_report.elapsed() > Duration::from_secs(15) {
            last_report = Instant::now();
            println!(
                "  [{}] seeding: {opened_total} requests, ~{events_total} events, {:.0} s",
                backend.name(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    // The approvals still waiting, through the store (each with its audit event).
    clock.set(now - chrono::Duration::minutes(5));
    for a in &approvals_to_create {
        let offers: Vec<Notification> = a
            .approvers
            .iter()
            .map(|to| Notification {
                id: Uuid::new_v4(),
                approval_id: a.id,
                channel: Channel::Email,
                recipient: to.clone(),
                kind: NotificationKind::Offer,
                status: DeliveryStatus::Delivered,
                attempts: 1,
                next_attempt_at: None,
                last_error: None,
                external_ref: None,
                created_at: a.created_at,
                updated_at: a.created_at,
            })
            .collect();
        store.create_approval(a, &offers).await?;
    }
    clock.set(now);
    if folded > 0 {
        println!(
            "  [{}] note: {folded} alerts joined an open request instead of opening one",
            backend.name()
        );
    }
    let seconds_total = started.elapsed().as_secs_f64();
    println!(
        "  [{}] seeded {opened_total} requests and {events_written} events besides `received` in {seconds_total:.0} s (ingest {:.0} s, stories {:.0} s); verifying the chain",
        backend.name(),
        ingest_time.as_secs_f64(),
        story_time.as_secs_f64()
    );
    let t0 = Instant::now();
    let report = store.verify_chain().await?;
    let seconds_verify = t0.elapsed().as_secs_f64();
    if !report.intact() {
        return Err(format!("the seeded audit chain is broken: {:?}", report.broken).into());
    }
    println!(
        "  [{}] chain intact: {} events verified in {seconds_verify:.1} s",
        backend.name(),
        report.events
    );
    let t0 = Instant::now();
    db.settle().await?;
    let seconds_settle = t0.elapsed().as_secs_f64();
    let info = SeedInfo {
        version: SEED_VERSION,
        requests: cfg.requests,
        events_target: cfg.events,
        days: cfg.days,
        now,
        requests_seeded: db.count("remediation_requests").await?,
        events_seeded: db.count("audit_events").await?,
        signals: db.count("signals").await?,
        approvals: db.count("approvals").await?,
        history: db.count("remediation_history").await?,
        seconds_ingest: ingest_time.as_secs_f64(),
        seconds_stories: story_time.as_secs_f64(),
        seconds_total,
        seconds_verify,
        seconds_settle,
        verified_events: report.events,
    };
    let value = serde_json::to_string(&info)?;
    store.setting_or_init(SEED_KEY, &|| value.clone()).await?;
    Ok(info)
}

// ---------------------------------------------------------------------------------------------
// Measurement.

struct Measured {
    name: String,
    path: String,
    samples: Vec<Duration>,
    bytes: usize,
    problems: Vec<String>,
}

impl Measured {
    fn pct(&self, p: f64) -> f64 {
        let mut v: Vec<f64> = self.samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[i.clamp(1, v.len()) - 1]
    }
}

/// What a page must show to count (a 200 with an empty table is not a measurement).
type Check = Box<dyn Fn(&str) -> Option<String> + Sync>;

struct Report {
    backend: &'static str,
    seed: SeedInfo,
    reused: bool,
    db_bytes: u64,
    pages: Vec<Measured>,
}

async fn get(client: &reqwest::Client, url: &str) -> Res<(reqwest::StatusCode, String)> {
    let r = client.get(url).bearer_auth(API_TOKEN).send().await?;
    let status = r.status();
    Ok((status, r.text().await?))
}

async fn measure(
    cfg: &Config,
    client: &reqwest::Client,
    base: &str,
    name: &str,
    paths: &[String],
    check: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Res<Measured> {
    let mut m = Measured {
        name: name.to_owned(),
        path: paths[0].clone(),
        samples: Vec::with_capacity(cfg.samples),
        bytes: 0,
        problems: Vec::new(),
    };
    for i in 0..cfg.warmup + cfg.samples {
        let path = &paths[i % paths.len()];
        let url = format!("{base}{path}");
        let t0 = Instant::now();
        let (status, body) = get(client, &url).await?;
        let took = t0.elapsed();
        if !status.is_success() {
            m.problems.push(format!("{path}: HTTP {status}"));
            continue;
        }
        if let Some(problem) = check(&body) {
            m.problems.push(format!("{path}: {problem}"));
        }
        if i >= cfg.warmup {
            m.samples.push(took);
            m.bytes = m.bytes.max(body.len());
        }
    }
    m.problems.dedup();
    Ok(m)
}

async fn bench_backend(cfg: &Config, backend: Backend) -> Res<Report> {
    let name = backend.name();
    println!("=== {name} ===");
    let settings = settings_for(&backend)?;
    let mut existing = None;
    if !cfg.reseed && backend.exists().await? {
        let db = backend.connect().await?;
        existing = match db.seed_marker().await {
            Ok(Some(info))
                if info.version == SEED_VERSION
                    && info.requests == cfg.requests
                    && info.events_target == cfg.events
                    && info.days == cfg.days =>
            {
                Some(info)
            }
            _ => None,
        };
    }
    let fresh = |why: &str| {
        println!("  [{name}] seeding a fresh database ({why}; the next run reuses it)");
    };
    let now = existing.as_ref().map_or_else(
        || DateTime::from_timestamp(Utc::now().timestamp(), 0).expect("now"),
        |i| i.now,
    );
    let clock = Arc::new(BenchClock::new(now));
    let store = match &existing {
        Some(_) => match daemon::open_store(&settings, clock.clone()).await {
            Ok(store) => {
                println!(
                    "  [{name}] reusing the seeded database in {}",
                    backend.data_dir().display()
                );
                Some(store)
            }
            // A migration changed since it was seeded (an index added to one not yet
            // released, say): the data is seeded again under the current schema.
            Err(e) => {
                fresh(&format!("the seeded one does not open: {e}"));
                existing = None;
                None
            }
        },
        None => {
            fresh(if cfg.reseed {
                "BENCH_RESEED"
            } else {
                "none seeded with these sizes"
            });
            None
        }
    };
    let reused = existing.is_some();
    let now = existing.as_ref().map_or_else(
        || DateTime::from_timestamp(Utc::now().timestamp(), 0).expect("now"),
        |i| i.now,
    );
    clock.set(now);
    let store = match store {
        Some(store) => store,
        None => {
            backend.wipe().await?;
            std::fs::create_dir_all(backend.data_dir())?;
            daemon::open_store(&settings, clock.clone()).await?
        }
    };
    let key = settings.audit_key.load()?;
    let db = backend.connect().await?;
    let seed_info = match existing {
        Some(info) => info,
        None => seed(cfg, &backend, &store, &db, &key, &clock, now).await?,
    };
    clock.set(seed_info.now);
    let db_bytes = db.size(&backend).await?;

    // The daemon on the seeded store.
    let listener = tokio::net::TcpListener::bind(settings.listen).await?;
    let shutdown = CancellationToken::new();
    let running = daemon::start_on(
        &settings,
        Components::default(),
        shutdown.clone(),
        store.clone(),
        clock.clone(),
        listener,
    )
    .await?;
    let base = format!("http://{}", running.addr);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;

    // What to visit.
    let mut rng = StdRng::seed_from_u64(42);
    let ids = db.request_ids().await?;
    let visits: Vec<String> = (0..cfg.samples + cfg.warmup)
        .map(|_| ids[rng.random_range(0..ids.len())].to_string())
        .collect();
    let deep = db
        .cursor_at((seed_info.requests_seeded * 9 / 10).max(1))
        .await?
        .expect("a cursor 90% in");
    let one = |p: &str| vec![p.to_owned()];
    let has = |needle: &'static str| {
        move |body: &str| (!body.contains(needle)).then(|| format!("no `{needle}` in the page"))
    };
    let intact = |body: &str| {
        (!body.contains("Audit chain intact"))
            .then(|| "the chain check did not say intact".to_owned())
    };
    let pages: Vec<(&str, Vec<String>, Check)> = vec![
        (
            "/requests",
            one("/requests"),
            Box::new(has("id=\"requests\"")),
        ),
        (
            "/requests?phase=Completed",
            one("/requests?phase=Completed"),
            Box::new(has("id=\"requests\"")),
        ),
        (
            "/requests?namespace&alert",
            one("/requests?namespace=payments&alert=HighErrorRate"),
            Box::new(has("id=\"requests\"")),
        ),
        (
            "/requests?before (90% deep)",
            one(&format!("/requests?before={deep}")),
            Box::new(has("id=\"requests\"")),
        ),
        (
            "/requests/{id} (random)",
            visits.iter().map(|id| format!("/requests/{id}")).collect(),
            Box::new(intact),
        ),
        (
            "/summary?period=30d",
            one("/summary?period=30d"),
            Box::new(has("<svg")),
        ),
        (
            "/summary?period=all",
            one("/summary?period=all"),
            Box::new(has("<svg")),
        ),
        ("/inbox", one("/inbox"), Box::new(has("class=\"approval\""))),
        (
            "/api/v1/requests",
            one("/api/v1/requests"),
            Box::new(has("\"next\"")),
        ),
        (
            "/api/v1/summary?period=all",
            one("/api/v1/summary?period=all"),
            Box::new(has("\"by_phase\"")),
        ),
    ];
    let mut measured = Vec::new();
    for (page, paths, check) in &pages {
        if cfg.only.as_deref().is_some_and(|o| !page.contains(o)) {
            continue;
        }
        let m = measure(cfg, &client, &base, page, paths, check.as_ref()).await?;
        println!(
            "  [{name}] {page:<32} p50 {:>7.1} ms  p95 {:>7.1} ms  max {:>7.1} ms  {:>6.1} KiB{}",
            m.pct(50.0),
            m.pct(95.0),
            m.pct(100.0),
            m.bytes as f64 / 1024.0,
            if m.problems.is_empty() {
                String::new()
            } else {
                format!("  PROBLEMS: {}", m.problems.join("; "))
            }
        );
        measured.push(m);
    }
    running.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(30), running.wait()).await;
    Ok(Report {
        backend: name,
        seed: seed_info,
        reused,
        db_bytes,
        pages: measured,
    })
}

fn print_report(cfg: &Config, r: &Report) {
    let s = &r.seed;
    println!("### {}\n", r.backend);
    println!(
        "- data: {} requests, {} audit events, {} signals, {} approvals, {} history entries over {} days; database {:.0} MiB",
        s.requests_seeded,
        s.events_seeded,
        s.signals,
        s.approvals,
        s.history,
        s.days,
        r.db_bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "- seeding{}: {:.0} s ({:.0} s in `Store::ingest`, {:.0} s writing the stories); {} {:.0} s",
        if r.reused {
            " (an earlier run; reused)"
        } else {
            ""
        },
        s.seconds_total,
        s.seconds_ingest,
        s.seconds_stories,
        if r.backend == "postgres" {
            "VACUUM ANALYZE"
        } else {
            "WAL checkpoint"
        },
        s.seconds_settle
    );
    println!(
        "- `Store::verify_chain()` over the whole trail: {} events, intact, {:.1} s",
        s.verified_events, s.seconds_verify
    );
    println!(
        "- {} requests per page after {} warm-up requests, one at a time\n",
        cfg.samples, cfg.warmup
    );
    println!("| page | p50 ms | p95 ms | max ms | body KiB | p95 ≤ 200 ms |");
    println!("|---|---|---|---|---|---|");
    for m in &r.pages {
        let p95 = m.pct(95.0);
        println!(
            "| `{}` | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            m.name,
            m.pct(50.0),
            p95,
            m.pct(100.0),
            m.bytes as f64 / 1024.0,
            if !m.problems.is_empty() {
                "problems"
            } else if p95 <= 200.0 {
                "yes"
            } else {
                "**no**"
            }
        );
    }
    for m in r.pages.iter().filter(|m| !m.problems.is_empty()) {
        println!(
            "\nproblems on {} ({}): {}",
            m.name,
            m.path,
            m.problems.join("; ")
        );
    }
    println!();
}
