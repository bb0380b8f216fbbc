//! Shared test helpers: real components found through the environment the test script sets
//! up, an in-process daemon on a real port, and fixtures.
#![allow(dead_code)]

pub mod browser;
pub mod incident;
pub mod kube;
pub mod llm;
pub mod node;
pub mod otlp;
pub mod proofs;
pub mod propose;
pub mod scenarios;
pub mod undo;
pub mod unseen;

use std::path::PathBuf;
use std::sync::Arc;

use kubemedic::clock::{Clock, SystemClock};
use kubemedic::config::{DaemonArgs, Settings, StoreArgs};
use kubemedic::daemon::{self, Components, Running};
use kubemedic::secret::Secret;
use kubemedic::store::Store;
use tokio_util::sync::CancellationToken;

pub const WEBHOOK_TOKEN: &str = "test-webhook-token";
pub const API_TOKEN: &str = "test-api-token";

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    kubemedic::telemetry::init_logging(
        kubemedic::telemetry::LogFormat::Text,
        &std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".into()),
    );
}

/// A real component the test script should have started. On a laptop a missing one is a loud
/// skip; with `CI=true` it is a failure.
pub fn component(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => unavailable(what, &format!("{var} unset")),
    }
}

/// A component that is set up but does not work (`why`): the same loud skip on a laptop and
/// failure in CI as a missing one.
pub fn unavailable<T>(what: &str, why: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{what} is required in CI but is not available ({why}); run the tests with scripts/test"
        );
    }
    eprintln!("\n*** SKIPPED: {what} not available ({why}). Run scripts/test to start it. ***\n");
    None
}

pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh, empty Postgres database on the test server, as a URL.
pub async fn fresh_postgres() -> Option<String> {
    let admin = component("KUBEMEDIC_TEST_POSTGRES_URL", "PostgreSQL")?;
    let name = format!("km_{}", uuid::Uuid::new_v4().simple());
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .expect("connect to test postgres");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    Some(format!("{base}/{name}"))
}

pub enum Backend {
    Sqlite,
    Postgres,
}

/// An SQLite file in a temp dir, kept alive by the returned guard.
pub fn sqlite_url() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("km.db").display());
    (dir, url)
}

