//! Merge (`mergePhase1Fallbacks`) and outcome routing: the nine outcomes of the seed, each to
//! a phase with a reason. Only a selected, validated, confident workflow on a verified root
//! owner, for an actionable root cause, reaches the gate; any doubt goes to a human.

use crate::domain::Severity;
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
    pub severity: Option<Severity>,
    pub contributing_factors: Option<Vec<String>>,
    pub confidence: Option<f64>,
    pub investigation_outcome: Option<InvestigationOutcome>,
    pub investigation_analysis: Option<String>,
    pub selected: Option<SelectedWorkflow>,
    pub alternatives: Vec<AlternativeWorkflow>,
    /// `submit_result_no_workflow` reasoning.
    pub no_workflow: Option<String>,
    pub validation_attempts: Vec<ValidationAttempt>,
    /// The last validation failed after every correction.
    pub validation_failed: bool,
    /// A workflow submitted while the remediation target was unverified: not validated (its
    /// target parameters cannot be injected) and never run; routed to `rca_incomplete`.
    pub unverified_selection: Option<String>,
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

/// Invocation 2's merged result is resolved: only a bare "resolved, nothing to do" needs no
/// action (outcome 2). Warning signals, a substantive RCA (a summary with contributing factors:
/// a real problem was found) or a low confidence go to a human instead.
fn resolved(analysis: &Analysis, merged: &RcaResult) -> RoutedOutcome {
    use OutcomeKind::{Inconclusive, ProblemResolved};
    use Phase::{ManualReviewRequired as Review, NoActionRequired};
    let warned = analysis.warnings.iter().any(|w| {
        let w = w.to_ascii_lowercase();
        w.contains("inconclusive")
            || w.contains("no workflows matched")
            || w.contains("human review")
    });
    if warned {
        return to(
            Inconclusive,
            Review,
            "investigation_inconclusive: reported resolved, but the investigation's warnings say otherwise",
        );
    }
    // hasSubstantiveRCA, on either invocation's RCA: invocation 2 leaving the factors out does
    // not make a real problem go away.
    let factors = if merged.root_cause_analysis.contributing_factors.is_empty() {
        &analysis.rca.root_cause_analysis.contributing_factors
    } else {
        &merged.root_cause_analysis.contributing_factors
    };
    if !merged.root_cause_analysis.summary.trim().is_empty() && !factors.is_empty() {
        return to(
            Inconclusive,
            Review,
            format!(
                "investigation_inconclusive: reported resolved, but the root cause analysis names contributing factors of a real problem: {}",
                factors.join("; ")
            ),
        );
    }
    if merged.confidence < CONFIDENCE_THRESHOLD {
        return to(
            Inconclusive,
            Review,
            format!(
                "investigation_inconclusive: resolution claimed with low confidence {:.2}",
                merged.confidence
            ),
        );
    }
    to(
        ProblemResolved,
        NoActionRequired,
        format!(
            "problem self-resolved: {}",
            merged.root_cause_analysis.summary
        ),
    )
}

