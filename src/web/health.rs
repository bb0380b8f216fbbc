//! `/healthz` (the process is alive), `/readyz` (what works and what is missing) and `/metrics`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;

pub async fn healthz() -> &'static str {
    "ok"
}

/// 200 when alerts can be accepted (store reachable, schema current), 503 otherwise. The body
/// lists every check; a missing cluster, LLM or mail server shows as `"status": "degraded"`.
pub async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let mut checks = Map::new();
    let mut accepting = true;
    match state.store.health().await {
        Ok(h) => {
            checks.insert(
                "store".into(),
                json!({"ok": true, "detail": format!("{} reachable", h.backend)}),
            );
            let current = h.migrations_applied >= h.migrations_expected;
            accepting &= current;
            checks.insert(
                "migrations".into(),
                json!({"ok": current, "detail": format!("{} of {} applied", h.migrations_applied, h.migrations_expected)}),
            );
            let key_current = h.audit_key_current();
            accepting &= key_current;
            let detail = if key_current {
                format!("signing with key {}", h.our_audit_key)
            } else {
                format!(
                    "the trail is signed with key {} now, this daemon holds {}: restart it \
                     with the current keyring",
                    h.audit_key.as_deref().unwrap_or_default(),
                    h.our_audit_key
                )
            };
            checks.insert(
                "audit_key".into(),
                json!({"ok": key_current, "detail": detail}),
            );
        }
        Err(e) => {
            accepting = false;
            checks.insert(
                "store".into(),
                json!({"ok": false, "detail": e.to_string()}),
            );
        }
    }
    let mut degraded = false;
    for dep in &state.dependencies {
        let status = dep.check().await;
        degraded |= !status.ok;
        checks.insert(dep.name().into(), json!(status));
    }
    let status = match (accepting, degraded) {
        (false, _) => "unavailable",
        (true, true) => "degraded",
        (true, false) => "ready",
    };
    let code = if accepting {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        Json(json!({"status": status, "checks": Value::Object(checks)})),
    )
        .into_response()
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if let Ok(counts) = state.store.count_by_phase().await {
        state.metrics.set_requests_by_phase(&counts);
    }
    if let Ok(Some(share)) = state.store.notification_queue_usage().await {
        state.metrics.set_notification_queue_usage(share);
    }
    let bell = state.store.trail_bell();
    state.metrics.set_audit_listener(bell.live, bell.losses);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
