//! Audit events: what happened to a request, by whom, written in the same transaction as the
//! change they describe.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::action::ActionType;
use super::approval::ApprovalDecision;
use super::execution::{ExecutionOutcome, StepStatus};
use super::gate::GateDecision;
use super::history::HistoryContext;
use super::investigation::{
    AlternativeWorkflow, Analysis, InvestigationPlan, LlmCallRecord, RcaResult, RemoteToolNote,
    RoutedOutcome, SelectedWorkflow, Selection, ToolCallRecord, Usage, ValidationAttempt,
};
use super::labels::DetectedLabels;
use super::learning::{LearnedPattern, LearnedUse, PatternOutcome, Signature};
use super::phase::Phase;
use super::proof::Proof;
use super::step::StepDone;
use super::target::Target;

/// An audit event before the store gives it an id and a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditDraft {
    /// What happened, machine-readable: `received`, `occurrence`, `transition`, `waiting`, …
    pub kind: String,
    /// Who did it: `alertmanager`, `worker/<id>`, `user:<name>`, …
    pub actor: String,
    /// One line for humans.
    pub message: String,
    #[serde(default)]
    pub payload: serde_json::Value,
}

impl AuditDraft {
    pub fn new(kind: &str, actor: &str, message: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            actor: actor.to_owned(),
            message: message.into(),
            payload: serde_json::Value::Null,
        }
    }

    pub fn with_payload(mut self, payload: serde_json::Value) -> Self {
        self.payload = payload;
        self
    }

    /// The event with its request's trace id in the payload (`trace_id`), so the trail links
    /// to the trace. In the payload, the id is hashed with the event like the rest of it:
    /// events written before trace ids were kept verify as they were.
    pub fn with_trace(mut self, trace: &super::trace::TraceContext) -> Self {
        let id = serde_json::Value::String(trace.trace_id_hex());
        match &mut self.payload {
            serde_json::Value::Object(map) => {
                map.insert("trace_id".into(), id);
            }
            serde_json::Value::Null => self.payload = serde_json::json!({ "trace_id": id }),
            _ => {}
        }
        self
    }
}

/// The audit event every phase change carries; the store writes it in the same transaction
/// as the change, so no transition can go unrecorded.
pub fn transition_event(from: Phase, to: Phase, reason: Option<&str>, actor: &str) -> AuditDraft {
    let message = match reason {
        Some(r) => format!("{from} -> {to}: {r}"),
        None => format!("{from} -> {to}"),
    };
    let payload = TransitionPayload {
        from: Some(from),
        to: Some(to),
        reason: reason.map(str::to_owned),
    };
    AuditDraft::new(TRANSITION, actor, message)
        .with_payload(serde_json::to_value(payload).unwrap_or_default())
}

/// An audit event as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub id: i64,
    pub request_id: Option<uuid::Uuid>,
    pub at: DateTime<Utc>,
    pub phase: Option<Phase>,
    pub kind: String,
    pub actor: String,
    pub message: String,
    pub payload: serde_json::Value,
}

/// The kind of the audit event invocation 1 leaves ([`RcaPayload`]).
pub const RCA: &str = "rca";
/// The kind of the audit event invocation 2 leaves ([`SelectionPayload`]).
pub const SELECTION: &str = "selection";
/// The kind of the audit event a proof leaves (its payload: `{"proof": Proof}`).
pub const PROOF: &str = "proof";

/// The kind of a phase change's event ([`TransitionPayload`]).
pub const TRANSITION: &str = "transition";
/// The kind of the approval gate's event ([`GatePayload`]).
pub const GATE: &str = "gate";
/// The kind of a guardrail's block ([`GuardrailPayload`]).
pub const GUARDRAIL: &str = "guardrail";
/// The kind of an execution's end, or of a proposal handed to a human ([`ExecutionPayload`]).
pub const EXECUTION: &str = "execution";
/// The kind of one step of an execution ([`StepPayload`]).
pub const EXECUTION_STEP: &str = "execution_step";