pub async fn open_store(url: &str, clock: Arc<dyn Clock>) -> Arc<dyn Store> {
    let settings = Settings::load(&DaemonArgs {
        store: StoreArgs {
            database_url: Some(Secret::new(url)),
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("settings");
    daemon::open_store(&settings, clock)
        .await
        .expect("open store")
}

pub struct TestDaemon {
    pub base: String,
    pub running: Option<Running>,
    pub store: Arc<dyn Store>,
    pub client: reqwest::Client,
    /// The watch-backed view its investigations read, when it has one.
    pub cache: Option<Arc<kubemedic::cluster::WatchCache>>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDaemon {
    /// A daemon on SQLite with default settings plus `tweak`, on a free loopback port.
    pub async fn start(tweak: impl FnOnce(&mut DaemonArgs)) -> Self {
        Self::start_with(tweak, Components::default(), None).await
    }

    /// The daemon as `kubemedic serve` assembles it (`daemon::serve_components`), on its own
    /// store, with the settings `tweak` makes.
    pub async fn serving(tweak: impl FnOnce(&mut DaemonArgs)) -> Self {
        Self::start_inner(tweak, None, None).await
    }

    pub async fn start_with(
        tweak: impl FnOnce(&mut DaemonArgs),
        components: Components,
        store_override: Option<Arc<dyn Store>>,
    ) -> Self {
        Self::start_inner(tweak, Some(components), store_override).await
    }

    async fn start_inner(
        tweak: impl FnOnce(&mut DaemonArgs),
        components: Option<Components>,
        store_override: Option<Arc<dyn Store>>,
    ) -> Self {
        init();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = DaemonArgs::default();
        args.store.data_dir = Some(dir.path().to_owned());
        args.web.listen = Some("127.0.0.1:0".into());
        args.web.webhook_token = Some(Secret::new(WEBHOOK_TOKEN));
        args.web.api_token = Some(Secret::new(API_TOKEN));
        args.pipeline.lease_seconds = Some(2);
        tweak(&mut args);
        let settings = Settings::load(&args).expect("settings");
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let store = match store_override {
            Some(s) => s,
            None => daemon::open_store(&settings, clock.clone())
                .await
                .expect("store"),
        };
        let components = match components {
            Some(c) => c,
            None => daemon::serve_components(&settings, store.clone()).await,
        };
        let cache = components.cache.clone();
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .expect("bind");
        let running = daemon::start_on(
            &settings,
            components,
            CancellationToken::new(),
            store.clone(),
            clock,
            listener,
        )
        .await
        .expect("daemon");
        Self {
            base: format!("http://{}", running.addr),
            running: Some(running),
            store,
            client: reqwest::Client::new(),
            cache,
            _dir: Some(dir),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// POST a webhook body with the right bearer token.
    pub async fn send_alertmanager(&self, body: &str) -> reqwest::Response {
        self.client
            .post(self.url("/api/v1/alerts/alertmanager"))
            .bearer_auth(WEBHOOK_TOKEN)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .expect("send")
    }

    pub async fn api(&self, path: &str) -> serde_json::Value {
        let r = self
            .client
            .get(self.url(path))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .expect("api");
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.expect("json")
    }

    /// Poll the API until `check` holds (or panic after `secs`).
    pub async fn eventually<F>(&self, path: &str, secs: u64, check: F) -> serde_json::Value
    where
        F: Fn(&serde_json::Value) -> bool,
    {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let v = self.api(path).await;
            if check(&v) {
                return v;
            }
            if std::time::Instant::now() > deadline {
                panic!("condition not met within {secs}s; last answer: {v:#}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Stop, keeping the data directory (the store, the keys) for a daemon started after.
    pub async fn stop_keeping_data(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.shutdown();
            r.wait().await.expect("clean stop");
        }
        self._dir.take().expect("a data directory")
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown();
            r.wait().await.expect("clean stop");
        }
    }
}

/// An Alertmanager webhook body with one alert.
pub fn alert_body(
    status: &str,
    alertname: &str,
    labels: &[(&str, &str)],
    fingerprint: &str,
    starts_at: &str,
) -> String {
    let mut all: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String((*v).to_owned())))
        .collect();
    all.insert("alertname".into(), alertname.into());
    let ends_at = if status == "resolved" {
        "2030-01-01T00:00:00Z"
    } else {
        "0001-01-01T00:00:00Z"
    };
    serde_json::json!({
        "version": "4",
        "groupKey": "{}:{alertname=\"x\"}",
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "kubemedic",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.test",
        "alerts": [{
            "status": status,
            "labels": all,
            "annotations": {"summary": format!("{alertname} test")},
            "startsAt": starts_at,
            "endsAt": ends_at,
            "generatorURL": "http://prometheus.test/graph",
            "fingerprint": fingerprint,
        }]
    })
    .to_string()
}

/// An enrichment stage whose cluster never answers: requests stay active (waiting in
/// `Enriching`), so tests about one-active-request-per-target are not racing the worker.
pub struct Stall;

#[async_trait::async_trait]
impl kubemedic::domain::Stage for Stall {
    fn phase(&self) -> kubemedic::domain::Phase {
        kubemedic::domain::Phase::Enriching
    }
    async fn run(
        &self,
        _: &kubemedic::domain::RemediationRequest,
    ) -> Result<kubemedic::domain::StageOutcome, kubemedic::domain::StageError> {
        Err(kubemedic::domain::StageError::Unavailable {
            dependency: "cluster".into(),
            message: "not reachable in this test".into(),
        })
    }
}

pub fn stalled() -> Components {
    Components {
        stages: vec![Arc::new(Stall)],
        ..Default::default()
    }
}

/// A stored API key of `role`, as `kubemedic apikey create` makes one; returns the key.
pub async fn create_key(store: &dyn Store, role: kubemedic::domain::Role, name: &str) -> String {
    let key = kubemedic::web::auth::new_key();
    let record = kubemedic::domain::ApiKey {
        id: uuid::Uuid::new_v4(),
        name: name.into(),
        role,
        prefix: kubemedic::web::auth::key_prefix(&key),
        created_at: chrono::Utc::now(),
        created_by: "test".into(),
        revoked_at: None,
    };
    store
        .create_api_key(&record, &kubemedic::web::auth::digest(&key))
        .await
        .expect("store the key");
    key
}
