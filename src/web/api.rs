//! The read API: requests with their audit timeline, signals, history. Any role may read.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::query::{MAX_LIMIT, paging, reject_unknown, request_filter};
use super::{ApiError, AppState, Caller};
use crate::domain::Role;
use crate::domain::Severity;
use crate::domain::{Phase, RemediationRequest, SignalStatus};
use crate::store::SignalFilter;

/// A request as the list shows it.
#[derive(Serialize)]
pub struct RequestSummary<'a> {
    id: Uuid,
    phase: Phase,
    reason: Option<&'a str>,
    target: Option<&'a crate::domain::Target>,
    target_fingerprint: &'a str,
    signal_name: &'a str,
    severity: Option<&'a str>,
    signal_mode: crate::domain::SignalMode,
    occurrence_count: i64,
    first_seen: chrono::DateTime<chrono::Utc>,
    last_seen: chrono::DateTime<chrono::Utc>,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
    waiting: Option<&'a crate::domain::Waiting>,
    trace_id: String,
    traceparent: String,
}

impl<'a> From<&'a RemediationRequest> for RequestSummary<'a> {
    fn from(r: &'a RemediationRequest) -> Self {
        Self {
            id: r.id,
            phase: r.phase,
            reason: r.reason.as_deref(),
            target: r.target.as_ref(),
            target_fingerprint: &r.target_fingerprint,
            signal_name: &r.signal.name,
            severity: r.signal.severity.as_ref().map(Severity::as_str),
            signal_mode: r.signal.mode,
            occurrence_count: r.occurrence_count,
            first_seen: r.first_seen,
            last_seen: r.last_seen,
            created_at: r.created_at,
            updated_at: r.updated_at,
            waiting: r.state.waiting.as_ref(),
            trace_id: r.trace.trace_id_hex(),
            traceparent: r.trace.traceparent(),
        }
    }
}

/// `GET /api/v1/requests?phase=&namespace=&target=&alert=&since=&until=&before=&limit=`: newest
/// first; `next` continues the list (pass it as `before`).
#[utoipa::path(get, path = "/api/v1/requests", tag = "requests",
    params(
        ("phase" = Option<String>, Query, description = "A phase, e.g. `AwaitingApproval`, `Completed`"),
        ("namespace" = Option<String>, Query, description = "The target's namespace"),
        ("target" = Option<String>, Query, description = "The alert target's name"),
        ("alert" = Option<String>, Query, description = "The alert (signal) name"),
        ("since" = Option<String>, Query, description = "Created at or after (RFC 3339, or a date)"),
        ("until" = Option<String>, Query, description = "Created before (RFC 3339, or a date)"),
        ("before" = Option<String>, Query, description = "The previous page's `next`"),
        ("limit" = Option<i64>, Query, description = "Items per page, 0..=500 (default 50)"),
    ),
    responses(
        (status = 200, description = "Newest first; `next` continues the list", body = super::schema::RequestList),
        (status = 400, description = "A filter is malformed", body = super::schema::ErrorBody),
        (status = 401, description = "No valid credentials", body = super::schema::ErrorBody),
    ),
    security(("bearer" = []), ("session" = [])))]
pub async fn list_requests(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    let filter = request_filter(&q)?;
    let page = state.store.list_requests(&filter).await?;
    let items: Vec<RequestSummary> = page.items.iter().map(RequestSummary::from).collect();
    Ok(Json(
        json!({"items": items, "next": page.next.map(|c| c.encode())}),
    ))
}

/// `GET /api/v1/requests/{id}`: the request, its stage results, its signals and its timeline.
#[utoipa::path(get, path = "/api/v1/requests/{id}", tag = "requests",
    params(("id" = String, Path, description = "The request's id (a UUID)")),
    responses(
        (status = 200, description = "The request with its stage results (`state`, including what was proven at selection and before the first write), its signals and its audit timeline", body = super::schema::RequestDetail),
        (status = 404, description = "No such request", body = super::schema::ErrorBody),
    ),
    security(("bearer" = []), ("session" = [])))]
pub async fn get_request(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::bad("id", "not a UUID"))?;
    let Some(request) = state.store.get_request(id).await? else {
        return Err(ApiError::NotFound(format!("no remediation request {id}")));
    };
    let timeline = state.store.audit_trail(id).await?;
    let signals = state
        .store
        .list_signals(&SignalFilter {
            request_id: Some(id),
            limit: MAX_LIMIT,
            ..Default::default()
        })
        .await?;
    let mut body = serde_json::to_value(RequestSummary::from(&request))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Value::Object(map) = &mut body {
        map.insert("signal".into(), json!(request.signal));
        map.insert("state".into(), json!(request.state));
        map.insert("signals".into(), json!(signals.items));
        map.insert("timeline".into(), json!(timeline));
    }
    Ok(Json(body))
}