/// The kind of an approval offered to people (its payload, shown as stored: the approval's
/// id, expiry, approvers and risk). A chat turn that asked for a change ends at it.
pub const APPROVAL_REQUESTED: &str = "approval_requested";
/// The kind of an approval's decision ([`ApprovalDecidedPayload`]).
pub const APPROVAL_DECIDED: &str = "approval_decided";
/// The kind of the follow-up to an approved request that was not executed ([`FollowUpPayload`]).
pub const APPROVAL_NOT_EXECUTED: &str = "approval_not_executed";
/// The kind of the follow-up to an approved change that made its target worse
/// ([`FollowUpPayload`]).
pub const APPROVAL_MADE_WORSE: &str = "approval_made_worse";
/// The kind of a learned pattern's use as a hint ([`LearnedHintPayload`]).
pub const LEARNED_HINT: &str = "learned_hint";
/// The kind of a verified outcome learned for an incident signature ([`PatternLearnedPayload`]).
pub const PATTERN_LEARNED: &str = "pattern_learned";

/// The kind of a signal's first arrival (its payload, shown as stored: the signal).
pub const RECEIVED: &str = "received";
/// The kind of a signal that fired again while its request is open.
pub const OCCURRENCE: &str = "occurrence";
/// The kind of the alert's resolution reported by Alertmanager.
pub const SIGNAL_RESOLVED: &str = "signal_resolved";
/// The kind of the enrichment's event (labels, owner chain, spec hash).
pub const ENRICHMENT: &str = "enrichment";
/// The kind of verification's decision about a change that made its target worse.
pub const UNDO_DECIDED: &str = "undo_decided";
/// The kind of the restore of a change that made its target worse.
pub const UNDO: &str = "undo";
/// The kind of an approval click or link refused (forged, stale, replayed, not an approver).
pub const APPROVAL_REFUSED: &str = "approval_refused";
/// The kind of a decision the store refused (the approval already decided or expired).
pub const APPROVAL_DECISION_REFUSED: &str = "approval_decision_refused";
/// The kind of a notification sent to approvers.
pub const NOTIFICATION: &str = "notification";
/// The kind of verification's assessment.
pub const ASSESSMENT: &str = "assessment";
/// The kinds of an investigation ended by its deadline or by the model's budget.
pub const TIMEOUT: &str = "timeout";
pub const LLM_BUDGET: &str = "llm_budget";

/// The payload of an [`APPROVAL_DECIDED`] event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecidedPayload {
    pub approval_id: uuid::Uuid,
    pub decision: ApprovalDecision,
}

/// The payload of an [`APPROVAL_NOT_EXECUTED`] or [`APPROVAL_MADE_WORSE`] event: the approval
/// followed up and the note its approvers get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUpPayload {
    pub approval_id: uuid::Uuid,
    pub note: String,
}

/// The payload of a [`LEARNED_HINT`] event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedHintPayload {
    pub learned: LearnedUse,
}

/// The payload of a [`PATTERN_LEARNED`] event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternLearnedPayload {
    pub outcome: PatternOutcome,
}

/// The payload of a [`TRANSITION`] event: the phase left, the phase entered, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransitionPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub from: Option<Phase>,
    #[serde(default, deserialize_with = "lenient")]
    pub to: Option<Phase>,
    #[serde(default, deserialize_with = "lenient")]
    pub reason: Option<String>,
}

/// The payload of a [`GATE`] event: the policy's input document (as the policy read it: the
/// Rego document is its own contract, kept as JSON), its decision, and the approver's
/// alternative when the policy was asked again about one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatePayload {
    #[serde(default)]
    pub input: serde_json::Value,
    #[serde(default, deserialize_with = "lenient")]
    pub output: Option<GateDecision>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub alternative: Option<String>,
}

/// The payload of a [`GUARDRAIL`] event: which guardrail blocked and what it said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardrailPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub guardrail: String,
    #[serde(default, deserialize_with = "lenient")]
    pub message: String,
}

/// The payload of an [`EXECUTION`] event: what ran, on what, and how it ended; or, for a
/// proposal, the change handed to a human.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutionPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub workflow_id: String,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_version: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub action_type: Option<ActionType>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub target: Option<Target>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub dry_run: Option<bool>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub pre_spec_hash: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub post_spec_hash: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub outcome: Option<ExecutionOutcome>,
    /// A proposal's text (nothing was applied).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub proposal: Option<String>,
}

/// The payload of an [`EXECUTION_STEP`] event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub step: u32,
    #[serde(default, deserialize_with = "lenient")]
    pub action: StepDone,
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<StepStatus>,
    /// What the step's write returned (the object's name, the revision, …), as JSON.
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// The payload of a [`PROOF`] event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ProofPayload {
    proof: Proof,
}

