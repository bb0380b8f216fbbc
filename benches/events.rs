//! Live event latency: how long after an audit event is appended on one store instance (one
//! replica) a reader on another instance (another replica) has it — polling the trail as the
//! live streams did before issue 31, and woken by LISTEN/NOTIFY as they are now.
//!
//! Run it with `scripts/bench-events` (starts a throwaway PostgreSQL, builds in release, runs
//! this, stops PostgreSQL); figures and analysis live in `docs/benchmarks.md`.
//!
//! Two stores, A and B, are opened on one fresh PostgreSQL database, as two replicas open it
//! (one audit key). A opens one remediation request and claims it for a day, so no worker
//! touches it. Then, per mode, a writer appends `BENCH_EVENTS` audit events to the request
//! through A (`Audit::append_audit`), one at a time, at random gaps of 50–450 ms (seeded, the
//! same on every run), after `BENCH_WARMUP` events that are not counted; a reader on B follows
//! the request's trail from its position, as the request's event stream does. An event's
//! latency is from the writer's call to `append_audit` (its commit included) to the moment the
//! reader holds the row. Modes (`BENCH_MODES`, all by default):
//!
//! - `poll` — before: read (`audit_after`), sleep 500 ms, read again (the streams' old loop);
//! - `notify` — after: read, then wait on B's bell (`watch_trail`, `TrailWatch::wait` with the
//!   default fallback of 2 s), read again (the streams' loop now);
//! - `sse` — after, end to end: the daemon (`daemon::start_on`, no stages) on store B serves
//!   `GET /api/v1/requests/{id}/events`, read over HTTP; the latency ends when the event's
//!   `data:` line has arrived;
//! - `sqlite` — for reference, one process: the `notify` loop with writer and reader on one
//!   SQLite store (the store rings its bell after its commit).
//!
//! Environment: `KUBEMEDIC_TEST_POSTGRES_URL` (admin URL; required for every mode but
//! `sqlite`), `BENCH_MODES` (`poll,notify,sse,sqlite`), `BENCH_EVENTS` (200), `BENCH_WARMUP`
//! (10).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed assumption fails the run

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use kubemedic::clock::{Clock, SystemClock};
use kubemedic::config::{DaemonArgs, Settings};
use kubemedic::daemon::{self, Components};
use kubemedic::domain::{AuditDraft, NewSignal, SignalMode, SignalSource, SignalStatus, Target};
use kubemedic::secret::Secret;
use kubemedic::store::Store;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Both replicas sign the one audit chain with this key.
const AUDIT_KEY: &str = "be0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0cbe0c";
const API_TOKEN: &str = "bench-events-token";
/// The streams' poll interval before issue 31 (`src/web/events.rs`, `POLL`).
const OLD_POLL: Duration = Duration::from_millis(500);
/// Audit events read per poll, as the streams read them.
const BATCH: i64 = 200;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let modes: Vec<String> = std::env::var("BENCH_MODES")
        .unwrap_or_else(|_| "poll,notify,sse,sqlite".into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let events = env_or("BENCH_EVENTS", 200);
    let warmup = env_or("BENCH_WARMUP", 10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = runtime.block_on(async move {
        match run(&modes, events, warmup).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("bench failed: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}

async fn run(modes: &[String], events: usize, warmup: usize) -> Res<()> {
    println!("kubemedic live event latency benchmark");
    println!(
        "  {events} audit events per mode after {warmup} warm-up events, appended one at a time \
         at random gaps of 50-450 ms"
    );
    println!();
    let mut rows = Vec::new();
    for mode in modes {
        // The state directory (SQLite's database; nothing on Postgres, the key is given).
        let dir = tempfile::tempdir()?;
        let (a, b, url) = match mode.as_str() {
            "sqlite" => {
                let url = format!("sqlite://{}", dir.path().join("km.db").display());
                // One process: writer and reader share the store.
                let store = open(&url, dir.path()).await?;
                (store.clone(), store, url)
            }
            "poll" | "notify" | "sse" => {
                let Ok(admin) = std::env::var("KUBEMEDIC_TEST_POSTGRES_URL") else {
                    eprintln!(
                        "*** SKIPPED {mode}: KUBEMEDIC_TEST_POSTGRES_URL is not set; run \
                         scripts/bench-events ***"
                    );
                    continue;
                };
                let url = fresh_database(&admin).await?;
                let a = open(&url, dir.path()).await?;
                let b = open(&url, dir.path()).await?;
                (a, b, url)
            }
            other => return Err(format!("unknown mode `{other}`").into()),
        };
        rows.push(measure(mode, a, b, &url, dir.path(), events, warmup).await?);
    }
    println!("\n## Summary\n");
    println!("| mode | events | p50 ms | p95 ms | max ms | append p50 ms |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            r.mode,
            r.latencies.len(),
            pct(&r.latencies, 50.0),
            pct(&r.latencies, 95.0),
            pct(&r.latencies, 100.0),
            pct(&r.appends, 50.0),
        );
    }
    Ok(())
}

/// The store on `url`, as the daemon opens it (with the shared audit key).
async fn open(url: &str, data_dir: &std::path::Path) -> Res<Arc<dyn Store>> {
    let settings = settings(url, data_dir)?;
    Ok(daemon::open_store(&settings, Arc::new(SystemClock)).await?)
}

fn settings(url: &str, data_dir: &std::path::Path) -> Res<Settings> {
    let mut args = DaemonArgs::default();
    args.store.database_url = Some(Secret::new(url));
    args.store.audit_key = Some(Secret::new(AUDIT_KEY));
    args.store.data_dir = Some(data_dir.to_owned());
    args.web.listen = Some("127.0.0.1:0".into());
    args.web.api_token = Some(Secret::new(API_TOKEN));
    args.web.webhook_token = Some(Secret::new("bench-events-webhook"));
    Ok(Settings::load(&args)?)
}

async fn fresh_database(admin: &str) -> Res<String> {
    let name = format!("km_bench_events_{}", Uuid::new_v4().simple());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(admin).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await?;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
    Ok(format!("{base}/{name}"))
}

fn signal() -> NewSignal {
    let target = Target::new("Deployment", "checkout", Some("shop".to_owned()));
    let fingerprint = target.fingerprint();
    let mut labels = BTreeMap::new();
    labels.insert("alertname".to_owned(), "PodCrash".to_owned());
    labels.insert("namespace".to_owned(), "shop".to_owned());
    NewSignal {
        fingerprint: Uuid::new_v4().simple().to_string(),
        starts_at: Utc::now(),
        ends_at: None,
        status: SignalStatus::Firing,
        name: "PodCrash".to_owned(),
        severity: Some("critical".into()),
        mode: SignalMode::Reactive,
        source: SignalSource::Alertmanager,
        labels,
        annotations: BTreeMap::new(),
        generator_url: None,
        receiver: Some("kubemedic".to_owned()),
        group_key: None,
        external_url: None,
        target_aliases: vec![fingerprint.clone()],
        requested: None,
        trace: None,
        target: Some(target),
        target_fingerprint: fingerprint,
    }
}

struct Row {
    mode: String,
    /// From the writer's call to the reader holding the row, per counted event.
    latencies: Vec<Duration>,
    /// The writer's `append_audit` calls (the commit on A).
    appends: Vec<Duration>,
}

/// When the writer started each append (by event index).
type Started = Arc<Mutex<Vec<Option<Instant>>>>;

async fn measure(
    mode: &str,
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
    url: &str,
    data_dir: &std::path::Path,
    events: usize,
    warmup: usize,
) -> Res<Row> {
    let total = warmup + events;
    let request = a.ingest(&[signal()]).await?[0]
        .request_id()
        .ok_or("no request opened")?;
    // No worker (the daemon's in `sse`) takes the request from here.
    let claimed = a
        .claim_batch("bench-writer", Duration::from_secs(86_400), 1)
        .await?;
    if claimed.iter().all(|r| r.id != request) {
        return Err("the request was not claimed for the bench".into());
    }
    let after = a
        .audit_after(request, 0, BATCH)
        .await?
        .last()
        .map_or(0, |e| e.id);
    let started: Started = Arc::new(Mutex::new(vec![None; total]));
    let seen: Arc<Mutex<Vec<Option<Duration>>>> = Arc::new(Mutex::new(vec![None; total]));
    // What the reader holds, by event index: the latency from its append's start.
    let record = {
        let started = started.clone();
        let seen = seen.clone();
        move |message: &str| {
            let Some(i) = message
                .strip_prefix("bench event ")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                return;
            };
            let at = started.lock().unwrap()[i];
            if let Some(t0) = at {
                seen.lock().unwrap()[i].get_or_insert(t0.elapsed());
            }
        }
    };
    let done = CancellationToken::new();

    let mut daemon = None;
    let reader = match mode {
        "poll" => tokio::spawn(poll_reader(b.clone(), request, after, record, done.clone())),
        "notify" | "sqlite" => {
            let watch = b.watch_trail();
            wait_live(b.as_ref()).await?;
            tokio::spawn(notify_reader(
                b.clone(),
                watch,
                request,
                after,
                record,
                done.clone(),
            ))
        }
        "sse" => {
            let settings = settings(url, data_dir)?;
            let listener = tokio::net::TcpListener::bind(settings.listen).await?;
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            let running = daemon::start_on(
                &settings,
                Components::default(),
                CancellationToken::new(),
                b.clone(),
                clock,
                listener,
            )
            .await?;
            let base = format!("http://{}", running.addr);
            daemon = Some(running);
            let response = reqwest::Client::new()
                .get(format!(
                    "{base}/api/v1/requests/{request}/events?after={after}"
                ))
                .bearer_auth(API_TOKEN)
                .send()
                .await?;
            if response.status() != 200 {
                return Err(format!("the event stream answered {}", response.status()).into());
            }
            // The stream took B's watcher: its listener is starting.
            wait_live(b.as_ref()).await?;
            tokio::spawn(sse_reader(response, record, done.clone()))
        }
        other => return Err(format!("unknown mode `{other}`").into()),
    };

    // The writer, on A.
    let mut rng = StdRng::seed_from_u64(31);
    let mut appends = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..=450))).await;
        let t0 = Instant::now();
        started.lock().unwrap()[i] = Some(t0);
        a.append_audit(
            Some(request),
            None,
            &AuditDraft::new("note", "bench-writer", format!("bench event {i}")),
        )
        .await?;
        appends.push(t0.elapsed());
    }
    // The reader has a few seconds to catch up with the last events (a poll, a fallback).
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().iter().any(Option::is_none) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.cancel();
    let _ = reader.await;
    if let Some(running) = daemon {
        running.shutdown();
        let _ = running.wait().await;
    }
    let seen = seen.lock().unwrap().clone();
    let missing = seen.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        return Err(format!("{mode}: the reader never saw {missing} of {total} events").into());
    }
    let latencies: Vec<Duration> = seen.into_iter().skip(warmup).flatten().collect();
    let row = Row {
        mode: mode.to_owned(),
        latencies,
        appends: appends.into_iter().skip(warmup).collect(),
    };
    println!(
        "  [{mode:<6}] p50 {:>6.1} ms  p95 {:>6.1} ms  max {:>6.1} ms  (append p50 {:.1} ms)",
        pct(&row.latencies, 50.0),
        pct(&row.latencies, 95.0),
        pct(&row.latencies, 100.0),
        pct(&row.appends, 50.0)
    );
    Ok(row)
}

