//! The ingest endpoints and the group-commit queue behind them.
//!
//! `POST /api/v1/alerts/alertmanager` and `POST /api/v1/signals`: authenticate (bearer and/or
//! basic, as Alertmanager's `http_config` sends them), read at most `max_body_bytes` (413),
//! parse (400 naming the field), commit (503 if the store fails, so Alertmanager retries) and
//! only then answer 200. Concurrent deliveries are committed together by [`IngestQueue`]: one
//! transaction (one fsync) for whatever arrived while the previous commit was running.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{Mutex, Notify, mpsc, oneshot};
use tracing::{info, warn};

use super::{IngestError, NewSignal};
use crate::config::WebhookAuth;
use crate::store::{IngestOutcome, Store, StoreError};
use crate::web::{ApiError, AppState, ct_eq};

/// Largest number of signals committed in one transaction.
const MAX_BATCH_SIGNALS: usize = 512;

struct Job {
    signals: Vec<NewSignal>,
    reply: oneshot::Sender<Result<Vec<IngestOutcome>, String>>,
}

/// Serialises ingest commits into few transactions. SQLite gets one writer (it has one write
/// lock anyway); Postgres several.
pub struct IngestQueue {
    tx: mpsc::Sender<Job>,
}

impl IngestQueue {
    pub fn start(store: Arc<dyn Store>, writers: usize, wake: Arc<Notify>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel::<Job>(4096);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..writers.max(1) {
            let rx = rx.clone();
            let store = store.clone();
            let wake = wake.clone();
            tokio::spawn(async move { writer(rx, store, wake).await });
        }
        Arc::new(Self { tx })
    }

    /// Commit `signals`; returns once they are durable (or the store failed).
    pub async fn submit(&self, signals: Vec<NewSignal>) -> Result<Vec<IngestOutcome>, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Job { signals, reply })
            .await
            .map_err(|_| "ingest queue is shut down".to_owned())?;
        answer
            .await
            .map_err(|_| "ingest writer stopped before answering".to_owned())?
    }
}

async fn writer(rx: Arc<Mutex<mpsc::Receiver<Job>>>, store: Arc<dyn Store>, wake: Arc<Notify>) {
    loop {
        let mut jobs = Vec::new();
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut n = first.signals.len();
            jobs.push(first);
            while n < MAX_BATCH_SIGNALS {
                match rx.try_recv() {
                    Ok(job) => {
                        n += job.signals.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
        }
        let all: Vec<NewSignal> = jobs
            .iter()
            .flat_map(|j| j.signals.iter().cloned())
            .collect();
        match store.ingest(&all).await {
            Ok(outcomes) => {
                let mut rest = outcomes.into_iter();
                for job in jobs {
                    let mine: Vec<_> = rest.by_ref().take(job.signals.len()).collect();
                    let _ = job.reply.send(Ok(mine));
                }
            }
            Err(e) if jobs.len() > 1 => {
                // Do not let one delivery fail its neighbours: commit each on its own.
                warn!(error = %e, jobs = jobs.len(), "batched ingest failed; retrying one by one");
                for job in jobs {
                    let result = store.ingest(&job.signals).await.map_err(describe);
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                let message = e.to_string();
                for job in jobs {
                    let _ = job.reply.send(Err(message.clone()));
                }
            }
        }
        wake.notify_one();
    }
}

fn describe(e: StoreError) -> String {
    e.to_string()
}

/// Check the webhook credentials. With both a token and basic auth configured, either works.
pub fn authorised(auth: &WebhookAuth, headers: &HeaderMap) -> bool {
    if auth.token.is_none() && auth.basic.is_none() {
        return auth.insecure_no_auth;
    }
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    if let (Some(token), Some(given)) = (&auth.token, strip_scheme(value, "Bearer")) {
        return ct_eq(given.as_bytes(), token.expose().as_bytes());
    }
    if let (Some((user, pass)), Some(given)) = (&auth.basic, strip_scheme(value, "Basic")) {
        use base64::Engine as _;
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(given.trim()) else {
            return false;
        };
        let expected = format!("{user}:{}", pass.expose());
        return ct_eq(&decoded, expected.as_bytes());
    }
    false
}

fn strip_scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (given, rest) = value.split_once(' ')?;
    given.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Vec<u8>, ApiError> {
    let limit = state.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        state.metrics.signal_rejected("too_large");
        return Err(ApiError::TooLarge(limit));
    }
    match to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(_) => {
            state.metrics.signal_rejected("too_large");
            Err(ApiError::TooLarge(limit))
        }
    }
}

fn reject_invalid(state: &AppState, e: IngestError) -> ApiError {
    state.metrics.signal_rejected("invalid");
    warn!(field = %e.field, error = %e.message, "rejected webhook body");
    ApiError::BadRequest {
        field: Some(e.field),
        message: e.message,
    }
}

async fn commit(
    state: &AppState,
    source: &str,
    signals: Vec<NewSignal>,
    started: Instant,
) -> Result<Response, ApiError> {
    let n = signals.len();
    let outcomes = match state.ingest.submit(signals).await {
        Ok(o) => o,
        Err(e) => {
            state.metrics.signal_rejected("store_unavailable");
            warn!(error = %e, "cannot commit signals; answering 503 so the sender retries");
            return Err(ApiError::Unavailable(
                "the store cannot commit right now; retry".into(),
            ));
        }
    };
    for o in &outcomes {
        state.metrics.signal_received(source);
        match o {
            IngestOutcome::Redelivery { .. } => state.metrics.signal_deduplicated("redelivery"),
            IngestOutcome::Occurrence { .. } => state.metrics.signal_deduplicated("occurrence"),
            _ => {}
        }
    }
    state.metrics.observe_ingest(started.elapsed());
    let opened = outcomes
        .iter()
        .filter(|o| matches!(o, IngestOutcome::Opened { .. }))
        .count();
    info!(source, signals = n, opened, "signals committed");
    Ok((
        StatusCode::OK,
        Json(json!({"status": "accepted", "signals": n, "outcomes": outcomes})),
    )
        .into_response())
}

/// `POST /api/v1/alerts/alertmanager`
pub async fn alertmanager(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    if !authorised(&state.webhook_auth, &headers) {
        state.metrics.signal_rejected("unauthorized");
        return Err(ApiError::Unauthorized);
    }
    let bytes = read_body(&state, &headers, body).await?;
    let signals = super::alertmanager::parse(&bytes).map_err(|e| reject_invalid(&state, e))?;
    commit(&state, "alertmanager", signals, started).await
}

/// `POST /api/v1/signals`: one native signal. Accepts the webhook credentials or the API token.
pub async fn native(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    if !authorised(&state.webhook_auth, &headers) && !state.api_authorised(&headers) {
        state.metrics.signal_rejected("unauthorized");
        return Err(ApiError::Unauthorized);
    }
    let bytes = read_body(&state, &headers, body).await?;
    let signal =
        super::native::parse(&bytes, state.clock.now()).map_err(|e| reject_invalid(&state, e))?;
    commit(&state, "native", vec![signal], started).await
}
