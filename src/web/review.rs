//! Taking over a request kubemedic left to a human: `POST /api/v1/requests/{id}/remediate`
//! (`{"workflow_id": "…", "parameters": {…}, "message": "…"}`, an approver's key or session)
//! and the request page's form (`POST /requests/{id}/remediate`, in the pages).
//!
//! When the investigation cannot determine a cause (an incident class no rule or playbook
//! knows), the request ends in `ManualReviewRequired`; when it found nothing to do, in
//! `NoActionRequired`. A reviewer who knows better names the workflow to try. That opens a new
//! request (source `review`, requested by the reviewer) on the same target and signal: it is
//! investigated afresh, the named workflow is checked against the catalog and the verified
//! target, proven against the live cluster, gated by the policy — which never auto-approves
//! it — approved, executed once, verified, and its verified outcome is learned like any other.
//! The reviewed request stays closed; both trails name each other.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{ApiError, AppState, Caller};
use crate::catalog::SelectionContext;
use crate::domain::{
    AuditDraft, NewSignal, Phase, RemediationRequest, RequestedWorkflow, Role, SignalSource,
    SignalStatus,
};
use crate::store::IngestOutcome;

/// The longest message a reviewer's request keeps.
const MESSAGE_CHARS: usize = 500;

/// What a reviewer asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemediateBody {
    /// A workflow of the catalog that fits the request's verified target.
    pub workflow_id: String,
    /// Its parameters (the target's are bound by kubemedic).
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// Why, for the trail and the approver.
    #[serde(default)]
    pub message: Option<String>,
}

/// The phases a reviewer may take a request over from: kubemedic did not act.
pub fn may_take_over(phase: Phase) -> bool {
    matches!(phase, Phase::ManualReviewRequired | Phase::NoActionRequired)
}

/// Open the request `who` asks for on request `id`: checked, then ingested as a signal of
/// source `review`. Answers the new request's id.
pub async fn take_over(
    state: &AppState,
    who: &str,
    id: Uuid,
    body: RemediateBody,
) -> Result<Uuid, ApiError> {
    if state.approvals.is_none() {
        return Err(ApiError::Conflict(
            "no approvers are configured (--approvers, --slack-approvers or --approve-with-keys): \
             what a reviewer asks for is always approved by a person, so nobody could approve it"
                .into(),
        ));
    }
    let Some(catalog) = state.catalog.as_ref().map(|c| c.get()) else {
        return Err(ApiError::Unavailable(
            "the workflow catalog did not load; nothing can be checked against it".into(),
        ));
    };
    let Some(req) = state.store.get_request(id).await? else {
        return Err(ApiError::NotFound(format!("request {id} does not exist")));
    };
    if !may_take_over(req.phase) {
        return Err(ApiError::Conflict(format!(
            "request {id} is {}: only a request kubemedic left to a human (ManualReviewRequired) \
             or closed without acting (NoActionRequired) can be taken over",
            req.phase.as_str()
        )));
    }
    let Some(analysis) = req.state.analysis.as_ref() else {
        return Err(ApiError::Conflict(format!(
            "request {id} was never investigated: there is no verified target to act on"
        )));
    };
    let Some(target) = analysis.root_owner.as_ref() else {
        return Err(ApiError::Conflict(format!(
            "kubemedic could not verify the target of request {id} in the cluster: there is \
             nothing a workflow could be bound to"
        )));
    };
    let workflow_id = body.workflow_id.trim().to_owned();
    if workflow_id.is_empty() {
        return Err(ApiError::bad(
            "workflow_id",
            "name a workflow of the catalog",
        ));
    }
    // Checked now, so the reviewer hears at once; checked again (and proven) on the fresh
    // investigation, where the cluster may have changed.
    // The target is kubemedic's to bind, from the verified root owner: never the caller's.
    let parameters: Map<String, Value> = body
        .parameters
        .into_iter()
        .filter(|(k, _)| !k.starts_with("TARGET_RESOURCE_"))
        .collect();
    catalog
        .validate_selection(
            &workflow_id,
            &parameters,
            Some(target),
            &SelectionContext::of(&req, analysis),
        )
        .map_err(|e| {
            ApiError::bad(
                "workflow_id",
                format!("{}: {}", e.code, e.errors.join("; ")),
            )
        })?;
    let message = body
        .message
        .as_deref()
        .map(crate::redact::sanitize_text)
        .map(|m| m.trim().chars().take(MESSAGE_CHARS).collect::<String>())
        .filter(|m| !m.is_empty());
    let signal = review_signal(
        &req,
        RequestedWorkflow {
            workflow_id: workflow_id.clone(),
            parameters,
            requested_by: who.to_owned(),
            follows: id,
            message,
        },
        state.clock.now(),
    );
    let outcomes = state
        .ingest
        .submit(vec![signal])
        .await
        .map_err(|e| ApiError::Unavailable(format!("the store cannot take it: {e}")))?;
    let opened = match outcomes.first() {
        Some(IngestOutcome::Opened { request_id }) => *request_id,
        Some(IngestOutcome::Occurrence { request_id, .. }) => {
            return Err(ApiError::Conflict(format!(
                "request {request_id} is already handling {target}: decide there (or wait for \
                 it to finish and take it over)"
            )));
        }
        _ => {
            return Err(ApiError::Unavailable(
                "the request was not opened; try again".into(),
            ));
        }
    };
    let draft = AuditDraft::new(
        "review_takeover",
        who,
        format!("{who} asked for {workflow_id} on {target}: request {opened}"),
    )
    .with_payload(json!({"request_id": opened, "workflow_id": workflow_id}));
    if let Err(e) = state.store.append_audit(Some(id), None, &draft).await {
        // The new request names this one; only the back-reference is missing.
        tracing::warn!(error = %e, request_id = %id, "the takeover is not in the reviewed request's trail");
    }
    tracing::info!(request_id = %id, opened = %opened, by = %who, workflow = %workflow_id, "review takeover");
    Ok(opened)
}

