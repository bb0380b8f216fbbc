//! Investigation: invocation 1 (root cause, with read-only cluster tools) and invocation 2
//! (workflow selection, with catalog tools only), merged and routed to one of the nine
//! outcomes (DESIGN §3.3–3.5).
//!
//! Two [`Investigator`]s behind one interface: [`LlmInvestigator`] (a real model) and
//! [`offline::OfflineInvestigator`] (deterministic, no model — the embedded default). Both
//! read the cluster only through a `ClusterReader`, fill the same RCA schema, select from the
//! same catalog with the same validation, and end in the same [`route::route`]. The pipeline
//! runs them as two stages ([`InvestigationStage`], [`SelectionStage`]) so a restart resumes
//! after invocation 1 without repeating it.

pub mod command;
mod gather;
pub mod llm;
pub mod offline;
pub mod playbooks;
pub mod prompt;
pub mod repair;
pub mod route;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use llm::{LlmInvestigator, LlmInvestigatorSettings};
pub use route::{OutcomeKind, RoutedOutcome};

use crate::cluster::context::DetectedLabels;
use crate::history::HistoryContext;
use crate::llm::Usage;
use crate::pipeline::{AuditDraft, Phase, RemediationRequest, Stage, StageError, StageOutcome};
use crate::target::Target;

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
    pub severity: String,
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

/// One tool call of an investigation, for the audit trail (arguments and a size, not the
/// whole output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub tool: String,
    pub arguments: Value,
    pub ok: bool,
    pub output_chars: usize,
    #[serde(default)]
    pub truncated: bool,
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
    pub llm_calls: Vec<llm::LlmCallRecord>,
    /// The offline investigator's recommended action, carried to its invocation 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<offline::Proposal>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectedWorkflow {
    pub workflow_id: String,
    pub action_type: String,
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
    pub llm_calls: Vec<llm::LlmCallRecord>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvestigateError {
    /// The cluster or the model cannot be reached: the request waits.
    #[error("{dependency} unavailable: {message}")]
    Unavailable { dependency: String, message: String },
    /// The token budget is spent: the request goes to a human.
    #[error("llm_budget_exceeded: {0}")]
    Budget(String),
    #[error("{0}")]
    Failed(String),
}

impl From<crate::llm::LlmError> for InvestigateError {
    fn from(e: crate::llm::LlmError) -> Self {
        match e {
            crate::llm::LlmError::Unavailable(m) => InvestigateError::Unavailable {
                dependency: "llm".into(),
                message: m,
            },
            crate::llm::LlmError::BudgetExceeded(m) => InvestigateError::Budget(m),
            crate::llm::LlmError::Rejected(m) => {
                InvestigateError::Failed(format!("LLM rejected the request: {m}"))
            }
        }
    }
}

