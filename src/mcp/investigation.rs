//! `investigate` through the daemon's chat (docs/adr/0025: a question is a request), and the
//! result as the tool returns it.
//!
//! [`ThroughChat`] hands the question — or the target the caller named — to
//! [`ChatService`], which ingests it as a request of source `chat`, requested by the caller's
//! key: the daemon's workers investigate it with the configured investigator (the model, or
//! the offline investigator), select and prove a workflow and ask the policy, and the gate
//! never lets it run without a human decision. It then waits, bounded, for the turn's answer
//! and returns what the request's stages recorded. Nothing here investigates: there is one
//! investigator, and it runs in the pipeline.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use serde_json::{Value, json};

use super::{About, Caller, Investigated, Investigations};
use crate::chat::{Asker, ChatError, ChatService};
use crate::domain::{ApprovalStatus, Phase, Role, TurnKind};
use crate::redact::sanitize_value;
use crate::store::Store;

/// How often the wait reads the request even if nothing woke it.
const POLL: Duration = Duration::from_secs(2);

pub struct ThroughChat {
    chat: Arc<ChatService>,
    store: Arc<dyn Store>,
}

impl ThroughChat {
    pub fn new(chat: Arc<ChatService>, store: Arc<dyn Store>) -> Self {
        Self { chat, store }
    }
}

/// A chat refusal as an MCP error naming what was wrong.
pub fn chat_error(e: ChatError) -> ErrorData {
    match e {
        ChatError::Bad { field, message } => {
            let field = if field == "messages" {
                "question"
            } else {
                field
            };
            ErrorData::invalid_params(format!("{field}: {message}"), None)
        }
        ChatError::NotFound(m) => ErrorData::invalid_params(m, None),
        ChatError::Forbidden(m) | ChatError::Conflict(m) => ErrorData::invalid_request(m, None),
        ChatError::TooMany(s) => ErrorData::invalid_request(
            format!(
                "more than {} investigations asked in a minute; retry in {s} s",
                crate::chat::QUESTIONS_PER_MINUTE
            ),
            None,
        ),
        ChatError::Unavailable(m) => ErrorData::internal_error(m, None),
    }
}

#[async_trait::async_trait]
impl Investigations for ThroughChat {
    async fn investigate(
        &self,
        who: &Caller,
        about: About,
        wait: Duration,
    ) -> Result<Investigated, ErrorData> {
        let asker = Asker {
            subject: who.subject.clone(),
            can_decide: who.role.allows(Role::Approver),
            trace: who.trace,
        };
        let asked = match about {
            About::Target { target, question } => {
                self.chat.ask_about(&asker, &target, &question).await
            }
            About::Question(q) => {
                if crate::chat::intent::decision(&q).is_some() {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "question: `{q}` is a decision, not a question; decide an approval \
                             with decide_approval"
                        ),
                        None,
                    ));
                }
                self.chat.ask(&asker, None, &q, None).await
            }
        }
        .map_err(chat_error)?;
        let turn = asked.turn;
        if turn.turn.kind == TurnKind::Clarify {
            // The question named nothing investigable (or there is no cluster): say why.
            return Err(ErrorData::invalid_params(
                format!(
                    "question: {}",
                    turn.turn
                        .answer
                        .as_deref()
                        .unwrap_or("nothing to investigate")
                ),
                None,
            ));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut watch = self.store.watch_trail();
        let progress = loop {
            let p = self.chat.progress(&turn).await.map_err(chat_error)?;
            let now = tokio::time::Instant::now();
            if p.answer.done || now >= deadline {
                break p;
            }
            watch
                .wait(turn.turn.request_id, (deadline - now).min(POLL))
                .await;
        };
        Ok(Investigated {
            request: progress.request,
            approval: progress.approval,
            recorded: true,
            done: progress.answer.done,
            answer: progress.answer.text,
        })
    }
}

