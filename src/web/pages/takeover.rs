//! The request page's form to take over a request kubemedic left to a human
//! (`POST /requests/{id}/remediate`): the same check and request as the API's
//! ([`crate::web::review`]), then the new request's page.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use maud::{Markup, html};

use super::{Principal, csrf_field, error_page, failed, form_caller};
use crate::catalog::SelectionContext;
use crate::domain::{RemediationRequest, Role};
use crate::web::review::{RemediateBody, may_take_over, take_over};
use crate::web::{ApiError, AppState, Caller};

/// The request page's form.
#[derive(Debug, Deserialize)]
pub struct RemediateForm {
    workflow_id: String,
    #[serde(default)]
    parameters: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    csrf: Option<String>,
}

/// `POST /requests/{id}/remediate` (the dashboard's form): the same, then the new request.
pub async fn remediate_form(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<RemediateForm>,
) -> Response {
    let who = match form_caller(
        caller,
        &uri,
        &headers,
        form.csrf.as_deref(),
        Role::Approver,
        "the request",
    ) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let parameters = match form.parameters.as_deref().map(str::trim) {
        None | Some("") => Map::new(),
        Some(text) => match serde_json::from_str::<Map<String, Value>>(text) {
            Ok(p) => p,
            Err(e) => {
                return error_page(
                    StatusCode::BAD_REQUEST,
                    "Not a parameter object",
                    &format!("The parameters must be a JSON object ({e})."),
                    Some(&who),
                );
            }
        },
    };
    let Ok(id) = Uuid::parse_str(&id) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "No such request",
            "not a request id",
            Some(&who),
        );
    };
    let body = RemediateBody {
        workflow_id: form.workflow_id,
        parameters,
        message: form.message,
    };
    match take_over(&state, &who.subject, id, body).await {
        Ok(opened) => Redirect::to(&format!("/requests/{opened}")).into_response(),
        Err(ApiError::Conflict(m)) => {
            error_page(StatusCode::CONFLICT, "Not taken over", &m, Some(&who))
        }
        Err(e) => failed(e, &who),
    }
}

/// The form on a request page, for an approver, when the request may be taken over: the
/// catalog's workflows that fit its verified target, best fit first.
pub(super) fn form(state: &AppState, who: &Principal, r: &RemediationRequest) -> Markup {
    let (Some(catalog), Some(analysis)) = (
        state.catalog.as_ref().map(|c| c.get()),
        r.state.analysis.as_ref(),
    ) else {
        return html! {};
    };
    if !(who.role.allows(Role::Approver)
        && state.approvals.is_some()
        && may_take_over(r.phase)
        && analysis.root_owner.is_some())
    {
        return html! {};
    }
    let ctx = SelectionContext::of(r, analysis);
    let mut fitting: Vec<(u32, &crate::catalog::Workflow)> = catalog
        .workflows()
        .iter()
        .filter_map(|w| catalog.fit(w, &ctx).ok().map(|score| (score, w)))
        .collect();
    fitting.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    if fitting.is_empty() {
        return html! {};
    }
    html! {
        section #takeover {
            h2 { "Remediate after review" }
            p { "kubemedic did not act on this request. If you know what fixes it, name the workflow: a new request is investigated afresh, the workflow is proven against the cluster and gated, and an approver confirms it before anything runs. Its verified outcome is learned for the next incident like this one." }
            form method="post" action={ "/requests/" (r.id) "/remediate" } {
                (csrf_field(who))
                label { "Workflow " select name="workflow_id" required {
                    @for (_, w) in &fitting { option value=(w.id) { (w.id) " (" (w.action_type) ")" } }
                } }
                label { "Parameters (JSON, optional) " input type="text" name="parameters" placeholder="{}"; }
                label { "Why " input type="text" name="message" maxlength="500"; }
                button type="submit" { "Propose this remediation" }
            }
        }
    }
}
