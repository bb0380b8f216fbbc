//! [`ApprovalStage`]: the request's side of an approval. The first run creates the approval
//! and its notifications; later runs read the decision and conclude — `Executing` (with the
//! approved workflow, an approver's alternative gated and proven first), `Rejected` or
//! `Expired`.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Approvals, RECHECK};
use crate::domain::GatePayload;
use crate::domain::{
    ApprovalDecision, ApprovalRequest, AuditDraft, Channel, DecideOutcome, Decision, Phase,
    RemediationRequest, Stage, StageError, StageOutcome,
};

/// The stage.
pub struct ApprovalStage(pub Arc<Approvals>);

impl ApprovalStage {
    async fn conclude(
        &self,
        req: &RemediationRequest,
        approval: &ApprovalRequest,
        decision: &ApprovalDecision,
    ) -> Result<StageOutcome, StageError> {
        let mut state = req.state.clone();
        state.approval = Some(decision.clone());
        let by = format!("{} via {}", decision.decided_by, decision.decided_via);
        let note = decision
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        match decision.decision {
            Decision::Approved => {
                let mut events = vec![];
                if let Some(alt) = &decision.alternative {
                    let chosen = self.0.alternative(approval, req, alt).map_err(|why| {
                        StageError::Failed(format!(
                            "the approved alternative {alt} is no longer valid: {why}"
                        ))
                    })?;
                    // Asked again now (the policy may have been reloaded since the decision):
                    // what runs is what the policy last saw, and the trail says so.
                    let (input, gated, proof) = match self.0.gate_alternative(req, &chosen).await {
                        Ok(g) => g,
                        Err(refusal) => {
                            return Ok(StageOutcome::to(
                                Phase::ManualReviewRequired,
                                Some(format!(
                                    "approved by {by} with the alternative {alt}, but {}",
                                    refusal.detail
                                )),
                                state,
                                vec![],
                            ));
                        }
                    };
                    events.push(AuditDraft::gate(
                        "policy",
                        format!(
                            "the approval policy on the alternative {alt}: risk {} ({})",
                            gated.top_score().unwrap_or(0),
                            gated.reason
                        ),
                        &GatePayload {
                            input: serde_json::to_value(&input).unwrap_or_default(),
                            output: Some(gated.clone()),
                            alternative: Some(alt.to_string()),
                        },
                    ));
                    events.push(AuditDraft::proof(
                        "prover",
                        format!(
                            "{} on {} (the approver's alternative): {}",
                            proof.action_type,
                            proof.target,
                            proof.verdict.as_str()
                        ),
                        &proof,
                    ));
                    // What runs is bound to what was proven for it.
                    state.proof = Some(proof);
                    // `state.gate` stays the gate's own decision (a human was asked): what the
                    // summary counts as auto-approved or not.
                    if let Some(sel) = state.selection.as_mut() {
                        events.push(AuditDraft::new(
                            "workflow_overridden",
                            &decision.decided_by,
                            format!(
                                "{} replaces {} (chosen at approval)",
                                chosen.workflow_id, approval.workflow_id
                            ),
                        ));
                        sel.replaced = Some(approval.workflow_id.clone());
                        sel.selected = Some(chosen);
                    }
                }
                Ok(StageOutcome::to(
                    Phase::Executing,
                    Some(format!("approved by {by}{note}")),
                    state,
                    events,
                ))
            }
            Decision::Rejected => Ok(StageOutcome::to(
                Phase::Rejected,
                Some(format!("rejected by {by}{note}")),
                state,
                vec![],
            )),
            Decision::Expired => Ok(StageOutcome::to(
                Phase::Expired,
                Some(format!(
                    "no decision by {} (approval {} expired)",
                    approval.expires_at.to_rfc3339(),
                    approval.id
                )),
                state,
                vec![],
            )),
        }
    }
}

fn store_down(e: impl std::fmt::Display) -> StageError {
    StageError::Unavailable {
        dependency: "store".into(),
        message: e.to_string(),
    }
}

#[async_trait]
impl Stage for ApprovalStage {
    fn phase(&self) -> Phase {
        Phase::AwaitingApproval
    }

    async fn run(&self, req: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let a = &self.0;
        let now = a.clock.now();
        let approval = match a
            .store
            .approvals
            .approval_of_request(req.id)
            .await
            .map_err(store_down)?
        {
            Some(existing) => existing,
            None => {
                let fresh = a.build(req, now).map_err(StageError::Failed)?;
                let offers = a.offers(&fresh);
                let stored = a
                    .store
                    .approvals
                    .create_approval(&fresh, &offers)
                    .await
                    .map_err(store_down)?;
                a.wake.notify_one();
                stored
            }
        };
        if let Some(d) = &approval.decision {
            return self.conclude(req, &approval, d).await;
        }
        if now >= approval.expires_at {
            let expiry = ApprovalDecision {
                decision: Decision::Expired,
                decided_by: "system".into(),
                decided_via: Channel::System,
                decided_at: now,
                message: None,
                alternative: None,
            };
            let decided = a
                .store
                .approvals
                .decide_approval(approval.id, &expiry)
                .await
                .map_err(store_down)?;
            return match decided {
                DecideOutcome::Decided(x) | DecideOutcome::AlreadyDecided(x) => {
                    if let Some(m) = &a.metrics
                        && x.decision
                            .as_ref()
                            .is_some_and(|d| d.decision == Decision::Expired)
                    {
                        m.approval_decision("expired", "system", "decided");
                    }
                    a.wake.notify_one();
                    match &x.decision {
                        Some(d) => self.conclude(req, &x, d).await,
                        None => Err(StageError::Failed("the approval lost its decision".into())),
                    }
                }
                DecideOutcome::NotFound => Err(StageError::Failed(format!(
                    "approval {} vanished",
                    approval.id
                ))),
            };
        }
        // Come back at expiry; a decision wakes the request earlier. A decision that lands
        // while this run commits its wait could have its wake-up overwritten: look again
        // within RECHECK at the latest.
        Ok(StageOutcome::later(
            Phase::AwaitingApproval,
            req.state.clone(),
            approval.expires_at.min(now + RECHECK),
            vec![],
        ))
    }
}
