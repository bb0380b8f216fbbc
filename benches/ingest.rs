//! Ingest benchmark: sustained Alertmanager webhook ingest with durable commits, on SQLite and
//! on PostgreSQL, beside the raw insert ceiling of the same database for the same rows.
//!
//! Run it with `scripts/bench-ingest` (starts a throwaway Postgres, builds in release, runs this,
//! stops Postgres); figures and analysis live in `docs/benchmarks.md`.
//!
//! For each backend it starts the real release `kubemedic serve` binary as a child process
//! (`--max-wait-seconds 0`, defaults otherwise, info-level JSON logs to a file) on a fresh database and
//! sends distinct webhook bodies over HTTP with bearer auth. Every alert has a unique
//! fingerprint and a unique `pod` label, so every alert opens a new remediation request.
//!
//! 1. Throughput, closed loop: `CONNECTIONS` connections each send one body, wait for the
//!    answer, send the next, for `SECONDS` after a short warm-up. alerts/s = alerts in 2xx
//!    answers / elapsed. Once with one alert per body (the headline), once with
//!    `ALERTS_PER_BODY` alerts per body.
//! 2. Latency, open loop: `RATE` requests/s (one alert each) for `RATE_SECONDS`, each send
//!    scheduled on a timer and timed from its *scheduled* instant (no coordinated omission).
//! 3. RSS of the daemon (`VmRSS`, `VmHWM` from /proc, and of the RSS how much is anonymous
//!    memory and how much the pages of mapped files, mostly the executable's code) when idle
//!    after start-up and after load.
//! 4. Raw insert ceiling: the four rows the ingest path writes for a new alert (`signals`,
//!    `remediation_requests`, `request_targets`, `audit_events`) written with plain INSERTs over
//!    sqlx, same durability (SQLite WAL + synchronous=FULL; Postgres synchronous_commit=on), on a
//!    fresh database whose schema comes from `kubemedic migrate`:
//!    (a) one transaction per alert, `CONNECTIONS` concurrent tasks;
//!    (b) `RAW_BATCH` alerts per transaction with as many concurrent writers as the daemon's
//!    ingest queue has (1 on SQLite, 4 on Postgres).
//!    (c) (connections / writers) alerts per transaction, the same writers: the batch the
//!    daemon's queue can form in the closed loop, to show what batch size alone costs.
//!    The ceiling the daemon is compared with is the best of the three (a batched one in
//!    practice): the daemon group-commits concurrent webhooks into one transaction, so batched
//!    commits are the shape it can reach; comparing with (a) would flatter it.
//! 5. The disk's fsync rate (8 KiB write + fdatasync, overwriting a preallocated file) in the
//!    SQLite data directory, to explain commit-bound figures.
//!
//! Environment (all optional): `KUBEMEDIC_TEST_POSTGRES_URL` (admin URL; without it Postgres is
//! skipped, loudly), `BENCH_BACKENDS` (`sqlite,postgres`), `BENCH_DIR` (where data dirs go;
//! default the system temp dir), `BENCH_CONNECTIONS` (64), `BENCH_SECONDS` (15),
//! `BENCH_WARMUP_SECONDS` (2), `BENCH_ALERTS_PER_BODY` (10), `BENCH_RATE` (500),
//! `BENCH_RATE_SECONDS` (10), `BENCH_RAW_SECONDS` (10), `BENCH_RAW_BATCH` (100),
//! `BENCH_SETTLE_SECONDS` (5), `BENCH_DRAIN_SECONDS` (180: how long to wait for the worker to
//! finish the backlog of the headline run before reading the idle RSS), `BENCH_KEEP` (keep the
//! data dirs and daemon logs), `BENCH_OTLP` (`1`: traces on, see below), `BENCH_KUBEMEDIC` (the
//! daemon to run instead of the `kubemedic` built with this bench: another side of an A/B).
//!
//! Traces (`BENCH_OTLP=1`): every daemon is started with `--otlp-endpoint` pointing at its own
//! real OTLP/HTTP receiver, `tests/otlp/receiver.py --count` (run by the Python in
//! `KUBEMEDIC_OTLP_PYTHON`, which has the `opentelemetry-proto` package; `scripts/bench-ingest`
//! provides it), which decodes every export and counts its spans by name. When the daemon has
//! stopped (its shutdown flushes the exporter), the bench sets the spans received against what
//! the daemon says it did (`kubemedic_ingest_duration_seconds_count`: committed webhook calls,
//! one `ingest` span each; `kubemedic_stage_duration_seconds_count`: stage runs, one `stage`
//! span each) and reports the spans the SDK's batch processor says it dropped (its
//! `dropped_span_count` warning at shutdown), and the receiver's CPU — counted apart from
//! "other processes" — so that a receiver that fell behind is seen, not mistaken for the
//! daemon's cost.
//!
//! Besides client-side figures it records, per phase, the CPU used by the daemon, by this load
//! generator and by the Postgres server processes (from /proc, % of one core; the machine has
//! what `nproc` says), and the daemon's own `kubemedic_ingest_duration_seconds` histogram
//! (handler start to commit; bucket bounds, so "≤ 64 ms").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::types::Json;

/// The daemon: the release `kubemedic` built with this bench, or `BENCH_KUBEMEDIC` (another
/// build kept for an A/B, run by the same bench executable).
fn bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var_os("BENCH_KUBEMEDIC")
            .filter(|v| !v.is_empty())
            .map_or_else(
                || PathBuf::from(env!("CARGO_BIN_EXE_kubemedic")),
                PathBuf::from,
            )
    })
}
const WEBHOOK_TOKEN: &str = "bench-webhook-token";
const API_TOKEN: &str = "bench-api-token";
const ALERTNAME: &str = "KubePodCrashLooping";
const NAMESPACE: &str = "bench";

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
    connections: usize,
    seconds: u64,
    warmup: u64,
    alerts_per_body: usize,
    rate: u64,
    rate_seconds: u64,
    raw_seconds: u64,
    raw_batch: usize,
    settle: u64,
    drain: u64,
    dir: PathBuf,
    /// The Python that runs the OTLP receiver, when traces are on (`BENCH_OTLP=1`).
    otlp: Option<PathBuf>,
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cfg = Config {
        connections: env_or("BENCH_CONNECTIONS", 64),
        seconds: env_or("BENCH_SECONDS", 15),
        warmup: env_or("BENCH_WARMUP_SECONDS", 2),
        alerts_per_body: env_or("BENCH_ALERTS_PER_BODY", 10),
        rate: env_or("BENCH_RATE", 500),
        rate_seconds: env_or("BENCH_RATE_SECONDS", 10),
        raw_seconds: env_or("BENCH_RAW_SECONDS", 10),
        raw_batch: env_or("BENCH_RAW_BATCH", 100),
        settle: env_or("BENCH_SETTLE_SECONDS", 5),
        drain: env_or("BENCH_DRAIN_SECONDS", 180),
        dir: std::env::var_os("BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir),
        otlp: match std::env::var("BENCH_OTLP").as_deref().map(str::trim) {
            Ok("1") => Some(
                std::env::var_os("KUBEMEDIC_OTLP_PYTHON")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        panic!(
                            "BENCH_OTLP=1 needs KUBEMEDIC_OTLP_PYTHON: a Python with the \
                             opentelemetry-proto package (scripts/bench-ingest sets it)"
                        )
                    }),
            ),
            Ok("" | "0") | Err(_) => None,
            Ok(other) => panic!("BENCH_OTLP={other}: expected 1 (traces on) or 0 (off)"),
        },
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

/// Everything measured for one backend.
#[derive(Default)]
struct Report {
    backend: String,
    fsync_per_s: Option<f64>,
    throughput_1: Option<LoadResult>,
    throughput_n: Option<LoadResult>,
    latency: Option<LoadResult>,
    raw_per_alert: Option<RawResult>,
    raw_batched: Option<RawResult>,
    raw_shaped: Option<RawResult>,
    /// (when, RSS, backend-specific note)
    rss: Vec<(String, Rss, String)>,
    drain: Option<Drain>,
    /// The backlog the N-alerts-per-body load left (ingest outruns the worker there): the
    /// worker's burst drain with nothing else running.
    drain_n: Option<Drain>,
    daemon_problems: Vec<String>,
    /// Per daemon (phase), with traces on: the spans its receiver got against the daemon's own
    /// counts.
    traces: Vec<(String, TraceTally)>,
}

