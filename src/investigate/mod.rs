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

mod gather;
pub mod llm;
pub mod offline;
pub mod plan;
pub mod playbooks;
pub mod prompt;
pub mod repair;
pub mod requested;
pub mod route;
pub mod view;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

pub use llm::{LlmInvestigator, LlmInvestigatorSettings};

use crate::catalog::{Catalog, CatalogError};
use crate::clock::Clock;
use crate::cluster::ClusterReader;
use crate::cluster::tools::ToolLimits;
use crate::domain::audit;
use crate::domain::{
    ActionType, Analysis, AuditDraft, OutcomeKind, Phase, Proof, ProofPoint, ProofVerdict,
    Proposer, RcaPayload, RemediationRequest, RoutedOutcome, Selection, SelectionPayload, Stage,
    StageError, StageOutcome,
};
use crate::history::RemediationHistory;
use crate::live::Live;
use crate::llm::{
    LiveTokens, LlmError, LlmStatus, ObservedLlm, OpenAiLlm, OpenAiSettings, TokenBudget,
};
use crate::prove::{Binding, Claim, ProveError, Prover};
use crate::telemetry::Metrics;

/// The validated investigation settings.
#[derive(Debug, Clone)]
pub struct InvestigateSettings {
    /// The model; `None` runs the offline investigator.
    pub openai: Option<OpenAiSettings>,
    pub llm: LlmInvestigatorSettings,
    pub token_budget: u64,
    pub daily_token_budget: u64,
    pub catalog_dir: Option<PathBuf>,
    pub playbooks_dir: Option<PathBuf>,
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

impl From<LlmError> for InvestigateError {
    fn from(e: LlmError) -> Self {
        match e {
            LlmError::Unavailable { message, .. } => InvestigateError::Unavailable {
                dependency: "llm".into(),
                message,
            },
            LlmError::BudgetExceeded(m) => InvestigateError::Budget(m),
            LlmError::Rejected(m) => {
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
    Catalog(#[from] CatalogError),
    #[error("invalid playbooks: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Playbooks(Vec<playbooks::PlaybookError>),
    #[error("{0}")]
    Llm(#[from] LlmError),
}

/// The playbooks from `dir`, or the built-in ones.
pub fn load_playbooks(dir: Option<&std::path::Path>) -> Result<playbooks::Playbooks, BuildError> {
    match dir {
        Some(d) => playbooks::Playbooks::load(d),
        None => playbooks::Playbooks::builtin(),
    }
    .map_err(BuildError::Playbooks)
}

/// The catalog: the configured directory, else the one built into the binary.
pub fn load_catalog(dir: Option<&std::path::Path>) -> Result<Catalog, CatalogError> {
    match dir {
        Some(d) => Catalog::load(d),
        None => Catalog::builtin(),
    }
}

/// The configured investigator, and what `/readyz` reports of its model (none when offline).
pub struct Built {
    pub investigator: Arc<dyn Investigator>,
    pub llm: Option<Arc<LlmStatus>>,
    /// The catalog it selects from (the prover checks the same one).
    pub catalog: Arc<Live<Catalog>>,
}

/// Build the configured investigator (offline, or a model through OpenAiLlm).
pub fn build(
    settings: &InvestigateSettings,
    reader: Arc<dyn ClusterReader>,
    clock: Arc<dyn Clock>,
    tool_limits: ToolLimits,
    history: Arc<dyn RemediationHistory>,
    observers: Observers,
) -> Result<Built, BuildError> {
    let catalog = Live::new(load_catalog(settings.catalog_dir.as_deref())?);
    let playbooks = Live::new(load_playbooks(settings.playbooks_dir.as_deref())?);
    build_with(
        settings,
        (catalog, playbooks),
        reader,
        clock,
        tool_limits,
        history,
        observers,
    )
}

/// Who watches the model investigator (the metrics, and the chat's live words), and the other
/// teams' MCP servers it may borrow tools from.
#[derive(Default, Clone)]
pub struct Observers {
    pub metrics: Option<Arc<Metrics>>,
    pub live: Option<Arc<LiveTokens>>,
    /// The MCP servers' allowlisted tools for invocation 1 (`None`: none configured). The
    /// offline investigator ignores them.
    pub remote: Option<Arc<crate::mcp_client::RemoteTools>>,
}

/// The catalog and the playbooks in force, each replaceable while the daemon runs (custom
/// resources change them).
pub type LiveConfig = (Arc<Live<Catalog>>, Arc<Live<playbooks::Playbooks>>);

/// [`build`] on a catalog and playbooks already loaded (and shared with the other stages).
pub fn build_with(
    settings: &InvestigateSettings,
    (catalog, playbooks): LiveConfig,
    reader: Arc<dyn ClusterReader>,
    clock: Arc<dyn Clock>,
    tool_limits: ToolLimits,
    history: Arc<dyn RemediationHistory>,
    Observers {
        metrics,
        live,
        remote,
    }: Observers,
) -> Result<Built, BuildError> {
    Ok(match &settings.openai {
        None => Built {
            investigator: Arc::new(offline::OfflineInvestigator {
                reader,
                clock,
                tool_limits,
                catalog: catalog.clone(),
                playbooks,
                history,
            }),
            llm: None,
            catalog,
        },
        Some(o) => {
            let llm = Arc::new(ObservedLlm::new(Box::new(OpenAiLlm::new(o)?)));
            let budget = Arc::new(TokenBudget::new(
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
                    catalog: catalog.clone(),
                    playbooks,
                    history,
                    settings: settings.llm.clone(),
                    metrics,
                    live,
                    remote,
                }),
                llm: Some(Arc::new(LlmStatus { llm, budget })),
                catalog,
            }
        }
    })
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
            crate::domain::audit::LLM_BUDGET,
            "investigator",
            format!("token budget exceeded: {message}"),
        )],
        not_before: None,
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
        let event = AuditDraft::rca(
            &self.0.name(),
            format!(
                "{} (outcome {}, confidence {:.2})",
                analysis.rca.root_cause_analysis.summary,
                analysis.rca.investigation_outcome.as_str(),
                analysis.rca.confidence
            ),
            &RcaPayload::of(&analysis),
        );
        let mut events = vec![event];
        for note in &analysis.remote_tools {
            events.push(
                AuditDraft::new(note.kind.audit_kind(), &self.0.name(), note.message.clone())
                    .with_payload(json!({"remote_tool": note})),
            );
        }
        // The whole tool outputs live in the trail only: the request's state, read at every
        // claim, keeps the excerpts.
        let mut analysis = analysis;
        for call in &mut analysis.tool_calls {
            call.output = None;
        }
        let mut state = request.state.clone();
        state.analysis = Some(analysis);
        Ok(StageOutcome {
            next: Phase::Selecting,
            reason: None,
            state,
            events,
            not_before: None,
        })
    }
}

/// Phase `Selecting`: invocation 2, merge, routing — then the proof: the selected action's
/// obligations (or, for "the problem is resolved", the desired state) checked against the
/// cluster, with the dry run's change. A proof that does not hold ends the request in review,
/// naming what failed; it never reaches the gate.
pub struct SelectionStage {
    investigator: Arc<dyn Investigator>,
    prover: Arc<Prover>,
}

impl SelectionStage {
    pub fn new(investigator: Arc<dyn Investigator>, prover: Arc<Prover>) -> Self {
        Self {
            investigator,
            prover,
        }
    }

