//! Merge (`mergePhase1Fallbacks`) and outcome routing: the nine outcomes of the seed, each to
//! a phase with a reason. Only a selected, validated, confident workflow on a verified root
//! owner reaches the gate.

use crate::domain::{
    AlternativeWorkflow, Analysis, InvestigationOutcome, OutcomeKind, Phase, RcaResult,
    RoutedOutcome, SelectedWorkflow, ValidationAttempt,
};

/// Below this selection confidence a workflow is not run (outcome 7).
pub const CONFIDENCE_THRESHOLD: f64 = 0.7;
/// A deliberate "not actionable" is floored to this confidence (it is not a low-confidence
/// failure).
pub const NOT_ACTIONABLE_FLOOR: f64 = 0.8;

/// What invocation 2 returned, before merging.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Invocation2 {
    /// Invocation 2's RCA fields; `None` fields are backfilled from invocation 1.
    pub summary: Option<String>,
    pub severity: Option<String>,
    pub contributing_factors: Option<Vec<String>>,
    pub confidence: Option<f64>,
    pub investigation_outcome: Option<InvestigationOutcome>,
    pub investigation_analysis: Option<String>,
    pub selected: Option<SelectedWorkflow>,
    pub alternatives: Vec<AlternativeWorkflow>,
    /// `submit_result_no_workflow` reasoning.
    pub no_workflow: Option<String>,
    pub validation_attempts: Vec<ValidationAttempt>,
    /// The last validation failed after every retry.
    pub validation_failed: bool,
    pub needs_human_review: bool,
    pub human_review_reason: Option<String>,
}

/// `mergePhase1Fallbacks`: severity, contributing factors, confidence and outcome come from
/// invocation 1 when invocation 2 left them out; invocation 1's `problem_resolved` overrides a
/// contradictory request for human review.
pub fn merge(inv1: &RcaResult, inv2: &Invocation2) -> RcaResult {
    let mut m = inv1.clone();
    if let Some(s) = &inv2.summary {
        m.root_cause_analysis.summary = s.clone();
    }
    if let Some(a) = &inv2.investigation_analysis {
        m.root_cause_analysis.investigation_analysis = a.clone();
    }
    if let Some(s) = &inv2.severity {
        m.root_cause_analysis.severity = s.clone();
    }
    if let Some(c) = &inv2.contributing_factors {
        m.root_cause_analysis.contributing_factors = c.clone();
    }
    if let Some(c) = inv2.confidence {
        m.confidence = c;
    }
    if let Some(o) = inv2.investigation_outcome {
        m.investigation_outcome = o;
    }
    m.needs_human_review = inv1.needs_human_review || inv2.needs_human_review;
    m.human_review_reason = inv2
        .human_review_reason
        .clone()
        .or_else(|| inv1.human_review_reason.clone());
    if inv1.investigation_outcome == InvestigationOutcome::ProblemResolved && m.needs_human_review {
        m.needs_human_review = false;
        m.human_review_reason = None;
        m.investigation_outcome = InvestigationOutcome::ProblemResolved;
    }
    m
}

fn to(kind: OutcomeKind, next_phase: Phase, reason: impl Into<String>) -> RoutedOutcome {
    RoutedOutcome {
        kind,
        next_phase,
        reason: reason.into(),
    }
}

