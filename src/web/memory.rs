//! Pinned cluster context ("memory"): `GET/PUT/DELETE /api/v1/memory`. Text an admin writes
//! for every investigation to read — cluster-wide (`cluster`) or for one user (`user:<name>`,
//! read by the questions that user asks). Everyone signed in reads the cluster's and their
//! own; admins read all and write. The text passes the sanitiser before it is stored (so no
//! secret reaches the store, the audit trail or a model), is bounded in size, and every change
//! is audited with its writer.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, Caller};
use crate::domain::{MAX_MEMORY_CHARS, PINNED_CLUSTER, Role};
use crate::redact::sanitize_text;

/// A scope as written (`cluster`, `user:<name>`), checked.
pub fn scope(raw: &str) -> Result<String, ApiError> {
    let raw = raw.trim();
    if raw == PINNED_CLUSTER {
        return Ok(raw.to_owned());
    }
    match raw.strip_prefix("user:") {
        Some(name) if !name.trim().is_empty() && name.len() <= 200 => Ok(raw.to_owned()),
        _ => Err(ApiError::bad(
            "scope",
            format!("`{raw}` is neither `cluster` nor `user:<name>`"),
        )),
    }
}

/// Whether `who` may read the pinned context of `scope`: the cluster's and their own; an
/// admin, all.
pub fn readable(who: &super::auth::Principal, scope: &str) -> bool {
    who.role.allows(Role::Admin)
        || scope == PINNED_CLUSTER
        || scope.strip_prefix("user:") == Some(who.subject.as_str())
}

/// Check and sanitise a note's text.
pub fn content(raw: &str) -> Result<String, ApiError> {
    let text = sanitize_text(raw.trim());
    if text.is_empty() {
        return Err(ApiError::bad(
            "content",
            "empty: to remove a scope's context, DELETE it",
        ));
    }
    let n = text.chars().count();
    if n > MAX_MEMORY_CHARS {
        return Err(ApiError::bad(
            "content",
            format!("{n} characters; at most {MAX_MEMORY_CHARS}"),
        ));
    }
    Ok(text)
}

/// `GET /api/v1/memory`
#[utoipa::path(get, path = "/api/v1/memory", tag = "memory",
    responses((status = 200, description = "`{notes: [{scope, content, updated_at, updated_by}]}`: the cluster's and the caller's own (an admin: all)", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let who = caller.need(Role::Viewer)?;
    let notes: Vec<_> = state
        .store
        .memories()
        .await?
        .into_iter()
        .filter(|n| readable(&who, &n.scope))
        .collect();
    Ok(Json(json!({"notes": notes, "max_chars": MAX_MEMORY_CHARS})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutNote {
    scope: String,
    content: String,
}

/// `PUT /api/v1/memory`: `{"scope", "content"}` (admin).
#[utoipa::path(put, path = "/api/v1/memory", tag = "memory",
    request_body(content = Object, description = "`{\"scope\": \"cluster\" | \"user:<name>\", \"content\": \"…\"}`", content_type = "application/json"),
    responses((status = 200, description = "The note as stored (sanitised)", body = Object),
              (status = 400, description = "The field that is wrong", body = super::schema::ErrorBody),
              (status = 403, description = "Writing needs the admin role", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn put(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let who = caller.need_to_change(Role::Admin, &headers)?;
    let note: PutNote = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("body", format!("expected {{\"scope\", \"content\"}}: {e}")))?;
    let scope = scope(&note.scope)?;
    not_managed(&state, &scope).await?;
    let text = content(&note.content)?;
    state
        .store
        .set_memory(&scope, Some(&text), &who.subject)
        .await?;
    let stored = state.store.memory(&scope).await?;
    Ok(Json(json!({"note": stored})))
}

/// `DELETE /api/v1/memory?scope=…` (admin).
#[utoipa::path(delete, path = "/api/v1/memory", tag = "memory",
    params(("scope" = String, Query, description = "`cluster` or `user:<name>`")),
    responses((status = 200, description = "Deleted (or there was nothing)", body = Object),
              (status = 403, description = "Writing needs the admin role", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let who = caller.need_to_change(Role::Admin, &headers)?;
    super::query::reject_unknown(&q, &["scope"])?;
    let scope = scope(q.get("scope").map_or("", String::as_str))?;
    not_managed(&state, &scope).await?;
    let existed = state.store.memory(&scope).await?.is_some();
    if existed {
        state.store.set_memory(&scope, None, &who.subject).await?;
    }
    Ok(Json(json!({"scope": scope, "deleted": existed})))
}

/// The cluster-wide context is the ClusterContext objects' while they exist (they win; one
/// store of truth): changing it here would be overwritten, so it is refused with where to go.
async fn not_managed(state: &AppState, scope: &str) -> Result<(), ApiError> {
    let Some(note) = state.store.memory(scope).await? else {
        return Ok(());
    };
    match note
        .updated_by
        .strip_prefix(crate::domain::CLUSTER_CONTEXT_WRITER)
    {
        Some(objects) => Err(ApiError::Conflict(format!(
            "the {scope} context is managed by ClusterContext objects ({objects}): change them \
             with kubectl (kubectl get clustercontexts -n <kubemedic's namespace>)"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_contents_are_checked() {
        assert_eq!(scope(" cluster ").unwrap(), "cluster");
        assert_eq!(scope("user:key:alice").unwrap(), "user:key:alice");
        assert!(scope("user:").is_err());
        assert!(scope("namespace:shop").is_err());
        assert!(content("  ").is_err());
        assert!(content(&"x".repeat(MAX_MEMORY_CHARS + 1)).is_err());
        let kept = content("payments is PCI-scoped; db password=hunter2-Secret-99").unwrap();
        assert!(kept.starts_with("payments is PCI-scoped"));
        assert!(!kept.contains("hunter2"), "{kept}");
    }
}