/// The investigation as `investigate` returns it: root cause, evidence, confidence, the
/// proposed workflow, the proof and the policy's decision, which investigator, and what to do
/// next — never more than the request's record holds, sanitised again on the way out.
pub fn to_json(inv: &Investigated) -> Value {
    let Some(req) = &inv.request else {
        return json!({
            "request_id": null,
            "recorded": false,
            "done": true,
            "answer": inv.answer,
            "next": "ask about one of the objects listed (a target, or a question naming it)",
        });
    };
    let analysis = req.state.analysis.as_ref();
    let selection = req.state.selection.as_ref();
    let rca = selection.map(|s| &s.merged).or(analysis.map(|a| &a.rca));
    let investigator = analysis.map(|a| a.investigator.clone());
    let root_cause = rca.map(|r| {
        let target = analysis
            .and_then(|a| a.root_owner.clone())
            .map(|t| json!(t))
            .or_else(|| {
                r.root_cause_analysis
                    .remediation_target
                    .as_ref()
                    .map(|t| json!({"kind": t.kind, "name": t.name, "namespace": t.namespace}))
            });
        json!({
            "summary": r.root_cause_analysis.summary,
            "severity": r.root_cause_analysis.severity,
            "remediation_target": target,
            "analysis": r.root_cause_analysis.investigation_analysis,
        })
    });
    let evidence = json!({
        "contributing_factors": rca.map(|r| r.root_cause_analysis.contributing_factors.clone()).unwrap_or_default(),
        "tool_calls": analysis.map(|a| a.tool_calls.iter().map(|c| json!({
            "tool": c.tool, "arguments": c.arguments, "ok": c.ok, "excerpt": c.excerpt,
        })).collect::<Vec<_>>()).unwrap_or_default(),
        "warnings": analysis.map(|a| a.warnings.clone()).unwrap_or_default(),
    });
    let proposed = selection.and_then(|s| s.selected.as_ref()).map(|w| {
        json!({
            "workflow_id": w.workflow_id,
            "version": w.version,
            "action_type": w.action_type,
            "parameters": w.parameters,
            "confidence": w.confidence,
            "rationale": w.rationale,
        })
    });
    let no_workflow = selection.filter(|s| s.selected.is_none()).map(|s| {
        s.no_workflow_reasoning
            .clone()
            .unwrap_or_else(|| s.outcome.reason.clone())
    });
    let proof = req.state.proof.as_ref().map(|p| {
        json!({
            "verdict": p.verdict.as_str(),
            "holds": p.obligations.iter().filter(|o| o.holds()).map(|o| o.statement.clone()).collect::<Vec<_>>(),
            "refuted": p.failed().map(|o| o.statement.clone()).collect::<Vec<_>>(),
        })
    });
    let gate = req.state.gate.as_ref().map(|g| {
        json!({
            "decision": if g.degraded { "degraded" } else if g.require_approval { "approval_required" } else { "allowed" },
            "reason": g.reason,
            "risk_factors": g.risk_factors,
            "policy_revision": g.policy_revision,
        })
    });
    let pending = inv
        .approval
        .as_ref()
        .filter(|a| a.status() == ApprovalStatus::Pending);
    let next = if !inv.done {
        format!(
            "still investigating (phase {}); follow it with get_request {{\"id\": \"{}\"}}",
            req.phase, req.id
        )
    } else if !inv.recorded {
        match &proposed {
            Some(_) => "investigated in this process only (kubemedic mcp over stdio runs no \
                        pipeline): nothing was recorded and nothing will be executed. To have \
                        the proposed workflow approved and run, ask the daemon — investigate \
                        over its /mcp endpoint, or its chat — which records an audited request \
                        an approver can decide."
                .to_owned(),
            None => {
                "investigated in this process only: nothing was recorded or executed.".to_owned()
            }
        }
    } else if let Some(a) = pending {
        format!(
            "nothing has been executed: approval {} waits for a human. An approver decides it \
             with decide_approval {{\"approval_id\": \"{}\", \"decision\": \"approve\"}} (or \
             \"deny\"), or on the dashboard, by mail or Slack; the first decision wins.",
            a.id, a.id
        )
    } else {
        match req.phase {
            Phase::AwaitingApproval => {
                "nothing has been executed: it waits for an approval.".to_owned()
            }
            p if p.is_terminal() => format!(
                "the request ended: {p}{}",
                req.reason
                    .as_deref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default()
            ),
            p => format!("the request is in {p}"),
        }
    };
    sanitize_value(&json!({
        "request_id": inv.recorded.then_some(req.id),
        "recorded": inv.recorded,
        "done": inv.done,
        "phase": req.phase,
        "reason": req.reason,
        "target": req.target,
        "investigator": investigator,
        "offline_investigator": investigator.as_deref().map(|i| i == "offline"),
        "root_cause": root_cause,
        "confidence": rca.map(|r| r.confidence),
        "investigation_outcome": rca.map(|r| r.investigation_outcome),
        "evidence": evidence,
        "proposed_workflow": proposed,
        "no_workflow_because": no_workflow,
        "proof": proof,
        "gate": gate,
        "approval_id": pending.map(|a| a.id),
        "next": next,
        "answer": inv.answer,
    }))
}
