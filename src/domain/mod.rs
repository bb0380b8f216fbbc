//! The values that flow through the pipeline, at the bottom of the crate.
//!
//! Everything a stage hands to the next one is a type from here: the signal ingest normalised,
//! the durable [`RemediationRequest`] with its [`Phase`] and the typed results its stages
//! leave in [`StageState`] (enrichment, analysis, selection, gate decision), the audit events,
//! the [`Stage`] trait the pipeline drives, and the history the investigation reads. The
//! request record therefore never depends on the stage that fills it, and stages meet here
//! instead of importing each other.
//!
//! Invariant: this module imports nothing of the crate (`tests/layers.rs` checks it). Serde
//! names here are stored formats and model contracts; renaming one is a migration.

mod access;
mod action;
mod approval;
pub mod audit;
mod chat;
mod enrichment;
mod execution;
mod gate;
mod history;
mod investigation;
mod labels;
mod learning;
mod neighbourhood;
pub mod obligations;
pub mod params;
mod phase;
mod proof;
mod request;
mod severity;
mod signal;
mod stage;
mod step;
mod target;
mod trace;
mod undo;

pub use access::{ApiKey, Role, Session};
pub use action::ActionType;
pub use approval::{
    ApprovalDecision, ApprovalMessage, ApprovalRequest, ApprovalStatus, Channel,
    DEFAULT_APPROVAL_TIMEOUT_SECONDS, DecideOutcome, Decision, DeliveryStatus, Notification,
    NotificationKind,
};
pub use audit::{
    AuditDraft, AuditEvent, AuditPayload, ExecutionPayload, GatePayload, GuardrailPayload,
    RcaPayload, SelectionPayload, StepPayload, TransitionPayload, transition_event,
};
pub use chat::{
    ASKED_BY_ANNOTATION, CLUSTER_CONTEXT_WRITER, ChatLine, ChatTurn, Conversation,
    MAX_MEMORY_CHARS, MemoryNote, NewTurn, PINNED_CLUSTER, TurnKind,
};
pub use enrichment::{Enrichment, PinnedNote};
pub use execution::{
    Assessment, AssessmentReason, DEFAULT_EFFECTIVENESS_THRESHOLD, EngineKind, Execution,
    ExecutionOutcome, ExecutionStep, OPT_OUT_ANNOTATION, PrepareDetail, REMEDIATION_ANNOTATION,
    StepFailure, StepStatus,
};
pub use gate::{GateDecision, RiskFactor};
pub use history::{
    HashMatch, HistoryContext, HistoryEntry, HistoryOutcome, HistoryRecord, HistoryWarning, Tier,
};
pub use investigation::{
    AlternativeWorkflow, Analysis, FinishReason, InvestigationOutcome, InvestigationPlan,
    LlmCallRecord, OutcomeKind, PlanSource, PlanStep, Proposal, RcaResult, RemoteToolNote,
    RemoteToolNoteKind, RootCauseAnalysis, RoutedOutcome, SelectedWorkflow, Selection,
    TOOL_EXCERPT_CHARS, TOOL_OUTPUT_BYTES, TOOL_OUTPUTS_BYTES, TargetRef, ToolCallRecord, Usage,
    ValidationAttempt, excerpt, whole_output,
};
pub use labels::{DetectedLabels, QuotaUsage};
pub use learning::{LearnedPattern, LearnedUse, PatternOutcome, Signature, SignatureFacts};
pub use neighbourhood::{
    Causes, Change, DepKind, Dependency, Neighbourhood, OnNode, RECENT_CHANGE_HOURS, just_before,
};
pub use params::{ActionParams, LimitResource};
pub use phase::{Phase, stage_name};
pub use proof::{
    DryRunChange, ObjectChange, Obligation, ObligationStatus, Proof, ProofPoint, ProofVerdict,
    Proposer,
};
pub use request::{RemediationRequest, StageState, Waiting};
pub use severity::Severity;
pub use signal::{
    NewSignal, RequestedWorkflow, SignalContext, SignalMode, SignalSource, SignalStatus,
};
pub use stage::{Stage, StageError, StageOutcome};
pub use step::{BuiltinAction, JOB_STEP, StepAction, StepDone};
pub use target::{
    CLUSTER_SCOPED_KINDS, Target, fingerprint_of, is_cluster_scoped, targets_from_labels,
};
pub use trace::TraceContext;
pub use undo::{PodFailure, Restore, TargetHealth, UNDO_STEP, Undo};
