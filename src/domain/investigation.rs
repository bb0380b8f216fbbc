//! What the investigation produces: invocation 1's root cause ([`Analysis`]) and invocation 2's
//! workflow selection, merged and routed to one of the nine outcomes ([`Selection`]).
//!
//! These are the RCA and selection schemas of DESIGN §3.3–3.5 and the seed; their serde names
//! are both the model's contract and the stored format.

use super::action::ActionType;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::history::HistoryContext;
use super::labels::DetectedLabels;
use super::learning::{LearnedPattern, LearnedUse, Signature};
use super::neighbourhood::Neighbourhood;
use super::phase::Phase;
use super::severity::Severity;
use super::target::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvestigationOutcome {
    Actionable,
    NotActionable,
    ProblemResolved,
    InsufficientData,
    Inconclusive,
}

impl InvestigationOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            InvestigationOutcome::Actionable => "actionable",
            InvestigationOutcome::NotActionable => "not_actionable",
            InvestigationOutcome::ProblemResolved => "problem_resolved",
            InvestigationOutcome::InsufficientData => "insufficient_data",
            InvestigationOutcome::Inconclusive => "inconclusive",
        }
    }
}

/// The object the model says should be remediated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRef {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootCauseAnalysis {
    pub summary: String,
    pub severity: Severity,
    #[serde(default)]
    pub contributing_factors: Vec<String>,
    #[serde(default)]
    pub remediation_target: Option<TargetRef>,
    #[serde(default)]
    pub investigation_analysis: String,
}

/// The RCA schema (the arguments of `submit_result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RcaResult {
    pub root_cause_analysis: RootCauseAnalysis,
    pub confidence: f64,
    pub investigation_outcome: InvestigationOutcome,
    pub actionable: bool,
    #[serde(default)]
    pub needs_human_review: bool,
    #[serde(default)]
    pub human_review_reason: Option<String>,
}

/// One tool call of an investigation, for the audit trail: arguments, size, time, the beginning
/// of the output (redacted), and — in the trail, not in the request's state — the whole output
/// (redacted, up to [`TOOL_OUTPUT_BYTES`]) for the chat's `tool_result` events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub tool: String,
    pub arguments: Value,
    pub ok: bool,
    pub output_chars: usize,
    #[serde(default)]
    pub truncated: bool,
    /// The output's first [`TOOL_EXCERPT_CHARS`] characters, secrets redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// The whole output as the tool rendered it, before the cut for the model
    /// ([`whole_output`]), secrets redacted. `None` where the trail keeps the excerpt only
    /// (the investigation's [`TOOL_OUTPUTS_BYTES`] were spent, or the request's state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// How much of a tool's output the audit trail keeps.
pub const TOOL_EXCERPT_CHARS: usize = 1_000;

/// How much of one tool output the audit trail keeps whole (64 KiB), for the chat stream.
pub const TOOL_OUTPUT_BYTES: usize = 64 * 1024;

/// How much whole output one investigation keeps in the trail, all its calls together
/// (512 KiB); the calls after that keep their excerpt only.
pub const TOOL_OUTPUTS_BYTES: usize = 512 * 1024;

/// `text` whole up to [`TOOL_OUTPUT_BYTES`]; longer, its beginning with a note saying how much
/// was cut.
pub fn whole_output(text: &str) -> String {
    if text.len() <= TOOL_OUTPUT_BYTES {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(TOOL_OUTPUT_BYTES);
    format!(
        "{}\n[… cut: the first {cut} of {} bytes are shown]",
        text.get(..cut).unwrap_or_default(),
        text.len()
    )
}

/// The first [`TOOL_EXCERPT_CHARS`] characters of `text`, marked when cut.
pub fn excerpt(text: &str) -> String {
    if text.chars().count() <= TOOL_EXCERPT_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(TOOL_EXCERPT_CHARS).collect();
    out.push('…');
    out
}

/// Where an investigation plan comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanSource {
    /// Invocation 1 stated it before its tool calls (`INVESTIGATION_PLAN:`).
    Model,
    /// The offline investigator: the steps of the playbook (or built-in rule) it followed.
    Playbook,
}

/// One step of an investigation plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step looks at, as the plan states it.
    pub step: String,
    /// Whether the investigation carried the step out (a tool call it made answers it).
    #[serde(default)]
    pub done: bool,
}

/// The investigation plan: stated first, recorded with the analysis and shown with it (the
/// CLI's text format, the API, the audit trail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvestigationPlan {
    pub source: PlanSource,
    /// The playbook or rule the steps come from (`None` for a model's own plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub steps: Vec<PlanStep>,
}

