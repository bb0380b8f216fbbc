//! The catalog (action types, workflows and their parameters), the investigation playbooks,
//! and the approval policy as loaded, with its revision hash.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use maud::html;

use super::{layout, page_caller, respond};
use crate::domain::Role;
use crate::web::query::policy_view;
use crate::web::{AppState, Caller};

/// `GET /catalog`
pub async fn catalog(State(state): State<Arc<AppState>>, caller: Caller, uri: Uri) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let catalog = state.catalog.as_ref().map(|c| c.get());
    let playbooks = state.playbooks.as_ref().map(|p| p.get());
    let body = html! {
        @match &catalog {
            None => p.error { "The catalog did not load: nothing can be executed. See the daemon's log." },
            Some(c) => {
                section #action-types {
                    h2 { "Action types" }
                    table.list {
                        thead { tr { th { "Action type" } th { "What it does" } th { "When to use" } th { "When not to" } } }
                        tbody { @for a in c.action_types() { tr { td { code { (a.name) } } td { (a.what) } td { (a.when_to_use) } td { (a.when_not_to_use) } } } }
                    }
                }
                section #workflows {
                    h2 { "Workflows" }
                    @for w in c.workflows() {
                        article.workflow id={ "wf-" (w.id) } {
                            h3 { code { (w.id) } " v" (w.version) " · " (w.action_type) }
                            p.source { "From " code { (w.source) } }
                            p { (w.description) }
                            table.list.params {
                                thead { tr { th { "Parameter" } th { "Type" } th { "Required" } th { "Description" } } }
                                tbody { @for (name, prop) in &w.parameters.properties {
                                    tr { td { code { (name) } } td { (serde_json::to_value(prop.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
                                         td { @if w.parameters.required.contains(name) { "yes" } @else { "no" } }
                                         td { (prop.description)
                                              @if let Some(allowed) = &prop.allowed { " · one of " (serde_json::Value::Array(allowed.clone()).to_string()) }
                                              @if let Some(min) = prop.minimum { " · ≥ " (min) }
                                              @if let Some(max) = prop.maximum { " · ≤ " (max) } } }
                                } }
                            }
                        }
                    }
                }
            }
        }
        section #playbooks {
            h2 { "Investigation playbooks" }
            @match &playbooks {
                None => p.empty { "No playbooks loaded." },
                Some(books) => {
                    @for b in books.all() {
                        article.playbook id={ "pb-" (b.spec.name) } {
                            h3 { (b.spec.name) " · " (b.spec.mode) }
                            p { (b.spec.description) }
                            ol { @for step in &b.spec.investigation_steps { li { (step) } } }
                            @if !b.spec.recommended_action_types.is_empty() {
                                p { "Recommends " (b.spec.recommended_actions()) }
                            }
                        }
                    }
                }
            }
        }
    };
    respond(StatusCode::OK, layout("Catalog", Some(&who), body))
}

/// `GET /policy`
pub async fn policy(State(state): State<Arc<AppState>>, caller: Caller, uri: Uri) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let view = policy_view(&state);
    let body = html! {
        @match view {
            None => p.error { "No approval policy is loaded in this daemon." },
            Some(v) => {
                dl.facts {
                    dt { "Revision" } dd #policy-revision { code { (v.revision.as_deref().unwrap_or("none: the policy directory could not be read")) } }
                    dt { "Directory" } dd { code { (v.dir) } }
                    dt { "In force" } dd #policy-origin { (v.origin) }
                    @if !v.from_objects.is_empty() { dt { "From ApprovalPolicy objects" } dd { (v.from_objects.join(", ")) } }
                    dt { "State" } dd { @match &v.problem { None => "deciding", Some(p) => span.error { "degraded — every change needs approval: " (p) } } }
                }
                @if v.from_objects.is_empty() && v.on_disk_revision.is_some() && v.on_disk_revision != v.revision {
                    p.note { "The files on disk (" code { (v.on_disk_revision.as_deref().unwrap_or("")) } ") differ from the loaded revision; they are picked up at the next reload." }
                }
                @for (name, text) in &v.sources {
                    section.source { h2 { code { (name) } } pre { (text) } }
                }
            }
        }
    };
    respond(StatusCode::OK, layout("Approval policy", Some(&who), body))
}
