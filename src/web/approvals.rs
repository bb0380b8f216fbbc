//! Approvals over HTTP: the pages behind the signed links, and the JSON API.
//!
//! - `GET /approvals/{id}/{approve|deny}?t=…` only shows a confirmation page with the summary:
//!   mail scanners fetch links, so a GET never decides and never uses the link. The page's
//!   form `POST`s to the same address; for a high-risk change it asks for the target's name,
//!   and the server checks it.
//! - `GET /api/v1/approvals[?status=pending]`, `GET /api/v1/approvals/{id}`,
//!   `POST /api/v1/approvals/{id}/decision` (`{"decision": "approve"|"deny", "alternative":
//!   "<workflow id>", "message": "…"}`) for an approver's key, recorded as `key:<name>` via `api`.
//!
//! Pages are plain HTML without scripts, escaped throughout (the summary and evidence are
//! model output and alert text), never cached, never indexed, and sent without a Referer to
//! wherever they link.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{ApiError, AppState, Caller};
use crate::approval::{Approvals, LinkView, Refusal};
use crate::domain::{ApprovalRequest, ApprovalStatus};
use crate::domain::{Channel, Role};
use crate::notify::email::escape_html;
use crate::notify::render;

fn not_configured() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Approvals are not configured",
        "<p>This kubemedic has no approvers configured.</p>",
    )
}

/// HTML-escaped (the same escaping as the approval mail's HTML part).
fn esc(s: &str) -> String {
    escape_html(s)
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex, nofollow\">\
         <title>{t} · kubemedic</title><style>\
         body{{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1b1f24}}\
         h1{{font-size:1.4rem}} dt{{font-weight:600;margin-top:.6rem}} dd{{margin:0 0 0 1rem}}\
         code,pre{{background:#f3f4f6;padding:.1rem .3rem;border-radius:3px}} pre{{padding:.6rem;overflow:auto}}\
         .risk{{color:#9a1c1c;font-weight:600}} button{{font-size:1rem;padding:.5rem 1.2rem;margin-top:1rem}}\
         .approve{{background:#136f2d;color:#fff;border:0}} .deny{{background:#9a1c1c;color:#fff;border:0}}\
         input[type=text]{{font-size:1rem;padding:.3rem;width:20rem}}\
         </style></head><body><h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    );
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "x-robots-tag",
        HeaderValue::from_static("noindex, nofollow"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

fn refused(r: Refusal) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::FORBIDDEN);
    page(
        status,
        r.title,
        &format!(
            "<p>{}</p><p>Nothing was decided. If you expected to decide this request, ask for it \
             to be decided in the kubemedic dashboard or API.</p>",
            esc(&r.detail)
        ),
    )
}

/// The approval, as a definition list (the confirmation and result pages).
fn summary(a: &ApprovalRequest) -> String {
    let mut out = String::from("<dl>");
    let mut row = |k: &str, v: String| out.push_str(&format!("<dt>{}</dt><dd>{v}</dd>", esc(k)));
    row("Signal", esc(&a.signal_name));
    row(
        "Target",
        format!("<code>{}</code>", esc(&a.target.to_string())),
    );
    if let Some(env) = &a.environment {
        row("Environment", esc(env));
    }
    row("Root cause", esc(&a.summary));
    if !a.evidence.is_empty() {
        row(
            "Evidence",
            format!(
                "<ul>{}</ul>",
                a.evidence
                    .iter()
                    .map(|e| format!("<li>{}</li>", esc(e)))
                    .collect::<String>()
            ),
        );
    }
    row(
        "Workflow",
        format!(
            "<code>{}</code> {} ({})",
            esc(&a.workflow_id),
            esc(&a.workflow_version),
            esc(a.action_type.as_str())
        ),
    );
    row(
        "Parameters",
        format!(
            "<pre>{}</pre>",
            esc(&serde_json::to_string_pretty(&a.parameters).unwrap_or_default())
        ),
    );
    if !a.rationale.is_empty() {
        row("Why this workflow", esc(&a.rationale));
    }
    if !a.alternatives.is_empty() {
        row(
            "Alternatives considered",
            format!(
                "<ul>{}</ul>",
                a.alternatives
                    .iter()
                    .map(|x| format!(
                        "<li><code>{}</code> {}</li>",
                        esc(&x.workflow_id),
                        esc(&x.rationale)
                    ))
                    .collect::<String>()
            ),
        );
    }
    // What the mail shows under the same titles: the approver decides on this page.
    let list = |items: Vec<String>| {
        format!(
            "<ul>{}</ul>",
            items
                .iter()
                .map(|x| format!("<li>{}</li>", esc(x)))
                .collect::<String>()
        )
    };
    row(
        "What would change (the API server's dry run)",
        list(render::change(a)),
    );
    row(
        "What was checked against the cluster",
        list(render::checked(a)),
    );
    if let Some(h) = render::bound_to(a) {
        row(
            "Bound to spec",
            format!(
                "<code>{}</code>: if the target changes before it runs, nothing is written.",
                esc(&h)
            ),
        );
    }
    row("Confidence", format!("{:.2}", a.confidence));
    row(
        "Risk",
        format!(
            "<span class=\"risk\">{}</span>: {}",
            a.risk_score,
            esc(&a.risk_reason)
        ),
    );
    if !a.required_because.is_empty() {
        row(
            "Approval required because",
            format!(
                "<ul>{}</ul>{}",
                a.required_because
                    .iter()
                    .map(|x| format!("<li>{}</li>", esc(x)))
                    .collect::<String>(),
                a.policy_revision
                    .as_deref()
                    .map(|p| format!("<small>policy {}</small>", esc(p)))
                    .unwrap_or_default()
            ),
        );
    }
    row("Expires", esc(&a.expires_at.to_rfc3339()));
    out.push_str("</dl>");
    out
}