/// The result of invocation 1, kept in the request's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub rca: RcaResult,
    /// The K8s-verified root owner of the remediation target (owner chain resolved).
    #[serde(default)]
    pub root_owner: Option<Target>,
    #[serde(default)]
    pub spec_hash: Option<String>,
    #[serde(default)]
    pub detected_labels: Option<DetectedLabels>,
    #[serde(default)]
    pub history: Option<HistoryContext>,
    /// Investigation warnings (`problem self-resolved`, `inconclusive`, …).
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(default)]
    pub playbooks: Vec<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallRecord>,
    #[serde(default)]
    pub usage: Usage,
    pub investigator: String,
    /// Every model call of invocation 1 (empty for the offline investigator).
    #[serde(default)]
    pub llm_calls: Vec<LlmCallRecord>,
    /// The offline investigator's recommended action, carried to its invocation 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Proposal>,
    /// The investigation plan, when one was stated (a model's for three or more tool calls;
    /// the offline investigator's always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<InvestigationPlan>,
    /// What the target depends on and what changed before it failed, ranked (when it was
    /// looked at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbourhood: Option<Neighbourhood>,
    /// The incident's signature (docs/adr/0024-outcome-learning.md), when the target was
    /// verified: what a verified outcome is learned under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// Patterns learned from verified outcomes on the same signature: hints, strongest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learned: Vec<LearnedPattern>,
    /// What became of the MCP servers' tools (refused calls, servers that were down): each is
    /// audited on the request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_tools: Vec<RemoteToolNote>,
}

/// One thing to say about an MCP server's tools in invocation 1 (docs/mcp.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteToolNote {
    pub kind: RemoteToolNoteKind,
    /// The server (empty when the model named none).
    pub server: String,
    /// The tool name the model used, for a refused call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What happened, sanitised.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteToolNoteKind {
    /// The model asked for a tool that is not allowlisted (or of no configured server): it was
    /// not called.
    Refused,
    /// The server did not answer (listing or calling): its tools were withdrawn.
    Unavailable,
}

impl RemoteToolNoteKind {
    /// The audit event's kind.
    pub fn audit_kind(self) -> &'static str {
        match self {
            RemoteToolNoteKind::Refused => "mcp_tool_refused",
            RemoteToolNoteKind::Unavailable => "mcp_server_unavailable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectedWorkflow {
    pub workflow_id: String,
    pub action_type: ActionType,
    pub version: String,
    pub confidence: f64,
    #[serde(default)]
    pub rationale: String,
    /// Validated parameters, with `TARGET_RESOURCE_*` injected from the root owner.
    pub parameters: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlternativeWorkflow {
    pub workflow_id: String,
    #[serde(default)]
    pub rationale: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationAttempt {
    pub workflow_id: String,
    pub code: String,
    pub errors: Vec<String>,
}

/// The result of invocation 2, merged with invocation 1 and routed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    #[serde(default)]
    pub selected: Option<SelectedWorkflow>,
    #[serde(default)]
    pub alternatives: Vec<AlternativeWorkflow>,
    #[serde(default)]
    pub no_workflow_reasoning: Option<String>,
    #[serde(default)]
    pub validation_attempts: Vec<ValidationAttempt>,
    /// Invocation 2's result after `mergePhase1Fallbacks`.
    pub merged: RcaResult,
    pub outcome: RoutedOutcome,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub llm_calls: Vec<LlmCallRecord>,
    /// The learned pattern the selection proposes, when it proposes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<LearnedUse>,
    /// The workflow kubemedic had selected, when an approver chose an alternative instead
    /// (`selected` is then the alternative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// 1: a workflow on a verified target, confident enough: to the gate.
    WorkflowSelected,
    /// 2.
    ProblemResolved,
    /// 3.
    Inconclusive,
    /// 4.
    NoMatchingWorkflows,
    /// 5: no verified root owner.
    RcaIncomplete,
    /// 6.
    ValidationFailed,
    /// 7.
    LowConfidence,
    /// 8: the model asked for a human.
    HumanReviewRequested,
    /// 9.
    NotActionable,
    /// The investigation lacked data to decide (a variant of 3).
    InsufficientData,
    /// The selected action (or the claim that no action is needed) failed its proof
    /// obligations against the cluster: a human decides.
    ProofFailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutedOutcome {
    pub kind: OutcomeKind,
    pub next_phase: Phase,
    pub reason: String,
}

/// What the offline investigator recommends doing (carried from invocation 1 to 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub action_type: ActionType,
    pub parameters: Map<String, Value>,
    /// For GitOps targets: the change a human should make in Git instead.
    pub git_change: String,
    /// The workflow to propose, when one is named (a learned pattern's); otherwise the best
    /// fitting workflow of the action type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

/// One model call, for the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmCallRecord {
    pub invocation: u8,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub finish_reason: FinishReason,
    pub tool_calls: usize,
    /// How long the model took to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    /// The answer was cut off at `max_tokens`.
    Length,
    ContentFilter,
    Other,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_output_is_kept_up_to_64_kib_and_says_how_much_was_cut() {
        let short = "line\n".repeat(100);
        assert_eq!(whole_output(&short), short);
        // Multi-byte characters across the cut stay whole.
        let long = "é".repeat(TOOL_OUTPUT_BYTES);
        let kept = whole_output(&long);
        assert!(kept.len() < TOOL_OUTPUT_BYTES + 100, "{}", kept.len());
        assert!(
            kept.ends_with(&format!(
                "[… cut: the first {TOOL_OUTPUT_BYTES} of {} bytes are shown]",
                long.len()
            )),
            "{}",
            &kept[kept.len() - 80..]
        );
    }
}