/// Route a merged result. `merged` may be adjusted (the not-actionable confidence floor).
///
/// Fail closed: only outcome 1 — an actionable RCA from invocation 1 that invocation 2 does not
/// contradict, a validated selection on a verified root owner, confident enough — reaches the
/// gate. Everything else ends in human review or, for a bare resolved / not-actionable verdict
/// with no workflow, in `NoActionRequired`.
pub fn route(analysis: &Analysis, inv2: &Invocation2, merged: &mut RcaResult) -> RoutedOutcome {
    use OutcomeKind::*;
    use Phase::{Failed, Gating, ManualReviewRequired as Review, NoActionRequired};
    let rca1 = &analysis.rca;
    // Invocation 2 put a workflow forward (validated or not).
    let proposed = inv2.selected.is_some()
        || inv2.unverified_selection.is_some()
        || !inv2.validation_attempts.is_empty();
    // Outcome 5 before anything about the workflow: without a verified root owner no workflow
    // can be validated (its target parameters cannot be injected) or run.
    if proposed && analysis.root_owner.is_none() {
        return to(
            RcaIncomplete,
            Review,
            "rca_incomplete: the remediation target could not be verified in the cluster (no root owner)",
        );
    }
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
    // An inconclusive or missing RCA goes to a human whatever invocation 2 says (a turn limit
    // or an RCA rejected as partial ends invocation 1 as inconclusive).
    match rca1.investigation_outcome {
        InvestigationOutcome::Inconclusive => {
            return to(
                Inconclusive,
                Review,
                format!(
                    "investigation_inconclusive: {}",
                    merged.root_cause_analysis.summary
                ),
            );
        }
        InvestigationOutcome::InsufficientData => {
            return to(
                InsufficientData,
                Review,
                format!("insufficient_data: {}", merged.root_cause_analysis.summary),
            );
        }
        _ => {}
    }
    let outcome = merged.investigation_outcome;
    if outcome == InvestigationOutcome::ProblemResolved {
        return resolved(analysis, merged);
    }
    let Some(selected) = &inv2.selected else {
        return match outcome {
            InvestigationOutcome::ProblemResolved => resolved(analysis, merged),
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
    // A workflow without an actionable RCA (not actionable, or the invocations disagree): a
    // contradiction, so a human decides.
    let actionable = rca1.investigation_outcome == InvestigationOutcome::Actionable
        && rca1.actionable
        && outcome == InvestigationOutcome::Actionable
        && merged.actionable;
    if !actionable {
        return to(
            Inconclusive,
            Review,
            format!(
                "investigation_inconclusive: {} was selected, but the root cause analysis is not actionable (invocation 1: {}{}, merged: {}); only an actionable root cause reaches the gate",
                selected.workflow_id,
                rca1.investigation_outcome.as_str(),
                if rca1.actionable {
                    ""
                } else {
                    ", actionable=false"
                },
                outcome.as_str()
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
            plan: None,
            neighbourhood: None,
            signature: None,
            learned: vec![],
            remote_tools: vec![],
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

    fn run(inv1: &RcaResult, inv2: &Invocation2, verified: bool) -> (RoutedOutcome, RcaResult) {
        let a = analysis(inv1.clone(), verified);
        let mut m = merge(inv1, inv2);
        let out = route(&a, inv2, &mut m);
        (out, m)
    }

    fn with(c: f64) -> Invocation2 {
        Invocation2 {
            selected: Some(selected(c)),
            ..Default::default()
        }
    }

    const OUTCOMES: [InvestigationOutcome; 5] = [
        InvestigationOutcome::Actionable,
        InvestigationOutcome::NotActionable,
        InvestigationOutcome::ProblemResolved,
        InvestigationOutcome::InsufficientData,
        InvestigationOutcome::Inconclusive,
    ];

    /// Every combination of what the two invocations can say: the gate is reached only by an
    /// actionable RCA that invocation 2 does not contradict, with a validated selection at or
    /// above the threshold on a verified root owner and nobody asking for review. An
    /// inconclusive or insufficient RCA always ends in review.
    #[test]
    fn only_outcome_1_reaches_the_gate() {
        let mut gated = 0;
        for o1 in OUTCOMES {
            for actionable in [true, false] {
                for factors in [vec![], vec!["a real problem".to_owned()]] {
                    for o2 in std::iter::once(None).chain(OUTCOMES.map(Some)) {
                        for verified in [true, false] {
                            for confidence in [0.5, 0.7, 0.95] {
                                for review in [false, true] {
                                    let mut inv1 = rca(o1, 0.9);
                                    inv1.actionable = actionable;
                                    inv1.root_cause_analysis.contributing_factors = factors.clone();
                                    let inv2 = Invocation2 {
                                        investigation_outcome: o2,
                                        needs_human_review: review,
                                        ..with(confidence)
                                    };
                                    let (out, _) = run(&inv1, &inv2, verified);
                                    let expect_gate = o1 == InvestigationOutcome::Actionable
                                        && actionable
                                        && o2.is_none_or(|o| o == InvestigationOutcome::Actionable)
                                        && verified
                                        && confidence >= CONFIDENCE_THRESHOLD
                                        && !review;
                                    let case = format!(
                                        "{o1:?} actionable={actionable} factors={factors:?} inv2={o2:?} verified={verified} confidence={confidence} review={review}: {out:?}"
                                    );
                                    assert_eq!(
                                        out.next_phase == Phase::Gating,
                                        expect_gate,
                                        "{case}"
                                    );
                                    if expect_gate {
                                        gated += 1;
                                        assert_eq!(
                                            out.kind,
                                            OutcomeKind::WorkflowSelected,
                                            "{case}"
                                        );
                                    }
                                    if matches!(
                                        o1,
                                        InvestigationOutcome::Inconclusive
                                            | InvestigationOutcome::InsufficientData
                                    ) {
                                        assert_eq!(
                                            out.next_phase,
                                            Phase::ManualReviewRequired,
                                            "{case}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            gated,
            2 * 2 * 2,
            "factors x inv2 outcome (none, actionable) x confidence"
        );
    }

    #[test]
    fn a_selection_without_an_actionable_rca_goes_to_review() {
        use InvestigationOutcome::*;
        for (o1, kind, reason) in [
            (
                Inconclusive,
                OutcomeKind::Inconclusive,
                "investigation_inconclusive",
            ),
            (
                InsufficientData,
                OutcomeKind::InsufficientData,
                "insufficient_data",
            ),
            (
                NotActionable,
                OutcomeKind::Inconclusive,
                "investigation_inconclusive",
            ),
        ] {
            let (out, _) = run(&rca(o1, 0.95), &with(0.95), true);
            assert_eq!(
                (out.kind, out.next_phase),
                (kind, Phase::ManualReviewRequired),
                "{o1:?}: {out:?}"
            );
            assert!(out.reason.starts_with(reason), "{o1:?}: {}", out.reason);
        }
        // An actionable RCA that invocation 2 contradicts (not actionable) is no better.
        let contradicted = Invocation2 {
            investigation_outcome: Some(NotActionable),
            ..with(0.95)
        };
        let (out, _) = run(&rca(Actionable, 0.9), &contradicted, true);
        assert_eq!(out.next_phase, Phase::ManualReviewRequired, "{out:?}");
        // Nor is "actionable" with actionable=false.
        let mut flagged = rca(Actionable, 0.9);
        flagged.actionable = false;
        let (out, _) = run(&flagged, &with(0.95), true);
        assert_eq!(out.next_phase, Phase::ManualReviewRequired, "{out:?}");
        // Without a selection an inconclusive RCA stays inconclusive even if invocation 2
        // calls it not actionable.
        let relabelled = Invocation2 {
            investigation_outcome: Some(NotActionable),
            no_workflow: Some("nothing to do".into()),
            ..Default::default()
        };
        let (out, _) = run(&rca(Inconclusive, 0.3), &relabelled, true);
        assert_eq!(
            (out.kind, out.next_phase),
            (OutcomeKind::Inconclusive, Phase::ManualReviewRequired)
        );
    }

    #[test]
    fn an_explicit_review_request_keeps_its_reason_on_an_inconclusive_rca() {
        let mut inv1 = rca(InvestigationOutcome::Inconclusive, 0.5);
        inv1.needs_human_review = true;
        inv1.human_review_reason = Some("the Secret payment-keys is missing".into());
        let (out, _) = run(&inv1, &Invocation2::default(), true);
        assert_eq!(out.kind, OutcomeKind::HumanReviewRequested);
        assert!(out.reason.contains("payment-keys"), "{}", out.reason);
    }

    #[test]
    fn resolved_needs_no_action_only_without_a_substantive_rca() {
        use InvestigationOutcome::ProblemResolved;
        let bare = rca(ProblemResolved, 0.9);
        let mut substantive = bare.clone();
        substantive.root_cause_analysis.contributing_factors = vec!["OOMKilled 4 times".into()];
        let (out, _) = run(&bare, &Invocation2::default(), true);
        assert_eq!(
            (out.kind, out.next_phase),
            (OutcomeKind::ProblemResolved, Phase::NoActionRequired)
        );
        for inv2 in [Invocation2::default(), with(0.95)] {
            let (out, _) = run(&substantive, &inv2, true);
            assert_eq!(
                (out.kind, out.next_phase),
                (OutcomeKind::Inconclusive, Phase::ManualReviewRequired),
                "{out:?}"
            );
            assert!(out.reason.contains("OOMKilled 4 times"), "{}", out.reason);
        }
        // Invocation 2 leaving the factors out (an empty list) does not hide them.
        let emptied = Invocation2 {
            contributing_factors: Some(vec![]),
            ..Default::default()
        };
        let (out, _) = run(&substantive, &emptied, true);
        assert_eq!(out.next_phase, Phase::ManualReviewRequired, "{out:?}");
        // Warnings and a low confidence still count.
        let mut warned = analysis(bare.clone(), true);
        warned.warnings = vec!["inconclusive: the evidence does not determine the cause".into()];
        let mut m = merge(&bare, &Invocation2::default());
        let out = route(&warned, &Invocation2::default(), &mut m);
        assert_eq!(out.next_phase, Phase::ManualReviewRequired, "{out:?}");
        let (out, _) = run(&rca(ProblemResolved, 0.5), &Invocation2::default(), true);
        assert_eq!(out.next_phase, Phase::ManualReviewRequired, "{out:?}");
    }

    #[test]
    fn an_unverified_target_is_rca_incomplete_before_validation() {
        let inv1 = rca(InvestigationOutcome::Actionable, 0.9);
        let unverified = Invocation2 {
            unverified_selection: Some("w".into()),
            ..Default::default()
        };
        let failed = Invocation2 {
            validation_failed: true,
            validation_attempts: vec![ValidationAttempt {
                workflow_id: "w".into(),
                code: "workflow_not_applicable".into(),
                errors: vec!["acts on Deployment, not on an unknown kind".into()],
            }],
            ..Default::default()
        };
        for inv2 in [unverified, failed, with(0.95)] {
            let (out, _) = run(&inv1, &inv2, false);
            assert_eq!(
                (out.kind, out.next_phase),
                (OutcomeKind::RcaIncomplete, Phase::ManualReviewRequired),
                "{inv2:?}"
            );
            assert!(out.reason.starts_with("rca_incomplete"), "{}", out.reason);
        }
        // With no workflow put forward, an unverified target is a missing catalog match.
        let none = Invocation2 {
            no_workflow: Some("none fits".into()),
            ..Default::default()
        };
        assert_eq!(
            run(&inv1, &none, false).0.kind,
            OutcomeKind::NoMatchingWorkflows
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
