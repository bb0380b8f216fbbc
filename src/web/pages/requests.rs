//! The request list, a request's page (its whole story, live) and a target's history.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use maud::{Markup, html};
use uuid::Uuid;

use super::{
    Principal, age, count, failed, json_block, layout, page_caller, phase_badge, respond, said,
    short, when,
};
use crate::domain::{AuditEvent, Phase, RemediationRequest, Role, Target};
use crate::store::{ChainReport, SignalFilter};
use crate::web::events::typed;
use crate::web::query::{parse_time, request_filter};
use crate::web::{ApiError, AppState, Caller};

/// The list's query string without `before`, to carry the filters to the next page.
fn filters_query(q: &HashMap<String, String>) -> String {
    let mut keys: Vec<&String> = q
        .keys()
        .filter(|k| k.as_str() != "before" && q.get(*k).is_some_and(|v| !v.is_empty()))
        .collect();
    keys.sort();
    let mut out = form_urlencoded::Serializer::new(String::new());
    for k in keys {
        if let Some(v) = q.get(k) {
            out.append_pair(k, v);
        }
    }
    out.finish()
}

/// `GET /requests`: newest first, filtered, paged by key.
pub async fn requests(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let filter = match request_filter(&q) {
        Ok(f) => f,
        Err(e) => return failed(e, &who),
    };
    let page = match state.store.list_requests(&filter).await {
        Ok(p) => p,
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let now = state.clock.now();
    let value = |k: &str| q.get(k).cloned().unwrap_or_default();
    let next = page.next.map(|c| {
        let base = filters_query(&q);
        let sep = if base.is_empty() { "" } else { "&" };
        format!("/requests?{base}{sep}before={}", c.encode())
    });
    let body = html! {
        form.filters #filters method="get" action="/requests" {
            label { "Phase "
                select name="phase" {
                    option value="" { "any" }
                    @for p in Phase::ALL {
                        option value=(p.as_str()) selected[value("phase") == p.as_str()] { (p.as_str()) }
                    }
                }
            }
            label { "Namespace " input type="text" name="namespace" value=(value("namespace")) size="12"; }
            label { "Alert target (name) " input type="text" name="target" value=(value("target")) size="14"; }
            label { "Alert " input type="text" name="alert" value=(value("alert")) size="16"; }
            label { "Since " input type="datetime-local" name="since" value=(value("since")); }
            label { "Until " input type="datetime-local" name="until" value=(value("until")); }
            button type="submit" { "Filter" }
            a href="/requests" { "Clear" }
        }
        @if page.items.is_empty() {
            p.empty #no-requests { "No request matches." }
        } @else {
            table.list #requests {
                thead { tr { th { "Request" } th { "Phase" } th { "Age" } th { "Target" } th { "Alert" } th.num { "Occurrences" } th { "Updated" } } }
                tbody {
                    @for r in &page.items {
                        tr data-id=(r.id) {
                            td { a href={ "/requests/" (r.id) } { code { (short(&r.id)) } } }
                            td { (phase_badge(r.phase)) }
                            td title=(r.created_at.to_rfc3339()) { (age(now, r.created_at)) }
                            td.target title={ "alert target: " (target_text(r)) } { (owner_text(r)) }
                            td { (r.signal.name) @if let Some(s) = &r.signal.severity { " " span.sev { (s) } }
                                 @if r.signal.mode == crate::domain::SignalMode::Proactive { " " span.badge.proactive title="a prediction, not a firing alert" { "proactive" } } }
                            td.num { (r.occurrence_count) }
                            td { (age(now, r.updated_at)) " ago" }
                        }
                    }
                }
            }
        }
        @if let Some(href) = next {
            p.paging { a #next-page href=(href) { "Older requests →" } }
        }
    };
    respond(StatusCode::OK, layout("Requests", Some(&who), body))
}

fn millis(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}

/// The verified root owner when the investigation found it, else the alert's target.
fn owner_text(r: &RemediationRequest) -> String {
    match r
        .state
        .analysis
        .as_ref()
        .and_then(|a| a.root_owner.as_ref())
    {
        Some(owner) => owner.to_string(),
        None => target_text(r),
    }
}

fn target_text(r: &RemediationRequest) -> String {
    match &r.target {
        Some(t) => t.to_string(),
        None => "(no target label)".into(),
    }
}