/// The payload of an [`RCA`] event: what invocation 1 found, with every tool call and model
/// call it made (the whole tool outputs live here, not in the request's state). The chat
/// stream and the request page read it back through this type, so a field renamed here is
/// renamed for all of them. Every field is read on its own ([`lenient`]): a trail written
/// before a field existed, or when it had another shape, still gives the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RcaPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub rca: Option<RcaResult>,
    #[serde(default, deserialize_with = "lenient")]
    pub root_owner: Option<Target>,
    #[serde(default, deserialize_with = "lenient")]
    pub spec_hash: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub detected_labels: Option<DetectedLabels>,
    #[serde(default, deserialize_with = "lenient")]
    pub warnings: Vec<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub playbooks: Vec<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub tool_calls: Vec<ToolCallRecord>,
    #[serde(default, deserialize_with = "lenient")]
    pub llm_usage: Usage,
    #[serde(default, deserialize_with = "lenient")]
    pub llm_calls: Vec<LlmCallRecord>,
    #[serde(default, deserialize_with = "lenient")]
    pub history: Option<HistoryContext>,
    #[serde(default, deserialize_with = "lenient")]
    pub plan: Option<InvestigationPlan>,
    #[serde(default, deserialize_with = "lenient")]
    pub signature: Option<Signature>,
    #[serde(default, deserialize_with = "lenient")]
    pub learned: Vec<LearnedPattern>,
    #[serde(default, deserialize_with = "lenient")]
    pub remote_tools: Vec<RemoteToolNote>,
}

impl RcaPayload {
    pub fn of(a: &Analysis) -> Self {
        Self {
            rca: Some(a.rca.clone()),
            root_owner: a.root_owner.clone(),
            spec_hash: a.spec_hash.clone(),
            detected_labels: a.detected_labels.clone(),
            warnings: a.warnings.clone(),
            playbooks: a.playbooks.clone(),
            tool_calls: a.tool_calls.clone(),
            llm_usage: a.usage,
            llm_calls: a.llm_calls.clone(),
            history: a.history.clone(),
            plan: a.plan.clone(),
            signature: a.signature.clone(),
            learned: a.learned.clone(),
            remote_tools: a.remote_tools.clone(),
        }
    }
}

/// The payload of a [`SELECTION`] event: what invocation 2 chose and why, read back like
/// [`RcaPayload`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelectionPayload {
    #[serde(default, deserialize_with = "lenient")]
    pub selected: Option<SelectedWorkflow>,
    #[serde(default, deserialize_with = "lenient")]
    pub alternatives: Vec<AlternativeWorkflow>,
    #[serde(default, deserialize_with = "lenient")]
    pub no_workflow_reasoning: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub validation_attempts: Vec<ValidationAttempt>,
    #[serde(default, deserialize_with = "lenient")]
    pub merged: Option<RcaResult>,
    #[serde(default, deserialize_with = "lenient")]
    pub outcome: Option<RoutedOutcome>,
    #[serde(default, deserialize_with = "lenient")]
    pub llm_usage: Usage,
    #[serde(default, deserialize_with = "lenient")]
    pub llm_calls: Vec<LlmCallRecord>,
    #[serde(default, deserialize_with = "lenient")]
    pub learned: Option<LearnedUse>,
}

impl SelectionPayload {
    pub fn of(s: &Selection) -> Self {
        Self {
            selected: s.selected.clone(),
            alternatives: s.alternatives.clone(),
            no_workflow_reasoning: s.no_workflow_reasoning.clone(),
            validation_attempts: s.validation_attempts.clone(),
            merged: Some(s.merged.clone()),
            outcome: Some(s.outcome.clone()),
            llm_usage: s.usage,
            llm_calls: s.llm_calls.clone(),
            learned: s.learned.clone(),
        }
    }
}

/// An audit event's payload, typed by its kind where kubemedic reads it back.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditPayload {
    Rca(Box<RcaPayload>),
    Selection(Box<SelectionPayload>),
    /// A proof, at selection or before the first write.
    Proof(Box<Proof>),
    Transition(TransitionPayload),
    Gate(Box<GatePayload>),
    Guardrail(GuardrailPayload),
    Execution(Box<ExecutionPayload>),
    Step(StepPayload),
    ApprovalDecided(Box<ApprovalDecidedPayload>),
    /// Not executed, or made worse (the event's kind says which).
    FollowUp(FollowUpPayload),
    LearnedHint(Box<LearnedHintPayload>),
    PatternLearned(Box<PatternLearnedPayload>),
    /// Any other kind, or a payload of a typed kind that does not parse (a trail written by a
    /// version whose fields had other shapes): the JSON as stored.
    Other(serde_json::Value),
}