impl From<crate::cluster::ClusterError> for InvestigateError {
    fn from(e: crate::cluster::ClusterError) -> Self {
        if e.is_unreachable() {
            InvestigateError::Unavailable {
                dependency: "cluster".into(),
                message: e.message,
            }
        } else {
            InvestigateError::Failed(e.message)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error("invalid playbooks: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Playbooks(Vec<playbooks::PlaybookError>),
    #[error("{0}")]
    Llm(#[from] crate::llm::LlmError),
}

/// The catalog: the configured directory, else the one built into the binary.
pub fn load_catalog(
    dir: Option<&std::path::Path>,
) -> Result<crate::catalog::Catalog, crate::catalog::CatalogError> {
    match dir {
        Some(d) => crate::catalog::Catalog::load(d),
        None => crate::catalog::Catalog::builtin(),
    }
}

/// The configured investigator, and what `/readyz` reports of its model (none when offline).
pub struct Built {
    pub investigator: Arc<dyn Investigator>,
    pub llm: Option<Arc<crate::llm::LlmStatus>>,
}

/// Build the configured investigator (offline, or a model through OpenAiLlm).
pub fn build(
    settings: &crate::config::InvestigateSettings,
    reader: Arc<dyn crate::cluster::ClusterReader>,
    clock: Arc<dyn crate::clock::Clock>,
    tool_limits: crate::cluster::tools::ToolLimits,
    history: Arc<dyn crate::history::RemediationHistory>,
    metrics: Option<Arc<crate::telemetry::Metrics>>,
) -> Result<Built, BuildError> {
    let catalog = Arc::new(load_catalog(settings.catalog_dir.as_deref())?);
    let playbooks = Arc::new(
        match &settings.playbooks_dir {
            Some(d) => playbooks::Playbooks::load(d),
            None => playbooks::Playbooks::builtin(),
        }
        .map_err(BuildError::Playbooks)?,
    );
    Ok(match &settings.openai {
        None => Built {
            investigator: Arc::new(offline::OfflineInvestigator {
                reader,
                clock,
                tool_limits,
                catalog,
                playbooks,
                history,
            }),
            llm: None,
        },
        Some(o) => {
            let llm = Arc::new(crate::llm::ObservedLlm::new(Box::new(
                crate::llm::OpenAiLlm::new(o)?,
            )));
            let budget = Arc::new(crate::llm::TokenBudget::new(
                settings.token_budget,
                settings.daily_token_budget,
            ));
            Built {
                investigator: Arc::new(LlmInvestigator {
                    llm: llm.clone(),
                    budget: budget.clone(),
                    reader,
                    clock,
                    tool_limits,
                    catalog,
                    playbooks,
                    history,
                    settings: settings.llm.clone(),
                    metrics,
                }),
                llm: Some(Arc::new(crate::llm::LlmStatus { llm, budget })),
            }
        }
    })
}

/// The approval policy's input for a request whose workflow was selected: the request's
/// environment and business classification, the selection (workflow, action type,
/// confidence), the verified root owner, its detected labels and failed detections, and the
/// investigation's warnings (history warnings included). `None` when nothing was selected.
pub fn gate_input(
    req: &RemediationRequest,
    confidence_threshold: f64,
) -> Option<crate::gate::GateInput> {
    let selection = req.state.selection.as_ref()?;
    let selected = selection.selected.as_ref()?;
    let analysis = req.state.analysis.as_ref()?;
    let mut input = crate::gate::GateInput::from_request(req, confidence_threshold)
        .with_detected_labels(analysis.detected_labels.clone().unwrap_or_default());
    input.confidence = selected.confidence;
    input.remediation_target = analysis.root_owner.clone();
    input.action_type = Some(selected.action_type.clone());
    input.workflow_id = Some(selected.workflow_id.clone());
    input.warnings = analysis.warnings.clone();
    if let Some(h) = &analysis.history {
        input
            .warnings
            .extend(crate::history::warnings(h).into_iter().map(|w| w.kind));
    }
    Some(input)
}

#[async_trait]
pub trait Investigator: Send + Sync {
    /// `llm:<provider>` or `offline`.
    fn name(&self) -> String;
    /// Invocation 1: the root cause.
    async fn analyse(&self, request: &RemediationRequest) -> Result<Analysis, InvestigateError>;
    /// Invocation 2: the workflow, merged with invocation 1 and routed.
    async fn select(
        &self,
        request: &RemediationRequest,
        analysis: &Analysis,
    ) -> Result<Selection, InvestigateError>;
}

fn stage_error(e: InvestigateError) -> Result<StageOutcome, StageError> {
    match e {
        InvestigateError::Unavailable {
            dependency,
            message,
        } => Err(StageError::Unavailable {
            dependency,
            message,
        }),
        InvestigateError::Failed(m) => Err(StageError::Failed(m)),
        InvestigateError::Budget(m) => Err(StageError::Failed(format!("llm_budget_exceeded: {m}"))),
    }
}

fn budget_outcome(request: &RemediationRequest, message: &str) -> StageOutcome {
    StageOutcome {
        next: Phase::ManualReviewRequired,
        reason: Some(format!("llm_budget_exceeded: {message}")),
        state: request.state.clone(),
        events: vec![AuditDraft::new(
            "llm_budget",
            "investigator",
            format!("token budget exceeded: {message}"),
        )],
    }
}

/// Phase `Investigating`: invocation 1.
pub struct InvestigationStage(pub Arc<dyn Investigator>);

#[async_trait]
impl Stage for InvestigationStage {
    fn phase(&self) -> Phase {
        Phase::Investigating
    }

    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let analysis = match self.0.analyse(request).await {
            Ok(a) => a,
            Err(InvestigateError::Budget(m)) => return Ok(budget_outcome(request, &m)),
            Err(e) => return stage_error(e),
        };
        let event = AuditDraft::new(
            "rca",
            &self.0.name(),
            format!(
                "{} (outcome {}, confidence {:.2})",
                analysis.rca.root_cause_analysis.summary,
                analysis.rca.investigation_outcome.as_str(),
                analysis.rca.confidence
            ),
        )
        .with_payload(json!({
            "rca": analysis.rca,
            "root_owner": analysis.root_owner,
            "spec_hash": analysis.spec_hash,
            "detected_labels": analysis.detected_labels,
            "warnings": analysis.warnings,
            "playbooks": analysis.playbooks,
            "tool_calls": analysis.tool_calls,
            "llm_usage": analysis.usage,
            "llm_calls": analysis.llm_calls,
            "history": analysis.history,
        }));
        let mut state = request.state.clone();
        state.analysis = Some(analysis);
        Ok(StageOutcome {
            next: Phase::Selecting,
            reason: None,
            state,
            events: vec![event],
        })
    }
}

/// Phase `Selecting`: invocation 2, merge, routing.
pub struct SelectionStage(pub Arc<dyn Investigator>);

#[async_trait]
impl Stage for SelectionStage {
    fn phase(&self) -> Phase {
        Phase::Selecting
    }

    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let Some(analysis) = request.state.analysis.clone() else {
            return Err(StageError::Failed(
                "no root cause analysis to select a workflow for".into(),
            ));
        };
        let selection = match self.0.select(request, &analysis).await {
            Ok(s) => s,
            Err(InvestigateError::Budget(m)) => return Ok(budget_outcome(request, &m)),
            Err(e) => return stage_error(e),
        };
        let message = match &selection.selected {
            Some(w) => format!(
                "{} ({}) selected with confidence {:.2}: {:?}",
                w.workflow_id, w.action_type, w.confidence, selection.outcome.kind
            ),
            None => format!("no workflow: {:?}", selection.outcome.kind),
        };
        let event = AuditDraft::new("selection", &self.0.name(), message).with_payload(json!({
            "selected": selection.selected,
            "alternatives": selection.alternatives,
            "no_workflow_reasoning": selection.no_workflow_reasoning,
            "validation_attempts": selection.validation_attempts,
            "merged": selection.merged,
            "outcome": selection.outcome,
            "llm_usage": selection.usage,
            "llm_calls": selection.llm_calls,
        }));
        let next = selection.outcome.next_phase;
        let reason = (next != Phase::Gating).then(|| selection.outcome.reason.clone());
        let mut state = request.state.clone();
        state.selection = Some(selection);
        Ok(StageOutcome {
            next,
            reason,
            state,
            events: vec![event],
        })
    }
}