fn decided_text(a: &ApprovalRequest) -> String {
    match &a.decision {
        Some(d) => format!(
            "{} by {} via {} at {}{}",
            d.decision,
            d.decided_by,
            d.decided_via,
            d.decided_at.to_rfc3339(),
            d.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ),
        None => "pending".into(),
    }
}

#[derive(Deserialize)]
pub struct LinkQuery {
    t: Option<String>,
}

/// `GET /approvals/{id}/{decision}?t=…`: the confirmation page. Decides nothing.
pub async fn link_page(
    State(state): State<Arc<AppState>>,
    Path((id, decision)): Path<(String, String)>,
    Query(q): Query<LinkQuery>,
) -> Response {
    let Some(a) = state.approvals.as_ref() else {
        return not_configured();
    };
    let (Ok(id), Some(token)) = (Uuid::parse_str(&id), q.t.as_deref()) else {
        return refused(Refusal {
            status: 400,
            title: "Link not valid",
            detail: "this link is incomplete".into(),
        });
    };
    let view = match a.view_link(id, &decision, token).await {
        Ok(v) => v,
        Err(r) => return refused(r),
    };
    if view.approval.decision.is_some() {
        return page(
            StatusCode::CONFLICT,
            "Already decided",
            &format!(
                "<p>This request was already decided: {}.</p>{}",
                esc(&decided_text(&view.approval)),
                summary(&view.approval)
            ),
        );
    }
    page(
        StatusCode::OK,
        &confirm_title(&view),
        &confirm_body(&view, token, None),
    )
}

fn confirm_title(v: &LinkView) -> String {
    format!(
        "{} {} on {}?",
        if v.claims.decision.as_str() == "approve" {
            "Approve"
        } else {
            "Deny"
        },
        v.approval.action_type,
        v.approval.target
    )
}

fn confirm_body(v: &LinkView, token: &str, problem: Option<&str>) -> String {
    let approve = v.claims.decision.as_str() == "approve";
    let mut out = format!(
        "<p>You are deciding as <strong>{}</strong>. Nothing happens until you press the button.</p>",
        esc(&v.claims.recipient)
    );
    if let Some(p) = problem {
        out.push_str(&format!("<p class=\"risk\">{}</p>", esc(p)));
    }
    out.push_str(&summary(&v.approval));
    out.push_str(&format!(
        "<form method=\"post\" action=\"/approvals/{}/{}\">\
         <input type=\"hidden\" name=\"t\" value=\"{}\">",
        v.approval.id,
        v.claims.decision.as_str(),
        esc(token)
    ));
    if v.confirm_target {
        out.push_str(&format!(
            "<p><label>This change has risk {}. Type the target's name, <code>{}</code>, to confirm:<br>\
             <input type=\"text\" name=\"confirm_target\" autocomplete=\"off\" required></label></p>",
            v.approval.risk_score,
            esc(&v.approval.target.name)
        ));
    }
    out.push_str(
        "<p><label>Message (optional):<br><input type=\"text\" name=\"message\" maxlength=\"2000\"></label></p>",
    );
    out.push_str(if approve {
        "<button class=\"approve\" type=\"submit\">Approve</button>"
    } else {
        "<button class=\"deny\" type=\"submit\">Deny</button>"
    });
    out.push_str("</form>");
    out
}

