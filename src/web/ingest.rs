//! The ingest endpoints and the group-commit queue behind them.
//!
//! `POST /api/v1/alerts/alertmanager` and `POST /api/v1/signals`: authenticate (bearer and/or
//! basic, as Alertmanager's `http_config` sends them), read at most `max_body_bytes` (413)
//! within the body timeout (408, and the connection is closed),
//! parse (400 naming the field), commit (503 if the store fails, so Alertmanager retries) and
//! only then answer 200. Concurrent deliveries are committed together by the ingest queue
//! ([`crate::ingest::IngestQueue`]).

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::{Instrument as _, info, warn};

use super::{ApiError, AppState, WebhookAuth, ct_eq};
use crate::domain::NewSignal;
use crate::ingest::{self, IngestError};
use crate::store::IngestOutcome;
use crate::telemetry::{self, TRACE_TARGET};

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

pub(super) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<u8>, ApiError> {
    let limit = state.max_body_bytes;
    // A compressed body would only fail as "invalid JSON": say what is wrong instead.
    if let Some(encoding) = headers
        .get(header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty() && e != "identity")
    {
        state.metrics.signal_rejected("invalid");
        return Err(ApiError::UnsupportedEncoding(encoding));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        state.metrics.signal_rejected("too_large");
        return Err(ApiError::TooLarge(limit));
    }
    let timeout = state.limits.body_timeout;
    match tokio::time::timeout(timeout, to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes.to_vec()),
        Err(_) => {
            state.metrics.signal_rejected("timeout");
            state.metrics.http_timeout("body");
            warn!(
                seconds = timeout.as_secs(),
                "the webhook body did not arrive in time; answering 408 and closing"
            );
            Err(ApiError::BodyTimeout(timeout))
        }
        Ok(Err(_)) => {
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

/// Commit `signals` under an `ingest` span: a child of the caller's `traceparent` if it sent
/// one, and the parent of every span of the requests they open (the trace context each new
/// request stores). With tracing off the caller's context itself is stored, if any, so the
/// request keeps the caller's trace id.
async fn commit(
    state: &AppState,
    source: &'static str,
    headers: &HeaderMap,
    mut signals: Vec<NewSignal>,
    started: Instant,
) -> Result<Response, ApiError> {
    let incoming = telemetry::incoming_trace(headers);
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "ingest",
        otel.name = %format_args!("ingest {source}"),
        otel.kind = "server",
        kubemedic.source = source,
        kubemedic.signals = i64::try_from(signals.len()).unwrap_or(i64::MAX),
        kubemedic.opened = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if let Some(parent) = &incoming {
        telemetry::continue_trace(&span, parent);
    }
    let trace = telemetry::current_trace(&span).or(incoming);
    if let Some(trace) = &trace {
        // The log lines of this webhook call carry its trace id.
        tracing::Span::current().record("trace_id", tracing::field::display(trace.trace_id_hex()));
    }
    for s in &mut signals {
        s.trace = trace;
    }
    let answer = commit_traced(state, source, signals, started)
        .instrument(span.clone())
        .await;
    if answer.is_err() {
        span.record("otel.status_code", "ERROR");
    }
    answer
}

async fn commit_traced(
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
    tracing::Span::current().record(
        "kubemedic.opened",
        i64::try_from(opened).unwrap_or(i64::MAX),
    );
    info!(source, signals = n, opened, "signals committed");
    Ok((
        StatusCode::OK,
        Json(json!({"status": "accepted", "signals": n, "outcomes": outcomes})),
    )
        .into_response())
}

/// `POST /api/v1/alerts/alertmanager`
#[utoipa::path(post, path = "/api/v1/alerts/alertmanager", tag = "ingest",
    request_body(content = Object, description = "An Alertmanager webhook body (version 4)", content_type = "application/json"),
    responses((status = 200, description = "What happened to each alert (opened, occurrence, redelivery, resolved)", body = Object),
              (status = 400, description = "The body names what is wrong", body = super::schema::ErrorBody),
              (status = 401, description = "No valid credentials", body = super::schema::ErrorBody)),
    security(("webhook" = [])))]
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
    let signals = ingest::alertmanager::parse(&bytes).map_err(|e| reject_invalid(&state, e))?;
    commit(&state, "alertmanager", &headers, signals, started).await
}

/// `POST /api/v1/signals`: one native signal. Accepts the webhook credentials or an admin key.
#[utoipa::path(post, path = "/api/v1/signals", tag = "ingest",
    request_body(content = Object, description = "A native (e.g. proactive) signal", content_type = "application/json"),
    responses((status = 200, description = "Accepted", body = Object), (status = 400, description = "The body names what is wrong", body = super::schema::ErrorBody)),
    security(("webhook" = []), ("bearer" = [])))]
pub async fn native(
    State(state): State<Arc<AppState>>,
    caller: super::Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let admin = caller.0.as_ref().is_some_and(|p| {
        p.role.allows(crate::domain::Role::Admin) && p.csrf_ok(super::auth::csrf_header(&headers))
    });
    if !authorised(&state.webhook_auth, &headers) && !admin {
        state.metrics.signal_rejected("unauthorized");
        return Err(ApiError::Unauthorized);
    }
    let bytes = read_body(&state, &headers, body).await?;
    let signal =
        ingest::native::parse(&bytes, state.clock.now()).map_err(|e| reject_invalid(&state, e))?;
    commit(&state, "native", &headers, vec![signal], started).await
}