/// Until the store's watchers are woken (Postgres: its listener listens).
async fn wait_live(store: &dyn Store) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store.trail_bell().live {
        if Instant::now() > deadline {
            return Err("the store's listener never listened".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Read the trail after `at`, hand every message to `record`; the new position.
async fn read(
    store: &dyn Store,
    request: Uuid,
    at: i64,
    record: &(impl Fn(&str) + Send + Sync),
) -> i64 {
    match store.audit_after(request, at, BATCH).await {
        Ok(rows) => {
            for e in &rows {
                record(&e.message);
            }
            rows.last().map_or(at, |e| e.id)
        }
        Err(e) => {
            eprintln!("read failed: {e}");
            at
        }
    }
}

/// The streams' loop before issue 31: read, sleep 500 ms.
async fn poll_reader(
    store: Arc<dyn Store>,
    request: Uuid,
    mut at: i64,
    record: impl Fn(&str) + Send + Sync,
    done: CancellationToken,
) {
    while !done.is_cancelled() {
        at = read(store.as_ref(), request, at, &record).await;
        tokio::select! {
            () = tokio::time::sleep(OLD_POLL) => {}
            () = done.cancelled() => {}
        }
    }
}

/// The streams' loop now: read, wait on the bell (fallback: the default 2 s).
async fn notify_reader(
    store: Arc<dyn Store>,
    mut watch: kubemedic::store::TrailWatch,
    request: Uuid,
    mut at: i64,
    record: impl Fn(&str) + Send + Sync,
    done: CancellationToken,
) {
    let fallback = Duration::from_secs(kubemedic::web::DEFAULT_STREAM_POLL_SECONDS);
    while !done.is_cancelled() {
        at = read(store.as_ref(), request, at, &record).await;
        tokio::select! {
            _ = watch.wait(Some(request), fallback) => {}
            () = done.cancelled() => {}
        }
    }
}

/// The daemon's event stream over HTTP: each `data:` line's message.
async fn sse_reader(
    mut response: reqwest::Response,
    record: impl Fn(&str) + Send + Sync,
    done: CancellationToken,
) {
    let mut buffer = String::new();
    loop {
        let chunk = tokio::select! {
            c = response.chunk() => c,
            () = done.cancelled() => return,
        };
        let Ok(Some(chunk)) = chunk else { return };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.strip_prefix("data:")
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(data.trim())
                && let Some(m) = v.get("message").and_then(|m| m.as_str())
            {
                record(m);
            }
        }
    }
}

/// The `p`th percentile (nearest rank) in milliseconds.
fn pct(samples: &[Duration], p: f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(i.clamp(1, v.len()) - 1).copied().unwrap_or(f64::NAN)
}
