//! "Ask": a conversation with kubemedic in the browser, and "Memory": the pinned context every
//! investigation reads.
//!
//! The Ask page sends each message to `POST /v1/chat/completions` (the session's CSRF token in
//! `x-csrf-token`) and follows the turn's typed events on `GET /v1/chat/stream/{id}` with an
//! `EventSource` (`static/ask.js`): the plan, each tool call and result, the answer as it is
//! written, and — for an approver — Approve and Deny at the approval request, which send the
//! decision as the conversation's next message. The Memory page lists the pinned context the
//! caller may read; an admin edits or deletes it with a form.

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::{failed, form_caller, layout, page_caller, respond, when};
use crate::domain::{PINNED_CLUSTER, Role};
use crate::web::{ApiError, AppState, Caller};

/// `GET /ask`
pub async fn ask(State(state): State<Arc<AppState>>, caller: Caller, uri: Uri) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let conversations = match state.store.conversations(&who.subject, 20).await {
        Ok(c) => c,
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let can_decide = who.role.allows(Role::Approver);
    let body = html! {
        @if state.chat.is_none() {
            p.error { "The chat is not available on this daemon." }
        }
        p.note { "Ask about a workload, pod, node or namespace — \"why is checkout crashing in shop?\", \"is anything wrong in namespace payments?\". A fix kubemedic proposes goes through the same proofs, policy and approval as an alert's." }
        section #conversation data-csrf=(who.csrf.clone().unwrap_or_default()) data-can-decide=(can_decide) {
            div #log {}
            div #hitl hidden {
                p #hitl-what {}
                @if can_decide {
                    button #approve type="button" { "Approve" }
                    " "
                    button #deny type="button" { "Deny" }
                } @else {
                    p.note { "You are signed in as a " (who.role.as_str()) ": an approver decides this (here, in the inbox, by mail or in Slack)." }
                }
            }
            form #ask-form {
                textarea #question name="question" rows="2" placeholder="Why is checkout crashing in shop?" {}
                button #send type="submit" { "Ask" }
            }
        }
        @if !conversations.is_empty() {
            h2 { "Your conversations" }
            ul #conversations {
                @for c in &conversations {
                    li { a href="#" data-conversation=(c.id) { (c.title) } " · " (when(c.updated_at)) }
                }
            }
        }
        script src="/static/ask.js" {}
    };
    respond(StatusCode::OK, layout("Ask", Some(&who), body))
}

/// `GET /memory`
pub async fn memory(State(state): State<Arc<AppState>>, caller: Caller, uri: Uri) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let admin = who.role.allows(Role::Admin);
    let notes: Vec<_> = match state.store.memories().await {
        Ok(n) => n
            .into_iter()
            .filter(|n| crate::web::memory::readable(&who, &n.scope))
            .collect(),
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let body = html! {
        p.note { "Pinned context is read by every investigation (the cluster's by all, a user's by the questions that user asks), shown in its evidence, and never overrides the approval policy. Secrets are removed before it is kept." }
        @if notes.is_empty() {
            p.empty #no-memory { "No pinned context yet." }
        }
        @for n in &notes {
            article.memory id={ "memory-" (n.scope.replace(':', "-")) } {
                h2 { code { (n.scope) } }
                p.said { (n.content) }
                p.note { "set by " (n.updated_by) " · " (when(n.updated_at)) }
                @if admin {
                    form method="post" action="/memory" {
                        (super::csrf_field(&who))
                        input type="hidden" name="scope" value=(n.scope);
                        input type="hidden" name="action" value="delete";
                        button type="submit" { "Delete" }
                    }
                }
            }
        }
        @if admin {
            h2 { "Set pinned context" }
            form #memory-form method="post" action="/memory" {
                (super::csrf_field(&who))
                input type="hidden" name="action" value="set";
                label { "Scope " input #memory-scope type="text" name="scope" value=(PINNED_CLUSTER); }
                label { "Context " textarea #memory-content name="content" rows="4" {} }
                button type="submit" { "Save" }
            }
        }
    };
    respond(StatusCode::OK, layout("Memory", Some(&who), body))
}

#[derive(Debug, Deserialize)]
pub struct MemoryForm {
    #[serde(default)]
    csrf: Option<String>,
    action: String,
    scope: String,
    #[serde(default)]
    content: String,
}

/// `POST /memory` (admin): set or delete a scope's pinned context.
pub async fn memory_submit(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    Form(form): Form<MemoryForm>,
) -> Response {
    let who = match form_caller(
        caller,
        &uri,
        &headers,
        form.csrf.as_deref(),
        Role::Admin,
        "the page",
    ) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let scope = match crate::web::memory::scope(&form.scope) {
        Ok(s) => s,
        Err(e) => return failed(e, &who),
    };
    let written = match form.action.as_str() {
        "set" => match crate::web::memory::content(&form.content) {
            Ok(text) => {
                state
                    .store
                    .set_memory(&scope, Some(&text), &who.subject)
                    .await
            }
            Err(e) => return failed(e, &who),
        },
        "delete" => state.store.set_memory(&scope, None, &who.subject).await,
        other => {
            return failed(
                ApiError::bad("action", format!("`{other}` is neither set nor delete")),
                &who,
            );
        }
    };
    match written {
        Ok(()) => Redirect::to("/memory").into_response(),
        Err(e) => failed(ApiError::from(e), &who),
    }
}