    fn proposer(&self, request: &RemediationRequest) -> Proposer {
        if request.signal.requested.is_some() {
            Proposer::Reviewer
        } else if self.investigator.name() == "offline" {
            Proposer::Offline
        } else {
            Proposer::Model
        }
    }

    /// Prove what the selection concluded; `Some((proof, reason))` when it does not hold.
    async fn prove(
        &self,
        request: &RemediationRequest,
        analysis: &Analysis,
        selection: &Selection,
    ) -> Result<Option<Proof>, StageError> {
        let Some(target) = analysis.root_owner.as_ref() else {
            // "Resolved" about something nobody could find is not shown resolved.
            if selection.outcome.kind == OutcomeKind::ProblemResolved {
                return Ok(Some(self.prover.unproven_resolved(
                    request.target.clone(),
                    &request.signal,
                    self.proposer(request),
                )));
            }
            return Ok(None);
        };
        let proved = match (&selection.outcome.kind, &selection.selected) {
            (OutcomeKind::WorkflowSelected, Some(w)) => {
                let claim = Claim {
                    action_type: &w.action_type,
                    workflow_id: &w.workflow_id,
                    parameters: &w.parameters,
                    target,
                    proposer: self.proposer(request),
                    signal: &request.signal,
                    bound_to: analysis.spec_hash.clone().map(|h| Binding {
                        spec_hash: h,
                        drift_hash: None,
                        when: "at investigation",
                    }),
                };
                self.prover.prove(&claim, ProofPoint::Selection).await
            }
            (OutcomeKind::ProblemResolved, _) => {
                self.prover
                    .prove_resolved(target, &request.signal, self.proposer(request))
                    .await
            }
            _ => return Ok(None),
        };
        proved.map(Some).map_err(cluster_unavailable)
    }

