//! `GET /api/v1/requests/{id}/events`: a request's typed events as Server-Sent Events, read
//! from the audit trail — so a client that reconnects with `Last-Event-ID` resumes exactly where
//! it stopped, across daemon restarts and replicas, with nothing kept in memory.
//!
//! Each audit event becomes one or more typed events (an investigation's audit event carries
//! its plan, every tool call and the model usage). An event's id is `<audit id>.<n>`: the audit
//! event and the position within it. Names and shapes are documented in `docs/events.md`.
//!
//! While the request runs, the stream reads the trail (an indexed read) whenever the store's
//! bell says the request's trail grew — on PostgreSQL also when another replica wrote it — and
//! at the latest every `stream_poll` (a wake-up is a hint; the read is what counts). It sends a
//! comment every 15 s to keep proxies from closing it, and ends with an `end` event once the
//! request is terminal and everything is sent.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{ApiError, AppState, Caller};
use crate::domain::{
    ActionType, AuditEvent, AuditPayload, LlmCallRecord, Proof, ProofPoint, ProofVerdict, Proposer,
    RcaPayload, Role, Usage, audit,
};
use crate::redact::{sanitize_text, sanitize_value};
use crate::store::TrailWatch;

/// Audit events read per poll.
const BATCH: i64 = 200;
/// A tool call's arguments or a message longer than this is cut.
const MAX_TEXT: usize = 2_000;

/// A position in the stream: after sub-event `n` of audit event `id` (`n = u32::MAX`: after
/// the whole audit event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub id: i64,
    pub n: u32,
}

impl Position {
    /// `Last-Event-ID` (`123.4`, or `123` for a whole audit event).
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        match raw.split_once('.') {
            Some((id, n)) => Some(Self {
                id: id.parse().ok()?,
                n: n.parse().ok()?,
            }),
            None => Some(Self {
                id: raw.parse().ok()?,
                n: u32::MAX,
            }),
        }
    }
}

/// One typed event.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub kind: &'static str,
    pub data: Value,
}

fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_TEXT {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(MAX_TEXT).collect();
    out.push_str("… [shortened]");
    out
}