/// `GET /api/v1/signals?status=&namespace=&request_id=&limit=&offset=`
#[utoipa::path(get, path = "/api/v1/signals", tag = "signals",
    params(
        ("status" = Option<String>, Query, description = "`firing` or `resolved`"),
        ("namespace" = Option<String>, Query),
        ("request_id" = Option<String>, Query),
        ("limit" = Option<i64>, Query), ("offset" = Option<i64>, Query),
    ),
    responses((status = 200, description = "Signals as received, newest first", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn list_signals(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    reject_unknown(
        &q,
        &["status", "namespace", "request_id", "limit", "offset"],
    )?;
    let status = match q.get("status") {
        None => None,
        Some(s) => Some(
            SignalStatus::parse(s)
                .ok_or_else(|| ApiError::bad("status", "expected `firing` or `resolved`"))?,
        ),
    };
    let request_id = match q.get("request_id") {
        None => None,
        Some(r) => Some(Uuid::parse_str(r).map_err(|_| ApiError::bad("request_id", "not a UUID"))?),
    };
    let (limit, offset) = paging(&q)?;
    let page = state
        .store
        .list_signals(&SignalFilter {
            status,
            namespace: q.get("namespace").cloned(),
            request_id,
            limit,
            offset,
        })
        .await?;
    Ok(Json(json!({"total": page.total, "items": page.items})))
}

/// `GET /api/v1/history?kind=&name=&namespace=`: the remediation history of one target — the
/// entries of the last 90 days, oldest first, and the tiered context the next investigation of
/// the target will read (against the spec hash of its latest remediation).
#[utoipa::path(get, path = "/api/v1/history", tag = "requests",
    params(("kind" = String, Query), ("name" = String, Query), ("namespace" = Option<String>, Query)),
    responses((status = 200, description = "The target's remediations of the last 90 days and the tiered context the next investigation reads", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn target_history(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    reject_unknown(&q, &["kind", "name", "namespace"])?;
    let kind = q
        .get("kind")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::bad("kind", "required, e.g. Deployment"))?;
    let name = q
        .get("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad("name", "required"))?;
    let target =
        crate::domain::Target::new(kind.clone(), name.clone(), q.get("namespace").cloned());
    let now = state.clock.now();
    let records = state
        .store
        .history(&target.fingerprint(), now - crate::history::HISTORY_WINDOW)
        .await?;
    let current = records
        .last()
        .and_then(|r| r.post_remediation_spec_hash.clone());
    let context = crate::history::build_context(
        &target,
        crate::history::CurrentSpec::of(current.as_deref()),
        &records,
        now,
    );
    let warnings = crate::history::warnings(&context);
    Ok(Json(json!({
        "target": target,
        "total": records.len(),
        "items": records,
        "context": context,
        "warnings": warnings,
    })))
}

/// `GET /api/v1/summary?period=1d|7d|30d|all`: the summary page's figures.
#[utoipa::path(get, path = "/api/v1/summary", tag = "summary",
    params(("period" = Option<String>, Query, description = "`1d`, `7d` (default), `30d` or `all`")),
    responses((status = 200, description = "Requests by phase, auto-approved share, median time to remediation, effectiveness bins, tokens per day, guardrail blocks", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn summary(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    reject_unknown(&q, &["period"])?;
    let (period, since) =
        super::query::period_since(q.get("period").map(String::as_str), state.clock.now())?;
    let s = state.store.summary(since).await?;
    let mut body = serde_json::to_value(&s).map_err(|e| ApiError::Internal(e.to_string()))?;
    body["period"] = json!(period);
    Ok(Json(body))
}

/// `GET /api/v1/catalog`: action types, workflows with their parameters, and playbooks.
#[utoipa::path(get, path = "/api/v1/catalog", tag = "configuration",
    responses((status = 200, description = "Action types, workflows with their parameter schemas, playbooks", body = Object),
              (status = 503, description = "The catalog did not load", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn catalog(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    let Some(c) = state.catalog.as_ref().map(|c| c.get()) else {
        return Err(ApiError::Unavailable(
            "the catalog did not load; see the daemon's log".into(),
        ));
    };
    let books = state.playbooks.as_ref().map(|p| p.get());
    let playbooks: Vec<&crate::investigate::playbooks::PlaybookSpec> = books
        .iter()
        .flat_map(|p| p.all().iter().map(|b| &b.spec))
        .collect();
    Ok(Json(json!({
        "action_types": c.action_types(),
        "workflows": c.workflows(),
        "playbooks": playbooks,
    })))
}

/// `GET /api/v1/policy`: the approval policy as loaded, with its revision.
#[utoipa::path(get, path = "/api/v1/policy", tag = "configuration",
    responses((status = 200, description = "The loaded approval policy: revision (sha256), directory, state, sources", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn policy(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    match super::query::policy_view(&state) {
        Some(v) => Ok(Json(json!(v))),
        None => Err(ApiError::NotFound("no approval policy is loaded".into())),
    }
}

/// `GET /api/v1/audit/verify[?request_id=]`: the audit chain checked, all of it (admin: it
/// reads every event) or one request's (any role).
#[utoipa::path(get, path = "/api/v1/audit/verify", tag = "audit",
    params(("request_id" = Option<String>, Query, description = "Check one request's events (any role); without it the whole chain (admin)")),
    responses((status = 200, description = "Whether the hash chain holds, and the first broken link", body = super::schema::ChainCheck),
              (status = 403, description = "The whole chain needs an admin", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn verify_audit(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    reject_unknown(&q, &["request_id"])?;
    let report = match q.get("request_id") {
        Some(r) => {
            caller.need(Role::Viewer)?;
            let id = Uuid::parse_str(r).map_err(|_| ApiError::bad("request_id", "not a UUID"))?;
            state.store.verify_request_chain(id).await?
        }
        None => {
            caller.need(Role::Admin)?;
            state.store.verify_chain().await?
        }
    };
    Ok(Json(json!({"intact": report.intact(), "report": report})))
}