    /// For a refuted proposal: what the target depends on that stands out (unhealthy, or
    /// changed just before the failures), unless the refutation names it already — the person
    /// who takes over starts there. The investigation's neighbourhood when it read one, else
    /// read now.
    async fn culprit(&self, analysis: &Analysis, refutation: &str) -> Result<String, StageError> {
        let read;
        let n = match (&analysis.neighbourhood, &analysis.root_owner) {
            (Some(n), _) => Some(n),
            (None, Some(target)) => {
                read = self
                    .prover
                    .culprit(target)
                    .await
                    .map_err(cluster_unavailable)?;
                read.as_ref()
            }
            (None, None) => None,
        };
        let named = |object: &str| {
            // `ConfigMap shop/cache` is named as `ConfigMap cache` or `shop/cache` too.
            let name = object.rsplit(['/', ' ']).next().unwrap_or(object);
            refutation.contains(object) || refutation.contains(&format!(" {name} "))
        };
        Ok(match n.and_then(|n| Some((n.culprit()?, n.explain()?))) {
            Some((d, c)) if !named(&d.object) => {
                format!(" — what stands out among what it depends on: {c}")
            }
            _ => String::new(),
        })
    }
}

/// The prover could not read the cluster: the stage waits for it.
fn cluster_unavailable(e: ProveError) -> StageError {
    match e {
        ProveError::Unavailable(message) => StageError::Unavailable {
            dependency: "cluster".into(),
            message,
        },
    }
}

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
        // A reviewer's request replaces invocation 2: what they asked for is what is proposed
        // (and proven, gated and approved like anything else).
        let (mut selection, actor) = match &request.signal.requested {
            Some(asked) => (
                requested::selection(&self.prover.catalog(), request, &analysis, asked),
                asked.requested_by.clone(),
            ),
            None => match self.investigator.select(request, &analysis).await {
                Ok(s) => (s, self.investigator.name()),
                Err(InvestigateError::Budget(m)) => return Ok(budget_outcome(request, &m)),
                Err(e) => return stage_error(e),
            },
        };
        let message = match &selection.selected {
            Some(w) => format!(
                "{} ({}) selected with confidence {:.2}: {:?}",
                w.workflow_id, w.action_type, w.confidence, selection.outcome.kind
            ),
            None => format!("no workflow: {:?}", selection.outcome.kind),
        };
        let mut events = vec![AuditDraft::selection(
            &actor,
            message,
            &SelectionPayload::of(&selection),
        )];
        if let Some(l) = &selection.learned {
            events.push(
                AuditDraft::typed(
                    audit::LEARNED_HINT,
                    &self.investigator.name(),
                    format!(
                        "{} proposed from a learned pattern (a hint; still proven, gated and approved): {}",
                        l.pattern.workflow_id, l.reason
                    ),
                    &audit::LearnedHintPayload { learned: l.clone() },
                ),
            );
        }
        let proof = self.prove(request, &analysis, &selection).await?;
        if let Some(p) = &proof {
            let what = if p.action_type == ActionType::NoAction {
                "no action needed (the problem resolved)".to_owned()
            } else {
                format!("{} on {}", p.action_type, p.target)
            };
            events.push(AuditDraft::proof(
                "prover",
                format!("{what}: {}", p.verdict.as_str()),
                p,
            ));
            if p.verdict == ProofVerdict::Refuted {
                let reason = if p.action_type == ActionType::NoAction {
                    // What the alert measured, quoted (the human must look there when the
                    // cluster cannot show it).
                    let said = request
                        .signal
                        .annotations
                        .get("summary")
                        .or_else(|| request.signal.annotations.get("description"))
                        .map(|s| {
                            let s: String = crate::redact::sanitize_text(s)
                                .split_whitespace()
                                .collect::<Vec<_>>()
                                .join(" ")
                                .chars()
                                .take(160)
                                .collect();
                            format!(" — the alert says: \"{s}\"")
                        })
                        .unwrap_or_default();
                    format!(
                        "proof_failed: {} is not shown resolved — {}{said}",
                        p.target,
                        p.refutation()
                    )
                } else {
                    let refutation = p.refutation();
                    format!(
                        "proof_failed: {} ({}) on {} is not proven right and safe — {refutation}{}",
                        p.workflow_id,
                        p.action_type,
                        p.target,
                        self.culprit(&analysis, &refutation).await?
                    )
                };
                // The target changed since this request's investigation because another
                // request remediated it meanwhile (two alerts converging on one root owner):
                // that request verifies its effect, and nobody is paged for this one.
                let meanwhile = if p
                    .failed()
                    .any(|o| o.id == crate::domain::obligations::every::BINDING.id)
                {
                    self.prover
                        .stamped_by(&p.target, request.created_at)
                        .await
                        .map_err(cluster_unavailable)?
                        .filter(|by| *by != request.id.to_string())
                } else {
                    None
                };
                let (reason, next_phase) = match meanwhile {
                    Some(by) => (
                        format!(
                            "RecentlyRemediated: {} was changed by kubemedic request {by} while this request was investigating; that request verifies the effect — {reason}",
                            p.target
                        ),
                        Phase::Blocked,
                    ),
                    None => (reason, Phase::ManualReviewRequired),
                };
                selection.selected = None;
                selection.no_workflow_reasoning = Some(reason.clone());
                selection.outcome = RoutedOutcome {
                    kind: OutcomeKind::ProofFailed,
                    next_phase,
                    reason,
                };
            }
        }
        let next = selection.outcome.next_phase;
        let reason = (next != Phase::Gating).then(|| selection.outcome.reason.clone());
        let mut state = request.state.clone();
        state.selection = Some(selection);
        state.proof = proof;
        Ok(StageOutcome {
            next,
            reason,
            state,
            events,
            not_before: None,
        })
    }
}