/// The signal of a reviewer's request: the reviewed request's signal (same name, labels,
/// fingerprint — so the signature, the target and the alert verification are the same), of
/// source `review`, starting now, carrying what was asked.
fn review_signal(
    req: &RemediationRequest,
    asked: RequestedWorkflow,
    now: chrono::DateTime<chrono::Utc>,
) -> NewSignal {
    let s = &req.signal;
    let mut annotations = s.annotations.clone();
    annotations.insert("kubemedic.io/review-of".into(), req.id.to_string());
    NewSignal {
        fingerprint: s.fingerprint.clone(),
        starts_at: now,
        ends_at: None,
        status: SignalStatus::Firing,
        name: s.name.clone(),
        severity: s.severity.clone(),
        mode: s.mode,
        source: SignalSource::Review,
        labels: s.labels.clone(),
        annotations,
        generator_url: s.generator_url.clone(),
        receiver: Some(asked.requested_by.clone()),
        group_key: None,
        external_url: s.external_url.clone(),
        target: req.target.clone(),
        target_fingerprint: req.target_fingerprint.clone(),
        target_aliases: vec![req.target_fingerprint.clone()],
        requested: Some(asked),
        trace: None,
    }
}

/// `POST /api/v1/requests/{id}/remediate`
#[utoipa::path(post, path = "/api/v1/requests/{id}/remediate", tag = "requests",
    params(("id" = String, Path),
           ("x-csrf-token" = Option<String>, Header, description = "Required with a browser session")),
    request_body(content = super::schema::RemediateRequest, content_type = "application/json"),
    responses((status = 202, description = "A new request of source `review` was opened; it is proven, gated and waits for an approver", body = Object),
              (status = 400, description = "The workflow is not in the catalog, does not fit the target, or its parameters are invalid", body = super::schema::ErrorBody),
              (status = 403, description = "Not an approver, or a session without its CSRF token", body = super::schema::ErrorBody),
              (status = 409, description = "The request cannot be taken over (its phase, no verified target, another request active on it, no approvers)", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn remediate(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let who = caller.need_to_change(Role::Approver, &headers)?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::bad("id", "not a UUID"))?;
    let b: RemediateBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("body", format!("invalid request: {e}")))?;
    let opened = take_over(&state, &who.subject, id, b).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "request_id": opened,
            "follows": id,
            "links": {"request": format!("/api/v1/requests/{opened}")},
        })),
    )
        .into_response())
}