#[derive(Deserialize)]
pub struct LinkForm {
    t: Option<String>,
    confirm_target: Option<String>,
    message: Option<String>,
}

/// `POST /approvals/{id}/{decision}`: the confirmation form decides (once).
pub async fn link_submit(
    State(state): State<Arc<AppState>>,
    Path((id, decision)): Path<(String, String)>,
    Form(form): Form<LinkForm>,
) -> Response {
    let Some(a) = state.approvals.as_ref() else {
        return not_configured();
    };
    let (Ok(id), Some(token)) = (Uuid::parse_str(&id), form.t.as_deref()) else {
        return refused(Refusal {
            status: 400,
            title: "Link not valid",
            detail: "this form is incomplete".into(),
        });
    };
    match a
        .decide_link(
            id,
            &decision,
            token,
            form.confirm_target.as_deref(),
            form.message.as_deref(),
        )
        .await
    {
        Ok(decided) => page(
            StatusCode::OK,
            match decided.status() {
                ApprovalStatus::Approved => "Approved",
                ApprovalStatus::Rejected => "Denied",
                _ => "Decided",
            },
            &format!(
                "<p>Recorded: {}. kubemedic takes it from here; the outcome is in the audit trail.</p>{}",
                esc(&decided_text(&decided)),
                summary(&decided)
            ),
        ),
        Err(r) if r.status == 422 => {
            // Show the form again with what is missing (the link is still unused).
            match a.view_link(id, &decision, token).await {
                Ok(view) => page(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &confirm_title(&view),
                    &confirm_body(&view, token, Some(&r.detail)),
                ),
                Err(r) => refused(r),
            }
        }
        Err(r) => refused(r),
    }
}

// --- The JSON API.

fn api_approvals(state: &AppState) -> Result<&Arc<Approvals>, ApiError> {
    state
        .approvals
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("approvals are not configured (no approvers)".into()))
}

fn refusal_error(r: Refusal) -> ApiError {
    match r.status {
        404 => ApiError::NotFound(r.detail),
        409 => ApiError::Conflict(format!("{}: {}", r.title, r.detail)),
        503 => ApiError::Unavailable(r.detail),
        _ => ApiError::BadRequest {
            field: None,
            message: format!("{}: {}", r.title, r.detail),
        },
    }
}

/// `GET /api/v1/approvals?status=pending&limit=&offset=`
#[utoipa::path(get, path = "/api/v1/approvals", tag = "approvals",
    params(("status" = Option<String>, Query, description = "pending, approved, rejected or expired"),
           ("limit" = Option<i64>, Query), ("offset" = Option<i64>, Query)),
    responses((status = 200, description = "Approvals, newest first", body = super::schema::ApprovalList)),
    security(("bearer" = []), ("session" = [])))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    super::query::reject_unknown(&q, &["status", "limit", "offset"])?;
    let (limit, offset) = super::query::paging(&q)?;
    let status = match q.get("status") {
        None => None,
        Some(s) => Some(ApprovalStatus::parse(s).ok_or_else(|| {
            ApiError::bad(
                "status",
                format!("`{s}` is not one of pending, approved, rejected, expired"),
            )
        })?),
    };
    let page = state.store.list_approvals(status, limit, offset).await?;
    Ok(Json(json!({
        "total": page.total,
        "items": page.items.iter().map(approval_json).collect::<Vec<_>>(),
    })))
}

fn approval_json(a: &ApprovalRequest) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    v["status"] = json!(a.status().as_str());
    v
}

/// `GET /api/v1/approvals/{id}`: the approval with its notifications.
#[utoipa::path(get, path = "/api/v1/approvals/{id}", tag = "approvals",
    params(("id" = String, Path)),
    responses((status = 200, description = "The approval with its proof (what was checked, the dry run's change, the spec it is bound to), its note and its notifications", body = super::schema::Approval),
              (status = 404, description = "Not found", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.need(Role::Viewer)?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::bad("id", "not a UUID"))?;
    let Some(a) = state.store.get_approval(id).await? else {
        return Err(ApiError::NotFound(format!("approval {id} does not exist")));
    };
    let notifications = state.store.notifications(id).await?;
    let mut v = approval_json(&a);
    v["notifications"] = serde_json::to_value(&notifications).unwrap_or(Value::Null);
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    decision: String,
    #[serde(default)]
    alternative: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// `POST /api/v1/approvals/{id}/decision`
#[utoipa::path(post, path = "/api/v1/approvals/{id}/decision", tag = "approvals",
    params(("id" = String, Path),
           ("x-csrf-token" = Option<String>, Header, description = "Required with a browser session")),
    request_body(content = super::schema::DecisionRequest, content_type = "application/json"),
    responses((status = 200, description = "Decided; the first decision wins", body = Object),
              (status = 403, description = "Not an approver, or a session without its CSRF token", body = super::schema::ErrorBody),
              (status = 409, description = "Already decided or expired", body = super::schema::ErrorBody)),
    security(("bearer" = []), ("session" = [])))]
