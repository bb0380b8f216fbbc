//! What every channel says about an approval, as plain text: the e-mail and Slack renderers
//! escape these strings for their medium (HTML, mrkdwn) and lay them out; the wording and the
//! facts stay the same everywhere.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::domain::{ApprovalRequest, Decision, ObligationStatus, Proof, ProofVerdict};

/// `Approve RollbackDeployment on prod/Deployment/checkout?`
pub fn question(a: &ApprovalRequest) -> String {
    format!("Approve {} on {}?", a.action_type, a.target)
}

/// `rollback-deployment v1.2.0 (RollbackDeployment)`
pub fn workflow(a: &ApprovalRequest) -> String {
    format!(
        "{} v{} ({})",
        a.workflow_id,
        a.workflow_version.trim_start_matches('v'),
        a.action_type
    )
}

pub fn environment(a: &ApprovalRequest) -> String {
    a.environment.clone().unwrap_or_else(|| "unknown".into())
}

/// `82%`
pub fn confidence(a: &ApprovalRequest) -> String {
    let pct = (a.confidence.clamp(0.0, 1.0) * 100.0).round();
    format!("{pct:.0}%")
}

/// `85 — production namespace`
pub fn risk(a: &ApprovalRequest) -> String {
    format!("{} — {}", a.risk_score, a.risk_reason)
}

/// `2025-06-01 12:15:00 UTC (in 15 minutes)`: absolute, and relative to `now`.
pub fn expiry(a: &ApprovalRequest, now: DateTime<Utc>) -> String {
    format!("{} ({})", utc(a.expires_at), relative(a.expires_at, now))
}

/// `in 15 minutes`, `in 1 minute`, `already expired`. Rounded up: 14 min 30 s is 15 minutes.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (at - now).num_seconds();
    if seconds <= 0 {
        return "already expired".into();
    }
    let minutes = (seconds + 59) / 60;
    if minutes == 1 {
        "in 1 minute".into()
    } else {
        format!("in {minutes} minutes")
    }
}

pub fn utc(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One `name = value` line per parameter, strings without their JSON quotes.
pub fn parameters(params: &Map<String, Value>) -> Vec<String> {
    params
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k} = {s}"),
            other => format!("{k} = {other}"),
        })
        .collect()
}

/// `workflow-id: rationale`, or the id alone.
pub fn alternatives(a: &ApprovalRequest) -> Vec<String> {
    a.alternatives
        .iter()
        .map(|alt| {
            if alt.rationale.trim().is_empty() {
                alt.workflow_id.clone()
            } else {
                format!("{}: {}", alt.workflow_id, alt.rationale)
            }
        })
        .collect()
}

pub fn policy_revision(a: &ApprovalRequest) -> String {
    a.policy_revision
        .clone()
        .unwrap_or_else(|| "unknown".into())
}

/// The outcome in one sentence: `Approved by alice@example.com via slack at 2025-… UTC.`,
/// with the approver's message and the alternative they chose, if any.
pub fn outcome(a: &ApprovalRequest) -> String {
    let Some(d) = &a.decision else {
        return "This approval is no longer pending.".into();
    };
    let mut s = match d.decision {
        Decision::Approved => format!(
            "Approved by {} via {} at {}.",
            d.decided_by,
            d.decided_via,
            utc(d.decided_at)
        ),
        Decision::Rejected => format!(
            "Denied by {} via {} at {}.",
            d.decided_by,
            d.decided_via,
            utc(d.decided_at)
        ),
        Decision::Expired => format!("Expired at {} without a decision.", utc(d.decided_at)),
    };
    if let Some(alt) = &d.alternative {
        s.push_str(&format!(" Chosen instead: {alt}."));
    }
    if let Some(m) = d.message.as_deref().filter(|m| !m.trim().is_empty()) {
        s.push_str(&format!(" Message: {m}"));
    }
    if let Some(n) = a.note.as_deref().filter(|n| !n.trim().is_empty()) {
        s.push_str(&format!(" {n}"));
    }
    s
}

/// The change the API server's dry run says the action makes, a line per change
/// (`Deployment shop/checkout: image of container checkout shop/checkout:1.4.2 → …`).
pub fn change(a: &ApprovalRequest) -> Vec<String> {
    change_of(a.proof.as_ref())
}

