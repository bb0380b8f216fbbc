//! A remediation that made its target worse (docs/adr/0035-undo-what-made-it-worse.md).
//!
//! Execution recorded the workload's pods before its first write; after the window they are
//! compared ([`TargetHealth::worse`]: fewer ready pods, more failing pods, a failure none of
//! them showed before). A target found worse is never "completed": the request carries an
//! [`Undo`] and goes either back to the executor, which restores the spec it recorded (when
//! the setting, the action and the policy's `undo` rule all allow it), or to a person with
//! what is worse and why it was not undone.

use chrono::{DateTime, Utc};

use super::VerificationStage;
use crate::actions::not_restorable;
use crate::domain::{
    AssessmentReason, AuditDraft, Execution, RemediationRequest, TargetHealth, Undo,
};
use crate::policy::{GateInput, UndoInput, short_revision};

impl VerificationStage {
    /// The [`Undo`] of a remediation that made its target worse; `None` when it did not (or
    /// when nothing can be compared, or somebody else changed the target meanwhile: then the
    /// assessment measured their change, not ours).
    pub(super) async fn worse(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        after: Option<TargetHealth>,
        reason: AssessmentReason,
        now: DateTime<Utc>,
    ) -> Option<Undo> {
        if reason == AssessmentReason::SpecDrift {
            return None;
        }
        let before = execution.before.clone()?;
        let after = after?;
        let worse = before.worse(&after);
        if worse.is_empty() {
            return None;
        }
        let mut undo = Undo {
            worse,
            before,
            after,
            decided: false,
            decision: String::new(),
            decided_at: now,
            restore: None,
        };
        (undo.decided, undo.decision) = self.decide_undo(request, execution, &undo).await;
        Some(undo)
    }

    /// Whether to restore the recorded spec, and why: the setting, the action, then the
    /// policy's `undo` rule. Any doubt (no policy, an error, anything but `true`) is no.
    async fn decide_undo(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        undo: &Undo,
    ) -> (bool, String) {
        if !self.settings.undo_worse {
            return (
                false,
                "not undone: undoing is switched off (--undo-worse false)".into(),
            );
        }
        if let Some(why) = not_restorable(execution) {
            return (false, format!("not undone: {why}"));
        }
        let Some(gate) = &self.policy else {
            return (
                false,
                "not undone: no approval policy to decide whether to undo".into(),
            );
        };
        let mut input = GateInput::from_request(request, 0.0);
        input.remediation_target = Some(execution.target.clone());
        input.action_type = Some(execution.action_type.to_string());
        input.workflow_id = Some(execution.workflow_id.clone());
        input.undo = Some(UndoInput::of(undo));
        let (answer, revision) = gate.undo(&input).await;
        let revision = short_revision(revision.as_deref());
        match answer {
            Ok(true) => (
                true,
                format!(
                    "undo: policy {revision} says to restore the spec recorded before the first write ({} environment)",
                    input.environment
                ),
            ),
            Ok(false) => (
                false,
                format!(
                    "not undone: policy {revision} does not say to undo ({} environment; rule undo)",
                    input.environment
                ),
            ),
            Err(e) => (
                false,
                format!("not undone: policy {revision} could not decide: {e}"),
            ),
        }
    }
}

/// The `undo_decided` audit event.
pub(super) fn decided_event(u: &Undo, execution: &Execution) -> AuditDraft {
    AuditDraft::new(
        crate::domain::audit::UNDO_DECIDED,
        "verifier",
        format!(
            "{} made {} worse ({}): before {}, now {}; {}",
            execution.workflow_id,
            execution.target,
            u.worse.join("; "),
            u.before.summary(),
            u.after.summary(),
            u.decision
        ),
    )
    .with_payload(serde_json::to_value(u).unwrap_or_default())
}