/// How long each phase took, from the transitions in the trail.
fn phase_durations(trail: &[AuditEvent]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut entered: Option<(String, chrono::DateTime<chrono::Utc>)> = None;
    for (e, t) in trail.iter().filter_map(|e| Some((e, e.transition()?))) {
        let to = t.to.map_or("?", Phase::as_str);
        let from = t.from.map_or("?", Phase::as_str);
        let started = match &entered {
            Some((p, at)) if p == from => *at,
            _ => trail.first().map_or(e.at, |f| f.at),
        };
        out.push((
            from.to_owned(),
            (e.at - started).num_milliseconds() as f64 / 1000.0,
        ));
        entered = Some((to.to_owned(), e.at));
    }
    out
}

fn chain_status(report: &ChainReport) -> Markup {
    html! {
        @match &report.broken {
            None => span.chain.ok #chain { "Audit chain intact · " (report.events) " events"
                @if report.unchained > 0 { " (" (report.unchained) " written before the chain existed)" } },
            Some(b) => span.chain.bad #chain { "Audit chain BROKEN at event " (b.event_id) ": " (b.reason) },
        }
    }
}

/// `GET /requests/{id}`: everything about one request, updated live while it runs.
pub async fn request(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match render_request(&state, &id, &who).await {
        Ok((title, body)) => respond(StatusCode::OK, layout(&title, Some(&who), body)),
        Err(e) => failed(e, &who),
    }
}