/// [`change`] of a proof: every changed object's changes, then what would happen where no dry
/// run was possible, then a step the API server refused.
pub fn change_of(proof: Option<&Proof>) -> Vec<String> {
    let Some(p) = proof else {
        return vec!["no dry run was recorded".into()];
    };
    let Some(c) = &p.change else {
        return vec!["no dry run was made for this proposal".into()];
    };
    let mut out: Vec<String> = c
        .objects
        .iter()
        .flat_map(|o| {
            o.changes
                .iter()
                .map(move |ch| format!("{}: {ch}", o.object))
        })
        .collect();
    if let Some(n) = c.note.as_deref().filter(|n| !n.trim().is_empty()) {
        out.push(n.to_owned());
    }
    if let Some(r) = &c.refused {
        out.push(format!("the API server refused the dry run: {r}"));
    }
    if out.is_empty() {
        out.push("the dry run changes nothing".into());
    }
    out
}

/// An obligation's status as a word that stands out where it matters: `holds`, `FAILS`,
/// `UNKNOWN` (not checked: counts as failing).
pub fn mark(status: ObligationStatus) -> &'static str {
    match status {
        ObligationStatus::Holds => "holds",
        ObligationStatus::Fails => "FAILS",
        ObligationStatus::Unknown => "UNKNOWN",
    }
}

/// What was checked against the cluster before asking: one line per obligation, its status
/// and the first piece of its evidence.
pub fn checked(a: &ApprovalRequest) -> Vec<String> {
    checked_of(a.proof.as_ref())
}

/// [`checked`] of a proof.
pub fn checked_of(proof: Option<&Proof>) -> Vec<String> {
    let Some(p) = proof else {
        return vec!["nothing was checked against the cluster".into()];
    };
    let mut out: Vec<String> = p
        .obligations
        .iter()
        .map(|o| match o.evidence.first() {
            Some(e) => format!("[{}] {} — {e}", mark(o.status), o.statement),
            None => format!("[{}] {}", mark(o.status), o.statement),
        })
        .collect();
    if out.is_empty() {
        out.push(unverified(p));
    }
    out
}

/// Why a proof has no obligations.
pub fn unverified(p: &Proof) -> String {
    format!(
        "{}: kubemedic knows no obligations for this action type (unverified)",
        p.action_type
    )
}

/// `proven: 5 of 5 obligations hold`, `refuted: 2 of 5 obligations do not hold`,
/// `unverified: no obligations are known for this action type`.
pub fn verdict(p: &Proof) -> String {
    format!("{}: {}", p.verdict.as_str(), tally(p))
}

/// [`verdict`] without the verdict: `5 of 5 obligations hold`, for beside a verdict badge.
pub fn tally(p: &Proof) -> String {
    let total = p.obligations.len();
    let failed = p.failed().count();
    let plural = if total == 1 { "" } else { "s" };
    match p.verdict {
        ProofVerdict::Unverified => "no obligations are known for this action type".into(),
        ProofVerdict::Proven => format!("{total} of {total} obligation{plural} hold"),
        ProofVerdict::Refuted => format!(
            "{failed} of {total} obligation{plural} {}",
            if failed == 1 {
                "does not hold"
            } else {
                "do not hold"
            }
        ),
    }
}

/// The spec the approval is bound to (`sha256:3f2a…`), when known.
pub fn bound_to(a: &ApprovalRequest) -> Option<String> {
    a.proof.as_ref()?.spec_hash.clone()
}

/// Whether the approvers were told the approved change was not executed.
pub fn not_executed(a: &ApprovalRequest) -> bool {
    a.note
        .as_deref()
        .is_some_and(|n| n.trim_start().starts_with("Not executed"))
}

/// The note a remediation that made its target worse leaves on its approval, undone.
pub const UNDONE: &str = "Undone:";
/// …and not undone.
pub const MADE_WORSE: &str = "Made worse, not undone:";

/// Whether the approvers were told the executed change made its target worse: `Some(true)`
/// when kubemedic undid it, `Some(false)` when it did not.
pub fn made_worse(a: &ApprovalRequest) -> Option<bool> {
    let n = a.note.as_deref()?.trim_start();
    if n.starts_with(UNDONE) {
        Some(true)
    } else if n.starts_with(MADE_WORSE) {
        Some(false)
    } else {
        None
    }
}

