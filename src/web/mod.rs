//! The HTTP face of the daemon: the ingest endpoints, the JSON API, health and metrics. The only
//! module that knows axum: handlers parse and authenticate here and hand typed values to the
//! stages (`ingest`) and the store.
//!
//! One [`AppState`] holds every dependency as `Arc<dyn Trait>`; handlers never reach around it.
//! Every response carries an `x-request-id` and every log line of a request carries it too.
//! Errors become one JSON shape, `{"error": "...", "field": "..."}`; internals are logged, not
//! leaked.

pub mod api;
mod approvals;
pub mod health;
mod ingest;
mod server;

pub use server::serve;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tracing::{Instrument, debug, info_span, warn};

use crate::approval::Approvals;
use crate::clock::Clock;
use crate::ingest::IngestQueue;
use crate::readiness::Dependency;
use crate::secret::Secret;
use crate::store::Store;
use crate::telemetry::Metrics;

/// The webhook credentials (as Alertmanager's `http_config` sends them). With neither a token
/// nor basic auth, only `insecure_no_auth` lets a delivery in.
#[derive(Debug, Clone)]
pub struct WebhookAuth {
    pub token: Option<Secret>,
    pub basic: Option<(String, Secret)>,
    pub insecure_no_auth: bool,
}

/// What the server grants one client: time to send a request, and a share of the connections.
/// None of these can be turned off; a client that needs more is too slow or too many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A complete request head must arrive within this, counted from when the connection is
    /// ready for one: from the accept, and on a kept-alive connection from the end of the
    /// previous response. So it is the keep-alive idle limit too.
    pub header_timeout: Duration,
    /// A whole request body must arrive within this, counted from when the handler starts
    /// reading it (right after the head, once the caller is authenticated).
    pub body_timeout: Duration,
    /// Connections open at once; one more is accepted and closed at once.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
        }
    }
}

pub struct AppState {
    pub store: Arc<dyn Store>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    pub ingest: Arc<IngestQueue>,
    pub webhook_auth: WebhookAuth,
    pub api_token: Option<Secret>,
    pub max_body_bytes: usize,
    /// How long a client may take and how many may be connected at once.
    pub limits: HttpLimits,
    /// Outside systems whose reachability `/readyz` reports (cluster, LLM, mail…).
    pub dependencies: Vec<Arc<dyn Dependency>>,
    /// Human approvals, when approvers are configured.
    pub approvals: Option<Arc<Approvals>>,
    /// Slack's signing secret, for `POST /api/v1/slack/interactions`.
    pub slack_signing_secret: Option<Secret>,
}

impl AppState {
    /// The admin bearer token. Without one configured, nobody is authorised.
    pub fn api_authorised(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.api_token else {
            return false;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .is_some_and(|(_, given)| ct_eq(given.trim().as_bytes(), token.expose().as_bytes()))
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/v1/alerts/alertmanager", post(ingest::alertmanager))
        .route(
            "/api/v1/signals",
            post(ingest::native).get(api::list_signals),
        )
        .route("/api/v1/requests", get(api::list_requests))
        .route("/api/v1/requests/{id}", get(api::get_request))
        .route("/api/v1/history", get(api::target_history))
        .route("/api/v1/approvals", get(approvals::list))
        .route("/api/v1/approvals/{id}", get(approvals::get))
        .route("/api/v1/approvals/{id}/decision", post(approvals::decide))
        .route(
            "/api/v1/slack/interactions",
            post(approvals::slack_interaction),
        )
        .route(
            "/approvals/{id}/{decision}",
            get(approvals::link_page).post(approvals::link_submit),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .fallback(not_found)
        .layer(middleware::from_fn(request_id))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint".into())
}

/// Give every request an id (the caller's `x-request-id` if sane), put it on every log line of
/// the request through the span, and return it in the response.
async fn request_id(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let span = info_span!("http", request_id = %id, %method, %path);
    let started = Instant::now();
    let mut response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    span.in_scope(|| {
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        if status.is_server_error() || status == StatusCode::UNAUTHORIZED {
            warn!(status = status.as_u16(), ms, "request finished");
        } else {
            debug!(status = status.as_u16(), ms, "request finished");
        }
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// Constant-time comparison for credentials: both sides are hashed to 32 bytes first, so there
/// is no early return on a length mismatch and the time taken says nothing about the expected
/// value's length or content.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (x, y) = (Sha256::digest(a), Sha256::digest(b));
    let diff = x
        .iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q));
    std::hint::black_box(diff) == 0
}

/// Every error a client can see.
#[derive(Debug)]
pub enum ApiError {
    Unauthorized,
    BadRequest {
        field: Option<String>,
        message: String,
    },
    NotFound(String),
    /// The resource is in a state that refuses this (an approval already decided).
    Conflict(String),
    TooLarge(usize),
    /// The body did not arrive within the body timeout; the connection is closed.
    BodyTimeout(Duration),
    /// A body in an encoding kubemedic does not decode (gzip…).
    UnsupportedEncoding(String),
    /// The store (or another dependency) cannot serve now; the client should retry.
    Unavailable(String),
    Internal(String),
}

impl ApiError {
    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Unavailable(_) | crate::store::StoreError::Conflict => {
                warn!(error = %e, "store unavailable");
                ApiError::Unavailable("the store is unavailable; retry".into())
            }
            other => {
                tracing::error!(error = %other, "store error");
                ApiError::Internal("internal error; see the daemon's log".into())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                json!({"error": "missing or invalid credentials"}),
            ),
            ApiError::BadRequest { field, message } => (
                StatusCode::BAD_REQUEST,
                match field {
                    Some(f) => json!({"error": format!("{f}: {message}"), "field": f}),
                    None => json!({"error": message}),
                },
            ),
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, json!({"error": m})),
            ApiError::Conflict(m) => (StatusCode::CONFLICT, json!({"error": m})),
            ApiError::TooLarge(limit) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": format!("body larger than {limit} bytes")}),
            ),
            ApiError::BodyTimeout(limit) => (
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": format!(
                    "the request body did not arrive within {} s",
                    limit.as_secs()
                )}),
            ),
            ApiError::UnsupportedEncoding(e) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                json!({"field": "Content-Encoding", "error": format!(
                    "Content-Encoding `{e}` is not supported; send the body uncompressed"
                )}),
            ),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, json!({"error": m})),
            ApiError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": m})),
        };
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"kubemedic\""),
            );
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: the connection cannot carry another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::ct_eq;

    #[test]
    fn credentials_compare_by_content_whatever_their_lengths() {
        assert!(ct_eq(b"s3cret-token", b"s3cret-token"));
        assert!(!ct_eq(b"s3cret-token", b"s3cret-tokem"));
        assert!(!ct_eq(b"s3cret", b"s3cret-token"));
        assert!(!ct_eq(b"", b"s3cret-token"));
        assert!(ct_eq(b"", b""));
    }
}