async fn render_request(
    state: &AppState,
    id: &str,
    who: &Principal,
) -> Result<(String, Markup), ApiError> {
    let id = Uuid::parse_str(id).map_err(|_| ApiError::bad("id", "not a request id (a UUID)"))?;
    let store = &state.store;
    let Some(r) = store.get_request(id).await? else {
        return Err(ApiError::NotFound(format!("no remediation request {id}")));
    };
    let trail = store.audit_trail(id).await?;
    let chain = store.verify_request_chain(id).await?;
    let signals = store
        .list_signals(&SignalFilter {
            request_id: Some(id),
            limit: 100,
            ..Default::default()
        })
        .await?;
    let approval = store.approval_of_request(id).await?;
    let notifications = match &approval {
        Some(a) => store.notifications(a.id).await?,
        None => Vec::new(),
    };
    let target: Option<Target> = r
        .state
        .analysis
        .as_ref()
        .and_then(|a| a.root_owner.clone())
        .or_else(|| r.target.clone());
    let now = state.clock.now();
    let history = match &target {
        Some(t) => {
            store
                .history(&t.fingerprint(), now - crate::history::HISTORY_WINDOW)
                .await?
        }
        None => Vec::new(),
    };
    let gate_event = trail.iter().rev().find_map(AuditEvent::gate);
    let last_id = trail.last().map_or(0, |e| e.id);
    let s = &r.state;
    let title = format!("{} · {}", r.signal.name, target_text(&r));
    let body = html! {
        section #overview {
            dl.facts {
                dt { "Phase" } dd #phase { (phase_badge(r.phase)) @if let Some(reason) = &r.reason { " " span.reason { (said(reason)) } } }
                dt { "Request" } dd { code { (r.id) } }
                dt { "Trace" } dd #trace { code { (r.trace.trace_id_hex()) } }
                dt { "Target" } dd { (target_text(&r)) }
                dt { "Alert" } dd { (r.signal.name) " (" (r.signal.mode.as_str()) ")" @if let Some(sev) = &r.signal.severity { " · " (sev) } }
                @if let Some(asked) = &r.signal.requested {
                    dt { "Asked for" } dd #requested { code { (asked.workflow_id) } " by " (asked.requested_by) " after reviewing " a href={ "/requests/" (asked.follows) } { "request " (asked.follows) }
                        @if let Some(m) = &asked.message { " — “" (said(m)) "”" } }
                }
                dt { "Occurrences" } dd { (r.occurrence_count) " · first " (when(r.first_seen)) " · last " (when(r.last_seen)) }
                dt { "Opened" } dd { (when(r.created_at)) " · updated " (when(r.updated_at)) }
                dt { "Audit" } dd { (chain_status(&chain)) }
            }
            @let durations = phase_durations(&trail);
            @if !durations.is_empty() {
                p.durations { "Time in each phase: "
                    @for (i, (phase, secs)) in durations.iter().enumerate() {
                        @if i > 0 { " → " }
                        (phase) " " (format!("{secs:.1}")) " s"
                    }
                }
            }
        }
        section #signals {
            h2 { "Signals" }
            table.list {
                thead { tr { th { "Status" } th { "Starts" } th { "Received" } th { "Fingerprint" } } }
                tbody { @for sig in &signals.items { tr { td { (sig.status.as_str()) } td { (when(sig.starts_at)) } td { (when(sig.received_at)) } td { code { (sig.fingerprint) } } } } }
            }
        }
        section #enrichment {
            h2 { "Enrichment" }
            @match &s.enrichment {
                None => p.empty { "Not enriched yet." },
                Some(e) => dl.facts {
                    dt { "Environment" } dd { (e.environment) }
                    dt { "Priority" } dd { (e.priority.as_deref().unwrap_or("—")) }
                    dt { "Business unit" } dd { (e.business_unit.as_deref().unwrap_or("—")) }
                    dt { "Risk tolerance" } dd { (e.risk_tolerance.as_deref().unwrap_or("—")) }
                    dt { "From" } dd { (e.sources.join("; ")) }
                },
            }
        }
        section #investigation {
            h2 { "Investigation" }
            @match &s.analysis {
                None => p.empty { "Not investigated yet." },
                Some(a) => {
                    p { "Investigator " code { (a.investigator) } " · " (count(a.usage.total() as i64)) " tokens ("
                        (a.usage.prompt_tokens) " prompt, " (a.usage.completion_tokens) " completion)" }
                    @if let Some(plan) = &a.plan {
                        h3 { "Plan" @if let Some(from) = &plan.from { " (" (from) ")" } }
                        ol.plan #plan { @for step in &plan.steps { li.done[step.done] { (said(&step.step)) @if step.done { " ✓" } } } }
                    }
                    @let turns: Vec<_> = a.llm_calls.iter().chain(s.selection.iter().flat_map(|x| x.llm_calls.iter())).collect();
                    @if !turns.is_empty() {
                        h3 { "Model turns" }
                        table.list #llm-turns {
                            thead { tr { th { "Invocation" } th { "Model" } th.num { "Prompt" } th.num { "Completion" } th.num { "Time" } th { "Finish" } th.num { "Tool calls" } } }
                            tbody { @for t in &turns { tr { td { (t.invocation) } td { (t.model) } td.num { (t.prompt_tokens) } td.num { (t.completion_tokens) } td.num { (millis(t.duration_ms)) } td { (format!("{:?}", t.finish_reason)) } td.num { (t.tool_calls) } } } }
                        }
                    }
                    @if !a.tool_calls.is_empty() {
                        h3 { "Tool calls" }
                        table.list #tool-calls {
                            thead { tr { th { "#" } th { "Tool" } th { "Arguments" } th { "Result" } } }
                            tbody { @for (i, c) in a.tool_calls.iter().enumerate() {
                                tr { td { (i + 1) } td { code { (c.tool) } } td { code.args { (crate::redact::sanitize_value(&c.arguments).to_string()) } }
                                     td { @if c.ok { "ok" } @else { "error" } " · " (c.output_chars) " chars" @if c.truncated { " (truncated)" } " · " (millis(c.duration_ms))
                                          @if let Some(x) = &c.excerpt { details.output { summary { "output" } pre { (said(x)) } } } } }
                            } }
                        }
                    }
                    h3 { "Root cause" }
                    dl.facts #rca {
                        dt { "Summary" } dd { (said(&a.rca.root_cause_analysis.summary)) }
                        dt { "Severity" } dd { (a.rca.root_cause_analysis.severity) }
                        dt { "Outcome" } dd { (a.rca.investigation_outcome.as_str()) " · confidence " (format!("{:.2}", a.rca.confidence)) }
                        dt { "Factors" } dd { ul { @for f in &a.rca.root_cause_analysis.contributing_factors { li { (said(f)) } } } }
                        @if let Some(owner) = &a.root_owner { dt { "Root owner" } dd { (owner.to_string()) } }
                        @if let Some(h) = &a.spec_hash { dt { "Spec hash" } dd { code { (h) } } }
                        @if !a.warnings.is_empty() { dt { "Warnings" } dd { ul { @for w in &a.warnings { li { (said(w)) } } } } }
                        @if a.rca.needs_human_review { dt { "Human review" } dd { (said(a.rca.human_review_reason.as_deref().unwrap_or("needed"))) } }
                        @if let Some(sig) = &a.signature { dt { "Signature" } dd { code { (sig.hash) } " — alert " (sig.facts.alert) ", " (sig.facts.kind) ", pods [" (sig.facts.pod_states.join(", ")) "], events [" (sig.facts.events.join(", ")) "]" } }
                        @if !a.learned.is_empty() {
                            dt { "Learned (hints, not instructions)" }
                            dd { ul #learned { @for l in &a.learned { li { (said(&crate::history::patterns::describe(l))) } } } }
                        }
                    }
                }
            }
        }
        section #selection {
            h2 { "Workflow selection" }
            @match &s.selection {
                None => p.empty { "No selection yet." },
                Some(sel) => {
                    @if let Some(w) = &sel.selected {
                        dl.facts {
                            dt { "Selected" } dd { code { (w.workflow_id) } " v" (w.version) " (" (w.action_type) ") · confidence " (format!("{:.2}", w.confidence)) }
                            dt { "Rationale" } dd { (said(&w.rationale)) }
                            @if let Some(l) = &sel.learned { dt { "Learned" } dd #learned-use { (said(&l.reason)) } }
                            @if let Some(r) = &sel.replaced { dt { "Replaced at approval" } dd { code { (r) } } }
                        }
                        (json_block("Parameters", &serde_json::Value::Object(w.parameters.clone())))
                    } @else {
                        p { "No workflow: " (said(sel.no_workflow_reasoning.as_deref().unwrap_or("—"))) }
                    }
                    @if !sel.alternatives.is_empty() {
                        h3 { "Alternatives" }
                        ul #alternatives { @for alt in &sel.alternatives { li { code { (alt.workflow_id) } " — " (said(&alt.rationale)) } } }
                    }
                    p { "Routed: " (format!("{:?}", sel.outcome.kind)) " → " (sel.outcome.next_phase.as_str()) " — " (said(&sel.outcome.reason)) }
                }
            }
        }
        section #proof {
            h2 { "Proof" }
            @if let Some(why) = r.reason.as_deref().filter(|why| ended_unproven(why)) {
                p.error #proof-outcome { strong { "Not executed: " } (said(why)) }
            }
            @match &s.proof {
                None => p.empty { "Nothing was proven: no action was proposed, or the request is older than proofs." },
                Some(p) => {
                    h3 { "At selection" }
                    (super::proof::detail(p, "proof-selection"))
                }
            }
            @if let Some(p) = &s.proof_before_write {
                h3 { "Before the first write" }
                (super::proof::detail(p, "proof-before-write"))
            }
        }
        section #policy {
            h2 { "Policy" }
            @match &s.gate {
                None => p.empty { "Not gated yet." },
                Some(g) => {
                    dl.facts {
                        dt { "Decision" } dd #gate-decision { @if g.require_approval { "approval required" } @else { "approved automatically" } @if g.degraded { " (policy degraded: fail closed)" } }
                        dt { "Reason" } dd { (said(&g.reason)) }
                        dt { "Revision" } dd { code { (g.policy_revision.as_deref().unwrap_or("—")) } }
                        dt { "Risk factors" } dd { ul { @for f in &g.risk_factors { li { (f.score) " — " (said(&f.reason)) } } } }
                    }
                    @if let Some(g) = &gate_event {
                        (json_block("Policy input", &g.input))
                        (json_block("Policy output", &serde_json::json!(g.output)))
                    }
                }
            }
        }
        (super::takeover::form(state, who, &r))
        section #approval {
            h2 { "Approval" }
            @match &approval {
                None => p.empty { "No approval was asked for." },
                Some(a) => {
                    dl.facts {
                        dt { "Status" } dd #approval-status { (a.status().as_str()) }
                        dt { "Risk" } dd { (a.risk_score) " — " (said(&a.risk_reason)) }
                        dt { "Expires" } dd { (when(a.expires_at)) }
                        dt { "Approvers" } dd { (a.approvers.join(", ")) @if !a.slack_approvers.is_empty() { " · Slack " (a.slack_approvers.join(", ")) } }
                        @if let Some(d) = &a.decision {
                            dt { "Decided" } dd #decided-by { (d.decision.as_str()) " by " (d.decided_by) " via " (d.decided_via.as_str()) " at " (when(d.decided_at))
                                @if let Some(alt) = &d.alternative { " · alternative " code { (alt) } }
                                @if let Some(m) = &d.message { " · “" (said(m)) "”" } }
                        }
                        @if let Some(n) = &a.note {
                            dt { "Note" } dd #approval-note { (said(n)) }
                        }
                    }
                    @if a.status() == crate::domain::ApprovalStatus::Pending {
                        p { a href="/inbox" { "Decide in the approval inbox →" } }
                    }
                    @if !notifications.is_empty() {
                        h3 { "Notifications" }
                        table.list #notifications {
                            thead { tr { th { "Channel" } th { "To" } th { "Kind" } th { "Status" } th.num { "Attempts" } th { "Last error" } } }
                            tbody { @for n in &notifications { tr { td { (n.channel.as_str()) } td { (n.recipient) } td { (n.kind.as_str()) } td { (n.status.as_str()) } td.num { (n.attempts) } td { (n.last_error.as_deref().unwrap_or("")) } } } }
                        }
                    }
                }
            }
        }
        section #execution {
            h2 { "Execution" }
            @match &s.execution {
                None => p.empty { "Nothing executed." },
                Some(x) => {
                    dl.facts {
                        dt { "Workflow" } dd { code { (x.workflow_id) } " v" (x.workflow_version) " (" (x.action_type) ") on " (x.target.to_string()) }
                        dt { "Outcome" } dd #execution-outcome { (format!("{:?}", x.outcome)) @if x.dry_run { " (dry run)" } " — " (said(&x.message)) }
                        dt { "Spec" } dd { code { (x.pre_spec_hash.as_deref().unwrap_or("—")) } " → " code { (x.post_spec_hash.as_deref().unwrap_or("—")) } }
                    }
                    table.list #execution-steps {
                        thead { tr { th { "#" } th { "Action" } th { "Status" } th { "At" } th { "Detail" } } }
                        tbody { @for st in &x.steps { tr { td { (st.index) } td { code { (st.action) } } td { (format!("{:?}", st.status)) } td { (when(st.at)) } td { code.args { (crate::redact::sanitize_value(&st.detail).to_string()) } } } } }
                    }
                }
            }
        }
        section #verification {
            h2 { "Verification" }
            @match &s.assessment {
                None => p.empty { "Not verified yet." },
                Some(v) => dl.facts {
                    dt { "Score" } dd #verification-score { (v.score.map_or("—".into(), |x| format!("{x:.2}"))) @if v.effective { " · effective" } @else { " · not effective" } " (" (format!("{:?}", v.reason)) ")" }
                    dt { "Parts" } dd { "health " (v.health_score.map_or("—".into(), |x| format!("{x:.2}"))) " · alert " (v.alert_score.map_or("—".into(), |x| format!("{x:.2}"))) " · metrics " (v.metrics_score.map_or("—".into(), |x| format!("{x:.2}"))) }
                    dt { "Signal resolved" } dd { (if v.signal_resolved { "yes" } else { "no" }) }
                    dt { "Details" } dd { ul { @for d in &v.details { li { (said(d)) } } } }
                },
            }
        }
        @if let Some(u) = &s.undo {
            section #undo {
                h2 { "Made worse" }
                dl.facts {
                    dt { "Worse than before" } dd #undo-worse { ul { @for w in &u.worse { li { (said(w)) } } } }
                    dt { "Before" } dd { (u.before.summary()) " · " (when(u.before.observed_at)) }
                    dt { "After" } dd { (u.after.summary()) " · " (when(u.after.observed_at)) }
                    dt { "Decision" } dd #undo-decision { (said(&u.decision)) }
                    dt { "Restore" } dd #undo-restore {
                        @match &u.restore {
                            None if u.decided => "decided, not run yet",
                            None => "nothing was written: a person decides",
                            Some(r) => {
                                strong { (if r.restored { "Undone" } else { "Not undone" }) }
                                " — " (said(&r.message)) " · " (when(r.at))
                                @if let Some(h) = &r.restored_spec_hash { " · spec " code { (h) } }
                            }
                        }
                    }
                    @if let Some(p) = u.restore.as_ref().and_then(|r| r.proof.as_ref()) {
                        dt { "Its proof" } dd { ul { @for o in &p.obligations { li { code { (o.id) } " " (format!("{:?}", o.status)) ": " (said(&o.evidence.join("; "))) } } } }
                    }
                }
            }
        }
        section #history {
            h2 { "Target history" }
            @if history.is_empty() {
                p.empty { "No earlier remediation of this target in 90 days." }
            } @else {
                table.list {
                    thead { tr { th { "Completed" } th { "Alert" } th { "Workflow" } th { "Outcome" } th.num { "Effectiveness" } } }
                    tbody { @for h in &history { tr { td { (when(h.completed_at)) } td { (h.signal_name) } td { code { (h.workflow_id) } } td { (h.outcome) } td.num { (h.effectiveness_score.map_or("—".into(), |x| format!("{x:.2}"))) } } } }
                }
            }
            @if let Some(t) = &target {
                p { a href={ "/history?kind=" (t.kind) "&name=" (t.name) @if let Some(ns) = &t.namespace { "&namespace=" (ns) } } { "Full history of " (t.to_string()) " →" } }
            }
        }
        section #trail {
            h2 { "Timeline" span.live #live hidden { " · live" } }
            ol.timeline #timeline data-events=(format!("/api/v1/requests/{}/events", r.id)) data-after=(last_id) data-terminal=(r.phase.is_terminal()) {
                @for e in &trail {
                    @for (n, t) in typed(e).into_iter().enumerate() {
                        (timeline_item(&format!("{}.{n}", e.id), t.kind, &t.data))
                    }
                }
            }
        }
        script src="/static/live.js" defer {}
    };
    Ok((title, body))
}

