//! `explain_policy_decision`: why the approval gate decided as it did for one request — from
//! what the gate recorded (its decision in the request's state, and the `gate` audit event
//! with the policy's input and output), the human decision that followed, and where the
//! policy in force comes from now.
//!
//! The policy's origin (directory, built-in, `ApprovalPolicy` objects) is not stored with a
//! decision; its revision (sha256 of the sources) is. So the answer says whether the revision
//! that decided is the one in force now, and only then names its origin as that one's.

use rmcp::ErrorData;
use serde_json::{Value, json};

use crate::domain::{ApprovalRequest, AuditEvent, GatePayload, Phase, RemediationRequest};
use crate::policy::RegoGate;

/// The explanation, or an error naming a request that has no gate decision (yet).
pub fn explain(
    request: &RemediationRequest,
    trail: &[AuditEvent],
    approval: Option<&ApprovalRequest>,
    policy: Option<&RegoGate>,
) -> Result<Value, ErrorData> {
    let Some(decision) = &request.state.gate else {
        let why = if request.phase.is_terminal() {
            format!(
                "it ended in {} before the gate: {}",
                request.phase,
                request.reason.as_deref().unwrap_or("no reason recorded")
            )
        } else {
            format!(
                "it is in {}; the gate decides after selection",
                request.phase
            )
        };
        return Err(ErrorData::invalid_params(
            format!(
                "id: request {} has no policy decision yet: {why}",
                request.id
            ),
            None,
        ));
    };
    // The gate stage's own event; an approver's alternative is gated again later, with
    // `alternative` in its payload.
    let gates: Vec<(&AuditEvent, GatePayload)> =
        trail.iter().filter_map(|e| Some((e, e.gate()?))).collect();
    let gated = gates
        .iter()
        .rfind(|(_, g)| g.alternative.is_none())
        .map(|(e, g)| (*e, g));
    let alternatives: Vec<Value> = gates
        .iter()
        .filter(|(_, g)| g.alternative.is_some())
        .map(|(e, g)| {
            json!({
                "alternative": g.alternative,
                "at": e.at,
                "message": e.message,
                "output": g.output,
            })
        })
        .collect();
    let verdict = if decision.degraded {
        "degraded"
    } else if decision.require_approval {
        "approval_required"
    } else {
        "allowed"
    };
    let policy_now = policy.map(|gate| {
        let snapshot = gate.snapshot();
        let revision = snapshot.revision().map(str::to_owned);
        let same = revision.is_some() && revision == decision.policy_revision;
        json!({
            "revision": revision,
            "origin": gate.origin(),
            "problem": gate.problem(),
            "decided_by_this_revision": same,
        })
    });
    let origin = match (&policy_now, policy) {
        (Some(now), Some(gate)) if now["decided_by_this_revision"] == true => gate.origin(),
        (Some(_), Some(gate)) => format!(
            "an earlier revision of the policy (the one in force now is {}, from {})",
            crate::policy::short_revision(gate.snapshot().revision()),
            gate.origin()
        ),
        _ => "not known here (this kubemedic has no approval policy loaded)".to_owned(),
    };
    let human = approval.map(|a| {
        json!({
            "approval_id": a.id,
            "status": a.status().as_str(),
            "decided_by": a.decision.as_ref().map(|d| d.decided_by.clone()),
            "decided_via": a.decision.as_ref().map(|d| d.decided_via),
            "message": a.decision.as_ref().and_then(|d| d.message.clone()),
            "required_because": a.required_because,
        })
    });
    let phase_after = match request.phase {
        Phase::Rejected => Some("denied by a human: nothing was changed"),
        Phase::Expired => Some("nobody decided in time: nothing was changed"),
        _ => None,
    };
    Ok(json!({
        "request_id": request.id,
        "phase": request.phase,
        "decision": verdict,
        "require_approval": decision.require_approval,
        "degraded": decision.degraded,
        "reason": decision.reason,
        "risk_factors": decision.risk_factors,
        "policy_revision": decision.policy_revision,
        "policy_origin": origin,
        "policy_now": policy_now,
        "decided_at": gated.map(|(e, _)| e.at),
        "message": gated.map(|(e, _)| e.message.clone()),
        "input": gated.map(|(_, g)| g.input.clone()),
        "human_decision": human,
        "outcome": phase_after,
        "alternatives_gated": alternatives,
    }))
}
