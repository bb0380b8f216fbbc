//! The Gating stage (DESIGN §3.8): ask the approval policy about the selected remediation.
//!
//! Input: the request in `Gating`; the stage builds the policy's [`GateInput`] from what the
//! earlier stages left in it ([`input_for`]). Output: the [`GateDecision`] in `StageState.gate`,
//! a `gate` audit event whose payload is `{input, output}`, and the move to `AwaitingApproval`
//! (approval required, with the policy's reason) or `Executing` (auto-approved). No input
//! (nothing was selected) ends the request in `ManualReviewRequired`. Invariant: the stage never
//! auto-approves on an error — [`RegoGate`] turns every failure into a degraded decision that
//! requires approval — nor what [`human_decides`] names: a request asked in a conversation, a
//! reviewer's request, a workflow proposed from a learned pattern.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::{info, instrument};

pub use crate::policy::DEFAULT_CONFIDENCE_THRESHOLD;

/// The risk a change is shown with when the policy alone would have auto-approved it but a
/// human must decide anyway ([`human_decides`]): low (the policy found nothing to worry
/// about), but a human decides.
pub const HUMAN_DECIDES_RISK_SCORE: i64 = 20;

/// Why a person must decide on `request` whatever the policy says, if they must: a question
/// asked in a conversation is not an instruction to change the cluster (the asker decides); a
/// reviewer's request is proven and gated first, then an approver confirms it; a workflow
/// proposed from a learned pattern rests on past outcomes, not on this incident's evidence.
pub fn human_decides(request: &RemediationRequest) -> Option<String> {
    match request.signal.source {
        SignalSource::Chat => {
            return Some("asked in a conversation, so the asker decides".into());
        }
        SignalSource::Review => {
            let by = request
                .signal
                .requested
                .as_ref()
                .map_or("a reviewer", |r| r.requested_by.as_str());
            return Some(format!(
                "asked for by {by} after review, so an approver confirms it"
            ));
        }
        SignalSource::Alertmanager | SignalSource::Native => {}
    }
    let learned = request.state.selection.as_ref()?.learned.as_ref()?;
    Some(format!(
        "proposed from a learned pattern ({}), so an approver decides",
        learned.pattern.signature
    ))
}

use crate::domain::GatePayload;
use crate::domain::{
    AuditDraft, GateDecision, Phase, RemediationRequest, RiskFactor, SignalSource, Stage,
    StageError, StageOutcome,
};
use crate::policy::{GateInput, RegoGate, short_revision};

/// The gate's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSettings {
    /// The selection confidence below which the policy should ask a human.
    pub confidence_threshold: f64,
}

/// The approval policy's input for a request whose workflow was selected: the request's
/// environment and business classification, the selection (workflow, action type,
/// confidence), the verified root owner, its detected labels and failed detections, and the
/// investigation's warnings (history warnings included). `None` when nothing was selected.
pub fn input_for(req: &RemediationRequest, confidence_threshold: f64) -> Option<GateInput> {
    let selection = req.state.selection.as_ref()?;
    let selected = selection.selected.as_ref()?;
    let analysis = req.state.analysis.as_ref()?;
    let mut input = GateInput::from_request(req, confidence_threshold)
        .with_detected_labels(analysis.detected_labels.clone().unwrap_or_default());
    input.confidence = selected.confidence;
    input.remediation_target = analysis.root_owner.clone();
    input.action_type = Some(selected.action_type.to_string());
    input.workflow_id = Some(selected.workflow_id.clone());
    input.warnings = analysis.warnings.clone();
    if let Some(h) = &analysis.history {
        input
            .warnings
            .extend(crate::history::warnings(h).into_iter().map(|w| w.kind));
    }
    Some(input)
}

pub struct GateStage {
    gate: Arc<RegoGate>,
    settings: GateSettings,
}

impl GateStage {
    pub fn new(gate: Arc<RegoGate>, settings: GateSettings) -> Self {
        Self { gate, settings }
    }
}

#[async_trait]
impl Stage for GateStage {
    fn phase(&self) -> Phase {
        Phase::Gating
    }

    #[instrument(skip_all, fields(request_id = %request.id, trace_id = %request.trace.trace_id_hex(), phase = "Gating"))]
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let Some(input) = input_for(request, self.settings.confidence_threshold) else {
            return Ok(StageOutcome {
                next: Phase::ManualReviewRequired,
                reason: Some("approval gate: no workflow selection to gate".into()),
                state: request.state.clone(),
                events: vec![],
                not_before: None,
            });
        };
        let mut decision: GateDecision = self.gate.decide(&input).await;
        if let Some(why) = human_decides(request) {
            if decision.require_approval {
                // The policy asks a person already; the trail says this would have too.
                decision.risk_factors.push(RiskFactor {
                    score: HUMAN_DECIDES_RISK_SCORE,
                    reason: why,
                });
            } else {
                decision.require_approval = true;
                decision.reason = format!(
                    "{why} (the policy alone would auto-approve: {})",
                    decision.reason
                );
                decision.risk_factors.insert(
                    0,
                    RiskFactor {
                        score: HUMAN_DECIDES_RISK_SCORE,
                        reason: decision.reason.clone(),
                    },
                );
            }
        }
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
        let event = AuditDraft::gate(
            "policy",
            message,
            &GatePayload {
                input: serde_json::to_value(&input).unwrap_or_default(),
                output: Some(decision.clone()),
                alternative: None,
            },
        );
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
            not_before: None,
        })
    }
}