/// Whether a request's reason says it ended because what was proposed or approved did not
/// hold: the target changed after the approval, the proof failed (at selection or before the
/// write), or there was no proof to bind the approval to.
fn ended_unproven(reason: &str) -> bool {
    ["target_changed", "proof_failed", "not_proven"]
        .iter()
        .any(|p| reason.starts_with(p))
}

/// One timeline entry; the live script builds the same shape from a streamed event (an entry
/// whose `data.bad` is true — a refuted proof, a change not executed — is marked).
fn timeline_item(id: &str, kind: &str, data: &serde_json::Value) -> Markup {
    let text = |k: &str| {
        data.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let bad = data.get("bad").and_then(serde_json::Value::as_bool) == Some(true);
    html! {
        li.bad[bad] id={ "ev-" (id) } data-kind=(kind) {
            span.kind { (kind) }
            " "
            time { (text("at").get(..19).unwrap_or("").replace('T', " ")) }
            " "
            span.actor { (text("actor")) }
            " "
            span.msg { (text("message")) }
        }
    }
}

/// `GET /history?kind=&name=&namespace=`: a target's remediations.
pub async fn history(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let (Some(kind), Some(name)) = (q.get("kind"), q.get("name")) else {
        return failed(ApiError::bad("kind", "kind and name are required"), &who);
    };
    let target = Target::new(kind.clone(), name.clone(), q.get("namespace").cloned());
    let since = q
        .get("since")
        .and_then(|s| parse_time(s))
        .unwrap_or_else(|| state.clock.now() - crate::history::HISTORY_WINDOW);
    let records = match state.store.history(&target.fingerprint(), since).await {
        Ok(r) => r,
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let body = html! {
        @if records.is_empty() { p.empty { "No remediation of this target since " (when(since)) "." } }
        @else {
            table.list #history {
                thead { tr { th { "Completed" } th { "Request" } th { "Alert" } th { "Workflow" } th { "Outcome" } th.num { "Effectiveness" } th { "Spec before → after" } } }
                tbody { @for h in &records { tr {
                    td { (when(h.completed_at)) }
                    td { a href={ "/requests/" (h.remediation_uid) } { code { (h.remediation_uid.get(..8).unwrap_or(&h.remediation_uid)) } } }
                    td { (h.signal_name) } td { code { (h.workflow_id) } } td { (h.outcome) }
                    td.num { (h.effectiveness_score.map_or("—".into(), |x| format!("{x:.2}"))) }
                    td { code { (h.pre_remediation_spec_hash.as_deref().unwrap_or("—").get(..19).unwrap_or("—")) } " → " code { (h.post_remediation_spec_hash.as_deref().unwrap_or("—").get(..19).unwrap_or("—")) } }
                } } }
            }
        }
    };
    respond(
        StatusCode::OK,
        layout(&format!("History of {target}"), Some(&who), body),
    )
}