/// The typed events one audit event stands for, in order.
pub fn typed(e: &AuditEvent) -> Vec<Typed> {
    let p = &e.payload;
    let base = |kind: &'static str, extra: Value| {
        let mut data = json!({
            "audit_id": e.id,
            "at": e.at,
            "phase": e.phase,
            "actor": e.actor,
            "message": clip(&sanitize_text(&e.message)),
        });
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        Typed { kind, data }
    };
    // A part of an audit event gets its own line instead of the whole event's message.
    let said = |kind: &'static str, line: String, extra: Value| {
        let mut t = base(kind, extra);
        t.data["message"] = json!(clip(&sanitize_text(&line)));
        t
    };
    match e.typed_payload() {
        AuditPayload::Rca(r) => return rca_events(&r, &said, &base),
        AuditPayload::Selection(s) => {
            let mut out = Vec::new();
            out.extend(usage("selection", s.llm_usage, &s.llm_calls, &said));
            out.push(base(
                "selection",
                json!({
                    "selected": sanitize_value(&json!(s.selected)),
                    "alternatives": sanitize_value(&json!(s.alternatives)),
                    "outcome": s.outcome,
                    "learned": s.learned,
                }),
            ));
            return out;
        }
        AuditPayload::Proof(proof) => return vec![proof_event(&proof, &said)],
        AuditPayload::Transition(t) => {
            return vec![base(
                "phase",
                json!({"from": t.from, "to": t.to, "reason": t.reason}),
            )];
        }
        AuditPayload::Gate(g) => return vec![base("gate_decision", json!({"decision": g}))],
        AuditPayload::Guardrail(g) => return vec![base("guardrail", json!({"detail": g}))],
        AuditPayload::Execution(x) => {
            return vec![base(
                "execution",
                json!({"detail": sanitize_value(&json!(x))}),
            )];
        }
        AuditPayload::Step(s) => {
            return vec![base(
                "execution_step",
                json!({"step": sanitize_value(&json!(s))}),
            )];
        }
        AuditPayload::ApprovalDecided(d) => {
            return vec![base(
                audit::APPROVAL_DECIDED,
                json!({"decision": d.decision}),
            )];
        }
        AuditPayload::FollowUp(f) if e.kind == audit::APPROVAL_NOT_EXECUTED => {
            return vec![base(
                audit::APPROVAL_NOT_EXECUTED,
                json!({
                    "approval_id": f.approval_id,
                    "note": clip(&sanitize_text(&f.note)),
                    "bad": true,
                }),
            )];
        }
        AuditPayload::LearnedHint(l) => return vec![base("learned", json!({"used": l.learned}))],
        AuditPayload::PatternLearned(o) => {
            return vec![base(audit::PATTERN_LEARNED, json!({"outcome": o.outcome}))];
        }
        // A change that made its target worse shows with the undo's events, below.
        AuditPayload::FollowUp(_) | AuditPayload::Other(_) => {}
    }
    // Kinds without a typed payload, and a typed kind's payload this version cannot read
    // (shown as stored).
    match e.kind.as_str() {
        audit::TRANSITION => vec![base(
            "phase",
            json!({"from": p.get("from"), "to": p.get("to"), "reason": p.get("reason")}),
        )],
        audit::RECEIVED | audit::OCCURRENCE | audit::SIGNAL_RESOLVED => {
            vec![base(
                "signal",
                json!({"signal": e.kind, "detail": sanitize_value(p)}),
            )]
        }
        audit::ENRICHMENT => vec![base("enrichment", json!({"detail": sanitize_value(p)}))],
        // A proof this version cannot read shows with the audit event's own message.
        audit::PROOF => vec![base(
            "proof",
            json!({"proof": sanitize_value(p.get("proof").unwrap_or(&Value::Null))}),
        )],
        audit::APPROVAL_NOT_EXECUTED => vec![base(
            audit::APPROVAL_NOT_EXECUTED,
            json!({
                "approval_id": p.get("approval_id"),
                "note": p.get("note").and_then(Value::as_str).map(|n| clip(&sanitize_text(n))),
                "bad": true,
            }),
        )],
        // A remediation that made its target worse: what, the decision, the restore.
        audit::UNDO_DECIDED | audit::UNDO | audit::APPROVAL_MADE_WORSE => vec![base(
            "undo",
            json!({"undo": e.kind, "detail": sanitize_value(p), "bad": true}),
        )],
        audit::GATE => vec![base("gate_decision", json!({"decision": p}))],
        audit::APPROVAL_REQUESTED => vec![base(audit::APPROVAL_REQUESTED, json!({"approval": p}))],
        audit::APPROVAL_DECIDED => vec![base(
            audit::APPROVAL_DECIDED,
            json!({"decision": p.get("decision")}),
        )],
        audit::APPROVAL_REFUSED | audit::APPROVAL_DECISION_REFUSED => {
            vec![base("approval_refused", json!({}))]
        }
        audit::NOTIFICATION => vec![base("notification", json!({"detail": p}))],
        audit::EXECUTION_STEP => vec![base("execution_step", json!({"step": sanitize_value(p)}))],
        audit::EXECUTION => vec![base("execution", json!({"detail": sanitize_value(p)}))],
        audit::GUARDRAIL => vec![base("guardrail", json!({"detail": p}))],
        audit::ASSESSMENT => vec![base("verification", json!({"assessment": p}))],
        audit::LEARNED_HINT => vec![base("learned", json!({"used": p.get("learned")}))],
        audit::PATTERN_LEARNED => vec![base(
            audit::PATTERN_LEARNED,
            json!({"outcome": p.get("outcome")}),
        )],
        audit::TIMEOUT | audit::LLM_BUDGET => vec![base("error", json!({"detail": p}))],
        _ => vec![base("audit", json!({"kind": e.kind}))],
    }
}

