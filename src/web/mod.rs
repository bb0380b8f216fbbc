//! The HTTP face of the daemon: the ingest endpoints, the JSON API and its description, the
//! approval pages behind signed links, the dashboard (server-rendered pages with a live event
//! stream), health and metrics. The only module that knows axum: handlers parse and
//! authenticate here and hand typed values to the stages (`ingest`, approvals) and the store.
//!
//! One [`AppState`] holds every dependency as `Arc<dyn Trait>`; handlers never reach around it.
//! Every response carries an `x-request-id` and every log line of a request carries it too.
//! Errors become one JSON shape, `{"error": "...", "field": "..."}`; internals are logged, not
//! leaked.

pub mod api;
mod approvals;
pub mod auth;
mod chat;
mod events;
pub mod health;
mod ingest;
mod mcp;
mod memory;
pub mod openapi;
mod pages;
mod query;
mod review;
pub mod schema;
mod server;

pub use server::serve;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
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

/// How long a live event stream (a request's events, a chat) waits to be woken before it reads
/// the audit trail anyway, unless configured (`--event-stream-poll-seconds`). New audit events
/// wake their streams at once; this is the safety net.
pub const DEFAULT_STREAM_POLL_SECONDS: u64 = 2;

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
    /// A response write that makes no progress this long (the client reads nothing) closes
    /// the connection. Progress resets it, so a slow but steady reader is not cut, and an
    /// event stream's keep-alives go out as long as the client reads.
    pub write_timeout: Duration,
    /// Connections open at once; one more is accepted and closed at once.
    pub max_connections: usize,
}

impl HttpLimits {
    pub const DEFAULT_HEADER_TIMEOUT_SECONDS: u64 = 10;
    pub const DEFAULT_BODY_TIMEOUT_SECONDS: u64 = 30;
    pub const DEFAULT_WRITE_TIMEOUT_SECONDS: u64 = 30;
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(Self::DEFAULT_HEADER_TIMEOUT_SECONDS),
            body_timeout: Duration::from_secs(Self::DEFAULT_BODY_TIMEOUT_SECONDS),
            write_timeout: Duration::from_secs(Self::DEFAULT_WRITE_TIMEOUT_SECONDS),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

pub struct AppState {
    pub store: Arc<dyn Store>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    pub ingest: Arc<IngestQueue>,
    pub webhook_auth: WebhookAuth,
    /// Keys, sessions and the auth proxy.
    pub auth: auth::AuthSettings,
    /// Failed logins per client address.
    pub logins: auth::LoginLimiter,
    /// What the catalog page shows (the catalog the stages use), when it loads.
    pub catalog: Option<Arc<crate::live::Live<crate::catalog::Catalog>>>,
    /// The investigation playbooks, for the catalog page.
    pub playbooks: Option<Arc<crate::live::Live<crate::investigate::playbooks::Playbooks>>>,
    /// The approval policy the gate decides with, for the policy page.
    pub policy: Option<Arc<crate::policy::RegoGate>>,
    pub max_body_bytes: usize,
    /// How long a client may take and how many may be connected at once.
    pub limits: HttpLimits,
    /// How long a live event stream waits to be woken before it reads the trail anyway (see
    /// [`crate::store::TrailWatch::wait`]).
    pub stream_poll: std::time::Duration,
    /// Outside systems whose reachability `/readyz` reports (cluster, LLM, mail…).
    pub dependencies: Vec<Arc<dyn Dependency>>,
    /// Human approvals, when approvers are configured.
    pub approvals: Option<Arc<Approvals>>,
    /// Slack's signing secret, for `POST /api/v1/slack/interactions`.
    pub slack_signing_secret: Option<Secret>,
    /// The cluster the investigation reads, with its limits: the MCP server's read-only
    /// cluster tools (`/mcp`) run on it; `None` without a cluster.
    pub cluster: Option<crate::mcp::ClusterAccess>,
    /// Asking kubemedic (`/v1/chat/…`), when the daemon offers it.
    pub chat: Option<Arc<crate::chat::ChatService>>,
    /// Fires when the daemon stops: open event streams end, so the server can drain (their
    /// clients reconnect, to another replica or after the restart, where they left off).
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// The client's address, when the server knows it (always, behind [`serve`]).
pub struct Peer(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

/// The caller of a request, resolved from its credentials (see [`auth`]); `None` when anonymous.
pub struct Caller(pub Option<auth::Principal>);

impl axum::extract::FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Caller(state.principal(&parts.headers, peer).await?))
    }
}

