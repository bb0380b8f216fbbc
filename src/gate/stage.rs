//! The Gating stage: ask the approval policy about the selected remediation.
//!
//! Input: the request in `Gating`, turned into a [`GateInput`] by a [`GateInputSource`] the
//! pipeline assembly provides (it knows where investigation and selection keep their results).
//! Output: the [`super::GateDecision`] in `StageState.gate`, a `gate` audit event whose payload is
//! `{input, output}`, and the move to `AwaitingApproval` (approval required, with the policy's
//! reason) or `Executing` (auto-approved). No input (nothing was selected) ends the request in
//! `ManualReviewRequired`. Invariant: the stage never auto-approves on an error — [`RegoGate`]
//! turns every failure into a degraded decision that requires approval.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::{info, instrument};

use super::{GateInput, RegoGate, short_revision};
use crate::pipeline::{AuditDraft, Phase, RemediationRequest, Stage, StageError, StageOutcome};

/// Builds the gate input from what earlier stages left in the request; `None` when there is no
/// workflow selection to gate.
pub type GateInputSource = Arc<dyn Fn(&RemediationRequest) -> Option<GateInput> + Send + Sync>;

pub struct GateStage {
    gate: Arc<RegoGate>,
    input: GateInputSource,
}

impl GateStage {
    pub fn new(gate: Arc<RegoGate>, input: GateInputSource) -> Self {
        Self { gate, input }
    }
}

#[async_trait]
impl Stage for GateStage {
    fn phase(&self) -> Phase {
        Phase::Gating
    }

    #[instrument(skip_all, fields(request_id = %request.id, phase = "Gating"))]
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let Some(input) = (self.input)(request) else {
            return Ok(StageOutcome {
                next: Phase::ManualReviewRequired,
                reason: Some("approval gate: no workflow selection to gate".into()),
                state: request.state.clone(),
                events: vec![],
            });
        };
        let decision = self.gate.decide(&input).await;
        let revision = short_revision(decision.policy_revision.as_deref());
        let message = if decision.degraded {
            format!(
                "approval required (policy degraded, revision {revision}): {}",
                decision.reason
            )
        } else if decision.require_approval {
            format!(
                "approval required by policy {revision}: {}",
                decision.reason
            )
        } else {
            format!("auto-approved by policy {revision}: {}", decision.reason)
        };
        info!(
            decision = decision.label(),
            reason = %decision.reason,
            policy_revision = %revision,
            "gate decided"
        );
        let event = AuditDraft::new("gate", "policy", message).with_payload(serde_json::json!({
            "input": input,
            "output": decision,
        }));
        let (next, reason) = if decision.require_approval {
            (Phase::AwaitingApproval, Some(decision.reason.clone()))
        } else {
            (Phase::Executing, Some(decision.reason.clone()))
        };
        let mut state = request.state.clone();
        state.gate = Some(decision);
        Ok(StageOutcome {
            next,
            reason,
            state,
            events: vec![event],
        })
    }
}