async fn run(cfg: Config, backends: Vec<String>) -> Res<()> {
    let run_dir = cfg.dir.join(format!(
        "kubemedic-bench-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    std::fs::create_dir_all(&run_dir)?;
    println!("kubemedic ingest benchmark");
    println!("  binary      {}", bin().display());
    println!("  work dir    {}", run_dir.display());
    println!(
        "  closed loop {} connections, {} s (+{} s warm-up); {} alerts/body for the batch run",
        cfg.connections, cfg.seconds, cfg.warmup, cfg.alerts_per_body
    );
    println!(
        "  open loop   {} requests/s for {} s",
        cfg.rate, cfg.rate_seconds
    );
    println!(
        "  raw         {} s per mode, {} alerts per batched transaction",
        cfg.raw_seconds, cfg.raw_batch
    );
    println!(
        "  daemon      serve --max-wait-seconds 0, KUBEMEDIC_LOG_LEVEL=info (default), JSON logs to a file"
    );
    match &cfg.otlp {
        Some(python) => println!(
            "  traces      ON: --otlp-endpoint to a tests/otlp/receiver.py --count per daemon ({})",
            python.display()
        ),
        None => println!("  traces      off (no --otlp-endpoint; BENCH_OTLP=1 turns them on)"),
    }
    println!();

    let mut reports = Vec::new();
    for backend in &backends {
        let report = match backend.as_str() {
            "sqlite" => Some(bench_backend(&cfg, &run_dir, Backend::Sqlite).await?),
            "postgres" => match std::env::var("KUBEMEDIC_TEST_POSTGRES_URL") {
                Ok(admin) if !admin.is_empty() => {
                    Some(bench_backend(&cfg, &run_dir, Backend::Postgres { admin }).await?)
                }
                _ => {
                    eprintln!(
                        "\n*** SKIPPED Postgres: KUBEMEDIC_TEST_POSTGRES_URL is not set; run \
                         scripts/bench-ingest ***\n"
                    );
                    None
                }
            },
            other => return Err(format!("unknown backend `{other}`").into()),
        };
        reports.extend(report);
    }
    print_summary(&cfg, &reports);
    if std::env::var_os("BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    Ok(())
}

#[derive(Clone)]
enum Backend {
    Sqlite,
    Postgres { admin: String },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// A fresh, empty database: a new SQLite file in its own dir, or a new Postgres database.
    async fn fresh(&self, run_dir: &Path, label: &str) -> Res<Fresh> {
        let data_dir = run_dir.join(format!("{}-{label}", self.name()));
        std::fs::create_dir_all(&data_dir)?;
        let url = match self {
            Backend::Sqlite => format!("sqlite://{}", data_dir.join("kubemedic.db").display()),
            Backend::Postgres { admin } => {
                let name = format!(
                    "kmbench_{label}_{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                );
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await?;
                let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
                format!("{base}/{name}")
            }
        };
        Ok(Fresh { data_dir, url })
    }
}

struct Fresh {
    data_dir: PathBuf,
    url: String,
}

async fn bench_backend(cfg: &Config, run_dir: &Path, backend: Backend) -> Res<Report> {
    let name = backend.name();
    println!("=== {name} ===");
    let mut report = Report {
        backend: name.to_owned(),
        ..Default::default()
    };
    let alerts = Arc::new(AlertGen::new());

    // The disk's fsync rate where the data lives (SQLite dir; Postgres is on the same disk in
    // scripts/bench-ingest).
    if let Backend::Sqlite = backend {
        let probe_dir = run_dir.join("fsync-probe");
        std::fs::create_dir_all(&probe_dir)?;
        let rate = fsync_rate(&probe_dir, Duration::from_secs(3))?;
        println!("fsync probe (8 KiB pwrite + fdatasync): {rate:.0}/s");
        report.fsync_per_s = Some(rate);
    }

    // 1. Throughput, one alert per body.
    {
        let fresh = backend.fresh(run_dir, "tput1").await?;
        let daemon = Daemon::start(&backend, &fresh, cfg.otlp.as_deref()).await?;
        let idle = daemon.rss()?;
        report
            .rss
            .push(("idle after start-up".into(), idle, String::new()));
        println!(
            "daemon pid {} on {}; idle RSS {}",
            daemon.pid, daemon.base, idle
        );
        let client = http_client(cfg.connections);
        if cfg.warmup > 0 {
            closed_loop(&client, &daemon, &alerts, cfg.connections, cfg.warmup, 1).await;
        }
        let before = Probe::take(&daemon).await;
        let mut r = closed_loop(&client, &daemon, &alerts, cfg.connections, cfg.seconds, 1).await;
        r.attach(&before, &Probe::take(&daemon).await);
        println!("closed loop, 1 alert/body:   {}", r.line());
        report.rss.push((
            "right after the 1-alert closed loop".into(),
            daemon.rss()?,
            String::new(),
        ));
        let drain = daemon.drain(cfg.drain).await;
        println!("worker backlog after the load: {drain}");
        report.rss.push((
            "idle after that load, worker backlog drained".into(),
            daemon.rss()?,
            drain.to_string(),
        ));
        report.drain = Some(drain);
        report.throughput_1 = Some(r);
        daemon
            .finish("throughput, 1 alert/body", &mut report)
            .await?;
    }

    // 1b. Throughput, several alerts per body.
    if cfg.alerts_per_body > 1 {
        let fresh = backend.fresh(run_dir, "tputn").await?;
        let daemon = Daemon::start(&backend, &fresh, cfg.otlp.as_deref()).await?;
        let client = http_client(cfg.connections);
        if cfg.warmup > 0 {
            closed_loop(
                &client,
                &daemon,
                &alerts,
                cfg.connections,
                cfg.warmup,
                cfg.alerts_per_body,
            )
            .await;
        }
        let before = Probe::take(&daemon).await;
        let mut r = closed_loop(
            &client,
            &daemon,
            &alerts,
            cfg.connections,
            cfg.seconds,
            cfg.alerts_per_body,
        )
        .await;
        r.attach(&before, &Probe::take(&daemon).await);
        println!(
            "closed loop, {} alerts/body: {}",
            cfg.alerts_per_body,
            r.line()
        );
        report.throughput_n = Some(r);
        let drain = daemon.drain(cfg.drain).await;
        println!(
            "worker backlog after the {}-alert load: {drain}",
            cfg.alerts_per_body
        );
        report.drain_n = Some(drain);
        daemon
            .finish("throughput, N alerts/body", &mut report)
            .await?;
    }

    // 2. Latency at a fixed open-loop rate.
    {
        let fresh = backend.fresh(run_dir, "lat").await?;
        let daemon = Daemon::start(&backend, &fresh, cfg.otlp.as_deref()).await?;
        report.rss.push((
            "idle after start-up (open-loop daemon)".into(),
            daemon.rss()?,
            String::new(),
        ));
        let client = http_client(cfg.connections);
        let before = Probe::take(&daemon).await;
        let mut r = open_loop(&client, &daemon, &alerts, cfg.rate, cfg.rate_seconds).await;
        r.attach(&before, &Probe::take(&daemon).await);
        println!("open loop, {} req/s:        {}", cfg.rate, r.line());
        let backlog = daemon.settle(cfg.settle).await;
        report.rss.push((
            format!("{} s after the open-loop load", cfg.settle),
            daemon.rss()?,
            format!("backlog {backlog}"),
        ));
        report.latency = Some(r);
        daemon.finish("open-loop latency", &mut report).await?;
    }

    // 3. Raw insert ceiling.
    {
        let fresh = backend.fresh(run_dir, "raw1").await?;
        migrate(&fresh)?;
        let pool = RawPool::open(&backend, &fresh.url, cfg.connections).await?;
        let before = CpuSnap::take(None);
        let mut r = raw_insert(&pool, &alerts, cfg.connections, 1, cfg.raw_seconds).await?;
        r.cpu = Some(CpuSnap::take(None).share_since(&before));
        println!("raw, 1 alert/tx x{}:        {}", cfg.connections, r.line());
        report.raw_per_alert = Some(r);
        pool.close().await;
    }
    {
        let fresh = backend.fresh(run_dir, "rawb").await?;
        migrate(&fresh)?;
        let writers = match backend {
            Backend::Sqlite => 1,
            Backend::Postgres { .. } => 4,
        };
        let pool = RawPool::open(&backend, &fresh.url, writers).await?;
        let before = CpuSnap::take(None);
        let mut r = raw_insert(&pool, &alerts, writers, cfg.raw_batch, cfg.raw_seconds).await?;
        r.cpu = Some(CpuSnap::take(None).share_since(&before));
        println!(
            "raw, {} alerts/tx x{}:     {}",
            cfg.raw_batch,
            writers,
            r.line()
        );
        report.raw_batched = Some(r);
        pool.close().await;

        // (c) The batch the daemon's queue can form in the closed loop: the connections spread
        // over its writers, so it shows what the batch size alone costs against (b).
        let fresh = backend.fresh(run_dir, "raws").await?;
        migrate(&fresh)?;
        let batch = cfg.connections.div_ceil(writers).max(1);
        let pool = RawPool::open(&backend, &fresh.url, writers).await?;
        let before = CpuSnap::take(None);
        let mut r = raw_insert(&pool, &alerts, writers, batch, cfg.raw_seconds).await?;
        r.cpu = Some(CpuSnap::take(None).share_since(&before));
        println!(
            "raw, {batch} alerts/tx x{writers} (daemon-shaped): {}",
            r.line()
        );
        report.raw_shaped = Some(r);
        pool.close().await;
    }
    println!();
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// The daemon as a child process.

struct Daemon {
    child: Child,
    pid: u32,
    base: String,
    log: PathBuf,
    client: reqwest::Client,
    /// Its trace receiver, when traces are on.
    receiver: Option<Receiver>,
}

#[derive(Clone, Copy, Default)]
struct Rss {
    rss_kib: u64,
    hwm_kib: u64,
    /// Of `rss_kib`: the process's own memory (heap, stacks, relocated data) …
    anon_kib: u64,
    /// … and pages of files it maps (mostly the executable's code, shared with the page cache).
    file_kib: u64,
}

impl std::fmt::Display for Rss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} MiB (peak {:.1} MiB; anonymous {:.1}, file-backed {:.1})",
            self.rss_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0,
            self.anon_kib as f64 / 1024.0,
            self.file_kib as f64 / 1024.0
        )
    }
}

fn free_port() -> Res<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Daemon {
    async fn start(backend: &Backend, fresh: &Fresh, otlp: Option<&Path>) -> Res<Self> {
        let port = free_port()?;
        let log = fresh.data_dir.join("daemon.log");
        let receiver = match otlp {
            Some(python) => Some(Receiver::start(python, fresh.data_dir.join("spans.json"))?),
            None => None,
        };
        let mut cmd = Command::new(bin());
        // Nothing from the caller's KUBEMEDIC_* environment leaks into the daemon.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("KUBEMEDIC_") {
                cmd.env_remove(k);
            }
        }
        cmd.arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            // The worker's defaults; with no cluster a request ends in review at its first
            // step instead of waiting for one (the trivial request the drain figure counts).
            .args(["--max-wait-seconds", "0"])
            .arg("--data-dir")
            .arg(&fresh.data_dir)
            .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
            .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
            .env("KUBEMEDIC_LOG_FORMAT", "json")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        if let Backend::Postgres { .. } = backend {
            cmd.env("KUBEMEDIC_DATABASE_URL", &fresh.url);
        }
        if let Some(r) = &receiver {
            cmd.args(["--otlp-endpoint", &format!("http://127.0.0.1:{}", r.port)]);
        }
        let child = cmd.spawn()?;
        let pid = child.id();
        let mut daemon = Daemon {
            child,
            pid,
            base: format!("http://127.0.0.1:{port}"),
            log,
            client: reqwest::Client::new(),
            receiver,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = daemon.child.try_wait()? {
                let log = std::fs::read_to_string(&daemon.log).unwrap_or_default();
                return Err(format!("kubemedic serve exited with {status}:\n{log}").into());
            }
            if let Ok(r) = daemon.client.get(daemon.url("/healthz")).send().await
                && r.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err("kubemedic serve not answering /healthz after 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Let start-up allocations settle before anyone reads the idle RSS.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(daemon)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn rss(&self) -> Res<Rss> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(Rss {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
            anon_kib: field("RssAnon:"),
            file_kib: field("RssFile:"),
        })
    }

    /// Requests still runnable (the worker's backlog), from /metrics.
    async fn backlog(&self) -> Option<i64> {
        let text = self
            .client
            .get(self.url("/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let runnable = [
            "Received",
            "Enriching",
            "Investigating",
            "Selecting",
            "Gating",
            "Executing",
            "Verifying",
        ];
        let mut total = 0.0;
        for line in text
            .lines()
            .filter(|l| l.starts_with("kubemedic_requests{"))
        {
            if runnable
                .iter()
                .any(|p| line.contains(&format!("phase=\"{p}\"")))
                && let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
            {
                total += v;
            }
        }
        Some(total as i64)
    }

    /// Wait `secs` after a load; returns the worker's remaining backlog as text.
    async fn settle(&self, secs: u64) -> String {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        match self.backlog().await {
            Some(n) => n.to_string(),
            None => "unknown".into(),
        }
    }

    /// Wait (at most `cap` s) until the worker has no runnable request left.
    async fn drain(&self, cap: u64) -> Drain {
        let start = Instant::now();
        let initial = self.backlog().await;
        loop {
            let now = self.backlog().await;
            if now == Some(0) || start.elapsed() >= Duration::from_secs(cap) || now.is_none() {
                return Drain {
                    initial,
                    left: now,
                    took: start.elapsed(),
                };
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Stop the daemon and add what it logged (and, with traces on, what its receiver got) to
    /// `report`.
    async fn finish(mut self, phase: &str, report: &mut Report) -> Res<()> {
        let receiver = self.receiver.take();
        // The daemon's own counts, read last (the load is over; a few stage runs may still
        // happen before SIGTERM, and their spans are then received but not expected).
        let metrics = match &receiver {
            Some(_) => match self.client.get(self.url("/metrics")).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            },
            None => String::new(),
        };
        let log = self.log.clone();
        report.daemon_problems.extend(self.stop(phase)?);
        if let Some(receiver) = receiver {
            let tally = receiver.tally(&metrics, &log);
            println!("[{phase}] traces: {tally}");
            report.traces.push((phase.to_owned(), tally));
        }
        Ok(())
    }

    /// SIGTERM, wait for a clean exit; returns the warnings and errors the daemon logged.
    fn stop(mut self, phase: &str) -> Res<Vec<String>> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut problems = Vec::new();
        loop {
            match self.child.try_wait()? {
                Some(status) => {
                    if !status.success() {
                        problems.push(format!("[{phase}] daemon exited with {status}"));
                    }
                    break;
                }
                None if Instant::now() > deadline => {
                    problems.push(format!(
                        "[{phase}] daemon did not stop within 30 s of SIGTERM"
                    ));
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                None => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        // Count WARN/ERROR lines by message.
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut counts: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for line in log.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let level = v["level"].as_str().unwrap_or("");
            if level != "WARN" && level != "ERROR" {
                continue;
            }
            // flatten_event(true) puts fields at the top level; accept both layouts.
            let field = |name: &str| {
                v.get(name)
                    .or_else(|| v.get("fields").and_then(|f| f.get(name)))
                    .and_then(|x| x.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            let message = field("message");
            let key = format!("{level} {message}");
            let e = counts.entry(key).or_insert((0, String::new()));
            e.0 += 1;
            if e.1.is_empty() {
                e.1 = field("error");
            }
        }
        for (key, (n, example)) in counts {
            let example = if example.is_empty() {
                String::new()
            } else {
                format!(" (e.g. {example})")
            };
            problems.push(format!("[{phase}] {n} x {key}{example}"));
        }
        Ok(problems)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The trace receiver (BENCH_OTLP=1).

/// The receiver's pid while one runs, so that [`CpuSnap`] counts it apart from other work.
static RECEIVER_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `tests/otlp/receiver.py --count`: a real OTLP/HTTP receiver (protobuf, the OpenTelemetry
/// project's own definitions) that counts the spans of every export by name.
struct Receiver {
    child: Child,
    port: u16,
    counts: PathBuf,
}

/// What a receiver got, beside what the daemon says it did.
struct TraceTally {
    exports: u64,
    spans: u64,
    bytes: u64,
    ingest_spans: u64,
    stage_spans: u64,
    /// Committed webhook calls (`kubemedic_ingest_duration_seconds_count`).
    ingest_expected: Option<u64>,
    /// Stage runs (`kubemedic_stage_duration_seconds_count`, all stages).
    stage_expected: Option<u64>,
    /// What the SDK's batch processor said it dropped (0 when it said nothing).
    dropped: u64,
    receiver_cpu_s: f64,
}

impl std::fmt::Display for TraceTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
        write!(
            f,
            "{} spans in {} exports ({:.1} MiB); `ingest` {} (daemon committed {} webhook calls), \
             `stage` {} (daemon ran {} stages); dropped by the batch processor: {}; receiver \
             CPU {:.1} s",
            self.spans,
            self.exports,
            self.bytes as f64 / 1048576.0,
            self.ingest_spans,
            n(self.ingest_expected),
            self.stage_spans,
            n(self.stage_expected),
            self.dropped,
            self.receiver_cpu_s
        )
    }
}

impl Receiver {
    fn start(python: &Path, counts: PathBuf) -> Res<Self> {
        use std::io::BufRead as _;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg("--count")
            .arg(&counts)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {} {}: {e}", python.display(), script.display()))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("the receiver has no stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the OTLP receiver did not start: {line:?}").into());
        };
        RECEIVER_PID.store(child.id(), Ordering::Relaxed);
        Ok(Self {
            child,
            port,
            counts,
        })
    }

    /// Its counts, set against the daemon's `metrics` (scraped before it stopped) and the
    /// batch processor's drop report in the daemon's `log`.
    fn tally(self, metrics: &str, log: &Path) -> TraceTally {
        // The daemon has exited, its last export answered; let the receiver write its file.
        std::thread::sleep(Duration::from_millis(300));
        let counts: serde_json::Value = std::fs::read_to_string(&self.counts)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let num = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let by_prefix = |prefix: &str| -> u64 {
            counts["by_name"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| k.starts_with(prefix))
                        .map(|(_, v)| num(v))
                        .sum()
                })
                .unwrap_or(0)
        };
        let metric_sum = |name: &str| -> Option<u64> {
            let mut found = None;
            for line in metrics.lines() {
                if let Some(rest) = line.strip_prefix(name)
                    && (rest.starts_with(' ') || rest.starts_with('{'))
                    && let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
                {
                    *found.get_or_insert(0) += v as u64;
                }
            }
            found
        };
        let dropped = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                v.get("dropped_span_count")
                    .or_else(|| v.get("fields").and_then(|f| f.get("dropped_span_count")))
                    .and_then(|d| d.as_u64().or_else(|| d.as_str()?.parse().ok()))
            })
            .sum();
        let receiver_cpu_s = proc_ticks(&format!("/proc/{}/stat", self.child.id()))
            .map_or(0.0, |(_, t)| t as f64 / clock_ticks());
        TraceTally {
            exports: num(&counts["exports"]),
            spans: num(&counts["spans"]),
            bytes: num(&counts["bytes"]),
            ingest_spans: by_prefix("ingest"),
            stage_spans: by_prefix("stage "),
            ingest_expected: metric_sum("kubemedic_ingest_duration_seconds_count"),
            stage_expected: metric_sum("kubemedic_stage_duration_seconds_count"),
            dropped,
            receiver_cpu_s,
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        RECEIVER_PID.store(0, Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn migrate(fresh: &Fresh) -> Res<()> {
    let out = Command::new(bin())
        .arg("migrate")
        .arg("--data-dir")
        .arg(&fresh.data_dir)
        .env("KUBEMEDIC_DATABASE_URL", &fresh.url)
        .env("KUBEMEDIC_LOG_LEVEL", "warn")
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "kubemedic migrate failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Distinct alerts.

/// Hands out alerts that are all distinct within a run: unique fingerprint, unique pod.
struct AlertGen {
    run: String,
    next: AtomicU64,
    starts_at: DateTime<Utc>,
}

struct Alert {
    fingerprint: String,
    pod: String,
}

impl AlertGen {
    fn new() -> Self {
        Self {
            run: uuid::Uuid::new_v4().simple().to_string()[..6].to_owned(),
            next: AtomicU64::new(0),
            starts_at: Utc::now() - chrono::Duration::minutes(5),
        }
    }

    fn take(&self) -> Alert {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        Alert {
            // 16 hex digits like Alertmanager's: 6 of run id, 10 of sequence.
            fingerprint: format!("{}{i:010x}", self.run),
            pod: format!("app-{}-{i}", self.run),
        }
    }

    fn starts_at_rfc3339(&self) -> String {
        self.starts_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    }

    /// An Alertmanager webhook v4 body with `n` distinct firing alerts (the shape of
    /// tests/common alert_body: namespace, pod, severity labels; a summary annotation).
    fn body(&self, n: usize) -> String {
        let starts = self.starts_at_rfc3339();
        let mut alerts = String::new();
        for k in 0..n {
            let a = self.take();
            if k > 0 {
                alerts.push(',');
            }
            let _ = write!(
                alerts,
                r#"{{"status":"firing","labels":{{"alertname":"{ALERTNAME}","namespace":"{NAMESPACE}","pod":"{pod}","severity":"warning"}},"annotations":{{"summary":"{ALERTNAME} test"}},"startsAt":"{starts}","endsAt":"0001-01-01T00:00:00Z","generatorURL":"http://prometheus.test/graph","fingerprint":"{fp}"}}"#,
                pod = a.pod,
                fp = a.fingerprint,
            );
        }
        format!(
            r#"{{"version":"4","groupKey":"{{}}:{{alertname=\"{ALERTNAME}\"}}","truncatedAlerts":0,"status":"firing","receiver":"kubemedic","groupLabels":{{}},"commonLabels":{{}},"commonAnnotations":{{}},"externalURL":"http://alertmanager.test","alerts":[{alerts}]}}"#
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Load generation.

fn http_client(connections: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("http client")
}

#[derive(Default)]
struct Tally {
    ok_requests: u64,
    ok_alerts: u64,
    opened: u64,
    statuses: BTreeMap<u16, u64>,
    errors: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.ok_requests += o.ok_requests;
        self.ok_alerts += o.ok_alerts;
        self.opened += o.opened;
        for (k, v) in o.statuses {
            *self.statuses.entry(k).or_default() += v;
        }
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        self.latencies.extend(o.latencies);
    }
}

struct LoadResult {
    elapsed: Duration,
    tally: Tally,
    /// Open loop only: requests scheduled and the rate actually offered.
    scheduled: Option<u64>,
    max_dispatch_lag: Duration,
    cpu: Option<CpuShare>,
    server: Option<ServerHist>,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

impl LoadResult {
    fn attach(&mut self, before: &Probe, after: &Probe) {
        self.cpu = Some(after.cpu.clone().share_since(&before.cpu));
        self.server = after
            .hist
            .as_ref()
            .zip(before.hist.as_ref())
            .map(|(a, b)| a.since(b));
    }
    fn alerts_per_s(&self) -> f64 {
        self.tally.ok_alerts as f64 / self.elapsed.as_secs_f64()
    }
    fn requests_per_s(&self) -> f64 {
        self.tally.ok_requests as f64 / self.elapsed.as_secs_f64()
    }
    fn p(&self, p: f64) -> Duration {
        pct(&self.tally.latencies, p)
    }
    fn max(&self) -> Duration {
        self.tally.latencies.last().copied().unwrap_or_default()
    }
    fn non_2xx(&self) -> u64 {
        self.tally
            .statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s))
            .map(|(_, n)| n)
            .sum::<u64>()
            + self.tally.errors.values().sum::<u64>()
    }
    fn problems(&self) -> String {
        let mut parts = Vec::new();
        for (s, n) in &self.tally.statuses {
            if !(200..300).contains(s) {
                parts.push(format!("{n} x HTTP {s}"));
            }
        }
        for (e, n) in &self.tally.errors {
            parts.push(format!("{n} x {e}"));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
    fn line(&self) -> String {
        format!(
            "{:.0} alerts/s, {:.0} req/s in 2xx ({} ok requests, {} alerts, {} opened) in {:.1} s; \
             latency p50 {} ms p99 {} ms max {} ms; failures: {}{}",
            self.alerts_per_s(),
            self.requests_per_s(),
            self.tally.ok_requests,
            self.tally.ok_alerts,
            self.tally.opened,
            self.elapsed.as_secs_f64(),
            ms(self.p(50.0)),
            ms(self.p(99.0)),
            ms(self.max()),
            self.problems(),
            match self.scheduled {
                Some(n) => format!(
                    "; {n} scheduled, max dispatch lag {} ms",
                    ms(self.max_dispatch_lag)
                ),
                None => String::new(),
            }
        ) + &self.extra()
    }
    fn extra(&self) -> String {
        let mut s = String::new();
        if let Some(h) = &self.server {
            let _ = write!(s, "\n    daemon-side ingest duration: {}", h.describe());
        }
        if let Some(c) = &self.cpu {
            let _ = write!(s, "\n    CPU: {c}");
        }
        s
    }
}

/// Send one body; record status, alerts accepted, requests opened and latency from `from`.
async fn send(
    client: &reqwest::Client,
    url: &str,
    body: String,
    alerts: usize,
    from: Instant,
    tally: &mut Tally,
) {
    let result = client
        .post(url)
        .bearer_auth(WEBHOOK_TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    match result {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            tally.latencies.push(from.elapsed());
            *tally.statuses.entry(status).or_default() += 1;
            if (200..300).contains(&status) {
                tally.ok_requests += 1;
                tally.ok_alerts += alerts as u64;
                tally.opened += text.matches(r#""outcome":"opened""#).count() as u64;
            }
        }
        Err(e) => {
            tally.latencies.push(from.elapsed());
            let kind = if e.is_timeout() {
                "timeout"
            } else if e.is_connect() {
                "connect error"
            } else {
                "transport error"
            };
            *tally.errors.entry(kind.into()).or_default() += 1;
        }
    }
}

async fn closed_loop(
    client: &reqwest::Client,
    daemon: &Daemon,
    alerts: &Arc<AlertGen>,
    connections: usize,
    seconds: u64,
    per_body: usize,
) -> LoadResult {
    let url = daemon.url("/api/v1/alerts/alertmanager");
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let client = client.clone();
        let url = url.clone();
        let alerts = alerts.clone();
        tasks.spawn(async move {
            let mut tally = Tally::default();
            while Instant::now() < deadline {
                let body = alerts.body(per_body);
                send(&client, &url, body, per_body, Instant::now(), &mut tally).await;
            }
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(t) = tasks.join_next().await {
        tally.merge(t.expect("load task"));
    }
    let elapsed = start.elapsed();
    tally.latencies.sort_unstable();
    LoadResult {
        elapsed,
        tally,
        scheduled: None,
        max_dispatch_lag: Duration::ZERO,
        cpu: None,
        server: None,
    }
}

async fn open_loop(
    client: &reqwest::Client,
    daemon: &Daemon,
    alerts: &Arc<AlertGen>,
    rate: u64,
    seconds: u64,
) -> LoadResult {
    let url = daemon.url("/api/v1/alerts/alertmanager");
    let n = rate * seconds;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let start = Instant::now() + Duration::from_millis(100);
    let mut tasks = tokio::task::JoinSet::new();
    let mut max_lag = Duration::ZERO;
    for i in 0..n {
        let scheduled = start + interval * i as u32;
        tokio::time::sleep_until(scheduled.into()).await;
        max_lag = max_lag.max(Instant::now().saturating_duration_since(scheduled));
        let client = client.clone();
        let url = url.clone();
        let body = alerts.body(1);
        tasks.spawn(async move {
            let mut tally = Tally::default();
            send(&client, &url, body, 1, scheduled, &mut tally).await;
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(t) = tasks.join_next().await {
        tally.merge(t.expect("load task"));
    }
    let elapsed = start.elapsed();
    tally.latencies.sort_unstable();
    LoadResult {
        elapsed,
        tally,
        scheduled: Some(n),
        max_dispatch_lag: max_lag,
        cpu: None,
        server: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Raw insert ceiling: the rows `Store::ingest` writes for one new alert, with plain INSERTs.

enum RawPool {
    Sqlite(sqlx::SqlitePool),
    Pg(sqlx::PgPool),
}

/// One alert's rows, as the ingest path builds them (see src/store/sql.rs ingest_once and
/// open_request): ids, the signal's labels/annotations, the request's signal context, the
/// target fingerprint (sha256 of namespace:kind:name) and the "received" audit event.
struct RawRows {
    starts_at: DateTime<Utc>,
    request_id: uuid::Uuid,
    signal_id: uuid::Uuid,
    fingerprint: String,
    pod: String,
    target_fingerprint: String,
    labels: serde_json::Value,
    annotations: serde_json::Value,
    context: serde_json::Value,
    audit_message: String,
    audit_payload: serde_json::Value,
}

const SQLITE_TS: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

fn sqlite_id(u: uuid::Uuid) -> uuid::fmt::Hyphenated {
    u.hyphenated()
}

fn pg_id(u: uuid::Uuid) -> uuid::Uuid {
    u
}

fn rows_for(source: &AlertGen, now: DateTime<Utc>) -> RawRows {
    let a = source.take();
    let labels = serde_json::json!({
        "alertname": ALERTNAME, "namespace": NAMESPACE, "pod": a.pod, "severity": "warning",
    });
    let annotations = serde_json::json!({"summary": format!("{ALERTNAME} test")});
    let target_fingerprint = {
        let mut h = Sha256::new();
        h.update(format!("{NAMESPACE}:Pod:{}", a.pod).as_bytes());
        hex::encode(h.finalize())
    };
    let target = serde_json::json!({"kind": "Pod", "name": a.pod, "namespace": NAMESPACE});
    let context = serde_json::json!({
        "fingerprint": a.fingerprint, "name": ALERTNAME, "severity": "warning",
        "mode": "reactive", "source": "alertmanager", "starts_at": source.starts_at,
        "received_at": now, "labels": labels, "annotations": annotations,
        "generator_url": "http://prometheus.test/graph",
        "external_url": "http://alertmanager.test",
    });
    let audit_payload = serde_json::json!({
        "fingerprint": a.fingerprint, "starts_at": source.starts_at, "target": target,
        "target_fingerprint": target_fingerprint, "source": "alertmanager",
    });
    RawRows {
        starts_at: source.starts_at,
        request_id: uuid::Uuid::new_v4(),
        signal_id: uuid::Uuid::new_v4(),
        audit_message: format!(
            "{ALERTNAME} (reactive) opened a request for Pod {NAMESPACE}/{}",
            a.pod
        ),
        fingerprint: a.fingerprint,
        pod: a.pod,
        target_fingerprint,
        labels,
        annotations,
        context,
        audit_payload,
    }
}

const GROUP_KEY: &str = "{}:{alertname=\"KubePodCrashLooping\"}";

/// The same rows and binds on both databases (only id and time encodings differ), one
/// multi-row INSERT per table (`QueryBuilder` spells the parameters `?` on SQLite and `$N` on
/// Postgres): the way the store writes a batch on SQLite. On Postgres the store binds arrays
/// instead (ADR 0019); these fixed-size statements are prepared once per connection as its
/// are, so this stays the plain-insert ceiling.
macro_rules! write_rows {
    ($tx:expr, $db:ty, $rows:expr, $id:expr, $ts:expr, $starts:expr) => {{
        let rows: &[RawRows] = $rows;
        let mut q = sqlx::QueryBuilder::<$db>::new(
            "INSERT INTO request_targets (fingerprint, request_id, active) ",
        );
        q.push_values(rows, |mut b, r| {
            b.push_bind(&r.target_fingerprint)
                .push_bind($id(r.request_id))
                .push_bind(true);
        });
        q.build().execute(&mut *$tx).await?;
        let mut q = sqlx::QueryBuilder::<$db>::new(
            "INSERT INTO remediation_requests (id, phase, reason, active, target_kind, \
             target_name, target_namespace, target_fingerprint, signal_name, severity, \
             signal_mode, signal, occurrence_count, first_seen, last_seen, created_at, \
             updated_at, attempts, state) ",
        );
        q.push_values(rows, |mut b, r| {
            b.push_bind($id(r.request_id))
                .push_bind("Received")
                .push_bind(None::<String>)
                .push_bind(true)
                .push_bind("Pod")
                .push_bind(&r.pod)
                .push_bind(NAMESPACE)
                .push_bind(&r.target_fingerprint)
                .push_bind(ALERTNAME)
                .push_bind("warning")
                .push_bind("reactive")
                .push_bind(Json(&r.context))
                .push_bind(1i64)
                .push_bind($ts)
                .push_bind($ts)
                .push_bind($ts)
                .push_bind($ts)
                .push_bind(0i32)
                .push_bind(Json(serde_json::json!({})));
        });
        q.build().execute(&mut *$tx).await?;
        let mut q = sqlx::QueryBuilder::<$db>::new(
            "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload) ",
        );
        q.push_values(rows, |mut b, r| {
            b.push_bind($id(r.request_id))
                .push_bind($ts)
                .push_bind("Received")
                .push_bind("received")
                .push_bind("alertmanager/kubemedic")
                .push_bind(&r.audit_message)
                .push_bind(Json(&r.audit_payload));
        });
        q.build().execute(&mut *$tx).await?;
        let mut q = sqlx::QueryBuilder::<$db>::new(
            "INSERT INTO signals (id, fingerprint, starts_at, status, ends_at, name, severity, \
             mode, source, labels, annotations, generator_url, receiver, group_key, \
             target_kind, target_name, target_namespace, target_fingerprint, request_id, \
             received_at, resolved_at) ",
        );
        q.push_values(rows, |mut b, r| {
            b.push_bind($id(r.signal_id))
                .push_bind(&r.fingerprint)
                .push_bind($starts(r))
                .push_bind("firing")
                .push("NULL")
                .push_bind(ALERTNAME)
                .push_bind("warning")
                .push_bind("reactive")
                .push_bind("alertmanager")
                .push_bind(Json(&r.labels))
                .push_bind(Json(&r.annotations))
                .push_bind("http://prometheus.test/graph")
                .push_bind("kubemedic")
                .push_bind(GROUP_KEY)
                .push_bind("Pod")
                .push_bind(&r.pod)
                .push_bind(NAMESPACE)
                .push_bind(&r.target_fingerprint)
                .push_bind($id(r.request_id))
                .push_bind($ts)
                .push("NULL");
        });
        q.build().execute(&mut *$tx).await?;
    }};
}

impl RawPool {
    /// The same connection settings as the store's writer (src/store/sqlite.rs, postgres.rs):
    /// on SQLite one connection with the store's `wal_autocheckpoint`; on Postgres at least
    /// `connections` connections.
    async fn open(backend: &Backend, url: &str, connections: usize) -> Res<Self> {
        use std::str::FromStr;
        Ok(match backend {
            Backend::Sqlite => {
                use sqlx::sqlite::{
                    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
                };
                let options = SqliteConnectOptions::from_str(url)?
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .busy_timeout(Duration::from_secs(10))
                    .foreign_keys(true)
                    .pragma("wal_autocheckpoint", "2000");
                RawPool::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(1)
                        .connect_with(options)
                        .await?,
                )
            }
            Backend::Postgres { .. } => {
                let options = sqlx::postgres::PgConnectOptions::from_str(url)?;
                RawPool::Pg(
                    sqlx::postgres::PgPoolOptions::new()
                        .max_connections(connections.max(16) as u32)
                        .acquire_timeout(Duration::from_secs(30))
                        .connect_with(options)
                        .await?,
                )
            }
        })
    }

    async fn close(&self) {
        match self {
            RawPool::Sqlite(p) => p.close().await,
            RawPool::Pg(p) => p.close().await,
        }
    }

    /// Commit `rows` in one transaction.
    async fn commit(&self, rows: &[RawRows]) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        match self {
            RawPool::Sqlite(pool) => {
                let ts = now.format(SQLITE_TS).to_string();
                let starts = |r: &RawRows| r.starts_at.format(SQLITE_TS).to_string();
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                write_rows!(tx, sqlx::Sqlite, rows, sqlite_id, ts.clone(), starts);
                tx.commit().await
            }
            RawPool::Pg(pool) => {
                let starts = |r: &RawRows| r.starts_at;
                let mut tx = pool.begin().await?;
                write_rows!(tx, sqlx::Postgres, rows, pg_id, now, starts);
                tx.commit().await
            }
        }
    }
}

struct RawResult {
    elapsed: Duration,
    alerts: u64,
    transactions: u64,
    errors: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
    writers: usize,
    batch: usize,
    cpu: Option<CpuShare>,
}

impl RawResult {
    fn alerts_per_s(&self) -> f64 {
        self.alerts as f64 / self.elapsed.as_secs_f64()
    }
    fn line(&self) -> String {
        format!(
            "{:.0} alerts/s ({} alerts/tx x {} writers: {} alerts in {} tx, {:.1} s; commit p50 {} ms \
             p99 {} ms; errors: {})",
            self.alerts_per_s(),
            self.batch,
            self.writers,
            self.alerts,
            self.transactions,
            self.elapsed.as_secs_f64(),
            ms(pct(&self.latencies, 50.0)),
            ms(pct(&self.latencies, 99.0)),
            if self.errors.is_empty() {
                "none".to_owned()
            } else {
                format!("{:?}", self.errors)
            }
        ) + &self
            .cpu
            .as_ref()
            .map(|c| format!("\n    CPU: {c}"))
            .unwrap_or_default()
    }
}

async fn raw_insert(
    pool: &RawPool,
    alerts: &Arc<AlertGen>,
    writers: usize,
    batch: usize,
    seconds: u64,
) -> Res<RawResult> {
    let pool = Arc::new(match pool {
        RawPool::Sqlite(p) => RawPool::Sqlite(p.clone()),
        RawPool::Pg(p) => RawPool::Pg(p.clone()),
    });
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..writers {
        let pool = pool.clone();
        let alerts = alerts.clone();
        tasks.spawn(async move {
            let mut done = (0u64, 0u64, BTreeMap::<String, u64>::new(), Vec::new());
            while Instant::now() < deadline {
                let now = Utc::now();
                let rows: Vec<RawRows> = (0..batch).map(|_| rows_for(&alerts, now)).collect();
                let t = Instant::now();
                match pool.commit(&rows).await {
                    Ok(()) => {
                        done.0 += batch as u64;
                        done.1 += 1;
                        done.3.push(t.elapsed());
                    }
                    Err(e) => *done.2.entry(e.to_string()).or_default() += 1,
                }
            }
            done
        });
    }
    let mut result = RawResult {
        elapsed: Duration::ZERO,
        alerts: 0,
        transactions: 0,
        errors: BTreeMap::new(),
        latencies: Vec::new(),
        writers,
        batch,
        cpu: None,
    };
    while let Some(t) = tasks.join_next().await {
        let (a, tx, errors, lat) = t?;
        result.alerts += a;
        result.transactions += tx;
        for (k, v) in errors {
            *result.errors.entry(k).or_default() += v;
        }
        result.latencies.extend(lat);
    }
    result.elapsed = start.elapsed();
    result.latencies.sort_unstable();
    Ok(result)
}

// ---------------------------------------------------------------------------------------------
// CPU and the daemon's own latency histogram.

struct Drain {
    initial: Option<i64>,
    left: Option<i64>,
    took: Duration,
}

impl std::fmt::Display for Drain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |v: Option<i64>| v.map_or("?".to_owned(), |v| v.to_string());
        match (self.initial, self.left) {
            (Some(i), Some(0)) => write!(
                f,
                "backlog {i} drained in {:.1} s ({:.0} requests/s by the worker)",
                self.took.as_secs_f64(),
                i as f64 / self.took.as_secs_f64().max(0.001)
            ),
            _ => write!(
                f,
                "backlog {} -> {} after {:.0} s",
                n(self.initial),
                n(self.left),
                self.took.as_secs_f64()
            ),
        }
    }
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// utime + stime of one process, in clock ticks.
fn proc_ticks(stat_path: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
    Some((
        comm,
        f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    ))
}

#[derive(Clone)]
struct CpuSnap {
    at: Instant,
    daemon: u64,
    me: u64,
    postgres: u64,
    /// The trace receiver (BENCH_OTLP=1), 0 without one.
    receiver: u64,
    /// Busy ticks of the whole machine (all CPUs), from /proc/stat.
    machine: u64,
    /// The daemon's threads by name (tokio-runtime-w, sqlx-sqlite-wor…), summed.
    daemon_threads: BTreeMap<String, u64>,
}

#[derive(Clone)]
struct CpuShare {
    daemon: f64,
    me: f64,
    postgres: f64,
    receiver: f64,
    /// Everything else running on the machine meanwhile (other users' builds and tests).
    other: f64,
    daemon_threads: Vec<(String, f64)>,
}

impl std::fmt::Display for CpuShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "daemon {:.0}%, load generator/bench {:.0}%, postgres {:.0}%, other processes {:.0}% \
             (100% = one core)",
            self.daemon, self.me, self.postgres, self.other
        )?;
        if self.receiver > 0.0 {
            write!(f, ", OTLP receiver {:.0}%", self.receiver)?;
        }
        let busy: Vec<String> = self
            .daemon_threads
            .iter()
            .filter(|(_, p)| *p >= 1.0)
            .map(|(name, p)| format!("{name} {p:.0}%"))
            .collect();
        if !busy.is_empty() {
            write!(f, "; daemon threads: {}", busy.join(", "))?;
        }
        Ok(())
    }
}

impl CpuSnap {
    fn take(daemon: Option<u32>) -> Self {
        let mut postgres = 0;
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.bytes().all(|b| b.is_ascii_digit())
                    && let Some((comm, t)) = proc_ticks(&format!("/proc/{name}/stat"))
                    && comm == "postgres"
                {
                    postgres += t;
                }
            }
        }
        let mut daemon_threads = BTreeMap::new();
        if let Some(pid) = daemon
            && let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task"))
        {
            for e in dir.flatten() {
                let stat = e.path().join("stat");
                if let Some((comm, t)) = proc_ticks(&stat.to_string_lossy()) {
                    // Numbered threads (sqlx-sqlite-worker-3) count under one name.
                    let name = comm
                        .trim_end_matches(|c: char| c.is_ascii_digit())
                        .to_owned();
                    *daemon_threads.entry(name).or_default() += t;
                }
            }
        }
        // cpu  user nice system idle iowait irq softirq steal ...
        let machine = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| {
                let line = s.lines().next()?.to_owned();
                let f: Vec<u64> = line
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|v| v.parse().ok())
                    .collect();
                let get = |i: usize| f.get(i).copied().unwrap_or(0);
                Some(get(0) + get(1) + get(2) + get(5) + get(6) + get(7))
            })
            .unwrap_or(0);
        CpuSnap {
            at: Instant::now(),
            machine,
            daemon_threads,
            daemon: daemon
                .and_then(|p| proc_ticks(&format!("/proc/{p}/stat")))
                .map_or(0, |(_, t)| t),
            me: proc_ticks("/proc/self/stat").map_or(0, |(_, t)| t),
            postgres,
            receiver: match RECEIVER_PID.load(Ordering::Relaxed) {
                0 => 0,
                pid => proc_ticks(&format!("/proc/{pid}/stat")).map_or(0, |(_, t)| t),
            },
        }
    }

    fn share_since(&self, before: &CpuSnap) -> CpuShare {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let pct = |a: u64, b: u64| a.saturating_sub(b) as f64 / clock_ticks() / wall * 100.0;
        let mut daemon_threads: Vec<(String, f64)> = self
            .daemon_threads
            .iter()
            .map(|(name, &t)| {
                let b = before.daemon_threads.get(name).copied().unwrap_or(0);
                (name.clone(), pct(t, b))
            })
            .collect();
        daemon_threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let daemon = pct(self.daemon, before.daemon);
        let me = pct(self.me, before.me);
        let postgres = pct(self.postgres, before.postgres);
        // A receiver started after `before` (a new daemon's) counts from zero.
        let receiver = if self.receiver >= before.receiver {
            pct(self.receiver, before.receiver)
        } else {
            pct(self.receiver, 0)
        };
        let other =
            (pct(self.machine, before.machine) - daemon - me - postgres - receiver).max(0.0);
        CpuShare {
            daemon_threads,
            daemon,
            me,
            postgres,
            receiver,
            other,
        }
    }
}

/// The daemon's `kubemedic_ingest_duration_seconds` histogram: (upper bound, cumulative count).
#[derive(Clone)]
struct ServerHist {
    buckets: Vec<(f64, u64)>,
}

impl ServerHist {
    fn parse(metrics: &str) -> Option<Self> {
        let mut buckets = Vec::new();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix("kubemedic_ingest_duration_seconds_bucket{") else {
                continue;
            };
            let le = rest.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let count = rest.rsplit(' ').next()?.parse::<f64>().ok()? as u64;
            buckets.push((le, count));
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        (!buckets.is_empty()).then_some(Self { buckets })
    }

    fn since(&self, before: &ServerHist) -> ServerHist {
        ServerHist {
            buckets: self
                .buckets
                .iter()
                .map(|&(le, n)| {
                    let b = before
                        .buckets
                        .iter()
                        .find(|(l, _)| *l == le)
                        .map_or(0, |(_, n)| *n);
                    (le, n.saturating_sub(b))
                })
                .collect(),
        }
    }

    fn total(&self) -> u64 {
        self.buckets.last().map_or(0, |(_, n)| *n)
    }

    /// The smallest bucket bound holding at least `p`% of observations.
    fn bound(&self, p: f64) -> String {
        let need = (self.total() as f64 * p / 100.0).ceil() as u64;
        let le = self
            .buckets
            .iter()
            .find(|(_, n)| *n >= need)
            .map_or(f64::INFINITY, |(le, _)| *le);
        if le.is_infinite() {
            "> largest bucket".into()
        } else {
            format!("≤ {} ms", le * 1000.0)
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} observations, p50 {}, p99 {}",
            self.total(),
            self.bound(50.0),
            self.bound(99.0)
        )
    }
}

/// CPU counters and the daemon's histogram at one instant.
struct Probe {
    cpu: CpuSnap,
    hist: Option<ServerHist>,
}

impl Probe {
    async fn take(daemon: &Daemon) -> Probe {
        let hist = match daemon.client.get(daemon.url("/metrics")).send().await {
            Ok(r) => r.text().await.ok().and_then(|t| ServerHist::parse(&t)),
            Err(_) => None,
        };
        Probe {
            cpu: CpuSnap::take(Some(daemon.pid)),
            hist,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// fsync probe.

/// 8 KiB sequential overwrites of a preallocated 16 MiB file, each followed by fdatasync (what
/// a WAL commit costs at best), for `for_how_long`. Returns fsyncs per second.
fn fsync_rate(dir: &Path, for_how_long: Duration) -> Res<f64> {
    use std::io::{Seek, SeekFrom};
    let path = dir.join("fsync-probe.bin");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let block = vec![0x5au8; 8192];
    const SIZE: u64 = 16 << 20;
    for _ in 0..(SIZE / 8192) {
        f.write_all(&block)?;
    }
    f.sync_all()?;
    let start = Instant::now();
    let mut n = 0u64;
    let mut offset = 0u64;
    while start.elapsed() < for_how_long {
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(&block)?;
        f.sync_data()?;
        n += 1;
        offset = (offset + 8192) % SIZE;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

// ---------------------------------------------------------------------------------------------
// Summary.

fn print_summary(cfg: &Config, reports: &[Report]) {
    let mut out = String::new();
    let _ = writeln!(out, "=== summary ===");
    let _ = writeln!(
        out,
        "| measure | {} |",
        reports
            .iter()
            .map(|r| r.backend.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(reports.len()));
    let row = |out: &mut String, name: &str, f: &dyn Fn(&Report) -> String| {
        let cells: Vec<String> = reports.iter().map(f).collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    };
    let opt = |v: Option<String>| v.unwrap_or_else(|| "—".into());
    let fsync = reports.iter().find_map(|r| r.fsync_per_s);
    row(
        &mut out,
        &format!("ingest, 1 alert/body, {} conns: alerts/s", cfg.connections),
        &|r| {
            opt(r
                .throughput_1
                .as_ref()
                .map(|t| format!("{:.0}", t.alerts_per_s())))
        },
    );
    row(&mut out, "… latency p50 / p99 / max (ms)", &|r| {
        opt(r
            .throughput_1
            .as_ref()
            .map(|t| format!("{} / {} / {}", ms(t.p(50.0)), ms(t.p(99.0)), ms(t.max()))))
    });
    row(&mut out, "… non-2xx or failed requests", &|r| {
        opt(r.throughput_1.as_ref().map(|t| t.non_2xx().to_string()))
    });
    row(
        &mut out,
        &format!(
            "ingest, {} alerts/body, {} conns: alerts/s",
            cfg.alerts_per_body, cfg.connections
        ),
        &|r| {
            opt(r
                .throughput_n
                .as_ref()
                .map(|t| format!("{:.0}", t.alerts_per_s())))
        },
    );
    row(&mut out, "… non-2xx or failed requests", &|r| {
        opt(r.throughput_n.as_ref().map(|t| t.non_2xx().to_string()))
    });
    row(
        &mut out,
        &format!(
            "raw insert, 1 alert/tx, {} concurrent: alerts/s",
            cfg.connections
        ),
        &|r| {
            opt(r
                .raw_per_alert
                .as_ref()
                .map(|t| format!("{:.0}", t.alerts_per_s())))
        },
    );
    row(
        &mut out,
        &format!(
            "raw insert, {} alerts/tx (writers as the daemon): alerts/s",
            cfg.raw_batch
        ),
        &|r| {
            opt(r
                .raw_batched
                .as_ref()
                .map(|t| format!("{:.0} (x{})", t.alerts_per_s(), t.writers)))
        },
    );
    row(
        &mut out,
        "raw insert, connections/writers alerts/tx (daemon-shaped): alerts/s",
        &|r| {
            opt(r
                .raw_shaped
                .as_ref()
                .map(|t| format!("{:.0} ({}/tx x{})", t.alerts_per_s(), t.batch, t.writers)))
        },
    );
    row(
        &mut out,
        "ingest (1 alert/body) / ceiling (best raw row)",
        &|r| {
            let ceiling = [&r.raw_per_alert, &r.raw_batched, &r.raw_shaped]
                .iter()
                .filter_map(|x| x.as_ref().map(RawResult::alerts_per_s))
                .fold(0.0, f64::max);
            opt(r
                .throughput_1
                .as_ref()
                .filter(|_| ceiling > 0.0)
                .map(|t| format!("{:.2}", t.alerts_per_s() / ceiling)))
        },
    );
    row(
        &mut out,
        &format!(
            "open loop {} req/s x {} s: p50 / p99 / max (ms)",
            cfg.rate, cfg.rate_seconds
        ),
        &|r| {
            opt(r
                .latency
                .as_ref()
                .map(|t| format!("{} / {} / {}", ms(t.p(50.0)), ms(t.p(99.0)), ms(t.max()))))
        },
    );
    row(
        &mut out,
        "… achieved req/s (2xx), non-2xx or failed",
        &|r| {
            opt(r
                .latency
                .as_ref()
                .map(|t| format!("{:.0}, {}", t.requests_per_s(), t.non_2xx())))
        },
    );
    row(&mut out, "… daemon-side p99 (ingest histogram)", &|r| {
        opt(r
            .latency
            .as_ref()
            .and_then(|t| t.server.as_ref())
            .map(|h| h.bound(99.0)))
    });
    row(
        &mut out,
        "CPU during 1-alert closed loop: daemon / loadgen / postgres / other",
        &|r| {
            opt(r
                .throughput_1
                .as_ref()
                .and_then(|t| t.cpu.as_ref())
                .map(|c| {
                    format!(
                        "{:.0}% / {:.0}% / {:.0}% / {:.0}%",
                        c.daemon, c.me, c.postgres, c.other
                    )
                }))
        },
    );
    row(
        &mut out,
        "CPU during open loop: daemon / loadgen / postgres / other",
        &|r| {
            opt(r.latency.as_ref().and_then(|t| t.cpu.as_ref()).map(|c| {
                format!(
                    "{:.0}% / {:.0}% / {:.0}% / {:.0}%",
                    c.daemon, c.me, c.postgres, c.other
                )
            }))
        },
    );
    row(
        &mut out,
        "worker backlog after the 1-alert closed loop",
        &|r| opt(r.drain.as_ref().map(|d| d.to_string())),
    );
    row(
        &mut out,
        "worker backlog after the N-alert closed loop (burst drain)",
        &|r| opt(r.drain_n.as_ref().map(|d| d.to_string())),
    );
    let n_rss = reports.iter().map(|r| r.rss.len()).max().unwrap_or(0);
    for i in 0..n_rss {
        let label = reports
            .iter()
            .find_map(|r| r.rss.get(i).map(|(l, _, _)| l.clone()))
            .unwrap_or_default();
        row(&mut out, &format!("RSS: {label}"), &|r| {
            opt(r.rss.get(i).map(|(_, rss, note)| {
                if note.is_empty() || note.starts_with("backlog ") && note.contains("drained") {
                    rss.to_string()
                } else {
                    format!("{rss}, {note}")
                }
            }))
        });
    }
    // Other work on the machine (builds, tests) takes CPU and disk from the run; say where.
    let mut disturbed = Vec::new();
    for r in reports {
        let loads = [
            ("1-alert closed loop", &r.throughput_1),
            ("N-alert closed loop", &r.throughput_n),
            ("open loop", &r.latency),
        ];
        for (name, l) in loads {
            if let Some(c) = l.as_ref().and_then(|l| l.cpu.as_ref())
                && c.other > 25.0
            {
                disturbed.push(format!("{} {name} ({:.0}%)", r.backend, c.other));
            }
        }
        let raws = [
            ("raw 1/tx", &r.raw_per_alert),
            ("raw batched", &r.raw_batched),
            ("raw daemon-shaped", &r.raw_shaped),
        ];
        for (name, l) in raws {
            if let Some(c) = l.as_ref().and_then(|l| l.cpu.as_ref())
                && c.other > 25.0
            {
                disturbed.push(format!("{} {name} ({:.0}%)", r.backend, c.other));
            }
        }
    }
    if disturbed.is_empty() {
        let _ = writeln!(
            out,
            "\nno phase shared the machine with more than 25% of a core of other work"
        );
    } else {
        let _ = writeln!(
            out,
            "\nWARNING: other processes used more than 25% of a core during: {}; those figures \
             are low",
            disturbed.join(", ")
        );
    }
    if let Some(f) = fsync {
        let _ = writeln!(out, "\nfsync probe (8 KiB pwrite + fdatasync): {f:.0}/s");
    }
    if reports.iter().any(|r| !r.traces.is_empty()) {
        let _ = writeln!(
            out,
            "\ntraces ON (BENCH_OTLP=1): spans received per daemon against the daemon's own counts:"
        );
        for r in reports {
            for (phase, t) in &r.traces {
                let _ = writeln!(out, "  {} [{phase}]: {t}", r.backend);
            }
        }
    } else {
        let _ = writeln!(out, "\ntraces off");
    }
    let _ = writeln!(out, "\ndaemon warnings/errors and exit status:");
    let mut any = false;
    for r in reports {
        for p in &r.daemon_problems {
            any = true;
            let _ = writeln!(out, "  {}: {p}", r.backend);
        }
    }
    if !any {
        let _ = writeln!(out, "  none");
    }
    print!("{out}");
    let _ = std::io::stdout().flush();
}