impl Caller {
    /// The caller, if their role includes `needed`: 401 for nobody, 403 for too little.
    pub fn need(self, needed: crate::domain::Role) -> Result<auth::Principal, ApiError> {
        match self.0 {
            None => Err(ApiError::Unauthorized),
            Some(p) if p.role.allows(needed) => Ok(p),
            Some(p) => Err(ApiError::Forbidden(format!(
                "{} has role {}; this needs {needed}",
                p.subject, p.role
            ))),
        }
    }
    /// [`Caller::need`] for a request that changes something: a browser session must also
    /// send its CSRF token (`x-csrf-token`); a key needs none.
    pub fn need_to_change(
        self,
        needed: crate::domain::Role,
        headers: &axum::http::HeaderMap,
    ) -> Result<auth::Principal, ApiError> {
        let who = self.need(needed)?;
        if !who.csrf_ok(auth::csrf_header(headers)) {
            return Err(ApiError::Forbidden(
                "a browser session must send its CSRF token (x-csrf-token)".into(),
            ));
        }
        Ok(who)
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
        .route("/api/v1/requests/{id}/events", get(events::stream))
        .route("/api/v1/requests/{id}/remediate", post(review::remediate))
        .route("/api/v1/history", get(api::target_history))
        .route("/api/v1/summary", get(api::summary))
        .route("/api/v1/catalog", get(api::catalog))
        .route("/api/v1/policy", get(api::policy))
        .route("/api/v1/audit/verify", get(api::verify_audit))
        .route("/api/v1/openapi.json", get(openapi::document))
        .route("/", get(pages::home))
        .route("/login", get(pages::login_page).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/requests", get(pages::requests))
        .route("/requests/{id}", get(pages::request))
        .route("/requests/{id}/remediate", post(pages::remediate_form))
        .route("/inbox", get(pages::inbox))
        .route("/inbox/{id}", post(pages::decide))
        .route("/catalog", get(pages::catalog))
        .route("/policy", get(pages::policy))
        .route("/summary", get(pages::summary))
        .route("/history", get(pages::history))
        .route("/static/dashboard.css", get(pages::stylesheet))
        .route("/static/live.js", get(pages::live_script))
        .route("/static/ask.js", get(pages::ask_script))
        .route("/ask", get(pages::ask))
        .route("/memory", get(pages::memory).post(pages::memory_submit))
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
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/chat/stream/{session_id}", get(chat::stream))
        .route("/v1/models", get(chat::models))
        .route("/api/v1/chat/hitl/resume", post(chat::hitl_resume))
        .route("/api/v1/chat/conversations", get(chat::conversations))
        .route(
            "/api/v1/memory",
            get(memory::list).put(memory::put).delete(memory::delete),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(mcp::routes(state.clone()))
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
    let span = info_span!(
        "http",
        request_id = %id,
        %method,
        %path,
        trace_id = tracing::field::Empty
    );
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
    /// Authenticated, but the role does not allow this (or a form came without its CSRF token).
    Forbidden(String),
    /// Too many failed attempts; retry after the given seconds.
    TooManyRequests(u64),
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
            crate::store::StoreError::AuditKey(_) => {
                tracing::error!(error = %e, "cannot write the audit trail");
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
        let retry_after = match &self {
            ApiError::TooManyRequests(secs) => Some(*secs),
            _ => None,
        };
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
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, json!({"error": m})),
            ApiError::TooManyRequests(secs) => (
                StatusCode::TOO_MANY_REQUESTS,
                json!({"error": format!("too many failed attempts; retry in {secs} s")}),
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
        if let (StatusCode::TOO_MANY_REQUESTS, Some(secs)) = (status, retry_after)
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
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
