//! The workflow a reviewer asked for (`SignalContext.requested`, source `review`): after a
//! fresh invocation 1 on the target, it is proposed instead of invocation 2's choice — checked
//! against the catalog like any selection (it must fit the verified root owner, its parameters
//! must validate), then proven, gated and approved by the stages after this one. A reviewer
//! decides what to try; they never skip the proof obligations, the policy or the approval.

use serde_json::{Map, Value};

use crate::catalog::{Catalog, SelectionContext};
use crate::domain::{
    Analysis, OutcomeKind, Phase, RemediationRequest, RequestedWorkflow, RoutedOutcome,
    SelectedWorkflow, Selection, ValidationAttempt,
};

/// The selection for `asked` on `req`, whose analysis is `analysis`: the workflow on the
/// verified root owner, routed to the gate; or, when it cannot be, the reason, routed to review.
pub fn selection(
    catalog: &Catalog,
    req: &RemediationRequest,
    analysis: &Analysis,
    asked: &RequestedWorkflow,
) -> Selection {
    let mut selection = Selection {
        selected: None,
        alternatives: vec![],
        no_workflow_reasoning: None,
        validation_attempts: vec![],
        merged: analysis.rca.clone(),
        outcome: review(
            OutcomeKind::RcaIncomplete,
            format!(
                "rca_incomplete: the target of {} (asked for by {}) could not be verified in the cluster",
                asked.workflow_id, asked.requested_by
            ),
        ),
        usage: Default::default(),
        llm_calls: vec![],
        learned: None,
        replaced: None,
    };
    let Some(target) = analysis.root_owner.as_ref() else {
        return selection;
    };
    let ctx = SelectionContext::of(req, analysis);
    // The target's parameters are kubemedic's to bind, from the verified root owner.
    let params: Map<String, Value> = asked
        .parameters
        .iter()
        .filter(|(k, _)| !k.starts_with("TARGET_RESOURCE_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match catalog.validate_selection(&asked.workflow_id, &params, Some(target), &ctx) {
        Ok(full) => {
            let Some(w) = catalog.workflow(&asked.workflow_id) else {
                return selection;
            };
            selection.selected = Some(SelectedWorkflow {
                workflow_id: w.id.clone(),
                action_type: w.action_type.clone(),
                version: w.version.clone(),
                confidence: analysis.rca.confidence,
                rationale: format!(
                    "asked for by {} after reviewing request {}{}",
                    asked.requested_by,
                    asked.follows,
                    asked
                        .message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                parameters: full,
            });
            selection.outcome = RoutedOutcome {
                kind: OutcomeKind::WorkflowSelected,
                next_phase: Phase::Gating,
                reason: format!(
                    "{} asked for by {}: to be proven and gated",
                    w.id, asked.requested_by
                ),
            };
        }
        Err(e) => {
            let why = format!("{}: {}", e.code, e.errors.join("; "));
            selection.validation_attempts.push(ValidationAttempt {
                workflow_id: asked.workflow_id.clone(),
                code: e.code.into(),
                errors: e.errors,
            });
            selection.no_workflow_reasoning = Some(why.clone());
            selection.outcome = review(
                OutcomeKind::ValidationFailed,
                format!(
                    "{why} (the workflow {} asked for by {})",
                    asked.workflow_id, asked.requested_by
                ),
            );
        }
    }
    selection
}

fn review(kind: OutcomeKind, reason: String) -> RoutedOutcome {
    RoutedOutcome {
        kind,
        next_phase: Phase::ManualReviewRequired,
        reason,
    }
}