/// What one invocation cost, where a model answered (the offline investigator has none).
fn usage(
    invocation: &str,
    u: Usage,
    calls: &[LlmCallRecord],
    said: &dyn Fn(&'static str, String, Value) -> Typed,
) -> Option<Typed> {
    if calls.is_empty() && u.total() == 0 {
        return None;
    }
    Some(said(
        "llm_usage",
        format!(
            "{invocation}: {} prompt + {} completion tokens in {} model call(s)",
            u.prompt_tokens,
            u.completion_tokens,
            calls.len()
        ),
        json!({"invocation": invocation, "usage": u, "calls": calls}),
    ))
}

/// Invocation 1's event as the chat reads it: its plan, each tool call and its result, what it
/// cost, the patterns it learned from, and the analysis.
fn rca_events(
    r: &RcaPayload,
    said: &dyn Fn(&'static str, String, Value) -> Typed,
    base: &dyn Fn(&'static str, Value) -> Typed,
) -> Vec<Typed> {
    let mut out = Vec::new();
    if let Some(plan) = &r.plan {
        let steps: Vec<&str> = plan.steps.iter().map(|s| s.step.as_str()).collect();
        out.push(said(
            "plan",
            format!("plan: {}", steps.join("; ")),
            json!({"plan": plan}),
        ));
    }
    for (i, call) in r.tool_calls.iter().enumerate() {
        let args = sanitize_value(&call.arguments);
        let name = &call.tool;
        out.push(said(
            "tool_call",
            format!("{name} {args}"),
            json!({"call": i + 1, "tool": name, "arguments": clip(&args.to_string())}),
        ));
        let ms = call
            .duration_ms
            .map(|ms| format!(" in {ms} ms"))
            .unwrap_or_default();
        out.push(said(
            "tool_result",
            format!(
                "{name}: {} · {} characters{ms}",
                if call.ok { "ok" } else { "error" },
                call.output_chars
            ),
            json!({
                "call": i + 1,
                "tool": name,
                "ok": call.ok,
                "output_chars": call.output_chars,
                "truncated": call.truncated,
                "duration_ms": call.duration_ms,
                // The whole output (up to 64 KiB) where the trail has it, else the excerpt.
                "output": call.output.as_deref().or(call.excerpt.as_deref()).map(sanitize_text),
            }),
        ));
    }
    out.extend(usage("rca", r.llm_usage, &r.llm_calls, said));
    if !r.learned.is_empty() {
        let lines: Vec<String> = r
            .learned
            .iter()
            .map(|l| {
                let off = if l.suppressed {
                    ", suppressed (cooldown)"
                } else {
                    ""
                };
                format!("{} weight {:.2}{off}", l.workflow_id, l.weight)
            })
            .collect();
        out.push(said(
            "learned",
            format!(
                "learned from verified outcomes (hints, not instructions): {}",
                lines.join("; ")
            ),
            json!({"signature": r.signature, "learned": r.learned}),
        ));
    }
    out.push(base(
        "rca",
        json!({
            "rca": sanitize_value(&json!(r.rca)),
            "root_owner": r.root_owner,
            "warnings": r.warnings,
        }),
    ));
    out
}

/// A proof's audit event as one line a person reads: what was proven, at which point, the
/// verdict with its count, why it is refuted, and (at selection) the dry run's change. `bad`
/// marks a refuted proof.
fn proof_event(proof: &Proof, said: &dyn Fn(&'static str, String, Value) -> Typed) -> Typed {
    let what = if proof.action_type == ActionType::NoAction {
        format!("no action needed on {}", proof.target)
    } else {
        format!("{} on {}", proof.action_type, proof.target)
    };
    let when = match (proof.point, proof.proposer) {
        (ProofPoint::BeforeWrite, _) => "checked again before the first write",
        (ProofPoint::BeforeUndo, _) => "before undoing it: it made its target worse",
        (ProofPoint::Selection, Proposer::Approver) => "the approver's alternative",
        (ProofPoint::Selection, Proposer::Model) => "proposed by the model",
        (ProofPoint::Selection, Proposer::Offline) => "proposed by the offline rules",
        (ProofPoint::Selection, Proposer::Reviewer) => "asked for by a reviewer",
    };
    let mut line = format!("{what} ({when}): {}", crate::notify::render::verdict(proof));
    let refuted = proof.verdict == ProofVerdict::Refuted;
    // One line: the failing obligations by their statements (their evidence is on the
    // request page and in `data.proof`), the change by its first line.
    if refuted {
        let failed: Vec<&str> = proof.failed().map(|o| o.statement.as_str()).collect();
        line.push_str(&format!(" — {}", failed.join("; ")));
    }
    if proof.point == ProofPoint::Selection && proof.change.is_some() {
        let change = crate::notify::render::change_of(Some(proof));
        if let Some(first) = change.first() {
            line.push_str(&format!("; would change: {first}"));
            if change.len() > 1 {
                line.push_str(&format!(" (and {} more)", change.len() - 1));
            }
        }
    }
    said(
        "proof",
        line,
        json!({
            "verdict": proof.verdict,
            "point": proof.point,
            "proposer": proof.proposer,
            "bad": refuted,
            "proof": sanitize_value(&json!(proof)),
        }),
    )
}

/// `GET /api/v1/requests/{id}/events[?after=<audit id>]`, resumable with `Last-Event-ID`.
#[utoipa::path(get, path = "/api/v1/requests/{id}/events", tag = "requests",
    params(("id" = String, Path),
           ("after" = Option<i64>, Query, description = "Start after this audit event id"),
           ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event (`<audit id>.<n>`)")),
    responses((status = 200, description = "text/event-stream of typed events (docs/events.md); ends with `end` once the request is finished", content_type = "text/event-stream", body = String)),
    security(("bearer" = []), ("session" = [])))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    caller.need(Role::Viewer)?;
    super::query::reject_unknown(&q, &["after"])?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::bad("id", "not a UUID"))?;
    if state.store.get_request(id).await?.is_none() {
        return Err(ApiError::NotFound(format!("no remediation request {id}")));
    }
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|raw| {
            Position::parse(raw)
                .ok_or_else(|| ApiError::bad("Last-Event-ID", "expected <audit id>.<n>"))
        })
        .transpose()?;
    let after = match q.get("after") {
        Some(raw) => Some(Position {
            id: raw
                .parse()
                .map_err(|_| ApiError::bad("after", "not an audit event id"))?,
            n: u32::MAX,
        }),
        None => None,
    };
    let start = resume.or(after).unwrap_or(Position { id: 0, n: u32::MAX });
    let feed = Feed {
        // Before the first read: nothing committed after it goes unheard.
        watch: state.store.watch_trail(),
        state,
        request: id,
        at: start,
        queue: VecDeque::new(),
        done: false,
        first: true,
    };
    let events = futures::stream::unfold(feed, |mut feed| async move {
        feed.next().await.map(|e| (Ok(e), feed))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

struct Feed {
    state: Arc<AppState>,
    watch: TrailWatch,
    request: Uuid,
    at: Position,
    queue: VecDeque<Event>,
    done: bool,
    first: bool,
}

impl Feed {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            if !self.first {
                tokio::select! {
                    _ = self.watch.wait(Some(self.request), self.state.stream_poll) => {}
                    // The daemon stops: end the stream so the server can drain.
                    () = self.state.shutdown.cancelled() => {
                        self.done = true;
                        return None;
                    }
                }
            }
            self.first = false;
            // Whether the request was terminal before this read: then the read has it all.
            let terminal = match self.state.store.get_request(self.request).await {
                Ok(Some(r)) => r.phase.is_terminal(),
                Ok(None) => true,
                Err(e) => {
                    self.done = true;
                    return Some(error_event(&e.to_string()));
                }
            };
            let from = if self.at.n == u32::MAX {
                self.at.id
            } else {
                self.at.id - 1
            };
            match self
                .state
                .store
                .audit_after(self.request, from, BATCH)
                .await
            {
                Ok(rows) => {
                    let full = rows.len() as i64 == BATCH;
                    for row in &rows {
                        for (n, t) in typed(row).into_iter().enumerate() {
                            let n = n as u32;
                            if row.id == self.at.id && self.at.n != u32::MAX && n <= self.at.n {
                                continue;
                            }
                            self.queue.push_back(
                                Event::default()
                                    .id(format!("{}.{n}", row.id))
                                    .event(t.kind)
                                    .data(t.data.to_string()),
                            );
                        }
                        self.at = Position {
                            id: row.id,
                            n: u32::MAX,
                        };
                    }
                    if terminal && !full {
                        self.done = true;
                        self.queue.push_back(
                            Event::default()
                                .event("end")
                                .data(json!({"request_id": self.request}).to_string()),
                        );
                    } else if full {
                        self.first = true;
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(error_event(&e.to_string()));
                }
            }
        }
    }
}

fn error_event(message: &str) -> Event {
    tracing::warn!(error = message, "event stream ended by a store error");
    Event::default()
        .event("stream_error")
        .data(json!({"error": "the store is unavailable; reconnect to resume"}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_whole_and_partial_events() {
        assert_eq!(Position::parse("12.3"), Some(Position { id: 12, n: 3 }));
        assert_eq!(
            Position::parse("12"),
            Some(Position {
                id: 12,
                n: u32::MAX
            })
        );
        assert_eq!(Position::parse("x"), None);
    }

    #[test]
    fn an_investigation_event_becomes_plan_tool_calls_usage_and_rca() {
        let e = AuditEvent {
            id: 7,
            request_id: None,
            at: chrono::Utc::now(),
            phase: None,
            kind: "rca".into(),
            actor: "offline".into(),
            message: "m".into(),
            payload: json!({
                "plan": {"source": "playbook", "steps": []},
                "tool_calls": [{"tool": "get_pods", "arguments": {"password": "hunter2"}, "ok": true, "output_chars": 10}],
                "llm_usage": {"prompt_tokens": 5, "completion_tokens": 1},
                "rca": {"summary": "s"},
            }),
        };
        let kinds: Vec<&str> = typed(&e).iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            ["plan", "tool_call", "tool_result", "llm_usage", "rca"]
        );
        let call = &typed(&e)[1].data;
        assert!(
            !call["arguments"].as_str().unwrap().contains("hunter2"),
            "{call}"
        );
    }

    fn event(kind: &str, message: &str, payload: Value) -> AuditEvent {
        AuditEvent {
            id: 9,
            request_id: None,
            at: chrono::Utc::now(),
            phase: None,
            kind: kind.into(),
            actor: "prover".into(),
            message: message.into(),
            payload,
        }
    }

    #[test]
    fn a_proof_reads_as_its_verdict_its_refutation_and_its_change() {
        let proof = json!({
            "action_type": "RollbackDeployment", "workflow_id": "rollback-deployment",
            "proposer": "offline", "point": "selection", "verdict": "proven",
            "obligations": [
                {"id": "rollback.revision-named", "statement": "The revision is named", "status": "holds", "evidence": ["revision 1"]},
                {"id": "rollback.no-rollout-by-others", "statement": "Nobody else rolls out", "status": "holds"},
            ],
            "target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"},
            "change": {"objects": [{"object": "Deployment shop/checkout", "changes": ["image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1", "3 pod(s) replaced, at most 1 unavailable and 1 extra at a time"]}]},
            "checked_at": "2030-06-01T12:00:00Z",
        });
        let t = typed(&event(
            "proof",
            "RollbackDeployment on shop/Deployment/checkout: proven",
            json!({"proof": proof}),
        ));
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].kind, "proof");
        assert_eq!(
            t[0].data["message"],
            "RollbackDeployment on shop/Deployment/checkout (proposed by the offline rules): proven: 2 of 2 obligations hold; \
             would change: Deployment shop/checkout: image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1 (and 1 more)"
        );
        assert_eq!(t[0].data["bad"], false);

        let mut refuted = proof.clone();
        refuted["point"] = json!("before_write");
        refuted["verdict"] = json!("refuted");
        refuted["obligations"][1]["status"] = json!("fails");
        refuted["obligations"][1]["evidence"] = json!(["revision 3 is rolling out now"]);
        let t = typed(&event(
            "proof",
            "before the first write: refuted",
            json!({"proof": refuted}),
        ));
        assert_eq!(
            t[0].data["message"],
            "RollbackDeployment on shop/Deployment/checkout (checked again before the first write): \
             refuted: 1 of 2 obligations does not hold — Nobody else rolls out"
        );
        assert_eq!(t[0].data["bad"], true);
        assert_eq!(t[0].data["verdict"], "refuted");

        // A payload this version cannot read still shows, with the audit event's own message.
        let t = typed(&event(
            "proof",
            "something: proven",
            json!({"proof": {"verdict": 1}}),
        ));
        assert_eq!(
            (t[0].kind, t[0].data["message"].as_str()),
            ("proof", Some("something: proven"))
        );
    }

    #[test]
    fn a_change_not_executed_is_its_own_event() {
        let t = typed(&event(
            "approval_not_executed",
            "Not executed: target_changed: … (2 approver message(s) queued)",
            json!({"approval_id": "a", "note": "Not executed: target_changed: …"}),
        ));
        assert_eq!(t[0].kind, "approval_not_executed");
        assert_eq!(t[0].data["note"], "Not executed: target_changed: …");
        assert_eq!(t[0].data["bad"], true);
    }

    #[test]
    fn a_remediation_that_made_things_worse_is_its_own_bad_event() {
        for kind in ["undo_decided", "undo", "approval_made_worse"] {
            let t = typed(&event(
                kind,
                "scale-replicas made shop/Deployment/web worse",
                json!({"restored": true, "message": "restored"}),
            ));
            assert_eq!(t[0].kind, "undo", "{kind}");
            assert_eq!(t[0].data["undo"], kind);
            assert_eq!(t[0].data["bad"], true);
        }
    }
}