pub async fn decide(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let who = caller.need_to_change(Role::Approver, &headers)?;
    let a = api_approvals(&state)?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::bad("id", "not a UUID"))?;
    let b: DecisionBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("body", format!("invalid decision: {e}")))?;
    let approve = match b.decision.as_str() {
        "approve" | "approved" => true,
        "deny" | "denied" | "reject" | "rejected" => false,
        other => {
            return Err(ApiError::bad(
                "decision",
                format!("`{other}` is neither `approve` nor `deny`"),
            ));
        }
    };
    let decided = a
        .decide_api(
            id,
            approve,
            b.alternative.as_deref(),
            b.message.as_deref(),
            &who.subject,
            Channel::Api,
            crate::approval::Confirmation::NotAsked,
        )
        .await
        .map_err(refusal_error)?;
    Ok(Json(approval_json(&decided)))
}

// --- Slack's buttons.

/// `POST /api/v1/slack/interactions`: a button click, signed by Slack. Verified (signature,
/// a timestamp within 5 minutes, never seen before), answered at once (Slack waits 3 s), and
/// decided in the background as the Slack user Slack vouched for — if they are an approver;
/// the message's buttons are then replaced with the outcome.
pub async fn slack_interaction(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    use crate::approval::slack::{
        SIGNATURE_HEADER, TIMESTAMP_HEADER, parse_interaction, verify_signature,
    };
    use crate::notify::slack::outcome_message;
    let (Some(a), Some(secret)) = (state.approvals.clone(), state.slack_signing_secret.as_ref())
    else {
        return Err(ApiError::NotFound(
            "Slack interactions are not configured (--slack-signing-secret)".into(),
        ));
    };
    let raw = super::ingest::read_body(&state, &headers, body).await?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signature = header(SIGNATURE_HEADER);
    if let Err(e) = verify_signature(
        secret,
        header(TIMESTAMP_HEADER),
        signature,
        &raw,
        state.clock.now(),
    ) {
        audit_slack_refusal(&state, &format!("signature refused: {e}")).await;
        return Err(ApiError::Unauthorized);
    }
    // A genuine request replayed within its 5 minutes: used once only.
    let fresh = state
        .store
        .consume_nonce(&format!("slack:{}", signature.unwrap_or_default()), None)
        .await?;
    if !fresh {
        audit_slack_refusal(&state, "replayed interaction refused").await;
        return Err(ApiError::Conflict(
            "this interaction was already received".into(),
        ));
    }
    let interaction = parse_interaction(&raw).map_err(|e| ApiError::bad("payload", e))?;
    let Some(decision) = interaction.decision() else {
        // Another button (Review opens a page): nothing to decide.
        return Ok(StatusCode::OK.into_response());
    };
    let Some(id) = interaction.approval_id() else {
        return Err(ApiError::bad("payload", "the button names no approval"));
    };
    let approve = decision == crate::domain::Decision::Approved;
    tokio::spawn(async move {
        let result = a
            .decide_slack(id, approve, &interaction.user_id, &interaction.user_name)
            .await;
        let Some(slack) = a.slack.as_ref() else {
            return;
        };
        let answer = match &result {
            Ok(decided) => {
                slack
                    .respond(&interaction.response_url, &outcome_message(decided), true)
                    .await
            }
            Err(r) => {
                let text = crate::notify::slack::SlackMessage {
                    text: format!("Not decided: {}: {}", r.title, r.detail),
                    blocks: vec![],
                };
                slack.respond(&interaction.response_url, &text, false).await
            }
        };
        if let Err(e) = answer {
            tracing::warn!(error = %e, "cannot answer a Slack interaction");
        }
    });
    Ok(StatusCode::OK.into_response())
}

async fn audit_slack_refusal(state: &AppState, why: &str) {
    let draft = crate::domain::AuditDraft::new(
        crate::domain::audit::APPROVAL_REFUSED,
        "slack",
        why.to_owned(),
    );
    if let Err(e) = state.store.append_audit(None, None, &draft).await {
        tracing::warn!(error = %e, "cannot audit a refused Slack interaction");
    }
    state.metrics.approval_decision("none", "slack", "refused");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_text_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
