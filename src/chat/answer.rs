//! The answer a turn gives, written from what the request's stages recorded: the root cause,
//! its evidence and confidence, what kubemedic would do and what proves it safe, and where the
//! request stands (waiting for the asker's approval, done, or ended without an action). Only
//! recorded facts are said; nothing is inferred here.

use std::fmt::Write as _;

use uuid::Uuid;

use crate::domain::{ApprovalRequest, ApprovalStatus, Phase, RemediationRequest, TurnKind};

/// The most contributing factors an answer lists.
const MAX_FACTORS: usize = 8;

/// A turn's answer, and whether the turn is over.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    /// The approval the asker is asked to decide (the HITL `action_id`).
    pub hitl: Option<Uuid>,
    /// Nothing more will happen in this turn.
    pub done: bool,
}

/// Whether a turn of `kind` following `req` is over, and the approval pending on it.
pub fn state(
    kind: TurnKind,
    req: &RemediationRequest,
    approval: Option<&ApprovalRequest>,
) -> (bool, Option<Uuid>) {
    let pending = approval
        .filter(|a| a.status() == ApprovalStatus::Pending && req.phase == Phase::AwaitingApproval)
        .map(|a| a.id);
    match kind {
        TurnKind::Question | TurnKind::Scan => {
            (req.phase.is_terminal() || pending.is_some(), pending)
        }
        TurnKind::Decision | TurnKind::Clarify => (req.phase.is_terminal(), None),
    }
}

/// The answer of a turn of `kind` that follows `req`.
pub fn compose(
    kind: TurnKind,
    req: &RemediationRequest,
    approval: Option<&ApprovalRequest>,
) -> Answer {
    let (done, hitl) = state(kind, req, approval);
    let mut text = String::new();
    if kind != TurnKind::Decision {
        investigation(&mut text, req);
    }
    outcome(&mut text, req, hitl, approval);
    Answer {
        text: text.trim_end().to_owned(),
        hitl,
        done,
    }
}

/// What the investigation of `req` found — root cause, evidence, what kubemedic would do and
/// its proof — without where the request stands (for an investigation that is not a stored
/// request, such as `kubemedic mcp`'s over stdio).
pub fn findings(req: &RemediationRequest) -> String {
    let mut text = String::new();
    investigation(&mut text, req);
    text.trim_end().to_owned()
}

fn investigation(out: &mut String, req: &RemediationRequest) {
    let target = req
        .target
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| "the target".into());
    let Some(analysis) = &req.state.analysis else {
        let _ = writeln!(out, "I have not finished investigating {target} yet.");
        return;
    };
    let rca = &analysis.rca;
    let _ = writeln!(
        out,
        "**Root cause** ({} investigator, confidence {:.2}): {}",
        analysis.investigator, rca.confidence, rca.root_cause_analysis.summary
    );
    if let Some(owner) = &analysis.root_owner {
        let _ = writeln!(out, "\n**Remediation target:** {owner}");
    }
    let factors = &rca.root_cause_analysis.contributing_factors;
    if !factors.is_empty() {
        let _ = writeln!(out, "\n**Evidence:**");
        for f in factors.iter().take(MAX_FACTORS) {
            let _ = writeln!(out, "- {f}");
        }
        if factors.len() > MAX_FACTORS {
            let _ = writeln!(out, "- … and {} more", factors.len() - MAX_FACTORS);
        }
    }
    if !analysis.tool_calls.is_empty() {
        let ok = analysis.tool_calls.iter().filter(|c| c.ok).count();
        let _ = writeln!(
            out,
            "\n_{} read-only tool call(s) on the cluster, {ok} answered._",
            analysis.tool_calls.len()
        );
    }
    for w in &analysis.warnings {
        let _ = writeln!(out, "\n⚠ {w}");
    }
    if let Some(e) = &req.state.enrichment
        && !e.pinned.is_empty()
    {
        let _ = writeln!(out, "\n**Pinned context** (read by this investigation):");
        for n in &e.pinned {
            let _ = writeln!(out, "- [{}] {}", n.scope, n.text);
        }
    }
    if let Some(selection) = &req.state.selection {
        match &selection.selected {
            Some(s) => {
                let _ = writeln!(
                    out,
                    "\n**What I would do:** {} (`{}` v{}) on {target}, confidence {:.2}. {}",
                    s.action_type, s.workflow_id, s.version, s.confidence, s.rationale
                );
            }
            None => {
                let why = selection
                    .no_workflow_reasoning
                    .clone()
                    .unwrap_or_else(|| selection.outcome.reason.clone());
                let _ = writeln!(out, "\n**What I would do:** nothing automatically — {why}");
            }
        }
    }
    if let Some(proof) = &req.state.proof {
        let failed: Vec<&str> = proof.failed().map(|o| o.statement.as_str()).collect();
        let _ = write!(
            out,
            "\n**Proof against the live cluster:** {:?}, {} of {} obligations hold",
            proof.verdict,
            proof.obligations.len() - failed.len(),
            proof.obligations.len()
        );
        if failed.is_empty() {
            let _ = writeln!(out, ".");
        } else {
            let _ = writeln!(out, "; refuted: {}.", failed.join("; "));
        }
    }
}

fn outcome(
    out: &mut String,
    req: &RemediationRequest,
    hitl: Option<Uuid>,
    approval: Option<&ApprovalRequest>,
) {
    if let Some(id) = hitl {
        let risk = approval
            .map(|a| format!(" Risk {}: {}.", a.risk_score, a.risk_reason))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n🛑 **APPROVAL REQUIRED**\n\nThis change needs a human decision.{risk}\n\n\
             **To approve:** type 'approve', 'yes' or 'continue'\n\
             **To deny:** type 'deny', 'no' or 'cancel'\n\n\
             (action_id `{id}`; the dashboard, mail and Slack offer the same approval — the \
             first decision wins.)"
        );
        return;
    }
    let reason = req.reason.clone().unwrap_or_default();
    let line = match req.phase {
        Phase::Completed => {
            let mut s = String::from("✅ **Done:** the remediation was executed");
            if let Some(e) = &req.state.execution {
                let _ = write!(s, " ({} on {}", e.action_type, e.target);
                let _ = write!(s, ", {} step(s))", e.steps.len());
            }
            if let Some(a) = &req.state.assessment {
                let _ = write!(
                    s,
                    " and verified {}{}",
                    if a.effective {
                        "effective"
                    } else {
                        "NOT effective"
                    },
                    a.score
                        .map(|x| format!(" (score {x:.2})"))
                        .unwrap_or_default()
                );
                if !a.details.is_empty() {
                    let _ = write!(s, ": {}", a.details.join("; "));
                }
            }
            s.push('.');
            s
        }
        Phase::NoActionRequired => format!("**No action needed:** {reason}"),
        Phase::ManualReviewRequired => {
            format!("**Manual review required:** {reason}")
        }
        Phase::Rejected => format!("❌ **Denied:** {reason}. Nothing was changed."),
        Phase::Expired => format!("**Expired:** {reason}. Nothing was changed."),
        Phase::Failed => format!("**Failed:** {reason}"),
        Phase::Blocked => format!("**Blocked:** {reason}"),
        Phase::Executing => "⏳ Approved — executing now.".to_owned(),
        Phase::Verifying => "⏳ Executed — verifying the effect now.".to_owned(),
        Phase::AwaitingApproval => {
            "⏳ Waiting for an approver (the dashboard, mail or Slack).".to_owned()
        }
        other => format!("⏳ Still working: {other}."),
    };
    let _ = writeln!(out, "\n{line}");
    let _ = writeln!(out, "\n_Request `{}`._", req.id);
}