impl AuditEvent {
    /// The payload, typed by the event's kind.
    pub fn typed_payload(&self) -> AuditPayload {
        let parsed = match self.kind.as_str() {
            RCA => self.read().map(|p| AuditPayload::Rca(Box::new(p))),
            SELECTION => self.read().map(|p| AuditPayload::Selection(Box::new(p))),
            PROOF => self
                .read::<ProofPayload>()
                .map(|p| AuditPayload::Proof(Box::new(p.proof))),
            TRANSITION => self.read().map(AuditPayload::Transition),
            GATE => self.read().map(|p| AuditPayload::Gate(Box::new(p))),
            GUARDRAIL => self.read().map(AuditPayload::Guardrail),
            EXECUTION => self.read().map(|p| AuditPayload::Execution(Box::new(p))),
            EXECUTION_STEP => self.read().map(AuditPayload::Step),
            APPROVAL_DECIDED => self
                .read()
                .map(|p| AuditPayload::ApprovalDecided(Box::new(p))),
            APPROVAL_NOT_EXECUTED | APPROVAL_MADE_WORSE => self.read().map(AuditPayload::FollowUp),
            LEARNED_HINT => self.read().map(|p| AuditPayload::LearnedHint(Box::new(p))),
            PATTERN_LEARNED => self
                .read()
                .map(|p| AuditPayload::PatternLearned(Box::new(p))),
            _ => None,
        };
        parsed.unwrap_or_else(|| AuditPayload::Other(self.payload.clone()))
    }

    /// The payload read as `T`, when it can be.
    fn read<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_value(self.payload.clone()).ok()
    }

    /// A phase change's payload, when this is one and it can be read (only a transition's
    /// payload is parsed: pages call this on every event of a trail).
    pub fn transition(&self) -> Option<TransitionPayload> {
        (self.kind == TRANSITION).then(|| self.read()).flatten()
    }

    /// The approval gate's payload, when this is its event and it can be read.
    pub fn gate(&self) -> Option<GatePayload> {
        (self.kind == GATE).then(|| self.read()).flatten()
    }

    /// A guardrail block's payload, when this is one and it can be read.
    pub fn guardrail(&self) -> Option<GuardrailPayload> {
        (self.kind == GUARDRAIL).then(|| self.read()).flatten()
    }
}

impl AuditDraft {
    /// Invocation 1's event.
    pub fn rca(actor: &str, message: impl Into<String>, payload: &RcaPayload) -> Self {
        Self::new(RCA, actor, message)
            .with_payload(serde_json::to_value(payload).unwrap_or_default())
    }

    /// A proof's event.
    pub fn proof(actor: &str, message: impl Into<String>, proof: &Proof) -> Self {
        Self::new(PROOF, actor, message).with_payload(serde_json::json!({ "proof": proof }))
    }

    /// The approval gate's event.
    pub fn gate(actor: &str, message: impl Into<String>, payload: &GatePayload) -> Self {
        Self::typed(GATE, actor, message, payload)
    }

    /// A guardrail's block.
    pub fn guardrail(actor: &str, message: impl Into<String>, payload: &GuardrailPayload) -> Self {
        Self::typed(GUARDRAIL, actor, message, payload)
    }

    /// An execution's end, or a proposal handed to a human.
    pub fn execution(actor: &str, message: impl Into<String>, payload: &ExecutionPayload) -> Self {
        Self::typed(EXECUTION, actor, message, payload)
    }

    /// One step of an execution.
    pub fn step(actor: &str, message: impl Into<String>, payload: &StepPayload) -> Self {
        Self::typed(EXECUTION_STEP, actor, message, payload)
    }

    /// An event of `kind` with a typed payload (one of this module's payloads for its kind).
    pub fn typed(
        kind: &str,
        actor: &str,
        message: impl Into<String>,
        payload: &impl Serialize,
    ) -> Self {
        Self::new(kind, actor, message)
            .with_payload(serde_json::to_value(payload).unwrap_or_default())
    }

    /// Invocation 2's event.
    pub fn selection(actor: &str, message: impl Into<String>, payload: &SelectionPayload) -> Self {
        Self::new(SELECTION, actor, message)
            .with_payload(serde_json::to_value(payload).unwrap_or_default())
    }
}