/// `Approved`, `Denied`, `Expired`, `Closed`: the outcome in a word (`Approved, not executed`
/// when the target changed or the proof failed after the approval; `Approved, made worse,
/// undone` when the change made its target worse).
pub fn outcome_word(a: &ApprovalRequest) -> &'static str {
    match a.decision.as_ref().map(|d| d.decision) {
        Some(Decision::Approved) if not_executed(a) => "Approved, not executed",
        Some(Decision::Approved) if made_worse(a) == Some(true) => "Approved, made worse, undone",
        Some(Decision::Approved) if made_worse(a) == Some(false) => "Approved, made worse",
        Some(Decision::Approved) => "Approved",
        Some(Decision::Rejected) => "Denied",
        Some(Decision::Expired) => "Expired",
        None => "Closed",
    }
}

/// At most `max` characters, the cut marked with `…` (Slack refuses over-long fields).
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Control characters (a newline in an alert name) become spaces: for one-line places such as
/// a mail subject or a Slack header.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DryRunChange, ObjectChange, Obligation, ProofPoint, Proposer, Target};
    use chrono::TimeZone;

    #[test]
    fn relative_rounds_up_and_says_expired() {
        let now = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap();
        let at = |s: i64| now + chrono::Duration::seconds(s);
        assert_eq!(relative(at(15 * 60), now), "in 15 minutes");
        assert_eq!(relative(at(14 * 60 + 30), now), "in 15 minutes");
        assert_eq!(relative(at(20), now), "in 1 minute");
        assert_eq!(relative(at(0), now), "already expired");
        assert_eq!(relative(at(-60), now), "already expired");
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("äöüß", 3), "äö…");
    }

    fn approval(proof: Option<Proof>) -> ApprovalRequest {
        let at = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap();
        ApprovalRequest {
            id: uuid::Uuid::nil(),
            request_id: uuid::Uuid::nil(),
            created_at: at,
            expires_at: at + chrono::Duration::minutes(15),
            signal_name: "KubePodCrashLooping".into(),
            target: Target::new("Deployment", "checkout", Some("shop".into())),
            environment: Some("production".into()),
            summary: "the 1.4.2 rollout crashes".into(),
            evidence: vec![],
            workflow_id: "rollback-deployment".into(),
            workflow_version: "1.2.0".into(),
            action_type: "RollbackDeployment".into(),
            parameters: Map::new(),
            rationale: String::new(),
            alternatives: vec![],
            confidence: 0.8,
            risk_score: 85,
            risk_reason: "production namespace".into(),
            required_because: vec![],
            policy_revision: None,
            approvers: vec![],
            slack_approvers: vec![],
            proof,
            decision: None,
            note: None,
        }
    }

    fn obligation(id: &str, status: ObligationStatus, evidence: &[&str]) -> Obligation {
        Obligation {
            id: id.into(),
            statement: format!("statement of {id}"),
            status,
            evidence: evidence.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    fn proof(
        action_type: &str,
        verdict: ProofVerdict,
        obligations: Vec<Obligation>,
        change: Option<DryRunChange>,
    ) -> Proof {
        Proof {
            action_type: action_type.into(),
            workflow_id: "rollback-deployment".into(),
            parameters: Map::new(),
            proposer: Proposer::Offline,
            point: ProofPoint::Selection,
            verdict,
            obligations,
            target: Target::new("Deployment", "checkout", Some("shop".into())),
            spec_hash: Some("sha256:3f2a".into()),
            drift_hash: None,
            change,
            checked_at: Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap(),
        }
    }

    fn rollback_change() -> DryRunChange {
        DryRunChange {
            objects: vec![ObjectChange {
                object: "Deployment shop/checkout".into(),
                changes: vec![
                    "image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1".into(),
                    "3 pod(s) replaced, at most 1 unavailable".into(),
                ],
            }],
            refused: None,
            note: None,
        }
    }

    #[test]
    fn without_a_proof_nothing_claims_to_be_checked() {
        let a = approval(None);
        assert_eq!(change(&a), ["no dry run was recorded"]);
        assert_eq!(checked(&a), ["nothing was checked against the cluster"]);
        assert_eq!(bound_to(&a), None);
    }

    #[test]
    fn a_proven_rollback_shows_each_change_and_each_obligation_with_its_mark() {
        let a = approval(Some(proof(
            "RollbackDeployment",
            ProofVerdict::Proven,
            vec![
                obligation(
                    "rollback.revision-named",
                    ObligationStatus::Holds,
                    &["revision 1 (shop/checkout:1.4.1) is kept", "second"],
                ),
                obligation(
                    "rollback.no-rollout-by-others",
                    ObligationStatus::Holds,
                    &[],
                ),
            ],
            Some(rollback_change()),
        )));
        assert_eq!(
            change(&a),
            [
                "Deployment shop/checkout: image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1",
                "Deployment shop/checkout: 3 pod(s) replaced, at most 1 unavailable",
            ]
        );
        assert_eq!(
            checked(&a),
            [
                "[holds] statement of rollback.revision-named — revision 1 (shop/checkout:1.4.1) is kept",
                "[holds] statement of rollback.no-rollout-by-others",
            ]
        );
        assert_eq!(bound_to(&a).as_deref(), Some("sha256:3f2a"));
        assert_eq!(
            verdict(a.proof.as_ref().unwrap()),
            "proven: 2 of 2 obligations hold"
        );
    }

    #[test]
    fn failing_and_unknown_obligations_stand_out() {
        let p = proof(
            "RollbackDeployment",
            ProofVerdict::Refuted,
            vec![
                obligation("a", ObligationStatus::Fails, &["revision 1 fails too"]),
                obligation(
                    "b",
                    ObligationStatus::Unknown,
                    &["the API server did not answer"],
                ),
                obligation("c", ObligationStatus::Holds, &[]),
            ],
            Some(rollback_change()),
        );
        let lines = checked_of(Some(&p));
        assert_eq!(lines[0], "[FAILS] statement of a — revision 1 fails too");
        assert_eq!(
            lines[1],
            "[UNKNOWN] statement of b — the API server did not answer"
        );
        assert_eq!(verdict(&p), "refuted: 2 of 3 obligations do not hold");
    }

    #[test]
    fn an_unverified_action_type_says_nothing_is_known_and_what_would_happen() {
        let a = approval(Some(proof(
            "RunMigrationJob",
            ProofVerdict::Unverified,
            vec![],
            Some(DryRunChange {
                objects: vec![],
                refused: None,
                note: Some("a Job would run migrate.sh once in shop".into()),
            }),
        )));
        assert_eq!(
            checked(&a),
            ["RunMigrationJob: kubemedic knows no obligations for this action type (unverified)"]
        );
        assert_eq!(change(&a), ["a Job would run migrate.sh once in shop"]);
        let no_dry_run = approval(Some(proof(
            "RunMigrationJob",
            ProofVerdict::Unverified,
            vec![],
            None,
        )));
        assert_eq!(
            change(&no_dry_run),
            ["no dry run was made for this proposal"]
        );
    }

    #[test]
    fn a_refused_dry_run_says_the_api_server_refused_it() {
        let a = approval(Some(proof(
            "ScaleDeployment",
            ProofVerdict::Proven,
            vec![obligation("scale.room", ObligationStatus::Holds, &[])],
            Some(DryRunChange {
                objects: vec![],
                refused: Some(
                    "admission webhook \"quota.shop\" denied the request: replicas exceed 10"
                        .into(),
                ),
                note: None,
            }),
        )));
        assert_eq!(
            change(&a),
            [
                "the API server refused the dry run: admission webhook \"quota.shop\" denied the request: replicas exceed 10"
            ]
        );
        let nothing = approval(Some(proof(
            "ScaleDeployment",
            ProofVerdict::Proven,
            vec![],
            Some(DryRunChange::default()),
        )));
        assert_eq!(change(&nothing), ["the dry run changes nothing"]);
    }

    #[test]
    fn an_approved_change_not_executed_says_so() {
        let mut a = approval(None);
        a.decision = Some(crate::domain::ApprovalDecision {
            decision: Decision::Approved,
            decided_by: "alice@example.com".into(),
            decided_via: crate::domain::Channel::Email,
            decided_at: a.created_at + chrono::Duration::minutes(3),
            message: None,
            alternative: None,
        });
        assert_eq!(outcome_word(&a), "Approved");
        a.note = Some("Not executed: target_changed: the image is shop/checkout:1.4.3 now".into());
        assert_eq!(outcome_word(&a), "Approved, not executed");
        assert_eq!(
            outcome(&a),
            "Approved by alice@example.com via email at 2025-06-01 12:03:00 UTC. \
             Not executed: target_changed: the image is shop/checkout:1.4.3 now"
        );
        a.note = Some(format!(
            "{UNDONE} scale-replicas made Deployment shop/web worse"
        ));
        assert_eq!(outcome_word(&a), "Approved, made worse, undone");
        a.note = Some(format!(
            "{MADE_WORSE} scale-replicas made Deployment shop/web worse"
        ));
        assert_eq!(outcome_word(&a), "Approved, made worse");
    }

    #[test]
    fn one_line_removes_newlines() {
        assert_eq!(one_line("a\r\nb\tc"), "a  b c");
    }
}
