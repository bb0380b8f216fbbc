//! The read API: requests with their audit timeline, and signals. Admin bearer required.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{ApiError, AppState};
use crate::domain::{Phase, RemediationRequest, SignalStatus};
use crate::store::{RequestFilter, SignalFilter};

const DEFAULT_LIMIT: i64 = 50;
const MAX_LIMIT: i64 = 500;

pub(super) fn require_api(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.api_authorised(headers) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

pub(super) fn paging(q: &HashMap<String, String>) -> Result<(i64, i64), ApiError> {
    let number = |key: &str, default: i64, max: i64| -> Result<i64, ApiError> {
        match q.get(key) {
            None => Ok(default),
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if (0..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad(
                    key,
                    format!("`{raw}` is not an integer in 0..={max}"),
                )),
            },
        }
    };
    Ok((
        number("limit", DEFAULT_LIMIT, MAX_LIMIT)?,
        number("offset", 0, i64::MAX)?,
    ))
}

pub(super) fn reject_unknown(q: &HashMap<String, String>, known: &[&str]) -> Result<(), ApiError> {
    match q.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad(
            k,
            format!("unknown query parameter; known: {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

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
            severity: r.signal.severity.as_deref(),
            signal_mode: r.signal.mode,
            occurrence_count: r.occurrence_count,
            first_seen: r.first_seen,
            last_seen: r.last_seen,
            created_at: r.created_at,
            updated_at: r.updated_at,
            waiting: r.state.waiting.as_ref(),
        }
    }
}

/// `GET /api/v1/requests?phase=&namespace=&limit=&offset=`
pub async fn list_requests(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    require_api(&state, &headers)?;
    reject_unknown(&q, &["phase", "namespace", "limit", "offset"])?;
    let phase = match q.get("phase") {
        None => None,
        Some(p) => Some(Phase::parse(p).ok_or_else(|| {
            ApiError::bad(
                "phase",
                format!("`{p}` is not a phase (e.g. Received, Completed)"),
            )
        })?),
    };
    let (limit, offset) = paging(&q)?;
    let page = state
        .store
        .list_requests(&RequestFilter {
            phase,
            namespace: q.get("namespace").cloned(),
            limit,
            offset,
        })
        .await?;
    let items: Vec<RequestSummary> = page.items.iter().map(RequestSummary::from).collect();
    Ok(Json(json!({"total": page.total, "items": items})))
}

/// `GET /api/v1/requests/{id}`: the request, its stage results, its signals and its timeline.
pub async fn get_request(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_api(&state, &headers)?;
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
pub async fn list_signals(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    require_api(&state, &headers)?;
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
pub async fn target_history(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    require_api(&state, &headers)?;
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
        .history(&target.fingerprint(), now - chrono::Duration::days(90))
        .await?;
    let current = records
        .last()
        .and_then(|r| r.post_remediation_spec_hash.clone());
    let context = crate::history::build_context(&target, current.as_deref(), &records, now);
    let warnings = crate::history::warnings(&context);
    Ok(Json(json!({
        "target": target,
        "total": records.len(),
        "items": records,
        "context": context,
        "warnings": warnings,
    })))
}