/// A field of a typed payload: its value, or its default when it is missing or has another
/// shape (an older trail), so one odd field never hides the rest of the event.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(d: AuditDraft) -> AuditEvent {
        AuditEvent {
            id: 1,
            request_id: None,
            at: Utc::now(),
            phase: None,
            kind: d.kind,
            actor: d.actor,
            message: d.message,
            payload: d.payload,
        }
    }

    #[test]
    fn a_payload_field_of_another_shape_leaves_the_others_readable() {
        let e = AuditEvent {
            id: 1,
            request_id: None,
            at: Utc::now(),
            phase: None,
            kind: RCA.into(),
            actor: "offline".into(),
            message: "m".into(),
            payload: serde_json::json!({
                "plan": {"steps": "not a list"},
                "tool_calls": [{"tool": "get_pods", "arguments": {}, "ok": true, "output_chars": 3}],
                "llm_usage": {"prompt_tokens": 5, "completion_tokens": 1},
            }),
        };
        let AuditPayload::Rca(r) = e.typed_payload() else {
            panic!("not read as an rca payload");
        };
        assert_eq!(r.plan, None);
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.llm_usage.total(), 6);
        // Written and read back, a payload is what it was.
        let back = AuditDraft::rca("x", "m", &r);
        assert_eq!(
            serde_json::from_value::<RcaPayload>(back.payload).ok(),
            Some(*r)
        );
        // A kind kubemedic does not type stays JSON.
        let other = AuditEvent {
            kind: NOTIFICATION.into(),
            ..e
        };
        assert!(matches!(other.typed_payload(), AuditPayload::Other(_)));
    }

    #[test]
    fn transitions_and_gate_decisions_read_back_typed() {
        let t = stored(transition_event(
            Phase::Gating,
            Phase::AwaitingApproval,
            Some("risk 70"),
            "worker",
        ))
        .transition()
        .unwrap();
        assert_eq!(
            (t.from, t.to, t.reason.as_deref()),
            (
                Some(Phase::Gating),
                Some(Phase::AwaitingApproval),
                Some("risk 70")
            )
        );
        // A gate event whose decision has another shape (an older version's) keeps its input.
        let old = AuditEvent {
            kind: GATE.into(),
            payload: serde_json::json!({"input": {"severity": "critical"}, "output": "approve"}),
            ..stored(AuditDraft::new("x", "policy", "m"))
        };
        let g = old.gate().unwrap();
        assert_eq!(g.input["severity"], "critical");
        assert_eq!((g.output, g.alternative), (None, None));
        assert_eq!(old.transition(), None, "a gate event is not a transition");
    }

    /// Issue 43: the approval's decision and follow-ups, the learned hint and the learned
    /// outcome are typed kinds with typed payloads: an event stored by an older version (the
    /// same keys, written by hand) reads as the type, and one whose payload has another shape
    /// is kept as stored.
    #[test]
    fn approval_and_learning_events_read_as_their_types() {
        let id = uuid::Uuid::nil();
        let decided = AuditEvent {
            kind: APPROVAL_DECIDED.into(),
            payload: serde_json::json!({"approval_id": id, "decision": {
                "decision": "approved", "decided_by": "alice", "decided_via": "email",
                "decided_at": "2026-11-30T10:00:00Z"}}),
            ..stored(AuditDraft::new("x", "alice", "m"))
        };
        let AuditPayload::ApprovalDecided(d) = decided.typed_payload() else {
            panic!("not read as a decision: {:?}", decided.typed_payload());
        };
        assert_eq!(
            (d.approval_id, d.decision.decided_by.as_str()),
            (id, "alice")
        );
        let written = AuditDraft::typed(APPROVAL_DECIDED, "alice", "m", &*d);
        assert_eq!(written.payload, decided.payload);

        let worse = AuditEvent {
            kind: APPROVAL_MADE_WORSE.into(),
            payload: serde_json::json!({"approval_id": id, "note": "2 pods fail now"}),
            ..stored(AuditDraft::new("x", "verifier", "m"))
        };
        assert!(
            matches!(worse.typed_payload(), AuditPayload::FollowUp(f) if f.note == "2 pods fail now")
        );
        let odd = AuditEvent {
            kind: PATTERN_LEARNED.into(),
            payload: serde_json::json!({"outcome": "not an outcome"}),
            ..stored(AuditDraft::new("x", "verifier", "m"))
        };
        assert!(matches!(odd.typed_payload(), AuditPayload::Other(_)));
    }
}