/// Route a merged result. `merged` may be adjusted (the not-actionable confidence floor).
pub fn route(analysis: &Analysis, inv2: &Invocation2, merged: &mut RcaResult) -> RoutedOutcome {
    use OutcomeKind::*;
    use Phase::{Failed, Gating, ManualReviewRequired as Review, NoActionRequired};
    if inv2.validation_failed {
        let last = inv2.validation_attempts.last();
        let code = last.map_or("parameter_validation_failed", |a| a.code.as_str());
        let errors = last.map(|a| a.errors.join("; ")).unwrap_or_default();
        return to(
            ValidationFailed,
            Review,
            format!(
                "{code}: {errors} (after {} attempts)",
                inv2.validation_attempts.len()
            ),
        );
    }
    if merged.needs_human_review {
        let why = merged
            .human_review_reason
            .clone()
            .unwrap_or_else(|| "the investigator asked for human review".into());
        return to(
            HumanReviewRequested,
            Review,
            format!("human review requested: {why}"),
        );
    }
    let outcome = merged.investigation_outcome;
    let Some(selected) = &inv2.selected else {
        return match outcome {
            InvestigationOutcome::ProblemResolved => {
                let warned = analysis.warnings.iter().any(|w| {
                    let w = w.to_ascii_lowercase();
                    w.contains("inconclusive")
                        || w.contains("no workflows matched")
                        || w.contains("human review")
                });
                let substantive = merged.actionable
                    && !merged.root_cause_analysis.contributing_factors.is_empty();
                if warned || substantive {
                    to(
                        Inconclusive,
                        Review,
                        "investigation_inconclusive: reported resolved, but the evidence says otherwise",
                    )
                } else if merged.confidence < CONFIDENCE_THRESHOLD {
                    to(
                        Inconclusive,
                        Review,
                        format!(
                            "investigation_inconclusive: resolution claimed with low confidence {:.2}",
                            merged.confidence
                        ),
                    )
                } else {
                    to(
                        ProblemResolved,
                        NoActionRequired,
                        format!(
                            "problem self-resolved: {}",
                            merged.root_cause_analysis.summary
                        ),
                    )
                }
            }
            InvestigationOutcome::NotActionable => {
                merged.confidence = merged.confidence.max(NOT_ACTIONABLE_FLOOR);
                to(
                    NotActionable,
                    NoActionRequired,
                    format!("not actionable: {}", merged.root_cause_analysis.summary),
                )
            }
            InvestigationOutcome::Inconclusive => to(
                Inconclusive,
                Review,
                format!(
                    "investigation_inconclusive: {}",
                    merged.root_cause_analysis.summary
                ),
            ),
            InvestigationOutcome::InsufficientData => to(
                InsufficientData,
                Review,
                format!("insufficient_data: {}", merged.root_cause_analysis.summary),
            ),
            InvestigationOutcome::Actionable if !merged.actionable => {
                merged.confidence = merged.confidence.max(NOT_ACTIONABLE_FLOOR);
                to(
                    NotActionable,
                    NoActionRequired,
                    format!("not actionable: {}", merged.root_cause_analysis.summary),
                )
            }
            InvestigationOutcome::Actionable => to(
                NoMatchingWorkflows,
                Review,
                format!(
                    "no_matching_workflows: {}",
                    inv2.no_workflow
                        .as_deref()
                        .unwrap_or("no workflow in the catalog fits")
                ),
            ),
        };
    };
    if outcome == InvestigationOutcome::ProblemResolved {
        return to(
            ProblemResolved,
            NoActionRequired,
            format!(
                "problem self-resolved: {}",
                merged.root_cause_analysis.summary
            ),
        );
    }
    if analysis.root_owner.is_none() {
        return to(
            RcaIncomplete,
            Review,
            "rca_incomplete: the remediation target could not be verified in the cluster (no root owner)",
        );
    }
    if selected.confidence < CONFIDENCE_THRESHOLD {
        return to(
            LowConfidence,
            Failed,
            format!(
                "low_confidence: {} selected with confidence {:.2} < {CONFIDENCE_THRESHOLD:.2}; routed to human review",
                selected.workflow_id, selected.confidence
            ),
        );
    }
    to(
        WorkflowSelected,
        Gating,
        format!("{} selected", selected.workflow_id),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{RootCauseAnalysis, Target, TargetRef};

    fn rca(outcome: InvestigationOutcome, confidence: f64) -> RcaResult {
        RcaResult {
            root_cause_analysis: RootCauseAnalysis {
                summary: "s".into(),
                severity: "critical".into(),
                contributing_factors: vec![],
                remediation_target: Some(TargetRef {
                    kind: "Deployment".into(),
                    name: "w".into(),
                    namespace: Some("n".into()),
                    api_version: None,
                }),
                investigation_analysis: String::new(),
            },
            confidence,
            investigation_outcome: outcome,
            actionable: outcome == InvestigationOutcome::Actionable,
            needs_human_review: false,
            human_review_reason: None,
        }
    }

    fn analysis(r: RcaResult, verified: bool) -> Analysis {
        Analysis {
            rca: r,
            root_owner: verified.then(|| Target::new("Deployment", "w", Some("n".into()))),
            spec_hash: None,
            detected_labels: None,
            history: None,
            warnings: vec![],
            playbooks: vec![],
            tool_calls: vec![],
            usage: Default::default(),
            investigator: "test".into(),
            llm_calls: vec![],
            proposal: None,
        }
    }

    fn selected(confidence: f64) -> SelectedWorkflow {
        SelectedWorkflow {
            workflow_id: "w".into(),
            action_type: "A".into(),
            version: "1.0.0".into(),
            confidence,
            rationale: String::new(),
            parameters: Default::default(),
        }
    }

    #[test]
    fn the_nine_outcomes() {
        let run = |inv1: RcaResult, inv2: Invocation2, verified: bool| {
            let a = analysis(inv1.clone(), verified);
            let mut m = merge(&inv1, &inv2);
            let out = route(&a, &inv2, &mut m);
            (out.kind, out.next_phase, m.confidence)
        };
        use InvestigationOutcome::*;
        let with = |c: f64| Invocation2 {
            selected: Some(selected(c)),
            ..Default::default()
        };
        assert_eq!(
            run(rca(Actionable, 0.9), with(0.9), true).0,
            OutcomeKind::WorkflowSelected
        );
        assert_eq!(
            run(rca(ProblemResolved, 0.9), Invocation2::default(), true).1,
            Phase::NoActionRequired
        );
        assert_eq!(
            run(rca(Inconclusive, 0.4), Invocation2::default(), true).0,
            OutcomeKind::Inconclusive
        );
        assert_eq!(
            run(
                rca(Actionable, 0.9),
                Invocation2 {
                    no_workflow: Some("none fits".into()),
                    ..Default::default()
                },
                true
            )
            .0,
            OutcomeKind::NoMatchingWorkflows
        );
        assert_eq!(
            run(rca(Actionable, 0.9), with(0.9), false).0,
            OutcomeKind::RcaIncomplete
        );
        let invalid = Invocation2 {
            validation_failed: true,
            validation_attempts: vec![ValidationAttempt {
                workflow_id: "x".into(),
                code: "workflow_not_found".into(),
                errors: vec!["x".into()],
            }],
            ..Default::default()
        };
        assert_eq!(
            run(rca(Actionable, 0.9), invalid, true).0,
            OutcomeKind::ValidationFailed
        );
        assert_eq!(run(rca(Actionable, 0.9), with(0.5), true).1, Phase::Failed);
        let review = Invocation2 {
            needs_human_review: true,
            human_review_reason: Some("risky".into()),
            ..Default::default()
        };
        assert_eq!(
            run(rca(Actionable, 0.9), review.clone(), true).0,
            OutcomeKind::HumanReviewRequested
        );
        let (kind, phase, confidence) = run(rca(NotActionable, 0.5), Invocation2::default(), true);
        assert_eq!(
            (kind, phase, confidence),
            (OutcomeKind::NotActionable, Phase::NoActionRequired, 0.8)
        );
        // Resolved in invocation 1 wins over a contradictory review request.
        assert_eq!(
            run(rca(ProblemResolved, 0.9), review, true).0,
            OutcomeKind::ProblemResolved
        );
    }

    #[test]
    fn merge_backfills_only_what_is_missing() {
        let mut inv1 = rca(InvestigationOutcome::Actionable, 0.82);
        inv1.root_cause_analysis.contributing_factors = vec!["bad image".into()];
        let inv2 = Invocation2 {
            severity: Some("warning".into()),
            summary: Some("rollback".into()),
            ..Default::default()
        };
        let m = merge(&inv1, &inv2);
        assert_eq!(m.root_cause_analysis.severity, "warning");
        assert_eq!(m.root_cause_analysis.contributing_factors, ["bad image"]);
        assert_eq!(m.confidence, 0.82);
        assert_eq!(m.root_cause_analysis.summary, "rollback");
    }
}
