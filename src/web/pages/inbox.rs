//! The approval inbox: pending approvals with Approve / Deny / an alternative for approvers,
//! read-only for viewers, each with its expiry counting down, and with what the mail and Slack
//! show too: the change the API server's dry run describes, what was checked against the
//! cluster, and the spec the approval is bound to.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;
use uuid::Uuid;

use super::{error_page, failed, form_caller, layout, page_caller, respond, said, short, when};
use crate::domain::{ApprovalStatus, Channel, Role};
use crate::web::{ApiError, AppState, Caller};

/// `GET /inbox`
pub async fn inbox(State(state): State<Arc<AppState>>, caller: Caller, uri: Uri) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let pending = match state
        .store
        .list_approvals(Some(ApprovalStatus::Pending), 200, 0)
        .await
    {
        Ok(p) => p,
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let now = state.clock.now();
    let can_decide = who.role.allows(Role::Approver) && state.approvals.is_some();
    let high_risk = state.approvals.as_ref().map(|a| a.high_risk_score());
    let body = html! {
        @if !who.role.allows(Role::Approver) {
            p.note #read-only { "You are signed in as a " (who.role.as_str()) ": you can see what waits for a decision, not decide it." }
        }
        @if pending.items.is_empty() {
            p.empty #no-approvals { "Nothing waits for a decision." }
        }
        @for a in &pending.items {
            article.approval id={ "approval-" (a.id) } data-request=(a.request_id) {
                h2 { (a.action_type) " on " (a.target.to_string()) }
                dl.facts {
                    dt { "Request" } dd { a href={ "/requests/" (a.request_id) } { code { (short(&a.request_id)) } } " · " (a.signal_name) }
                    dt { "Root cause" } dd { (said(&a.summary)) }
                    dt { "Workflow" } dd { code { (a.workflow_id) } " v" (a.workflow_version) " · confidence " (format!("{:.2}", a.confidence)) }
                    dt { "Why approval" } dd { "risk " (a.risk_score) " — " (said(&a.risk_reason)) }
                    dt { "Expires" } dd { (when(a.expires_at)) " · "
                        span.countdown data-expires=(a.expires_at.to_rfc3339()) { (remaining(a.expires_at - now)) } }
                }
                (super::proof::card(a.proof.as_ref()))
                @if can_decide {
                    form.decide method="post" action={ "/inbox/" (a.id) } {
                        (super::csrf_field(&who))
                        @if high_risk.is_some_and(|h| a.risk_score >= h) {
                            label { "High risk: type the target's name (" code { (a.target.name) } ") to approve "
                                input type="text" name="confirm" autocomplete="off"; }
                        } @else if !a.alternatives.is_empty() {
                            label { "If the workflow you pick is high risk, type the target's name ("
                                code { (a.target.name) } ") "
                                input type="text" name="confirm" autocomplete="off"; }
                        }
                        @if !a.alternatives.is_empty() {
                            label { "Workflow "
                                select name="alternative" {
                                    option value="" { (a.workflow_id) " (selected)" }
                                    @for alt in &a.alternatives { option value=(alt.workflow_id) { (alt.workflow_id) } }
                                }
                            }
                        }
                        label { "Note " input type="text" name="message" maxlength="500"; }
                        button.approve type="submit" name="decision" value="approve" { "Approve" }
                        button.deny type="submit" name="decision" value="deny" { "Deny" }
                    }
                }
            }
        }
    };
    respond(StatusCode::OK, layout("Approvals", Some(&who), body))
}

fn remaining(d: chrono::Duration) -> String {
    let s = d.num_seconds();
    if s <= 0 {
        return "expired".into();
    }
    format!("{}m {:02}s left", s / 60, s % 60)
}

#[derive(Deserialize)]
pub struct DecideForm {
    #[serde(default)]
    csrf: Option<String>,
    decision: String,
    #[serde(default)]
    alternative: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    confirm: Option<String>,
}

/// `POST /inbox/{id}`: an approver decides from the dashboard.
pub async fn decide(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<DecideForm>,
) -> Response {
    let who = match form_caller(
        caller,
        &uri,
        &headers,
        form.csrf.as_deref(),
        Role::Approver,
        "the inbox",
    ) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let Some(approvals) = state.approvals.clone() else {
        return failed(
            ApiError::NotFound("approvals are not configured".into()),
            &who,
        );
    };
    let Ok(id) = Uuid::parse_str(&id) else {
        return failed(ApiError::bad("id", "not an approval id"), &who);
    };
    let approve = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return failed(
                ApiError::bad("decision", format!("`{other}` is neither approve nor deny")),
                &who,
            );
        }
    };
    let alternative = form.alternative.as_deref().filter(|a| !a.trim().is_empty());
    match approvals
        .decide_api(
            id,
            approve,
            alternative,
            form.message.as_deref(),
            &who.subject,
            Channel::Dashboard,
            // The same confirmation the e-mail link asks for a high-risk change; for an
            // alternative, the risk is the higher of the policy's answers on the two workflows.
            crate::approval::Confirmation::Typed(form.confirm.as_deref()),
        )
        .await
    {
        Ok(decided) => Redirect::to(&format!("/requests/{}", decided.request_id)).into_response(),
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST);
            error_page(status, refusal.title, &refusal.detail, Some(&who))
        }
    }
}
